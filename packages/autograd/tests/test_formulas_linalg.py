"""First and second derivatives of fiamma.linalg against finite differences (float64).
Decompositions whose result is only defined up to sign or symmetric part are checked through
functions that are well defined (e.g. eigh of a symmetrized matrix, squared eigenvectors).
Skipped where core does not have fiamma.linalg yet."""

import numpy as np
import pytest
from _formula_check import check, rand

import fiamma

try:
    import fiamma.linalg as L
except (ImportError, AttributeError):
    L = None

pytestmark = pytest.mark.skipif(L is None or not hasattr(L, "inv"),
                                reason="fiamma.linalg is not available")


def _well_conditioned(*batch, n=3, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + (n, n)) + 3 * np.eye(n)
    return fiamma.tensor(a, dtype=fiamma.float64).requires_grad_()


def _spd(x):
    n = x.shape[-1]
    return fiamma.matmul(x, x.transpose(-2, -1)) + fiamma.eye(n, dtype=fiamma.float64)


def test_inv_det_slogdet():
    a = _well_conditioned(seed=1)
    check(L.inv, a)
    check(lambda t: L.inv_ex(t)[0], a)
    check(L.det, a)
    check(lambda t: L.slogdet(t)[1], a)
    b = _well_conditioned(2, seed=2)
    check(L.inv, b)
    check(L.det, b)
    check(lambda t: L.inv(t.transpose(-2, -1)), b)  # non-contiguous


@pytest.mark.parametrize("n", [0, 1, 3, -2])
def test_matrix_power(n):
    a = fiamma.tensor(np.random.default_rng(3).standard_normal((3, 3)) * 0.5 + np.eye(3),
                      dtype=fiamma.float64).requires_grad_()
    check(lambda t: L.matrix_power(t, n), a)


@pytest.mark.parametrize("left", [True, False])
def test_solve(left):
    rng = np.random.default_rng(4)
    a = _well_conditioned(seed=4)
    check(lambda x, y: L.solve(x, y, left=left), a, rand(3, 2, rng=rng) if left else
          rand(2, 3, rng=rng))
    check(lambda x, y: L.solve(x, y, left=left), a, rand(3, rng=rng))
    check(lambda x, y: L.solve(x, y), _well_conditioned(2, seed=5), rand(3, 1, rng=rng))


@pytest.mark.parametrize("upper,left,unit", [(True, True, False), (False, True, False),
                                             (True, False, False), (False, True, True)])
def test_solve_triangular(upper, left, unit):
    rng = np.random.default_rng(6)
    a = _well_conditioned(seed=6)
    b = rand(3, 2, rng=rng) if left else rand(2, 3, rng=rng)
    check(lambda x, y: L.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit),
          a, b)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(upper):
    x = rand(3, 3, seed=7)
    check(lambda t: L.cholesky(_spd(t), upper=upper), x)
    check(lambda t: L.cholesky_ex(_spd(t))[0], x)


def test_eigh_eigvalsh_svdvals():
    rng = np.random.default_rng(8)
    x = rand(3, 3, rng=rng)
    sym = lambda t: t + t.transpose(-2, -1)  # noqa: E731
    check(lambda t: L.eigh(sym(t))[0], x)
    w = fiamma.arange(9.0, dtype=fiamma.float64).view(3, 3)
    check(lambda t: (L.eigh(sym(t))[1] ** 2 * w).sum(), x)  # sign-free eigenvector use
    check(lambda t: L.eigvalsh(sym(t)), x)
    check(L.svdvals, rand(3, 2, rng=rng))
    check(L.svdvals, rand(2, 2, 4, rng=rng))


def test_cross():
    rng = np.random.default_rng(9)
    check(L.cross, rand(2, 3, rng=rng), rand(2, 3, rng=rng))
    check(lambda a, b: L.cross(a, b, dim=0), rand(3, 2, rng=rng), rand(3, 1, rng=rng))


@pytest.mark.parametrize("ord_", ["fro", "nuc", 2, -2, 1, -1, float("inf"), -float("inf")])
def test_matrix_norm(ord_):
    rng = np.random.default_rng(10)
    check(lambda t: L.matrix_norm(t, ord_), rand(3, 4, rng=rng))
    check(lambda t: L.matrix_norm(t, ord_, dim=(0, 2), keepdim=True), rand(3, 2, 4, rng=rng))


@pytest.mark.parametrize("shape,full", [((3, 3), False), ((4, 2), False), ((2, 4), False),
                                        ((4, 2), True)])
def test_svd(shape, full):
    rng = np.random.default_rng(11)
    x = rand(*shape, rng=rng)
    w = fiamma.tensor(rng.standard_normal(shape), dtype=fiamma.float64)
    check(lambda t: L.svd(t, full_matrices=full)[1], x)
    # sign-free uses of the singular vectors
    check(lambda t: ((lambda u, s, vh: fiamma.matmul(u[:, :1] * s[:1], vh[:1]))(
        *L.svd(t, full_matrices=full)) * w).sum(), x)
    check(lambda t: (L.svd(t, full_matrices=full)[0][:, :2] ** 2).sum(0), x)


@pytest.mark.parametrize("shape", [(3, 3), (4, 2)])
def test_qr(shape):
    rng = np.random.default_rng(12)
    x = rand(*shape, rng=rng)
    check(lambda t: L.qr(t)[0] ** 2, x)
    check(lambda t: L.qr(t)[1] ** 2, x)
    check(lambda t: fiamma.matmul(*L.qr(t)) * 2, x)


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4)])
def test_pinv_lstsq_cond(shape):
    rng = np.random.default_rng(13)
    x = rand(*shape, rng=rng)
    check(L.pinv, x)
    if shape[0] >= shape[1]:
        check(lambda a, b: L.lstsq(a, b).solution, x, rand(shape[0], 2, rng=rng))
    check(lambda t: L.cond(t), x)
    check(lambda t: L.cond(t, -2), x)


@pytest.mark.parametrize("cplx", [False, True])
def test_eigh_gradient_is_hermitian(cplx):
    """eigh reads A as Hermitian: its gradient is the Hermitian one (as PyTorch), whose
    Hermitian part is the only part that matters; was V (F o V^H gV) V^H, not Hermitian."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 3)) + (1j * rng.standard_normal((2, 3, 3)) if cplx else 0)
    a = a + np.conj(np.swapaxes(a, -1, -2))
    t = fiamma.tensor(a).requires_grad_()
    for uplo in ("L", "U"):
        w, v = L.eigh(t, UPLO=uplo)
        recon = v @ (w.to(v.dtype).unsqueeze(-1) * v.mH)  # depends on V (phase-free)
        w8 = fiamma.tensor(np.cos(np.arange(18.0)).reshape(2, 3, 3))
        (g,) = fiamma.autograd.grad((recon.real * w8).sum() + (w * w8[..., 0]).sum(), t)
        g = g.numpy()
        np.testing.assert_allclose(g, np.conj(np.swapaxes(g, -1, -2)), atol=1e-12)
        # V diag(w) V^H = A: the gradient of the reconstruction is Herm(weights)
        wn = w8.numpy()
        want = (wn + wn.swapaxes(-1, -2)) / 2 + 0j
        v_np = v.detach().numpy()
        want = want + v_np @ (np.eye(3) * wn[..., 0][..., None, :]) @ np.conj(
            np.swapaxes(v_np, -1, -2))
        np.testing.assert_allclose(g, want if cplx else want.real, atol=1e-10)


@pytest.mark.parametrize("p", ["fro", "nuc", 1, -1, np.inf, -np.inf])
def test_cond_every_p(p):
    """cond's derivative for every p (was NotImplementedError but for None / +-2)."""
    check(lambda t: L.cond(t, p), _well_conditioned(2, seed=7))


@pytest.mark.parity
@pytest.mark.parametrize("cplx", [False, True])
def test_eigh_cond_gradients_match_torch(cplx):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 3)) + (1j * rng.standard_normal((3, 3)) if cplx else 0)
    h = a + np.conj(a.T)
    wts = np.cos(np.arange(9.0)).reshape(3, 3)
    got = []
    for lib in (fiamma, torch):
        t = lib.tensor(h).requires_grad_()
        v = lib.linalg.eigh(t)[1]
        loss = (v.abs() * lib.tensor(wts)).sum()
        c = lib.tensor(a).requires_grad_()
        got.append([x.detach().resolve_conj().numpy() for x in (
            lib.autograd.grad(loss, t)[0], lib.autograd.grad(lib.linalg.cond(c, "nuc"), c)[0])])
    for x, y in zip(*got):
        np.testing.assert_allclose(x, y, atol=1e-10)


def test_lstsq_residuals_differentiable():
    """lstsq's residuals carry a gradient (as PyTorch's; they were constants)."""
    rng = np.random.default_rng(8)
    a, b = rand(2, 5, 3, rng=rng), rand(2, 5, 2, rng=rng)
    check(lambda x, y: L.lstsq(x, y, driver="gelsd").residuals, a, b)
    check(lambda x, y: L.lstsq(x, y, driver="gels").residuals, rand(4, 2, rng=rng),
          rand(4, rng=rng))


@pytest.mark.parametrize("a", [
    [[0.0]],
    [[0.0, 0.0], [0.0, 0.0]],
    [[1.0, 2.0], [2.0, 4.0]],                                  # rank 1
    [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]],       # rank 2
    [[0.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 3.0]],
    [[[1.0, 2.0], [2.0, 4.0]], [[0.5, -1.0], [2.0, 3.0]]],     # a batch, one singular
])
def test_det_gradient_of_singular_matrices_is_the_cofactor_matrix(a):
    an = np.array(a)
    x = fiamma.tensor(an, dtype=fiamma.float64, requires_grad=True)
    (g,) = fiamma.autograd.grad(fiamma.linalg.det(x).sum(), x)
    # the cofactor matrix, by finite differences (det is a polynomial: central differences
    # are exact up to rounding)
    flat = an.reshape(-1, *an.shape[-2:])
    ref = np.zeros_like(flat)
    for b in range(flat.shape[0]):
        for i, j in np.ndindex(*flat.shape[1:]):
            hi, lo = flat[b].copy(), flat[b].copy()
            hi[i, j] += 1e-3
            lo[i, j] -= 1e-3
            ref[b, i, j] = (np.linalg.det(hi) - np.linalg.det(lo)) / 2e-3
    assert np.allclose(g.numpy().reshape(ref.shape), ref, atol=1e-8)
    assert np.isfinite(g.numpy()).all()
