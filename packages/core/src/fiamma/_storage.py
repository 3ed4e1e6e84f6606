"""Storage: a block of device memory shared by a tensor and its views, and the device type."""

import sys
import threading
from collections import deque

from fiamma import _backend
from fiamma._backend import cpu as _cpu

__all__ = ["Storage", "BorrowedStorage", "new_cpu_storage", "device", "CPU"]

_alloc = _cpu.alloc
_alloc_zeroed = _cpu.alloc_zeroed
_free = _cpu.free


_DEVICES = {}


class device:
    """Where a tensor lives: ``fiamma.device("cpu")``, ``fiamma.device("cuda", 0)``.

    >>> import fiamma
    >>> fiamma.device("cpu")
    device(type='cpu')
    """

    __slots__ = ("type", "index")

    def __new__(cls, type, index=None):
        if isinstance(type, device):
            return type
        if isinstance(type, int) and not isinstance(type, bool):
            type, index = "cuda", type
        if not isinstance(type, str):
            raise TypeError(f"device: expected a string, a device or an int, got {type!r}")
        if ":" in type:
            if index is not None:
                raise ValueError(f"device: index given twice in {type!r} and index={index}")
            type, _, idx = type.partition(":")
            try:
                index = int(idx)
            except ValueError:
                raise ValueError(f"device: invalid device string {type}:{idx}") from None
        if type not in _backend.DEVICE_TYPES:
            raise ValueError(f"device: expected one of {', '.join(sorted(_backend.DEVICE_TYPES))}"
                             f", got {type!r}")
        if index is not None and index < 0:
            raise ValueError(f"device: index must be non-negative, got {index}")
        if index is not None and index.__class__ is not int and hasattr(index, "__index__"):
            index = index.__index__()  # np.int64(0) and 0 name the same (interned) device
        if type == "cpu" and index is None and CPU is not None:
            return CPU
        # one object per (type, index): ops compare devices by identity (a tensor's device
        # is its storage's), so equal devices made separately must be the same object
        self = _DEVICES.get((type, index))
        if self is None:
            self = object.__new__(cls)
            object.__setattr__(self, "type", type)
            object.__setattr__(self, "index", index)
            _DEVICES[(type, index)] = self
        return self

    def __setattr__(self, k, v):
        raise AttributeError("device is immutable")

    def __eq__(self, other):
        if other is self:  # devices are interned: the common comparison
            return True
        if isinstance(other, str):
            try:
                other = device(other)
            except (TypeError, ValueError):
                return False
        return isinstance(other, device) and self.type == other.type and self.index == other.index

    def __hash__(self):
        return hash((self.type, self.index))

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __reduce__(self):
        return (device, (self.type, self.index))

    # ``with fiamma.device(d):`` makes ``d`` the default device of factory calls inside the
    # block (PyTorch's context manager), through set_default_device: the CPU is accepted, other
    # devices raise naming why (fiamma's factories build on the CPU unless told a device)
    def __enter__(self):
        fiamma = sys.modules["fiamma"]  # (loaded; an import here would point upwards)
        _DEFAULT_STACK.append(fiamma.get_default_device())
        try:
            fiamma.set_default_device(self)
        except BaseException:
            _DEFAULT_STACK.pop()
            raise
        return self

    def __exit__(self, *exc):
        fiamma = sys.modules["fiamma"]
        fiamma.set_default_device(_DEFAULT_STACK.pop())
        return False


_DEFAULT_STACK = []


class _DefaultDevice(threading.local):
    """The device new tensors are made on when no device is given (fiamma.set_default_device,
    ``with fiamma.device(...)``), per thread as in PyTorch; None: the CPU."""

    dev = None


_DEFAULT_DEVICE = _DefaultDevice()


CPU = None
CPU = device("cpu")

# FIAMMA_CPU_BACKEND=xp runs the CPU device's primitives on the array-module backend over NumPy
# (fiamma._backend.xp.host) instead of the C library: the test suites run on it to check that
# backend against the same assertions (a differential run; not a user setting). The CPU fast
# paths (which call C directly) are then off: they run only for tensors on FAST_DEVICE.
import os as _os  # noqa: E402

_backend.register("cpu", _cpu)  # the C library's backend (FIAMMA_CPU_BACKEND=xp replaces it)

XP_HOST = _os.environ.get("FIAMMA_CPU_BACKEND", "") == "xp"
FAST_DEVICE = None if XP_HOST else CPU


# Small blocks skip even the C allocator: a freed block of at most SMALL_BYTES goes on a
# per-size free list and the next tensor of that size takes it back, so a loop of small ops
# costs no allocator call at all. The lists are deques: a Python list that a loop empties and
# refills one item at a time frees and reallocates its array each time (~12 ns more per op).
SMALL_BYTES = 4096
SMALL_POOL = 64
_small = {}


def drain_small_pool():
    """Give the blocks held by the Python-side small-block pool back to the C allocator."""
    for n, pool in list(_small.items()):
        while pool:
            try:
                ptr = pool.pop()
            except IndexError:
                break
            _free(ptr, n)


class Storage:
    """Memory for tensors: ``nbytes`` bytes at address ``ptr`` on ``device``.

    A ``Storage`` owns its block (allocated by core's C allocator, given back to its cache when
    the last tensor using it dies); ``BorrowedStorage`` wraps memory kept alive by ``owner`` (a
    NumPy array, a DLPack capsule, shared memory). ``version`` is the in-place version counter
    that a tensor and its views share.
    """

    __slots__ = ("ptr", "nbytes", "version", "__weakref__")
    owner = None
    device = CPU
    backend = _cpu  # the backend that runs ops on this memory (its device's)

    def __init__(self, nbytes, zero=False):
        ptr = (_alloc_zeroed if zero else _alloc)(nbytes)
        if not ptr:
            self.ptr = 0
            self.nbytes = -1  # nothing to give back (no pool has this size)
            raise MemoryError(f"fiamma: cannot allocate {nbytes} bytes on the CPU")
        self.ptr = ptr
        self.nbytes = nbytes
        self.version = 0

    @staticmethod
    def borrow(ptr, nbytes, owner, dev=CPU):
        """A storage over memory that ``owner`` keeps alive (not freed by fiamma)."""
        return BorrowedStorage(ptr, nbytes, owner, dev)

    def __del__(self, _free=_free, _small=_small, _cap=SMALL_POOL):
        # free lists exist only for sizes up to SMALL_BYTES (new_cpu_storage and the operator
        # fast path start them), so one dict lookup decides
        pool = _small.get(self.nbytes)
        if pool is not None and len(pool) < _cap:
            pool.append(self.ptr)
        elif self.ptr:
            _free(self.ptr, self.nbytes)

    def __repr__(self):
        return f"<fiamma.Storage {self.nbytes} bytes on {self.device}>"

    def is_shared(self):
        """True if this storage is in shared memory (see fiamma.multiprocessing)."""
        return False

    def share_memory_(self):
        """Move this storage to shared memory, in place (tensors over it follow)."""
        from fiamma.multiprocessing._shm import share_storage_

        return share_storage_(self)

    def __reduce_ex__(self, proto):
        # its slots hold a raw address: pickled as such it would crash the unpickling process
        raise TypeError("fiamma.UntypedStorage can't be pickled on its own: pickle a tensor, "
                        "or send it through fiamma.multiprocessing")

    def size(self):
        return self.nbytes

    def data_ptr(self):
        return self.ptr


class BorrowedStorage(Storage):
    __slots__ = ("owner", "device")

    def __init__(self, ptr, nbytes, owner, dev=CPU):
        self.ptr = ptr
        self.nbytes = nbytes
        self.version = 0
        self.owner = owner
        self.device = dev

    def __del__(self):
        pass


def fresh_block(nbytes):
    """A block from the C allocator (0 if it fails), for when the free list of its size is
    empty or missing. The first block of a small size starts that size's free list, or every
    result of a loop of that size would go through the C allocator (~0.2 us more)."""
    if nbytes <= SMALL_BYTES and nbytes not in _small:
        _small[nbytes] = deque()
    return _alloc(nbytes)


def new_cpu_storage(nbytes, _new=object.__new__, _small=_small):
    """A fresh owning CPU storage (the allocation every op result makes; kept minimal)."""
    pool = _small.get(nbytes)  # only sizes up to SMALL_BYTES have one
    ptr = pool.pop() if pool else fresh_block(nbytes)
    if not ptr:
        raise MemoryError(f"fiamma: cannot allocate {nbytes} bytes on the CPU")
    st = _new(Storage)
    st.ptr = ptr
    st.nbytes = nbytes
    st.version = 0
    return st


if XP_HOST:
    from fiamma._backend.xp.host import install as _install_xp_host

    _install_xp_host()
