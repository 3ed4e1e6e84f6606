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


def test_float32_exact_gelu_derivative_from_the_forward_pass():
    # a recorded float32 exact gelu computes gelu'(x) in its forward pass; the backward is
    # then grad * d, bit for bit what gelu_backward gives, and higher orders still work
    x = fiamma.randn(300, 7) * 4
    x[0, :5] = fiamma.tensor([float("inf"), -float("inf"), -20.0, 20.0, 0.0])
    x.requires_grad_()
    g = fiamma.randn(300, 7)
    y = fiamma.gelu(x)
    fused = getattr(x._storage.backend, "gelu_fwd_grad", None) is not None  # (C backend)
    assert ("_grad" in y.grad_fn.kwargs) == fused
    y.backward(g)
    assert fiamma.equal(x.grad, fiamma.gelu_backward(g, x.detach()))
    assert fiamma.equal(y.detach(), fiamma.gelu(x.detach()))
    x64 = _x()
    x32 = x64.detach().float().requires_grad_()
    (g1,) = fiamma.autograd.grad(fiamma.gelu(x32).sum(), x32, create_graph=True)
    (g2,) = fiamma.autograd.grad(g1.sum(), x32)
    (r1,) = fiamma.autograd.grad(fiamma.gelu(x64).sum(), x64, create_graph=True)
    (r2,) = fiamma.autograd.grad(r1.sum(), x64)
    assert fiamma.allclose(g2.double(), r2, rtol=1e-5, atol=1e-6)
    # the tanh form and float64 record x only
    assert "_grad" not in fiamma.gelu(x32, approximate="tanh").grad_fn.kwargs
    assert "_grad" not in fiamma.gelu(x64).grad_fn.kwargs
