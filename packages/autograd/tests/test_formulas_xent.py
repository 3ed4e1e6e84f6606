"""Gradients of core's fused cross_entropy_loss: numerical gradcheck of the fused backward and
gradgradcheck of the composed one (create_graph), over reductions, weights, ignore_index and
label smoothing; the composition in nn.functional gives the same gradients."""

import numpy as np
import pytest

import fiamma
from fiamma.autograd import gradcheck, gradgradcheck

CASES = [((5, 4), "mean", 0.0, False, -100), ((5, 4), "sum", 0.2, True, 1),
         ((4,), "mean", 0.1, True, -100), ((2, 3, 3), "none", 0.3, True, 0),
         ((6, 3), "mean", 0.0, True, 2)]


def _inputs(shape, w, ii):
    rng = np.random.default_rng(0)
    c = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    t = rng.integers(0, c, tshape)
    if 0 <= ii < c and t.ndim:
        t.reshape(-1)[::2] = ii
    x = fiamma.tensor(rng.standard_normal(shape), dtype=fiamma.float64, requires_grad=True)
    wt = fiamma.tensor(rng.random(c) + 0.5, dtype=fiamma.float64) if w else None
    return x, fiamma.tensor(t), wt


@pytest.mark.parametrize("shape,reduction,s,w,ii", CASES)
def test_gradcheck_and_gradgradcheck(shape, reduction, s, w, ii):
    x, t, wt = _inputs(shape, w, ii)

    def f(x):
        return fiamma.cross_entropy_loss(x, t, wt, reduction, ii, s)

    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))


@pytest.mark.parametrize("shape,reduction,s,w,ii", CASES)
def test_same_gradients_as_the_composition(shape, reduction, s, w, ii):
    F = pytest.importorskip("fiamma.nn.functional")  # autograd's wheel tests run without nn
    x, t, wt = _inputs(shape, w, ii)
    fused = fiamma.cross_entropy_loss(x, t, wt, reduction, ii, s)
    # PyTorch's last node: nll_loss, or the label-smoothing sum
    assert fused.grad_fn.name() == ("AddBackward0" if s else "NllLossBackward0")
    (gf,) = fiamma.autograd.grad(fused.sum(), x, retain_graph=True)
    # the composition nn.functional takes when the weight requires grad
    wg = None if wt is None else wt.clone().requires_grad_()
    composed = F.cross_entropy(x, t, wg, ignore_index=ii, reduction=reduction,
                               label_smoothing=s) if wg is not None else None
    if composed is not None:
        np.testing.assert_allclose(composed.detach().numpy(), fused.detach().numpy(),
                                   rtol=1e-12, atol=1e-12)
        gc, gw = fiamma.autograd.grad(composed.sum(), (x, wg))
        np.testing.assert_allclose(gc.numpy(), gf.numpy(), rtol=1e-10, atol=1e-12)
        assert gw is not None
    # second order: create_graph goes through the differentiable form, same first gradient
    (g2,) = fiamma.autograd.grad(fused.sum(), x, create_graph=True)
    np.testing.assert_allclose(g2.detach().numpy(), gf.numpy(), rtol=1e-12, atol=1e-14)


def test_nn_cross_entropy_uses_the_fused_op():
    F = pytest.importorskip("fiamma.nn.functional")
    x, t, _ = _inputs((5, 4), False, -100)
    assert F.cross_entropy(x, t).grad_fn.name() == "NllLossBackward0"
    # probability targets keep the composition
    p = fiamma.softmax(fiamma.ones(5, 4, dtype=fiamma.float64), 1)
    assert type(F.cross_entropy(x, p).grad_fn).__name__ != "CrossEntropyLossBackward0"
