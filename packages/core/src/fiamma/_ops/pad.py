"""``fiamma.pad``: the implementation behind ``fiamma.nn.functional.pad`` (same signature).

The result is built in place: the (cropped) input is copied into the middle of the result,
then each padded dim, from the last padded one outwards, fills its two bands from the result
itself (one strided ``fm_copy`` per band: a reversed read for reflect, a zero-stride read for
replicate, a shifted read for circular), so the corners come out right without special cases.
"""

import builtins
import numbers
import operator

from fiamma import _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check
from fiamma._tensor import Tensor, new_empty

__all__ = ["pad"]

_index = operator.index
_MODES = ("constant", "reflect", "replicate", "circular")


def _fill(op, t, shape, off, stride, value):
    """Fill the view (shape, stride) of t starting ``off`` elements in."""
    if builtins.any(s == 0 for s in shape):
        return
    dt = t._dtype
    if dt._kind == 3:  # complex: the real and imaginary planes of the float view
        from fiamma._ops.complex_ops import view_as_real

        r = view_as_real(t.detach())
        c = builtins.complex(value)
        rst = [2 * s for s in stride]
        for part, v in ((0, c.real), (1, c.imag)):
            check(r._storage.backend.fill_region(shape, r, 2 * off + part, rst, v, 0, 0), op)
        return
    if dt._kind == 2:
        rc = t._storage.backend.fill_region(shape, t, off, stride, builtins.float(value), 0, 0)
    else:
        v = builtins.int(value) if not isinstance(value, builtins.bool) else builtins.int(value)
        if dt._kind == 0:
            v = builtins.int(value != 0)
        rc = t._storage.backend.fill_region(shape, t, off, stride, 0.0, v, 1)
    check(rc, op)


def _copy(op, shape, out, ooff, ostride, x, ioff, istride):
    """The view (shape, istride) of x from element ``ioff`` into that of out from ``ooff``."""
    if builtins.all(s > 0 for s in shape):
        check(out._storage.backend.copy_region(shape, out, ooff, ostride, x, ioff, istride), op)


def pad(input, pad, mode="constant", value=None):
    """Pad ``input``. ``pad`` lists (left, right) amounts from the LAST dim backwards:
    ``(l, r)`` pads the last dim, ``(l, r, t, b)`` the last two, and so on. Modes:
    ``'constant'`` (fill with ``value``, default 0; any number of dims; negative amounts crop),
    ``'reflect'`` (mirror without repeating the edge; amount < size), ``'replicate'`` (repeat
    the edge), ``'circular'`` (wrap around; amount <= size). Non-constant modes pad the last 1,
    2 or 3 dims of a tensor with 1 or 2 more dims (PyTorch's rule).

    >>> import fiamma
    >>> fiamma.pad(fiamma.tensor([[1, 2]]), (1, 1), mode="reflect").tolist()
    [[2, 1, 2, 1]]
    """
    op = "pad"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected input to be a Tensor, got {type(input).__name__}")
    try:
        p = tuple(_index(v) for v in pad)
    except TypeError:
        raise TypeError(f"{op}: pad must be a tuple of ints, got {pad!r}") from None
    if mode not in _MODES:
        raise NotImplementedError(f"{op}: Unrecognised padding mode {mode}; expected one of "
                                  f"{', '.join(_MODES)}")
    x = input
    nd = len(x._shape)
    if len(p) % 2:
        raise RuntimeError(f"{op}: Padding length must be divisible by 2, got {len(p)}")
    npd = len(p) // 2
    if npd > nd:
        raise RuntimeError(f"{op}: Padding length should be less than or equal to two times the "
                           f"input dimension but got padding length {len(p)} and input of "
                           f"dimension {nd}")
    if mode != "constant":
        if value is not None and value != 0:
            raise RuntimeError(f'{op}: Padding mode "{mode}" doesn\'t take in value argument')
        if npd not in (1, 2, 3) or nd not in (npd + 1, npd + 2):
            raise NotImplementedError(
                f"{op}: Padding size {len(p)} is not supported for {nd}D input tensor. "
                "Supported combinations for non-constant padding: 2D or 3D input: padding size "
                "= 2 (pads last dimension); 3D or 4D input: padding size = 4 (pads last 2 "
                "dimensions); 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    elif value is None:
        value = 0
    elif not isinstance(value, numbers.Number):
        raise TypeError(f"{op}: value must be a number, got {type(value).__name__}")
    # per dim (left, right), dims in order
    lr = [(0, 0)] * nd
    for i in range(npd):
        lr[nd - 1 - i] = (p[2 * i], p[2 * i + 1])
    shape = x._shape
    out_shape = []
    for d, (lo, hi) in enumerate(lr):
        n = shape[d]
        m = n + lo + hi
        if m < 0:
            raise RuntimeError(f"{op}: The input size {n}, plus negative padding {lo} and {hi} "
                               f"resulted in a negative output size, which is invalid. Check "
                               f"dimension {d} of your input.")
        if mode == "reflect" and ((lo >= n and lo > 0) or (hi >= n and hi > 0)):
            raise RuntimeError(f"{op}: Padding size should be less than the corresponding input "
                               f"dimension, but got: padding ({lo}, {hi}) at dimension {d} of "
                               f"input {list(shape)}")
        if mode == "replicate" and n == 0 and (lo > 0 or hi > 0):
            raise RuntimeError(f"{op}: cannot replicate-pad dimension {d} of size 0 (input "
                               f"{list(shape)}, padding ({lo}, {hi}))")
        out_shape.append(m)
    # where the input lands: output positions [o0, o0 + count) hold input [i0, i0 + count);
    # negative amounts crop the padded whole, so a crop may eat into the other side's padding
    src_off, crop_shape, dst_off, ext = 0, [], 0, []
    out = new_empty(tuple(out_shape), x._dtype, x._storage.device)
    ost = out._stride
    for d, (lo, hi) in enumerate(lr):
        n, m = shape[d], out_shape[d]
        o0 = builtins.max(lo, 0)
        i0 = builtins.max(-lo, 0)
        count = builtins.max(0, builtins.min(n - i0, m - o0))
        o0 = builtins.min(o0, m)
        crop_shape.append(count)
        ext.append((o0, count))
        if count:
            src_off += i0 * x._stride[d]
        dst_off += o0 * ost[d]
    if mode in ("reflect", "replicate") and builtins.any(
            (lo > 0 and lo >= (n if mode == "reflect" else n + 1)) or
            (hi > 0 and hi >= (n if mode == "reflect" else n + 1))
            for (lo, hi), n in zip(((builtins.max(a, 0), builtins.max(b, 0)) for a, b in lr),
                                   crop_shape)):
        # a crop on one side removed what the other side's padding reads: map every output
        # index to the original input instead (PyTorch's definition), one gather per dim
        out = _pad_by_index(x, lr, mode, op)
        if x.requires_grad:
            G.record(ops.pad, out, (input,), {"pad": p, "mode": mode, "value": value})
        return out
    if mode == "circular":
        for d, (lo, hi) in enumerate(lr):
            if lo > crop_shape[d] or hi > crop_shape[d]:
                raise RuntimeError(f"{op}: Padding value causes wrapping around more than once "
                                   f"(padding ({lo}, {hi}) at dimension {d} of input "
                                   f"{list(shape)})")
    _copy(op, crop_shape, out, dst_off, ost, x, src_off, x._stride)
    if out._numel:
        _bands(op, out, ext, mode, value)
    if x.requires_grad:
        G.record(ops.pad, out, (input,), {"pad": p, "mode": mode, "value": value})
    return out


def _pad_by_index(x, lr, mode, op):
    import numpy as np

    from fiamma._ops.shape_views import _from_np, _take

    t = x.detach()
    for d, (lo, hi) in enumerate(lr):
        if lo == 0 and hi == 0:
            continue
        n = t._shape[d]
        i = np.arange(n + lo + hi, dtype=np.int64) - lo
        if mode == "replicate":
            i = np.clip(i, 0, n - 1)
        else:  # amounts < n: one reflection at each end suffices
            i = np.abs(i)
            i = np.where(i >= n, 2 * (n - 1) - i, i)
        idx = _from_np(i)
        if t._storage.device is not idx._storage.device:
            idx = idx.to(t.device)
        t = _take(t, d, idx, op)
    return t


def _bands(op, out, ext, mode, value):
    """Fill the padding bands of ``out``, dim by dim from the last one. ``ext[d]`` is (start,
    size) of the input's block along dim d; each band spans the block along dims not yet
    padded and the whole extent along dims already done."""
    ost = out._stride
    nd = len(ext)
    ext = list(ext)
    for d in range(nd - 1, -1, -1):
        s0, n = ext[d]
        left, right = s0, out._shape[d] - s0 - n
        if left == 0 and right == 0:
            continue
        base = builtins.sum(ext[i][0] * ost[i] for i in range(nd) if i != d)  # elements
        shape = [e[1] for e in ext]
        sd = ost[d]
        for side, length in ((0, left), (1, right)):
            if not length:
                continue
            shape[d] = length
            dst = base + (0 if side == 0 else s0 + n) * sd
            if mode == "constant":
                _fill(op, out, shape, dst, ost, value)
                continue
            ist = list(ost)
            if mode == "replicate":
                src = base + (s0 if side == 0 else s0 + n - 1) * sd
                ist[d] = 0
            elif mode == "reflect":
                # band index j reads block index left - j (left) or n - 2 - j (right)
                src = base + ((s0 + left) if side == 0 else (s0 + n - 2)) * sd
                ist[d] = -sd
            else:  # circular: the left band reads the block's last `left`, the right its first
                src = base + ((s0 + n - left) if side == 0 else s0) * sd
            _copy(op, shape, out, dst, ost, out, src, ist)
        ext[d] = (0, out._shape[d])
