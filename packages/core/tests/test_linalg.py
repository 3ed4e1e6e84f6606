"""fiamma.linalg against NumPy's LAPACK / float64 identities: random shapes incl. batched,
broadcast, non-contiguous and empty, float32 and float64; PyTorch's result conventions
(lstsq's residuals/rank/singular_values, qr modes, slogdet, inv_ex/cholesky_ex info);
LinAlgError on singular / non-PD input; dtype errors; fiamma.norm(p='nuc')."""

import math

import numpy as np
import pytest
from conftest import CallRecorder, assert_close, to_numpy
from hypothesis import assume, given, settings, strategies as st

import fiamma
from fiamma import linalg as LA

SETTINGS = settings(max_examples=25, deadline=None)
FLOATS = [fiamma.float32, fiamma.float64]
TOL = {fiamma.float32: 2e-4, fiamma.float64: 1e-10}


def T(a, dtype=fiamma.float64, layout="contiguous"):
    """A fiamma tensor of ``a``'s values: contiguous, transposed in memory (the last two dims
    swapped) or strided (every other element of a larger buffer)."""
    a = np.asarray(a)
    npdt = np.float32 if dtype is fiamma.float32 else np.float64
    if layout == "transposed" and a.ndim >= 2:
        return fiamma.from_numpy(np.ascontiguousarray(np.swapaxes(a, -1, -2)).astype(npdt)) \
            .transpose(-1, -2)
    if layout == "strided" and a.ndim >= 1:
        big = np.zeros(tuple(2 * s for s in a.shape), npdt)
        big[tuple(slice(None, None, 2) for _ in a.shape)] = a
        return fiamma.from_numpy(big)[tuple(slice(None, None, 2) for _ in a.shape)]
    return fiamma.from_numpy(np.array(a, dtype=npdt))


def well_conditioned(rng, batch, n):
    return rng.standard_normal(batch + (n, n)) + n * np.eye(n)


def spd(rng, batch, n):
    a = rng.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


cases = dict(batch=st.sampled_from([(), (2,), (3, 1), (0,)]), n=st.integers(0, 5),
             dtype=st.sampled_from(FLOATS),
             layout=st.sampled_from(["contiguous", "transposed", "strided"]),
             seed=st.integers(0, 2 ** 16))


def close(t, want, dtype, scale=1.0):
    assert t.dtype is dtype
    assert_close(t, want, dtype, rtol=TOL[dtype] * scale, atol=TOL[dtype] * scale)


@SETTINGS
@given(**cases)
def test_inv_det_slogdet(batch, n, dtype, layout, seed):
    rng = np.random.default_rng(seed)
    a = well_conditioned(rng, batch, n)
    A = T(a, dtype, layout)
    close(LA.inv(A), np.linalg.inv(a), dtype, 10)
    close(LA.det(A), np.linalg.det(a), dtype, 10 * max(1.0, float(np.abs(np.linalg.det(a)).max(
        initial=1.0))))
    s, l = LA.slogdet(A)
    ws, wl = np.linalg.slogdet(a)
    close(s, ws, dtype)
    close(l, wl, dtype, 10)
    inv, info = LA.inv_ex(A)
    assert info.dtype is fiamma.int32 and info.shape == batch and not info.numpy().any()


@SETTINGS
@given(**cases, k=st.integers(1, 3), vec=st.booleans(), left=st.booleans())
def test_solve(batch, n, dtype, layout, seed, k, vec, left):
    rng = np.random.default_rng(seed)
    a = well_conditioned(rng, batch, n)
    A = T(a, dtype, layout)
    if vec:
        b = rng.standard_normal((n,))
        want = np.linalg.solve(a, np.broadcast_to(b, batch + (n,))[..., None])[..., 0] if left \
            else np.linalg.solve(np.swapaxes(a, -1, -2), np.broadcast_to(b, batch + (n,))[
                ..., None])[..., 0]
    else:
        b = rng.standard_normal((n, k) if left else (k, n))
        assume(b.shape != a.shape[:-1])  # that B is a batch of vectors (PyTorch's rule)
        want = np.linalg.solve(a, b) if left else np.swapaxes(
            np.linalg.solve(np.swapaxes(a, -1, -2), b.T), -1, -2)
    X = LA.solve(A, T(b, dtype, layout), left=left)
    close(X, want, dtype, 20)


def test_solve_broadcast_batch_and_vector_rule():
    rng = np.random.default_rng(0)
    a = well_conditioned(rng, (2, 1), 3)
    b = rng.standard_normal((4, 3, 2))
    X = LA.solve(T(a), T(b))
    assert X.shape == (2, 4, 3, 2)
    np.testing.assert_allclose(to_numpy(X), np.linalg.solve(a, b), rtol=1e-10)
    # B with shape A.shape[:-1] is a batch of vectors
    bv = rng.standard_normal((2, 1, 3))
    Xv = LA.solve(T(a), T(bv))
    assert Xv.shape == (2, 1, 3)
    np.testing.assert_allclose(to_numpy(Xv), np.linalg.solve(a, bv[..., None])[..., 0])
    with pytest.raises(RuntimeError, match="linalg.solve: Incompatible shapes"):
        LA.solve(T(a), T(np.ones((4, 2))))


def test_singular_raises_linalg_error():
    s = np.array([[[1.0, 2.0], [2.0, 4.0]], [[1.0, 0.0], [0.0, 1.0]]])
    s = s[::-1].copy()  # the singular one is batch element 1
    assert issubclass(LA.LinAlgError, RuntimeError)
    with pytest.raises(LA.LinAlgError, match=r"linalg.inv: \(Batch element 1\): The diagonal "
                                             r"element 2 is zero"):
        LA.inv(T(s))
    with pytest.raises(LA.LinAlgError, match="linalg.solve"):
        LA.solve(T(s), T(np.ones((2, 2))))
    inv, info = LA.inv_ex(T(s))
    assert info.tolist() == [0, 2]
    with pytest.raises(LA.LinAlgError):
        LA.inv_ex(T(s), check_errors=True)
    assert LA.det(T(s)).tolist()[1] == 0.0
    sign, logabs = LA.slogdet(T(s))
    assert sign.tolist()[1] == 0.0 and logabs.tolist()[1] == -math.inf


@SETTINGS
@given(**cases, upper=st.booleans())
def test_cholesky(batch, n, dtype, layout, seed, upper):
    rng = np.random.default_rng(seed)
    a = spd(rng, batch, n)
    L = LA.cholesky(T(a, dtype, layout), upper=upper)
    want = np.linalg.cholesky(a)
    close(L, np.swapaxes(want, -1, -2) if upper else want, dtype, 10)
    L2, info = LA.cholesky_ex(T(a, dtype, layout))
    assert not info.numpy().any()


def test_cholesky_not_pd():
    a = np.array([[4.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])  # minor of order 2 is 0
    with pytest.raises(LA.LinAlgError, match="linalg.cholesky: .*leading minor of order 2"):
        LA.cholesky(T(a))
    _, info = LA.cholesky_ex(T(np.stack([np.eye(3), a])))
    assert info.tolist() == [0, 2]


@SETTINGS
@given(batch=st.sampled_from([(), (2,), (0,)]), m=st.integers(0, 5), n=st.integers(0, 5),
       dtype=st.sampled_from(FLOATS), layout=st.sampled_from(["contiguous", "transposed"]),
       seed=st.integers(0, 2 ** 16), full=st.booleans())
def test_qr_svd_pinv_rank(batch, m, n, dtype, layout, seed, full):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + (m, n))
    A = T(a, dtype, layout)
    k = min(m, n)
    Q, R = LA.qr(A)
    assert Q.shape == batch + (m, k) and R.shape == batch + (k, n)
    close(fiamma.matmul(Q, R), a, dtype, 10)
    Qc, Rc = LA.qr(A, mode="complete")
    assert Qc.shape == batch + (m, m) and Rc.shape == batch + (m, n)
    close(fiamma.matmul(Qc, Rc), a, dtype, 10)
    Qr, Rr = LA.qr(A, mode="r")
    assert Qr.numel() == 0 and Rr.shape == batch + (k, n)
    U, S, Vh = LA.svd(A, full_matrices=full)
    assert U.shape == batch + (m, m if full else k) and Vh.shape == batch + (n if full else k, n)
    close(S, np.linalg.svd(a, compute_uv=False) if a.size else np.zeros(batch + (k,)), dtype, 10)
    close(LA.svdvals(A), to_numpy(S), dtype, 10)
    if a.size:
        us = to_numpy(U)[..., :, :k] * to_numpy(S)[..., None, :]
        close(T(us @ to_numpy(Vh)[..., :k, :], dtype), a, dtype, 10)
        close(LA.pinv(A), np.linalg.pinv(a), dtype, 100)
        assert LA.matrix_rank(A).tolist() == np.linalg.matrix_rank(a).tolist()
    else:
        assert LA.pinv(A).shape == batch + (n, m)


def test_pinv_tolerances_and_hermitian():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 3)) @ np.diag([1.0, 1e-3, 1e-9]) @ rng.standard_normal((3, 3))
    full = LA.pinv(T(a))
    np.testing.assert_allclose(to_numpy(full), np.linalg.pinv(a, rcond=4 * 2.2e-16), rtol=1e-5)
    cut = LA.pinv(T(a), rtol=1e-6)
    np.testing.assert_allclose(to_numpy(cut), np.linalg.pinv(a, rcond=1e-6), rtol=1e-8)
    assert LA.matrix_rank(T(a)).item() == 3
    assert LA.matrix_rank(T(a), atol=1.0, rtol=0.0).item() == np.sum(
        np.linalg.svd(a, compute_uv=False) > 1.0)
    sv = np.linalg.svd(a, compute_uv=False)
    assert LA.matrix_rank(T(a), hermitian=False, tol=1e-2).item() == np.sum(sv > 1e-2)
    assert LA.matrix_rank(T(a), rtol=1e-6).item() == np.sum(sv > 1e-6 * sv[0])
    s = spd(rng, (), 4)
    np.testing.assert_allclose(to_numpy(LA.pinv(T(s), hermitian=True)), np.linalg.inv(s),
                               rtol=1e-8)
    assert LA.matrix_rank(T(s), hermitian=True).item() == 4
    np.testing.assert_allclose(to_numpy(LA.pinv(T(a), rcond=1e-6)), to_numpy(cut))


@SETTINGS
@given(batch=st.sampled_from([(), (2,)]), m=st.integers(1, 6), n=st.integers(1, 4),
       k=st.integers(1, 3), dtype=st.sampled_from(FLOATS), seed=st.integers(0, 2 ** 16),
       driver=st.sampled_from([None, "gels", "gelsy", "gelsd", "gelss"]))
def test_lstsq(batch, m, n, k, dtype, seed, driver):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + (m, n))
    b = rng.standard_normal(batch + (m, k))
    sol, res, rank, sv = LA.lstsq(T(a, dtype), T(b, dtype), driver=driver)
    flat_a = a.reshape((-1, m, n))
    flat_b = b.reshape((-1, m, k))
    want = np.stack([np.linalg.lstsq(x, y, rcond=None)[0] for x, y in zip(flat_a, flat_b)])
    close(sol, want.reshape(batch + (n, k)), dtype, 100)
    if m > n and driver not in (None, "gelsy"):  # PyTorch's gelsy gives no residuals
        wr = np.sum((flat_a @ want - flat_b) ** 2, axis=1).reshape(batch + (k,))
        close(res, wr, dtype, 100)
    else:
        assert res.numel() == 0
    if driver == "gels":
        assert rank.numel() == 0
    else:
        assert rank.dtype is fiamma.int64 and rank.tolist() == np.full(batch, min(m, n)).tolist()
    if driver in ("gelsd", "gelss"):
        close(sv, np.linalg.svd(a, compute_uv=False), dtype, 10)
    else:
        assert sv.numel() == 0


@SETTINGS
@given(**cases, uplo=st.sampled_from(["L", "U"]))
def test_eigh(batch, n, dtype, layout, seed, uplo):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + (n, n))
    w, v = LA.eigh(T(a, dtype, layout), UPLO=uplo)
    ww, wv = np.linalg.eigh(a, UPLO=uplo)
    close(w, ww, dtype, 10)
    close(LA.eigvalsh(T(a, dtype, layout), UPLO=uplo), ww, dtype, 10)
    sym = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2) if uplo == "L" else \
        np.triu(a) + np.swapaxes(np.triu(a, 1), -1, -2)
    vv = to_numpy(v)
    close(T(vv * to_numpy(w)[..., None, :] @ np.swapaxes(vv, -1, -2), dtype), sym, dtype, 100)


@SETTINGS
@given(**cases)
def test_eig(batch, n, dtype, layout, seed):
    """A V = V diag(w) for general real matrices (complex results), unit eigenvectors,
    eigenvalues equal NumPy's; eigvals agrees; float32 gives complex64."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + (n, n))
    A = T(a, dtype, layout)
    w, v = LA.eig(A)
    cdt = fiamma.complex64 if dtype is fiamma.float32 else fiamma.complex128
    assert w.dtype is cdt and v.dtype is cdt
    assert tuple(w.shape) == batch + (n,) and tuple(v.shape) == batch + (n, n)
    wc = to_numpy(w)
    vc = to_numpy(v)
    ac = to_numpy(A).astype(np.float64)
    tol = 1e-4 if dtype is fiamma.float32 else 1e-10
    scale = max(1.0, float(np.abs(a).max(initial=0.0))) * max(n, 1)
    assert np.abs(ac @ vc - vc * wc[..., None, :]).max(initial=0) <= tol * scale
    if n:
        np.testing.assert_allclose(np.linalg.norm(vc, axis=-2), 1.0, atol=tol * 10)
    ww = np.linalg.eigvals(ac)
    np.testing.assert_allclose(np.sort_complex(wc.reshape(-1)), np.sort_complex(ww.reshape(-1)),
                               atol=tol * scale)
    wv = LA.eigvals(A)
    np.testing.assert_array_equal(to_numpy(wv), to_numpy(w))


def test_eig_cases_and_errors():
    w, v = LA.eig(T(np.array([[0.0, -1.0], [1.0, 0.0]])))
    assert sorted(w.tolist(), key=lambda z: z.imag) == [-1j, 1j]
    w = LA.eigvals(T(np.diag([3.0, -2.0, 5.0])))
    assert sorted(w.real.tolist()) == [-2.0, 3.0, 5.0] and w.imag.abs().max().item() == 0
    outw, outv = fiamma.empty(0, dtype=fiamma.cdouble), fiamma.empty(0, dtype=fiamma.cdouble)
    r = LA.eig(T(np.eye(3)), out=(outw, outv))
    assert r.eigenvalues is outw and tuple(outv.shape) == (3, 3)
    ev, evec = LA.eigh(T(np.eye(2) * 2), out=(fiamma.empty(0), fiamma.empty(0)))
    assert ev.tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match="linalg.eig: A must be batches of square"):
        LA.eig(T(np.ones((2, 3))))
    with pytest.raises(RuntimeError, match="linalg.eigvals: Expected a floating point"):
        LA.eigvals(fiamma.ones(2, 2, dtype=fiamma.int64))
    with pytest.raises(fiamma.linalg.LinAlgError, match="linalg.eig"):
        LA.eig(T(np.array([[np.nan, 1.0], [0.0, 1.0]])))
    with pytest.raises(TypeError, match="linalg.eig: out must be a tuple"):
        LA.eig(T(np.eye(2)), out=fiamma.empty(0))


def test_eig_records_gradients():
    pytest.importorskip("fiamma.autograd")
    x = T(np.array([[2.0, 1.0], [0.0, 3.0]])).requires_grad_()
    w, v = LA.eig(x)
    assert w.requires_grad and v.requires_grad and LA.eigvals(x).requires_grad
    w.real.sum().backward()  # d trace(A) / dA = I
    np.testing.assert_allclose(x.grad.numpy(), np.eye(2), atol=1e-12)
    with fiamma.no_grad():
        assert LA.eigvals(x).shape == (2,) and not LA.eigvals(x).requires_grad


@SETTINGS
@given(shape=st.sampled_from([(3, 4), (2, 3, 3), (4, 1), (0, 3), (2, 0, 2)]),
       ord=st.sampled_from(["fro", "nuc", math.inf, -math.inf, 1, -1, 2, -2]),
       dtype=st.sampled_from(FLOATS), keepdim=st.booleans(),
       layout=st.sampled_from(["contiguous", "transposed", "strided"]),
       seed=st.integers(0, 2 ** 16), swap=st.booleans())
def test_matrix_norm(shape, ord, dtype, keepdim, layout, seed, swap):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    dim = (-1, -2) if swap else (-2, -1)
    try:
        if ord in ("nuc", 2) and 0 in shape[-2:]:
            want = np.zeros(shape[:-2] + ((1, 1) if keepdim else ()))
        elif ord == -2 and 0 in shape[-2:]:
            raise ValueError
        else:
            want = np.linalg.norm(a, ord, axis=dim, keepdims=keepdim)
    except ValueError:  # a min over an empty axis: PyTorch raises too
        with pytest.raises(RuntimeError, match="linalg.matrix_norm"):
            LA.matrix_norm(T(a, dtype, layout), ord, dim)
        return
    got = LA.matrix_norm(T(a, dtype, layout), ord, dim, keepdim)
    close(got, want, dtype, 10)


@SETTINGS
@given(shape=st.sampled_from([(5,), (3, 4), (2, 3, 4), (0,), ()]),
       ord=st.sampled_from([2, 1, 0, 3.5, math.inf, -math.inf, -1]),
       dtype=st.sampled_from(FLOATS), seed=st.integers(0, 2 ** 16))
def test_vector_norm_and_norm(shape, ord, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    flat = a.reshape(-1)
    if flat.size == 0 and ord in (math.inf, -math.inf, -1):
        return
    with np.errstate(divide="ignore"):
        want = np.linalg.norm(flat, ord)
    close(LA.vector_norm(T(a, dtype), ord), want, dtype, 10)
    if len(shape) >= 2:
        close(LA.vector_norm(T(a, dtype), ord, dim=(0, 1)), np.linalg.norm(
            a.reshape((-1,) + shape[2:]), ord, axis=0), dtype, 10)
    close(LA.norm(T(a, dtype)), np.linalg.norm(flat), dtype, 10)
    if len(shape) == 2 and ord in (2, 1, math.inf, -math.inf, -1):
        close(LA.norm(T(a, dtype), ord), np.linalg.norm(a, ord), dtype, 10)
    if len(shape) == 1:
        close(LA.norm(T(a, dtype), ord), want, dtype, 10)


def test_norm_dispatch_and_core_nuc():
    a = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_allclose(to_numpy(LA.norm(T(a), "fro", dim=(1, 2))),
                               np.linalg.norm(a, "fro", axis=(1, 2)))
    np.testing.assert_allclose(to_numpy(LA.norm(T(a), dim=(0, 2))),
                               np.linalg.norm(a, axis=(0, 2)))
    np.testing.assert_allclose(to_numpy(LA.norm(T(a), 3, dim=1)),
                               np.linalg.norm(a, 3, axis=1))
    with pytest.raises(RuntimeError, match="linalg.norm"):
        LA.norm(T(a), 2)
    m = np.arange(12.0).reshape(3, 4)
    assert fiamma.norm(T(m), p="nuc").item() == pytest.approx(np.linalg.norm(m, "nuc"))
    assert fiamma.norm(T(a), p="nuc", dim=(0, 1)).shape == (4,)
    np.testing.assert_allclose(to_numpy(LA.cond(T(m[:, :3] + np.eye(3)))),
                               np.linalg.cond(m[:, :3] + np.eye(3)), rtol=1e-10)
    np.testing.assert_allclose(to_numpy(LA.cond(T(m[:, :3] + np.eye(3)), 1)),
                               np.linalg.cond(m[:, :3] + np.eye(3), 1), rtol=1e-10)


@pytest.mark.parametrize("n", [0, 1, 2, 5, -1, -3])
def test_matrix_power(n):
    rng = np.random.default_rng(n + 10)
    a = well_conditioned(rng, (2,), 3)
    close(LA.matrix_power(T(a), n), np.linalg.matrix_power(a, n), fiamma.float64, 100)
    ai = np.arange(9).reshape(3, 3)
    if n >= 0:
        got = LA.matrix_power(fiamma.tensor(ai), n)
        assert got.dtype is fiamma.int64
        assert got.tolist() == np.linalg.matrix_power(ai, n).tolist()


def test_multi_dot_cross_vecdot_matmul_diagonal():
    rng = np.random.default_rng(5)
    ms = [rng.standard_normal(s) for s in [(4,), (4, 10), (10, 2), (2, 7), (7,)]]
    got = LA.multi_dot([T(m) for m in ms])
    assert got.shape == ()
    np.testing.assert_allclose(got.item(), np.linalg.multi_dot(ms), rtol=1e-10)
    mats = ms[1:4]
    np.testing.assert_allclose(to_numpy(LA.multi_dot([T(m) for m in mats])),
                               np.linalg.multi_dot(mats), rtol=1e-10)
    with pytest.raises(RuntimeError, match="multi_dot"):
        LA.multi_dot([T(ms[1]), T(ms[1])])
    a = rng.standard_normal((4, 3))
    b = rng.standard_normal((3,))
    np.testing.assert_allclose(to_numpy(LA.cross(T(a), T(b[None]))), np.cross(a, b))
    np.testing.assert_allclose(to_numpy(LA.cross(T(a.T), T(b[:, None]), dim=0)),
                               np.cross(a.T, b[:, None], axis=0))
    ai = fiamma.tensor([[1, 0, 0]])
    assert LA.cross(ai, fiamma.tensor([[0, 1, 0]])).tolist() == [[0, 0, 1]]
    with pytest.raises(RuntimeError, match="linalg.cross"):
        LA.cross(T(np.ones((2, 4))), T(np.ones((2, 4))))
    np.testing.assert_allclose(to_numpy(LA.vecdot(T(a), T(b))), a @ b)
    assert LA.matmul is fiamma.matmul
    d = LA.diagonal(T(np.arange(24.0).reshape(2, 3, 4)), offset=1)
    np.testing.assert_array_equal(to_numpy(d), np.diagonal(np.arange(24.0).reshape(2, 3, 4),
                                                           1, -2, -1))


def test_dtype_and_shape_errors():
    h = fiamma.ones(2, 2, dtype=fiamma.float16)
    with pytest.raises(RuntimeError, match="linalg.inv: Low precision dtypes not supported. "
                                           "Got Half"):
        LA.inv(h)
    with pytest.raises(RuntimeError, match="linalg.det: Expected a floating point"):
        LA.det(fiamma.ones(2, 2, dtype=fiamma.int64))
    with pytest.raises(RuntimeError, match="linalg.inv: A must be batches of square matrices, "
                                           "but they are 2 by 3 matrices"):
        LA.inv(fiamma.ones(2, 3))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        LA.svd(fiamma.ones(3))
    with pytest.raises(TypeError, match="linalg.qr"):
        LA.qr([[1.0]])
    with pytest.raises(RuntimeError, match="linalg.qr"):
        LA.qr(fiamma.ones(2, 2), mode="economic")
    with pytest.raises(RuntimeError, match="linalg.solve: Expected A and B to have the same"):
        LA.solve(fiamma.eye(2), fiamma.ones(2, dtype=fiamma.float64))
    with pytest.raises(RuntimeError, match="linalg.eigh"):
        LA.eigh(fiamma.eye(2), UPLO="X")
    with pytest.raises(RuntimeError, match="linalg.vector_norm"):
        LA.vector_norm(fiamma.ones(3, dtype=fiamma.int32))


def test_out_and_float32_results():
    a = np.array([[2.0, 1.0], [1.0, 3.0]], np.float32)
    out = fiamma.empty(0)
    r = LA.inv(fiamma.from_numpy(a), out=out)
    assert r is out and out.shape == (2, 2) and out.dtype is fiamma.float32
    np.testing.assert_allclose(to_numpy(out), np.linalg.inv(a), rtol=1e-6)
    assert LA.det(fiamma.from_numpy(a)).dtype is fiamma.float32


def test_autograd_recording_names():
    with CallRecorder.installed() as rec:
        A = T(np.eye(3) * 2).requires_grad_()
        LA.inv(A)
        LA.det(A)
        LA.cholesky(A, upper=True)
        LA.matrix_norm(A, "nuc")
        fiamma.fft.rfft(A)
        fiamma.stft(T(np.ones(32)).requires_grad_(), 8)
        LA.det(T(np.eye(2)))  # no grad: not recorded
        names = [c[0] for c in rec.calls]
        assert names == ["linalg_inv", "linalg_det", "linalg_cholesky", "linalg_matrix_norm",
                         "fft_rfft", "stft"]
        assert rec.calls[2][1] == (A,) and rec.calls[2][2] == {"upper": True}


def test_vector_norm_dtype_and_half():
    x = fiamma.tensor([3.0, 4.0], dtype=fiamma.float16)
    assert LA.vector_norm(x).dtype is fiamma.float16
    assert LA.vector_norm(x).item() == 5.0
    r = LA.vector_norm(fiamma.tensor([3.0, 4.0]), dtype=fiamma.float64)
    assert r.dtype is fiamma.float64 and r.item() == 5.0


def test_solver_shapes_found_by_the_torch_fuzz():
    """solve_triangular's B is always a matrix (a B shaped like A.shape[:-1] is not a batch of
    vectors, as it is for solve); solve_ex on singular input keeps solve's broadcast shape;
    lstsq's default driver gives no residuals; cross wants inputs of one rank."""
    rng = np.random.default_rng(0)
    a = np.triu(rng.standard_normal((2, 2, 2))) + 3 * np.eye(2)
    b = rng.standard_normal((2, 2))
    x = LA.solve_triangular(T(a), T(b), upper=True)
    assert tuple(x.shape) == (2, 2, 2)
    close(x, np.linalg.solve(a, np.broadcast_to(b, (2, 2, 2))), fiamma.float64, 10)
    sing = np.array([[1.0, 2.0], [2.0, 4.0]])
    for A, B, left, shape in [((3, 2, 2), (2,), True, (3, 2)), ((2, 1, 2, 2), (2, 2, 2), True,
                                                                (2, 2, 2, 2)),
                              ((3, 2, 2), (4, 2), False, (3, 4, 2))]:
        r, info = LA.solve_ex(T(np.broadcast_to(sing, A)), T(rng.standard_normal(B)), left=left)
        assert tuple(r.shape) == shape and (info.numpy() > 0).all()
    a = rng.standard_normal((5, 3))
    for driver, nres in [(None, 0), ("gelsy", 0), ("gelsd", 2), ("gels", 2)]:
        assert LA.lstsq(T(a), T(rng.standard_normal((5, 2))), driver=driver).residuals.numel() \
            == nres
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        LA.cross(T(rng.standard_normal((2, 3))), T(rng.standard_normal(3)))


def test_matrix_norm_low_precision_and_cond_of_empty_matrices():
    """matrix_norm takes float16 / bfloat16 for the norms without an SVD (fro, +-1, +-inf;
    PyTorch's rule), result in the input's dtype; cond of an empty matrix is 0."""
    a = np.array([[2.0, 1.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0]])
    for dt in (fiamma.float16, fiamma.bfloat16):
        t = fiamma.tensor(a).to(dt)
        for o in ("fro", 1, -1, math.inf, -math.inf):
            r = LA.matrix_norm(t, o)
            assert r.dtype is dt
            assert r.float().item() == pytest.approx(np.linalg.norm(a, o), rel=1e-2)
        for o in ("nuc", 2, -2):
            with pytest.raises(RuntimeError, match="Low precision"):
                LA.matrix_norm(t, o)
    for p in (None, 2, -2, 1, math.inf):
        assert LA.cond(T(np.zeros((2, 0, 0))), p).tolist() == [0.0, 0.0]
        assert LA.cond(T(np.zeros((3, 0))), p).item() == 0.0
    with pytest.raises(RuntimeError, match="square"):
        LA.cond(T(np.zeros((3, 0))), "fro")


@pytest.mark.parametrize("cplx", [False, True])
def test_cholesky_upper_reads_the_upper_triangle(cplx):
    """cholesky(upper=True) / cholesky_ex(upper=True) read A's upper triangle, as PyTorch (they
    read the lower one: a non-Hermitian A with a PD upper triangle was refused)."""
    rng = np.random.default_rng(3)
    b = rng.standard_normal((2, 3, 3)) + (1j * rng.standard_normal((2, 3, 3)) if cplx else 0)
    s = b @ np.conj(np.swapaxes(b, -1, -2)) + 3 * np.eye(3)
    want = np.conj(np.swapaxes(np.linalg.cholesky(s), -1, -2))
    junk = s.copy()
    junk[..., 2, 0] = 100.0  # the lower triangle: not read
    t = fiamma.tensor(junk)
    np.testing.assert_allclose(LA.cholesky(t, upper=True).numpy(), want, atol=1e-12)
    u, info = LA.cholesky_ex(t, upper=True)
    np.testing.assert_allclose(u.numpy(), want, atol=1e-12)
    assert info.tolist() == [0, 0]
    junk = s.copy()
    junk[..., 0, 2] = 100.0  # the upper triangle: not read without upper
    np.testing.assert_allclose(LA.cholesky(fiamma.tensor(junk)).numpy(),
                               np.linalg.cholesky(s), atol=1e-12)


@pytest.mark.parity
def test_solver_result_shapes_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    sing = np.array([[1.0, 2.0], [2.0, 4.0]])
    cases = [((2, 2, 2), (2, 2), {"upper": True}), ((3, 2, 2), (2, 3), {"upper": False}),
             ((2, 1, 2, 2), (2, 2, 2), {"upper": True, "left": False})]
    for a_shape, b_shape, kw in cases:
        a = np.triu(rng.standard_normal(a_shape)) + 3 * np.eye(2)
        b = rng.standard_normal(b_shape)
        want = torch.linalg.solve_triangular(torch.tensor(a), torch.tensor(b), **kw)
        got = LA.solve_triangular(T(a), T(b), **kw)
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10)
    for a_shape, b_shape in [((3, 2, 2), (2,)), ((2, 1, 2, 2), (2, 2, 2)), ((3, 2, 2), (3, 2))]:
        a = np.broadcast_to(sing, a_shape).copy()
        b = rng.standard_normal(b_shape)
        want = torch.linalg.solve_ex(torch.tensor(a), torch.tensor(b))
        got = LA.solve_ex(T(a), T(b))
        assert tuple(got.result.shape) == tuple(want.result.shape)
        assert got.info.tolist() == want.info.tolist()
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    for driver in (None, "gelsy", "gelsd", "gelss", "gels"):
        want = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
        got = LA.lstsq(T(a), T(b), driver=driver)
        assert got.residuals.numel() == want.residuals.numel()
