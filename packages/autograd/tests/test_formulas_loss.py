"""Gradients of core's fused elementwise losses (fiamma.fused.loss): the fused backward and
the composed one (create_graph) checked by finite differences for the input and the target,
with weights and broadcasting, for every reduction; the weights are kwargs of the node, not
inputs."""

import numpy as np
import pytest
from _formula_check import check

import fiamma
from fiamma import fused

CASES = [("mse_loss", 0.0), ("l1_loss", 0.0), ("smooth_l1_loss", 0.8), ("huber_loss", 1.5),
         ("binary_cross_entropy", 0.0), ("binary_cross_entropy_with_logits", 0.0),
         ("soft_margin_loss", 0.0), ("kl_div", 0.0), ("kl_div", 1.0)]


def _inputs(name, rng, xshape, tshape):
    x = rng.standard_normal(xshape)
    t = rng.standard_normal(tshape)
    if name in ("l1_loss", "smooth_l1_loss", "huber_loss"):  # away from the kinks
        t = x + np.sign(t) * rng.uniform(0.2, 3, tshape)
    if name == "binary_cross_entropy":
        x, t = rng.uniform(0.1, 0.9, xshape), rng.uniform(0, 1, tshape)
    elif name == "binary_cross_entropy_with_logits":
        t = rng.uniform(0, 1, tshape)
    elif name == "kl_div":
        t = rng.uniform(0.1, 1, tshape)
    return fiamma.tensor(x, requires_grad=True), fiamma.tensor(t, requires_grad=True)


@pytest.mark.parametrize("name,p", CASES)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_input_and_target_gradients(name, p, reduction):
    rng = np.random.default_rng(0)
    x, t = _inputs(name, rng, (3, 4), (3, 4))
    check(lambda a, b: fused.loss(name, a, b, reduction=reduction, param=p), x, t)


@pytest.mark.parametrize("name,p", [("mse_loss", 0.0), ("binary_cross_entropy_with_logits", 0.0),
                                    ("soft_margin_loss", 0.0)])
def test_broadcast_operands(name, p):
    rng = np.random.default_rng(1)
    x, t = _inputs(name, rng, (3, 1), (3, 4))
    check(lambda a, b: fused.loss(name, a, b, reduction="mean", param=p), x, t)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_weights(reduction):
    rng = np.random.default_rng(2)
    w = fiamma.tensor(rng.uniform(0.5, 2, (4,)))
    pw = fiamma.tensor(rng.uniform(0.5, 3, (3, 4)))
    x, t = _inputs("binary_cross_entropy_with_logits", rng, (3, 4), (3, 4))
    check(lambda a, b: fused.loss("binary_cross_entropy_with_logits", a, b, w, pw,
                                  reduction=reduction), x, t)
    x, t = _inputs("binary_cross_entropy", rng, (3, 4), (3, 4))
    check(lambda a, b: fused.loss("binary_cross_entropy", a, b, w, reduction=reduction), x, t)


def test_node_has_no_weight_edges_and_refuses_weights_that_require_grad():
    x = fiamma.rand(3, requires_grad=True)
    w = fiamma.rand(3)
    out = fused.loss("binary_cross_entropy_with_logits", x, fiamma.rand(3), w, w)
    assert out.grad_fn.name() == "BinaryCrossEntropyWithLogitsBackward0"
    assert len(out.grad_fn.next_functions) == 2
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument "
                                           "'weight'"):
        fused.loss("binary_cross_entropy", x.sigmoid(), fiamma.rand(3), w.requires_grad_())
