"""First and second derivatives of the composed linear-algebra functions (matrix_exp,
householder_product, cholesky_solve / cholesky_inverse, tensorinv, tensorsolve, vander) against
finite differences (float64)."""

import numpy as np
from _formula_check import check

import fiamma
import fiamma.linalg as L


def _t(a):
    return fiamma.tensor(a, dtype=fiamma.float64).requires_grad_()


def test_matrix_exp_grad_small_and_scaled():
    rng = np.random.default_rng(1)
    check(L.matrix_exp, _t(rng.standard_normal((2, 3, 3)) * 0.3))
    # norm above the Pade bound: scaling and squaring in the graph
    check(L.matrix_exp, _t(rng.standard_normal((3, 3)) * 4.0))


def test_householder_product_grad():
    rng = np.random.default_rng(2)
    check(L.householder_product, _t(rng.standard_normal((4, 3))), _t(rng.standard_normal(2)))


def test_cholesky_solve_inverse_grad():
    rng = np.random.default_rng(3)
    lo = np.tril(rng.standard_normal((3, 3))) + 3 * np.eye(3)
    check(lambda b, c: fiamma.cholesky_solve(b, c), _t(rng.standard_normal((3, 2))), _t(lo))
    check(lambda c: fiamma.cholesky_inverse(c, upper=True), _t(lo.T.copy()))


def test_tensor_inv_solve_vander_grad():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((4, 2, 2)) + 3 * np.eye(4).reshape(4, 2, 2)
    check(lambda x: L.tensorinv(x, ind=1), _t(a))
    check(L.tensorsolve, _t(a.reshape(2, 2, 4)), _t(rng.standard_normal((2, 2))))
    check(lambda x: L.vander(x, N=4), _t(rng.standard_normal(3)))
