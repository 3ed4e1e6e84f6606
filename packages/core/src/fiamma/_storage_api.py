"""PyTorch's storage objects over core's Storage: ``UntypedStorage`` (bytes) and
``TypedStorage`` (elements of a dtype), what ``x.untyped_storage()`` and ``x.storage()`` return.

Core's own ``Storage`` keeps the hot-path layout (``ptr``, ``nbytes`` slots); these are the
public faces with PyTorch's methods (``nbytes()``, ``size()``, ``data_ptr()``, item access).
One ``UntypedStorage`` object stands for a Storage while anything holds it, so
``x.untyped_storage() is x[0].untyped_storage()`` as in PyTorch.
"""

import builtins
import importlib
import operator
import weakref

from fiamma import _dtype as D
from fiamma._storage import BorrowedStorage, Storage, device as _device
from fiamma._tensor import Tensor, _copy_into, _init

__all__ = ["UntypedStorage", "TypedStorage", "untyped"]

_live = weakref.WeakValueDictionary()  # id(Storage) -> its UntypedStorage while one is alive


def untyped(st):
    """The UntypedStorage standing for core Storage ``st`` (the live one if there is one)."""
    w = _live.get(id(st))
    if w is None or w._st is not st:
        w = object.__new__(UntypedStorage)
        w._st = st
        _live[id(st)] = w
    return w


def _view(st, dt, n, offset=0):
    t = object.__new__(Tensor)
    _init(t, st, dt, (n,), (1,), offset, True)
    t._base = None
    return t


def _index(i, n, what):
    try:
        i = operator.index(i)
    except TypeError:
        raise TypeError(f"{what}: can't index with {type(i).__name__}") from None
    if not -n <= i < n:
        raise IndexError(f"index {i} out of range for storage of size {n}")
    return i + n if i < 0 else i


class UntypedStorage:
    """Bytes of device memory shared by a tensor and its views.

    >>> import fiamma
    >>> x = fiamma.tensor([1, 2], dtype=fiamma.int16)
    >>> s = x.untyped_storage()
    >>> s.nbytes(), s[0], s is x[1:].untyped_storage()
    (4, 1, True)
    """

    __slots__ = ("_st", "__weakref__")

    def __init__(self, size=0, *, device=None):
        dev = _device("cpu" if device is None else device)
        if dev.type != "cpu":
            raise RuntimeError(f"UntypedStorage: only CPU storages can be created, got {dev}")
        size = operator.index(size)
        if size < 0:
            raise RuntimeError(f"UntypedStorage: size must be non-negative, got {size}")
        self._st = Storage(size, zero=True)
        _live[id(self._st)] = self

    @staticmethod
    def from_file(filename, shared=False, nbytes=0):
        """The first ``nbytes`` bytes of a file, memory-mapped (PyTorch's
        ``UntypedStorage.from_file``, which safetensors' PyTorch loader uses). ``shared=False``
        maps the file copy-on-write (writes stay in this storage); ``shared=True`` writes
        through to the file, creating or growing it to ``nbytes`` as needed."""
        import os

        import numpy as np

        filename = os.fspath(filename)
        nbytes = operator.index(nbytes)
        if nbytes < 0:
            raise RuntimeError(f"UntypedStorage.from_file: nbytes must be non-negative, got "
                               f"{nbytes}")
        if nbytes == 0:
            return UntypedStorage(0)
        if shared:
            with open(filename, "ab") as f:
                if f.tell() < nbytes:
                    f.truncate(nbytes)
        else:
            size = os.path.getsize(filename)
            if size < nbytes:
                raise RuntimeError(f"UntypedStorage.from_file: file <{filename}> size <{size}> "
                                   f"is smaller than the required mapping size <{nbytes}>")
        m = np.memmap(filename, dtype=np.uint8, mode="r+" if shared else "c", shape=(nbytes,))
        return untyped(BorrowedStorage(m.ctypes.data, nbytes, m))

    # -- sizes and addresses
    def nbytes(self):
        return self._st.nbytes

    def size(self):
        return self._st.nbytes

    def __len__(self):
        return self._st.nbytes

    def element_size(self):
        return 1

    def data_ptr(self):
        return self._st.ptr

    @property
    def device(self):
        return self._st.device

    @property
    def is_cuda(self):
        return self._st.device.type == "cuda"

    is_sparse = False

    def get_device(self):
        dev = self._st.device
        return -1 if dev.type == "cpu" else (dev.index or 0)

    def resizable(self):
        return not isinstance(self._st, BorrowedStorage)

    def is_pinned(self, device="cuda"):
        return False

    def pin_memory(self, device="cuda"):
        raise RuntimeError("UntypedStorage.pin_memory: fiamma has no pinned memory "
                           "(there is no CUDA device)")

    def is_shared(self):
        return self._st.is_shared()

    def share_memory_(self):
        self._st.share_memory_()
        return self

    def untyped(self):
        return self

    # -- contents (bytes as ints 0..255)
    def _bytes(self):
        return _view(self._st, D.uint8, self._st.nbytes)

    def __getitem__(self, i):
        n = self._st.nbytes
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            if step != 1:
                raise RuntimeError("UntypedStorage: slices with a step are not supported "
                                   f"(got step {step})")
            stop = max(stop, start)
            w = object.__new__(UntypedStorage)
            w._st = BorrowedStorage(self._st.ptr + start, stop - start, self._st,
                                    self._st.device)
            return w
        return self._bytes()[_index(i, n, "UntypedStorage.__getitem__")].item()

    def __setitem__(self, i, value):
        b = self._bytes()
        if isinstance(i, slice):
            b[i] = value if isinstance(value, Tensor) else builtins.int(value) & 0xFF
        else:
            b[_index(i, self._st.nbytes, "UntypedStorage.__setitem__")] = \
                builtins.int(value) & 0xFF

    def __iter__(self):
        return iter(self.tolist())

    def tolist(self):
        return self._bytes().tolist()

    def fill_(self, value):
        self._bytes().fill_(builtins.int(value) & 0xFF)
        return self

    def copy_(self, src, non_blocking=None):
        if src.nbytes() != self.nbytes():
            raise RuntimeError(f"UntypedStorage.copy_: size mismatch, {self.nbytes()} bytes "
                               f"vs {src.nbytes()}")
        _copy_into(self._bytes(), src._bytes())
        return self

    def clone(self):
        out = UntypedStorage(self.nbytes())
        return out.copy_(self)

    def cpu(self):
        return self

    def to(self, *, device=None, non_blocking=False):
        if device is None or _device(device).type == "cpu":
            return self
        raise RuntimeError(f"UntypedStorage.to: cannot move a storage to {device}")

    def type(self, dtype=None, non_blocking=False):
        if dtype is None:
            return "fiamma.UntypedStorage"
        raise TypeError("UntypedStorage.type: converting storages is not supported; "
                        "convert the tensor")

    def __reduce_ex__(self, proto):
        raise TypeError("fiamma.UntypedStorage can't be pickled on its own: pickle a tensor, "
                        "or send it through fiamma.multiprocessing")

    def __repr__(self):
        body = "\n".join(f" {b}" for b in self.tolist()[:64])
        more = " ..." if self.nbytes() > 64 else ""
        return (f"{body}{more}\n[fiamma.storage.UntypedStorage(device={self.device}) "
                f"of size {self.nbytes()}]")


class TypedStorage:
    """A storage read as elements of ``dtype`` (PyTorch's deprecated ``x.storage()``): the
    whole storage from its start, whatever the tensor's offset.

    >>> import fiamma
    >>> s = fiamma.tensor([1.5, 2.5]).storage()
    >>> s.size(), s[1], s.tolist()
    (2, 2.5, [1.5, 2.5])
    """

    __slots__ = ("_untyped_storage", "dtype")

    def __init__(self, *args, wrap_storage=None, dtype=None, device=None):
        dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype, "TypedStorage")
        if wrap_storage is not None:
            if args:
                raise TypeError("TypedStorage: wrap_storage= takes no positional arguments")
            if not isinstance(wrap_storage, UntypedStorage):
                raise TypeError(f"TypedStorage: wrap_storage must be an UntypedStorage, got "
                                f"{type(wrap_storage).__name__}")
            u = wrap_storage
        elif not args:
            u = UntypedStorage(0, device=device)
        elif len(args) == 1 and not isinstance(args[0], (list, tuple)):
            u = UntypedStorage(operator.index(args[0]) * dt.itemsize, device=device)
        elif len(args) == 1:
            from fiamma._creation import tensor

            u = tensor(args[0], dtype=dt).untyped_storage()
        else:
            raise TypeError(f"TypedStorage: expected a size, a sequence or wrap_storage=, got "
                            f"{len(args)} positional arguments")
        self._untyped_storage = u
        self.dtype = dt

    def _elements(self):
        st = self._untyped_storage._st
        return _view(st, self.dtype, st.nbytes // self.dtype.itemsize)

    def size(self):
        return self._untyped_storage.nbytes() // self.dtype.itemsize

    __len__ = size

    def nbytes(self):
        return self._untyped_storage.nbytes()

    def element_size(self):
        return self.dtype.itemsize

    def data_ptr(self):
        return self._untyped_storage.data_ptr()

    @property
    def device(self):
        return self._untyped_storage.device

    @property
    def is_cuda(self):
        return self._untyped_storage.is_cuda

    is_sparse = False

    def get_device(self):
        return self._untyped_storage.get_device()

    def untyped(self):
        return self._untyped_storage

    def is_shared(self):
        return self._untyped_storage.is_shared()

    def share_memory_(self):
        self._untyped_storage.share_memory_()
        return self

    def is_pinned(self, device="cuda"):
        return False

    def resizable(self):
        return self._untyped_storage.resizable()

    def __getitem__(self, i):
        if isinstance(i, slice):
            raise RuntimeError("slices are only supported in UntypedStorage.__getitem__")
        return self._elements()[_index(i, self.size(), "TypedStorage.__getitem__")].item()

    def __setitem__(self, i, value):
        e = self._elements()
        if isinstance(i, slice):
            e[i] = value
        else:
            e[_index(i, self.size(), "TypedStorage.__setitem__")] = value

    def __iter__(self):
        return iter(self.tolist())

    def tolist(self):
        return self._elements().tolist()

    def fill_(self, value):
        self._elements().fill_(value)
        return self

    def copy_(self, src, non_blocking=None):
        if len(src) != len(self):
            raise RuntimeError(f"TypedStorage.copy_: size mismatch, {len(self)} elements vs "
                               f"{len(src)}")
        _copy_into(self._elements(), src._elements())
        return self

    def clone(self):
        return TypedStorage(wrap_storage=self._untyped_storage.clone(), dtype=self.dtype)

    def cpu(self):
        return self

    def _to(self, dt):
        if dt is self.dtype:
            return self
        t = self._elements().to(dt)
        return TypedStorage(wrap_storage=t.untyped_storage(), dtype=dt)

    def float(self):
        return self._to(D.float32)

    def double(self):
        return self._to(D.float64)

    def half(self):
        return self._to(D.float16)

    def bfloat16(self):
        return self._to(D.bfloat16)

    def long(self):
        return self._to(D.int64)

    def int(self):
        return self._to(D.int32)

    def short(self):
        return self._to(D.int16)

    def char(self):
        return self._to(D.int8)

    def byte(self):
        return self._to(D.uint8)

    def bool(self):
        return self._to(D.bool)

    def type(self, dtype=None, non_blocking=False):
        if dtype is None:
            from fiamma._tensor import _TYPE_NAMES

            return D.NAMESPACE + _TYPE_NAMES.get(self.dtype.name,
                                               "Tensor").replace("Tensor", "Storage")
        raise TypeError("TypedStorage.type: converting storages by name is not supported; "
                        "use .float(), .long(), ...")

    def __reduce_ex__(self, proto):
        raise TypeError("fiamma.TypedStorage can't be pickled on its own: pickle a tensor")

    def __repr__(self):
        body = "\n".join(f" {v}" for v in self.tolist()[:64])
        more = " ..." if self.size() > 64 else ""
        return (f"{body}{more}\n[fiamma.storage.TypedStorage(dtype={self.dtype}, "
                f"device={self.device}) of size {self.size()}]")


# ---- the legacy typed storage classes ---------------------------------------------------
# PyTorch's FloatStorage, LongStorage, ..., torch.Storage, Tensor.storage_type() and
# torch.from_file. Calling a class builds a TypedStorage of its dtype; isinstance(s, cls) is
# true for any TypedStorage of that dtype, as in PyTorch.

class _LegacyStorageMeta(type):
    def __instancecheck__(cls, instance):
        if type(instance) is TypedStorage:
            return instance.dtype is cls.dtype
        return type.__instancecheck__(cls, instance)


class _LegacyStorage(TypedStorage, metaclass=_LegacyStorageMeta):
    """Base of the legacy storage classes: calling one makes a TypedStorage of its dtype
    (a size, a sequence, or ``wrap_storage=``).

    >>> import fiamma
    >>> s = fiamma.DoubleStorage([1, 2])
    >>> s.dtype, s.tolist(), isinstance(s, fiamma.DoubleStorage)
    (fiamma.float64, [1.0, 2.0], True)
    >>> fiamma.ones(2, dtype=fiamma.int64).storage_type()
    <class 'fiamma.LongStorage'>
    """

    dtype = None

    def __new__(cls, *args, wrap_storage=None, device=None, **kwargs):
        if kwargs:
            raise RuntimeError(f"{cls.__name__}: unexpected keyword argument(s) "
                               f"{sorted(kwargs)} (it takes a size, a sequence or "
                               "wrap_storage=; the dtype is the class's)")
        return TypedStorage(*args, wrap_storage=wrap_storage, dtype=cls.dtype, device=device)

    @classmethod
    def from_buffer(cls, buffer, byte_order="native", count=-1, offset=0):
        """A storage of the class's dtype copied from a bytes-like object (``byte_order``
        'native', 'little' or 'big')."""
        import sys

        import numpy as np

        if byte_order not in ("native", "little", "big"):
            raise ValueError(f"{cls.__name__}.from_buffer: byte_order must be 'native', "
                             f"'little' or 'big', got {byte_order!r}")
        f = importlib.import_module("fiamma")  # (not an import: keeps the import graph flat)
        t = f.frombuffer(bytearray(buffer), dtype=cls.dtype, count=count, offset=offset)
        order = sys.byteorder if byte_order == "native" else byte_order
        if order != sys.byteorder and cls.dtype.itemsize > 1:
            arr = t.view(D.uint8).numpy().reshape(-1, cls.dtype.itemsize)[:, ::-1].copy()
            t = f.from_numpy(np.ascontiguousarray(arr).reshape(-1)).view(cls.dtype)
        return TypedStorage(wrap_storage=t.untyped_storage(), dtype=cls.dtype)

    @classmethod
    def _new_shared(cls, size):
        s = TypedStorage(size, dtype=cls.dtype)
        return s.share_memory_()


def _make(name, dtype):
    cls = _LegacyStorageMeta(name, (_LegacyStorage,), {
        "dtype": dtype, "__module__": "fiamma",
        "__doc__": f"Legacy typed storage of {dtype} (a TypedStorage of that dtype)."})
    return cls


BFloat16Storage = _make("BFloat16Storage", D.bfloat16)
BoolStorage = _make("BoolStorage", D.bool)
ByteStorage = _make("ByteStorage", D.uint8)
CharStorage = _make("CharStorage", D.int8)
DoubleStorage = _make("DoubleStorage", D.float64)
FloatStorage = _make("FloatStorage", D.float32)
HalfStorage = _make("HalfStorage", D.float16)
IntStorage = _make("IntStorage", D.int32)
LongStorage = _make("LongStorage", D.int64)
ShortStorage = _make("ShortStorage", D.int16)
ComplexFloatStorage = _make("ComplexFloatStorage", D.complex64)
ComplexDoubleStorage = _make("ComplexDoubleStorage", D.complex128)

_BY_DTYPE = {c.dtype: c for c in (BFloat16Storage, BoolStorage, ByteStorage, CharStorage,
                                  DoubleStorage, FloatStorage, HalfStorage, IntStorage,
                                  LongStorage, ShortStorage, ComplexFloatStorage,
                                  ComplexDoubleStorage)}


def _storage_type(self):
    """The legacy storage class of this tensor's dtype (``FloatStorage`` for float32)."""
    cls = _BY_DTYPE.get(self.dtype)
    if cls is None:
        raise RuntimeError(f"storage_type: no legacy storage class for dtype {self.dtype}")
    return cls


def from_file(filename, shared=None, size=0, *, dtype=None, layout=None, device=None,
              pin_memory=False):
    """A 1-d CPU tensor of ``size`` elements over a memory-mapped file (``torch.from_file``):
    ``shared=True`` writes through to the file (creating or growing it), otherwise writes
    stay in the tensor (copy-on-write) and the file must hold ``size`` elements."""
    empty = importlib.import_module("fiamma").empty
    dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype, "from_file")
    if layout is not None and str(layout) not in ("torch.strided", "fiamma.strided"):
        raise RuntimeError(f"from_file: only the strided layout is supported, got {layout}")
    if device is not None and str(device) != "cpu":
        raise RuntimeError(f"from_file: only CPU tensors can be mapped from a file, got {device}")
    if pin_memory:
        raise RuntimeError("from_file: pin_memory needs CUDA")
    u = UntypedStorage.from_file(filename, bool(shared), int(size) * dt.itemsize)
    return empty(0, dtype=dt).set_(u, 0, (int(size),), (1,))

def _share_memory_(self):
    """Move this tensor's storage to shared memory (no-op if it already is; every view of
    the storage follows). See fiamma.multiprocessing."""
    from fiamma.multiprocessing._shm import share_storage_

    share_storage_(self._storage, self)
    return self


# Tensor methods of this module: attached by fiamma._methods (the one place that does)
METHODS = {"share_memory_": _share_memory_, "storage_type": _storage_type}
