"""Derivatives of views, indexing, joining, copies and casts.

Views are recorded by core with the view's geometry (``shape``, ``stride``, ``offset``, in
storage elements) and its input's (``in_stride``, ``in_offset``). Reshapes, (un)squeezes,
expand, transpose and permute have direct formulas; every other view (narrow, select, basic
``getitem``, unfold, as_strided) uses the generic one: scatter-add the gradient into a zero
buffer over the storage region both tensors span (so an overlapping view, e.g. unfold with
step < size, sums), then read it back at the input's elements. An input that overlaps itself
(an expanded tensor) gets each storage slot's gradient split evenly among the elements sharing
it, as PyTorch's as_strided backward does.
"""

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd._formulas._common import is_tensor, reduce_to
from fiamma.autograd.function import Function
from fiamma.autograd_hook import ops

# ---- strided views -----------------------------------------------------------------------------


def _offsets(shape, stride, offset, device):
    """An int64 tensor of ``shape`` on ``device``: the storage offset of each element."""
    nd = len(shape)
    t = fiamma.full((), offset, dtype=fiamma.int64, device=device)
    for d, (n, st) in enumerate(zip(shape, stride)):
        if n != 1 and st:
            t = t + (fiamma.arange(n, device=device) * st).reshape((n,) + (1,) * (nd - d - 1))
    return t.expand(tuple(shape)) if tuple(t.shape) != tuple(shape) else t


def _extent(shape, stride, offset):
    """(lowest, highest) storage offset of a non-empty strided tensor."""
    lo = hi = offset
    for n, st in zip(shape, stride):
        if st >= 0:
            hi += (n - 1) * st
        else:
            lo += (n - 1) * st
    return lo, hi


def _overlapping(shape, stride):
    """Whether two elements of the geometry share a storage slot."""
    dims = sorted((abs(st), n) for n, st in zip(shape, stride) if n != 1)
    reach = 0
    for st, n in dims:
        if st <= reach:
            return True
        reach += (n - 1) * st
    return False


def _drop(seq, d):
    return tuple(seq[:d]) + tuple(seq[d + 1:])


def _accumulate(buf, g, geom):
    """``buf`` (a fresh contiguous 1-D tensor) += ``g`` laid out at ``geom`` = (shape, stride,
    offset), summing where the geometry maps several elements to one slot (no grad)."""
    shape, stride, off = (list(geom[0]), list(geom[1]), geom[2])
    zero = [d for d, (n, st) in enumerate(zip(shape, stride)) if st == 0 and n > 1]
    if zero:  # broadcast dims: sum them first
        g = g.sum(zero, keepdim=True)
        for d in zero:
            shape[d] = 1
    if not _overlapping(shape, stride):
        buf.as_strided(shape, stride, off).add_(g)
        return
    # overlapping windows (unfold, as_strided): a loop over the smallest dim whose removal
    # leaves disjoint slices
    cands = [d for d, n in enumerate(shape)
             if n > 1 and not _overlapping(_drop(shape, d), _drop(stride, d))]
    if cands:
        d = min(cands, key=lambda i: shape[i])
        sub_shape, sub_stride = _drop(shape, d), _drop(stride, d)
        for i in range(shape[d]):
            buf.as_strided(sub_shape, sub_stride, off + i * stride[d]).add_(g.select(d, i))
        return
    idx = _offsets(shape, stride, off, buf.device).reshape(-1)
    buf.index_put_((idx,), g.reshape(-1), accumulate=True)


class _Restride(Function):
    """The linear map "lay ``g`` out at geometry ``src`` in a zero buffer of ``span`` elements
    (summing overlaps), read it at geometry ``dst``" (``dst`` must not overlap itself). Its
    adjoint is the same map with the geometries swapped, which makes the backward of a view
    differentiable to any order."""

    @staticmethod
    def forward(ctx, g, span, src, dst):
        ctx.geoms = (span, src, dst)
        buf = fiamma.zeros((span,), dtype=g.dtype, device=g.device)
        _accumulate(buf, g, src)
        return buf.as_strided(*dst)

    @staticmethod
    def backward(ctx, grad):
        span, src, dst = ctx.geoms
        return _Restride.apply(grad, span, dst, src), None, None, None


def strided_backward(grad, in_shape, in_stride, in_offset, shape, stride, offset):
    """Gradient w.r.t. a tensor of geometry (in_shape, in_stride, in_offset) of its view of
    geometry (shape, stride, offset) (both in storage elements)."""
    in_shape = tuple(in_shape)
    numel = 1
    for n in in_shape:
        numel *= n
    vnumel = 1
    for n in shape:
        vnumel *= n
    if numel == 0 or vnumel == 0:
        return fiamma.zeros(in_shape, dtype=grad.dtype, device=grad.device)
    lo, hi = _extent(in_shape, in_stride, in_offset)
    vlo, vhi = _extent(shape, stride, offset)
    base = min(lo, vlo)
    span = max(hi, vhi) - base + 1
    if not _overlapping(in_shape, in_stride):
        return _Restride.apply(grad, span, (tuple(shape), tuple(stride), offset - base),
                               (in_shape, tuple(in_stride), in_offset - base))
    # the input overlaps itself (a view of an expanded tensor): each storage slot's gradient
    # is split evenly among the input elements that share it
    voff = _offsets(shape, stride, offset - base, grad.device).reshape(-1)
    buf = fiamma.zeros((span,), dtype=grad.dtype, device=grad.device).index_put(
        (voff,), grad.reshape(-1), accumulate=True)
    xoff = _offsets(in_shape, in_stride, in_offset - base, grad.device)
    ones = fiamma.ones((numel,), dtype=grad.dtype, device=grad.device)
    cnt = fiamma.zeros((span,), dtype=grad.dtype, device=grad.device).index_put(
        (xoff.reshape(-1),), ones, accumulate=True)
    return buf[xoff] / cnt[xoff]


def _geometry(ctx):
    """(in_shape, in_stride, in_offset, shape, stride, offset) of a recorded view."""
    kw = ctx.kwargs
    in_stride = kw.get("in_stride")
    in_offset = kw.get("in_offset")
    if in_stride is None:
        x = ctx.inputs[0]
        in_stride, in_offset = x.stride(), x.storage_offset()
    return (tuple(ctx.input_shapes[0]), tuple(in_stride), in_offset, tuple(kw["shape"]),
            tuple(kw["stride"]), kw["offset"])


def _permutation(in_shape, in_stride, shape, stride):
    """p with view dim i == input dim p[i], matched by (size, stride); None if not a
    permutation."""
    if len(in_shape) != len(shape):
        return None
    free = list(range(len(in_shape)))
    perm = []
    for i, key in enumerate(zip(shape, stride)):
        # prefer the same position (keeps ambiguous matches, equal size and stride, in place)
        if i in free and (in_shape[i], in_stride[i]) == key:
            j = i
        else:
            j = next((j for j in free if (in_shape[j], in_stride[j]) == key), None)
            if j is None:
                return None
        free.remove(j)
        perm.append(j)
    return perm


@derivative(ops.view, ops.squeeze, ops.unsqueeze, ops.t, ops.transpose, ops.permute, ops.expand,
            ops.narrow, ops.select, ops.getitem, ops.unfold, ops.as_strided, ops.diagonal,
            ops.load, save="none")
def _view(ctx, grad):
    op = ctx.op
    if op == ops.t:  # its own inverse, whatever the layout
        return (grad.t(),)
    in_shape, in_stride, in_offset, shape, stride, offset = _geometry(ctx)
    if (op == ops.transpose and len(in_shape) == 2 and in_offset == offset and
            in_stride[0] != in_stride[1] and shape == in_shape[::-1] and
            stride == in_stride[::-1]):
        return (grad.t(),)  # a matrix's t() (every Linear records one): no matching below
    if op in (ops.view, ops.squeeze, ops.unsqueeze):
        return (grad.reshape(in_shape),)
    if op == ops.expand:
        return (reduce_to(grad, in_shape),)
    if op in (ops.t, ops.transpose, ops.permute) and in_offset == offset:
        perm = _permutation(in_shape, in_stride, shape, stride)
        if perm is not None:
            if perm == list(range(len(perm))):
                return (grad,)
            inv = [0] * len(perm)
            for i, j in enumerate(perm):
                inv[j] = i
            return (grad.permute(inv),)
    return (strided_backward(grad, in_shape, in_stride, in_offset, shape, stride, offset),)


@derivative(ops.split, ops.split_with_sizes, ops.unbind, save="none")
def _split(ctx, grads):
    """The pieces' gradients joined in one pass (cat along the split dim, stack for unbind);
    a piece without a gradient contributes zeros."""
    shape = tuple(ctx.input_shapes[0])
    kw = ctx.kwargs
    d = kw["dim"]
    g0 = next(g for g in grads if g is not None)
    if ctx.op == ops.unbind:
        piece = shape[:d] + shape[d + 1:]
        gs = [g if g is not None else fiamma.zeros(piece, dtype=g0.dtype, device=g0.device)
              for g in grads]
        return (fiamma.stack(gs, d),)
    sizes = kw["sizes"]
    gs = []
    for g, n in zip(grads, sizes):
        if g is None:
            if n == 0:
                continue
            g = fiamma.zeros(shape[:d] + (n,) + shape[d + 1:], dtype=g0.dtype,
                             device=g0.device)
        gs.append(g)
    return (fiamma.cat(gs, d) if len(gs) > 1 else gs[0].reshape(shape),)


# ---- advanced indexing -------------------------------------------------------------------------

def _key(indices):
    """index_put's (aten::index's) index tuple as a __getitem__ key."""
    return tuple(slice(None) if i is None else i for i in indices)


@derivative(ops.index, save="none")
def _index(ctx, grad):
    indices = ctx.inputs[1]
    z = fiamma.zeros(tuple(ctx.input_shapes[0]), dtype=grad.dtype, device=grad.device)
    return z.index_put(tuple(indices), grad, accumulate=True), None


def _put_grads(ctx, grad, indices, values_shape, accumulate):
    need = ctx.needs_input_grad
    gx = gv = None
    if need[0]:
        if accumulate:
            gx = grad
        else:
            gx = grad.index_put(tuple(indices),
                                fiamma.zeros((), dtype=grad.dtype, device=grad.device))
    if len(need) > 2 and need[2] and values_shape is not None:
        gv = reduce_to(grad[_key(indices)], values_shape)
    return gx, gv


@derivative(ops.index_put, ops.index_put_, save="none")
def _index_put(ctx, grad):
    """``x.index_put(indices, values)``: x keeps its gradient outside the written positions (all
    of it with ``accumulate``); values get the gradient at the indices, summed to their shape."""
    indices = ctx.inputs[1]
    accumulate = bool(ctx.kwargs.get("accumulate", False))
    gx, gv = _put_grads(ctx, grad, indices, ctx.input_shapes[2], accumulate)
    return gx, None, gv


@derivative(ops.setitem, save="inputs")
def _setitem(ctx, grad):
    """``x[key] = value``: x's old values survive outside x[key]; value gets x[key]'s
    gradient summed to its shape."""
    key = ctx.inputs[1]
    value = ctx.inputs[2]
    need = ctx.needs_input_grad
    gx = gv = None
    if need[0]:
        with fiamma.no_grad():
            written = fiamma.zeros(tuple(grad.shape), dtype=fiamma.bool, device=grad.device)
            written[key] = True
        gx = fiamma.where(written, 0.0, grad)
    if len(need) > 2 and need[2] and is_tensor(value):
        gv = reduce_to(grad[key], value.shape)
    return gx, None, gv


@derivative(ops.copy_, save="none")
def _copy(ctx, grad):
    shape = ctx.input_shapes[1]
    gs = reduce_to(grad, shape) if ctx.needs_input_grad[1] and shape is not None else None
    return None, gs


@derivative(ops.uniform_, ops.normal_, ops.random_, ops.bernoulli_, ops.exponential_,
            ops.geometric_, ops.log_normal_, ops.cauchy_, save="none")
def _overwritten(ctx, grad):
    """Random fills overwrite every element: the old values get a zero gradient (PyTorch's
    zeros_like(grad)); so does a tensor of probabilities (``bernoulli_(p)``)."""
    need = ctx.needs_input_grad
    if len(need) > 1 and need[1]:  # bernoulli_(p): p's zero gradient, in p's shape and dtype
        return fiamma.zeros_like(grad), fiamma.zeros(ctx.input_shapes[1],
                                                     dtype=ctx.input_dtypes[1],
                                                     device=grad.device)
    return (fiamma.zeros_like(grad),) + (None,) * (len(need) - 1)


@derivative(ops.fill_, save="none")
def _fill(ctx, grad):
    """``x.fill_(value)``: x's old values get a zero gradient, a tensor value the sum."""
    need = ctx.needs_input_grad
    gv = grad.sum() if len(need) > 1 and need[1] else None
    return (fiamma.zeros_like(grad),) + ((gv,) if len(need) > 1 else ())


# ---- joining, copies, casts ----------------------------------------------------------------

@derivative(ops.cat, save="none")
def _cat(ctx, grad):
    d = ctx.kwargs.get("dim", 0)
    out = []
    start = 0
    for shape, need in zip(ctx.input_shapes, ctx.needs_input_grad):
        n = shape[d]
        out.append(grad.narrow(d, start, n) if need else None)
        start += n
    return tuple(out)


@derivative(ops.clone, save="none")
def _identity(ctx, grad):
    return (grad,)


@derivative(ops.to, save="none")
def _to(ctx, grad):
    # a copy to another device sends the gradient back to the input's device
    dev = ctx.kwargs.get("source_device")
    return (grad if dev is None else grad.to(dev),)
