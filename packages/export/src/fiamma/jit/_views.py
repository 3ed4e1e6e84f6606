"""Strided views as a few dense steps (permute, reshape, slice, expand).

Core records every view op (view, transpose, permute, expand, basic indexing, ...) with the
strides it produced, not with the op's own arguments. A traced graph and an ONNX file need
dense ops, so ``plan_view`` recovers, from (input shape, strides, offset) and (output shape,
strides, offset) over the same memory, the steps that make the output from the dense input.
It works on the element addresses (NumPy index arithmetic at trace time), so any mix of those
view ops is covered; a view that is none of them (overlapping windows from ``as_strided``,
``unfold``) gets None and the tracer names it as unsupported.
"""

import numpy as np

__all__ = ["plan_view", "step_shape"]


def step_shape(cur, op, arg):
    """The shape after one step of a plan."""
    cur = tuple(cur)
    if op == "permute":
        return tuple(cur[i] for i in arg)
    if op == "slice":
        cur = list(cur)
        for ax, start, end, step in arg:
            cur[ax] = len(range(start, end, step))
        return tuple(cur)
    return tuple(arg)


def _addresses(shape, stride, off):
    a = np.full((), off, dtype=np.int64)
    for n, s in zip(shape, stride):
        a = a[..., None] + np.arange(n, dtype=np.int64) * s
    return a.reshape(shape)


def plan_view(ishape, istride, ioff, shape, stride, off):
    """Steps ``[(op, arg), ...]`` turning the dense input into the view, or None.

    ops: ("permute", dims), ("reshape", shape), ("slice", [(axis, start, end, step), ...]),
    ("expand", shape). Reshapes keep PyTorch's sizes; the caller decides which to keep dynamic.
    """
    ishape, istride, shape, stride = tuple(ishape), tuple(istride), tuple(shape), tuple(stride)
    if 0 in ishape or 0 in shape:
        if int(np.prod(shape)):
            return None
        if 0 in ishape:
            return [("reshape", shape)]
        n = int(np.prod(ishape))  # an empty slice of a non-empty input
        return [("reshape", (n,)), ("slice", ((0, 0, 0, 1),)), ("reshape", shape)]
    fast = _fast_plan(ishape, istride, ioff, shape, stride, off)
    if fast is not None:
        return fast
    nd = len(ishape)
    big = [d for d in range(nd) if ishape[d] != 1]
    if any(istride[d] == 0 for d in big):
        # a broadcast input (an expand, meshgrid's grids): only a reshape that reads its
        # elements in order is followed
        if int(np.prod(ishape)) == int(np.prod(shape)) and np.array_equal(
                _addresses(ishape, istride, ioff).reshape(-1),
                _addresses(shape, stride, off).reshape(-1)):
            return [("reshape", shape)]
        return _plan_broadcast(ishape, istride, ioff, shape, stride, off)
    byst = sorted(big, key=lambda d: -istride[d])
    for x, y in zip(byst, byst[1:]):
        if istride[x] < istride[y] * ishape[y]:
            return None
    # the input's dims by stride, its size-1 dims (a batch of 1 while tracing) left in place
    # so that the steps keep them where reshapes can still find the batch axis
    it = iter(byst)
    order = [d if ishape[d] == 1 else next(it) for d in range(nd)]
    steps = []
    if order != list(range(nd)):
        steps.append(("permute", tuple(order)))
    red = tuple(ishape[d] for d in order)
    cur = red
    # the output's dims likewise (broadcast dims, stride 0, count as size 1 until the expand)
    no = len(shape)
    osz = tuple(1 if stride[i] == 0 else shape[i] for i in range(no))
    obig = sorted((i for i in range(no) if osz[i] != 1), key=lambda i: -stride[i])
    it = iter(obig)
    oorder = [i if osz[i] == 1 else next(it) for i in range(no)]
    oshape = tuple(osz[i] for i in oorder)
    r = _addresses(oshape, tuple(stride[i] if osz[i] != 1 else 0 for i in oorder), off) - ioff
    idx = []
    for d in order:
        if ishape[d] == 1:
            idx.append(np.zeros_like(r))
            continue
        q = r // istride[d]
        r = r - q * istride[d]
        if q.size and (q.min() < 0 or q.max() >= ishape[d]):
            return None
        idx.append(q)
    if r.size and r.any():
        return None
    box, sl = [], []
    for k, q in enumerate(idx):
        u = np.unique(q)
        n = len(u)
        step = int(u[1] - u[0]) if n > 1 else 1
        if n > 1 and not np.array_equal(u, u[0] + step * np.arange(n)):
            return None
        start = int(u[0])
        box.append((start, step, n))
        if not (start == 0 and step == 1 and n == red[k]):
            sl.append((k, start, start + step * (n - 1) + 1, step))
    lin = np.zeros(oshape, dtype=np.int64)
    for k, q in enumerate(idx):
        start, step, n = box[k]
        lin = lin * n + (q - start) // step
    if not np.array_equal(lin.reshape(-1), np.arange(lin.size)):
        return None
    if sl:
        steps.append(("slice", tuple(sl)))
        cur = tuple(n for (_, _, n) in box)
    if cur != oshape:
        steps.append(("reshape", oshape))
        cur = oshape
    p2 = tuple(oorder.index(i) for i in range(no))
    if p2 != tuple(range(no)):
        steps.append(("permute", p2))
        cur = tuple(oshape[i] for i in p2)
    if cur != osz:
        steps.append(("reshape", osz))
    if osz != shape:
        steps.append(("expand", shape))
    return _merge(steps, ishape)


def _plan_broadcast(ishape, istride, ioff, shape, stride, off):
    """A slice/permute-free view of a broadcast input whose broadcast dims stay broadcast in
    place (``expanded[:, 1:]``): every position along such a dim holds the same values, so the
    dim gets a stride of its own (beyond the input's addresses) in both and is planned as a
    dense one."""
    nd = len(ishape)
    if len(shape) != nd:
        return None
    zero = [d for d in range(nd) if istride[d] == 0 and ishape[d] != 1]
    if any(stride[d] != 0 or shape[d] > ishape[d] for d in zero):
        return None
    span = ioff + sum((n - 1) * st for n, st in zip(ishape, istride)) + 1
    ist, ost = list(istride), list(stride)
    for d in zero:
        ist[d] = ost[d] = span
        span *= ishape[d]
    return plan_view(ishape, tuple(ist), ioff, shape, tuple(ost), off)


def _contiguous(shape, stride):
    expect = 1
    for n, s in zip(reversed(shape), reversed(stride)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def _fast_plan(ishape, istride, ioff, shape, stride, off):
    """The two views of every forward (a reshape of contiguous memory, a pure permutation)
    without the address arithmetic; None to take the general path."""
    if off != ioff:
        return None
    if _contiguous(ishape, istride) and _contiguous(shape, stride) and \
            int(np.prod(ishape)) == int(np.prod(shape)):
        return [] if shape == ishape else [("reshape", shape)]
    if len(shape) == len(ishape) and sorted(shape) == sorted(ishape):
        # a permutation; size-1 dims (a batch of 1 while tracing) pair up in order, so they
        # keep their place and reshapes after them still see the batch axis
        big = [(n, st, d) for d, (n, st) in enumerate(zip(ishape, istride)) if n != 1]
        if len({st for _, st, _ in big}) != len(big):
            return None
        ones = iter(d for d in range(len(ishape)) if ishape[d] == 1)
        perm = []
        for n, st in zip(shape, stride):
            if n == 1:
                perm.append(next(ones))
                continue
            match = [d for m, t, d in big if m == n and t == st and d not in perm]
            if not match:
                return None
            perm.append(match[0])
        return [] if perm == list(range(len(perm))) else [("permute", tuple(perm))]
    return None


def _merge(steps, shape):
    """Adjacent reshapes collapse into the last; adjacent permutes compose."""
    out = []
    for op, arg in steps:
        if out and op == "reshape" and out[-1][0] == "reshape":
            out[-1] = (op, arg)
        elif out and op == "permute" and out[-1][0] == "permute":
            prev = out[-1][1]
            out[-1] = (op, tuple(prev[i] for i in arg))
        else:
            out.append((op, arg))
    kept, cur = [], tuple(shape)
    for op, arg in out:
        if (op == "permute" and tuple(arg) == tuple(range(len(arg)))) or \
                (op == "reshape" and tuple(arg) == cur):
            continue
        cur = step_shape(cur, op, arg)
        kept.append((op, arg))
    return kept


def dynamic_target(target, ishape):
    """A reshape's target for inputs whose leading sizes may change (batch axes): returns
    (target, keep) where the first ``keep`` sizes are the input's own (copied at run time) and
    the first size that differs is written -1 (inferred), so a batch axis at or after it (a
    merge ``(B*T, C)``, a split, ``(T, B*heads, d)``) follows the input. A batch axis placed
    after a static dim that the reshape changes is not followed (a file with that dim dynamic
    fails at run time in the Reshape). When every input size is copied, the sizes after them
    are 1s and stay written out (``x[:, None]``): a -1 could not be inferred for an empty
    input."""
    t = list(target)
    keep = 0
    for a, b in zip(t, ishape):
        if a != b:
            break
        keep += 1
    if -1 not in t and len(ishape) > keep < len(t) and t[keep] != 0:
        t[keep] = -1
    return t, keep
