"""dtypes, PyTorch's type promotion, and the default floating dtype."""

import builtins

import numpy as np

from fiamma import _tensor_factory

__all__ = [
    "dtype", "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
    "float32", "float64", "half", "float", "double", "short", "int", "long",
    "complex64", "complex128", "cfloat", "cdouble", "uint16", "uint32", "uint64",
    "promote_types", "result_type", "can_cast", "get_default_dtype", "set_default_dtype",
    "finfo", "iinfo", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
    "float8_e8m0fnu", "complex32", "chalf", "uint1", "uint2", "uint3", "uint4", "uint5",
    "uint6", "uint7", "int1", "int2", "int3", "int4", "int5", "int6", "int7",
]


# the module name reprs show: "torch." while fiamma.run aliases torch (so a ported script prints,
# and compares `x.type()` against, what it would under PyTorch); set by fiamma._torch_alias
NAMESPACE = "fiamma."

class dtype:
    """A tensor element type (``fiamma.float32``, ``fiamma.int64``, ...).

    >>> import fiamma
    >>> fiamma.float32.itemsize, fiamma.int64.is_floating_point
    (4, False)
    """

    __slots__ = ("name", "code", "itemsize", "is_floating_point", "is_complex", "is_signed",
                 "_kind", "_np", "_fmt")

    def __init__(self, name, code, itemsize, kind, np_dtype, fmt):
        self.name = name
        self.code = code
        self.itemsize = itemsize
        self._kind = kind  # 0 bool, 1 integer, 2 floating, 3 complex
        self.is_floating_point = kind == 2
        self.is_complex = kind == 3
        self.is_signed = kind >= 2 or name.startswith("int")
        self._np = np_dtype
        self._fmt = fmt

    @property
    def to_real(self):
        """The real dtype of a complex one's parts (complex64 -> float32); itself otherwise."""
        return _TO_REAL.get(self, self)

    @property
    def to_complex(self):
        """The complex dtype with this dtype's parts (float64 -> complex128); complex dtypes
        give themselves, other dtypes complex64 (fiamma has no complex32)."""
        if self._kind == 3:
            return self
        return complex128 if self is float64 else complex64

    @property
    def kind(self):
        """NumPy's one-letter kind: 'b' bool, 'i' signed and 'u' unsigned integer, 'f' floating
        (bfloat16 too), 'c' complex (libraries written for NumPy dtypes read it)."""
        k = self._kind
        if k == 1:
            return "i" if self.is_signed else "u"
        return "bifc"[k]

    def __repr__(self):
        return NAMESPACE + self.name

    def __reduce__(self):
        return (_by_name, (self.name,))


# code order matches the FM_* dtype codes in csrc/fiamma_api.h
bool = dtype("bool", 0, 1, 0, np.dtype(np.bool_), "?")
uint8 = dtype("uint8", 1, 1, 1, np.dtype(np.uint8), "B")
int8 = dtype("int8", 2, 1, 1, np.dtype(np.int8), "b")
int16 = dtype("int16", 3, 2, 1, np.dtype(np.int16), "h")
int32 = dtype("int32", 4, 4, 1, np.dtype(np.int32), "i")
int64 = dtype("int64", 5, 8, 1, np.dtype(np.int64), "q")
float16 = dtype("float16", 6, 2, 2, np.dtype(np.float16), "e")
bfloat16 = dtype("bfloat16", 7, 2, 2, None, None)
float32 = dtype("float32", 8, 4, 2, np.dtype(np.float32), "f")
float64 = dtype("float64", 9, 8, 2, np.dtype(np.float64), "d")
complex64 = dtype("complex64", 10, 8, 3, np.dtype(np.complex64), "Zf")
complex128 = dtype("complex128", 11, 16, 3, np.dtype(np.complex128), "Zd")
uint16 = dtype("uint16", 12, 2, 1, np.dtype(np.uint16), "H")
uint32 = dtype("uint32", 13, 4, 1, np.dtype(np.uint32), "I")
uint64 = dtype("uint64", 14, 8, 1, np.dtype(np.uint64), "Q")



class _NoTensorDtype(dtype):
    """A PyTorch dtype that fiamma names but has no tensors of (the float8 types, complex32 and
    the sub-byte integers uint1..uint7, int1..int7, as PyTorch's own are): it compares,
    hashes and prints as a dtype (``t.dtype == torch.float8_e4m3fn`` is simply false), and any
    use of it as a tensor's dtype raises TypeError naming it."""

    __slots__ = ()

    def __reduce__(self):
        return (_by_name, (self.name,))


# PyTorch's 8-bit floating types; codes past the C library's (it has none of them)
float8_e4m3fn = _NoTensorDtype("float8_e4m3fn", 100, 1, 2, None, None)
float8_e4m3fnuz = _NoTensorDtype("float8_e4m3fnuz", 101, 1, 2, None, None)
float8_e5m2 = _NoTensorDtype("float8_e5m2", 102, 1, 2, None, None)
float8_e5m2fnuz = _NoTensorDtype("float8_e5m2fnuz", 103, 1, 2, None, None)
float8_e8m0fnu = _NoTensorDtype("float8_e8m0fnu", 104, 1, 2, None, None)
# half-precision complex (library code lists it among the floating/complex dtypes it accepts)
complex32 = chalf = _NoTensorDtype("complex32", 105, 4, 3, None, None)
# PyTorch's sub-byte integer types (named there for quantization libraries, with no tensors of
# their own: creating one raises there too); itemsize 1 as in PyTorch
_SUB_BYTE = tuple(_NoTensorDtype(f"{p}int{b}", c, 1, 1, None, None)
                  for c, (p, b) in enumerate(((p, b) for p in ("u", "") for b in range(1, 8)),
                                             start=106))
(uint1, uint2, uint3, uint4, uint5, uint6, uint7,
 int1, int2, int3, int4, int5, int6, int7) = _SUB_BYTE
NO_TENSOR = (float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz,
             float8_e8m0fnu, complex32) + _SUB_BYTE

half, float, double = float16, float32, float64
short, int, long = int16, int32, int64
cfloat, cdouble = complex64, complex128

ALL = (bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64,
       complex64, complex128, uint16, uint32, uint64)
UNSIGNED = (uint8, uint16, uint32, uint64)
BY_CODE = ALL
_NAMES = {d.name: d for d in ALL}
_NAMES.update(half=float16, float=float32, double=float64, short=int16, int=int32, long=int64,
              cfloat=complex64, cdouble=complex128)
_TO_REAL = {complex64: float32, complex128: float64}


def _by_name(name):
    return _NAMES.get(name) or _NO_TENSOR_NAMES[name]


_NO_TENSOR_NAMES = {d.name: d for d in NO_TENSOR}


_FROM_NUMPY = {d._np: d for d in ALL if d._np is not None}


def from_numpy_dtype(npdt):
    """The fiamma dtype for a NumPy dtype, or TypeError."""
    try:
        return _FROM_NUMPY[np.dtype(npdt)]
    except (KeyError, TypeError):
        raise TypeError(
            f"can't convert np.ndarray of type {np.dtype(npdt)}. The only supported types are: "
            "complex128, complex64, float64, float32, float16, int64, int32, int16, int8, uint64, "
            "uint32, uint16, uint8, and bool.") from None


def to_dtype(obj, op="dtype"):
    """Accept a fiamma dtype, a NumPy dtype/type, or a Python type (float/int/bool)."""
    if type(obj) is dtype:
        return obj
    if obj is builtins.float:
        return float64  # PyTorch: a Python float type means double
    if obj is builtins.int:
        return int64
    if obj is builtins.bool:
        return bool
    if obj is builtins.complex:
        return complex128  # as PyTorch: the Python complex type means cdouble
    if isinstance(obj, str) and obj in _NAMES:
        return _NAMES[obj]
    if isinstance(obj, _NoTensorDtype):
        raise TypeError(f"{op}: fiamma has no tensors of dtype {obj!r} (PyTorch's float8 "
                        "types, complex32 and the sub-byte integer types are named for "
                        "comparisons only)")
    try:
        return from_numpy_dtype(obj)
    except TypeError:
        raise TypeError(f"{op}: expected a fiamma dtype, got {obj!r}") from None


# ---- promotion -------------------------------------------------------------------------------

def _promote_pair(a, b):
    if a is b:
        return a
    if a._kind == 3 or b._kind == 3:
        # complex with anything: complex parts wide enough for both (float64 + complex64 ->
        # complex128); complex beats the other categories
        return complex128 if complex128 in (a, b) or float64 in (a, b) else complex64
    if a._kind != b._kind:
        return a if a._kind > b._kind else b
    if a._kind == 0:
        return bool
    if a._kind == 2:
        if {a, b} == {float16, bfloat16}:
            return float32
        return a if a.itemsize > b.itemsize else b
    # integers of one signedness: the wider
    ua, ub = a in UNSIGNED, b in UNSIGNED
    if ua == ub:
        return a if a.itemsize > b.itemsize else b
    # unsigned with signed: the smallest signed type holding both (NumPy's rule; PyTorch's for
    # uint8, the only unsigned type it promotes); nothing holds uint64 and a signed type, so
    # that gives float64 as in NumPy
    u, i = (a, b) if ua else (b, a)
    if u is uint64:
        return float64
    for t in (int16, int32, int64):
        if t.itemsize > u.itemsize and t.itemsize >= i.itemsize:
            return t
    return int64


_PROMOTE = [[_promote_pair(a, b) for b in ALL] for a in ALL]


def promote_types(type1, type2):
    """The smallest dtype both can be cast to without losing category (torch.promote_types)."""
    return _PROMOTE[type1.code][type2.code]


def _combine(higher, lower):
    # PyTorch's rule for combining the dimensioned, zero-dim and scalar participants.
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher._kind == 3:
        return higher
    if lower._kind == 3:
        # a complex lower participant keeps a floating higher one's precision
        return higher.to_complex if higher._kind == 2 else lower
    if higher._kind == 2:
        return higher
    if higher is bool or lower._kind == 2:
        return _PROMOTE[higher.code][lower.code]
    return higher


def scalar_dtype(x):
    """The dtype a Python scalar takes part in promotion with."""
    t = type(x)
    if t is builtins.bool or t is np.bool_:
        return bool
    if t is builtins.int or isinstance(x, np.integer):
        return int64
    if t is builtins.complex or isinstance(x, np.complexfloating):
        return default_complex_dtype()
    return _default[0]


def default_complex_dtype():
    """The dtype of complex tensors made from Python complex numbers (complex64 while the
    default dtype is float32, complex128 when it is float64)."""
    return complex128 if _default[0] is float64 else complex64


def result_type(*operands):
    """The dtype of an op's result over tensors and Python scalars (torch.result_type)."""
    Tensor = _tensor_factory.Tensor
    dim_r = zero_r = wrap_r = None
    for x in operands:
        if isinstance(x, Tensor):
            d = x._dtype
            if x._shape:
                dim_r = d if dim_r is None else _PROMOTE[dim_r.code][d.code]
            else:
                zero_r = d if zero_r is None else _PROMOTE[zero_r.code][d.code]
        elif isinstance(x, (builtins.bool, builtins.int, builtins.float, builtins.complex,
                            np.number, np.bool_)):
            d = scalar_dtype(x)
            wrap_r = d if wrap_r is None else _PROMOTE[wrap_r.code][d.code]
        elif isinstance(x, dtype):
            dim_r = x if dim_r is None else _PROMOTE[dim_r.code][x.code]
        else:
            raise TypeError(f"result_type: expected tensors or numbers, got {type(x).__name__}")
    return _combine(dim_r, _combine(zero_r, wrap_r))


def can_cast(from_, to):
    """Whether a cast is allowed by PyTorch's same-kind rule (torch.can_cast)."""
    return from_._kind <= to._kind


# ---- default dtype ---------------------------------------------------------------------------

_default = [float32]


def get_default_dtype():
    """The dtype of floating tensors made from Python floats (float32 unless changed)."""
    return _default[0]


def set_default_dtype(d):
    """Set the default floating dtype (float16, bfloat16, float32 or float64)."""
    d = to_dtype(d, "set_default_dtype")
    if not d.is_floating_point:
        raise TypeError(f"set_default_dtype: only floating-point types are supported, got {d}")
    _default[0] = d


# ---- finfo / iinfo ---------------------------------------------------------------------------

class finfo:
    """Machine limits of a floating dtype (torch.finfo)."""

    def __init__(self, type=None):
        t = get_default_dtype() if type is None else to_dtype(type, "finfo")
        t = t.to_real  # a complex dtype's limits are its parts' (as PyTorch)
        if not t.is_floating_point:
            raise TypeError(f"finfo: expected a floating dtype, got {t}")
        self.dtype = t.name
        self.bits = t.itemsize * 8
        if t is bfloat16:
            self.eps, self.max, self.tiny, self.resolution = 0.0078125, 3.3895313892515355e38, \
                1.1754943508222875e-38, 0.01
            self.smallest_normal = self.tiny
            self.min = -self.max
        else:
            fi = np.finfo(t._np)
            self.eps = builtins.float(fi.eps)
            self.max = builtins.float(fi.max)
            self.min = builtins.float(fi.min)
            self.tiny = self.smallest_normal = builtins.float(fi.tiny)
            self.resolution = 10.0 ** -builtins.int(fi.precision)

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype (torch.iinfo)."""

    def __init__(self, type):
        t = to_dtype(type, "iinfo")
        if t._kind >= 2:
            raise TypeError(f"iinfo: expected an integer dtype, got {t}")
        ii = np.iinfo(np.uint8 if t is bool else t._np)
        self.dtype = t.name
        self.bits = t.itemsize * 8
        self.min = 0 if t is bool else builtins.int(ii.min)
        self.max = 1 if t is bool else builtins.int(ii.max)

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
