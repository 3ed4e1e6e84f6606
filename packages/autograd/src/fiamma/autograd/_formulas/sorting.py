"""Derivatives of the sorting and selection ops: sort, topk, kthvalue, median / nanmedian
(with and without dim), mode, cummax / cummin and diff.

The values these ops return are input elements picked by the returned indices, so each
gradient is scattered back to those indices (summing where cummax repeats one). median and
nanmedian of all elements split the gradient evenly among the elements equal to the result,
as PyTorch does.
"""

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd._formulas._common import select_grad
from fiamma.autograd_hook import ops


def _scatter_along(shape, dim, index, src):
    """zeros(shape) + src at ``index`` along ``dim`` (index shaped like src, duplicates
    summed), through index_put (differentiable in src)."""
    nd = len(shape)
    if nd == 0:
        return src.reshape(())
    coords = []
    for j in range(nd):
        if j == dim:
            coords.append(index)
        else:
            n = index.shape[j]
            coords.append(fiamma.arange(n, device=index.device).reshape(
                tuple(n if k == j else 1 for k in range(nd))))
    z = fiamma.zeros(tuple(shape), dtype=src.dtype, device=src.device)
    return z.index_put(tuple(coords), src, accumulate=True)


# only the indices are read: the values may be changed in place before backward (PyTorch's
# sort/topk/cummax/cummin save only their indices)
@derivative(ops.sort, ops.topk, ops.cummax, ops.cummin, save="output", unsaved_outputs=(0,))
def _sort(ctx, grad):
    g = grad[0]
    if g is None:
        return (None,)
    shape = tuple(ctx.input_shapes[0])
    d = ctx.kwargs["dim"] % max(len(shape), 1)
    return (_scatter_along(shape, d, ctx.output[1], g),)


@derivative(ops.kthvalue, ops.median, ops.nanmedian, ops.mode, save="both")
def _select(ctx, grad):
    x = ctx.inputs[0]
    if not isinstance(grad, tuple):  # median / nanmedian of all elements: a 0-d result
        # split among the elements equal to it; a NaN result's among the NaN elements
        # (PyTorch's evenly_distribute_backward)
        y = ctx.output
        mask = (x == y) | (x.isnan() & y.isnan())
        count = mask.sum().to(grad.dtype)
        return (fiamma.where(mask, grad / count, 0.0),)
    g = grad[0]
    if g is None:
        return (None,)
    return (select_grad(x, g, ctx.output[1], ctx.kwargs["dim"],
                        ctx.kwargs.get("keepdim", False)),)


@derivative(ops.diff, save="none")
def _diff(ctx, grad):
    """n forward differences of cat(prepend, x, append): each step's adjoint is
    g[j - 1] - g[j]; then each input's slice of the concatenation (inputs: x, prepend,
    append, the last two None when absent)."""
    d = ctx.kwargs["dim"]
    n = ctx.kwargs.get("n", 1)
    shapes = [tuple(s) if s is not None else None for s in ctx.input_shapes]
    sizes = [s[d] if s is not None else 0 for s in shapes]
    npre, nx, napp = sizes[1], sizes[0], sizes[2]
    total = npre + nx + napp
    if n and total - n <= 0:  # nothing left after the differences
        return tuple(fiamma.zeros(s, dtype=grad.dtype, device=grad.device) if s is not None
                     else None for s in shapes)
    g = grad
    for _ in range(n):
        zshape = list(g.shape)
        zshape[d] = 1
        z = fiamma.zeros(tuple(zshape), dtype=g.dtype, device=g.device)
        g = fiamma.cat([z, g], d) - fiamma.cat([g, z], d)
    gx = g.narrow(d, npre, nx)
    gpre = g.narrow(d, 0, npre) if shapes[1] is not None else None
    gapp = g.narrow(d, npre + nx, napp) if shapes[2] is not None else None
    return gx, gpre, gapp
