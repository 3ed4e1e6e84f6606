"""Zero-copy exchange with NumPy (from_numpy, .numpy(), __array__, __array_interface__),
DLPack, and pickling."""

import numpy as np

from fiamma import _dtype as D
from fiamma._storage import CPU, Storage
from fiamma._tensor import Tensor, _init, install_methods

__all__ = ["from_numpy"]

_new = object.__new__


def from_numpy(ndarray):
    """A tensor sharing memory with a NumPy array (writes show through both ways).

    >>> import numpy as np, fiamma
    >>> a = np.zeros(3, dtype=np.float32)
    >>> t = fiamma.from_numpy(a); t[0] = 5; a[0]
    np.float32(5.0)
    """
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy: expected np.ndarray (got {type(ndarray).__name__})")
    dt = D.from_numpy_dtype(ndarray.dtype)
    isz = dt.itemsize
    strides = []
    for s in ndarray.strides:
        if s < 0:
            raise ValueError("from_numpy: arrays with negative strides are not supported "
                             "(make a copy with .copy() first)")
        if s % isz:
            raise ValueError(f"from_numpy: stride {s} bytes is not a multiple of the element "
                             f"size {isz}")
        strides.append(s // isz)
    if not ndarray.dtype.isnative:
        raise ValueError("from_numpy: byte-swapped (non-native endian) arrays are not supported")
    ptr = ndarray.__array_interface__["data"][0]
    extent = 1 + sum((n - 1) * s for n, s in zip(ndarray.shape, strides)) if ndarray.size else 0
    st = Storage.borrow(ptr, extent * isz, ndarray)
    t = _new(Tensor)
    _init(t, st, dt, tuple(ndarray.shape), tuple(strides), 0, None)
    return t


class _ArrayHolder:
    """Gives NumPy an __array_interface__ while keeping the tensor alive as the array's base."""

    __slots__ = ("__array_interface__", "_tensor")

    def __init__(self, t, readonly=False):
        self._tensor = t
        self.__array_interface__ = _interface(t, readonly)


def _interface(t, readonly=False):
    if t._storage.device is not CPU:
        raise TypeError(f"can't convert {t.device} tensor to numpy. Use Tensor.cpu() to copy "
                        "the tensor to host memory first.")
    if t._dtype is D.bfloat16:
        raise TypeError("Got unsupported ScalarType BFloat16 (NumPy has no bfloat16; use "
                        ".float() first)")
    isz = t._dtype.itemsize
    return {
        "version": 3,
        "shape": t._shape,
        "typestr": t._dtype._np.str,
        "data": (t._ptr, readonly),
        "strides": tuple(s * isz for s in t._stride),
    }


def _numpy(self, force=False):
    """A NumPy array sharing this tensor's memory (CPU only; detach first if it requires grad).
    ``force=True`` also detaches and copies when needed."""
    if self.requires_grad:
        if not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        self = self.detach()
    if force and self._storage.device is not CPU:
        self = self.cpu()
    return np.asarray(_ArrayHolder(self))


def _array(self, dtype=None, copy=None):
    a = _numpy(self.detach() if self.requires_grad else self)
    if copy:
        a = a.copy()
    if dtype is not None:
        a = a.astype(dtype, copy=False)
    return a


def _array_interface_get(self):
    return _interface(self)


def reduce_tensor(t):
    """Pickle support: a tensor pickles as its NumPy data, dtype and requires_grad."""
    src = t.detach()
    if src._dtype is D.bfloat16:
        return (_rebuild, (src.float().numpy().copy(), "bfloat16", t.requires_grad))
    return (_rebuild, (src.cpu().numpy().copy(), src._dtype.name, t.requires_grad))


def _rebuild(arr, dtype_name, requires_grad):
    from fiamma._creation import tensor

    return tensor(arr, dtype=D._by_name(dtype_name), requires_grad=requires_grad)


install_methods({
    "numpy": _numpy,
    "__array__": _array,
    "__array_interface__": property(_array_interface_get),
    "__array_priority__": 1000,
})
