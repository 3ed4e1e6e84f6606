"""Derivatives of core's random draws (and of ``no_gradient``): ``binomial``'s backward
raises, as PyTorch's ("derivative for aten::binomial is not implemented"); ``bernoulli``'s is
zero, as PyTorch's."""

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd_hook import ops


@derivative(ops.binomial, save="none")
def _binomial(ctx, grad):
    raise RuntimeError("the derivative for binomial is not implemented (as in PyTorch: "
                       "binomial samples are not differentiable in count or prob)")


@derivative(ops.bernoulli, save="none")
def _bernoulli(ctx, grad):
    """Samples are piecewise constant in their probabilities: a zero gradient."""
    return (fiamma.zeros_like(grad),)


@derivative(ops.no_gradient, save="none")
def _no_gradient(ctx, grad):
    """Results that require grad only in structure (an empty householder_product, lstsq's
    empty residuals): no input gets a gradient from them, as in PyTorch."""
    return (None,) * len(ctx.needs_input_grad)
