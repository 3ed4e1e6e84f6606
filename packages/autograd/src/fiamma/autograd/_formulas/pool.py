"""Derivatives of core's pools: max / adaptive max (scatter the gradient by the saved indices),
avg / adaptive avg (spread it over the windows), max_unpool (gather by the indices), and of the
backward ops themselves, so second derivatives work: the max-pool backward is linear in its
gradient (its derivative gathers by the indices), the avg backwards are the adjoints of the
pools (their derivative is the pool again). Lp pools are composed in core and need nothing here.
"""

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd_hook import ops

_AVG = {1: "avg_pool1d", 2: "avg_pool2d", 3: "avg_pool3d"}
_ADAPTIVE_AVG = {1: "adaptive_avg_pool1d", 2: "adaptive_avg_pool2d", 3: "adaptive_avg_pool3d"}


def _gather_planes(src, indices, nd):
    """``out[..., j] = src_plane[indices[..., j]]`` per leading position (flat planes of the
    last ``nd`` dims of ``src``), shaped like ``indices``; differentiable (core's gather)."""
    ishape = tuple(indices.shape)
    lead = ishape[:-nd]
    n = 1
    for e in lead:
        n *= e
    ssize = 1
    for e in tuple(src.shape)[-nd:]:
        ssize *= e
    isize = 1
    for e in ishape[-nd:]:
        isize *= e
    flat = fiamma.gather(src.reshape(n, ssize), 1, indices.reshape(n, isize))
    return flat.reshape(ishape)


def _saved_indices(ctx):
    """The pool's saved indices (output 1). Only they are needed, as in PyTorch (whose node
    saves the indices, not the values): an in-place op on the pooled values (``MaxPool2d``
    then ``ReLU(inplace=True)``, as in the spatial transformer tutorial) must not fail the
    backward, so only the indices' version is checked."""
    out = getattr(ctx, "_out", None)
    if isinstance(out, tuple) and ctx._outver[1] == out[1]._storage.version:
        return out[1]
    return ctx.output[1]  # packed by saved-tensor hooks, or indices modified: the usual path


@derivative(ops.max_pool1d, ops.max_pool2d, ops.max_pool3d,
            ops.adaptive_max_pool1d, ops.adaptive_max_pool2d, ops.adaptive_max_pool3d,
            save="output", unsaved_outputs=(0,))
def _max_pool(ctx, grad):
    g = grad[0]
    if g is None:
        return (None,)
    indices = _saved_indices(ctx)
    nd = int(ctx.op[-2])
    size = tuple(ctx.input_shapes[0])[-nd:]
    return (fiamma.max_pool_backward(g, indices, size),)


@derivative(ops.max_pool_backward, save="inputs")
def _max_pool_backward(ctx, grad):
    _, indices, size = ctx.inputs
    return _gather_planes(grad, indices, len(size)), None, None


@derivative(ops.max_unpool1d, ops.max_unpool2d, ops.max_unpool3d, save="inputs")
def _max_unpool(ctx, grad):
    _, indices = ctx.inputs
    nd = int(ctx.op[-2])
    return _gather_planes(grad, indices, nd), None


def _avg_kwargs(kw):
    return dict(kernel_size=kw["kernel_size"], stride=kw["stride"], padding=kw["padding"],
                ceil_mode=kw["ceil_mode"], count_include_pad=kw["count_include_pad"],
                divisor_override=kw["divisor_override"])


@derivative(ops.avg_pool1d, ops.avg_pool2d, ops.avg_pool3d, save="none")
def _avg_pool(ctx, grad):
    nd = int(ctx.op[-2])
    size = tuple(ctx.input_shapes[0])[-nd:]
    return (fiamma.avg_pool_backward(grad, size, **_avg_kwargs(ctx.kwargs)),)


@derivative(ops.avg_pool_backward, save="none")
def _avg_pool_backward(ctx, grad):
    nd = len(ctx.inputs[1])
    kw = _avg_kwargs(ctx.kwargs)
    pool = getattr(fiamma, _AVG[nd])
    if nd == 1:
        return pool(grad, kw.pop("kernel_size"), kw.pop("stride"), kw.pop("padding"),
                    kw.pop("ceil_mode"), kw.pop("count_include_pad"), **kw), None
    return pool(grad, **kw), None


@derivative(ops.adaptive_avg_pool1d, ops.adaptive_avg_pool2d, ops.adaptive_avg_pool3d, save="none")
def _adaptive_avg_pool(ctx, grad):
    nd = int(ctx.op[-2])
    size = tuple(ctx.input_shapes[0])[-nd:]
    return (fiamma.adaptive_avg_pool_backward(grad, size),)


@derivative(ops.adaptive_avg_pool_backward, save="none")
def _adaptive_avg_pool_backward(ctx, grad):
    nd = len(ctx.inputs[1])
    out_size = tuple(ctx.input_shapes[0])[-nd:]
    return getattr(fiamma, _ADAPTIVE_AVG[nd])(grad, out_size), None
