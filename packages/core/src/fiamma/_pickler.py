"""A small pickle writer for checkpoints: the objects ``fiamma.save`` supports, written with the
globals PyTorch's loader expects (``torch._utils._rebuild_tensor_v2``, ``torch.FloatStorage``,
``collections.OrderedDict``, ...), none of which need to exist in this process. Other objects
(a whole ``nn.Module``) are written as pickle writes them (their class by name, ``NEWOBJ``
and their state), as ``torch.save`` does.

Python's own Pickler can only name a global it can import, so the opcodes are written here
directly (protocol 2 opcodes, valid in every later protocol; bytes use BINBYTES from protocol 3).
"""

import collections
import copyreg
import struct
import sys
import types

import numpy as np

from fiamma import _dtype as D
from fiamma._storage import device as _device
from fiamma._tensor import Size, Tensor

__all__ = ["CheckpointPickler", "STORAGE_TYPES"]

# pickle opcodes
_PROTO, _STOP = b"\x80", b"."
_NONE, _TRUE, _FALSE = b"N", b"\x88", b"\x89"
_BININT1, _BININT2, _BININT, _LONG1, _LONG4 = b"K", b"M", b"J", b"\x8a", b"\x8b"
_BINFLOAT = b"G"
_BINUNICODE, _BINUNICODE8 = b"X", b"\x8d"
_SHORT_BINBYTES, _BINBYTES, _BINBYTES8 = b"C", b"B", b"\x8e"
_EMPTY_TUPLE, _TUPLE1, _TUPLE2, _TUPLE3, _TUPLE, _MARK = b")", b"\x85", b"\x86", b"\x87", b"t", b"("
_EMPTY_LIST, _APPENDS, _EMPTY_DICT, _SETITEMS = b"]", b"e", b"}", b"u"
_GLOBAL, _REDUCE, _BUILD, _BINPERSID = b"c", b"R", b"b", b"Q"
_BINPUT, _LONG_BINPUT, _BINGET, _LONG_BINGET = b"q", b"r", b"h", b"j"
_NEWOBJ, _POP = b"\x81", b"0"

_BATCH = 1000

# fiamma dtype -> the PyTorch storage class name that carries it
STORAGE_TYPES = {
    D.bool: "BoolStorage", D.uint8: "ByteStorage", D.int8: "CharStorage",
    D.int16: "ShortStorage", D.int32: "IntStorage", D.int64: "LongStorage",
    D.float16: "HalfStorage", D.bfloat16: "BFloat16Storage", D.float32: "FloatStorage",
    D.float64: "DoubleStorage", D.complex64: "ComplexFloatStorage",
    D.complex128: "ComplexDoubleStorage",
}


class CheckpointPickler:
    """Writes one object as a pickle; tensors become ``_rebuild_tensor_v2`` calls whose storage
    is a persistent id made by ``storage_id(tensor) -> (key, location, numel)``."""

    def __init__(self, protocol, storage_id):
        if not isinstance(protocol, int) or isinstance(protocol, bool) or not 2 <= protocol <= 5:
            raise ValueError(f"fiamma.save: pickle_protocol must be 2, 3, 4 or 5, got {protocol!r}")
        self.protocol = protocol
        self.storage_id = storage_id
        self.parts = []
        self.memo = {}      # id(obj) -> (memo index, obj); obj is kept alive while writing
        self.globals = {}   # "module\nname\n" -> memo index

    def dump(self, obj):
        w = self.parts.append
        w(_PROTO + bytes([self.protocol]))
        self.save(obj)
        w(_STOP)
        return b"".join(self.parts)

    # ---- memo --------------------------------------------------------------------------------
    def _put(self, obj):
        idx = len(self.memo) + len(self.globals)
        self.memo[id(obj)] = (idx, obj)
        self._emit_put(idx)

    def _emit_put(self, idx):
        self.parts.append(_BINPUT + bytes([idx]) if idx < 256
                          else _LONG_BINPUT + struct.pack("<I", idx))

    def _get(self, idx):
        self.parts.append(_BINGET + bytes([idx]) if idx < 256
                          else _LONG_BINGET + struct.pack("<I", idx))

    def _global(self, module, name):
        key = f"{module}\n{name}\n"
        idx = self.globals.get(key)
        if idx is not None:
            self._get(idx)
            return
        self.parts.append(_GLOBAL + key.encode("ascii"))
        idx = len(self.memo) + len(self.globals)
        self.globals[key] = idx
        self._emit_put(idx)

    # ---- objects -----------------------------------------------------------------------------
    def save(self, obj):
        w = self.parts.append
        t = type(obj)
        if obj is None:
            w(_NONE)
        elif t is bool:
            w(_TRUE if obj else _FALSE)
        elif t is int:
            self._int(obj)
        elif t is float:
            w(_BINFLOAT + struct.pack(">d", obj))
        elif t is str:
            self._str(obj)
        else:
            m = self.memo.get(id(obj))
            if m is not None:
                self._get(m[0])
                return
            if isinstance(obj, Tensor):
                self._tensor(obj)
            elif t is tuple:
                self._tuple(obj)
            elif t is list:
                self._list(obj)
            elif t is dict:
                w(_EMPTY_DICT)
                self._put(obj)
                self._items(obj)
            elif isinstance(obj, collections.OrderedDict):
                self._ordered_dict(obj)
            elif isinstance(obj, Size):
                self._global("torch", "Size")
                self._tuple(tuple(obj))
                w(_TUPLE1 + _REDUCE)
            elif t is bytes or t is bytearray:
                self._bytes(obj)
            elif t is set or t is frozenset:
                self._global("builtins", t.__name__)
                self._list(list(obj))
                w(_TUPLE1 + _REDUCE)
            elif t is complex:
                self._global("builtins", "complex")
                w(_BINFLOAT + struct.pack(">d", obj.real) + _BINFLOAT
                  + struct.pack(">d", obj.imag) + _TUPLE2 + _REDUCE)
            elif t is D.dtype:
                self._global("torch", obj.name)
            elif t is _device:
                self._global("torch", "device")
                self._str(obj.type)
                if obj.index is None:
                    w(_TUPLE1)
                else:
                    self._int(obj.index)
                    w(_TUPLE2)
                w(_REDUCE)
            elif isinstance(obj, (bool, np.bool_)):
                w(_TRUE if obj else _FALSE)
            elif isinstance(obj, np.generic) and obj.dtype.kind in "iufc":
                self.save(obj.item())  # NumPy scalars are saved as Python numbers
            elif isinstance(obj, int):
                self._int(int(obj))
            elif isinstance(obj, float):
                self.save(float(obj))
            elif isinstance(obj, str):
                self._str(str(obj))
            elif hasattr(t, "__fiamma_qtensor__"):  # fiamma-nn's quantized tensors
                self._qtensor(obj)
            elif isinstance(getattr(obj, "__fiamma_torch_global__", None), str):
                self._global("torch", obj.__fiamma_torch_global__)  # torch.qint8, ...
            else:
                self._object(obj)

    def _object(self, obj):
        """Any other object, as pickle writes it (``__reduce_ex__``): a class or function by
        name; an instance as its class, ``NEWOBJ`` (or a call of its reducer) and its state."""
        w = self.parts.append
        t = type(obj)
        if isinstance(obj, type) or t in (types.FunctionType, types.BuiltinFunctionType):
            self._named_global(obj)
            return
        what = f"an object of type {t.__module__}.{t.__qualname__}"
        try:
            reducer = copyreg.dispatch_table.get(t)  # as pickle: a registered reducer first
            rv = reducer(obj) if reducer is not None else obj.__reduce_ex__(self.protocol)
        except Exception as e:
            raise TypeError(f"fiamma.save: can't save {what}: {e}") from None
        if isinstance(rv, str):  # a module-level singleton, saved by name
            self._named_global(obj, rv)
            return
        if type(rv) is not tuple or not 2 <= len(rv) <= 6:
            raise TypeError(f"fiamma.save: can't save {what}: its __reduce_ex__ returned "
                            f"{type(rv).__name__}")
        func, args, state, listitems, dictitems, setter = (rv + (None,) * 4)[:6]
        if setter is not None or func is copyreg.__newobj_ex__ or type(args) is not tuple:
            raise TypeError(f"fiamma.save: can't save {what}: it pickles with keyword "
                            "arguments or a state setter, which checkpoints can't hold")
        if func is copyreg.__newobj__:
            if not args or not isinstance(args[0], type):
                raise TypeError(f"fiamma.save: can't save {what}: malformed __reduce_ex__")
            self._named_global(args[0])
            self._tuple(args[1:])
            w(_NEWOBJ)
        else:
            self._named_global(func)
            self._tuple(args)
            w(_REDUCE)
        m = self.memo.get(id(obj))
        if m is not None:  # reached again through its own arguments: use that copy
            w(_POP)
            self._get(m[0])
            return
        self._put(obj)
        if listitems is not None:
            items = list(listitems)
            for i in range(0, len(items), _BATCH):
                w(_MARK)
                for x in items[i:i + _BATCH]:
                    self.save(x)
                w(_APPENDS)
        if dictitems is not None:
            self._items(dict(dictitems))
        if state is not None:
            self.save(state)
            w(_BUILD)

    def _named_global(self, obj, qualname=None):
        module = getattr(obj, "__module__", None)
        qualname = qualname or getattr(obj, "__qualname__", None) or \
            getattr(obj, "__name__", None)
        found = None
        if isinstance(module, str) and isinstance(qualname, str) and \
                "<locals>" not in qualname and "<lambda>" not in qualname:
            found = sys.modules.get(module)
            for part in qualname.split("."):
                found = getattr(found, part, None)
        if found is not obj:
            raise TypeError(f"fiamma.save: can't save {obj!r:.80}: it is not found by its name "
                            f"{module}.{qualname} (a local or lambda object can't be saved; "
                            "define it at the top level of a module)")
        if not (module + qualname).isascii() or "\n" in module + qualname:
            raise TypeError(f"fiamma.save: can't save {module}.{qualname}: non-ASCII name")
        self._global(module, qualname)

    def _int(self, v):
        w = self.parts.append
        if 0 <= v < 256:
            w(_BININT1 + bytes([v]))
        elif 0 <= v < 65536:
            w(_BININT2 + struct.pack("<H", v))
        elif -(1 << 31) <= v < (1 << 31):
            w(_BININT + struct.pack("<i", v))
        else:
            n = (v.bit_length() + 8) // 8  # room for the sign bit
            data = v.to_bytes(n, "little", signed=True)
            w(_LONG1 + bytes([n]) + data if n < 256 else _LONG4 + struct.pack("<i", n) + data)

    def _str(self, s):
        data = s.encode("utf-8", "surrogatepass")
        if len(data) >= 1 << 32:
            if self.protocol < 4:
                raise ValueError("fiamma.save: strings of 4 GiB or more need pickle_protocol>=4")
            self.parts.append(_BINUNICODE8 + struct.pack("<Q", len(data)) + data)
        else:
            self.parts.append(_BINUNICODE + struct.pack("<I", len(data)) + data)

    def _bytes(self, b):
        b = bytes(b)
        w = self.parts.append
        if self.protocol < 3:  # what protocol 2 does: _codecs.encode(latin-1 text, 'latin1')
            self._global("_codecs", "encode")
            self._str(b.decode("latin-1"))
            self._str("latin1")
            w(_TUPLE2 + _REDUCE)
        elif len(b) < 256:
            w(_SHORT_BINBYTES + bytes([len(b)]) + b)
        elif len(b) < 1 << 32:
            w(_BINBYTES + struct.pack("<I", len(b)) + b)
        else:
            w(_BINBYTES8 + struct.pack("<Q", len(b)) + b)

    def _tuple(self, tup):
        w = self.parts.append
        n = len(tup)
        if n == 0:
            w(_EMPTY_TUPLE)
            return
        if n > 3:
            w(_MARK)
        for x in tup:
            self.save(x)
        w((_TUPLE1, _TUPLE2, _TUPLE3)[n - 1] if n <= 3 else _TUPLE)

    def _list(self, lst):
        self.parts.append(_EMPTY_LIST)
        self._put(lst)
        for i in range(0, len(lst), _BATCH):
            self.parts.append(_MARK)
            for x in lst[i:i + _BATCH]:
                self.save(x)
            self.parts.append(_APPENDS)

    def _items(self, d):
        items = list(d.items())
        for i in range(0, len(items), _BATCH):
            self.parts.append(_MARK)
            for k, v in items[i:i + _BATCH]:
                self.save(k)
                self.save(v)
            self.parts.append(_SETITEMS)

    def _ordered_dict(self, d):
        self._global("collections", "OrderedDict")
        self.parts.append(_EMPTY_TUPLE + _REDUCE)
        self._put(d)
        self._items(d)
        state = getattr(d, "__dict__", None)
        if state:  # e.g. the `_metadata` attribute of a module's state_dict
            self.parts.append(_EMPTY_DICT)
            self._items(state)
            self.parts.append(_BUILD)

    def _qtensor(self, q):
        """As PyTorch: ``_rebuild_qtensor(storage, offset, size, stride, quantizer_params,
        requires_grad, backward_hooks)`` over a ``torch.Q*Storage`` of the integers;
        ``quantizer_params`` is ``(qscheme, scale, zero_point)`` or
        ``(qscheme, scales, zero_points, axis)``. ``__fiamma_qtensor__`` may add a 4th item,
        the ``(offset, size, stride)`` to write instead of the storage tensor's own."""
        w = self.parts.append
        t, storage_name, params, *layout = q.__fiamma_qtensor__()
        # (offset, size, stride) of the quantized tensor, when they are not those of ``t``
        # (a packed 4-bit tensor: ``t`` is its bytes, two values each)
        offset, size, stride = layout[0] if layout else (t._offset, t._shape, t._stride)
        self._global("torch._utils", "_rebuild_qtensor")
        w(_MARK)
        key, location, numel = self.storage_id(t)
        w(_MARK)
        self._str("storage")
        self._global("torch", storage_name)
        self._str(key)
        self._str(location)
        self._int(numel)
        w(_TUPLE + _BINPERSID)
        self._int(offset)
        self._tuple(size)
        self._tuple(stride)
        self.save(params)
        w(_FALSE)
        self._global("collections", "OrderedDict")
        w(_EMPTY_TUPLE + _REDUCE + _TUPLE + _REDUCE)
        self._put(q)

    def _tensor(self, t):
        w = self.parts.append
        if t.is_sparse:  # as PyTorch: _rebuild_sparse_tensor(layout, (indices, values, size,
            # is_coalesced)), the layout written as torch.serialization._get_layout(name)
            self._global("torch._utils", "_rebuild_sparse_tensor")
            self._global("torch.serialization", "_get_layout")
            self._str("torch.sparse_coo")
            w(_TUPLE1 + _REDUCE + _MARK)
            self.save(t._indices())
            self.save(t._values().detach())
            self.save(t.shape)
            w((_TRUE if t.is_coalesced() else _FALSE) + _TUPLE + _TUPLE2 + _REDUCE)
            self._put(t)
            return
        if getattr(t, "_compressed", False):  # as PyTorch: _rebuild_sparse_tensor(layout,
            # (compressed_indices, plain_indices, values, size))
            self._global("torch._utils", "_rebuild_sparse_tensor")
            self._global("torch.serialization", "_get_layout")
            self._str("torch." + t.layout.name)
            w(_TUPLE1 + _REDUCE + _MARK)
            self.save(t._compressed_indices())
            self.save(t._plain_indices())
            self.save(t.values().detach())
            self.save(t.shape)
            w(_TUPLE + _TUPLE2 + _REDUCE)
            self._put(t)
            return
        cls = type(t)
        if getattr(cls, "_lazy_placeholder", False):
            # a lazy module's UninitializedParameter/Buffer, as PyTorch pickles it:
            # torch.nn.parameter.<class>(requires_grad)
            self._global("torch.nn.parameter", cls.__name__)
            w((_TRUE if t.requires_grad else _FALSE) + _TUPLE1 + _REDUCE)
            self._put(t)
            return
        param = cls.__name__ == "Parameter" and cls.__module__.startswith("fiamma.nn")
        # user attributes (t.foo = 1): PyTorch writes them as the tensor's state, through
        # _rebuild_from_type_v2(func, torch.Tensor, args, state) for a tensor and
        # _rebuild_parameter_with_state(data, requires_grad, hooks, state) for a Parameter
        state = t.__dict__ if (param or cls is Tensor) and t.__dict__ else None
        # a program's own tensor subclass (MONAI's MetaTensor) is written as PyTorch writes
        # one: _rebuild_from_type_v2(func, <the class>, args, state); fiamma's own subclasses
        # keep the form their PyTorch counterparts are written in
        subclass = not param and cls is not Tensor and not cls.__module__.startswith("fiamma")
        if subclass:
            state = dict(t.__dict__)
        if param:  # as PyTorch: _rebuild_parameter(data, requires_grad, OrderedDict())
            self._global("torch._utils", "_rebuild_parameter" if state is None
                         else "_rebuild_parameter_with_state")
            w(_MARK)
        elif state is not None:
            self._global("torch._tensor", "_rebuild_from_type_v2")
            w(_MARK)
        key, location, numel = self.storage_id(t)
        typed = t._dtype in STORAGE_TYPES
        # dtypes without a typed storage class (uint16/32/64) are written as PyTorch writes
        # them: _rebuild_tensor_v3 over an UntypedStorage (bytes), naming the dtype
        self._global("torch._utils", "_rebuild_tensor_v2" if typed else "_rebuild_tensor_v3")
        if subclass:
            self._global(cls.__module__, cls.__qualname__)
        elif state is not None and not param:
            self._global("torch", "Tensor")
        w(_MARK)
        # persistent id: ('storage', torch.<Type>Storage, key, location, numel)
        w(_MARK)
        self._str("storage")
        if typed:
            self._global("torch", STORAGE_TYPES[t._dtype])
        else:
            self._global("torch.storage", "UntypedStorage")
        self._str(key)
        self._str(location)
        self._int(numel if typed else numel * t._dtype.itemsize)
        w(_TUPLE + _BINPERSID)
        self._int(t._offset)
        self._tuple(t._shape)
        self._tuple(t._stride)
        w(_TRUE if t.requires_grad and not param else _FALSE)
        self._global("collections", "OrderedDict")
        w(_EMPTY_TUPLE + _REDUCE)
        if not typed:
            self._global("torch", t._dtype.name)
        if state is not None and not param:  # (func, torch.Tensor, args, state)
            w(_TUPLE)
            self.save(state)
            w(_TUPLE + _REDUCE)
            self._put(t)
            return
        w(_TUPLE + _REDUCE)
        if param:
            w(_TRUE if t.requires_grad else _FALSE)
            self._global("collections", "OrderedDict")
            w(_EMPTY_TUPLE + _REDUCE)
            if state is not None:
                self.save(state)
            w(_TUPLE + _REDUCE)
        self._put(t)
