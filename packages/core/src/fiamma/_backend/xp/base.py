"""The array-module backend's foundation: storages that hold an ``xp`` allocation, views of a
tensor's memory as ``xp`` arrays, and dtype conversion (bfloat16 travels as its 16 bits and is
computed in float32).

A backend object is an ``XpBackend`` built over one array module: NumPy (the reference device
``xp``, for testing the op layer on a second device without a GPU) or CuPy (the ``cuda``
device). Every primitive of contract.Backend is a method of one of the family mixins (memory,
elementwise, reductions, products, index, sorting, random, fused, spectral); they read operands
through ``self.get`` (a view in the compute dtype) and write results through ``self.put``.
"""

import contextlib
import ctypes

import numpy as np

from fiamma import _dtype as D
from fiamma._storage import Storage

__all__ = ["XpBase", "STORE_NP", "COMPUTE_NP"]

# the array dtype a fiamma dtype is stored as (bfloat16: its bits) and computed in
STORE_NP = {d.code: (np.dtype(np.uint16) if d is D.bfloat16 else d._np) for d in D.ALL}
COMPUTE_NP = {d.code: (np.dtype(np.float32) if d is D.bfloat16 else d._np) for d in D.ALL}
BF16 = D.bfloat16.code
_MAX_VIEWS = 8  # array views kept per storage (XpBase.raw)


def _f32_to_bf16(xp, f):
    f = xp.ascontiguousarray(f, dtype=np.float32)
    u = f.view(np.uint32)
    r = (u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)
    r = xp.where(xp.isnan(f), np.uint32(0x7FC0) | ((u >> np.uint32(16)) & np.uint32(0x8000)), r)
    return r.astype(np.uint16)


def _store_scalar(dt, v):
    """The NumPy scalar of fiamma dtype dt's storage type that ``put`` writes for the scalar v
    (the casts an array assignment makes: C casts, nonzero to True, bfloat16 rounded)."""
    a = np.asarray(v)
    if dt.code == BF16:
        return _f32_to_bf16(np, a.astype(np.float32).reshape(1))[0]
    if dt is D.bool:
        return np.bool_(a != 0)
    with np.errstate(all="ignore"):  # NaN or inf to an integer: the C cast's value, quietly
        return a.astype(STORE_NP[dt.code])[()]


class XpBase:
    """Storage, views and conversions shared by every family (see the module docstring)."""

    def __init__(self, xp, name, device_cls):
        self.xp = xp
        self.name = name
        self.is_numpy = xp is np
        backend = self

        class XpStorage(Storage):
            """Memory on this backend's device: ``mem`` is the array module's allocation (a
            NumPy uint8 array, or a CuPy MemoryPointer) and keeps it alive; ``ptr`` its
            address."""

            __slots__ = ("mem", "device", "views", "irange", "counted")

            def __init__(self, nbytes, zero=False, dev=None):
                self.counted = False
                self.version = 0
                self.nbytes = nbytes
                self.device = dev
                self.mem = backend._alloc(dev, nbytes, zero)
                # the backend counts its storages' bytes (the cuda backend's peak statistics)
                self.counted = backend._counts_live
                self.ptr = backend._address(self.mem)
                self.views = {}
                self.irange = None

            def __del__(self):
                # the allocation frees itself with ``mem``
                if self.counted:
                    backend._note_free(self.device.index, self.nbytes)

            def __repr__(self):
                return f"<fiamma.Storage {self.nbytes} bytes on {self.device}>"

            def is_shared(self):
                return False

            def share_memory_(self):
                return self  # device memory is shared between processes by handle, not moved

        XpStorage.backend = self
        XpStorage.__name__ = XpStorage.__qualname__ = f"{name.capitalize()}Storage"
        self.storage_cls = XpStorage
        self.device_cls = device_cls

    # ---- allocation (overridden by the CuPy flavour) ---------------------------------------
    _counts_live = False  # storages call _note_free when they go (RuntimeMixin's peaks)

    def _alloc(self, dev, nbytes, zero):
        return np.zeros(nbytes, np.uint8) if zero else np.empty(nbytes, np.uint8)

    def _address(self, mem):
        return mem.__array_interface__["data"][0]

    def _array(self, st, dtype, shape, bstrides, boff):
        """An array of ``dtype`` over storage ``st`` (shape, strides in bytes, byte offset)."""
        return np.ndarray(shape, dtype, buffer=st.mem, offset=boff, strides=bstrides)

    def new_storage(self, dev, nbytes, zero=False):
        return self.storage_cls(nbytes, zero, dev)

    def synchronize(self):
        """Wait for the device's queued work (nothing to wait for with NumPy)."""

    # ---- views -----------------------------------------------------------------------------
    def raw(self, t, shape=None, strides=None, off=0):
        """The view of tensor t (or the layout given: shape, strides in elements, an element
        offset from t's first element) as an array of its storage dtype.

        Views are kept on the storage by layout (a few per storage), so an op reading the
        result the op before wrote, or a parameter read every step, builds no new array
        object (a CuPy ndarray costs microseconds of host time)."""
        st = t._storage
        if shape is None:
            shape = t._shape
        elif type(shape) is not tuple:
            shape = tuple(shape)
        if strides is None:
            strides = t._stride
        elif type(strides) is not tuple:
            strides = tuple(strides)
        code = t._dtype.code
        key = (t._ptr - st.ptr + off * t._dtype.itemsize, shape, strides, code)
        views = st.views
        a = views.get(key)
        if a is None:
            a = self._raw_uncached(t, shape, strides, off)
            if 0 not in shape:
                if len(views) >= _MAX_VIEWS:
                    views.clear()
                views[key] = a
        return a

    def _raw_uncached(self, t, shape=None, strides=None, off=0):
        st = t._storage
        dt = t._dtype
        isz = dt.itemsize
        if shape is None:
            shape = t._shape
        if strides is None:
            strides = t._stride
        if 0 in shape:
            # an empty view may start past its storage's end (a slice at the end, an offset
            # into an empty buffer), which the array constructors refuse: nothing is read or
            # written through it anyway
            return self.xp.empty(tuple(shape), STORE_NP[dt.code])
        return self._array(st, STORE_NP[dt.code], tuple(shape),
                           tuple(s * isz for s in strides), t._ptr - st.ptr + off * isz)

    # ---- known integer ranges: index checks without a host read ------------------------------
    def note_range(self, t, lo, hi):
        """Remember that every element of t's storage, read in t's dtype, lies in [lo, hi]
        (t must be contiguous and cover its whole storage; otherwise nothing is noted). Index
        checks on any view of the storage then need no host read (a device sync on a GPU)
        until the storage is next written in place: in-place ops bump its version, which
        drops the note."""
        st = t._storage
        if (t._contig and t._ptr == st.ptr and t._numel * t._dtype.itemsize == st.nbytes and
                hasattr(st, "irange")):
            st.irange = (st.version, t._dtype.code, lo, hi)

    def known_in(self, t, lo, hi):
        """True when t's values are known, without reading them, to lie in [lo, hi)."""
        st = t._storage
        r = getattr(st, "irange", None)
        return (r is not None and r[0] == st.version and r[1] == t._dtype.code and
                lo <= r[2] and r[3] < hi)

    def get(self, t, shape=None, strides=None, off=0):
        """raw() in the compute dtype (bfloat16 widened to float32: a new array)."""
        a = self.raw(t, shape, strides, off)
        if t._dtype.code == BF16:
            return self.bf16_to_f32(a)
        return a

    def put(self, t, values, shape=None, strides=None, off=0):
        """Write ``values`` (an array or scalar, broadcast) into t's view, cast to t's dtype
        (C casts: float to int truncates, nonzero to bool is True)."""
        r = self.raw(t, shape, strides, off)
        if (isinstance(values, (int, float, np.generic)) or
                (type(values) is np.ndarray and values.ndim == 0)) and \
                np.asarray(values).dtype.kind != "c":
            # a scalar: cast on the host and written by value (a 0-d array would be a copy
            # to the device per call on a GPU)
            r[...] = _store_scalar(t._dtype, values)
            return
        xp = self.xp
        if not self.is_numpy and isinstance(values, np.ndarray):
            values = xp.asarray(values)
        if t._dtype.code == BF16:
            v = xp.asarray(values)
            if v.dtype != np.float32:
                v = v.astype(np.float32)
            r[...] = self.f32_to_bf16(v)
        elif t._dtype is D.bool:
            v = xp.asarray(values)
            r[...] = v if v.dtype == np.bool_ else (v != 0)
        else:
            r[...] = values

    def direct(self, t):
        """t's array view when results can be written straight into it (t's dtype is its own
        compute dtype: not bfloat16), else None (then compute, and ``put``)."""
        if t._dtype.code == BF16:
            return None
        return self.raw(t)

    def cdt(self, dt):
        """The array dtype ops compute in for fiamma dtype dt."""
        return COMPUTE_NP[dt.code]

    # ---- bfloat16 ----------------------------------------------------------------------------
    def bf16_to_f32(self, bits):
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)

    def f32_to_bf16(self, f):
        """Round-to-nearest-even float32 -> bfloat16 bits; NaN stays a quiet NaN."""
        return _f32_to_bf16(self.xp, f)

    # ---- host memory ---------------------------------------------------------------------------
    @staticmethod
    def host_array(address, dtype, count):
        """A NumPy array over ``count`` elements of host memory at integer ``address``."""
        dtype = np.dtype(dtype)
        if count == 0:
            return np.empty(0, dtype)
        buf = (ctypes.c_char * (count * dtype.itemsize)).from_address(address)
        return np.frombuffer(buf, dtype, count)

    def to_numpy(self, a):
        """A NumPy array with a's values (a host copy for device arrays)."""
        return a if self.is_numpy else self.xp.asnumpy(a)

    def asarray(self, a):
        """An array of this backend's module from a NumPy array (or scalar)."""
        return self.xp.asarray(a)

    # ---- linalg ----------------------------------------------------------------------------
    def linalg_errors(self):
        """The context fiamma.linalg computes in on this device: NumPy raises LinAlgError on
        singular / non-positive-definite input by itself; CuPy only inside
        ``cupyx.errstate(linalg='raise')`` (otherwise it returns NaNs silently)."""
        if self.is_numpy:
            return contextlib.nullcontext()
        import cupyx

        return cupyx.errstate(linalg="raise")
