"""Derivatives of the sorting and selection ops: sort, topk, kthvalue, median / nanmedian
(with and without dim), mode, cummax / cummin and diff.

The values these ops return are input elements picked by the returned indices, so each
gradient is scattered back to those indices (summing where cummax repeats one). median and
nanmedian of all elements split the gradient evenly among the elements equal to the result,
as PyTorch does.
"""

import fiamma
from fiamma.autograd._formulas import derivative


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
            coords.append(fiamma.arange(n).reshape(tuple(n if k == j else 1 for k in range(nd))))
    z = fiamma.zeros(tuple(shape), dtype=src.dtype)
    return z.index_put(tuple(coords), src, accumulate=True)


@derivative("sort", "topk", "cummax", "cummin", save="output")
def _sort(ctx, grad):
    g = grad[0]
    if g is None:
        return (None,)
    shape = tuple(ctx.input_shapes[0])
    d = ctx.kwargs["dim"] % max(len(shape), 1)
    return (_scatter_along(shape, d, ctx.output[1], g),)


@derivative("kthvalue", "median", "nanmedian", "mode", save="both")
def _select(ctx, grad):
    x = ctx.inputs[0]
    if not isinstance(grad, tuple):  # median / nanmedian of all elements: a 0-d result
        mask = x == ctx.output
        count = mask.sum().to(grad.dtype)
        return (fiamma.where(mask, grad / count, 0.0),)
    g = grad[0]
    if g is None:
        return (None,)
    idx = ctx.output[1]
    nd = x.ndim
    if nd == 0:
        return (g,)
    d = ctx.kwargs["dim"] % nd
    if not ctx.kwargs.get("keepdim", False):
        g = g.unsqueeze(d)
        idx = idx.unsqueeze(d)
    n = x.shape[d]
    ar = fiamma.arange(n).reshape((n,) + (1,) * (nd - d - 1))
    return (fiamma.where(ar == idx, g, 0.0),)


@derivative("diff", save="none")
def _diff(ctx, grad):
    """n forward differences of cat(prepend, x, append): each step's adjoint is
    g[j - 1] - g[j]; then x's slice of the concatenation."""
    kw = ctx.kwargs
    shape = tuple(ctx.input_shapes[0])
    d = kw["dim"]
    pre, app = kw.get("prepend"), kw.get("append")
    npre = pre.shape[d] if pre is not None else 0
    total = shape[d] + npre + (app.shape[d] if app is not None else 0)
    n = kw.get("n", 1)
    if n and total - n <= 0:  # nothing left after the differences
        return (fiamma.zeros(shape, dtype=grad.dtype),)
    g = grad
    for _ in range(n):
        zshape = list(g.shape)
        zshape[d] = 1
        z = fiamma.zeros(tuple(zshape), dtype=g.dtype)
        g = fiamma.cat([z, g], d) - fiamma.cat([g, z], d)
    return (g.narrow(d, npre, shape[d]),)
