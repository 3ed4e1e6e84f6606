"""Formulas the engine itself relies on (in-place copies); registered before the formula
modules, which may register these names again."""

from fiamma.autograd._formulas import derivative
from fiamma.autograd_hook import ops


@derivative(ops.copy_, save="none")
def _copy_(ctx, grad):
    # self's old values are overwritten: no gradient; src gets the gradient (the engine sums
    # it back over broadcasting and casts it to src's dtype)
    return None, grad


@derivative(ops.uniform_, ops.normal_, ops.random_, ops.bernoulli_, ops.exponential_,
            ops.geometric_, ops.log_normal_, ops.cauchy_, save="none")
def _random_fill_(ctx, grad):
    # values drawn at random replace the old ones: no gradient to anything
    return (None,) * len(ctx.input_shapes)


@derivative(ops.fill_, save="none")
def _fill_(ctx, grad):
    # a tensor fill value gets the sum of the gradient (the engine reduces it to its shape)
    return None, grad
