"""Derivatives of core's random draws that PyTorch refuses to differentiate: ``binomial``'s
backward raises, as PyTorch's ("derivative for aten::binomial is not implemented")."""

from fiamma.autograd._formulas import derivative
from fiamma.autograd_hook import ops


@derivative(ops.binomial, save="none")
def _binomial(ctx, grad):
    raise RuntimeError("the derivative for binomial is not implemented (as in PyTorch: "
                       "binomial samples are not differentiable in count or prob)")
