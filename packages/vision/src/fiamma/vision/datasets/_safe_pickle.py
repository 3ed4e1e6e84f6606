"""A restricted unpickler for data files such as CIFAR's batches: it rebuilds dicts, lists,
tuples, str, bytes, numbers and NumPy arrays of plain dtypes, and refuses every other global,
so loading a file never runs code from it."""

import pickle

import numpy as np

try:
    from numpy._core.multiarray import _reconstruct as _np_reconstruct
except ImportError:  # NumPy 1.x
    from numpy.core.multiarray import _reconstruct as _np_reconstruct

__all__ = ["restricted_load"]


def _reconstruct(cls, shape, dtype):
    if cls is not np.ndarray:
        raise pickle.UnpicklingError(f"refusing to rebuild an array of type {cls!r}")
    return _np_reconstruct(np.ndarray, shape, dtype)


def _dtype(spec, align=False, copy=False):
    dt = np.dtype(spec, align=bool(align), copy=bool(copy))
    if dt.hasobject:
        raise pickle.UnpicklingError("refusing an object dtype")
    return dt


def _frombuffer(buf, dtype, shape, order):
    if not isinstance(dtype, np.dtype) or dtype.hasobject:
        raise pickle.UnpicklingError(f"refusing the dtype {dtype!r}")
    if not isinstance(buf, (bytes, bytearray)):
        raise pickle.UnpicklingError(f"refusing an array buffer of type {type(buf).__name__}")
    return np.frombuffer(buf, dtype).reshape(shape, order=order).copy()


def _encode(obj, encoding="utf-8"):
    # how Python 3 writes bytes at protocols < 3
    if not isinstance(obj, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("refusing _codecs.encode with these arguments")
    return obj.encode("latin1")


_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): _dtype,
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
    ("_codecs", "encode"): _encode,
}

_PLAIN = (str, bytes, bytearray, int, float, bool, type(None))


class _Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"refusing the global {module}.{name}") from None

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("refusing a persistent id")


def _check(obj, depth=0):
    if depth > 64:
        raise pickle.UnpicklingError("nesting too deep")
    if isinstance(obj, _PLAIN):
        return
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise pickle.UnpicklingError("refusing an array of objects")
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            _check(k, depth + 1)
            _check(v, depth + 1)
        return
    if isinstance(obj, (list, tuple)):
        for v in obj:
            _check(v, depth + 1)
        return
    raise pickle.UnpicklingError(f"refusing an object of type {type(obj).__name__}")


def restricted_load(path, encoding="latin1"):
    """Load the pickle at ``path`` with only plain containers, scalars and NumPy arrays
    allowed; anything else raises an error naming the file. Bytes keys of dicts become str
    (files written by Python 2 and 3 read alike)."""
    try:
        with open(path, "rb") as f:
            obj = _Unpickler(f, encoding=encoding).load()
        _check(obj)
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
            IndexError, KeyError, MemoryError) as e:
        raise RuntimeError(f"cannot read the pickle {path}: {e}") from None
    if isinstance(obj, dict):
        obj = {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in obj.items()}
    return obj
