"""Creation functions of the array API standard over fiamma's creation ops."""

import builtins
import math

import fiamma
from fiamma import Tensor
from fiamma.array_api._dtypes import check_array, int64

__all__ = [
    "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like",
    "linspace", "meshgrid", "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
]


def default_float():
    return fiamma.get_default_dtype()


def _shape(shape, op):
    if isinstance(shape, builtins.int):
        shape = (shape,)
    shape = tuple(shape)
    for s in shape:
        if not isinstance(s, builtins.int) or s < 0:
            raise ValueError(f"{op}: shape must be non-negative integers, got {shape}")
    return shape


def _fill_dtype(v):
    t = type(v)
    if t is builtins.bool:
        return fiamma.bool
    if t is builtins.int:
        return int64
    if t is builtins.float:
        return default_float()
    if t is builtins.complex:
        return default_float().to_complex
    raise TypeError(f"expected a Python bool, int, float or complex, got {t.__name__}")


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    """Evenly spaced values in ``[start, stop)``; empty when the interval is (as in NumPy).

    >>> import fiamma.array_api as xp
    >>> xp.arange(5, 0, -2).tolist(), tuple(xp.arange(0, -1).shape)
    ([5, 3, 1], (0,))
    """
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if dtype is None:
        ints = builtins.all(type(v) in (builtins.int, builtins.bool) for v in (start, stop, step))
        dtype = int64 if ints else default_float()
    n = builtins.max(0, math.ceil((stop - start) / step))
    if n == 0:
        return fiamma.empty((0,), dtype=dtype, device=device)
    if dtype._kind == 2 or not builtins.all(type(v) is builtins.int for v in (start, step)):
        # computed in float64, as start + i*step, then cast: exact for every integer dtype
        out = fiamma.arange(n, dtype=fiamma.float64, device=device) * step + start
        return out.to(dtype)
    return fiamma.arange(start, start + n * step, step, dtype=dtype, device=device)[:n]


def _nested_dtype(obj):
    """The default dtype of a nested sequence of Python scalars (None if it holds arrays)."""
    kinds = set()
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, (list, tuple)):
            stack.extend(o)
        elif type(o) in (builtins.bool, builtins.int, builtins.float, builtins.complex):
            kinds.add(type(o))
        else:
            return None
    if builtins.complex in kinds:
        return default_float().to_complex
    if builtins.float in kinds:
        return default_float()
    if builtins.int in kinds:
        return int64
    if builtins.bool in kinds:
        return fiamma.bool
    return default_float()


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """An array from an array, a nested sequence of Python scalars, a DLPack or buffer
    object. ``copy=True`` always copies, ``copy=False`` never does (ValueError if it must),
    ``copy=None`` copies only when needed.

    >>> import fiamma.array_api as xp
    >>> xp.asarray([[1, 2], [3, 4]]).dtype, xp.asarray(2.5).ndim
    (fiamma.int64, 0)
    """
    if isinstance(obj, Tensor):
        dt = obj._dtype if dtype is None else dtype
        dev = obj.device if device is None else fiamma.device(device)
        if copy is False and (dt is not obj._dtype or dev != obj.device):
            raise ValueError("asarray: copy=False, but the dtype or device differs")
        return obj.to(device=dev, dtype=dt, copy=builtins.bool(copy))
    if isinstance(obj, (list, tuple)) or type(obj) in (builtins.bool, builtins.int,
                                                       builtins.float, builtins.complex):
        if copy is False:
            raise ValueError("asarray: copy=False, but a Python sequence or scalar must be "
                             "copied into a new array")
        nd = _nested_dtype(obj)
        if nd is None:  # a sequence holding arrays
            return fiamma.stack([asarray(o, dtype=dtype, device=device) for o in obj])
        if dtype is None:
            dtype = nd
        if nd is fiamma.int64 and dtype is int64:
            _check_int64(obj)
        return fiamma.tensor(obj, dtype=dtype, device=device)
    return fiamma.asarray(obj, dtype=dtype, device=device, copy=copy)


def _check_int64(obj):
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, (list, tuple)):
            stack.extend(o)
        elif type(o) is builtins.int and not (-2**63 <= o < 2**63):
            raise OverflowError(f"asarray: Python int {o} is out of bounds for int64")


def empty(shape, *, dtype=None, device=None):
    """An uninitialised array of ``shape``."""
    return fiamma.empty(_shape(shape, "empty"), dtype=dtype or default_float(), device=device)


def empty_like(x, /, *, dtype=None, device=None):
    """An uninitialised array shaped like ``x`` (its dtype and device unless given)."""
    check_array(x, "empty_like")
    return fiamma.empty_like(x, dtype=dtype, device=device)


def zeros(shape, *, dtype=None, device=None):
    """Zeros of ``shape``."""
    return fiamma.zeros(_shape(shape, "zeros"), dtype=dtype or default_float(), device=device)


def zeros_like(x, /, *, dtype=None, device=None):
    """Zeros shaped like ``x``."""
    check_array(x, "zeros_like")
    return fiamma.zeros_like(x, dtype=dtype, device=device)


def ones(shape, *, dtype=None, device=None):
    """Ones of ``shape``."""
    return fiamma.ones(_shape(shape, "ones"), dtype=dtype or default_float(), device=device)


def ones_like(x, /, *, dtype=None, device=None):
    """Ones shaped like ``x``."""
    check_array(x, "ones_like")
    return fiamma.ones_like(x, dtype=dtype, device=device)


def full(shape, fill_value, *, dtype=None, device=None):
    """An array of ``shape`` filled with ``fill_value`` (a Python scalar; its kind gives the
    default dtype).

    >>> import fiamma.array_api as xp
    >>> xp.full((2,), 3).dtype, xp.full((2,), True).dtype
    (fiamma.int64, fiamma.bool)
    """
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    dtype = dtype or _fill_dtype(fill_value)
    return fiamma.full(_shape(shape, "full"), fill_value, dtype=dtype, device=device)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    """An array shaped like ``x`` filled with ``fill_value``."""
    check_array(x, "full_like")
    return fiamma.full_like(x, fill_value, dtype=dtype, device=device)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    """A 2-D array with ones on the ``k``-th diagonal.

    >>> import fiamma.array_api as xp
    >>> xp.eye(2, 3, k=1).tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    n_cols = n_rows if n_cols is None else n_cols
    dtype = dtype or default_float()
    rows = fiamma.arange(n_rows, device=device).reshape(n_rows, 1)
    cols = fiamma.arange(n_cols, device=device).reshape(1, n_cols)
    return fiamma.eq(rows + k, cols).to(dtype)


def from_dlpack(x, /, *, device=None, copy=None):
    """An array sharing memory with a DLPack producer (copying if ``copy=True``)."""
    return fiamma.from_dlpack(x, device=device, copy=copy)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    """``num`` evenly spaced values from ``start`` to ``stop`` (excluded when
    ``endpoint=False``).

    >>> import fiamma.array_api as xp
    >>> xp.linspace(0, 1, 4, endpoint=False).tolist()
    [0.0, 0.25, 0.5, 0.75]
    """
    cplx = builtins.any(isinstance(v, builtins.complex) for v in (start, stop))
    if dtype is None:
        dtype = default_float().to_complex if cplx else default_float()
    if cplx or dtype._kind == 3:
        start, stop = builtins.complex(start), builtins.complex(stop)
        rdt = dtype.to_real
        re = linspace(start.real, stop.real, num, dtype=rdt, device=device, endpoint=endpoint)
        im = linspace(start.imag, stop.imag, num, dtype=rdt, device=device, endpoint=endpoint)
        return fiamma.complex(re, im).to(dtype)
    if num < 0:
        raise ValueError(f"linspace: num must be non-negative, got {num}")
    div = (num - 1) if endpoint else num
    if div <= 0:
        return fiamma.full((num,), start, dtype=dtype, device=device)
    step = (stop - start) / div
    i = fiamma.arange(num, dtype=fiamma.float64, device=device)
    out = i * step + start
    if endpoint:
        out[-1] = stop
    return out.to(dtype)


def meshgrid(*arrays, indexing="xy"):
    """Coordinate arrays from 1-D arrays (``indexing`` 'xy' or 'ij'); a list of arrays."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    for a in arrays:
        check_array(a, "meshgrid")
    if not arrays:
        return []
    return list(fiamma.meshgrid(*arrays, indexing=indexing))


def tril(x, /, *, k=0):
    """The lower triangle (at and below the ``k``-th diagonal) of the last two axes."""
    return fiamma.tril(check_array(x, "tril"), k)


def triu(x, /, *, k=0):
    """The upper triangle (at and above the ``k``-th diagonal) of the last two axes."""
    return fiamma.triu(check_array(x, "triu"), k)
