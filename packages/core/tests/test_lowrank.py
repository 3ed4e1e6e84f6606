"""torch.svd_lowrank / torch.pca_lowrank (fiamma.svd_lowrank, fiamma.pca_lowrank and
fiamma.functional.*): the randomized range finder recovers low-rank matrices, shapes, batches,
complex, M and centering, argument errors; singular values against NumPy and PyTorch."""

import numpy as np
import pytest

import fiamma
import fiamma.functional as TF


def _low_rank(shape, r, seed=0, cplx=False, dtype=np.float64):
    rng = np.random.default_rng(seed)
    *lead, m, n = shape

    def draw(*s):
        x = rng.standard_normal(s)
        return x + 1j * rng.standard_normal(s) if cplx else x

    return (draw(*lead, m, r) @ draw(*lead, r, n)).astype(np.complex128 if cplx else dtype)


def _recon(U, S, V):
    return (U * S.unsqueeze(-2).to(U.dtype)) @ V.mH


def _orthonormal(Q, atol):
    k = Q.shape[-1]
    gram = (Q.mH @ Q).numpy()
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(k), gram.shape), atol=atol)


@pytest.mark.parametrize("shape", [(40, 12), (12, 40), (3, 30, 20), (2, 2, 15, 25)])
@pytest.mark.parametrize("cplx", [False, True])
def test_recovers_a_low_rank_matrix(shape, cplx):
    fiamma.manual_seed(1)
    a = _low_rank(shape, 4, seed=2, cplx=cplx)
    U, S, V = fiamma.svd_lowrank(fiamma.tensor(a), q=6)
    m, n = shape[-2:]
    assert U.shape == shape[:-2] + (m, 6) and S.shape == shape[:-2] + (6,)
    assert V.shape == shape[:-2] + (n, 6)
    assert S.dtype == fiamma.float64 and U.dtype == V.dtype == fiamma.tensor(a).dtype
    np.testing.assert_allclose(_recon(U, S, V).numpy(), a, atol=1e-9)
    ref = np.linalg.svd(a, compute_uv=False)[..., :6]
    np.testing.assert_allclose(S.numpy(), ref, atol=1e-9)
    _orthonormal(U, 1e-10)
    _orthonormal(V, 1e-10)


def test_approximates_a_full_rank_matrix_with_a_decaying_spectrum():
    """A matrix with singular values 2^-i: q = 8 with the default two subspace iterations
    gets the leading values to a few digits and the rank-8 error close to the optimum."""
    rng = np.random.default_rng(3)
    u, _ = np.linalg.qr(rng.standard_normal((200, 60)))
    v, _ = np.linalg.qr(rng.standard_normal((80, 60)))
    s = 2.0 ** -np.arange(60)
    a = (u * s) @ v[:, :60].T
    fiamma.manual_seed(4)
    U, S, V = fiamma.svd_lowrank(fiamma.tensor(a), q=8)
    np.testing.assert_allclose(S.numpy()[:4], s[:4], rtol=1e-6)
    err = np.linalg.norm(_recon(U, S, V).numpy() - a, 2)
    assert err < 4 * s[8]


def test_float32_and_defaults():
    fiamma.manual_seed(5)
    a = _low_rank((30, 20), 3, seed=6, dtype=np.float32)
    U, S, V = fiamma.svd_lowrank(fiamma.tensor(a))  # q = 6, niter = 2
    assert (U.dtype, S.dtype) == (fiamma.float32, fiamma.float32)
    assert U.shape == (30, 6)
    np.testing.assert_allclose(_recon(U, S, V).numpy(), a, atol=1e-4)
    U, S, V = TF.svd_lowrank(fiamma.tensor(a), q=None, niter=None)  # None: the defaults
    assert S.shape == (6,)
    U, S, V = fiamma.svd_lowrank(fiamma.tensor(a), q=3, niter=0)  # exact rank: no iteration
    np.testing.assert_allclose(_recon(U, S, V).numpy(), a, atol=1e-4)


def test_q_beyond_the_matrix_gives_min_m_n_columns():
    fiamma.manual_seed(7)
    a = np.random.default_rng(8).standard_normal((5, 3))
    U, S, V = fiamma.svd_lowrank(fiamma.tensor(a), q=10)
    assert U.shape == (5, 3) and S.shape == (3,) and V.shape == (3, 3)
    np.testing.assert_allclose(S.numpy(), np.linalg.svd(a, compute_uv=False), atol=1e-12)


def test_mean_argument_and_pca():
    rng = np.random.default_rng(9)
    a = _low_rank((50, 10), 3, seed=10) + rng.standard_normal(10) * 5  # offset columns
    c = a - a.mean(0)
    fiamma.manual_seed(11)
    U, S, V = fiamma.pca_lowrank(fiamma.tensor(a), q=4)
    np.testing.assert_allclose(S.numpy(), np.linalg.svd(c, compute_uv=False)[:4], atol=1e-9)
    np.testing.assert_allclose(_recon(U, S, V).numpy(), c, atol=1e-9)
    # the principal directions: V's leading columns span the centred rows' top subspace
    vt = np.linalg.svd(c)[2][:3]
    np.testing.assert_allclose(np.abs(vt @ V.numpy()[:, :3]), np.eye(3), atol=1e-8)
    M = fiamma.tensor(a.mean(0, keepdims=True))  # broadcast to A's shape
    U2, S2, V2 = fiamma.svd_lowrank(fiamma.tensor(a), q=4, M=M)
    np.testing.assert_allclose(S2.numpy(), S.numpy(), atol=1e-9)
    np.testing.assert_allclose(_recon(U2, S2, V2).numpy(), c, atol=1e-9)
    # center=False: the SVD of A itself; q defaults to min(6, m, n)
    U, S, V = TF.pca_lowrank(fiamma.tensor(a), center=False)
    assert S.shape == (6,)
    np.testing.assert_allclose(S.numpy()[:4], np.linalg.svd(a, compute_uv=False)[:4],
                               atol=1e-9)
    assert fiamma.pca_lowrank(fiamma.tensor(a[:4, :3]))[1].shape == (3,)


def test_batched_pca_and_sparse_input():
    fiamma.manual_seed(12)
    a = _low_rank((3, 20, 8), 2, seed=13)
    U, S, V = fiamma.pca_lowrank(fiamma.tensor(a), q=3)
    c = a - a.mean(-2, keepdims=True)
    np.testing.assert_allclose(S.numpy(), np.linalg.svd(c, compute_uv=False)[:, :3],
                               atol=1e-9)
    sp = fiamma.tensor(a[0]).to_sparse()
    U, S, V = fiamma.pca_lowrank(sp, q=3)
    np.testing.assert_allclose(S.numpy(), np.linalg.svd(c[0], compute_uv=False)[:3],
                               atol=1e-9)


def test_bad_arguments():
    a = fiamma.randn(6, 4)
    with pytest.raises(ValueError, match=r"q\(=5\) must be non-negative integer and not "
                                         r"greater than min\(m, n\)=4"):
        fiamma.pca_lowrank(a, q=5)
    with pytest.raises(ValueError, match=r"niter\(=-1\)"):
        fiamma.pca_lowrank(a, niter=-1)
    with pytest.raises(ValueError, match=r"svd_lowrank: q\(=-2\)"):
        fiamma.svd_lowrank(a, q=-2)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        fiamma.svd_lowrank(fiamma.randn(5))
    with pytest.raises(RuntimeError, match="floating point or complex"):
        fiamma.svd_lowrank(fiamma.ones(4, 4, dtype=fiamma.int64))
    with pytest.raises(RuntimeError, match="does not broadcast"):
        fiamma.svd_lowrank(a, M=fiamma.randn(3, 4))
    with pytest.raises(TypeError, match="expected A to be a Tensor"):
        fiamma.svd_lowrank(np.ones((3, 3)))


@pytest.mark.parity
def test_singular_values_match_torch():
    torch = pytest.importorskip("torch")
    a = _low_rank((2, 30, 12), 5, seed=14)
    torch.manual_seed(0)
    fiamma.manual_seed(0)
    for mine, theirs in [
        (fiamma.svd_lowrank(fiamma.tensor(a), q=7), torch.svd_lowrank(torch.tensor(a), q=7)),
        (fiamma.pca_lowrank(fiamma.tensor(a)), torch.pca_lowrank(torch.tensor(a))),
        (TF.pca_lowrank(fiamma.tensor(a), q=5, center=False),
         torch.functional.pca_lowrank(torch.tensor(a), q=5, center=False)),
    ]:
        assert [tuple(t.shape) for t in mine] == [tuple(t.shape) for t in theirs]
        np.testing.assert_allclose(mine[1].numpy(), theirs[1].numpy(), atol=1e-9)
        np.testing.assert_allclose(_recon(*mine).numpy(),
                                   (theirs[0] * theirs[1].unsqueeze(-2)
                                    @ theirs[2].mH).numpy(), atol=1e-9)
