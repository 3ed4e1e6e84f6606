"""Small PyTorch names programs reach for: torch.testing.make_tensor, torch.utils.dlpack,
torch.backends.opt_einsum, torch._C._get_tracing_state."""

import numpy as np
import pytest

import fiamma
from fiamma.testing import make_tensor


@pytest.mark.parametrize("dtype,lo,hi", [
    (fiamma.float32, -9, 9), (fiamma.float64, -9, 9), (fiamma.float16, -9, 9),
    (fiamma.bfloat16, -9, 9), (fiamma.int8, -9, 9), (fiamma.int64, -9, 9),
    (fiamma.uint8, 0, 9), (fiamma.bool, 0, 1),
])
def test_make_tensor_default_ranges(dtype, lo, hi):
    t = make_tensor(40, 50, dtype=dtype)
    assert t.shape == (40, 50) and t.dtype is dtype and t.is_contiguous()
    v = t.to(fiamma.float64).numpy()
    assert v.min() >= lo and v.max() <= hi
    assert len(np.unique(v)) > 1  # random, not constant


def test_make_tensor_options():
    fiamma.manual_seed(3)
    a = make_tensor((3, 4), dtype=fiamma.float32, low=1.0, high=2.0)
    fiamma.manual_seed(3)
    b = make_tensor(3, 4, dtype=fiamma.float32, low=1.0, high=2.0)
    assert a.tolist() == b.tolist()  # the default generator's seed decides the values
    assert float(a.min()) >= 1.0 and float(a.max()) <= 2.0
    n = make_tensor(3, 4, dtype=fiamma.int32, noncontiguous=True, exclude_zero=True, low=-1,
                    high=2)
    assert not n.is_contiguous() and n.shape == (3, 4) and not (n == 0).any()
    c = make_tensor(2, 3, 4, 5, dtype=fiamma.float32, memory_format=fiamma.channels_last)
    assert c.is_contiguous(memory_format=fiamma.channels_last)
    z = make_tensor(5, dtype=fiamma.complex64)
    assert z.dtype is fiamma.complex64 and (z.imag != 0).any()
    g = make_tensor(2, dtype=fiamma.float64, requires_grad=True) if _has_autograd() else None
    assert g is None or g.requires_grad
    with pytest.raises(ValueError, match="low must be less than or equal to high"):
        make_tensor(2, dtype=fiamma.float32, low=3.0, high=1.0)
    with pytest.raises(TypeError, match="shape must be non-negative ints"):
        make_tensor(-1, dtype=fiamma.float32)


def _has_autograd():
    try:
        import fiamma.autograd  # noqa: F401
    except ImportError:
        return False
    return True


def test_dlpack_round_trip_shares_memory():
    t = fiamma.arange(6.0)
    cap = fiamma.utils.dlpack.to_dlpack(t)
    u = fiamma.utils.dlpack.from_dlpack(cap)
    u[0] = 42.0
    assert t[0].item() == 42.0
    a = np.arange(3.0)
    assert fiamma.utils.dlpack.from_dlpack(a).tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(TypeError, match="expected a fiamma.Tensor"):
        fiamma.utils.dlpack.to_dlpack(a)


def test_opt_einsum_switch_keeps_results():
    oe = fiamma.backends.opt_einsum
    a, b, c = (fiamma.randn(3, 4, dtype=fiamma.float64), fiamma.randn(4, 5, dtype=fiamma.float64),
               fiamma.randn(5, 2, dtype=fiamma.float64))
    want = a.numpy() @ b.numpy() @ c.numpy()
    assert oe.enabled is True and oe.strategy == "auto"
    try:
        for flag in (True, False):
            oe.enabled = flag
            got = fiamma.einsum("ij,jk,kl->il", a, b, c).numpy()
            np.testing.assert_allclose(got, want, rtol=1e-12)
    finally:
        oe.enabled = True
    assert oe.is_available() == (oe.get_opt_einsum() is not None)


def test_tracing_state_and_submodules():
    from fiamma._torch_c import module

    assert module._get_tracing_state() is None
    assert hasattr(fiamma.utils.flop_counter, "FlopCounterMode")


def _index_reduce_ref(x, dim, idx, src, red, include_self):
    x = np.moveaxis(x.copy(), dim, 0)
    src = np.moveaxis(src, dim, 0)
    out = x.copy()
    for i in set(idx.tolist()):
        rows = [src[k] for k in range(len(idx)) if idx[k] == i]
        vals = ([x[i]] if include_self else []) + rows
        st = np.stack(vals)
        out[i] = {"prod": st.prod(0), "mean": st.mean(0), "amax": st.max(0),
                  "amin": st.min(0)}[red]
    return np.moveaxis(out, 0, dim)


@pytest.mark.parametrize("red", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_reduce(red, include_self, dim):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3, 5))
    d = dim % 3
    idx = np.array([1, 0, 1, min(2, x.shape[d] - 1)])
    sshape = list(x.shape)
    sshape[d] = len(idx)
    src = rng.standard_normal(sshape)
    want = _index_reduce_ref(x, d, idx, src, red, include_self)
    got = fiamma.index_reduce(fiamma.tensor(x), dim, fiamma.tensor(idx), fiamma.tensor(src), red,
                              include_self=include_self)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    t = fiamma.tensor(x)
    assert t.index_reduce_(dim, fiamma.tensor(idx), fiamma.tensor(src), red,
                           include_self=include_self) is t
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-12)


def test_index_reduce_errors():
    x = fiamma.ones(3, 2)
    with pytest.raises(RuntimeError, match="Expected reduce to be one of prod, mean, amax"):
        x.index_reduce(0, fiamma.tensor([0]), fiamma.ones(1, 2), "sum")
    with pytest.raises(IndexError, match="index -1 is out of range"):
        x.index_reduce(0, fiamma.tensor([-1]), fiamma.ones(1, 2), "prod")
    with pytest.raises(IndexError, match="index 3 is out of range"):
        x.index_reduce(0, fiamma.tensor([3]), fiamma.ones(1, 2), "prod")
    with pytest.raises(RuntimeError, match="does not fit self"):
        x.index_reduce(0, fiamma.tensor([0, 1]), fiamma.ones(1, 2), "prod")
    with pytest.raises(RuntimeError, match="int32/int64 for index"):
        x.index_reduce(0, fiamma.tensor([0.0]), fiamma.ones(1, 2), "prod")


@pytest.mark.parity
def test_index_reduce_parity():
    torch = pytest.importorskip("torch")
    pytest.importorskip("fiamma.autograd")
    rng = np.random.default_rng(0)
    x, s, w = rng.standard_normal((4, 3)), rng.standard_normal((5, 3)), rng.standard_normal((4, 3))
    idx = np.array([0, 2, 0, 3, 2])
    for red in ("prod", "mean", "amax", "amin"):
        for inc in (True, False):
            xt, st = torch.tensor(x, requires_grad=True), torch.tensor(s, requires_grad=True)
            xf, sf = fiamma.tensor(x, requires_grad=True), fiamma.tensor(s, requires_grad=True)
            yt = xt.index_reduce(0, torch.tensor(idx), st, red, include_self=inc)
            yf = xf.index_reduce(0, fiamma.tensor(idx), sf, red, include_self=inc)
            np.testing.assert_allclose(yf.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
            (yt * torch.tensor(w)).sum().backward()
            (yf * fiamma.tensor(w)).sum().backward()
            np.testing.assert_allclose(xf.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(sf.grad.numpy(), st.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_weak_id_key_dictionary():
    import gc

    from fiamma.utils.weak import TensorWeakRef, WeakIdKeyDictionary, WeakIdRef

    a, b = fiamma.ones(2), fiamma.ones(2)  # equal values, different objects
    d = WeakIdKeyDictionary({a: 1})
    d[b] = 2
    assert d[a] == 1 and d[b] == 2 and len(d) == 2 and a in d and fiamma.ones(2) not in d
    assert list(d) == [a, b] or list(d) == [b, a]
    del d[a]
    assert a not in d and len(d) == 1
    del b
    gc.collect()
    assert len(d) == 0 and not d.data  # the dead key's entry is gone
    r = WeakIdRef(a)
    assert hash(r) == id(a) and r == WeakIdRef(a) and r() is a
    w = TensorWeakRef(a)
    assert w() is a
    del a
    gc.collect()
    assert w() is None
    with pytest.raises(TypeError, match="expected a Tensor"):
        TensorWeakRef([1])


def test_backend_flag_modules():
    b = fiamma.backends
    assert b.mha.get_fastpath_enabled() is True
    b.mha.set_fastpath_enabled(False)
    try:
        assert b.mha.get_fastpath_enabled() is False
    finally:
        b.mha.set_fastpath_enabled(True)
    assert b.nnpack.is_available() is False and b.xnnpack.enabled is False
    with b.nnpack.flags(enabled=True):
        assert b.nnpack.enabled is True
    assert b.nnpack.enabled is False
