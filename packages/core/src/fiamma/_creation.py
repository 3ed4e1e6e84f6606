"""Creation functions: tensor, as_tensor, empty/zeros/ones/full and their _like forms."""

import builtins

import numpy as np

from fiamma import _dtype as D
from fiamma._lib import check, lib
from fiamma._storage import CPU, device as _device
from fiamma._tensor import Tensor, _shape_arg, install_methods, new_empty

__all__ = [
    "tensor", "as_tensor", "asarray", "scalar_tensor", "empty", "zeros", "ones", "full",
    "empty_like", "zeros_like", "ones_like", "full_like", "empty_strided",
]


def _dev(device):
    if device is None:
        return CPU
    return _device(device)


def _finish(t, requires_grad):
    if requires_grad:
        t.requires_grad_(True)
    return t


def _infer_numpy(data):
    """A NumPy array for nested Python data, with PyTorch's dtype inference applied after."""
    if isinstance(data, (list, tuple)) and _has_tensor(data):
        data = _tensors_to_lists(data)
    try:
        arr = np.asarray(data)
    except (ValueError, TypeError) as e:
        raise ValueError(f"tensor: could not build a tensor from {type(data).__name__}: {e}") \
            from None
    if arr.dtype == object:
        raise TypeError(f"tensor: could not infer dtype of {type(data).__name__} "
                        "(ragged nested sequence or non-numeric elements)")
    return arr


def _has_tensor(seq):
    for x in seq:
        if isinstance(x, Tensor):
            return True
        if isinstance(x, (list, tuple)) and _has_tensor(x):
            return True
    return False


def _tensors_to_lists(seq):
    return [x.tolist() if isinstance(x, Tensor) else
            _tensors_to_lists(x) if isinstance(x, (list, tuple)) else x for x in seq]


def _default_for_numpy_kind(arr):
    k = arr.dtype.kind
    if k == "b":
        return D.bool
    if k in "iu":
        return D.int64
    if k == "f":
        return D.get_default_dtype()
    if k == "c":
        raise TypeError("tensor: complex numbers are not supported")
    raise TypeError(f"tensor: unsupported element type {arr.dtype}")


def from_array_copy(arr, dt):
    """A new CPU tensor holding a copy of NumPy array ``arr`` cast to ``dt``."""
    if arr.dtype.kind == "c":
        raise TypeError("tensor: complex numbers are not supported")
    if arr.dtype not in D._FROM_NUMPY:
        arr = arr.astype(np.float64 if arr.dtype.kind == "f" else np.int64)
    src_dt = D._FROM_NUMPY[arr.dtype]
    shape = tuple(arr.shape)  # before ascontiguousarray, which makes 0-d arrays 1-d
    arr = np.ascontiguousarray(arr)
    out = new_empty(shape, dt)
    if out._numel:
        check(lib.fm_copy_contig(dt.code, src_dt.code, out._numel, out._ptr,
                                 arr.__array_interface__["data"][0]), "tensor")
    return out


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of ``data`` (nested lists, scalars, arrays, tensors).

    Python floats become the default dtype (float32), ints int64, bools bool.

    >>> import fiamma
    >>> fiamma.tensor([1, 2, 3]).dtype
    fiamma.int64
    """
    dt = None if dtype is None else D.to_dtype(dtype, "tensor")
    dev = _dev(device)
    if isinstance(data, Tensor):
        out = data.detach().to(dtype=dt or data._dtype, device=dev, copy=True)
        return _finish(out, requires_grad)
    if isinstance(data, np.ndarray):
        src = data
        if dt is None:
            dt = D.from_numpy_dtype(data.dtype) if data.dtype in D._FROM_NUMPY else \
                _default_for_numpy_kind(data)
    else:
        src = _infer_numpy(data)
        if dt is None:
            if isinstance(data, (np.generic,)) and src.dtype in D._FROM_NUMPY:
                dt = D._FROM_NUMPY[src.dtype]
            else:
                dt = _default_for_numpy_kind(src)
    out = from_array_copy(src, dt)
    if dev is not CPU:
        out = out.to(dev)
    return _finish(out, requires_grad)


def as_tensor(data, dtype=None, device=None):
    """Like ``tensor`` but shares memory when ``data`` already is a tensor or a NumPy array of a
    matching dtype and device."""
    dt = None if dtype is None else D.to_dtype(dtype, "as_tensor")
    if isinstance(data, Tensor):
        return data.to(dtype=dt, device=device)
    if isinstance(data, np.ndarray) and data.dtype in D._FROM_NUMPY and \
            (dt is None or D._FROM_NUMPY[data.dtype] is dt) and _dev(device) is CPU:
        from fiamma._interop import from_numpy

        try:
            return from_numpy(data)
        except (ValueError, RuntimeError):
            pass  # negative strides: copy
    return tensor(data, dtype=dt, device=device)


def asarray(obj, dtype=None, device=None, copy=None, requires_grad=False):
    """Array-API style constructor: shares memory unless ``copy=True`` or a cast is needed."""
    if copy:
        return tensor(obj, dtype=dtype, device=device, requires_grad=requires_grad)
    if hasattr(obj, "__dlpack__") and not isinstance(obj, (Tensor, np.ndarray)):
        from fiamma._interop import from_dlpack

        obj = from_dlpack(obj)
    out = as_tensor(obj, dtype=dtype, device=device)
    return _finish(out, requires_grad)


def scalar_tensor(s, dtype=None, device=None, requires_grad=False):
    dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype, "scalar_tensor")
    return full((), s, dtype=dt, device=device, requires_grad=requires_grad)


def _size(size, op):
    try:
        shape = _shape_arg(size)
    except TypeError:
        raise TypeError(f"{op}: expected a shape (ints), got {size!r}") from None
    for s in shape:
        if s < 0:
            raise RuntimeError(f"{op}: Trying to create tensor with negative dimension {s}: "
                               f"{list(shape)}")
    return shape


def empty(*size, dtype=None, device=None, requires_grad=False, out=None, pin_memory=False,
          memory_format=None):
    """An uninitialised tensor of the given shape."""
    dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype, "empty")
    t = new_empty(_size(size, "empty"), dt, _dev(device))
    return _finish(t, requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False, out=None):
    dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype, "zeros")
    t = new_empty(_size(size, "zeros"), dt, _dev(device), zero=True)
    return _finish(t, requires_grad)


def fill_(t, value):
    """Fill ``t`` in place with a Python number (cast to its dtype)."""
    if isinstance(value, Tensor):
        value = value.item()
    if t._numel == 0:
        return t
    if t._dtype.kind == 2 or isinstance(value, builtins.float):
        v = builtins.float(value)
        rc = lib.fm_fill(t._dtype.code, len(t._shape), t._shape, t._ptr, t._stride, v, 0, 0)
    else:
        v = builtins.int(value)
        if not -(1 << 63) <= v < (1 << 64):
            raise RuntimeError(f"fill_: value {v} cannot be converted to type {t._dtype} "
                               "without overflow")
        if v >= 1 << 63:
            v -= 1 << 64
        rc = lib.fm_fill(t._dtype.code, len(t._shape), t._shape, t._ptr, t._stride, 0.0, v, 1)
    check(rc, "fill_")
    return t


def ones(*size, dtype=None, device=None, requires_grad=False, out=None):
    dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype, "ones")
    t = new_empty(_size(size, "ones"), dt, _dev(device))
    fill_(t, 1)
    return _finish(t, requires_grad)


def _full_dtype(fill_value):
    if isinstance(fill_value, Tensor):
        return fill_value._dtype
    return D.scalar_dtype(fill_value)


def full(size, fill_value, dtype=None, device=None, requires_grad=False, out=None):
    """A tensor filled with ``fill_value``; the dtype follows the value (bool, int64, default
    float) unless given."""
    dt = _full_dtype(fill_value) if dtype is None else D.to_dtype(dtype, "full")
    t = new_empty(_size(size, "full") if not isinstance(size, int) else (size,), dt, _dev(device))
    fill_(t, fill_value)
    return _finish(t, requires_grad)


def _like(x, dtype, device, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    dt = x._dtype if dtype is None else D.to_dtype(dtype, op)
    dev = x.device if device is None else _dev(device)
    return dt, dev


def empty_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    dt, dev = _like(input, dtype, device, "empty_like")
    return _finish(new_empty(input._shape, dt, dev), requires_grad)


def zeros_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    dt, dev = _like(input, dtype, device, "zeros_like")
    return _finish(new_empty(input._shape, dt, dev, zero=True), requires_grad)


def ones_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    dt, dev = _like(input, dtype, device, "ones_like")
    return _finish(fill_(new_empty(input._shape, dt, dev), 1), requires_grad)


def full_like(input, fill_value, dtype=None, device=None, requires_grad=False,
              memory_format=None):
    dt, dev = _like(input, dtype, device, "full_like")
    return _finish(fill_(new_empty(input._shape, dt, dev), fill_value), requires_grad)


def empty_strided(size, stride, dtype=None, device=None, requires_grad=False):
    dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype, "empty_strided")
    size = _size(size, "empty_strided")
    stride = tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"empty_strided: {len(size)} sizes but {len(stride)} strides")
    extent = 1 + builtins.sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else 0
    base = new_empty((extent,), dt, _dev(device))
    return _finish(base.as_strided(size, stride, 0), requires_grad)


def _legacy_tensor_new(*args, dtype=None, device=None, requires_grad=False):
    """fiamma.Tensor(2, 3) -> uninitialised; fiamma.Tensor([1, 2]) -> data (default dtype)."""
    dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype, "Tensor")
    if not args:
        return empty(0, dtype=dt, device=device)
    if len(args) == 1 and not isinstance(args[0], builtins.int):
        a = args[0]
        if isinstance(a, Tensor):
            return a.detach()
        return tensor(a, dtype=dt, device=device)
    return empty(*args, dtype=dt, device=device)


def _fill_method(self, value):
    fill_(self, value)
    self._bump()
    return self


def _zero_method(self):
    return _fill_method(self, 0)


install_methods({"fill_": _fill_method, "zero_": _zero_method})
