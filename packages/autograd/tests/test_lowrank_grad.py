"""First and second derivatives through fiamma.svd_lowrank / pca_lowrank (matmul, linalg.qr,
linalg.svd): finite differences with the random test matrix fixed by seeding inside the
function, and the closed form of the singular values' gradient."""

import numpy as np
import pytest
from _formula_check import check

import fiamma

pytestmark = pytest.mark.skipif(not hasattr(fiamma, "svd_lowrank"), reason="no svd_lowrank")


def _seeded(fn):
    def run(*args):
        fiamma.manual_seed(0)
        return fn(*args)

    return run


def _leaf(shape, seed):
    a = np.random.default_rng(seed).standard_normal(shape)
    return fiamma.tensor(a, dtype=fiamma.float64).requires_grad_()


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (2, 5, 4)])
def test_svd_lowrank_derivatives(shape):
    a = _leaf(shape, 1)
    check(_seeded(lambda t: fiamma.svd_lowrank(t, q=3)[1]), a)

    def recon(t):
        U, S, V = fiamma.svd_lowrank(t, q=2, niter=1)
        return (U * S.unsqueeze(-2)) @ V.mT   # independent of the vectors' signs

    check(_seeded(recon), a)


def test_pca_lowrank_and_mean_derivatives():
    a = _leaf((7, 4), 2)
    check(_seeded(lambda t: fiamma.pca_lowrank(t, q=3)[1]), a)
    m = _leaf((1, 4), 3)
    check(_seeded(lambda t, mu: fiamma.svd_lowrank(t, q=3, M=mu)[1]), a, m)


def test_full_rank_singular_values_gradient_is_u_vt():
    """With q = min(m, n) the basis spans A's range: S are A's singular values and
    d sum(S) / dA = U V^T, as for linalg.svdvals."""
    a = _leaf((8, 5), 4)
    fiamma.manual_seed(1)
    (g,) = fiamma.autograd.grad(fiamma.svd_lowrank(a, q=5)[1].sum(), a)
    (ref,) = fiamma.autograd.grad(fiamma.linalg.svdvals(a).sum(), a)
    np.testing.assert_allclose(g.numpy(), ref.numpy(), atol=1e-10)
