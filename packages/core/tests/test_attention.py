"""Fused attention (fiamma.fused_attention / fused_attention_backward; csrc/attn.c and the
array-module backend's attn) against a float64 NumPy reference: values and gradients, causal
(top-left, L != S), bool and additive masks with broadcasting, fully masked rows, grouped-query
heads, strided inputs, dropout statistics, block sizes, errors, the other devices; parity with
torch at the end."""

import math

import numpy as np
import pytest
from conftest import assert_same

import fiamma
from fiamma._lib import lib


def _ref(q, k, v, mask=None, causal=False, scale=None, drop=None):
    """(out, lse, grad(g) -> (gq, gk, gv)) in float64; q (..., H, L, E), k/v (..., Hk, S, .)."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    H, Hk = (q.shape[-3], k.shape[-3]) if q.ndim >= 3 else (1, 1)
    rep = H // Hk if Hk else 1
    kr = np.repeat(k, rep, axis=-3) if rep > 1 else k
    vr = np.repeat(v, rep, axis=-3) if rep > 1 else v
    sc = (1 / math.sqrt(q.shape[-1]) if q.shape[-1] else 1.0) if scale is None else scale
    s = q @ np.swapaxes(kr, -1, -2) * sc
    L, S = s.shape[-2:]
    if causal:
        s = np.where(np.arange(S)[None, :] <= np.arange(L)[:, None], s, -np.inf)
    if mask is not None:
        m = np.asarray(mask)
        s = np.where(m, s, -np.inf) if m.dtype == bool else s + m
    mx = s.max(-1, keepdims=True) if S else np.full(s.shape[:-1] + (1,), -np.inf)
    dead = mx == -np.inf
    e = np.exp(s - np.where(dead, 0, mx))
    z = e.sum(-1, keepdims=True)
    p = np.where(dead, 0, e / np.where(dead, 1, z))
    lse = np.where(dead, -np.inf, np.where(dead, 0, mx) + np.log(np.where(dead, 1, z)))[..., 0]
    d = np.ones_like(p) if drop is None else np.asarray(drop, np.float64).reshape(p.shape)
    out = (p * d) @ vr

    def grad(g):
        g = np.asarray(g, np.float64)
        gv = np.swapaxes(p * d, -1, -2) @ g
        dp = g @ np.swapaxes(vr, -1, -2) * d
        ds = p * (dp - (p * dp).sum(-1, keepdims=True))
        gq = ds @ kr * sc
        gk = np.swapaxes(ds, -1, -2) @ q * sc
        if rep > 1:
            gk = gk.reshape(k.shape[:-2] + (rep,) + k.shape[-2:]).sum(-3)
            gv = gv.reshape(v.shape[:-2] + (rep,) + v.shape[-2:]).sum(-3)
        return gq, gk, gv

    return out, lse, grad


def _lse4(lse, q):
    """The reference lse in the kernel's (B, H, L) layout."""
    H = q.shape[-3] if q.ndim >= 3 else 1
    return lse.reshape(math.prod(q.shape[:-3]), H, q.shape[-2])


CASES = [  # q, k, v shapes, kwargs
    ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6), {}),
    ((5, 4), (7, 4), (7, 3), {}),
    ((3, 5, 4), (3, 7, 4), (3, 7, 4), {"scale": 0.3}),
    ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 4), {"is_causal": True}),
    ((2, 3, 7, 4), (2, 3, 5, 4), (2, 3, 5, 4), {"is_causal": True}),   # L > S
    ((1, 2, 70, 8), (1, 2, 70, 8), (1, 2, 70, 8), {"is_causal": True}),  # several row blocks
    ((2, 1, 2, 130, 8), (2, 1, 2, 67, 8), (2, 1, 2, 67, 5), {}),       # 5-d, blocks, S odd
    ((2, 4, 5, 4), (2, 2, 7, 4), (2, 2, 7, 4), {"enable_gqa": True}),
    ((2, 4, 5, 4), (2, 1, 7, 4), (2, 1, 7, 4), {"enable_gqa": True, "is_causal": True}),
    ((2, 3, 1, 4), (2, 3, 7, 4), (2, 3, 7, 4), {}),                   # one query row
    ((2, 3, 5, 0), (2, 3, 7, 0), (2, 3, 7, 4), {}),                   # no embedding
    ((2, 3, 5, 4), (2, 3, 0, 4), (2, 3, 0, 4), {}),                   # no keys
    ((2, 0, 5, 4), (2, 0, 7, 4), (2, 0, 7, 4), {}),                   # no heads
    ((2, 3, 0, 4), (2, 3, 7, 4), (2, 3, 7, 4), {}),                   # no queries
]


def _data(qs, ks, vs, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in (qs, ks, vs)]


@pytest.mark.parametrize("qs,ks,vs,kw", CASES)
@pytest.mark.parametrize("dt", [fiamma.float32, fiamma.float64])
def test_against_reference(qs, ks, vs, kw, dt):
    q, k, v = _data(qs, ks, vs)
    out, lse, grad = _ref(q, k, v, causal=kw.get("is_causal", False), scale=kw.get("scale"))
    t = [fiamma.tensor(a, dtype=dt) for a in (q, k, v)]
    got = fiamma.fused_attention(*t, **kw)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dt is fiamma.float32 else {"rtol": 1e-11,
                                                                       "atol": 1e-12}
    assert got.dtype is dt and tuple(got.shape) == out.shape
    np.testing.assert_allclose(got.numpy(), out, **tol)
    g = np.random.default_rng(1).standard_normal(out.shape)
    grads = fiamma.fused_attention_backward(fiamma.tensor(g, dtype=dt), *t,
                                            fiamma.tensor(_lse4(lse, q), dtype=dt), **kw)
    for a, b in zip(grads, grad(g)):
        assert tuple(a.shape) == b.shape
        np.testing.assert_allclose(a.numpy(), b, **tol)


def _masks(L, S, rng):
    keep = rng.random((L, S)) > 0.4
    keep[1] = False  # one fully masked row: zeros, as PyTorch's safe softmax
    add = rng.standard_normal((3, 1, S))
    add[0, 0, :] = -np.inf  # fully masked rows of the additive mask too
    add[1, 0, 2] = -np.inf
    return [keep, rng.random((2, 1, 1, S)) > 0.3, rng.random((3, L, 1)) > 0.5, add,
            rng.standard_normal((L, S))]


@pytest.mark.parametrize("which", range(5))
@pytest.mark.parametrize("dt", [fiamma.float32, fiamma.float64])
def test_masks(which, dt):
    rng = np.random.default_rng(which)
    q, k, v = _data((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6), seed=which)
    m = _masks(5, 7, rng)[which]
    out, lse, grad = _ref(q, k, v, mask=m)
    t = [fiamma.tensor(a, dtype=dt) for a in (q, k, v)]
    fm = fiamma.tensor(m) if m.dtype == bool else fiamma.tensor(m, dtype=dt)
    got = fiamma.fused_attention(*t, attn_mask=fm)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dt is fiamma.float32 else {"rtol": 1e-11,
                                                                       "atol": 1e-12}
    np.testing.assert_allclose(got.numpy(), out, **tol)
    g = rng.standard_normal(out.shape)
    grads = fiamma.fused_attention_backward(fiamma.tensor(g, dtype=dt), *t,
                                            fiamma.tensor(_lse4(lse, q), dtype=dt), fm)
    for a, b in zip(grads, grad(g)):
        assert np.isfinite(a.numpy()).all()
        np.testing.assert_allclose(a.numpy(), b, **tol)


def test_strided_inputs_and_output_layout():
    """q/k/v as the transposed head views of one projection (a transformer's layout); a 4-d
    result is laid out (B, L, H, E) in memory."""
    B, T, H, D = 2, 9, 3, 4
    x = fiamma.randn(B, T, 3 * H * D, dtype=fiamma.float64)
    q, k, v = (u.view(B, T, H, D).transpose(1, 2) for u in x.split(H * D, dim=2))
    out, _, _ = _ref(q.numpy(), k.numpy(), v.numpy(), causal=True)
    got = fiamma.fused_attention(q, k, v, is_causal=True)
    np.testing.assert_allclose(got.numpy(), out, rtol=1e-12, atol=1e-12)
    assert got.transpose(1, 2).is_contiguous()
    # a reversed (negative-stride) and a column-strided input are copied, not misread
    qf = fiamma.tensor(q.numpy()).flip(2)
    kc = fiamma.tensor(np.repeat(k.numpy(), 2, axis=-1))[..., ::2]
    out, _, _ = _ref(qf.numpy(), kc.numpy(), v.numpy())
    np.testing.assert_allclose(fiamma.fused_attention(qf, kc, v).numpy(), out, rtol=1e-12)


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_output_follows_query_layout(dt):
    """PyTorch's fused CPU kernel lays the result out as the query: a transposed (B, L, H, E)
    query gives a result whose transpose(1, 2) is contiguous (``y.transpose(1, 2).view(B, L,
    H * E)`` works, as in the SDPA tutorial, also for float16, which computes in float32); a
    contiguous query a contiguous result (``y.view(B * H, L, E)`` works)."""
    dt = getattr(fiamma, dt)
    B, T, H, D = 2, 5, 4, 4
    x = fiamma.randn(B, T, 3 * H * D).to(dt)
    q, k, v = (u.view(B, T, H, D).transpose(1, 2) for u in x.chunk(3, -1))
    y = fiamma.fused_attention(q, k, v)
    assert y.dtype is dt and y.transpose(1, 2).is_contiguous() and not y.is_contiguous()
    assert tuple(y.transpose(1, 2).view(B, T, H * D).shape) == (B, T, H * D)
    yc = fiamma.fused_attention(q.contiguous(), k, v)
    assert yc.is_contiguous() and tuple(yc.view(B * H, T, D).shape) == (B * H, T, D)
    assert_same(yc, y)
    # another order: (H, B, L, E) in memory
    qo = fiamma.randn(H, B, T, D).to(dt).permute(1, 0, 2, 3)
    yo = fiamma.fused_attention(qo, qo, qo)
    assert yo.stride() == qo.stride()
    assert_same(yo, fiamma.fused_attention(*(qo.contiguous(),) * 3))


@pytest.mark.parametrize("rows", [1, 3, 16, 200])
def test_block_sizes(rows):
    q, k, v = _data((2, 2, 37, 8), (2, 2, 41, 8), (2, 2, 41, 8))
    prev = lib.fm_attn_set_block(rows)
    try:
        for causal in (False, True):
            out, lse, grad = _ref(q, k, v, causal=causal)
            t = [fiamma.tensor(a) for a in (q, k, v)]
            np.testing.assert_allclose(fiamma.fused_attention(*t, is_causal=causal).numpy(),
                                       out, rtol=1e-12, atol=1e-12)
            g = np.ones(out.shape)
            gr = fiamma.fused_attention_backward(fiamma.tensor(g), *t,
                                                 fiamma.tensor(_lse4(lse, q)), is_causal=causal)
            for a, b in zip(gr, grad(g)):
                np.testing.assert_allclose(a.numpy(), b, rtol=1e-10, atol=1e-12)
    finally:
        lib.fm_attn_set_block(prev)


def test_half_precision_computes_in_float32():
    q, k, v = _data((2, 3, 5, 8), (2, 3, 6, 8), (2, 3, 6, 8))
    out, _, _ = _ref(q, k, v, causal=True)
    for dt in (fiamma.bfloat16, fiamma.float16):
        t = [fiamma.tensor(a, dtype=dt) for a in (q, k, v)]
        got = fiamma.fused_attention(*t, is_causal=True)
        assert got.dtype is dt
        want = fiamma.fused_attention(*[a.float() for a in t], is_causal=True).to(dt)
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
        np.testing.assert_allclose(got.float().numpy(), out, atol=0.05)


def test_dropout_statistics_and_replay():
    """Each weight survives with probability 1 - p and is scaled by 1 / (1 - p): with v the
    identity the output is the dropped weights themselves; the same seed replays the draws."""
    p, L = 0.3, 64
    q = fiamma.zeros(4, 2, L, 8, dtype=fiamma.float64)  # uniform weights 1 / L
    v = fiamma.eye(L, dtype=fiamma.float64).expand(4, 2, L, L)
    fiamma.manual_seed(11)
    w = fiamma.fused_attention(q, q, v, dropout_p=p).numpy() * L
    kept = w != 0
    assert abs(kept.mean() - (1 - p)) < 0.01
    np.testing.assert_allclose(w[kept], 1 / (1 - p), rtol=1e-12)
    fiamma.manual_seed(11)
    np.testing.assert_array_equal(fiamma.fused_attention(q, q, v, dropout_p=p).numpy() * L, w)
    assert not fiamma.fused_attention(q, q, v, dropout_p=1.0).numpy().any()
    # the backward applies the same multipliers: gradient w.r.t. v = (P D)^T g
    drop = fiamma.tensor(np.where(kept, 1 / (1 - p), 0.0).reshape(4, 2, L, L))
    lse = fiamma.full((4, 2, L), math.log(L), dtype=fiamma.float64)
    g = fiamma.ones(4, 2, L, L, dtype=fiamma.float64)
    _, _, gv = fiamma.fused_attention_backward(g, q, q, v, lse, dropout_mask=drop,
                                               output_mask=(False, False, True))
    np.testing.assert_allclose(gv.numpy(), np.swapaxes(drop.numpy() / L, -1, -2) @ g.numpy(),
                               rtol=1e-12)


def test_errors():
    q = fiamma.randn(2, 3, 5, 4)
    with pytest.raises(RuntimeError, match="same batch dims"):
        fiamma.fused_attention(q, fiamma.randn(1, 3, 5, 4), q)
    with pytest.raises(RuntimeError, match="enable_gqa"):
        fiamma.fused_attention(q, fiamma.randn(2, 1, 5, 4), fiamma.randn(2, 1, 5, 4))
    with pytest.raises(RuntimeError, match="divide"):
        fiamma.fused_attention(q, fiamma.randn(2, 2, 5, 4), fiamma.randn(2, 2, 5, 4),
                               enable_gqa=True)
    with pytest.raises(RuntimeError, match="one floating dtype"):
        fiamma.fused_attention(q, q.double(), q)
    with pytest.raises(RuntimeError, match="one floating dtype"):
        fiamma.fused_attention(*(fiamma.ones(2, 2, dtype=fiamma.int64),) * 3)
    with pytest.raises(RuntimeError, match="is_causal"):
        fiamma.fused_attention(q, q, q, attn_mask=fiamma.ones(5, 5, dtype=fiamma.bool),
                               is_causal=True)
    with pytest.raises(RuntimeError, match="attn_mask dtype"):
        fiamma.fused_attention(q, q, q, attn_mask=fiamma.ones(5, 5, dtype=fiamma.float64))
    with pytest.raises(RuntimeError, match="does not broadcast"):
        fiamma.fused_attention(q, q, q, attn_mask=fiamma.ones(4, 5, dtype=fiamma.bool))
    with pytest.raises(RuntimeError, match="at least 2 dims"):
        fiamma.fused_attention(fiamma.ones(3), q, q)
    with pytest.raises(ValueError, match="dropout_p"):
        fiamma.fused_attention(q, q, q, dropout_p=1.5)
    with pytest.raises(RuntimeError, match="grad_output of shape"):
        fiamma.fused_attention_backward(fiamma.ones(2, 3, 5, 3), q, q, q, fiamma.zeros(2, 3, 5))
    with pytest.raises(RuntimeError, match="logsumexp of shape"):
        fiamma.fused_attention_backward(q, q, q, q, fiamma.zeros(2, 5))


def test_mask_requiring_grad_is_refused():
    pytest.importorskip("fiamma.autograd")  # core's wheel tests run without it
    q = fiamma.randn(2, 5, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="derivative for 'attn_mask'"):
        fiamma.fused_attention(q, q, q, attn_mask=fiamma.zeros(5, 5, requires_grad=True))


@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"mask": "bool"}, {"mask": "add"},
                                {"enable_gqa": True}])
def test_on_device(device, kw):
    q, k, v = _data((2, 4, 6, 4), (2, 2 if kw.get("enable_gqa") else 4, 7, 4),
                    (2, 2 if kw.get("enable_gqa") else 4, 7, 5))
    rng = np.random.default_rng(5)
    for dt in (fiamma.float32, fiamma.float64):
        c = [fiamma.tensor(a, dtype=dt) for a in (q, k, v)]
        kwc = {key: val for key, val in kw.items() if key != "mask"}
        if kw.get("mask") == "bool":
            keep = rng.random((6, 7)) > 0.5
            keep[2] = False
            kwc["attn_mask"] = fiamma.tensor(keep)
        elif kw.get("mask") == "add":
            kwc["attn_mask"] = fiamma.tensor(rng.standard_normal((4, 1, 7)), dtype=dt)
        kwd = {key: val.to(device) if isinstance(val, fiamma.Tensor) else val
               for key, val in kwc.items()}
        d = [a.to(device) for a in c]
        want = fiamma.fused_attention(*c, **kwc)
        assert_same(fiamma.fused_attention(*d, **kwd), want.contiguous())
        g = fiamma.ones(tuple(want.shape), dtype=dt) * 0.5
        m = kwc.get("attn_mask")
        _, lse, _ = _ref(q, k, v, mask=None if m is None else m.numpy(),
                         causal=kw.get("is_causal", False))
        lse = fiamma.tensor(_lse4(lse, q), dtype=dt)
        mc = {key: val for key, val in kwc.items()}
        mc.pop("attn_mask", None)
        for a, b in zip(fiamma.fused_attention_backward(g.to(device), *d, lse.to(device),
                                                        kwd.get("attn_mask"), **mc),
                        fiamma.fused_attention_backward(g, *c, lse, kwc.get("attn_mask"), **mc)):
            assert_same(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parity
@pytest.mark.parametrize("qs,ks,vs,kw", CASES[:10])
def test_parity_with_torch(qs, ks, vs, kw):
    torch = pytest.importorskip("torch")
    q, k, v = _data(qs, ks, vs, seed=3)
    tt = [torch.tensor(a, dtype=torch.float32, requires_grad=True) for a in (q, k, v)]
    ft = [fiamma.tensor(a, dtype=fiamma.float32) for a in (q, k, v)]
    want = torch.nn.functional.scaled_dot_product_attention(*tt, **kw)
    got = fiamma.fused_attention(*ft, **kw)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    want.sum().backward()
    _, lse, _ = _ref(q, k, v, causal=kw.get("is_causal", False), scale=kw.get("scale"))
    grads = fiamma.fused_attention_backward(fiamma.ones(tuple(got.shape)), *ft,
                                            fiamma.tensor(_lse4(lse, q), dtype=fiamma.float32),
                                            **kw)
    for a, b in zip(grads, tt):
        np.testing.assert_allclose(a.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parity
@pytest.mark.parametrize("order", [(0, 1, 2, 3), (0, 2, 1, 3), (1, 0, 2, 3), (2, 1, 0, 3)])
def test_parity_output_strides(order):
    """The result's strides are PyTorch's for queries laid out in any order of (B, H, L)."""
    torch = pytest.importorskip("torch")
    shape = (2, 3, 5, 4)
    base = np.random.default_rng(4).standard_normal([shape[d] for d in order]).astype(np.float32)
    inv = list(np.argsort(order))
    tq = torch.tensor(base).permute(*inv)
    fq = fiamma.tensor(base).permute(*inv)
    assert tuple(fq.shape) == shape and fq.stride() == tq.stride()
    want = torch.nn.functional.scaled_dot_product_attention(tq, tq, tq)
    got = fiamma.fused_attention(fq, fq, fq)
    assert got.stride() == want.stride()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parity
@pytest.mark.parametrize("shape", [(1, 3, 5, 4), (2, 1, 5, 4), (2, 3, 1, 4), (1, 1, 5, 4)])
@pytest.mark.parametrize("order", [(0, 1, 2, 3), (0, 2, 1, 3), (1, 0, 2, 3), (2, 1, 0, 3)])
def test_parity_output_layout_with_size_one_dims(shape, order):
    """With a size-1 batch, head or query dim the result is laid out as PyTorch's too: e.g. a
    single sequence's (1, L, H, E) projection transposed gives a result whose transpose(1, 2)
    is contiguous (the nested SDPA tutorial's model run on one sequence views it)."""
    torch = pytest.importorskip("torch")
    base = np.random.default_rng(5).standard_normal([shape[d] for d in order]).astype(np.float32)
    inv = list(np.argsort(order))
    tq = torch.tensor(base).permute(*inv)
    fq = fiamma.tensor(base).permute(*inv)
    want = torch.nn.functional.scaled_dot_product_attention(tq, tq, tq)
    got = fiamma.fused_attention(fq, fq, fq)
    assert got.is_contiguous() == want.is_contiguous()
    assert got.transpose(1, 2).is_contiguous() == want.transpose(1, 2).is_contiguous()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_threads_give_the_same_result():
    """(batch, head) pairs split over 2 threads (the work is above the threading threshold):
    every pair is computed the same way, so results are bitwise equal."""
    q, k, v = _data((4, 4, 70, 32), (4, 2, 90, 32), (4, 2, 90, 32))
    t = [fiamma.tensor(a, dtype=fiamma.float32) for a in (q, k, v)]
    lse = fiamma.tensor(_lse4(_ref(q, k, v)[1], q), dtype=fiamma.float32)
    g = fiamma.ones(4, 4, 70, 32)
    prev = fiamma.get_num_threads()
    res = []
    try:
        for n in (1, 2):
            fiamma.set_num_threads(n)
            res.append([fiamma.fused_attention(*t, enable_gqa=True).numpy()] + [
                a.numpy() for a in fiamma.fused_attention_backward(g, *t, lse, enable_gqa=True)])
    finally:
        fiamma.set_num_threads(prev)
    for a, b in zip(*res):
        np.testing.assert_array_equal(a, b)
