"""fiamma.nn.attention.bias: the causal biases' masks, attention with them against explicit
masks, the errors, and (parity) PyTorch's outputs for the same inputs."""

import copy
import pickle
import warnings

import numpy as np
import pytest

import fiamma
from fiamma.nn import functional as F
from fiamma.nn.attention.bias import (
    CausalBias,
    CausalVariant,
    causal_lower_right,
    causal_upper_left,
)


def _rand(*shape, seed=0):
    return fiamma.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("L,S", [(2, 5), (4, 4), (3, 1)])
def test_masks(L, S):
    up = causal_upper_left(L, S)._materialize()
    assert up.dtype is fiamma.bool and tuple(up.shape) == (L, S)
    np.testing.assert_array_equal(up.numpy(), np.tril(np.ones((L, S), bool)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lr = causal_lower_right(L, S)._materialize()
    np.testing.assert_array_equal(lr.numpy(), np.tril(np.ones((L, S), bool), S - L))


def test_is_a_tensor_and_prints_its_mask():
    b = causal_upper_left(2, 3)
    assert isinstance(b, fiamma.Tensor) and type(b) is CausalBias
    assert b.variant is CausalVariant.UPPER_LEFT and (b.seq_len_q, b.seq_len_kv) == (2, 3)
    text = ("tensor([[ True, False, False],\n"
            "        [ True,  True, False]])")
    assert repr(b) == text and str(b) == text
    assert int(CausalVariant.UPPER_LEFT) == 1 and int(CausalVariant.LOWER_RIGHT) == 2


def test_upper_left_is_is_causal():
    q, k, v = _rand(2, 3, 4, 8, seed=1), _rand(2, 3, 6, 8, seed=2), _rand(2, 3, 6, 8, seed=3)
    out = F.scaled_dot_product_attention(q, k, v, causal_upper_left(4, 6))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    np.testing.assert_array_equal(out.numpy(), ref.numpy())


def test_lower_right_is_its_mask():
    q, k, v = _rand(2, 3, 4, 8, seed=1), _rand(2, 3, 6, 8, seed=2), _rand(2, 3, 6, 8, seed=3)
    b = causal_lower_right(4, 6)
    out = F.scaled_dot_product_attention(q, k, v, b)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=b._materialize())
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)
    # differs from the top-left triangle when the lengths differ
    ul = F.scaled_dot_product_attention(q, k, v, causal_upper_left(4, 6))
    assert not np.allclose(out.numpy(), ul.numpy())
    # the same when they do not
    q2 = _rand(2, 3, 6, 8, seed=4)
    np.testing.assert_array_equal(
        F.scaled_dot_product_attention(q2, k, v, causal_lower_right(6, 6)).numpy(),
        F.scaled_dot_product_attention(q2, k, v, is_causal=True).numpy())


def test_gradients_flow():
    q = _rand(1, 2, 3, 4, seed=5).requires_grad_()
    k = _rand(1, 2, 5, 4, seed=6).requires_grad_()
    v = _rand(1, 2, 5, 4, seed=7).requires_grad_()
    F.scaled_dot_product_attention(q, k, v, causal_lower_right(3, 5)).sum().backward()
    assert q.grad is not None and k.grad is not None and v.grad is not None
    assert float(v.grad.abs().sum()) > 0


def test_errors():
    q, k = _rand(1, 3, 4), _rand(1, 5, 4)
    with pytest.raises(ValueError, match="causal=True"):
        F.scaled_dot_product_attention(q, k, k, causal_upper_left(3, 5), is_causal=True)
    with pytest.raises(RuntimeError, match="query length 2 and key length 5"):
        F.scaled_dot_product_attention(q, k, k, causal_lower_right(2, 5))
    with pytest.raises(TypeError, match="CausalVariant"):
        CausalBias(1, 3, 5)
    with pytest.raises(ValueError, match="2 sizes"):
        causal_upper_left(3)
    with pytest.warns(UserWarning, match="NaNs"):
        causal_lower_right(5, 3)


def test_copy_and_pickle():
    b = causal_lower_right(2, 4)
    for c in (copy.deepcopy(b), pickle.loads(pickle.dumps(b))):
        assert type(c) is CausalBias and c.variant is b.variant
        assert (c.seq_len_q, c.seq_len_kv) == (2, 4)


@pytest.mark.parity
@pytest.mark.parametrize("variant", ["upper", "lower"])
def test_parity(variant):
    torch = pytest.importorskip("torch")
    from torch.nn.attention import bias as tb

    rng = np.random.default_rng(8)
    q, k, v = (rng.standard_normal(s).astype(np.float32)
               for s in [(2, 4, 3, 8), (2, 4, 7, 8), (2, 4, 7, 8)])
    make = {"upper": ("causal_upper_left", causal_upper_left),
            "lower": ("causal_lower_right", causal_lower_right)}[variant]
    tbias = getattr(tb, make[0])(3, 7)
    fbias = make[1](3, 7)
    assert repr(fbias) == repr(tbias)
    ref = torch.nn.functional.scaled_dot_product_attention(
        torch.tensor(q), torch.tensor(k), torch.tensor(v), tbias).numpy()
    out = F.scaled_dot_product_attention(fiamma.tensor(q), fiamma.tensor(k), fiamma.tensor(v),
                                         fbias).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_flash_only_refuses_what_pytorchs_cpu_flash_refuses():
    """Inside ``sdpa_kernel(SDPBackend.FLASH_ATTENTION)`` 3-d inputs find no kernel, as on a
    CPU PyTorch (the SDPA tutorial catches this RuntimeError); 4-d ones run, and with the math
    kernel enabled too, 3-d ones run."""
    from fiamma.nn.attention import SDPBackend, sdpa_kernel

    q3, q4 = _rand(2, 3, 8), _rand(1, 2, 3, 8)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        with pytest.raises(RuntimeError, match="No available kernel"):
            F.scaled_dot_product_attention(q3, q3, q3)
        assert tuple(F.scaled_dot_product_attention(q4, q4, q4).shape) == (1, 2, 3, 8)
        v4 = _rand(1, 2, 3, 4)
        with pytest.raises(RuntimeError, match="same head size"):
            F.scaled_dot_product_attention(q4, q4, v4)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]):
        assert tuple(F.scaled_dot_product_attention(q3, q3, q3).shape) == (2, 3, 8)


@pytest.mark.parity
def test_parity_flash_only_3d():
    torch = pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend as TB, sdpa_kernel as tk

    q = torch.randn(2, 3, 8)
    with tk(TB.FLASH_ATTENTION), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="No available kernel"):
            torch.nn.functional.scaled_dot_product_attention(q, q, q)
