"""Derivatives of core's gather/scatter family: gather, scatter (+ value), scatter_add,
scatter_reduce (sum, mean, amax, amin, prod), index_select, index_add, index_copy,
index_fill, masked_fill, masked_select, masked_scatter, take, take_along_dim, put, and their
in-place forms (recorded as ``<name>_``; their old ``self`` is not available, so the formulas
use only shapes for it).

PyTorch's conventions: a written (not accumulated) position passes no gradient to the old
value; with duplicate scatter indices every source element still gets its gradient through
gather (as PyTorch does); amax/amin reductions split the gradient evenly among ties.
"""

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd._formulas._common import is_tensor, reduce_to
from fiamma.autograd_hook import ops


def _need(ctx, i):
    return ctx._needs(i)  # ctx.needs_input_grad[i], without building the tuple


def _dim(ctx, i=1):
    d = ctx.inputs[i]
    nd = max(len(ctx.input_shapes[0]), 1)
    return d % nd


def _zeros(ctx, grad, i=0):
    return fiamma.zeros(tuple(ctx.input_shapes[i]), dtype=grad.dtype, device=grad.device)


@derivative(ops.gather, save="inputs")
def _gather(ctx, grad):
    _, dim, index = ctx.inputs
    d = _dim(ctx)
    return fiamma.scatter_add(_zeros(ctx, grad), d, index, grad), None, None


def _scatter_src_grad(ctx, grad, d, index):
    if not _need(ctx, 3):
        return None
    return fiamma.gather(grad, d, index)


@derivative(ops.scatter, ops.scatter_, save="inputs")
def _scatter(ctx, grad):
    _, dim, index, src = ctx.inputs
    d = _dim(ctx)
    reduce = ctx.kwargs.get("reduce")
    if reduce not in (None, "add"):
        raise NotImplementedError("scatter(reduce='multiply') has no derivative "
                                  "(use scatter_reduce(reduce='prod'))")
    gx = None
    if _need(ctx, 0):
        gx = grad if reduce == "add" else fiamma.scatter(grad, d, index, 0.0)
    return gx, None, None, _scatter_src_grad(ctx, grad, d, index)


@derivative(ops.scatter_add, ops.scatter_add_, save="inputs")
def _scatter_add(ctx, grad):
    _, dim, index, src = ctx.inputs
    d = _dim(ctx)
    return (grad if _need(ctx, 0) else None), None, None, _scatter_src_grad(ctx, grad, d, index)


def _scatter_prod_grads(x, d, index, src, y, grad, include_self):
    """Each value's gradient is the product of the other values of its group. Division
    (y / value) gives it for non-zero values; a zero's is the group's product with that zero
    set to 1, computed by a second reduction so that it stays differentiable (self holds one
    value per group, so all its zeros are masked at once; a source zero is masked only when it
    is the only source zero of its group, else its gradient is 0)."""
    sz = src == 0
    xz = (x == 0) if include_self else None
    gx = None
    if include_self:
        if bool(xz.any()):
            x1 = fiamma.where(xz, 1.0, x)
            gx = grad * fiamma.scatter_reduce(x1, d, index, src, "prod") / x1
        else:
            gx = grad * y / x
    else:
        gx = fiamma.scatter(grad, d, index, 0.0)
    gy = grad * y
    if not bool(sz.any()):
        return gx, fiamma.gather(gy, d, index) / src
    zeros = fiamma.zeros(tuple(x.shape), dtype=grad.dtype, device=grad.device)
    count = fiamma.gather(fiamma.scatter_add(zeros, d, index, sz.to(grad.dtype)), d, index)
    lone = sz & (count == 1)
    masked = fiamma.scatter_reduce(x, d, index, fiamma.where(lone, 1.0, src), "prod",
                                   include_self=include_self)
    gs = fiamma.where(lone, fiamma.gather(grad * masked, d, index),
                      fiamma.gather(gy, d, index) / fiamma.where(sz, 1.0, src))
    return gx, gs


@derivative(ops.scatter_reduce, save="both")
def _scatter_reduce(ctx, grad):
    x, dim, index, src = ctx.inputs
    d = _dim(ctx)
    reduce = ctx.kwargs["reduce"]
    include_self = ctx.kwargs.get("include_self", True)
    y = ctx.output
    gx = gs = None
    if reduce == "sum":
        gx = grad if include_self else fiamma.scatter(grad, d, index, 0.0)
        gs = fiamma.gather(grad, d, index)
    elif reduce == "mean":
        ones = fiamma.ones(tuple(src.shape), dtype=grad.dtype, device=grad.device)
        base = fiamma.ones(tuple(x.shape), dtype=grad.dtype, device=grad.device)
        if not include_self:
            base = fiamma.scatter(base, d, index, 0.0)
        count = fiamma.scatter_add(base, d, index, ones)
        gmean = grad / fiamma.where(count == 0, 1.0, count)
        gx = gmean if include_self else fiamma.scatter(gmean, d, index, 0.0)
        gs = fiamma.gather(gmean, d, index)
    elif reduce in ("amax", "amin"):
        # split evenly among the values (self's included) equal to the result
        sel_x = (x == y).to(grad.dtype)
        if not include_self:
            sel_x = fiamma.scatter(sel_x, d, index, 0.0)
        sel_s = (src == fiamma.gather(y, d, index)).to(grad.dtype)
        count = fiamma.scatter_add(sel_x, d, index, sel_s)
        share = grad / fiamma.where(count == 0, 1.0, count)
        gx = sel_x * share
        gs = sel_s * fiamma.gather(share, d, index)
    elif reduce == "prod":
        # the product of the other values: y / value for a non-zero value; for a zero, the
        # product of the non-zero values when it is its group's only zero, else 0 (PyTorch's)
        gx, gs = _scatter_prod_grads(x, d, index, src, y, grad, include_self)
    else:
        raise NotImplementedError(f"scatter_reduce: no derivative for reduce={reduce!r}")
    return (gx if _need(ctx, 0) else None), None, None, (gs if _need(ctx, 3) else None)


@derivative(ops.scatter_reduce_, save="inputs")
def _scatter_reduce_inplace(ctx, grad):
    """In place, self's old values are gone: only the sum and mean reductions, which do not
    need them, have a derivative."""
    _, dim, index, src = ctx.inputs
    d = _dim(ctx)
    reduce = ctx.kwargs["reduce"]
    include_self = ctx.kwargs.get("include_self", True)
    if reduce == "sum":
        gx = grad if include_self else fiamma.scatter(grad, d, index, 0.0)
        gs = fiamma.gather(grad, d, index)
    elif reduce == "mean":
        shape = tuple(ctx.input_shapes[0])
        ones = fiamma.ones(tuple(src.shape), dtype=grad.dtype, device=grad.device)
        base = fiamma.ones(shape, dtype=grad.dtype, device=grad.device)
        if not include_self:
            base = fiamma.scatter(base, d, index, 0.0)
        count = fiamma.scatter_add(base, d, index, ones)
        gmean = grad / fiamma.where(count == 0, 1.0, count)
        gx = gmean if include_self else fiamma.scatter(gmean, d, index, 0.0)
        gs = fiamma.gather(gmean, d, index)
    else:
        raise NotImplementedError(
            f"scatter_reduce_(reduce={reduce!r}) in place has no derivative (it needs the "
            "overwritten values); use the out-of-place scatter_reduce")
    return (gx if _need(ctx, 0) else None), None, None, (gs if _need(ctx, 3) else None)


# only the source's shape is needed (embedding's weight, too): not saved, as in PyTorch
@derivative(ops.index_select, save="inputs", unsaved=(0,))
def _index_select(ctx, grad):
    _, dim, index = ctx.inputs
    d = _dim(ctx)
    return fiamma.index_add(_zeros(ctx, grad), d, index, grad), None, None


@derivative(ops.index_add, ops.index_add_, save="inputs")
def _index_add(ctx, grad):
    _, dim, index, source = ctx.inputs
    d = _dim(ctx)
    alpha = ctx.kwargs.get("alpha", 1)
    gs = None
    if _need(ctx, 3):
        gs = fiamma.index_select(grad, d, index) if grad.ndim else grad
        gs = gs if alpha == 1 else gs * alpha
        gs = gs.reshape(tuple(ctx.input_shapes[3]))
    return (grad if _need(ctx, 0) else None), None, None, gs


@derivative(ops.index_copy, ops.index_copy_, save="inputs")
def _index_copy(ctx, grad):
    _, dim, index, source = ctx.inputs
    d = _dim(ctx)
    gx = fiamma.index_fill(grad, d, index, 0.0) if _need(ctx, 0) else None
    gs = None
    if _need(ctx, 3):
        gs = (fiamma.index_select(grad, d, index) if grad.ndim else grad)
        gs = gs.reshape(tuple(ctx.input_shapes[3]))
    return gx, None, None, gs


@derivative(ops.index_fill, ops.index_fill_, save="inputs")
def _index_fill(ctx, grad):
    _, dim, index, value = ctx.inputs
    d = _dim(ctx)
    gx = fiamma.index_fill(grad, d, index, 0.0) if _need(ctx, 0) else None
    gv = None
    if _need(ctx, 3) and is_tensor(value):
        # each filled position once, however often the index names it (as PyTorch)
        if grad.ndim:
            n = ctx.input_shapes[0][d]
            idx = fiamma.unique(fiamma.where(index < 0, index + n, index).reshape(-1))
            gv = fiamma.index_select(grad, d, idx).sum()
        else:
            gv = grad.sum()
    return gx, None, None, gv


@derivative(ops.masked_fill, ops.masked_fill_, save="inputs")
def _masked_fill(ctx, grad):
    _, mask, value = ctx.inputs
    gx = None
    if _need(ctx, 0):
        gx = reduce_to(fiamma.where(mask, 0.0, grad), tuple(ctx.input_shapes[0]))
    gv = None
    if _need(ctx, 2) and is_tensor(value):
        gv = fiamma.where(mask, grad, 0.0).sum()
    return gx, None, gv


def _broadcast(a, b):
    nd = max(len(a), len(b))
    a, b = (1,) * (nd - len(a)) + a, (1,) * (nd - len(b)) + b
    return tuple(x if y == 1 else y for x, y in zip(a, b))


def _broadcast_mask(mask, shape):
    return mask.expand(tuple(shape)) if tuple(mask.shape) != tuple(shape) else mask


@derivative(ops.masked_select, save="inputs")
def _masked_select(ctx, grad):
    x, mask = ctx.inputs
    shape = _broadcast(tuple(x.shape), tuple(mask.shape))
    m = _broadcast_mask(mask, shape).contiguous()
    z = fiamma.zeros(tuple(shape), dtype=grad.dtype, device=grad.device)
    return reduce_to(z.index_put((m,), grad, accumulate=True), tuple(x.shape)), None


@derivative(ops.masked_scatter, ops.masked_scatter_, save="inputs")
def _masked_scatter(ctx, grad):
    _, mask, source = ctx.inputs
    m = _broadcast_mask(mask, tuple(grad.shape)).contiguous()
    gx = reduce_to(fiamma.where(m, 0.0, grad), tuple(ctx.input_shapes[0])) \
        if _need(ctx, 0) else None
    gs = None
    if _need(ctx, 2):
        taken = grad[m]
        numel = source.numel()
        rest = numel - taken.shape[0]
        if rest:
            taken = fiamma.cat([taken, fiamma.zeros((rest,), dtype=grad.dtype, device=grad.device)])
        gs = taken.reshape(tuple(source.shape))
    return gx, None, gs


@derivative(ops.take, save="inputs")
def _take(ctx, grad):
    _, index = ctx.inputs
    shape = tuple(ctx.input_shapes[0])
    numel = 1
    for s in shape:
        numel *= s
    flat = fiamma.zeros((numel,), dtype=grad.dtype, device=grad.device)
    idx = index.reshape(-1)
    idx = fiamma.where(idx < 0, idx + numel, idx)
    g = flat.index_put((idx,), grad.reshape(-1), accumulate=True)
    return g.reshape(shape), None


@derivative(ops.take_along_dim, save="inputs")
def _take_along_dim(ctx, grad):
    _, indices = ctx.inputs
    dim = ctx.kwargs.get("dim")
    shape = tuple(ctx.input_shapes[0])
    if dim is None:
        return _take(ctx, grad)
    d = dim % max(len(shape), 1)
    target = list(grad.shape)
    target[d] = shape[d]
    idx = indices.expand(tuple(grad.shape)) if tuple(indices.shape) != tuple(grad.shape) \
        else indices
    idx = fiamma.where(idx < 0, idx + shape[d], idx)  # the forward takes negative indices
    g = fiamma.scatter_add(fiamma.zeros(tuple(target), dtype=grad.dtype, device=grad.device), d,
                           idx, grad)
    return reduce_to(g, shape), None


@derivative(ops.put, ops.put_, save="inputs")
def _put(ctx, grad):
    _, index, source = ctx.inputs
    accumulate = ctx.kwargs.get("accumulate", False)
    shape = tuple(ctx.input_shapes[0])
    numel = 1
    for s in shape:
        numel *= s
    idx = index.reshape(-1)
    idx = fiamma.where(idx < 0, idx + numel, idx)
    flat = grad.reshape(-1)
    gx = None
    if _need(ctx, 0):
        gx = grad if accumulate else flat.index_put(
            (idx,), fiamma.zeros((), dtype=grad.dtype, device=grad.device)).reshape(shape)
    gs = flat[idx].reshape(tuple(ctx.input_shapes[2])) if _need(ctx, 2) else None
    return gx, None, gs
