"""The derivative of core's fused attention (fiamma.fused_attention): gradcheck and
gradgradcheck (the fused backward, and the composition under create_graph), equality with nn's
composed attention (dropout included: the same draws), and nn's use of the fused op."""

import numpy as np
import pytest

import fiamma
from fiamma.autograd import gradcheck, gradgradcheck


def _inputs(qs, ks, vs, seed=0):
    g = fiamma.Generator().manual_seed(seed)
    return [fiamma.randn(*s, dtype=fiamma.float64, generator=g).requires_grad_()
            for s in (qs, ks, vs)]


def _mask(kind):
    rng = np.random.default_rng(4)
    if kind == "bool":
        keep = rng.random((5, 7)) > 0.4
        keep[1] = False  # a fully masked row: zero output and zero gradients
        return fiamma.tensor(keep)
    if kind == "add":
        m = rng.standard_normal((3, 1, 7))
        m[0, 0, :3] = -np.inf
        return fiamma.tensor(m)
    return None


CASES = [  # q, k, v shapes, kwargs, mask kind
    ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 3), {}, None),
    ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 3), {"is_causal": True}, None),
    ((2, 3, 7, 4), (2, 3, 5, 4), (2, 3, 5, 3), {"is_causal": True, "scale": 0.4}, None),
    ((2, 4, 5, 4), (2, 2, 7, 4), (2, 2, 7, 3), {"enable_gqa": True}, None),
    ((3, 5, 4), (3, 7, 4), (3, 7, 3), {}, "bool"),
    ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 3), {}, "add"),
    ((5, 4), (7, 4), (7, 3), {"dropout_p": 0.3}, None),
]


@pytest.mark.parametrize("qs,ks,vs,kw,mk", CASES)
def test_gradcheck_and_gradgradcheck(qs, ks, vs, kw, mk):
    q, k, v = _inputs(qs, ks, vs)
    m = _mask(mk)

    def f(q, k, v):
        fiamma.manual_seed(7)  # dropout: the same draws at every evaluation
        return fiamma.fused_attention(q, k, v, attn_mask=m, **kw)

    assert gradcheck(f, (q, k, v))
    assert gradgradcheck(f, (q, k, v))


@pytest.mark.parametrize("qs,ks,vs,kw,mk", CASES)
def test_same_gradients_as_the_composition(qs, ks, vs, kw, mk):
    F = pytest.importorskip("fiamma.nn.functional")  # autograd's wheel tests run without nn
    import fiamma.nn._attention_functional as AF
    q, k, v = _inputs(qs, ks, vs, seed=2)
    m = _mask(mk)
    fiamma.manual_seed(3)
    fused = fiamma.fused_attention(q, k, v, attn_mask=m, **kw)
    assert fused.grad_fn.name() == "FusedAttentionBackward0"
    g = fiamma.randn(*fused.shape, dtype=fiamma.float64)
    want = fiamma.autograd.grad(fused, (q, k, v), g)
    saved, AF._fusable = AF._fusable, lambda *a: False
    try:
        fiamma.manual_seed(3)
        comp = F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)
    finally:
        AF._fusable = saved
    assert comp.grad_fn.name() != "FusedAttentionBackward0"
    np.testing.assert_allclose(fused.detach().numpy(), comp.detach().numpy(), atol=1e-12)
    for a, b in zip(want, fiamma.autograd.grad(comp, (q, k, v), g)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-12)


def test_only_the_needed_gradients():
    q, k, v = _inputs((2, 5, 4), (2, 7, 4), (2, 7, 3))
    k.requires_grad_(False)
    y = fiamma.fused_attention(q, k, v)
    gq, gv = fiamma.autograd.grad(y.sum(), (q, v))
    assert gq.shape == q.shape and gv.shape == v.shape and k.grad is None


def test_half_precision_gradients():
    q, k, v = (t.detach().to(fiamma.bfloat16).requires_grad_() for t in _inputs(
        (2, 5, 8), (2, 6, 8), (2, 6, 8)))
    fiamma.fused_attention(q, k, v, is_causal=True).sum().backward()
    ref = [t.detach().float().requires_grad_() for t in (q, k, v)]
    fiamma.fused_attention(*ref, is_causal=True).sum().backward()
    for a, b in zip((q, k, v), ref):
        assert a.grad.dtype is fiamma.bfloat16
        np.testing.assert_allclose(a.grad.float().numpy(), b.grad.numpy(), atol=0.05)


def test_nn_sdpa_uses_the_fused_op():
    F = pytest.importorskip("fiamma.nn.functional")
    q = fiamma.randn(2, 3, 5, 4, requires_grad=True)
    assert F.scaled_dot_product_attention(q, q, q).grad_fn.name() == "FusedAttentionBackward0"
    keep = fiamma.ones(5, 5, dtype=fiamma.bool)
    y = F.scaled_dot_product_attention(q, q, q, attn_mask=keep)
    assert y.grad_fn.name() == "FusedAttentionBackward0"
    # broadcast batch dims and a mask that requires grad: the composition
    y = F.scaled_dot_product_attention(q, fiamma.randn(1, 3, 5, 4), fiamma.randn(1, 3, 5, 4))
    assert y.grad_fn.name() != "FusedAttentionBackward0"
    mask = fiamma.zeros(5, 5, requires_grad=True)
    y = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    assert y.grad_fn.name() != "FusedAttentionBackward0"
    y.sum().backward()
    assert mask.grad is not None
