"""Derivatives of core's shape utilities: flip, roll, rot90, repeat, repeat_interleave,
tril/triu, diag, diag_embed, diagflat, block_diag and pad (every mode).

Each of these ops only moves elements, so each gradient moves them back (summing where one
input element reaches several outputs: repeat, replicate/reflect/circular padding).
"""

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd._formulas._common import reduce_to
from fiamma.autograd_hook import ops


def _shape(ctx, i=0):
    return tuple(ctx.input_shapes[i])


@derivative(ops.flip, save="none")
def _flip(ctx, grad):
    dims = tuple(ctx.kwargs.get("dims") or ())
    return (fiamma.flip(grad, dims) if dims else grad,)


@derivative(ops.roll, save="none")
def _roll(ctx, grad):
    shifts = tuple(-s for s in ctx.kwargs["shifts"])
    dims = ctx.kwargs.get("dims")
    if grad.ndim == 0:
        return (grad,)
    return (fiamma.roll(grad, shifts, dims),)


@derivative(ops.rot90, save="none")
def _rot90(ctx, grad):
    return (fiamma.rot90(grad, -ctx.kwargs.get("k", 1), ctx.kwargs.get("dims", (0, 1))),)


@derivative(ops.repeat, save="none")
def _repeat(ctx, grad):
    """Output dim i is reps[i] copies of (padded) input dim i: view it as (reps[i], size[i])
    and sum the copies."""
    shape = _shape(ctx)
    reps = ctx.kwargs.get("repeats")
    reps = tuple(ctx.kwargs.get("dims") if reps is None else reps)
    padded = (1,) * (len(reps) - len(shape)) + shape
    split = []
    for r, s in zip(reps, padded):
        split += [r, s]
    g = grad.reshape(split)
    g = g.sum(tuple(range(0, 2 * len(reps), 2))) if reps else g
    return (g.reshape(shape),)


@derivative(ops.repeat_interleave, save="none")
def _repeat_interleave(ctx, grad):
    shape = _shape(ctx)
    repeats = ctx.kwargs.get("repeats")
    dim = ctx.kwargs.get("dim")
    if dim is None:
        d, base = 0, (max(1, _numel(shape)),)
    else:
        d = dim % max(len(shape), 1)
        base = shape if shape else (1,)
    n = base[d]
    if isinstance(repeats, fiamma.Tensor):  # per-element counts
        idx = fiamma.repeat_interleave(fiamma.arange(n, device=grad.device),
                                       repeats.reshape(-1).to(grad.device, fiamma.int64))
        z = fiamma.zeros(base, dtype=grad.dtype, device=grad.device)
        g = z.index_put((None,) * d + (idx,), grad.reshape(
            base[:d] + (idx.shape[0],) + base[d + 1:]), accumulate=True)
        return (g.reshape(shape),)
    rep = int(repeats.item()) if isinstance(repeats, fiamma.Tensor) else int(repeats)
    g = grad.reshape(base[:d] + (n, rep) + base[d + 1:]).sum(d + 1)
    return (g.reshape(shape),)


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


@derivative(ops.tril, ops.tril_, save="none")
def _tril(ctx, grad):
    return (fiamma.tril(grad, ctx.kwargs.get("diagonal", 0)),)


@derivative(ops.triu, ops.triu_, save="none")
def _triu(ctx, grad):
    return (fiamma.triu(grad, ctx.kwargs.get("diagonal", 0)),)


@derivative(ops.diag, save="none")
def _diag(ctx, grad):
    shape = _shape(ctx)
    k = ctx.kwargs.get("diagonal", 0)
    if len(shape) == 1:  # vector -> matrix
        return (fiamma.diagonal(grad, k),)
    # matrix -> its k-th diagonal: put the gradient back on that diagonal of zeros
    from fiamma.autograd._formulas.shape import strided_backward

    m, n = shape
    length = grad.shape[0]
    off = k if k >= 0 else -k * n
    g = strided_backward(grad, shape, (n, 1), 0, (length,), (n + 1,), off)
    return (g,)


@derivative(ops.diag_embed, save="none")
def _diag_embed(ctx, grad):
    kw = ctx.kwargs
    return (fiamma.diagonal(grad, kw.get("offset", 0), kw.get("dim1", -2), kw.get("dim2", -1)),)


@derivative(ops.diagflat, save="none")
def _diagflat(ctx, grad):
    return (fiamma.diagonal(grad, ctx.kwargs.get("offset", 0)).reshape(_shape(ctx)),)


@derivative(ops.block_diag, save="none")
def _block_diag(ctx, grad):
    """Each input's block of the result (inputs recorded one per position; 0-d and 1-D inputs
    are 1x1 and 1xn blocks)."""
    out = []
    r = c = 0
    for shape, need in zip(ctx.input_shapes, ctx.needs_input_grad):
        if shape is None:
            out.append(None)
            continue
        shape = tuple(shape)
        h, w = (1, 1) if not shape else ((1, shape[0]) if len(shape) == 1 else shape)
        out.append(grad[r:r + h, c:c + w].reshape(shape) if need else None)
        r += h
        c += w
    return tuple(out)


def _pad_index(n, lo, hi, mode):
    """For one dim of size n padded by (lo, hi): (output positions that read an input element,
    the input element each reads)."""
    m = n + lo + hi
    pos, src = [], []
    c0 = -lo if lo < 0 else 0           # cropped input start
    c1 = n + hi if hi < 0 else n        # cropped input end
    start = max(lo, 0)                  # where the cropped input lands
    size = c1 - c0
    if mode == "replicate" and size <= 0 < n:
        # the crop leaves nothing: every output reads the input's element nearest j - lo
        # (PyTorch's replicate reads clamp(j - lo, 0, n - 1))
        return list(range(m)), [min(max(j - lo, 0), n - 1) for j in range(m)]
    for j in range(m):
        i = j - start
        if 0 <= i < size:
            pos.append(j)
            src.append(c0 + i)
            continue
        if mode == "constant" or size == 0:
            continue
        if mode == "replicate":
            k = 0 if i < 0 else size - 1
        elif mode == "reflect":
            k = -i if i < 0 else 2 * (size - 1) - i
        else:  # circular
            k = i % size
        pos.append(j)
        src.append(c0 + k)
    return pos, src


@derivative(ops.pad, save="none")
def _pad(ctx, grad):
    return (pad_backward(grad, _shape(ctx), tuple(ctx.kwargs["pad"]),
                         ctx.kwargs.get("mode", "constant")),)


def pad_backward(grad, shape, p, mode):
    """Gradient of ``pad(x, p, mode)`` w.r.t. x of ``shape``. Dim by dim (padding is
    separable): gather the output positions that read the input and scatter-add them onto the
    input positions they read."""
    nd = len(shape)
    g = grad
    for k in range(len(p) // 2):
        d = nd - 1 - k
        lo, hi = p[2 * k], p[2 * k + 1]
        if lo == 0 and hi == 0:
            continue
        pos, src = _pad_index(shape[d], lo, hi, mode)
        lead = (slice(None),) * d
        if mode == "constant":
            # the input's (cropped) block: narrow the gradient, zeros for cropped elements
            part = g.narrow(d, pos[0], len(pos)) if pos else None
            before = src[0] if src else 0
            after = shape[d] - before - len(src)
            pieces = []
            zshape = list(g.shape)
            if before:
                zshape[d] = before
                pieces.append(fiamma.zeros(tuple(zshape), dtype=g.dtype, device=g.device))
            if part is not None:
                pieces.append(part)
            if after:
                zshape[d] = after
                pieces.append(fiamma.zeros(tuple(zshape), dtype=g.dtype, device=g.device))
            if not pieces:  # an empty input (or gradient): nothing to gather
                zshape[d] = shape[d]
                pieces.append(fiamma.zeros(tuple(zshape), dtype=g.dtype, device=g.device))
            g = fiamma.cat(pieces, d) if len(pieces) > 1 else pieces[0]
            continue
        sel = g[lead + (fiamma.tensor(pos, dtype=fiamma.int64, device=g.device),)]
        zshape = list(g.shape)
        zshape[d] = shape[d]
        g = fiamma.zeros(tuple(zshape), dtype=g.dtype, device=g.device).index_put(
            (None,) * d + (fiamma.tensor(src, dtype=fiamma.int64, device=g.device),), sel,
            accumulate=True)
    return reduce_to(g, shape)
