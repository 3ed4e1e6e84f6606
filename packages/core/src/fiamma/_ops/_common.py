"""Helpers shared by the op modules: broadcasting, operand preparation, output checks."""

import builtins
import numbers
import operator

import numpy as np

from fiamma import _dtype as D
from fiamma._storage import CPU
from fiamma._tensor import Tensor, _copy_into, new_empty

__all__ = ["broadcast_shapes", "as_shape", "bcast_strides", "is_scalar", "as_operand", "check_out",
           "resize_out",
           "same_device", "on_device", "cast", "overlaps"]


def is_scalar(x):
    return isinstance(x, (builtins.bool, builtins.int, builtins.float, builtins.complex,
                          np.number, np.bool_)) or isinstance(x, numbers.Number)


def broadcast_shapes(*shapes, op="broadcast_shapes"):
    """The shape (a tuple) that tensors of the given shapes (sequences of ints) broadcast to, by
    NumPy/PyTorch rules; RuntimeError naming ``op`` if they clash. The one implementation,
    behind the public ``fiamma.broadcast_shapes`` (which validates a user's shapes with
    ``as_shape`` and returns a Size) and every op that broadcasts."""
    nd = builtins.max(len(s) for s in shapes) if shapes else 0
    out = [1] * nd
    for s in shapes:
        off = nd - len(s)
        # from the last dim, so a clash is reported at the trailing dim first, as PyTorch's
        for i in builtins.range(len(s) - 1, -1, -1):
            n = s[i]
            cur = out[off + i]
            if cur == n or n == 1:
                continue
            if cur == 1:
                out[off + i] = n
            else:
                raise RuntimeError(
                    f"{op}: The size of tensor a ({cur}) must match the size of tensor b ({n}) "
                    f"at non-singleton dimension {off + i}; shapes "
                    + ", ".join(str(list(x)) for x in shapes))
    return builtins.tuple(out)


def as_shape(s, op):
    """A user's shape argument (a sequence of ints, or an int for a 1-D shape) as a tuple;
    RuntimeError naming ``op`` for a negative size."""
    s = builtins.tuple(operator.index(n) for n in s) if isinstance(s, (tuple, list)) else \
        (operator.index(s),)
    if builtins.any(n < 0 for n in s):
        raise RuntimeError(f"{op}: Trying to create tensor with negative dimension: {list(s)}")
    return s


def broadcast_pair(sa, sb, op):
    """broadcast_shapes(sa, sb, op=op) for the two shapes of a binary op, without its
    generality (the per-op cost of every broadcasting binary op)."""
    na, nb = len(sa), len(sb)
    pa = (1,) * (nb - na) + sa if na < nb else sa
    pb = (1,) * (na - nb) + sb if nb < na else sb
    out = []
    for x, y in zip(pa, pb):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return broadcast_shapes(sa, sb, op=op)  # raises, with its message
    return tuple(out)


def bcast_strides(t, shape):
    """Strides of ``t`` viewed as broadcast to ``shape`` (0 along broadcast dims)."""
    ts = t._shape
    if ts == shape:
        return t._stride
    off = len(shape) - len(ts)
    st = [0] * len(shape)
    for i, n in enumerate(ts):
        st[off + i] = t._stride[i] if n != 1 else 0
    return tuple(st)


def as_operand(x, op):
    """Tensors pass; Python/NumPy scalars pass; NumPy arrays and sequences become tensors."""
    if isinstance(x, Tensor) or is_scalar(x):
        return x
    if isinstance(x, (np.ndarray, list, tuple)):
        from fiamma._creation import tensor

        return tensor(x)
    raise TypeError(f"{op}: unsupported operand type {type(x).__name__}")


def same_device(op, *ts):
    """The device an op on tensors ``ts`` runs on: their common device, where a 0-d CPU tensor
    goes with any device (PyTorch's CPU-scalar rule; ``on_device`` moves it); RuntimeError
    naming both devices otherwise."""
    dev = None
    for t in ts:
        if isinstance(t, Tensor):
            d = t._storage.device
            if d is CPU and t._shape == ():
                continue
            if dev is None:
                dev = d
            elif d is not dev and d != dev:
                raise RuntimeError(f"{op}: Expected all tensors to be on the same device, but "
                                   f"found at least two devices, {dev} and {d}!")
    return CPU if dev is None else dev


def on_device(t, dev):
    """Tensor ``t`` (anything else unchanged) on ``dev``: a 0-d CPU operand of an op on
    another device is copied there (see same_device)."""
    if isinstance(t, Tensor) and t._storage.device is not dev and t._storage.device != dev:
        return t.to(dev)
    return t


def cast(t, dt):
    """``t`` as dtype ``dt`` (a new tensor only when the dtype differs)."""
    if t._dtype is dt:
        return t
    out = new_empty(t._shape, dt, t._storage.device)
    _copy_into(out, t)
    return out


def overlaps(a, b):
    """Whether two tensors share memory in a way that makes an in-place result depend on the
    order of evaluation (same storage, not the identical view)."""
    if a._storage is not b._storage:
        return False
    if a._ptr == b._ptr and a._stride == b._stride and a._shape == b._shape:
        return False
    return True


def check_out(out, shape, dt, op):
    """Validate an ``out=`` tensor: result dtype must be castable; resized if empty."""
    if not isinstance(out, Tensor):
        raise TypeError(f"{op}: out must be a Tensor, got {type(out).__name__}")
    if not D.can_cast(dt, out._dtype):
        raise RuntimeError(f"{op}: result type {dt} can't be cast to the desired output type "
                           f"{out._dtype}")
    if out._shape != shape:
        resize_out(out, shape, op)
    return out


def resize_out(out, shape, op):
    """Give ``out`` the result ``shape`` (fresh contiguous memory), as PyTorch does; an out with
    elements is resized with PyTorch's deprecation warning."""
    from fiamma._tensor import _init

    if out._numel:
        import warnings

        warnings.warn(f"{op}: an output with one or more elements was resized since it had shape "
                      f"{list(out._shape)}, which does not match the required output shape "
                      f"{list(shape)}. This behavior is deprecated, and in a future PyTorch "
                      "release outputs will not be resized unless they have zero elements. You "
                      "can explicitly reuse an out tensor t by resizing it, inplace, to zero "
                      "elements with t.resize_(0).", UserWarning, stacklevel=4)
    fresh = new_empty(shape, out._dtype, out._storage.device)
    _init(out, fresh._storage, fresh._dtype, fresh._shape, fresh._stride, 0, True)
