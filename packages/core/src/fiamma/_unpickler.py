"""The restricted unpickler behind ``fiamma.load``: it rebuilds tensors, storages, OrderedDict
and plain containers, plus instances of the classes the user allowlisted with
``fiamma.serialization.add_safe_globals`` (PyTorch's weights-only rules), and refuses every other
global by name, so loading a file never runs code from it.

It is Python's pure-Python unpickler with a vetted opcode table: every opcode that can call
something (GLOBAL and STACK_GLOBAL, REDUCE, BUILD, NEWOBJ, INST, OBJ, EXT*, APPEND(S),
SETITEM(S), ADDITEMS) is replaced by a version that only accepts the allowed objects.
C's unpickler cannot be used: its BUILD would let a file set any attribute (``_ptr``) of a
rebuilt tensor.
"""

import collections
import io
import pickle
import struct
import sys

import numpy as np

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._storage import device as _device
from fiamma._tensor import Size, Tensor, _init
from fiamma.serialization import _safe_globals

__all__ = ["RestrictedUnpickler", "StorageType", "STORAGE_TYPES_BY_NAME", "check_layout"]

UnpicklingError = pickle.UnpicklingError
_MAX_DIMS = 64
INT64_MAX = (1 << 63) - 1


def check_layout(size, stride, offset, itemsize):
    """Refuse a tensor layout PyTorch could not hold: sizes, strides or an offset beyond int64,
    or more elements (or bytes) than int64 counts, even when a zero dimension makes it empty.
    Returns the number of elements."""
    for name, vals in (("size", size), ("stride", stride)):
        for v in vals:
            if v < 0 or v > INT64_MAX:
                raise UnpicklingError(f"fiamma.load: {name} {tuple(vals)} holds {v}, outside "
                                      "0..2**63-1")
    if offset < 0 or offset > INT64_MAX:
        raise UnpicklingError(f"fiamma.load: storage offset {offset} is outside 0..2**63-1")
    numel = span = 1
    for s in size:
        numel *= s
        span *= s or 1
    if span * itemsize > INT64_MAX:
        raise UnpicklingError(f"fiamma.load: size {tuple(size)} has more elements than an int64 "
                              "can count (PyTorch refuses it too)")
    if numel and offset + sum((n - 1) * st for n, st in zip(size, stride)) > INT64_MAX:
        raise UnpicklingError(f"fiamma.load: size {tuple(size)} with stride {tuple(stride)} "
                              "reaches beyond 2**63-1 elements")
    return numel


def _allowlisted_class(obj):
    return isinstance(obj, type) and any(v is obj for v in _safe_globals.values())


def _refuse_tensor_class(cls, op):
    from fiamma._storage import Storage

    if issubclass(cls, (Tensor, Storage)):
        raise UnpicklingError(f"fiamma.load: refusing {op} of {cls.__module__}."
                              f"{cls.__qualname__}: tensors and storages are rebuilt only "
                              "from the checkpoint's storage records, even when allowlisted")


class _BoundedReader:
    """The file as the unpickler sees it: a read of more bytes than remain is refused before
    anything is allocated for it, and a short read is the end of the data."""

    __slots__ = ("fp", "left")

    def __init__(self, fp):
        self.fp = fp
        try:
            pos = fp.tell()
            end = fp.seek(0, 2)
            fp.seek(pos)
            self.left = end - pos
        except (AttributeError, OSError, ValueError):
            self.left = None

    def _claim(self, n):
        if self.left is not None and n is not None and n > self.left:
            raise UnpicklingError(f"fiamma.load: the pickle data asks for {n} bytes where "
                                  f"{self.left} remain (corrupt or truncated file?)")

    def read(self, n=-1):
        if n is not None and n >= 0:
            self._claim(n)
        data = self.fp.read(n)
        if self.left is not None:
            self.left -= len(data)
        if n is not None and 0 <= n != len(data):
            raise EOFError
        return data

    def readinto(self, b):
        n = memoryview(b).nbytes
        self._claim(n)
        got = self.fp.readinto(b)
        if self.left is not None:
            self.left -= got
        if got != n:
            raise EOFError
        return got

    def readline(self):
        line = self.fp.readline()
        if self.left is not None:
            self.left -= len(line)
        return line


class _Passthrough(Exception):
    """Carries an error of the storage loader through ``load``'s corrupt-data handler."""


class StorageType:
    """Stands for ``torch.<Name>Storage`` in a checkpoint (not callable: a marker only)."""

    __slots__ = ("name", "dtype", "cuda")

    def __init__(self, name, dtype, cuda=False):
        self.name, self.dtype, self.cuda = name, dtype, cuda

    def __repr__(self):
        return f"torch.{'cuda.' if self.cuda else ''}{self.name}"


_STORAGE_DTYPES = {
    "BoolStorage": D.bool, "ByteStorage": D.uint8, "CharStorage": D.int8,
    "ShortStorage": D.int16, "IntStorage": D.int32, "LongStorage": D.int64,
    "HalfStorage": D.float16, "BFloat16Storage": D.bfloat16, "FloatStorage": D.float32,
    "DoubleStorage": D.float64, "ComplexFloatStorage": D.complex64,
    "ComplexDoubleStorage": D.complex128,
    # quantized tensors' integer storages (rebuilt by _rebuild_qtensor into fiamma.ao's QTensor)
    "QInt8Storage": D.int8, "QUInt8Storage": D.uint8, "QInt32Storage": D.int32,
    # quint4x2: two 4-bit values a byte (the first in the low nibble), unpacked by
    # _rebuild_qtensor
    "QUInt4x2Storage": D.uint8,
}
# PyTorch storage/dtype names fiamma has no dtype for: refused with a clear message
_UNSUPPORTED_STORAGES = {"QUInt2x4Storage",
                         "UInt16Storage", "UInt32Storage", "UInt64Storage",
                         "ComplexHalfStorage"}
STORAGE_TYPES_BY_NAME = {n: StorageType(n, d) for n, d in _STORAGE_DTYPES.items()}
_UNTYPED = StorageType("UntypedStorage", D.uint8)  # bytes; _rebuild_tensor_v3 names the dtype
_UNSUPPORTED_DTYPE_PREFIXES = ("complex32", "chalf", "float8", "float4", "qint", "quint", "bits")
_CUDA_STORAGE_TYPES = {n: StorageType(n, d, True) for n, d in _STORAGE_DTYPES.items()}
_TORCH_DTYPES = {
    "bool": D.bool, "uint8": D.uint8, "int8": D.int8, "int16": D.int16, "short": D.int16,
    "int32": D.int32, "int": D.int32, "int64": D.int64, "long": D.int64,
    "float16": D.float16, "half": D.float16, "bfloat16": D.bfloat16, "float32": D.float32,
    "float": D.float32, "float64": D.float64, "double": D.float64,
    "complex64": D.complex64, "cfloat": D.complex64, "complex128": D.complex128,
    "cdouble": D.complex128, "uint16": D.uint16, "uint32": D.uint32, "uint64": D.uint64,
}


# quantization names of a torch checkpoint: fiamma-nn's fiamma.ao objects, imported on use
_QUANT_NAMES = {"quint8", "qint8", "qint32", "quint4x2", "per_tensor_affine", "per_channel_affine",
                "per_tensor_symmetric", "per_channel_symmetric",
                "per_channel_affine_float_qparams"}


def _quant_module(what):
    import importlib

    try:
        return importlib.import_module("fiamma.ao")
    except ModuleNotFoundError:
        raise UnpicklingError(f"fiamma.load: the checkpoint holds {what}; quantized tensors "
                              "need fiamma-nn (pip install fiamma-nn)") from None


class _TypeMarker:
    """Stands for torch.Tensor / torch.nn.Parameter as the type argument of
    ``_rebuild_from_type_v2`` (a marker, never instantiated)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


_TENSOR_TYPES = {("torch", "Tensor"): _TypeMarker("torch.Tensor"),
                 ("torch._tensor", "Tensor"): _TypeMarker("torch.Tensor"),
                 ("torch.nn.parameter", "Parameter"): _TypeMarker("torch.nn.Parameter"),
                 ("torch.nn", "Parameter"): _TypeMarker("torch.nn.Parameter")}


def _set_tensor_state(t, state):
    """A tensor's user attributes (``t.foo = 1`` in PyTorch): its ``__dict__`` as
    ``torch._utils._get_obj_state`` wrote it, a dict (None or empty when there are none) or a
    ``(dict, slots)`` pair. They go into the instance dict, never through ``setattr``, so a
    name can not reach a property or a slot of the tensor."""
    if type(state) is tuple:
        if len(state) != 2 or state[1]:
            raise UnpicklingError("fiamma.load: a tensor's state must be a dict of attributes "
                                  f"(slot state is not supported), got {state!r:.80}")
        state = state[0]
    if not state:
        return t
    if type(state) is not dict or not all(type(k) is str for k in state):
        raise UnpicklingError("fiamma.load: a tensor's state must be a dict with str keys, got "
                              f"{type(state).__name__}")
    if not isinstance(t, Tensor) or getattr(type(t), "__dictoffset__", 0) == 0:
        raise UnpicklingError("fiamma.load: this tensor can not hold attributes")
    t.__dict__.update(state)
    return t


def _codecs_encode(text, encoding="utf-8", errors="strict"):
    # protocol 2 pickles bytes as _codecs.encode(latin-1 text, 'latin1')
    if type(text) is not str or encoding not in ("latin1", "latin-1") or errors != "strict":
        raise UnpicklingError("fiamma.load: _codecs.encode is only allowed as "
                              "encode(str, 'latin1') (how protocol 2 stores bytes)")
    return text.encode("latin-1")


def _bytes(*args):
    if args and not (len(args) == 1 and type(args[0]) in (bytes, bytearray)):
        raise UnpicklingError("fiamma.load: builtins.bytes is only allowed with no argument "
                              "or a bytes argument")
    return bytes(*args)


def _bytearray(*args):
    if args and not (len(args) == 1 and type(args[0]) in (bytes, bytearray)):
        raise UnpicklingError("fiamma.load: builtins.bytearray is only allowed with no argument "
                              "or a bytes argument")
    return bytearray(*args)


def _collection(kind):
    def build(items=()):
        if type(items) not in (list, tuple, set, frozenset):
            raise UnpicklingError(f"fiamma.load: builtins.{kind.__name__} expects a list, got "
                                  f"{type(items).__name__}")
        return kind(items)
    return build


def _complex(real=0.0, imag=0.0):
    for v in (real, imag):
        if type(v) not in (int, float):
            raise UnpicklingError("fiamma.load: builtins.complex expects two numbers")
    return complex(real, imag)


# NumPy scalars (a checkpoint's `best_acc = np.float64(...)`): numpy.dtype of a plain code,
# its byte-order state, and multiarray.scalar(dtype, bytes); nothing else of NumPy is allowed
_NP_CODES = {"b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"}


def _np_dtype(code, align=False, copy=True):
    if type(code) is not str or code not in _NP_CODES:
        raise UnpicklingError(f"fiamma.load: numpy.dtype({code!r:.40}) is not a plain number "
                              "type")
    return np.dtype(code)


def _np_scalar(dtype, data=None):
    if not isinstance(dtype, np.dtype) or dtype.kind not in "biufc" or \
            type(data) is not bytes or len(data) != dtype.itemsize:
        raise UnpicklingError("fiamma.load: numpy scalar expects a number dtype and its bytes")
    return np.frombuffer(data, dtype=dtype)[0]


def _torch_size(dims=()):
    return Size(_int_tuple(dims, "torch.Size"))


def _torch_device(type, index=None):
    if not isinstance(type, str) or not (index is None or isinstance(index, int)):
        raise UnpicklingError("fiamma.load: torch.device expects a string and an optional index")
    try:
        return _device(type, index)
    except (TypeError, ValueError):  # e.g. 'mps': keep the name, fiamma can't place tensors there
        return str(type) if index is None else f"{type}:{index}"


def _get_layout(name):
    from fiamma import _layout

    if name not in ("torch.sparse_coo", "torch.strided", "torch.sparse_csr", "torch.sparse_csc",
                    "torch.sparse_bsr", "torch.sparse_bsc"):
        raise UnpicklingError(f"fiamma.load: unsupported tensor layout {name!r:.50} (fiamma "
                              "has strided, sparse_coo and the sparse compressed layouts)")
    return getattr(_layout, name.rpartition(".")[2])


def _rebuild_sparse_tensor(layout, data):
    """A sparse COO tensor from (indices, values, size[, is_coalesced]); checked as
    ``sparse_coo_tensor`` checks its input (indices in range, coalesced if it says so). A
    compressed one from (compressed_indices, plain_indices, values, size), checked as
    ``sparse_compressed_tensor`` checks its input (the structure against the size)."""
    from fiamma import _layout
    from fiamma._sparse_coo import sparse_coo_tensor

    if layout in (_layout.sparse_csr, _layout.sparse_csc, _layout.sparse_bsr,
                  _layout.sparse_bsc):
        from fiamma._sparse_compressed import sparse_compressed_tensor

        if type(data) is not tuple or len(data) != 4 or not all(
                isinstance(x, Tensor) for x in data[:3]):
            raise UnpicklingError("fiamma.load: _rebuild_sparse_tensor expects "
                                  "(compressed_indices, plain_indices, values, size)")
        try:
            return sparse_compressed_tensor(data[0], data[1], data[2],
                                            _int_tuple(data[3], "size"), layout=layout)
        except (RuntimeError, TypeError) as e:
            raise UnpicklingError(f"fiamma.load: invalid sparse tensor: {e}") from None
    if layout is not _layout.sparse_coo:
        raise UnpicklingError(f"fiamma.load: sparse layout {layout!r} is not supported")
    if type(data) is not tuple or len(data) not in (3, 4):
        raise UnpicklingError("fiamma.load: _rebuild_sparse_tensor expects (indices, values, "
                              "size[, is_coalesced])")
    indices, values, size = data[:3]
    coalesced = data[3] if len(data) == 4 else None
    if not (isinstance(indices, Tensor) and isinstance(values, Tensor)) or \
            type(coalesced) not in (bool, type(None)):
        raise UnpicklingError("fiamma.load: _rebuild_sparse_tensor expects tensors and a bool")
    try:
        return sparse_coo_tensor(indices, values, _int_tuple(size, "size"),
                                 is_coalesced=coalesced or None)
    except (RuntimeError, TypeError) as e:
        raise UnpicklingError(f"fiamma.load: invalid sparse tensor: {e}") from None


def _int_tuple(v, what):
    if type(v) not in (tuple, list, Size) or len(v) > _MAX_DIMS:
        raise UnpicklingError(f"fiamma.load: {what} must be a tuple of at most {_MAX_DIMS} ints, "
                              f"got {type(v).__name__}")
    for x in v:
        if type(x) is not int or x < 0:
            raise UnpicklingError(f"fiamma.load: {what} must hold non-negative ints, got {v!r}")
    return tuple(v)


_TRUSTED_DISPATCH = dict(pickle._Unpickler.dispatch)


def _trusted_global(module, name):
    """A global for ``weights_only=False``: imported as pickle would, with PyTorch's module
    names (``torch.nn.modules.linear`` ...) read as fiamma's (``fiamma.nn.modules.linear``)."""
    import importlib

    from fiamma import _torch_alias

    target = _torch_alias.target_name(module) or module
    try:
        obj = importlib.import_module(target)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        shown = f"{module}.{name}" + (f" (fiamma's {target}.{name})" if target != module
                                      else "")
        raise UnpicklingError(f"fiamma.load: the file needs {shown}, which cannot be "
                              f"imported here ({type(e).__name__}: {e})") from None
    return obj


class RestrictedUnpickler(pickle._Unpickler):
    """Unpickles a checkpoint, calling ``load_storage(storage_type, key, location, numel,
    view_metadata)`` for each persistent id; it returns a flat 1-D tensor (the typed storage)."""

    def __init__(self, file, load_storage, set_requires_grad=True, weights_only=True):
        # in-memory data (a zip's data.pkl) can't be asked for more than it holds; a file can
        super().__init__(file if type(file) is io.BytesIO else _BoundedReader(file),
                         encoding="utf-8")
        self._load_storage = load_storage
        self._set_requires_grad = set_requires_grad
        self._weights_only = weights_only
        if not weights_only:  # the caller trusts the file: every opcode, as pickle itself
            self.dispatch = _TRUSTED_DISPATCH
        self._storages = {}  # id(flat tensor) -> flat tensor: only these may back a rebuild
        self._storage_names = {}  # id(flat tensor) -> the storage key, for messages
        self._storage_types = {}  # id(flat tensor) -> the storage type names it was read as
        self.data_later = False   # the legacy format: the storages are read after the pickle
        self._after_data = []
        self._globals = {
            ("collections", "OrderedDict"): collections.OrderedDict,
            ("torch._utils", "_rebuild_tensor_v2"): self._rebuild_tensor_v2,
            ("torch._utils", "_rebuild_tensor_v3"): self._rebuild_tensor_v3,
            ("torch._utils", "_rebuild_tensor"): self._rebuild_tensor,
            ("torch._utils", "_rebuild_qtensor"): self._rebuild_qtensor,
            ("torch._utils", "_rebuild_parameter"): self._rebuild_parameter,
            ("torch._utils", "_rebuild_parameter_with_state"): self._rebuild_parameter_with_state,
            ("torch._tensor", "_rebuild_from_type_v2"): self._rebuild_from_type_v2,
            ("torch._utils", "_rebuild_sparse_tensor"): _rebuild_sparse_tensor,
            ("torch.serialization", "_get_layout"): _get_layout,
            ("torch", "Size"): _torch_size,
            ("torch", "device"): _torch_device,
            ("builtins", "set"): _collection(set),
            ("builtins", "frozenset"): _collection(frozenset),
            ("builtins", "complex"): _complex,
            ("builtins", "bytes"): _bytes,
            ("builtins", "bytearray"): _bytearray,
            ("_codecs", "encode"): _codecs_encode,
            ("numpy", "dtype"): _np_dtype,
            ("numpy.core.multiarray", "scalar"): _np_scalar,
            ("numpy._core.multiarray", "scalar"): _np_scalar,
        }
        self._callables = {id(v): v for v in self._globals.values()
                           if not isinstance(v, (StorageType, _TypeMarker))}
        g = self._globals
        self._rebuilders = {id(g["torch._utils", n]) for n in (
            "_rebuild_tensor_v2", "_rebuild_tensor_v3", "_rebuild_tensor", "_rebuild_parameter",
            "_rebuild_parameter_with_state")}

    # ---- globals -----------------------------------------------------------------------------
    def find_class(self, module, name):
        if module == "__builtin__":  # Python 2 name, written by protocol 2 pickles
            module = "builtins"
        obj = self._globals.get((module, name))
        if obj is not None:
            return obj
        if module == "torch":
            if name in STORAGE_TYPES_BY_NAME:
                return STORAGE_TYPES_BY_NAME[name]
            if name in _TORCH_DTYPES:
                return _TORCH_DTYPES[name]
            if name in _QUANT_NAMES:
                return getattr(_quant_module(f"torch.{name}"), name)
        if (module, name) in (("torch", "UntypedStorage"), ("torch.storage", "UntypedStorage")):
            return _UNTYPED
        if module == "torch.cuda" and name in _CUDA_STORAGE_TYPES:
            return _CUDA_STORAGE_TYPES[name]
        if (module, name) in _TENSOR_TYPES:
            return _TENSOR_TYPES[(module, name)]
        if module in ("torch", "torch.cuda") and (
                name in _UNSUPPORTED_STORAGES or name.startswith(_UNSUPPORTED_DTYPE_PREFIXES)):
            raise UnpicklingError(f"fiamma.load: the checkpoint holds {module}.{name}, a type "
                                  "fiamma has no dtype for")
        user = _safe_globals.get(f"{module}.{name}")
        if user is not None:
            return user
        if not self._weights_only:
            return _trusted_global(module, name)
        if module.split(".")[0] in ("torch", "torchvision", "torchaudio"):
            raise UnpicklingError(
                f"fiamma.load: refusing to load global {module}.{name}: the file holds a pickled "
                "PyTorch object (such as a whole model saved with torch.save(model)), whose "
                "PyTorch class fiamma does not have. Save model.state_dict() in PyTorch "
                "and load it into the fiamma model with load_state_dict().")
        short = name.rsplit(".", 1)[-1]
        raise UnpicklingError(
            f"fiamma.load: refusing to load global {module}.{name}: only tensors, storages, "
            "OrderedDict, plain containers and allowlisted globals can be loaded (loading never "
            "runs code from the file). If you trust this class or function, allowlist it "
            f"with `fiamma.serialization.add_safe_globals([{short}])` or the "
            f"`fiamma.serialization.safe_globals([{short}])` context manager; if you trust the "
            "whole file, load it with weights_only=False (which, as pickle, may run code).")

    def persistent_load(self, pid):
        if type(pid) is not tuple or len(pid) not in (5, 6) or pid[0] != "storage":
            raise UnpicklingError(f"fiamma.load: unsupported persistent id {pid!r:.200}")
        stype, key, location, numel = pid[1:5]
        view = pid[5] if len(pid) == 6 else None
        if type(stype) is not StorageType:
            raise UnpicklingError(f"fiamma.load: persistent id names {stype!r:.100}, not a "
                                  "storage type")
        if type(key) is not str or type(location) is not str:
            raise UnpicklingError(f"fiamma.load: malformed storage id {pid!r:.200}")
        if type(numel) is not int or numel < 0:
            raise UnpicklingError(f"fiamma.load: storage {key!r} has invalid size {numel!r}")
        try:
            flat = self._load_storage(stype, key, location, numel, view)
        except (UnpicklingError, RuntimeError):
            raise
        except Exception as e:  # e.g. a TypeError from a map_location callable: not corruption
            raise _Passthrough(e) from None
        self._storages[id(flat)] = flat
        self._storage_names[id(flat)] = key
        self._storage_types.setdefault(id(flat), set()).add(stype.name)
        return flat

    # ---- tensors -----------------------------------------------------------------------------
    def _rebuild_tensor(self, storage, storage_offset, size, stride):
        if id(storage) not in self._storages or self._storages[id(storage)] is not storage:
            raise UnpicklingError("fiamma.load: a tensor is rebuilt from something that is not "
                                  "a storage of this checkpoint")
        try:
            size = _int_tuple(size, "size")
            stride = _int_tuple(stride, "stride")
            if len(size) != len(stride):
                raise UnpicklingError(f"fiamma.load: size {size} and stride {stride} have "
                                      "different lengths")
            if type(storage_offset) is not int or storage_offset < 0:
                raise UnpicklingError(f"fiamma.load: invalid storage offset {storage_offset!r}")
            numel = check_layout(size, stride, storage_offset, storage._dtype.itemsize)
            cap = storage._numel
            end = storage_offset + sum((n - 1) * st for n, st in zip(size, stride)) + 1
            if (numel and end > cap) or storage_offset > cap:
                raise UnpicklingError(
                    f"fiamma.load: size {size}, stride {stride}, offset {storage_offset} "
                    f"reaches past its storage of {cap} elements")
        except UnpicklingError as e:  # name the tensor by its storage record
            key = self._storage_names.get(id(storage), "?")
            raise UnpicklingError(f"fiamma.load: tensor over storage {key!r}: "
                                  f"{str(e)[len('fiamma.load: '):]}") from None
        return storage._view(size, stride, storage._offset + storage_offset, ops.load)

    def _check_4bit(self, storage, storage_offset, size, stride):
        """The size of a quint4x2 tensor over a packed storage (two values a byte, the first
        in the low nibble, row-major: PyTorch's layout), checked: PyTorch's 4-bit tensors are
        contiguous from the storage's start, and only those are read."""
        key = self._storage_names.get(id(storage), "?")
        if id(storage) not in self._storages or self._storages[id(storage)] is not storage:
            raise UnpicklingError("fiamma.load: a tensor is rebuilt from something that is not "
                                  "a storage of this checkpoint")
        size = _int_tuple(size, "size")
        stride = _int_tuple(stride, "stride")
        contiguous, numel = [], 1
        for n in reversed(size):
            contiguous.insert(0, numel)
            numel *= n
        if storage_offset != 0 or len(stride) != len(size) or any(
                st != c for n, st, c in zip(size, stride, contiguous) if n > 1):
            raise UnpicklingError(f"fiamma.load: quint4x2 tensor over storage {key!r}: only "
                                  f"contiguous ones from offset 0 are supported, got size "
                                  f"{size}, stride {stride}, offset {storage_offset!r}")
        need = (numel + 1) // 2
        if need > storage._numel:
            raise UnpicklingError(f"fiamma.load: quint4x2 tensor over storage {key!r}: size "
                                  f"{size} needs {need} packed bytes, the storage has "
                                  f"{storage._numel}")
        return size

    @staticmethod
    def _unpack_4bit(storage, size):
        import fiamma
        numel = int(np.prod(size, dtype=np.int64))
        need = (numel + 1) // 2
        packed = storage[:need].cpu().numpy()
        values = np.empty(2 * need, dtype=np.uint8)
        values[0::2] = packed & 0x0F
        values[1::2] = packed >> 4
        out = fiamma.from_numpy(np.require(values[:numel].reshape(size), requirements="C"))
        return out.to(storage.device) if storage.device.type != "cpu" else out

    def after_data(self, fn):
        """Run ``fn`` once the storages hold their bytes: now (zip format: a storage is read
        when the pickle names it) or, when ``data_later`` is set (the legacy format, whose
        data follows the pickle), from :meth:`run_after_data`."""
        if self.data_later:
            self._after_data.append(fn)
        else:
            fn()

    def run_after_data(self):
        for fn in self._after_data:
            fn()
        self._after_data.clear()

    def _rebuild_qtensor(self, storage, storage_offset, size, stride, quantizer_params,
                         requires_grad=False, backward_hooks=None):
        ao = _quant_module("quantized tensors (torch._utils._rebuild_qtensor)")
        types_ = self._storage_types.get(id(storage), set())
        if "QUInt4x2Storage" in types_:
            if len(types_) > 1:
                raise UnpicklingError(f"fiamma.load: storage "
                                      f"{self._storage_names.get(id(storage), '?')!r} is read "
                                      f"as {sorted(types_)}")
            size = self._check_4bit(storage, storage_offset, size, stride)
            shape, qdtype = size, ao.quint4x2

            def values():
                return self._unpack_4bit(storage, size)
        else:
            view = self._rebuild_tensor(storage, storage_offset, size, stride)
            shape = tuple(view.shape)
            qdtype = {D.int8: ao.qint8, D.uint8: ao.quint8, D.int32: ao.qint32}.get(view.dtype)

            def values():
                return view.clone()
        if qdtype is None or type(quantizer_params) is not tuple or not quantizer_params:
            raise UnpicklingError("fiamma.load: malformed quantized tensor (storage "
                                  f"{storage.dtype}, parameters {quantizer_params!r:.100})")
        scheme = quantizer_params[0]
        if scheme in (ao.per_tensor_affine, ao.per_tensor_symmetric) and \
                len(quantizer_params) == 3:
            scale, zp = quantizer_params[1:]
            if not isinstance(scale, (int, float)) or not isinstance(zp, int):
                raise UnpicklingError("fiamma.load: a per-tensor quantized tensor needs a "
                                      f"float scale and int zero point, got {scale!r:.50}, "
                                      f"{zp!r:.50}")
            q = ao.QTensor(None, qdtype, ao.per_tensor_affine, float(scale), int(zp))

            def fill():
                q._int = values()
        elif scheme in (ao.per_channel_affine, ao.per_channel_symmetric,
                        ao.per_channel_affine_float_qparams) and len(quantizer_params) == 4:
            scales, zps, axis = quantizer_params[1:]
            if not (isinstance(scales, Tensor) and isinstance(zps, Tensor)
                    and type(axis) is int and 0 <= axis < max(len(shape), 1)
                    and scales.shape == zps.shape == (shape[axis],)):
                raise UnpicklingError("fiamma.load: malformed per-channel quantized tensor "
                                      f"(shape {shape}, axis {axis!r:.20})")
            # float zero points: float qparams (PyTorch writes them as per_channel_affine)
            floats = zps.is_floating_point()
            q = ao.QTensor(None, qdtype, ao.per_channel_affine_float_qparams if floats else
                           ao.per_channel_affine, None, None, axis)

            def fill():
                q._int = values()
                q._scale = scales.to(D.float32 if floats else D.float64).clone()
                q._zero_point = zps.to(D.float32 if floats else D.int64).clone()
        else:
            raise UnpicklingError(f"fiamma.load: quantization scheme {scheme!r:.60} is not "
                                  "supported (per-tensor and per-channel affine are)")
        self.after_data(fill)  # the integers are copied once the storage holds them
        return q

    def _rebuild_tensor_v2(self, storage, storage_offset, size, stride, requires_grad=False,
                           backward_hooks=None, metadata=None):
        t = self._rebuild_tensor(storage, storage_offset, size, stride)
        return self._grad(t, requires_grad)

    def _rebuild_tensor_v3(self, storage, storage_offset, size, stride, requires_grad,
                           backward_hooks, dtype, metadata=None):
        # an untyped (byte) storage and the tensor's dtype
        if type(dtype) is not D.dtype:
            raise UnpicklingError(f"fiamma.load: _rebuild_tensor_v3 expects a dtype, got "
                                  f"{dtype!r:.50}")
        if id(storage) not in self._storages or self._storages[id(storage)] is not storage:
            raise UnpicklingError("fiamma.load: a tensor is rebuilt from something that is not "
                                  "a storage of this checkpoint")
        if storage._dtype is not dtype:
            nbytes = storage._numel * storage._dtype.itemsize
            typed = object.__new__(Tensor)
            _init(typed, storage._storage, dtype, (nbytes // dtype.itemsize,), (1,),
                  storage._offset * storage._dtype.itemsize // dtype.itemsize, True)
            self._storages[id(typed)] = typed
            self._storage_names[id(typed)] = self._storage_names.get(id(storage))
            storage = typed
        t = self._rebuild_tensor(storage, storage_offset, size, stride)
        return self._grad(t, requires_grad)

    def _rebuild_parameter(self, data, requires_grad, backward_hooks=None):
        if not isinstance(data, Tensor):
            raise UnpicklingError("fiamma.load: _rebuild_parameter expects a tensor")
        # a whole-module checkpoint needs real Parameters; fiamma.nn is loaded when its classes
        # are allowlisted (core never imports it): then its own Parameter is used, as PyTorch's
        # _rebuild_parameter makes a torch.nn.Parameter
        nn_param = sys.modules.get("fiamma.nn.parameter")
        if nn_param is not None and type(requires_grad) is bool and self._set_requires_grad:
            return nn_param.Parameter(data, requires_grad)
        return self._grad(data, requires_grad)

    def _rebuild_parameter_with_state(self, data, requires_grad, backward_hooks=None, state=None):
        return _set_tensor_state(self._rebuild_parameter(data, requires_grad, backward_hooks),
                                 state)

    def _rebuild_from_type_v2(self, func, new_type, args, state=None):
        # new_type: the torch.Tensor / Parameter marker, or a tensor subclass the file names
        # (find_class let it through: allowlisted, or weights_only=False)
        subclass = isinstance(new_type, type) and issubclass(new_type, Tensor)
        if id(func) not in self._rebuilders or not (subclass or type(new_type) is _TypeMarker):
            raise UnpicklingError("fiamma.load: _rebuild_from_type_v2 is only allowed to "
                                  "rebuild a torch.Tensor, a torch.nn.Parameter or a tensor "
                                  f"subclass, got {new_type!r:.80}")
        if type(args) is not tuple:
            raise UnpicklingError("fiamma.load: _rebuild_from_type_v2 expects an args tuple")
        t = func(*args)
        if subclass and type(t) is not new_type:
            t = t.as_subclass(new_type)
            if getattr(new_type, "__setstate__", None) is not getattr(Tensor, "__setstate__",
                                                                      None):
                t.__setstate__(state)   # the class restores its own state, as in PyTorch
                return t
        return _set_tensor_state(t, state)

    def _grad(self, t, requires_grad):
        if type(requires_grad) is not bool:
            raise UnpicklingError(f"fiamma.load: requires_grad must be a bool, got "
                                  f"{requires_grad!r:.50}")
        if requires_grad and self._set_requires_grad:
            try:
                G.autograd_module()
            except RuntimeError:
                return t  # no fiamma-autograd: the tensor loads without requires_grad
            t.requires_grad_(True)
        return t

    # ---- the opcodes that call things, restricted ---------------------------------------------
    dispatch = dict(pickle._Unpickler.dispatch)

    def _refuse(self, what):
        raise UnpicklingError(f"fiamma.load: refusing pickle opcode {what} (it can create "
                              "arbitrary objects)")

    def _load_reduce(self):
        stack = self.stack
        args = stack.pop()
        func = stack[-1]
        if type(args) is not tuple:
            raise UnpicklingError("fiamma.load: REDUCE arguments are not a tuple")
        if self._callables.get(id(func)) is func:
            stack[-1] = func(*args)
            return
        if callable(func) and any(v is func for v in _safe_globals.values()):
            # as PyTorch's weights-only unpickler: an allowlisted global may be called
            if isinstance(func, type):
                _refuse_tensor_class(func, "a call")
            stack[-1] = func(*args)
            return
        raise UnpicklingError(f"fiamma.load: refusing to call {func!r:.80} (not an allowed "
                              "global)")

    def _load_build(self):
        stack = self.stack
        state = stack.pop()
        inst = stack[-1]
        if isinstance(inst, np.dtype) and inst.str[1:] in _NP_CODES:
            # a pickled dtype's state: (3, byte order, None, None, None, -1, -1, 0)
            if type(state) is not tuple or len(state) != 8 or state[1] not in "<>|=" or \
                    state[2:] != (None, None, None, -1, -1, 0):
                raise UnpicklingError("fiamma.load: unsupported numpy dtype state")
            stack[-1] = inst.newbyteorder(state[1]) if state[1] in "<>" else inst
            return
        if _allowlisted_class(type(inst)):
            # an allowlisted class's own state setter, as pickle (and PyTorch) would call it
            _refuse_tensor_class(type(inst), "setting the state")
            setstate = getattr(inst, "__setstate__", None)
            if setstate is not None and getattr(type(inst), "__setstate__", None) is not \
                    getattr(object, "__setstate__", None):
                setstate(state)
                return
            slotstate = None
            if type(state) is tuple and len(state) == 2:
                state, slotstate = state
            if state:
                if type(state) is not dict:
                    raise UnpicklingError(f"fiamma.load: the state of a "
                                          f"{type(inst).__qualname__} must be a dict")
                inst.__dict__.update(state)
            if slotstate:
                if type(slotstate) is not dict:
                    raise UnpicklingError(f"fiamma.load: the slot state of a "
                                          f"{type(inst).__qualname__} must be a dict")
                for k, v in slotstate.items():
                    setattr(inst, k, v)
            return
        # only what a module's state_dict carries: OrderedDict attributes such as `_metadata`
        if type(inst) is not collections.OrderedDict or not (
                state is None or (type(state) is dict and all(type(k) is str for k in state))):
            raise UnpicklingError(f"fiamma.load: refusing to set the state of a "
                                  f"{type(inst).__name__} object (only OrderedDict attributes "
                                  "are allowed)")
        if state:
            inst.__dict__.update(state)

    def _load_newobj(self):
        args = self.stack.pop()
        cls = self.stack.pop()
        if type(args) is not tuple:
            raise UnpicklingError("fiamma.load: NEWOBJ arguments are not a tuple")
        if cls in (collections.OrderedDict, set, frozenset, dict, list):
            self.append(cls(*args) if cls in (set, frozenset) else cls())
            return
        if _allowlisted_class(cls):
            _refuse_tensor_class(cls, "creating an object")
            self.append(cls.__new__(cls, *args))
            return
        raise UnpicklingError(f"fiamma.load: refusing to create an object of {cls!r:.80}")

    def _load_inst(self):
        module = self.readline()[:-1].decode("ascii", "replace")
        name = self.readline()[:-1].decode("ascii", "replace")
        raise UnpicklingError(f"fiamma.load: refusing pickle opcode INST of {module}.{name} "
                              "(it calls the global it names)")

    def _load_obj(self):
        args = self.pop_mark()
        cls = args[0] if args else None
        raise UnpicklingError(f"fiamma.load: refusing pickle opcode OBJ on {cls!r:.80} (it "
                              "calls the class with arguments from the file)")

    def _load_append(self):
        value = self.stack.pop()
        lst = self.stack[-1]
        if type(lst) is not list:
            raise UnpicklingError("fiamma.load: APPEND to something that is not a list")
        lst.append(value)

    def _load_appends(self):
        items = self.pop_mark()
        lst = self.stack[-1]
        if type(lst) is not list:
            raise UnpicklingError("fiamma.load: APPENDS to something that is not a list")
        lst.extend(items)

    def _load_setitem(self):
        stack = self.stack
        value = stack.pop()
        key = stack.pop()
        d = stack[-1]
        if type(d) not in (dict, collections.OrderedDict):
            raise UnpicklingError("fiamma.load: SETITEM on something that is not a dict")
        d[key] = value

    def _load_setitems(self):
        items = self.pop_mark()
        d = self.stack[-1]
        if type(d) not in (dict, collections.OrderedDict) or len(items) % 2:
            raise UnpicklingError("fiamma.load: SETITEMS on something that is not a dict")
        for i in range(0, len(items), 2):
            d[items[i]] = items[i + 1]

    def _load_additems(self):
        items = self.pop_mark()
        s = self.stack[-1]
        if type(s) is not set:
            raise UnpicklingError("fiamma.load: ADDITEMS on something that is not a set")
        s.update(items)

    dispatch[pickle.REDUCE[0]] = _load_reduce
    dispatch[pickle.BUILD[0]] = _load_build
    dispatch[pickle.NEWOBJ[0]] = _load_newobj
    dispatch[pickle.APPEND[0]] = _load_append
    dispatch[pickle.APPENDS[0]] = _load_appends
    dispatch[pickle.SETITEM[0]] = _load_setitem
    dispatch[pickle.SETITEMS[0]] = _load_setitems
    dispatch[pickle.ADDITEMS[0]] = _load_additems
    dispatch[pickle.INST[0]] = _load_inst
    dispatch[pickle.OBJ[0]] = _load_obj
    for _op, _name in ((pickle.NEWOBJ_EX, "NEWOBJ_EX"), (pickle.EXT1, "EXT1"),
                       (pickle.EXT2, "EXT2"), (pickle.EXT4, "EXT4"),
                       (pickle.NEXT_BUFFER, "NEXT_BUFFER"),
                       (pickle.READONLY_BUFFER, "READONLY_BUFFER")):
        dispatch[_op[0]] = (lambda name: lambda self: self._refuse(name))(_name)
    del _op, _name

    def load(self):
        """Unpickle one object; malformed data raises pickle.UnpicklingError."""
        try:
            return super().load()
        except UnpicklingError as e:
            if str(e).startswith("fiamma.load"):
                raise
            raise UnpicklingError(f"fiamma.load: corrupt pickle data ({e})") from None
        except _Passthrough as p:
            raise p.args[0] from None
        except EOFError:
            raise UnpicklingError("fiamma.load: the pickle data ends early (truncated "
                                  "file?)") from None
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, struct.error,
                UnicodeDecodeError, OverflowError, RecursionError, MemoryError) as e:
            raise UnpicklingError(f"fiamma.load: corrupt or unsupported pickle data "
                                  f"({type(e).__name__}: {e})") from None
