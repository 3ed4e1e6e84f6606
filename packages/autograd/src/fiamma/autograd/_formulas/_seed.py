"""Seed formulas (add, mul, sum) so the engine works on its own; the per-area formula modules
may register these names again (a later registration wins)."""

from fiamma.autograd._formulas import derivative
from fiamma.autograd_hook import ops


@derivative(ops.add, save="none")
def _add(ctx, grad):
    alpha = ctx.kwargs.get("alpha", 1)
    return grad, (grad if alpha == 1 else grad * alpha)


@derivative(ops.mul, save="inputs")
def _mul(ctx, grad):
    a, b = ctx.inputs
    need = ctx.needs_input_grad
    return (grad * b if need[0] else None), (grad * a if need[1] else None)


@derivative(ops.sum, save="none")
def _sum(ctx, grad):
    shape = ctx.input_shapes[0]
    dims = ctx.kwargs.get("dim")
    if not ctx.kwargs.get("keepdim", False) and len(grad.shape) != len(shape):
        if dims is None or dims == ():
            dims = tuple(range(len(shape)))
        elif isinstance(dims, int):
            dims = (dims,)
        for d in sorted(d % len(shape) for d in dims):
            grad = grad.unsqueeze(d)
    return (grad.expand(shape),)
