"""PyTorch's legacy typed-tensor names (``torch.FloatTensor``, ``torch.LongTensor``, ...), still
common in older scripts: as constructors (``LongTensor([1, 2])``, ``FloatTensor(2, 3)``), in
``isinstance`` checks and as arguments of ``x.type(...)`` and ``set_default_tensor_type``.

They are not subclasses: a fiamma tensor of dtype float32 on the CPU *is* a ``FloatTensor``
for ``isinstance``, as in PyTorch.
"""

import builtins
import importlib

from fiamma import _dtype as D
from fiamma._layout import strided as _STRIDED
from fiamma._tensor import _TYPE_NAMES, Size, Tensor

__all__ = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
           "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor",
           "set_default_tensor_type", "dtype_of_type"]


class _LegacyTensorType(type):
    def __instancecheck__(cls, obj):
        # dense only: sparse tensors are instances of fiamma.sparse.FloatTensor and friends
        return (isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == "cpu"
                and obj.layout is _STRIDED)

    def __subclasscheck__(cls, sub):
        return sub is cls

    def __call__(cls, *args, device=None):
        from fiamma import _creation as C

        if device is not None and str(device) != "cpu":
            raise RuntimeError(f"{cls.__name__}: legacy constructors make CPU tensors, got "
                               f"device={device}")
        dt = cls.dtype
        if not args:
            return C.empty(0, dtype=dt)
        if len(args) == 1 and isinstance(args[0], Size):
            return C.empty(*args[0], dtype=dt)
        if len(args) == 1 and not isinstance(args[0], builtins.int):
            a = args[0]
            if isinstance(a, Tensor):
                if a.dtype is not dt:
                    raise TypeError(f"{cls.__name__}: expected {dt} tensor, got {a.dtype}")
                return a.detach()
            return C.tensor(a, dtype=dt)
        return C.empty(*args, dtype=dt)

    def __repr__(cls):
        return f"<class 'fiamma.{cls.__name__}'>"


class _CudaLegacyTensorType(type):
    """``torch.cuda.FloatTensor`` and friends: CUDA tensors of one dtype (``isinstance``), made
    on the current CUDA device; without CUDA, making one raises a TypeError as PyTorch's CPU
    build does."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == "cuda"

    def __subclasscheck__(cls, sub):
        return sub is cls

    def _check_available(cls):
        # by name: fiamma.cuda sits below this module (an import here joins the import cycle)
        cuda = importlib.import_module("fiamma.cuda")
        if not cuda.is_available():
            raise TypeError(f"type {D.NAMESPACE}cuda.{cls.__name__} not available: fiamma has "
                            f"no CUDA device here ({cuda.unavailable_reason()})")

    def __call__(cls, *args):
        cls._check_available()
        return _CPU_TYPES[cls.__name__](*args).to("cuda")

    def __repr__(cls):
        return f"<class 'fiamma.cuda.{cls.__name__}'>"


def _make(name, dt):
    return _LegacyTensorType(name, (), {"dtype": dt, "__module__": "fiamma",
                                        "__doc__": f"Legacy name: CPU tensors of {dt}."})


FloatTensor = _make("FloatTensor", D.float32)
DoubleTensor = _make("DoubleTensor", D.float64)
HalfTensor = _make("HalfTensor", D.float16)
BFloat16Tensor = _make("BFloat16Tensor", D.bfloat16)
LongTensor = _make("LongTensor", D.int64)
IntTensor = _make("IntTensor", D.int32)
ShortTensor = _make("ShortTensor", D.int16)
CharTensor = _make("CharTensor", D.int8)
ByteTensor = _make("ByteTensor", D.uint8)
BoolTensor = _make("BoolTensor", D.bool)

_BY_NAME = {c.__name__: c for c in (FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor,
                                    LongTensor, IntTensor, ShortTensor, CharTensor, ByteTensor,
                                    BoolTensor)}
_CPU_TYPES = dict(_BY_NAME)
# the type names of x.type() without a legacy class (ComplexFloatTensor, UInt16Tensor, ...)
_DTYPE_BY_TYPE_NAME = {n: getattr(D, d) for d, n in _TYPE_NAMES.items()}

# fiamma.cuda.FloatTensor, ...: the same names for CUDA tensors (exported by fiamma.cuda)
CUDA_TYPES = {n: _CudaLegacyTensorType(n, (), {"dtype": c.dtype, "__module__": "fiamma.cuda",
                                               "__doc__": f"Legacy name: CUDA tensors of "
                                                          f"{c.dtype}."})
              for n, c in _BY_NAME.items()}


def dtype_of_type(obj, op="type"):
    """The dtype a ``type()``-style argument names: a dtype, a legacy class
    (``fiamma.LongTensor``) or its name (``'torch.LongTensor'``, ``'fiamma.LongTensor'``).
    ``Tensor`` itself (or ``'torch.Tensor'``) names the default dtype, as in PyTorch, where
    ``x.type(torch.Tensor)`` is common in older scripts. CUDA type names raise naming the
    reason."""
    if isinstance(obj, _LegacyTensorType):
        return obj.dtype
    if isinstance(obj, _CudaLegacyTensorType):
        obj._check_available()
        return obj.dtype
    if obj is Tensor:
        return D.get_default_dtype()
    if isinstance(obj, str):
        parts = obj.split(".")
        if len(parts) >= 2 and parts[0] in ("torch", "fiamma"):
            if parts[1] == "cuda":
                raise RuntimeError(f"{op}: {obj} names a CUDA tensor type; fiamma has no CUDA "
                                   "device here")
            if parts[-1] in _BY_NAME and len(parts) == 2:
                return _BY_NAME[parts[-1]].dtype
            if len(parts) == 2 and parts[1] in _DTYPE_BY_TYPE_NAME:  # 'torch.ComplexFloatTensor'
                return _DTYPE_BY_TYPE_NAME[parts[1]]
            if parts[1:] == ["Tensor"]:
                return D.get_default_dtype()
    return D.to_dtype(obj, op)


def set_default_tensor_type(t):
    """Legacy form of ``set_default_dtype``: ``set_default_tensor_type(fiamma.DoubleTensor)``
    or ``set_default_tensor_type('torch.FloatTensor')`` (floating-point CPU types only).

    >>> import fiamma
    >>> fiamma.set_default_tensor_type("torch.DoubleTensor"); fiamma.zeros(1).dtype
    fiamma.float64
    >>> fiamma.set_default_tensor_type(fiamma.FloatTensor)
    """
    dt = dtype_of_type(t, "set_default_tensor_type")
    if not dt.is_floating_point:
        raise TypeError(f"set_default_tensor_type: only floating-point types are supported as "
                        f"the default type, got {t!r}")
    D.set_default_dtype(dt)


def _tensor_type(self, dtype=None, non_blocking=False):
    """``x.type()``: the legacy type name (``'fiamma.FloatTensor'``); ``x.type(t)``: ``x`` as
    type ``t`` (a dtype, a legacy type such as fiamma.LongTensor, or its name)."""
    if dtype is None:
        name = self._dtype.name
        return D.NAMESPACE + _TYPE_NAMES.get(name, name[:1].upper() + name[1:] + "Tensor")
    if isinstance(dtype, _CudaLegacyTensorType):
        return self.to("cuda", dtype_of_type(dtype, "type"))
    return self.to(dtype_of_type(dtype, "type"))


# Tensor methods of this module: attached by fiamma._methods (the one place that does)
METHODS = {"type": _tensor_type}
