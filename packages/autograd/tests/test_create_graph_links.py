"""Under create_graph, the gradient of a piecewise-linear op (constant in its input between
kinks) stays a function of the input with a zero derivative along it, as PyTorch's does: it
requires grad, and differentiating it again gives zeros instead of raising "does not require
grad". Without create_graph nothing is recorded."""

import numpy as np
import pytest

import fiamma

F = fiamma.fused
CASES = {
    "relu": lambda x: fiamma.relu(x),
    "leaky_relu": lambda x: F.activation("leaky_relu", x, 0.2),
    "hardtanh": lambda x: F.activation("hardtanh", x, -0.5, 0.5),
    "hardsigmoid": lambda x: F.activation("hardsigmoid", x),
    "softshrink": lambda x: F.activation("softshrink", x, 0.5),
    "hardshrink": lambda x: F.activation("hardshrink", x, 0.5),
    "threshold": lambda x: F.activation("threshold", x, 0.1, -2.0),
    "nll_loss": lambda x: F.nll_loss(x, fiamma.tensor([0, 2, 1, 0])),
}
X = np.array([[-2.0, -0.3, 0.2], [0.7, 1.5, -0.05], [3.0, -1.0, 0.4], [0.0, 0.6, -0.7]])


@pytest.mark.parametrize("name", sorted(CASES))
def test_piecewise_linear_grad_stays_in_graph(name):
    x = fiamma.tensor(X, dtype=fiamma.float64, requires_grad=True)
    (g,) = fiamma.autograd.grad(CASES[name](x).sum(), x, create_graph=True)  # an expanded grad
    assert g.requires_grad
    (gg,) = fiamma.autograd.grad((g * g).sum(), x)
    assert gg.tolist() == np.zeros_like(X).tolist()
    # the values are the first derivative's, and without create_graph nothing is recorded
    (g0,) = fiamma.autograd.grad(CASES[name](x).sum(), x)
    assert not g0.requires_grad and g0.tolist() == g.detach().tolist()


def test_linked_grad_still_carries_the_upstream_graph():
    # d/dv of <v, relu'(x)> is relu'(x): the link leaves the incoming gradient's path intact
    x = fiamma.tensor(X, dtype=fiamma.float64, requires_grad=True)
    v = fiamma.ones(4, 3, dtype=fiamma.float64, requires_grad=True)
    (g,) = fiamma.autograd.grad(F.activation("leaky_relu", x, 0.2), x, v, create_graph=True)
    gv, gx = fiamma.autograd.grad(g.sum(), (v, x))
    assert gv.tolist() == np.where(X > 0, 1.0, 0.2).tolist()
    assert gx.tolist() == np.zeros_like(X).tolist()


@pytest.mark.parity
@pytest.mark.parametrize("name", sorted(CASES))
def test_requires_grad_matches_torch(name):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    tcases = {
        "relu": tf.relu, "leaky_relu": lambda x: tf.leaky_relu(x, 0.2),
        "hardtanh": lambda x: tf.hardtanh(x, -0.5, 0.5), "hardsigmoid": tf.hardsigmoid,
        "softshrink": lambda x: tf.softshrink(x, 0.5),
        "hardshrink": lambda x: tf.hardshrink(x, 0.5),
        "threshold": lambda x: tf.threshold(x, 0.1, -2.0),
        "nll_loss": lambda x: tf.nll_loss(x, torch.tensor([0, 2, 1, 0])),
    }
    xt = torch.tensor(X, requires_grad=True)
    (gt,) = torch.autograd.grad(tcases[name](xt).sum(), xt, create_graph=True)
    x = fiamma.tensor(X, dtype=fiamma.float64, requires_grad=True)
    (g,) = fiamma.autograd.grad(CASES[name](x).sum(), x, create_graph=True)
    assert g.requires_grad == gt.requires_grad
    assert np.allclose(g.detach().numpy(), gt.detach().numpy())
