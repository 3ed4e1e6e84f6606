"""Zero-copy exchange with NumPy (from_numpy, .numpy(), __array__, __array_interface__),
DLPack (__dlpack__, __dlpack_device__, from_dlpack), and pickling."""

import ctypes
import struct
import sys
import warnings

import numpy as np

from fiamma import _dtype as D
from fiamma._backend.cpu import buffer_address
from fiamma._grad_hook import state as _grad_state

# set_printoptions & co. live in _printing; they are exported from here because fiamma's
# __init__ star-imports this module (and not _printing)
from fiamma._printing import get_printoptions, printoptions, set_printoptions
from fiamma._storage import CPU, Storage, device as _device
from fiamma._tensor import Tensor, contiguous_strides, wrap as _wrap

__all__ = ["from_numpy", "from_dlpack", "set_printoptions", "get_printoptions", "printoptions"]



def _extent(shape, strides):
    """Elements spanned by a layout with non-negative strides (0 when empty)."""
    n = 1
    for size, st in zip(shape, strides):
        if size == 0:
            return 0
        n += (size - 1) * st
    return n


# ---- NumPy -------------------------------------------------------------------------------------

def from_numpy(ndarray):
    """A tensor sharing memory with a NumPy array (writes show through both ways).

    Every dtype fiamma has except bfloat16 (NumPy has none) is accepted; 0-d, empty and
    non-contiguous arrays are viewed as they are. Read-only arrays are shared with a warning
    (fiamma has no read-only tensors: writing to the tensor is undefined behaviour). Arrays
    with negative strides, non-native byte order or unaligned data raise ValueError.

    >>> import numpy as np, fiamma
    >>> a = np.zeros(3, dtype=np.float32)
    >>> t = fiamma.from_numpy(a)
    >>> _ = t.fill_(5.0); a
    array([5., 5., 5.], dtype=float32)
    """
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy: expected np.ndarray (got {type(ndarray).__name__})")
    npdt = ndarray.dtype
    dt = _FROM_NUMPY.get(npdt)  # byte-swapped dtypes are not equal to the native ones
    if dt is None:
        if not npdt.isnative:
            raise ValueError(f"from_numpy: array has byte order different from the native byte "
                             f"order (dtype {npdt.str}); convert it with "
                             "a.astype(a.dtype.newbyteorder('='))")
        dt = D.from_numpy_dtype(npdt)  # raises TypeError naming the supported dtypes
    isz = dt.itemsize
    flags = ndarray.flags
    shape = ndarray.shape
    strides = _element_strides(ndarray.strides, isz)
    if flags.c_contiguous:
        try:
            # the cheapest way to the address (__array_interface__ costs ~3 us)
            ptr = buffer_address(ndarray)
        except (TypeError, ValueError, BufferError):
            ptr = ndarray.__array_interface__["data"][0]
    else:
        ptr = ndarray.__array_interface__["data"][0]
    if ndarray.size and not flags.aligned:
        raise ValueError(f"from_numpy: array data is not aligned to its element size {isz}; "
                         "make an aligned copy with np.require(a, requirements='A')")
    if not flags.writeable:
        warnings.warn("from_numpy: the given NumPy array is not writable, and fiamma does not "
                      "support non-writable tensors. The tensor shares the array's memory; "
                      "writing to it is undefined behaviour. Copy the array (or make it "
                      "writable) to silence this warning.", UserWarning, stacklevel=2)
    st = Storage.borrow(ptr, _extent(shape, strides) * isz, ndarray)
    return _wrap(st, dt, shape, strides)


_FROM_NUMPY = D._FROM_NUMPY


def _element_strides(byte_strides, isz):
    out = []
    for s in byte_strides:
        if s < 0:
            raise ValueError("from_numpy: at least one stride in the given numpy array is "
                             f"negative ({byte_strides}); tensors with negative strides are not "
                             "supported (make a copy with .copy() first)")
        if s % isz:
            raise ValueError(f"from_numpy: stride {s} bytes is not a multiple of the element "
                             f"size {isz} ({byte_strides})")
        out.append(s // isz)
    return tuple(out)


class _ArrayHolder:
    """Gives NumPy an __array_interface__ while keeping the tensor alive as the array's base."""

    __slots__ = ("__array_interface__", "_tensor")

    def __init__(self, t, readonly=False):
        self._tensor = t
        self.__array_interface__ = _interface(t, readonly)


def _check_numpy_able(t, exc=TypeError):
    if t._storage.device is not CPU:
        raise exc(f"can't convert {t.device} device type tensor to numpy. Use Tensor.cpu() to copy "
                  "the tensor to host memory first.")
    if t._dtype is D.bfloat16:
        raise exc("Got unsupported ScalarType BFloat16 (NumPy has no bfloat16; use "
                  ".float() first)")


def _interface(t, readonly=False):
    _check_numpy_able(t)
    isz = t._dtype.itemsize
    return {
        "version": 3,
        "shape": t._shape,
        "typestr": t._dtype._np.str,
        "data": (t._ptr, readonly),
        "strides": tuple(s * isz for s in t._stride),
    }


def _numpy(self, *, force=False):
    """A NumPy array sharing this tensor's memory (CPU only; detach first if it requires grad,
    unless grad mode is off, as under ``no_grad``, where PyTorch allows it too).

    ``force=True`` also detaches (and copies to the CPU) when needed. bfloat16 raises
    TypeError (NumPy has no bfloat16: use ``.float().numpy()``).

    >>> import fiamma
    >>> fiamma.zeros(2, 3).numpy().shape
    (2, 3)
    """
    if self.requires_grad:
        if not force and _grad_state.enabled:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        self = self.detach()
    if force and self._storage.device is not CPU:
        self = self.cpu()
    return np.asarray(_ArrayHolder(self))


def _array(self, dtype=None, copy=None):
    """NumPy's ``__array__`` protocol: shares memory unless ``copy=True`` or a cast is needed
    (bfloat16 converts to a float32 copy); ``copy=False`` raises when a copy is needed."""
    src = self.detach() if self.requires_grad else self
    if src._dtype is D.bfloat16:
        if copy is False:
            raise ValueError("__array__: a bfloat16 tensor can't be shared with NumPy without "
                             "a copy (copy=False was requested)")
        a = _numpy(src.float())
        copy = None
    else:
        a = _numpy(src)
    if dtype is not None and np.dtype(dtype) != a.dtype:
        if copy is False:
            raise ValueError(f"__array__: casting {a.dtype} to {np.dtype(dtype)} needs a copy "
                             "(copy=False was requested)")
        return a.astype(dtype)
    return a.copy() if copy else a


def _array_interface_get(self):
    # AttributeError (not TypeError) lets NumPy fall back to __array__, which converts
    # bfloat16 to float32 and gives the clear error for other devices
    _check_numpy_able(self, AttributeError)
    return _interface(self)


# ---- DLPack ------------------------------------------------------------------------------------
# The ABI of dlpack.h (v0.8 legacy and v1.x versioned managed tensors), declared with ctypes.

kDLCPU = 1
kDLCUDA = 2
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT, _DL_COMPLEX, _DL_BOOL = 0, 1, 2, 4, 5, 6
_FLAG_READ_ONLY = 1
_DLPACK_VERSION = (1, 0)
_MAX_DIMS = 64  # FM_MAX_DIMS

_LEGACY = b"dltensor"
_USED_LEGACY = b"used_dltensor"
_VERSIONED = b"dltensor_versioned"
_USED_VERSIONED = b"used_dltensor_versioned"
# PyCapsule_SetName keeps the pointer it is given, so a consumed capsule's name must outlive the
# capsule, even one still alive at interpreter exit when module globals are freed: made immortal
for _name in (_USED_LEGACY, _USED_VERSIONED):
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(_name))


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


# deleter(DLManagedTensor*) / deleter(DLManagedTensorVersioned*), called with the struct address.
# Called with the GIL held (PYFUNCTYPE): deleters take the GIL themselves to release Python
# objects, and handing the GIL over and back would cost more than the call.
_Deleter = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", _DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64),
                ("dl_tensor", _DLTensor)]


def _capi(name, restype, *argtypes):
    # PYFUNCTYPE: called with the GIL held, and a Python error set by the call is raised
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_capsule_is_valid = _capi("PyCapsule_IsValid", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)
_capsule_get = _capi("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)
_capsule_set_name = _capi("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)

_DL_DTYPE = {
    D.bool: (_DL_BOOL, 8), D.uint8: (_DL_UINT, 8), D.int8: (_DL_INT, 8), D.int16: (_DL_INT, 16),
    D.int32: (_DL_INT, 32), D.int64: (_DL_INT, 64), D.float16: (_DL_FLOAT, 16),
    D.bfloat16: (_DL_BFLOAT, 16), D.float32: (_DL_FLOAT, 32), D.float64: (_DL_FLOAT, 64),
    D.complex64: (_DL_COMPLEX, 64), D.complex128: (_DL_COMPLEX, 128),
    D.uint16: (_DL_UINT, 16), D.uint32: (_DL_UINT, 32), D.uint64: (_DL_UINT, 64),
}
_FROM_DL_DTYPE = {v: k for k, v in _DL_DTYPE.items()}


def _dl_device_of(t):
    dev = t._storage.device
    if dev.type == "cpu":
        return (kDLCPU, 0)
    if dev.type == "cuda":
        return (kDLCUDA, dev.index or 0)
    raise BufferError(f"__dlpack_device__: device {dev} has no DLPack device type")


def _dlpack_device(self):
    """``(device_type, device_id)`` as DLPack numbers them: ``(1, 0)`` for the CPU."""
    return _dl_device_of(self)


def _dlpack(self, stream=None, max_version=None, dl_device=None, copy=None):
    """Export this tensor as a DLPack capsule (the producer half of ``from_dlpack``).

    Zero-copy: the capsule keeps this tensor's storage alive until the consumer calls the
    deleter (or until the capsule dies unconsumed). ``max_version >= (1, 0)`` gets a
    ``"dltensor_versioned"`` capsule, otherwise a legacy ``"dltensor"`` one. ``copy=True``
    exports a copy; ``dl_device`` may only name the CPU, ``(1, 0)``; ``stream`` must be None
    (or -1) on the CPU. bfloat16 is exported as DLPack's kDLBfloat.

    >>> import numpy as np, fiamma
    >>> np.from_dlpack(fiamma.ones(2, dtype=fiamma.int32))
    array([1, 1], dtype=int32)
    """
    if self.requires_grad:
        raise RuntimeError("__dlpack__: can't export tensors that require gradient, use "
                           "tensor.detach()")
    dev = _dl_device_of(self)
    if dev[0] == kDLCUDA:
        return _cuda_dlpack(self, stream, max_version, dl_device, copy)
    if dev[0] != kDLCPU:
        raise BufferError(f"__dlpack__: only CPU and CUDA tensors can be exported (the tensor "
                          f"is on {self.device})")
    if stream is not None and stream != -1:
        raise ValueError(f"__dlpack__: stream must be None for CPU tensors, got {stream!r}")
    if dl_device is not None and tuple(int(x) for x in dl_device) != dev:
        raise BufferError(f"__dlpack__: can't export a tensor on device {dev} to dl_device "
                          f"{tuple(dl_device)} (only the CPU, (1, 0), is supported)")
    # NumPy makes the capsule over a NumPy view of this tensor (the view's base keeps the
    # tensor alive). Its capsule destructor and deleter are C functions that preserve an
    # exception in flight, which a ctypes callback can't: a consumer that fails after taking
    # the capsule (NumPy given bfloat16) would lose its exception to a ctypes destructor.
    src = self.view(D.int16) if self._dtype is D.bfloat16 else self
    arr = np.asarray(_ArrayHolder(src))
    kwargs = {}
    if max_version is not None:
        kwargs["max_version"] = tuple(max_version)
    if copy is not None:
        kwargs["copy"] = copy
    try:
        cap = arr.__dlpack__(**kwargs)
    except TypeError:
        # NumPy < 2.1 only makes legacy capsules and has no copy argument
        cap = (arr.copy() if copy else arr).__dlpack__()
    if self._dtype is D.bfloat16:
        _dl_tensor(*_managed(cap)).dtype.code = _DL_BFLOAT  # int16 -> bfloat16, same bits
    return cap


def _cuda_dlpack(self, stream, max_version, dl_device, copy):
    """__dlpack__ of a CUDA tensor: CuPy makes the capsule over a view of the tensor's memory
    (no copy); ``stream`` is the consumer's, as the protocol defines it."""
    be = self._storage.backend
    src = self.view(D.int16) if self._dtype is D.bfloat16 else self
    cap = be.dlpack_export(src, stream, max_version, dl_device, copy)
    if self._dtype is D.bfloat16:
        _dl_tensor(*_managed(cap)).dtype.code = _DL_BFLOAT  # int16 -> bfloat16, same bits
    return cap


def _cuda_importer(op):
    """The cuda backend, to import CUDA memory (BufferError saying why when there is none)."""
    from fiamma._backend.xp import cuda

    be = cuda.backend()
    if be is None:
        raise BufferError(f"{op}: the data is in CUDA memory (DLPack device type {kDLCUDA}) "
                          f"and CUDA is not available, so only CPU memory can be imported: "
                          f"{cuda.reason()}")
    return be


def _managed(cap):
    """(address of the managed tensor, versioned?) inside an unconsumed DLPack capsule."""
    if _capsule_is_valid(cap, _VERSIONED):
        return _capsule_get(cap, _VERSIONED), True
    if _capsule_is_valid(cap, _LEGACY):
        return _capsule_get(cap, _LEGACY), False
    raise ValueError("from_dlpack: expected a DLPack capsule named 'dltensor' or "
                     "'dltensor_versioned' (a capsule can be consumed only once)")


def _dl_tensor(addr, versioned):
    """The DLTensor inside the managed tensor at ``addr`` (a ctypes view, for writing)."""
    m = (_DLManagedTensorVersioned if versioned else _DLManagedTensor).from_address(addr)
    return m.dl_tensor


# Reading the structs field by field through ctypes costs ~0.3 us a field; one copy of the
# header unpacked with ``struct`` costs ~1 us in all. Offsets come from the ctypes layouts.
_DLTENSOR_FMT = "PiiiBBHPPQ"
_LEGACY_HDR = struct.Struct("@" + _DLTENSOR_FMT + "PP")
_VERSIONED_HDR = struct.Struct("@IIPPQ" + _DLTENSOR_FMT)
assert _LEGACY_HDR.size == ctypes.sizeof(_DLManagedTensor)
assert _VERSIONED_HDR.size == ctypes.sizeof(_DLManagedTensorVersioned)


def _read_managed(addr, versioned):
    """(version major, flags, deleter, data, device type, ndim, dtype code, bits, lanes,
    shape pointer, strides pointer, byte offset) of the managed tensor at ``addr``."""
    if versioned:
        (major, _minor, _ctx, deleter, flags, data, dev_type, _dev_id, ndim, code, bits, lanes,
         shape_p, strides_p, byte_offset) = _VERSIONED_HDR.unpack(
            ctypes.string_at(addr, _VERSIONED_HDR.size))
    else:
        (data, dev_type, _dev_id, ndim, code, bits, lanes, shape_p, strides_p, byte_offset,
         _ctx, deleter) = _LEGACY_HDR.unpack(ctypes.string_at(addr, _LEGACY_HDR.size))
        major, flags = 0, 0
    return (major, flags, deleter, data, dev_type, ndim, code, bits, lanes, shape_p, strides_p,
            byte_offset)


class _DLPackOwner:
    """Owns an imported managed tensor: calls the producer's deleter when the storage dies."""

    __slots__ = ("_addr", "_deleter", "__weakref__")

    def __init__(self, addr, deleter):
        self._addr = addr
        self._deleter = deleter

    def release(self, _Deleter=_Deleter):
        d, self._deleter = self._deleter, None
        if d:
            _Deleter(d)(self._addr)

    __del__ = release


def _is_capsule(obj):
    return type(obj).__name__ == "PyCapsule"


def from_dlpack(ext_tensor, *, device=None, copy=None):
    """A tensor sharing memory with any object that supports DLPack (NumPy arrays, PyTorch or
    JAX tensors, ...) or with a DLPack capsule (``"dltensor"`` or ``"dltensor_versioned"``).

    The producer's memory is kept alive until the tensor (and its views) die, then the
    producer's deleter is called. CPU and CUDA memory are supported. ``copy=True`` returns
    a copy; ``copy=False`` raises BufferError where sharing is impossible (negative strides,
    unaligned data), which ``copy=None`` answers with a copy.

    >>> import numpy as np, fiamma
    >>> a = np.arange(4.0)
    >>> t = fiamma.from_dlpack(a)
    >>> _ = t.fill_(7.0); a
    array([7., 7., 7., 7.])
    """
    if device is not None and _device(device) is not CPU:
        if _device(device).type != "cuda":
            raise BufferError(f"from_dlpack: only device='cpu' or 'cuda' is supported, got "
                              f"{device!r}")
        from fiamma._backend.xp import cuda

        if cuda.backend() is None:
            raise BufferError(f"from_dlpack: device={device!r} needs CUDA, which is not "
                              f"available (only device='cpu' works here): {cuda.reason()}")
    if hasattr(ext_tensor, "__dlpack__"):
        kwargs = {"max_version": _DLPACK_VERSION}
        if hasattr(ext_tensor, "__dlpack_device__"):
            dev = tuple(ext_tensor.__dlpack_device__())
            if int(dev[0]) == kDLCUDA:
                # the producer orders its work before our current stream
                kwargs["stream"] = _cuda_importer("from_dlpack").dlpack_stream()
            elif int(dev[0]) != kDLCPU:
                raise BufferError(f"from_dlpack: only CPU and CUDA memory (DLPack device types "
                                  f"{kDLCPU}, {kDLCUDA}) are supported, got device {dev}")
        if copy is not None:
            kwargs["copy"] = copy
        try:
            cap = ext_tensor.__dlpack__(**kwargs)
            if copy:
                copy = None  # the producer made the copy
        except TypeError:
            # producers older than the 2023 protocol only take ``stream``
            cap = ext_tensor.__dlpack__(**({"stream": kwargs["stream"]} if "stream" in kwargs
                                           else {}))
    elif _is_capsule(ext_tensor):
        cap = ext_tensor
    else:
        raise TypeError(f"from_dlpack: expected an object with __dlpack__ or a DLPack capsule, "
                        f"got {type(ext_tensor).__name__}")
    out = _from_capsule(cap, copy)
    if device is not None and out.device != _device(device) and not (
            _device(device).index is None and out.device.type == _device(device).type):
        if copy is False:
            raise BufferError(f"from_dlpack: the data is on {out.device}; device={device!r} "
                              "needs a copy, and copy=False was requested")
        out = out.to(device)
    return out


def _from_capsule(cap, copy):
    if not _is_capsule(cap):
        raise TypeError(f"from_dlpack: __dlpack__ returned {type(cap).__name__}, not a capsule")
    addr, versioned = _managed(cap)
    (major, flags, deleter, data, dev_type, nd, code, bits, lanes, shape_p, strides_p,
     byte_offset) = _read_managed(addr, versioned)
    # everything is validated before the capsule is marked used: on an error the capsule
    # still owns the managed tensor and its destructor frees it
    if major > _DLPACK_VERSION[0]:
        raise BufferError(f"from_dlpack: DLPack version {major}.x is newer than the supported "
                          f"{_DLPACK_VERSION[0]}.x")
    if dev_type not in (kDLCPU, kDLCUDA):
        raise BufferError(f"from_dlpack: only CPU and CUDA memory (DLPack device types "
                          f"{kDLCPU}, {kDLCUDA}) are supported, got device type {dev_type}")
    cuda_be = _cuda_importer("from_dlpack") if dev_type == kDLCUDA else None
    dt = _FROM_DL_DTYPE.get((code, bits))
    if dt is None or lanes != 1:
        raise BufferError(f"from_dlpack: unsupported DLPack dtype (code {code}, bits {bits}, "
                          f"lanes {lanes})")
    if not 0 <= nd <= _MAX_DIMS or (nd and not shape_p):
        raise BufferError(f"from_dlpack: invalid DLTensor (ndim {nd}, shape at {shape_p})")
    shape = struct.unpack(f"@{nd}q", ctypes.string_at(shape_p, 8 * nd)) if nd else ()
    if nd and min(shape) < 0:
        raise BufferError(f"from_dlpack: invalid shape {shape}")
    empty = 0 in shape
    if strides_p and nd and not empty:
        strides = struct.unpack(f"@{nd}q", ctypes.string_at(strides_p, 8 * nd))
        if min(strides) < 0:
            # the stride of a size-1 dim is arbitrary: a negative one there is harmless
            strides = tuple(st if n != 1 else 1 for st, n in zip(strides, shape))
    else:
        strides = contiguous_strides(shape)
    ptr = (data or 0) + byte_offset
    need_copy = not empty and ((nd and min(strides) < 0) or ptr % dt.itemsize)
    if need_copy and cuda_be is not None:
        raise BufferError("from_dlpack: CUDA data with negative strides or unaligned can't be "
                          "imported")
    if need_copy and copy is False:
        raise BufferError("from_dlpack: the data has negative strides or is unaligned; it can't "
                          "be shared without a copy (copy=False was requested)")
    if flags & _FLAG_READ_ONLY and not copy and not need_copy:
        warnings.warn("from_dlpack: the producer marked the memory read-only, and fiamma does "
                      "not support non-writable tensors; writing to the tensor is undefined "
                      "behaviour", UserWarning, stacklevel=3)
    if _capsule_set_name(cap, _USED_VERSIONED if versioned else _USED_LEGACY):
        raise RuntimeError("from_dlpack: could not mark the capsule as used")
    owner = _DLPackOwner(addr, deleter)
    if need_copy:
        out = _copy_foreign(ptr, dt, shape, strides, owner)
        owner.release()
        return out
    isz = dt.itemsize
    if cuda_be is not None:
        dev_id = _dl_tensor(addr, versioned).device.device_id
        st = cuda_be.borrow_storage(ptr, _extent(shape, strides) * isz, owner, dev_id)
    else:
        st = Storage.borrow(ptr, _extent(shape, strides) * isz, owner)
    t = _wrap(st, dt, shape, strides)
    return t.clone() if copy else t


def _copy_foreign(ptr, dt, shape, strides, owner):
    """A contiguous fiamma copy of memory NumPy can view but fiamma can't (negative strides,
    unaligned)."""
    isz = dt.itemsize
    npdt = np.dtype(np.int16) if dt._np is None else dt._np  # bfloat16 travels as int16
    holder = _RawInterface(ptr, shape, tuple(s * isz for s in strides), npdt.str, owner)
    t = from_numpy(np.array(holder, copy=True, order="C"))
    return t.view(dt) if t._dtype is not dt else t


class _RawInterface:
    __slots__ = ("__array_interface__", "_owner")

    def __init__(self, ptr, shape, strides, typestr, owner):
        self._owner = owner
        self.__array_interface__ = {"version": 3, "shape": shape, "typestr": typestr,
                                    "data": (ptr, True), "strides": strides}


# ---- pickling ----------------------------------------------------------------------------------

def reduce_tensor(t):
    """Pickle support: a tensor pickles as its NumPy data, dtype and requires_grad."""
    src = t.detach()
    if src._dtype is D.bfloat16:
        rv = (_rebuild, (src.cpu().view(D.int16).numpy().copy(), "bfloat16", t.requires_grad))
    else:
        rv = (_rebuild, (src.cpu().numpy().copy(), src._dtype.name, t.requires_grad))
    if type(t) is not Tensor:   # a subclass comes back as that subclass (as in PyTorch)
        rv = (_rebuild_subclass, (type(t),) + rv[1])
    d = getattr(t, "__dict__", None)
    # user attributes (t.foo = 1) travel as the state pickle sets on the rebuilt tensor
    return rv + (dict(d),) if d else rv


def _rebuild(arr, dtype_name, requires_grad):
    dt = D._by_name(dtype_name)
    if not (arr.dtype.isnative and arr.flags.aligned and arr.flags.writeable):
        arr = np.array(arr, dtype=arr.dtype.newbyteorder("="))  # pickled elsewhere
    t = from_numpy(arr)
    if dt is D.bfloat16 and arr.dtype == np.int16:
        t = t.view(dt)
    elif t._dtype is not dt:
        t = t.to(dt)
    if requires_grad:
        t.requires_grad_(True)
    return t



def _rebuild_subclass(cls, arr, dtype_name, requires_grad):
    return _rebuild(arr, dtype_name, requires_grad).as_subclass(cls)


def _tensor_reduce_ex(self, proto):
    if "multiprocessing.reduction" in sys.modules:  # sent to another process: share memory
        from fiamma.multiprocessing._reductions import reduce_if_forking

        r = reduce_if_forking(self)
        if r is not None:
            return r
    return reduce_tensor(self)


def _array_namespace(self, /, *, api_version=None):
    """The Python array API namespace of fiamma tensors, ``fiamma.array_api``.

    >>> import fiamma
    >>> fiamma.zeros(2).__array_namespace__().__name__
    'fiamma.array_api'
    """
    from fiamma import array_api

    if api_version is not None and api_version not in array_api.SUPPORTED_VERSIONS:
        raise ValueError(f"__array_namespace__: unsupported array API version "
                         f"{api_version!r}; supported: {array_api.SUPPORTED_VERSIONS}")
    return array_api

# Tensor methods of this module: attached by fiamma._methods (the one place that does)
METHODS = {
    "__reduce_ex__": _tensor_reduce_ex,
    "__array_namespace__": _array_namespace,
    "numpy": _numpy,
    "__array__": _array,
    "__array_interface__": property(_array_interface_get),
    "__array_priority__": 1000,
    "__dlpack__": _dlpack,
    "__dlpack_device__": _dlpack_device,
}
