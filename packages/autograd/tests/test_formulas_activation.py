"""Derivatives of core's fused gelu (one recorded op, backward one fused op) and of its
backward (double backward), checked numerically in float64."""

import pytest

import fiamma
from fiamma.autograd import gradcheck, gradgradcheck


def _x():
    # spread over the interesting range, away from nothing in particular: gelu is smooth
    return (fiamma.linspace(-5, 5, 23, dtype=fiamma.float64) + 0.013).requires_grad_()


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_gradcheck(approximate):
    assert gradcheck(lambda x: fiamma.gelu(x, approximate), (_x(),))
    assert gradgradcheck(lambda x: fiamma.gelu(x, approximate), (_x(),))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward_gradcheck(approximate):
    g = fiamma.randn(23, dtype=fiamma.float64).requires_grad_()
    assert gradcheck(lambda g, x: fiamma.gelu_backward(g, x, approximate), (g, _x()))
    assert gradgradcheck(lambda g, x: fiamma.gelu_backward(g, x, approximate), (g, _x()))


def test_gelu_third_order():
    x = _x()
    (g1,) = fiamma.autograd.grad(fiamma.gelu(x).sum(), x, create_graph=True)
    (g2,) = fiamma.autograd.grad(g1.sum(), x, create_graph=True)
    (g3,) = fiamma.autograd.grad(g2.sum(), x)
    # gelu'' = phi(x) (2 - x^2), so gelu''' = phi(x) (x^3 - 4x)
    xd = x.detach()
    phi = (-0.5 * xd * xd).exp() / (2 * 3.141592653589793) ** 0.5
    assert fiamma.allclose(g3, phi * (xd ** 3 - 4 * xd), rtol=1e-10, atol=1e-12)


def test_gelu_is_one_recorded_op():
    x = _x()
    y = fiamma.gelu(x)
    assert type(y.grad_fn).__name__ == "GeluBackward0"
    assert y.grad_fn.next_functions[0][0] is x.grad_fn or \
        type(y.grad_fn.next_functions[0][0]).__name__ == "AccumulateGrad"
    y.sum().backward()
    assert fiamma.allclose(x.grad, fiamma.gelu_backward(fiamma.ones_like(x), x.detach()))


def test_gelu_float32_input_grad_dtype():
    x = fiamma.randn(5).requires_grad_()
    fiamma.gelu(x, approximate="tanh").sum().backward()
    assert x.grad.dtype is fiamma.float32


def test_relu_backward_gradcheck():
    x = _x()
    assert gradcheck(fiamma.relu, (x,))
    assert gradgradcheck(fiamma.relu, (x,))
    g = fiamma.randn(23, dtype=fiamma.float64).requires_grad_()
    # linear in g, piecewise constant (zero gradient) in the output
    assert gradcheck(lambda g, y: fiamma.relu_backward(g, y), (g, _x()))
    (gx,) = fiamma.autograd.grad(fiamma.relu(x).sum(), x, create_graph=True)
    assert gx.tolist() == [1.0 if v > 0 else 0.0 for v in x.detach().tolist()]
