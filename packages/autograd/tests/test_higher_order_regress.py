"""Regressions from the higher-order / forward-mode differential fuzz against PyTorch 2.13:
tangents and second derivatives at the points where a gradient formula special-cases its
inputs. References are analytic float64 values (or finite differences)."""

import math

import numpy as np

import fiamma
import fiamma.autograd.forward_ad as fwAD

D = fiamma.float64


def _tangent(f, primals, tangents):
    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, t) for p, t in zip(primals, tangents)]
        return fwAD.unpack_dual(f(*duals)).tangent


def test_xlogy_tangent_at_zero_y_is_infinite():
    # d/dx xlogy(x, y) = log(y): -inf at y == 0 for x != 0 (0 where x == 0, PyTorch's rule).
    x = fiamma.tensor([0.5, -1.5, 2.0, 0.0], dtype=D)
    y = fiamma.tensor([0.0, 0.0, 3.0, 0.0], dtype=D)
    t = fiamma.tensor([1.0, 2.0, 1.0, 1.0], dtype=D)
    tan = _tangent(lambda a: fiamma.special.xlogy(a, y), [x], [t]).numpy()
    np.testing.assert_array_equal(tan[:2], [-math.inf, -math.inf])
    np.testing.assert_allclose(tan[2], math.log(3.0))
    # xlog1py likewise at y == -1
    tan = _tangent(lambda a: fiamma.special.xlog1py(a, y - 1), [x], [t]).numpy()
    np.testing.assert_array_equal(tan[:2], [-math.inf, -math.inf])
    np.testing.assert_allclose(tan[2], math.log(3.0))


def test_logit_tangent_outside_unit_interval_is_nan():
    x = fiamma.tensor([0.3, 1.2, -0.5], dtype=D)
    t = fiamma.ones(3, dtype=D)
    tan = _tangent(fiamma.logit, [x], [t]).numpy()
    np.testing.assert_allclose(tan[0], 1 / (0.3 * 0.7))
    assert np.isnan(tan[1:]).all()
    # with eps the gradient (and tangent) is 0 outside [eps, 1 - eps]
    tan = _tangent(lambda a: fiamma.logit(a, 0.1), [x], [t]).numpy()
    np.testing.assert_allclose(tan, [1 / (0.3 * 0.7), 0.0, 0.0])
