"""The PyTorch names composed from fiamma's ops (fiamma._compat_ops) and the legacy typed-tensor
names (fiamma._legacy_types): NumPy and hand references; (parity) the same calls on torch."""

import math

import numpy as np
import pytest

import fiamma

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")
rng = np.random.default_rng(0)


def T(a):
    return fiamma.tensor(a)


# ---- constants, switches ----------------------------------------------------------------------

def test_constants_and_switches():
    assert fiamma.pi == math.pi and fiamma.e == math.e and fiamma.newaxis is None
    assert math.isinf(fiamma.inf) and math.isnan(fiamma.nan)
    assert fiamma.zeros(3)[fiamma.newaxis].shape == (1, 3)
    fiamma.use_deterministic_algorithms(True, warn_only=True)
    assert fiamma.are_deterministic_algorithms_enabled()
    assert fiamma.is_deterministic_algorithms_warn_only_enabled()
    assert fiamma.get_deterministic_debug_mode() == 1
    fiamma.set_deterministic_debug_mode("default")
    assert not fiamma.are_deterministic_algorithms_enabled()
    with pytest.raises(TypeError):
        fiamma.use_deterministic_algorithms(1)
    fiamma.set_float32_matmul_precision("high")
    assert fiamma.get_float32_matmul_precision() == "high"
    fiamma.set_float32_matmul_precision("highest")
    with pytest.raises(RuntimeError, match="invalid precision"):
        fiamma.set_float32_matmul_precision("low")
    fiamma.set_default_device("cpu")
    assert fiamma.get_default_device() == fiamma.device("cpu")
    if not fiamma.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            fiamma.set_default_device("cuda")
    assert fiamma.get_default_device() == fiamma.device("cpu")
    f = lambda x: x + 1  # noqa: E731
    assert fiamma.compile(f) is f and fiamma.compile(mode="max-autotune")(f) is f


# ---- legacy tensor types -------------------------------------------------------------------

def test_legacy_tensor_types():
    x = fiamma.LongTensor([1, 2])
    assert x.dtype is fiamma.int64 and x.tolist() == [1, 2]
    assert fiamma.FloatTensor(2, 3).shape == (2, 3)
    assert fiamma.FloatTensor(fiamma.Size([4])).shape == (4,)
    assert fiamma.DoubleTensor().shape == (0,)
    assert isinstance(fiamma.zeros(1), fiamma.FloatTensor)
    assert not isinstance(fiamma.zeros(1), fiamma.LongTensor)
    assert isinstance(fiamma.zeros(1, dtype=fiamma.uint8), fiamma.ByteTensor)
    assert fiamma.zeros(2).type(fiamma.LongTensor).dtype is fiamma.int64
    assert fiamma.zeros(2).type("torch.DoubleTensor").dtype is fiamma.float64
    assert fiamma.zeros(2).type("fiamma.BoolTensor").dtype is fiamma.bool
    with pytest.raises(RuntimeError, match="CUDA"):
        fiamma.zeros(2).type("torch.cuda.FloatTensor")
    with pytest.raises(TypeError, match="expected"):
        fiamma.LongTensor(fiamma.zeros(2))
    try:
        fiamma.set_default_tensor_type("torch.DoubleTensor")
        assert fiamma.zeros(1).dtype is fiamma.float64
    finally:
        fiamma.set_default_tensor_type(fiamma.FloatTensor)
    with pytest.raises(TypeError, match="floating-point"):
        fiamma.set_default_tensor_type(fiamma.LongTensor)


def test_sparse_legacy_tensor_types():
    # torch.sparse.DoubleTensor(indices, values, size): linear_operator builds gpytorch's
    # interpolation matrices this way
    i = fiamma.tensor([[0, 1, 1], [2, 0, 2]])
    v = fiamma.tensor([1.0, 2.0, 3.0], dtype=fiamma.float64)
    s = fiamma.sparse.DoubleTensor(i, v, fiamma.Size([2, 3]))
    assert s.layout is fiamma.sparse_coo and s.dtype is fiamma.float64
    assert s.to_dense().tolist() == [[0.0, 0.0, 1.0], [2.0, 0.0, 3.0]]
    assert isinstance(s, fiamma.sparse.DoubleTensor)
    assert not isinstance(s, fiamma.sparse.FloatTensor)
    assert not isinstance(s, fiamma.DoubleTensor)  # the dense names are for dense tensors
    assert not isinstance(s.to_dense(), fiamma.sparse.DoubleTensor)
    assert isinstance(s.to_dense(), fiamma.DoubleTensor)
    assert fiamma.sparse.DoubleTensor(i, v).shape == (2, 3)  # size from the indices
    e = fiamma.sparse.FloatTensor(2, 3)
    assert e.layout is fiamma.sparse_coo and e.shape == (2, 3) and e._nnz() == 0
    assert e.dtype is fiamma.float32
    assert fiamma.sparse.LongTensor(fiamma.Size([4])).shape == (4,)
    assert fiamma.sparse.FloatTensor().shape == (0,)
    with pytest.raises(RuntimeError, match="indices must be an int64 tensor"):
        fiamma.sparse.DoubleTensor(i.float(), v, (2, 3))
    with pytest.raises(RuntimeError, match="size is inconsistent with indices"):
        fiamma.sparse.DoubleTensor(i, v, (1, 3))
    with pytest.raises(TypeError, match="expected"):
        fiamma.sparse.DoubleTensor(s)


def test_cuda_legacy_tensor_types():
    # fiamma.cuda.FloatTensor & co exist (scripts pick them when CUDA is available); they match
    # only CUDA tensors, and making one without CUDA raises naming the type, as PyTorch's CPU build
    T = fiamma.cuda.FloatTensor
    assert T.dtype is fiamma.float32 and fiamma.cuda.LongTensor.dtype is fiamma.int64
    assert not isinstance(fiamma.zeros(1), T) and isinstance(fiamma.zeros(1), fiamma.FloatTensor)
    assert "cuda.FloatTensor" in repr(T)
    with pytest.raises(AttributeError):
        fiamma.cuda.NoSuchTensor
    if not fiamma.cuda.is_available():
        with pytest.raises(TypeError, match="cuda.FloatTensor not available"):
            T(2, 3)
        with pytest.raises(TypeError, match="cuda.LongTensor not available"):
            fiamma.zeros(2).type(fiamma.cuda.LongTensor)
    else:
        x = T(2, 3)
        assert x.device.type == "cuda" and isinstance(x, T) and x.shape == (2, 3)
        assert fiamma.zeros(2).type(fiamma.cuda.LongTensor).device.type == "cuda"


def test_type_tensor_class_is_the_default_dtype():
    # x.type(torch.Tensor) (CycleGAN-style scripts) converts to the default dtype, as PyTorch
    assert fiamma.ones(2, dtype=fiamma.float64).type(fiamma.Tensor).dtype is fiamma.float32
    assert fiamma.arange(3).type(fiamma.Tensor).tolist() == [0.0, 1.0, 2.0]
    assert fiamma.arange(3).type("torch.Tensor").dtype is fiamma.float32
    try:
        fiamma.set_default_dtype(fiamma.float64)
        assert fiamma.ones(2, dtype=fiamma.int32).type(fiamma.Tensor).dtype is fiamma.float64
    finally:
        fiamma.set_default_dtype(fiamma.float32)


# ---- linear algebra under the old names ---------------------------------------------------

def test_old_linalg_names():
    a = rng.standard_normal((3, 3))
    spd = a @ a.T + 3 * np.eye(3)
    x = T(a)
    np.testing.assert_allclose(fiamma.det(x).item(), np.linalg.det(a), rtol=1e-10)
    np.testing.assert_allclose(x.inverse().numpy(), np.linalg.inv(a), rtol=1e-8)
    np.testing.assert_allclose(fiamma.pinverse(x).numpy(), np.linalg.pinv(a), rtol=1e-8)
    np.testing.assert_allclose(x.matrix_power(3).numpy(), a @ a @ a, rtol=1e-10)
    s, ld = np.linalg.slogdet(spd)
    np.testing.assert_allclose(fiamma.logdet(T(spd)).item(), ld, rtol=1e-10)
    assert math.isnan(fiamma.logdet(T([[-1.0, 0.0], [0.0, 1.0]])).item())
    assert fiamma.logdet(T([[0.0, 0.0], [0.0, 1.0]])).item() == -math.inf
    u, sv, v = fiamma.svd(x)
    assert fiamma.svd(x).V.shape == (3, 3) and fiamma.svd(x).S.shape == (3,)
    np.testing.assert_allclose((u * sv) @ v.T, a, atol=1e-10)
    _, _, vf = fiamma.svd(T(rng.standard_normal((4, 2))), some=False)
    assert vf.shape == (2, 2)
    u0, s0, v0 = fiamma.svd(x, compute_uv=False)
    assert u0.abs().sum().item() == 0 and s0.shape == (3,)
    q, r = fiamma.qr(x)
    np.testing.assert_allclose((q @ r).numpy(), a, atol=1e-10)
    c = fiamma.cholesky(T(spd))
    np.testing.assert_allclose((c @ c.T).numpy(), spd, atol=1e-10)
    np.testing.assert_allclose(fiamma.cholesky(T(spd), upper=True).numpy(), c.T.numpy())
    m = [rng.standard_normal((2, 3)), rng.standard_normal((3, 4)), rng.standard_normal((4, 1))]
    np.testing.assert_allclose(fiamma.chain_matmul(*map(T, m)).numpy(), m[0] @ m[1] @ m[2],
                               rtol=1e-10)


# ---- elementwise and statistics ------------------------------------------------------------

def test_elementwise_against_numpy():
    a = rng.standard_normal(7) * 200
    np.testing.assert_allclose(fiamma.deg2rad(T(a)).numpy(), np.deg2rad(a), rtol=1e-12)
    np.testing.assert_allclose(T(a).rad2deg().numpy(), np.rad2deg(a), rtol=1e-12)
    assert fiamma.deg2rad(T([180])).dtype is fiamma.float32
    y = T(a.copy())
    y.deg2rad_()
    np.testing.assert_allclose(y.numpy(), np.deg2rad(a), rtol=1e-12)
    h = np.array([-1.0, 0.0, 2.0, np.nan])
    np.testing.assert_array_equal(fiamma.heaviside(T(h), T(np.float64(0.5))).numpy(),
                                  np.heaviside(h, 0.5))
    np.testing.assert_allclose(fiamma.ldexp(T([1.0, 3.0]), T([2, -1])).numpy(), [4.0, 1.5])
    i, j = rng.integers(-50, 50, 20), rng.integers(-50, 50, 20)
    np.testing.assert_array_equal(fiamma.gcd(T(i), T(j)).numpy(), np.gcd(i, j))
    np.testing.assert_array_equal(T(i).lcm(T(j)).numpy(), np.lcm(i, j))
    with pytest.raises(RuntimeError, match="integer"):
        fiamma.gcd(T([1.0]), T([2.0]))
    e, t = rng.integers(0, 10, (3, 4)), rng.integers(0, 10, 5)
    np.testing.assert_array_equal(fiamma.isin(T(e), T(t)).numpy(), np.isin(e, t))
    np.testing.assert_array_equal(fiamma.isin(T(e), T(t), invert=True).numpy(),
                                  np.isin(e, t, invert=True))
    assert fiamma.isreal(T([1.0, 2.0])).all().item()
    x = rng.standard_normal((3, 5)) * 30
    np.testing.assert_allclose(fiamma.logcumsumexp(T(x), 1).numpy(),
                               np.logaddexp.accumulate(x, axis=1), rtol=1e-10)
    assert fiamma.angle(T(np.array([-2.0, 0.0, 3.0]))).tolist() == [math.pi, 0.0, 0.0]
    assert math.isnan(T([math.nan]).angle().item())


@pytest.mark.parametrize("interp", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_against_numpy(interp):
    a = rng.standard_normal((4, 9))
    q = [0.0, 0.25, 0.5, 0.9, 1.0]
    got = fiamma.quantile(T(a), T(np.array(q)), dim=1, interpolation=interp)
    np.testing.assert_allclose(got.numpy(), np.quantile(a, q, axis=1, method=interp),
                               rtol=1e-12)
    np.testing.assert_allclose(T(a).quantile(0.3, interpolation=interp).item(),
                               np.quantile(a, 0.3, method=interp), rtol=1e-12)
    kd = fiamma.quantile(T(a), 0.5, dim=0, keepdim=True)
    assert kd.shape == (1, 9)
    b = a.copy()
    b[0, 3] = np.nan
    assert np.isnan(fiamma.quantile(T(b), 0.5, dim=1)[0].item())
    np.testing.assert_allclose(fiamma.nanquantile(T(b), 0.5, dim=1, interpolation=interp)
                               .numpy(), np.nanquantile(b, 0.5, axis=1, method=interp),
                               rtol=1e-12)
    with pytest.raises(RuntimeError, match="range"):
        fiamma.quantile(T(a), 1.5)


def test_statistics_against_numpy():
    x = rng.standard_normal((3, 6))
    np.testing.assert_allclose(fiamma.cov(T(x)).numpy(), np.cov(x), rtol=1e-10)
    np.testing.assert_allclose(fiamma.cov(T(x), correction=0).numpy(), np.cov(x, ddof=0),
                               rtol=1e-10)
    fw, aw = rng.integers(1, 4, 6), rng.random(6)
    np.testing.assert_allclose(fiamma.cov(T(x), fweights=T(fw), aweights=T(aw)).numpy(),
                               np.cov(x, fweights=fw, aweights=aw), rtol=1e-10)
    np.testing.assert_allclose(fiamma.corrcoef(T(x)).numpy(), np.corrcoef(x), rtol=1e-10)
    y = rng.standard_normal((2, 5))
    xs = np.sort(rng.random(5))
    np.testing.assert_allclose(fiamma.trapezoid(T(y), T(xs)).numpy(),
                               np.trapezoid(y, xs, axis=-1), rtol=1e-12)
    np.testing.assert_allclose(fiamma.trapz(T(y), dx=0.5, dim=0).numpy(),
                               np.trapezoid(y, dx=0.5, axis=0), rtol=1e-12)
    ct = fiamma.cumulative_trapezoid(T(y)).numpy()
    np.testing.assert_allclose(ct[:, -1], np.trapezoid(y, axis=-1), rtol=1e-12)
    a, b = rng.standard_normal(5), rng.standard_normal(5)
    np.testing.assert_allclose(fiamma.dist(T(a), T(b), 3).item(),
                               np.sum(np.abs(a - b) ** 3) ** (1 / 3), rtol=1e-12)
    w = rng.standard_normal((3, 4)) * 3
    r = fiamma.renorm(T(w), 2, 0, 1.0).numpy()
    norms = np.linalg.norm(w, axis=1)
    ref = w * np.where(norms > 1.0, 1.0 / (norms + 1e-7), 1.0)[:, None]
    np.testing.assert_allclose(r, ref, rtol=1e-12)
    coords = fiamma.unravel_index(T([0, 5, 23, -1]), (2, 3, 4))
    ref = np.unravel_index([0, 5, 23, 23], (2, 3, 4))
    assert [c.tolist() for c in coords] == [list(r) for r in ref]
    with pytest.raises(RuntimeError, match="out of bounds"):
        fiamma.unravel_index(T([24]), (2, 3, 4))
    p, q = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    cs = (p * q).sum(1) / np.linalg.norm(p, axis=1) / np.linalg.norm(q, axis=1)
    np.testing.assert_allclose(fiamma.cosine_similarity(T(p), T(q)).numpy(), cs, rtol=1e-12)
    np.testing.assert_allclose(fiamma.pairwise_distance(T(p), T(q)).numpy(),
                               np.linalg.norm(p - q + 1e-6, axis=1), rtol=1e-12)
    ref = [np.linalg.norm(p[i] - p[j]) for i in range(4) for j in range(i + 1, 4)]
    np.testing.assert_allclose(fiamma.pdist(T(p)).numpy(), ref, rtol=1e-12)


def test_fill_requires_grad_as_pytorch():
    x = T([[1.0, 2.0], [3.0, 4.0]])
    assert fiamma.fill(x, True).tolist() == [[1.0, 1.0]] * 2
    assert fiamma.fill(T([1, 2]), 2.7).tolist() == [2, 2]
    with pytest.raises(RuntimeError, match="fill: only supports a 0-dimension"):
        fiamma.fill(x, T([1.0, 2.0]))
    pytest.importorskip("fiamma.autograd")
    xg = fiamma.tensor([1.0, 2.0, 3.0], requires_grad=True)
    for value in (True, 2.5, T(2.0)):
        r = fiamma.fill(xg, value)
        assert r.requires_grad and r.tolist() == [float(value)] * 3
    v = fiamma.tensor(2.0, requires_grad=True)
    r = fiamma.fill(xg, v)
    (r * T([1.0, 2.0, 3.0])).sum().backward()
    assert xg.grad.tolist() == [0.0, 0.0, 0.0] and v.grad.item() == 6.0
    assert fiamma.fill(T([1.0, 2.0]), v).requires_grad  # a value requiring grad suffices
    assert not fiamma.fill(T([1.0, 2.0]), 3.0).requires_grad


def test_fill_method_checks_its_value():
    x = fiamma.zeros(2)
    assert x.fill_(np.float32(2.0)).tolist() == [2.0, 2.0]
    assert x.fill_(T(3.0)).tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="0-dimension value tensor"):
        x.fill_(T([1.0]))  # PyTorch refuses a 1-element 1-d value too
    for bad in ("sum", None):  # also on an empty tensor, where nothing would be written
        with pytest.raises(TypeError, match="fill_: value must be a number"):
            fiamma.zeros(0, 3, dtype=fiamma.bool).fill_(bad)


def test_predicates_and_small_forms():
    x = T([[1.0, 2.0], [3.0, 4.0]])
    assert fiamma.fill(x, 7).tolist() == [[7.0, 7.0]] * 2 and x[0, 0].item() == 1.0
    assert not fiamma.is_complex(x) and not x.is_conj() and not fiamma.is_neg(x)
    assert fiamma.is_nonzero(T([3])) and not T(0.0).is_nonzero()
    with pytest.raises(RuntimeError, match="more than one"):
        fiamma.is_nonzero(x)
    assert fiamma.is_same_size(x, x.t()) and not x.is_same_size(x[0])
    assert fiamma.is_signed(x) and not fiamma.is_signed(T([1]).byte())
    assert fiamma.is_storage(x.untyped_storage()) and not fiamma.is_storage(x)
    assert fiamma.typename(x) == "fiamma.FloatTensor" and fiamma.typename(1) == "int"
    assert fiamma.conj(x) is x and x.resolve_conj() is x and x.real is x
    with pytest.raises(RuntimeError, match="non-complex"):
        x.imag
    assert fiamma.conj_physical(x).data_ptr() != x.data_ptr()


def test_copy_and_scatter_forms():
    a = np.arange(24.0).reshape(2, 3, 4)
    x = T(a)
    cases = [
        (fiamma.permute_copy(x, (2, 0, 1)), a.transpose(2, 0, 1)),
        (fiamma.transpose_copy(x, 0, 2), a.swapaxes(0, 2)),
        (fiamma.t_copy(T(a[0])), a[0].T),
        (fiamma.select_copy(x, 1, 2), a[:, 2]),
        (fiamma.slice_copy(x, 2, 1, None, 2), a[:, :, 1::2]),
        (fiamma.diagonal_copy(x, 0, 1, 2), np.diagonal(a, 0, 1, 2)),
        (fiamma.expand_copy(T(a[:1]), (3, 3, 4)), np.broadcast_to(a[:1], (3, 3, 4))),
        (fiamma.unsqueeze_copy(x, 0), a[None]),
        (fiamma.squeeze_copy(T(a[:1])), a[0]),
        (fiamma.view_copy(x, 6, 4), a.reshape(6, 4)),
        (fiamma.unfold_copy(T(a[0, 0]), 0, 2, 1),
         np.lib.stride_tricks.sliding_window_view(a[0, 0], 2)),
        (fiamma.as_strided_copy(x, (2, 2), (1, 4)),
         np.lib.stride_tricks.as_strided(a, (2, 2), (8, 32))),
        (fiamma.alias_copy(x), a), (fiamma.detach_copy(x), a),
    ]
    for got, ref in cases:
        assert got.is_contiguous() and got.data_ptr() != x.data_ptr()
        np.testing.assert_array_equal(got.numpy(), ref)
    parts = fiamma.split_copy(x, 1, 0) + fiamma.unbind_copy(x, 1)
    assert all(p.data_ptr() != x.data_ptr() for p in parts)
    assert [p.shape[2] for p in fiamma.split_with_sizes(x, [1, 3], 2)] == [1, 3]
    assert [p.shape[2] for p in fiamma.split_with_sizes_copy(x, [3, 1], 2)] == [3, 1]
    z = np.zeros((3, 3))
    ref = z.copy()
    np.fill_diagonal(ref, [1, 2, 3])
    np.testing.assert_array_equal(fiamma.diagonal_scatter(T(z), T([1.0, 2, 3])).numpy(), ref)
    ref = z.copy()
    ref[:, 1] = 5
    np.testing.assert_array_equal(fiamma.select_scatter(T(z), T([5.0] * 3), 1, 1).numpy(), ref)
    ref = z.copy()
    ref[::2] = 4
    np.testing.assert_array_equal(
        fiamma.slice_scatter(T(z), fiamma.full((2, 3), 4.0, dtype=fiamma.float64), 0, None,
                             None, 2).numpy(), ref)
    ref = z.copy().reshape(-1)
    ref[[1, 4]] = 9
    np.testing.assert_array_equal(
        fiamma.as_strided_scatter(T(z), T([9.0, 9.0]), (2,), (3,), 1).numpy(),
        ref.reshape(3, 3))
    with pytest.raises(RuntimeError, match="src"):
        fiamma.select_scatter(T(z), T([1.0]), 0, 0)


def test_tensor_methods():
    m = fiamma.zeros(5, 3)
    m.fill_diagonal_(1, wrap=True)
    ref = np.zeros((5, 3))
    np.fill_diagonal(ref, 1, wrap=True)
    np.testing.assert_array_equal(m.numpy(), ref)
    c = fiamma.zeros(3, 3, 3).fill_diagonal_(2)
    assert c.sum().item() == 6 and c[1, 1, 1].item() == 2
    s = T(np.ones((2, 3, 4))).sum_to_size(3, 1)
    np.testing.assert_array_equal(s.numpy(), np.full((3, 1), 8.0))
    with pytest.raises(RuntimeError, match="expandable"):
        fiamma.ones(2, 3).sum_to_size(4)
    assert T([1, 2, 3]).apply_(lambda v: v * 10).tolist() == [10, 20, 30]
    assert T([1, 2]).map_(T([3, 4]), lambda a, b: a * b).tolist() == [3, 8]
    assert fiamma.zeros(1, dtype=fiamma.int16).new(2, 2).dtype is fiamma.int16
    assert fiamma.zeros(1).new([1, 2]).tolist() == [1.0, 2.0]
    assert fiamma.zeros(2, 3, 4).permute(2, 0, 1).dim_order() == (1, 2, 0)
    assert not fiamma.zeros(1).is_pinned()
    with pytest.raises(RuntimeError, match="pinned"):
        fiamma.zeros(1).pin_memory()
    y = T([1.0, 2.0, 3.0])
    y.cumsum_(0)
    assert y.tolist() == [1.0, 3.0, 6.0]
    y.cumprod_(0)
    assert y.tolist() == [1.0, 3.0, 18.0]
    e = fiamma.zeros(2).new_empty_strided((2, 2), (1, 2))
    assert e.stride() == (1, 2)


def test_gradients_through_compositions():
    gradcheck = pytest.importorskip("fiamma.autograd", reason="needs fiamma-autograd").gradcheck

    x = fiamma.tensor(rng.standard_normal((3, 5)), requires_grad=True)
    assert gradcheck(lambda t: fiamma.logcumsumexp(t, 1), (x,))
    assert gradcheck(lambda t: fiamma.quantile(t, 0.3, dim=1), (x,))
    assert gradcheck(lambda t: fiamma.cov(t), (x,))
    assert gradcheck(lambda t: fiamma.renorm(t, 2, 0, 1.0), (x,))
    assert gradcheck(lambda t: fiamma.pdist(t), (x,))
    sq = fiamma.tensor(rng.standard_normal((3, 3)) + 3 * np.eye(3), requires_grad=True)
    assert gradcheck(lambda t: fiamma.logdet(t @ t.T), (sq,))
    assert gradcheck(lambda t: fiamma.diagonal_scatter(t, t[0] * 2), (sq,))
    assert gradcheck(lambda t: fiamma.frexp(t)[0], (x,))
    y = fiamma.tensor([1.0, 2.0], dtype=fiamma.float64, requires_grad=True)
    fiamma.nextafter(y, fiamma.tensor([3.0, 0.0], dtype=fiamma.float64)).sum().backward()
    assert y.grad.tolist() == [1.0, 1.0]


# ---- parity --------------------------------------------------------------------------------

@pytest.mark.parity
@needs_torch
def test_compat_ops_parity():
    a = rng.standard_normal((4, 6))
    f, t = T(a), torch.tensor(a)
    pairs = [
        (lambda m, x: m.logcumsumexp(x, 1)),
        (lambda m, x: m.quantile(x, 0.37, dim=0)),
        (lambda m, x: m.nanquantile(x, m.tensor([0.1, 0.8], dtype=x.dtype), dim=1,
                                    interpolation="midpoint")),
        (lambda m, x: m.cov(x)), (lambda m, x: m.corrcoef(x)),
        (lambda m, x: m.trapezoid(x)), (lambda m, x: m.cumulative_trapezoid(x, dim=0)),
        (lambda m, x: m.dist(x[0], x[1], 1.5)), (lambda m, x: m.renorm(x, 1, 1, 2.0)),
        (lambda m, x: m.deg2rad(x)), (lambda m, x: m.rad2deg(x)),
        (lambda m, x: m.heaviside(x, m.tensor(0.5, dtype=x.dtype))),
        (lambda m, x: m.ldexp(x, m.tensor([1, 2, 3, 4, 5, 6]))),
        (lambda m, x: m.cosine_similarity(x, x.flip(0), dim=1)),
        (lambda m, x: m.pairwise_distance(x, x.flip(0))), (lambda m, x: m.pdist(x)),
        (lambda m, x: m.det(x[:, :4])), (lambda m, x: m.logdet(x[:, :4] @ x[:, :4].T)),
        (lambda m, x: m.inverse(x[:, :4])), (lambda m, x: m.pinverse(x)),
        (lambda m, x: m.matrix_power(x[:, :4], 3)),
        (lambda m, x: m.chain_matmul(x, x.T, x)),
        (lambda m, x: m.diagonal_scatter(x, x[0, :4] * 0 + 1)),
        (lambda m, x: m.slice_scatter(x, x[:, ::3] * 2, 1, 0, None, 3)),
        (lambda m, x: m.select_scatter(x, x[1] * 3, 0, 2)),
        (lambda m, x: m.fill(x, 2.0)), (lambda m, x: x.sum_to_size(1, 6)),
        (lambda m, x: m.zeros(4, 4, dtype=x.dtype).fill_diagonal_(3)),
        (lambda m, x: x.angle()),
    ]
    for fn in pairs:
        np.testing.assert_allclose(fn(fiamma, f).numpy(), fn(torch, t).numpy(), rtol=1e-9,
                                   atol=1e-12)
    u, s, v = fiamma.svd(f)
    tu, ts, tv = torch.svd(t)
    np.testing.assert_allclose(s.numpy(), ts.numpy(), rtol=1e-10)
    np.testing.assert_allclose(np.abs(v.numpy()), np.abs(tv.numpy()), rtol=1e-8, atol=1e-10)
    i, j = rng.integers(-30, 30, 9), rng.integers(-30, 30, 9)
    assert fiamma.gcd(T(i), T(j)).tolist() == torch.gcd(torch.tensor(i), torch.tensor(j)).tolist()
    assert fiamma.lcm(T(i), T(j)).tolist() == torch.lcm(torch.tensor(i), torch.tensor(j)).tolist()
    assert fiamma.isin(T(i), T(j)).tolist() == torch.isin(torch.tensor(i),
                                                          torch.tensor(j)).tolist()
    got = fiamma.unravel_index(T([3, 7, 11]), (3, 4))
    want = torch.unravel_index(torch.tensor([3, 7, 11]), (3, 4))
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    assert isinstance(fiamma.LongTensor([1]), fiamma.LongTensor) == \
        isinstance(torch.LongTensor([1]), torch.LongTensor)
    assert fiamma.zeros(2, 3, 4).permute(2, 0, 1).dim_order() == \
        torch.zeros(2, 3, 4).permute(2, 0, 1).dim_order()


def test_numpy_backed_odds_and_ends():
    b = bytearray(np.arange(4, dtype=np.float32).tobytes())
    t = fiamma.frombuffer(b, dtype=fiamma.float32, offset=4, count=2)
    assert t.tolist() == [1.0, 2.0]
    b[4:8] = np.float32(9).tobytes()
    assert t.tolist() == [9.0, 2.0]  # shares a writable buffer
    assert fiamma.frombuffer(b"\x01\x00\x02\x00", dtype=fiamma.int16).tolist() == [1, 2]
    with pytest.raises(ValueError, match="must not be greater"):
        fiamma.frombuffer(b"\x00" * 4, dtype=fiamma.int32, count=2)
    v = rng.standard_normal(50)
    h, edges = fiamma.histogram(T(v), bins=5, range=(-2.0, 2.0))
    hr, er = np.histogram(v, bins=5, range=(-2.0, 2.0))
    np.testing.assert_array_equal(h.numpy(), hr)
    np.testing.assert_allclose(edges.numpy(), er)
    assert fiamma.frexp(T([1.0])).exponent.tolist() == [1]
    assert fiamma.histogram(T([1.0]), 2).bin_edges.shape == (3,)
    m, ex = fiamma.frexp(T(np.array([8.0, 0.3, -5.0])))
    mr, er = np.frexp([8.0, 0.3, -5.0])
    np.testing.assert_array_equal(m.numpy(), mr)
    assert ex.dtype is fiamma.int32 and ex.tolist() == er.tolist()
    n = fiamma.nextafter(T(np.float32([1.0])), T(np.float32([2.0])))
    assert n.item() == np.nextafter(np.float32(1), np.float32(2))
    fiamma.set_num_interop_threads(2)
    assert fiamma.get_num_interop_threads() == 2
    x = fiamma.zeros(3)
    x.set_(fiamma.arange(6.0).reshape(2, 3))
    assert x.shape == (2, 3) and x[1, 2].item() == 5.0
    s = fiamma.arange(6.0).untyped_storage()
    y = fiamma.zeros(0).set_(s, 1, (2, 2), (2, 1))
    assert y.tolist() == [[1.0, 2.0], [3.0, 4.0]] and y.untyped_storage() is s
    with pytest.raises(RuntimeError, match="needs"):
        fiamma.zeros(0).set_(s, 4, (2, 2))
    assert fiamma.zeros(0).set_().shape == (0,)
    assert fiamma.zeros(2).name is None and fiamma.zeros(2).output_nr == 0
    z = fiamma.zeros(4)
    assert fiamma.as_strided_(z, (2,), (2,)).shape == (2,)
    assert fiamma.resize_as_(z, fiamma.zeros(2, 2)).shape == (2, 2)


def test_sym_min_max():
    class Sym(int):
        def __sym_min__(self, other):
            return ("min", int(self), other)

        def __sym_max__(self, other):
            return ("max", int(self), other)

    assert fiamma.sym_min(3, 5) == 3 and fiamma.sym_max(3, 5.5) == 5.5
    assert fiamma.sym_min(7, Sym(2)) == ("min", 2, 7)   # either side's hook is used
    assert fiamma.sym_max(Sym(2), 7) == ("max", 2, 7)


def test_cosine_similarity_refuses_a_negative_eps():
    x = fiamma.ones(2, 3)
    with pytest.raises(RuntimeError, match="eps must be non-negative"):
        fiamma.cosine_similarity(x, x, eps=-1.0)
    assert fiamma.cosine_similarity(x, x, eps=0.0).tolist() == pytest.approx([1.0, 1.0])


@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
def test_quantile_of_0d_input_with_keepdim_stays_0d(fn):
    f = getattr(fiamma, fn)
    x = fiamma.tensor(1.5)
    assert tuple(f(x, 0.5, dim=0, keepdim=True).shape) == ()
    assert tuple(f(x, 0.5, dim=-1, keepdim=True).shape) == ()
    assert tuple(f(x, fiamma.tensor([0.5, 0.2]), dim=0, keepdim=True).shape) == (2,)
    assert f(x, 0.5, dim=0, keepdim=True).item() == 1.5
    assert tuple(f(fiamma.ones(3), 0.5, dim=0, keepdim=True).shape) == (1,)


def test_cov_weights_keep_their_dtype_and_dof_warning():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 6)).astype(np.float32)
    aw, fw = rng.random(6) + 0.1, np.array([1, 2, 1, 3, 1, 2])
    # float64 aweights promote a float32 input (PyTorch: the weights are not cast)
    got = fiamma.cov(fiamma.tensor(x), aweights=fiamma.tensor(aw))
    assert got.dtype is fiamma.float64
    want = np.cov(x.astype(np.float64), aweights=aw)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    got = fiamma.cov(fiamma.tensor(x), fweights=fiamma.tensor(fw),
                     aweights=fiamma.tensor(aw.astype(np.float32)))
    assert got.dtype is fiamma.float32
    np.testing.assert_allclose(got.numpy(), np.cov(x, fweights=fw, aweights=aw), rtol=1e-4,
                               atol=1e-5)
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        r = fiamma.cov(fiamma.tensor([[1.0, 2.0]]), correction=2)
    assert math.isinf(r.item())
    with pytest.raises(RuntimeError, match="cov\\(\\): bool dtype"):
        fiamma.cov(fiamma.tensor([True, False, True]))


@pytest.mark.parity
def test_cov_matches_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 7)).astype(np.float32)
    aw = (rng.random(7) + 0.1).astype(np.float32)
    fw = rng.integers(1, 4, 7)
    for kw in ({}, {"aweights": aw}, {"fweights": fw}, {"aweights": aw, "fweights": fw},
               {"aweights": aw.astype(np.float64), "correction": 0}):
        got = fiamma.cov(fiamma.tensor(x), **{k: fiamma.tensor(v) for k, v in kw.items()})
        ref = torch.cov(torch.tensor(x), **{k: torch.tensor(v) for k, v in kw.items()})
        assert str(got.dtype) == str(ref.dtype).replace("torch", "fiamma"), list(kw)
        # float32 sums and products round differently from PyTorch's kernels' (a few ulps)
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=str(list(kw)))
