"""fiamma.array_api's element-wise, statistical, manipulation, searching, sorting, set,
linalg and fft functions against NumPy (deterministic random inputs)."""

import math

import numpy as np
import pytest

import fiamma
import fiamma.array_api as xp

rng = np.random.default_rng(0)


def A(v, dtype=None):
    return xp.asarray(v, dtype=dtype)


def close(a, b, rtol=1e-6, atol=1e-9):
    assert type(a) is fiamma.Tensor
    b = np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a.numpy(), b, rtol=rtol, atol=atol)


X = rng.standard_normal((3, 4))
Y = rng.standard_normal((3, 4))


@pytest.mark.parametrize("name", ["abs", "acos", "asinh", "atan", "ceil", "cos", "exp",
                                  "expm1", "floor", "isfinite", "log1p", "negative",
                                  "positive", "round", "sign", "signbit", "sin", "sqrt",
                                  "square", "tanh", "trunc", "reciprocal"])
def test_unary_against_numpy(name):
    v = np.clip(X, -0.9, 0.9) if name in ("acos",) else X
    v = np.abs(v) if name in ("sqrt", "log1p") else v
    close(getattr(xp, name)(A(v)), getattr(np, name)(v))


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "atan2", "hypot",
                                  "copysign", "logaddexp", "maximum", "minimum", "pow",
                                  "remainder", "floor_divide", "equal", "less", "greater_equal",
                                  "nextafter"])
def test_binary_against_numpy(name):
    a, b = (np.abs(X), Y) if name == "pow" else (X, Y)
    close(getattr(xp, name)(A(a), A(b)), getattr(np, name)(a, b))
    # with a Python scalar on either side
    close(getattr(xp, name)(A(a), 0.5), getattr(np, name)(a, 0.5))
    close(getattr(xp, name)(0.5, A(np.abs(b))), getattr(np, name)(0.5, np.abs(b)))


def test_integer_and_bool_functions():
    i = np.array([-7, -1, 0, 3, 8], dtype=np.int16)
    j = np.array([2, 3, 5, -2, 3], dtype=np.int8)
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor", "remainder", "floor_divide"):
        r = getattr(xp, name)(A(i), A(j))
        assert r.dtype is xp.int16
        close(r, getattr(np, name)(i, j))
    close(xp.bitwise_left_shift(A(i), A([1, 2, 0, 3, 1], xp.int16)),
          np.left_shift(i, np.array([1, 2, 0, 3, 1], np.int16)))
    close(xp.bitwise_invert(A(i)), np.invert(i))
    assert xp.bitwise_invert(A([True, False])).tolist() == [False, True]
    for name in ("ceil", "floor", "round", "trunc"):
        r = getattr(xp, name)(A(i))
        assert r.dtype is xp.int16 and r.tolist() == i.tolist()
    b1, b2 = np.array([True, False, True]), np.array([True, True, False])
    for name in ("logical_and", "logical_or", "logical_xor"):
        close(getattr(xp, name)(A(b1), A(b2)), getattr(np, name)(b1, b2))


def test_special_values():
    v = np.array([np.nan, -np.inf, -0.0, 0.0, np.inf, -2.5, 2.5])
    close(xp.sign(A(v)), np.sign(v))
    close(xp.round(A([0.5, 1.5, 2.5, -0.5])), np.round([0.5, 1.5, 2.5, -0.5]))
    assert xp.signbit(A([-0.0, 0.0])).tolist() == [True, False]
    inf = np.inf
    a = np.array([inf, inf, -inf, 3.0, -3.0, 7.0, -7.0, -0.0, 0.0])
    b = np.array([2.0, -2.0, 2.0, -inf, inf, 2.0, 2.0, 1.0, -1.0])
    # IEEE quotients with infinite operands (PyTorch's floor_divide gives NaN there)
    np.testing.assert_array_equal(xp.floor_divide(A(a), A(b)).numpy(),
                                  [inf, -inf, -inf, -0.0, -0.0, 3.0, -4.0, -0.0, -0.0])
    r = xp.remainder(A(a), A(b)).numpy()
    np.testing.assert_array_equal(r[3:], np.remainder(a, b)[3:])
    assert np.signbit(r[-2:]).tolist() == [False, True]  # a zero takes the divisor's sign
    assert xp.nextafter(A(0.0), A(1.0)).shape == ()
    t = xp.tanh(A([complex(inf, 8.2e152), complex(-inf, -3.0), 0.5 + 0.25j], xp.complex128))
    t = t.numpy()
    assert t[0] == 1 and not np.signbit(t[0].imag) and t[1] == -1 and np.signbit(t[1].imag)
    np.testing.assert_allclose(t[2], np.tanh(0.5 + 0.25j), rtol=1e-12)
    z = np.array([complex(np.inf, 0), complex(-np.inf, np.inf), complex(np.nan, 0),
                  1e-10 + 1e-10j, 1 + 2j])
    r = xp.expm1(A(z, xp.complex128)).numpy()
    assert r[0] == complex(np.inf, 0) and r[1] == -1 and np.isnan(r[2].real) and r[2].imag == 0
    np.testing.assert_allclose(r[3:], [1e-10 + 1e-10j, np.expm1(1 + 2j)], rtol=1e-9)


def test_complex_functions():
    z = X + 1j * Y
    for name in ("real", "imag", "conj", "abs", "exp", "sqrt", "sign"):
        close(getattr(xp, name)(A(z)), getattr(np, name)(z), rtol=1e-5)
    close(xp.real(A(X)), X)
    close(xp.imag(A(X)), np.zeros_like(X))


def test_clip():
    close(xp.clip(A(X), -0.5, 0.5), np.clip(X, -0.5, 0.5))
    close(xp.clip(A(X), min=A(Y)), np.clip(X, Y, None))
    close(xp.clip(A([1, 5, 9], xp.int8), 2), [2, 5, 9])
    x = A([1.0])
    assert xp.clip(x) is not x


# ---- statistical and utility -----------------------------------------------------------------

@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 1), ()])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_against_numpy(axis, keepdims):
    kw = dict(axis=axis, keepdims=keepdims)
    for name in ("sum", "prod", "max", "min", "mean"):
        close(getattr(xp, name)(A(X), **kw), getattr(np, name)(X, **kw))
    close(xp.std(A(X), correction=1, **kw), np.std(X, ddof=1, **kw))
    close(xp.var(A(X), **kw), np.var(X, **kw))
    b = X > 0
    close(xp.all(A(b), **kw), np.all(b, **kw))
    close(xp.any(A(b), **kw), np.any(b, **kw))


def test_reduction_dtypes():
    i8 = A([[1, 2], [3, 4]], xp.int8)
    assert xp.sum(i8).dtype is xp.int64 and xp.prod(i8, axis=0).dtype is xp.int64
    assert xp.sum(i8, dtype=xp.int8).dtype is xp.int8
    assert xp.sum(A([1.0], xp.float32)).dtype is xp.float32
    assert xp.sum(A([True, True])).item() == 2
    assert xp.max(i8).dtype is xp.int8
    with pytest.raises(ValueError, match="zero-size"):
        xp.max(xp.zeros(0))


def test_cumulative_and_diff():
    close(xp.cumulative_sum(A(X), axis=1), np.cumsum(X, axis=1))
    close(xp.cumulative_sum(A([1, 2, 3]), include_initial=True), [0, 1, 3, 6])
    close(xp.cumulative_prod(A(X), axis=0, include_initial=True),
          np.concatenate([np.ones((1, 4)), np.cumprod(X, axis=0)]))
    assert xp.cumulative_sum(A([1, 2], xp.int8)).dtype is xp.int64
    with pytest.raises(ValueError, match="axis is required"):
        xp.cumulative_sum(A(X))
    close(xp.diff(A(X), axis=0), np.diff(X, axis=0))
    close(xp.diff(A([1, 4, 9, 16]), n=2), np.diff([1, 4, 9, 16], n=2))
    close(xp.diff(A([1, 4]), prepend=A([0]), append=A([10])), [1, 3, 6])


# ---- manipulation, indexing ------------------------------------------------------------------

def test_manipulation_against_numpy():
    close(xp.concat([A(X), A(Y)], axis=1), np.concatenate([X, Y], axis=1))
    close(xp.concat([A(X), A(Y)], axis=None), np.concatenate([X, Y], axis=None))
    assert xp.concat([A([1], xp.int8), A([2], xp.int16)]).dtype is xp.int16
    close(xp.stack([A(X), A(Y)], axis=-1), np.stack([X, Y], axis=-1))
    close(xp.expand_dims(A(X), axis=-1), np.expand_dims(X, -1))
    close(xp.permute_dims(A(X), (1, 0)), X.T)
    close(xp.flip(A(X)), np.flip(X))
    close(xp.flip(A(X), axis=1), np.flip(X, axis=1))
    close(xp.moveaxis(A(X), 0, 1), np.moveaxis(X, 0, 1))
    close(xp.roll(A(X), 2), np.roll(X, 2))
    close(xp.roll(A(X), (1, -1), axis=(0, 1)), np.roll(X, (1, -1), axis=(0, 1)))
    close(xp.repeat(A(X), 2, axis=0), np.repeat(X, 2, axis=0))
    close(xp.repeat(A([1, 2]), A([1, 3])), np.repeat([1, 2], [1, 3]))
    close(xp.tile(A(X), (2, 1)), np.tile(X, (2, 1)))
    close(xp.squeeze(A(X[None]), axis=0), X)
    with pytest.raises(ValueError, match="not 1"):
        xp.squeeze(A(X), axis=0)
    close(xp.reshape(A(X), (4, 3)), X.reshape(4, 3))
    with pytest.raises(ValueError, match="copy=False"):
        xp.reshape(xp.permute_dims(A(X), (1, 0)), (12,), copy=False)
    parts = xp.unstack(A(X), axis=1)
    assert isinstance(parts, tuple) and len(parts) == 4
    close(parts[2], X[:, 2])
    a, b = xp.broadcast_arrays(A([1, 2]), A([[1], [2], [3]]))
    assert a.shape == b.shape == (3, 2)
    close(xp.matrix_transpose(A(X)), X.T)


def test_take_and_take_along_axis():
    idx = np.array([2, 0, -1])
    close(xp.take(A(X), A(idx), axis=1), np.take(X, idx, axis=1))
    close(xp.take(A([5, 6, 7]), A([2, 0])), [7, 5])
    order = np.argsort(X, axis=1)
    close(xp.take_along_axis(A(X), A(order), axis=1), np.take_along_axis(X, order, axis=1))


# ---- searching, sorting, sets ----------------------------------------------------------------

def test_searching_and_sorting():
    close(xp.argmax(A(X), axis=1), np.argmax(X, axis=1))
    close(xp.argmin(A(X)), np.argmin(X))
    close(xp.argmax(A(X), keepdims=True), np.argmax(X, keepdims=True))
    nz = xp.nonzero(A(X > 0))
    assert isinstance(nz, tuple) and len(nz) == 2
    for got, want in zip(nz, np.nonzero(X > 0)):
        close(got, want)
    with pytest.raises(ValueError, match="zero-dimensional"):
        xp.nonzero(A(1))
    close(xp.where(A(X > 0), A(X), 0.0), np.where(X > 0, X, 0.0))
    close(xp.count_nonzero(A(X > 0), axis=0), np.count_nonzero(X > 0, axis=0))
    s = np.sort(X.ravel())
    close(xp.searchsorted(A(s), A([0.0, 1.0])), np.searchsorted(s, [0.0, 1.0]))
    close(xp.searchsorted(A([1, 2, 2, 3]), A([2]), side="right"), [3])
    v = np.array([3, 1, 2, 1, 3, 1])
    assert type(xp.sort(A(v))) is fiamma.Tensor
    close(xp.sort(A(v)), np.sort(v))
    close(xp.sort(A(X), axis=0, descending=True), -np.sort(-X, axis=0))
    close(xp.argsort(A(v)), np.argsort(v, stable=True))
    # stable descending keeps equal elements in their original order
    close(xp.argsort(A(v), descending=True), [0, 4, 2, 1, 3, 5])


def test_unique_functions():
    v = np.array([[3.0, 1.0, np.nan], [1.0, 3.0, np.nan]])
    r = xp.unique_all(A(v))
    assert r._fields == ("values", "indices", "inverse_indices", "counts")
    # each NaN is distinct
    np.testing.assert_array_equal(r.values.numpy(), [1.0, 3.0, np.nan, np.nan])
    close(r.indices, [1, 0, 2, 5])
    close(r.counts, [2, 2, 1, 1])
    assert r.inverse_indices.shape == v.shape
    np.testing.assert_array_equal(r.values.numpy()[r.inverse_indices.numpy()], v)
    w = np.array([4, 2, 4, 4, 0])
    vals, counts = xp.unique_counts(A(w))
    close(vals, [0, 2, 4])
    close(counts, [1, 1, 3])
    vals, inv = xp.unique_inverse(A(w))
    close(inv, np.unique(w, return_inverse=True)[1])
    close(xp.unique_values(A(w)), np.unique(w))
    assert xp.unique_values(xp.zeros(0)).shape == (0,)
    c = np.array([2 + 1j, 1 + 5j, 2 + 1j, 2 - 1j, 1 + 5j])
    r = xp.unique_all(A(c))
    close(r.values, [1 + 5j, 2 - 1j, 2 + 1j])
    close(r.indices, [1, 3, 0])
    close(r.counts, [2, 1, 2])
    np.testing.assert_array_equal(r.values.numpy()[r.inverse_indices.numpy()], c)


# ---- linear algebra ---------------------------------------------------------------------------

M = rng.standard_normal((2, 3, 3))
SPD = M @ np.swapaxes(M, -1, -2) + 3 * np.eye(3)
Z = M + 1j * rng.standard_normal((2, 3, 3))


def test_main_namespace_linear_algebra():
    close(xp.matmul(A(X), A(Y.T)), X @ Y.T)
    close(xp.tensordot(A(X), A(Y), axes=([1], [1])), np.tensordot(X, Y, axes=([1], [1])))
    close(xp.vecdot(A(X), A(Y)), np.vecdot(X, Y))
    close(xp.vecdot(A(X), A(Y), axis=0), np.vecdot(X, Y, axis=0))
    close(xp.vecdot(A(Z[0]), A(Z[1])), np.vecdot(Z[0], Z[1]))  # conjugates x1
    assert xp.vecdot(A([1, 2], xp.uint8), A([3, 4], xp.uint8)).dtype is xp.uint8
    with pytest.raises(ValueError, match="vecdot"):
        xp.vecdot(A(X), A(Y.T))


def test_linalg_against_numpy():
    la = xp.linalg
    close(la.cholesky(A(SPD)), np.linalg.cholesky(SPD))
    close(la.cholesky(A(SPD), upper=True), np.linalg.cholesky(SPD, upper=True))
    close(la.det(A(M)), np.linalg.det(M))
    close(la.inv(A(M)), np.linalg.inv(M), rtol=1e-5)
    close(la.diagonal(A(M), offset=1), np.linalg.diagonal(M, offset=1))
    close(la.trace(A(M), offset=-1), np.linalg.trace(M, offset=-1))
    w, _ = la.eigh(A(SPD))
    close(w, np.linalg.eigh(SPD).eigenvalues)
    close(la.eigvalsh(A(SPD)), np.linalg.eigvalsh(SPD))
    for ord in ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf):
        close(la.matrix_norm(A(M), ord=ord), np.linalg.matrix_norm(M, ord=ord), rtol=1e-5)
    close(la.matrix_power(A(M), 3), np.linalg.matrix_power(M, 3), rtol=1e-5)
    close(la.matrix_rank(A(M)), np.linalg.matrix_rank(M))
    close(la.pinv(A(X)), np.linalg.pinv(X), rtol=1e-5)
    q, r = la.qr(A(X.T))
    close(xp.matmul(q, r), X.T)
    s = la.slogdet(A(M))
    s_np = np.linalg.slogdet(M)
    close(s.sign, s_np.sign)
    close(s.logabsdet, s_np.logabsdet)
    b = rng.standard_normal(3)
    close(la.solve(A(M), A(b)), np.linalg.solve(M, b[..., None])[..., 0], rtol=1e-5)
    u, sv, vh = la.svd(A(X), full_matrices=False)
    close(sv, np.linalg.svd(X, compute_uv=False))
    close(la.svdvals(A(X)), np.linalg.svdvals(X))
    close(la.cross(A(X[:, :3]), A(Y[:, :3])), np.cross(X[:, :3], Y[:, :3]))
    close(la.outer(A(X[0]), A(Y[0])), np.outer(X[0], Y[0]))
    for ord in (2, 1, math.inf, 0, -math.inf):
        close(la.vector_norm(A(X), axis=1, ord=ord), np.linalg.vector_norm(X, axis=1, ord=ord))
    close(la.vector_norm(A(X), axis=(0, 1), keepdims=True),
          np.linalg.vector_norm(X, axis=(0, 1), keepdims=True))


def test_linalg_complex():
    la = xp.linalg
    H = Z @ np.conj(np.swapaxes(Z, -1, -2)) + 3 * np.eye(3)
    close(la.cholesky(A(H)), np.linalg.cholesky(H))
    close(la.cholesky(A(H), upper=True), np.linalg.cholesky(H, upper=True))
    with pytest.raises(fiamma.linalg.LinAlgError, match="positive-definite"):
        la.cholesky(A(-H))
    for ord in ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf):
        close(la.matrix_norm(A(Z), ord=ord), np.linalg.matrix_norm(Z, ord=ord), rtol=1e-6)
    close(la.pinv(A(Z)), np.linalg.pinv(Z), rtol=1e-6)
    close(la.matrix_rank(A(Z)), np.linalg.matrix_rank(Z))
    s, ld = la.slogdet(A(Z))
    s_np, ld_np = np.linalg.slogdet(Z)
    close(s, s_np)
    close(ld, ld_np)
    singular = np.array([[1 + 1j, 0], [2 - 1j, 0]])
    s, ld = la.slogdet(A(singular))
    assert s.item() == 0 and ld.item() == -math.inf


# ---- fft -------------------------------------------------------------------------------------

def test_fft_against_numpy():
    f = xp.fft
    x32 = A(X, xp.float32)
    r = f.fft(x32)
    assert r.dtype is xp.complex64
    close(r, np.fft.fft(X), rtol=1e-4, atol=1e-5)
    close(f.fft(A(X), n=6, axis=0, norm="ortho"), np.fft.fft(X, n=6, axis=0, norm="ortho"))
    close(f.ifft(A(X + 1j * Y)), np.fft.ifft(X + 1j * Y))
    close(f.fftn(A(X)), np.fft.fftn(X))
    close(f.ifftn(A(X), axes=(0,)), np.fft.ifftn(X, axes=(0,)))
    close(f.rfft(A(X), axis=0), np.fft.rfft(X, axis=0))
    close(f.irfft(f.rfft(A(X)), n=4), X)
    close(f.rfftn(A(X)), np.fft.rfftn(X))
    close(f.irfftn(A(np.fft.rfftn(X)), s=X.shape), X)
    close(f.hfft(A(X[0] + 1j * Y[0])), np.fft.hfft(X[0] + 1j * Y[0]))
    close(f.ihfft(A(X[0])), np.fft.ihfft(X[0]))
    close(f.fftfreq(5, d=0.5, dtype=xp.float64), np.fft.fftfreq(5, d=0.5))
    close(f.rfftfreq(6, dtype=xp.float64), np.fft.rfftfreq(6))
    close(f.fftshift(A(X), axes=(1,)), np.fft.fftshift(X, axes=(1,)))
    close(f.ifftshift(A(X)), np.fft.ifftshift(X))
    with pytest.raises(ValueError, match="norm"):
        f.fft(A(X), norm="bogus")
    with pytest.raises(TypeError, match="real floating"):
        f.rfft(A(X + 1j))
