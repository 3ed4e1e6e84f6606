"""The standard's data types, its type promotion (arrays, 0-d arrays and Python scalars alike),
and the data type functions: astype, can_cast, finfo, iinfo, isdtype, result_type."""

import builtins
from collections import namedtuple

import fiamma
from fiamma import Tensor

__all__ = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "complex64", "complex128",
    "astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type",
]

bool = fiamma.bool
int8, int16, int32, int64 = fiamma.int8, fiamma.int16, fiamma.int32, fiamma.int64
uint8 = fiamma.uint8
float32, float64 = fiamma.float32, fiamma.float64
complex64, complex128 = fiamma.complex64, fiamma.complex128
# the wider unsigned dtypes exist in core only from the release that adds them
uint16 = getattr(fiamma, "uint16", None)
uint32 = getattr(fiamma, "uint32", None)
uint64 = getattr(fiamma, "uint64", None)
if uint64 is None:
    __all__ = [n for n in __all__ if n not in ("uint16", "uint32", "uint64")]
    del uint16, uint32, uint64

SIGNED = (int8, int16, int32, int64)
UNSIGNED = tuple(d for d in (uint8, getattr(fiamma, "uint16", None),
                             getattr(fiamma, "uint32", None), getattr(fiamma, "uint64", None))
                 if d is not None)
INTEGRAL = SIGNED + UNSIGNED
REAL_FLOATING = (float32, float64)
COMPLEX = (complex64, complex128)
NUMERIC = INTEGRAL + REAL_FLOATING + COMPLEX
ALL = (bool,) + NUMERIC
_BY_NAME = {d.name: d for d in ALL}


def category(d):
    """'b', 'i', 'u', 'f' or 'c': the standard's kind of dtype ``d``."""
    k = d._kind
    if k == 1:
        return "u" if d.name.startswith("uint") else "i"
    return "b?fc"[k]


def _signed_wider_than(u):
    for s in SIGNED:
        if s.itemsize > u.itemsize:
            return s
    return None


def promote(a, b):
    """The standard's promotion of two dtypes; kinds the standard leaves unspecified (integer
    with floating, bool with numbers) promote as PyTorch does."""
    if a is b:
        return a
    ca, cb = category(a), category(b)
    if ca == cb:
        if ca == "f" and {a, b} == {fiamma.float16, fiamma.bfloat16}:
            return float32
        return a if a.itemsize >= b.itemsize else b
    if {ca, cb} == {"i", "u"}:
        u, s = (a, b) if ca == "u" else (b, a)
        if s.itemsize > u.itemsize:
            return s
        wider = _signed_wider_than(u)
        if wider is None:
            raise TypeError(f"result_type: {a} and {b} have no common dtype (no signed integer "
                            f"dtype holds every {u} value)")
        return wider
    if {ca, cb} == {"f", "c"}:
        f, c = (a, b) if ca == "f" else (b, a)
        return complex128 if (f.itemsize >= 8 or c is complex128) else complex64
    return fiamma.promote_types(a, b)


def _scalar_dtype(s, like):
    """The dtype a Python scalar ``s`` takes beside an array of dtype ``like``."""
    c = category(like)
    t = type(s)
    if t is builtins.bool:
        return like
    if t is builtins.int:
        return like if c != "b" else int64
    if t is builtins.float:
        return like if c in "fc" else fiamma.get_default_dtype()
    if t is builtins.complex:
        if c == "c":
            return like
        return like.to_complex if c == "f" else fiamma.get_default_dtype().to_complex
    raise TypeError(f"expected an array or a Python scalar, got {t.__name__}")


def is_scalar(x):
    return type(x) in (builtins.bool, builtins.int, builtins.float, builtins.complex)


def binary(x1, x2, op):
    """``x1`` and ``x2`` (arrays, or one Python scalar) as arrays of their common dtype."""
    t1, t2 = isinstance(x1, Tensor), isinstance(x2, Tensor)
    if t1 and t2:
        d1, d2 = x1._dtype, x2._dtype
        if d1 is d2:
            return x1, x2
        d = promote(d1, d2)
        return (x1 if d1 is d else x1.to(d)), (x2 if d2 is d else x2.to(d))
    if t1 and is_scalar(x2):
        d = _scalar_dtype(x2, x1._dtype)
        return (x1 if x1._dtype is d else x1.to(d)), fiamma.full((), x2, dtype=d,
                                                                  device=x1.device)
    if t2 and is_scalar(x1):
        d = _scalar_dtype(x1, x2._dtype)
        return fiamma.full((), x1, dtype=d, device=x2.device), (x2 if x2._dtype is d
                                                                 else x2.to(d))
    raise TypeError(f"{op}: expected arrays (or an array and a Python scalar), got "
                    f"{type(x1).__name__} and {type(x2).__name__}")


def check_array(x, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected an array (fiamma.Tensor), got {type(x).__name__}")
    return x


def result_type(*arrays_and_dtypes):
    """The dtype the standard's promotion gives arrays, dtypes and Python scalars.

    >>> import fiamma.array_api as xp
    >>> xp.result_type(xp.int8, xp.uint8, xp.asarray(1, dtype=xp.int16))
    fiamma.int16
    """
    dts, scalars = [], []
    for a in arrays_and_dtypes:
        if isinstance(a, Tensor):
            dts.append(a._dtype)
        elif isinstance(a, fiamma.dtype):
            dts.append(a)
        elif is_scalar(a):
            scalars.append(a)
        else:
            raise TypeError(f"result_type: expected arrays, dtypes or Python scalars, got "
                            f"{type(a).__name__}")
    if not dts:
        raise ValueError("result_type: at least one array or dtype is required")
    r = dts[0]
    for d in dts[1:]:
        r = promote(r, d)
    for s in scalars:
        r = _scalar_dtype(s, r)
    return r


def can_cast(from_, to, /):
    """Whether the standard's promotion rules allow casting ``from_`` (dtype or array) to
    ``to``.

    >>> import fiamma.array_api as xp
    >>> xp.can_cast(xp.int8, xp.int32), xp.can_cast(xp.float64, xp.float32)
    (True, False)
    """
    if isinstance(from_, Tensor):
        from_ = from_._dtype
    if not isinstance(from_, fiamma.dtype) or not isinstance(to, fiamma.dtype):
        raise TypeError("can_cast: expected dtypes (or an array for from_)")
    if from_ is to:
        return True
    cf, ct = category(from_), category(to)
    if cf == "b" or ct == "b":
        return False  # bool casts only to itself under promotion
    if cf in "fc" and ct in "iu":
        return False
    if cf == "c" and ct == "f":
        return False
    if cf in "iu" and ct in "fc":
        return False  # mixed-kind promotion is not defined by the standard
    try:
        return promote(from_, to) is to
    except TypeError:
        return False


finfo_object = namedtuple("finfo_object", "bits eps max min smallest_normal dtype")
iinfo_object = namedtuple("iinfo_object", "bits max min dtype")


def _as_dtype(t, op):
    if isinstance(t, Tensor):
        return t._dtype
    if isinstance(t, fiamma.dtype):
        return t
    raise TypeError(f"{op}: expected a dtype or an array, got {type(t).__name__}")


def finfo(type, /):
    """Limits of a floating dtype (a complex dtype gives its parts' limits; ``dtype`` is the
    real dtype of the parts).

    >>> import fiamma.array_api as xp
    >>> xp.finfo(xp.float32).bits
    32
    """
    d = _as_dtype(type, "finfo")
    if d._kind < 2:
        raise TypeError(f"finfo: expected a floating or complex dtype, got {d}")
    fi = fiamma.finfo(d)
    real = d.to_real
    return finfo_object(real.itemsize * 8, fi.eps, fi.max, fi.min, fi.smallest_normal, real)


def iinfo(type, /):
    """Limits of an integer dtype.

    >>> import fiamma.array_api as xp
    >>> xp.iinfo(xp.int8).min
    -128
    """
    d = _as_dtype(type, "iinfo")
    if d._kind != 1:
        raise TypeError(f"iinfo: expected an integer dtype, got {d}")
    ii = fiamma.iinfo(d)
    return iinfo_object(d.itemsize * 8, ii.max, ii.min, d)


_KINDS = {
    "bool": lambda d: d is bool,
    "signed integer": lambda d: d in SIGNED,
    "unsigned integer": lambda d: d in UNSIGNED,
    "integral": lambda d: d in INTEGRAL,
    "real floating": lambda d: d._kind == 2,
    "complex floating": lambda d: d._kind == 3,
    "numeric": lambda d: d is not bool,
}


def isdtype(dtype, kind):
    """Whether ``dtype`` is of ``kind``: a dtype, a kind name ('bool', 'signed integer',
    'unsigned integer', 'integral', 'real floating', 'complex floating', 'numeric') or a tuple
    of them.

    >>> import fiamma.array_api as xp
    >>> xp.isdtype(xp.int8, ("integral", xp.float32))
    True
    """
    if not isinstance(dtype, fiamma.dtype):
        raise TypeError(f"isdtype: expected a dtype, got {type(dtype).__name__}")
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, fiamma.dtype):
        return dtype is kind
    if isinstance(kind, str):
        try:
            return _KINDS[kind](dtype)
        except KeyError:
            raise ValueError(f"isdtype: unknown kind {kind!r}; expected one of "
                             f"{sorted(_KINDS)}") from None
    raise TypeError(f"isdtype: kind must be a dtype, a kind name or a tuple of them, got "
                    f"{type(kind).__name__}")


def astype(x, dtype, /, *, copy=True, device=None):
    """``x`` converted to ``dtype`` (and ``device``); a copy unless ``copy=False`` and nothing
    changes. Complex to real is not a standard cast and raises.

    >>> import fiamma.array_api as xp
    >>> xp.astype(xp.asarray([1.7, -1.7]), xp.int32).tolist()
    [1, -1]
    """
    check_array(x, "astype")
    if not isinstance(dtype, fiamma.dtype):
        raise TypeError(f"astype: expected a dtype, got {type(dtype).__name__}")
    if x._dtype._kind == 3 and dtype._kind != 3:
        raise TypeError(f"astype: casting {x._dtype} to {dtype} is not defined by the array "
                        "API standard (take the real part with real() first)")
    dev = x.device if device is None else device
    return x.to(device=dev, dtype=dtype, copy=builtins.bool(copy))
