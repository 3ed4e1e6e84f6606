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
from fiamma._lib import check, lib
from fiamma._storage import CPU
from fiamma._tensor import Tensor, new_empty

__all__ = ["pad"]

_index = operator.index
_copy_c = lib.fm_copy
_MODES = ("constant", "reflect", "replicate", "circular")


def _fill(op, t, shape, ptr, stride, value):
    if builtins.any(s == 0 for s in shape):
        return
    dt = t._dtype
    if dt.kind == 2:
        rc = lib.fm_fill(dt.code, len(shape), shape, ptr, stride, builtins.float(value), 0, 0)
    else:
        v = builtins.int(value) if not isinstance(value, builtins.bool) else builtins.int(value)
        if dt.kind == 0:
            v = builtins.int(value != 0)
        rc = lib.fm_fill(dt.code, len(shape), shape, ptr, stride, 0.0, v, 1)
    check(rc, op)


def _copy(op, dt, shape, optr, ostride, iptr, istride):
    if builtins.all(s > 0 for s in shape):
        check(_copy_c(dt.code, dt.code, len(shape), shape, optr, ostride, iptr, istride), op)


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
    if input._storage.device is not CPU:
        raise RuntimeError(f"{op}: not implemented for tensors on {input._storage.device}")
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
        if mode == "reflect" and (lo >= n or hi >= n):
            raise RuntimeError(f"{op}: Padding size should be less than the corresponding input "
                               f"dimension, but got: padding ({lo}, {hi}) at dimension {d} of "
                               f"input {list(shape)}")
        out_shape.append(m)
    # crop for negative amounts; the cropped input lands at max(lo, 0)
    isz = x._dtype.itemsize
    src_ptr, crop_shape, dst_off = x._ptr, [], 0
    out = new_empty(tuple(out_shape), x._dtype)
    ost = out._stride
    for d, (lo, hi) in enumerate(lr):
        n = shape[d]
        c0 = -lo if lo < 0 else 0
        c1 = n + hi if hi < 0 else n
        crop_shape.append(builtins.max(c1 - c0, 0))
        src_ptr += c0 * x._stride[d] * isz if c1 > c0 else 0
        dst_off += builtins.max(lo, 0) * ost[d]
    for d, (lo, hi) in enumerate(lr):
        n = crop_shape[d]
        if mode == "reflect" and (lo >= n or hi >= n) and (lo > 0 or hi > 0):
            raise RuntimeError(f"{op}: Padding size should be less than the corresponding input "
                               f"dimension after cropping, but got: padding ({lo}, {hi}) at "
                               f"dimension {d} of input {list(shape)}")
        if mode == "replicate" and n == 0 and (lo > 0 or hi > 0):
            raise RuntimeError(f"{op}: cannot replicate-pad dimension {d}: it is empty after "
                               f"cropping (input {list(shape)}, padding ({lo}, {hi}))")
    if mode == "circular":
        for d, (lo, hi) in enumerate(lr):
            if lo > crop_shape[d] or hi > crop_shape[d]:
                raise RuntimeError(f"{op}: Padding value causes wrapping around more than once "
                                   f"(padding ({lo}, {hi}) at dimension {d} of input "
                                   f"{list(shape)})")
    optr = out._ptr
    _copy(op, x._dtype, crop_shape, optr + dst_off * isz, ost, src_ptr, x._stride)
    if out._numel:
        _bands(op, out, lr, crop_shape, mode, value)
    if x.requires_grad:
        G.record("pad", out, (input,), {"pad": p, "mode": mode, "value": value})
    return out


def _bands(op, out, lr, crop_shape, mode, value):
    """Fill the padding bands of ``out``, dim by dim from the last one."""
    isz = out._dtype.itemsize
    ost = out._stride
    nd = len(lr)
    # extent along each dim of the region already valid: the middle (cropped input) for dims
    # not yet padded, the whole dim for dims done
    ext = [(builtins.max(lo, 0), crop_shape[d]) for d, (lo, hi) in enumerate(lr)]
    if mode == "constant":
        for d in range(nd - 1, -1, -1):
            lo, hi = builtins.max(lr[d][0], 0), builtins.max(lr[d][1], 0)
            s0, n = ext[d]
            for start, length in ((0, lo), (s0 + n, hi)):
                if length:
                    shape = [e[1] for e in ext]
                    shape[d] = length
                    ptr = out._ptr + builtins.sum(
                        (start if i == d else ext[i][0]) * ost[i] for i in range(nd)) * isz
                    _fill(op, out, shape, ptr, ost, value)
            ext[d] = (0, out._shape[d])
        return
    for d in range(nd - 1, -1, -1):
        lo, hi = builtins.max(lr[d][0], 0), builtins.max(lr[d][1], 0)
        s0, n = ext[d]
        if lo == 0 and hi == 0:
            ext[d] = (0, out._shape[d])
            continue
        base = out._ptr + builtins.sum(ext[i][0] * ost[i] for i in range(nd) if i != d) * isz
        shape = [e[1] for e in ext]
        sd = ost[d]
        for side, length in ((0, lo), (1, hi)):
            if not length:
                continue
            shape[d] = length
            dst = base + (0 if side == 0 else s0 + n) * sd * isz
            ist = list(ost)
            if mode == "replicate":
                src = base + (s0 if side == 0 else s0 + n - 1) * sd * isz
                ist[d] = 0
            elif mode == "reflect":
                # band index j reads middle index lo - j (left) or n - 2 - j (right)
                src = base + ((s0 + lo) if side == 0 else (s0 + n - 2)) * sd * isz
                ist[d] = -sd
            else:  # circular: left band reads the last `lo`, right band the first `hi`
                src = base + ((s0 + n - lo) if side == 0 else s0) * sd * isz
            _copy(op, out._dtype, shape, dst, ost, src, ist)
        ext[d] = (0, out._shape[d])
