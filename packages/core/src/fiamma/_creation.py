"""Creation functions: tensor, as_tensor, empty/zeros/ones/full and their _like forms, and the
ranges arange/range/linspace/logspace/eye."""

import builtins
import cmath
import math
import operator
import warnings

import numpy as np

from fiamma import _dtype as D, _grad_hook as G, _layout as _layout_mod, _memory_format as _mf
from fiamma._autograd_api import ops
from fiamma._backend import check
from fiamma._limits import check_shape
from fiamma._ops._common import check_out
from fiamma._storage import _DEFAULT_DEVICE, CPU, device as _device
from fiamma._tensor import Tensor, _shape_arg, new_empty

__all__ = [
    "tensor", "as_tensor", "asarray", "scalar_tensor", "empty", "zeros", "ones", "full",
    "empty_like", "zeros_like", "ones_like", "full_like", "empty_strided",
    "arange", "range", "linspace", "logspace", "eye",
]


def _dev(device):
    if device is None:
        return _DEFAULT_DEVICE.dev or CPU
    return _device(device)


def _finish(t, requires_grad):
    if requires_grad:
        t.requires_grad_(True)
    return t


def _laid_out(t, layout, op, sparse=True):
    """``t`` in the requested ``layout=`` (None or ``strided``: as it is). ``zeros``/``empty``
    and their ``_like`` forms also build the sparse layouts (an all-zero sparse tensor, as
    PyTorch); the filled constructors refuse them, as PyTorch does."""
    if layout is None or layout is _layout_mod.strided:
        return t
    if not isinstance(layout, _layout_mod.layout):
        raise TypeError(f"{op}: expected layout to be a fiamma.layout, got "
                        f"{type(layout).__name__}")
    if not sparse:
        raise RuntimeError(f"{op}: not implemented for sparse layout {layout} (expected "
                           "fiamma.strided)")
    return t.to_sparse(layout=layout)


def _into_out(out, size, dtype, value, op):
    """``zeros``/``ones``/``full``/``empty`` with ``out=``: ``out`` resized to ``size`` and filled
    (``value`` None: left as it is, as ``empty``), keeping its dtype unless ``dtype`` names
    another (refused, as PyTorch)."""
    if not isinstance(out, Tensor):
        raise TypeError(f"{op}: out must be a Tensor, got {type(out).__name__}")
    if dtype is not None and D.to_dtype(dtype, op) is not out._dtype:
        raise RuntimeError(f"{op}: dtype {D.to_dtype(dtype, op)} does not match the out tensor's "
                           f"dtype {out._dtype}")
    check_out(out, _size(size, op), out._dtype, op)
    if value is not None:
        fill_(out, value)
    return out


def _infer_numpy(data):
    """A NumPy array for nested Python data, with PyTorch's dtype inference applied after."""
    if isinstance(data, (list, tuple)) and _has_tensor(data):
        data = _tensors_to_lists(data)
    try:
        arr = np.asarray(data)
    except (ValueError, TypeError) as e:
        raise ValueError(f"tensor: could not build a tensor from {type(data).__name__}: {e}") \
            from None
    if arr.dtype == object:
        raise TypeError(f"tensor: could not infer dtype of {type(data).__name__} "
                        "(ragged nested sequence or non-numeric elements)")
    return arr


def _has_tensor(seq):
    for x in seq:
        if isinstance(x, Tensor):
            return True
        if isinstance(x, (list, tuple)) and _has_tensor(x):
            return True
    return False


def _tensors_to_lists(seq):
    return [x.tolist() if isinstance(x, Tensor) else
            _tensors_to_lists(x) if isinstance(x, (list, tuple)) else x for x in seq]


def _default_for_numpy_kind(arr):
    k = arr.dtype.kind
    if k == "b":
        return D.bool
    if k in "iu":
        return D.int64
    if k == "f":
        return D.get_default_dtype()
    if k == "c":
        return D.default_complex_dtype()
    raise TypeError(f"tensor: unsupported element type {arr.dtype}")


def from_array_copy(arr, dt, dev=CPU):
    """A new tensor on ``dev`` holding a copy of NumPy array ``arr`` cast to ``dt`` (one upload
    for another device: its from_host casts)."""
    if arr.dtype not in D._FROM_NUMPY:
        k = arr.dtype.kind
        arr = arr.astype(np.float64 if k == "f" else np.complex128 if k == "c" else np.int64)
    src_dt = D._FROM_NUMPY[arr.dtype]
    shape = tuple(arr.shape)  # before ascontiguousarray, which makes 0-d arrays 1-d
    arr = np.require(arr, requirements=("C", "A"))
    out = new_empty(shape, dt, dev)
    if out._numel:
        check(out._storage.backend.from_host(out, src_dt, arr.__array_interface__["data"][0]),
              "tensor")
    return out


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of ``data`` (nested lists, scalars, arrays, tensors).

    Python floats become the default dtype (float32), ints int64, bools bool.

    >>> import fiamma
    >>> fiamma.tensor([1, 2, 3]).dtype
    fiamma.int64
    """
    dt = None if dtype is None else D.to_dtype(dtype, "tensor")
    if isinstance(data, Tensor):
        dev = data._storage.device if device is None else _device(device)
        out = data.detach().to(dtype=dt or data._dtype, device=dev, copy=True)
        return _finish(out, requires_grad)
    if isinstance(data, np.ndarray):
        src = data
        if dt is None:
            dt = D.from_numpy_dtype(data.dtype) if data.dtype in D._FROM_NUMPY else \
                _default_for_numpy_kind(data)
    else:
        src = _infer_numpy(data)
        if dt is D.uint64 and src.dtype.kind == "f":
            # NumPy reads ints past int64's range as float64: keep them exact
            try:
                src = np.asarray(data, dtype=np.uint64)
            except (OverflowError, ValueError, TypeError):
                pass
        if dt is None:
            if isinstance(data, (np.generic,)) and src.dtype in D._FROM_NUMPY:
                dt = D._FROM_NUMPY[src.dtype]
            else:
                if src.dtype == np.uint64:  # Python ints past int64 (int64 is the default)
                    raise ValueError("tensor: Overflow when unpacking long long (pass "
                                     "dtype=fiamma.uint64 for values up to 2**64 - 1)")
                dt = _default_for_numpy_kind(src)
    return _finish(from_array_copy(src, dt, _dev(device)), requires_grad)


def as_tensor(data, dtype=None, device=None):
    """Like ``tensor`` but shares memory when ``data`` already is a tensor or a NumPy array of a
    matching dtype and device."""
    dt = None if dtype is None else D.to_dtype(dtype, "as_tensor")
    if isinstance(data, Tensor):
        return data.to(dtype=dt, device=device)
    if isinstance(data, np.ndarray) and data.dtype in D._FROM_NUMPY and \
            (dt is None or D._FROM_NUMPY[data.dtype] is dt) and _dev(device) is CPU:
        from fiamma._interop import from_numpy

        try:
            return from_numpy(data)
        except (ValueError, RuntimeError):
            pass  # negative strides: copy
    return tensor(data, dtype=dt, device=device)


def asarray(obj, dtype=None, device=None, copy=None, requires_grad=False):
    """Array-API style constructor: shares memory unless ``copy=True`` or a cast is needed."""
    if copy:
        return tensor(obj, dtype=dtype, device=device, requires_grad=requires_grad)
    if hasattr(obj, "__dlpack__") and not isinstance(obj, (Tensor, np.ndarray)):
        from fiamma._interop import from_dlpack

        obj = from_dlpack(obj)
    out = as_tensor(obj, dtype=dtype, device=device)
    return _finish(out, requires_grad)


def scalar_tensor(s, dtype=None, device=None, requires_grad=False):
    dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype, "scalar_tensor")
    return full((), s, dtype=dt, device=device, requires_grad=requires_grad)


def _size(size, op):
    try:
        shape = _shape_arg(size)
    except TypeError:
        raise TypeError(f"{op}: expected a shape (ints), got {size!r}") from None
    check_shape(shape, op)
    return shape


def _size_kw(args, size, op):
    """The shape given positionally (``zeros(2, 3)``, ``zeros((2, 3))``) or as ``size=``."""
    if args:
        raise TypeError(f"{op}: the shape was given both positionally and as size=")
    return (size,)


def empty(*size_args, size=None, dtype=None, device=None, requires_grad=False, out=None,
          pin_memory=False, memory_format=None, layout=None):
    """An uninitialised tensor of the given shape."""
    size = size_args if size is None else _size_kw(size_args, size, "empty")
    if out is not None:
        return _into_out(out, size, dtype, None, "empty")
    dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype, "empty")
    t = new_empty(_size(size, "empty"), dt, _dev(device))
    if memory_format is not None:
        t = _formatted(t, None, memory_format, "empty")
    if layout is not None:
        t = _laid_out(t, layout, "empty")
    return _finish(t, requires_grad)


def zeros(*size_args, size=None, dtype=None, device=None, requires_grad=False, out=None,
          layout=None, pin_memory=False):
    size = size_args if size is None else _size_kw(size_args, size, "zeros")
    if out is not None:
        return _into_out(out, size, dtype, 0, "zeros")
    dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype, "zeros")
    t = new_empty(_size(size, "zeros"), dt, _dev(device), zero=True)
    if layout is not None:
        t = _laid_out(t, layout, "zeros")
    return _finish(t, requires_grad)


def fill_(t, value):
    """Fill ``t`` in place with a Python number (cast to its dtype)."""
    if isinstance(value, Tensor):
        value = value.item()
    if t._numel == 0:
        return t
    if t._dtype._kind == 3:
        # the parts are real views of the same memory: two real fills
        from fiamma._ops.complex_ops import imag_, real_

        v = builtins.complex(value)
        check(t._storage.backend.fill(real_(t), v.real, 0, 0), "fill_")
        check(t._storage.backend.fill(imag_(t), v.imag, 0, 0), "fill_")
        return t
    if isinstance(value, (builtins.complex, np.complexfloating)):
        if t._dtype is D.bool:  # any number into bool: nonzero is True
            value = builtins.bool(value)
        elif value.imag != 0:
            raise RuntimeError(f"fill_: value {value} cannot be converted to type {t._dtype} "
                               "without overflow")
        value = value.real
    if t._dtype._kind != 2:
        from fiamma._ops.indexing import check_fits

        check_fits(value, t._dtype, "fill_")
    if t._dtype._kind == 2 or isinstance(value, builtins.float):
        v = builtins.float(value)
        rc = t._storage.backend.fill(t, v, 0, 0)
    else:
        v = builtins.int(value)
        if v >= 1 << 63:
            v -= 1 << 64
        rc = t._storage.backend.fill(t, 0.0, v, 1)
    check(rc, "fill_")
    return t


def ones(*size_args, size=None, dtype=None, device=None, requires_grad=False, out=None,
         layout=None, pin_memory=False):
    size = size_args if size is None else _size_kw(size_args, size, "ones")
    if out is not None:
        return _into_out(out, size, dtype, 1, "ones")
    dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype, "ones")
    t = new_empty(_size(size, "ones"), dt, _dev(device))
    fill_(t, 1)
    if layout is not None:
        t = _laid_out(t, layout, "ones", sparse=False)
    return _finish(t, requires_grad)


def _full_dtype(fill_value):
    if isinstance(fill_value, Tensor):
        return fill_value._dtype
    return D.scalar_dtype(fill_value)


def full(size, fill_value, dtype=None, device=None, requires_grad=False, out=None,
         layout=None, pin_memory=False):
    """A tensor filled with ``fill_value``; the dtype follows the value (bool, int64, default
    float) unless given."""
    if out is not None:
        return _into_out(out, (size,) if isinstance(size, int) else size, dtype, fill_value,
                         "full")
    dt = _full_dtype(fill_value) if dtype is None else D.to_dtype(dtype, "full")
    t = new_empty(_size(size, "full") if not isinstance(size, int) else (size,), dt, _dev(device))
    fill_(t, fill_value)
    if layout is not None:
        t = _laid_out(t, layout, "full", sparse=False)
    return _finish(t, requires_grad)


def _like(x, dtype, device, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    dt = x._dtype if dtype is None else D.to_dtype(dtype, op)
    dev = x.device if device is None else _dev(device)
    return dt, dev


def _formatted(t, like, memory_format, op):
    """``t`` in an explicitly given ``memory_format`` (preserve_format: the format of ``like``).
    Without one the result is contiguous: fiamma's kernels and internal buffers are NCHW."""
    fmt = _mf.check(memory_format, op)
    if fmt is None:
        return t
    if fmt is _mf.preserve_format:
        if like is None or like._contig:
            return t
        fmt = _mf.preserved(like)
    if fmt is _mf.contiguous_format or fmt is _mf.legacy_contiguous_format:
        return t
    return _mf.to_format(t, fmt, op)


def empty_like(input, dtype=None, device=None, requires_grad=False, memory_format=None,
               layout=None, pin_memory=False):
    dt, dev = _like(input, dtype, device, "empty_like")
    out = new_empty(input._shape, dt, dev)
    t = _formatted(out, input, memory_format, "empty_like")
    if layout is not None:
        t = _laid_out(t, layout, "empty_like")
    return _finish(t, requires_grad)


def zeros_like(input, dtype=None, device=None, requires_grad=False, memory_format=None,
               layout=None, pin_memory=False):
    dt, dev = _like(input, dtype, device, "zeros_like")
    out = new_empty(input._shape, dt, dev, zero=True)
    t = _formatted(out, input, memory_format, "zeros_like")
    if layout is not None:
        t = _laid_out(t, layout, "zeros_like")
    return _finish(t, requires_grad)


def ones_like(input, dtype=None, device=None, requires_grad=False, memory_format=None,
              layout=None, pin_memory=False):
    dt, dev = _like(input, dtype, device, "ones_like")
    out = fill_(new_empty(input._shape, dt, dev), 1)
    t = _formatted(out, input, memory_format, "ones_like")
    if layout is not None:
        t = _laid_out(t, layout, "ones_like", sparse=False)
    return _finish(t, requires_grad)


def full_like(input, fill_value, dtype=None, device=None, requires_grad=False,
              memory_format=None, layout=None, pin_memory=False):
    dt, dev = _like(input, dtype, device, "full_like")
    out = fill_(new_empty(input._shape, dt, dev), fill_value)
    t = _formatted(out, input, memory_format, "full_like")
    if layout is not None:
        t = _laid_out(t, layout, "full_like", sparse=False)
    return _finish(t, requires_grad)


def empty_strided(size, stride, dtype=None, device=None, requires_grad=False):
    dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype, "empty_strided")
    size = _size(size, "empty_strided")
    stride = tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"empty_strided: {len(size)} sizes but {len(stride)} strides")
    extent = 1 + builtins.sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else 0
    base = new_empty((extent,), dt, _dev(device))
    return _finish(base.as_strided(size, stride, 0), requires_grad)


# ---- ranges ----------------------------------------------------------------------------------

def _number(x, op, name):
    """A Python int/float from a number, a NumPy scalar or a one-element tensor."""
    if isinstance(x, builtins.bool):
        return builtins.int(x)
    if isinstance(x, (builtins.int, builtins.float)):
        return x
    if isinstance(x, Tensor):
        if x._numel != 1:
            raise RuntimeError(f"{op}: {name} must be a number or a one-element tensor, got a "
                               f"tensor of shape {list(x._shape)}")
        v = x.item()
        return builtins.int(v) if isinstance(v, builtins.bool) else v
    if isinstance(x, np.generic) and x.dtype.kind in "biuf":
        v = x.item()
        return builtins.int(v) if isinstance(v, builtins.bool) else v
    try:
        return operator.index(x)
    except TypeError:
        pass
    raise TypeError(f"{op}: {name} must be a number, got {type(x).__name__}")


def _range_dtype(dtype, out, floating, op):
    if dtype is not None:
        dt = D.to_dtype(dtype, op)
    elif out is not None and isinstance(out, Tensor):
        dt = out._dtype
    else:
        dt = D.get_default_dtype() if floating else D.int64
    if dt is D.bool:
        raise TypeError(f"{op}: not implemented for dtype {dt}")
    return dt


def _emit(n, dt, device, out, requires_grad, op, fill):
    """A 1-d result of n elements made by ``fill(contiguous_tensor)`` (or written into out)."""
    if out is not None:
        check_out(out, (n,), dt, op)
        if out._contig and out._dtype is dt:
            if n:
                fill(out)
        else:
            tmp = new_empty((n,), dt)
            if n:
                fill(tmp)
                out.copy_(tmp)
        out._bump()
        return _finish(out, requires_grad)
    t = new_empty((n,), dt, _dev(device))
    if n:
        fill(t)
    return _finish(t, requires_grad)


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def arange(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,
           requires_grad=False, pin_memory=False):
    """Values from ``start`` (inclusive) to ``end`` (exclusive) spaced by ``step``.

    The result is int64 when start, end and step are all integers, else the default float
    dtype; it has ``ceil((end - start) / step)`` elements. An integer ``dtype`` truncates the
    arguments to integers first.

    >>> import fiamma
    >>> fiamma.arange(5).tolist()
    [0, 1, 2, 3, 4]
    >>> fiamma.arange(1, 2.5, 0.5).tolist()
    [1.0, 1.5, 2.0]
    """
    return _arange(start, end, step, out, dtype, device, requires_grad, False)


def arange_or_empty(start, end, step=1, dtype=None, device=None):
    """``arange`` for the array API: a range whose bounds disagree with the step's sign
    (``arange(0, -1)``, ``arange(5, 0)``) is empty, as in NumPy and the array API standard,
    where ``fiamma.arange`` raises as PyTorch does.

    >>> import fiamma
    >>> from fiamma._creation import arange_or_empty
    >>> arange_or_empty(5, 0).shape, arange_or_empty(5, 0, -2).tolist()
    (fiamma.Size([0]), [5, 3, 1])
    """
    return _arange(start, end, step, None, dtype, device, False, True)


def _arange(start, end, step, out, dtype, device, requires_grad, empty_ok):
    op = "arange"
    if end is None:
        start, end = 0, start
    if any(isinstance(v, builtins.complex) for v in (start, end, step)) or (
            dtype is not None and D.to_dtype(dtype, op)._kind == 3):
        raise TypeError(f"{op}: not implemented for complex numbers or dtypes (as in PyTorch; "
                        "use linspace, which takes them)")
    if (type(start) is builtins.int and type(end) is builtins.int and step == 1
            and type(step) is builtins.int and dtype is None and out is None
            and device is None and not requires_grad and _I64_MIN <= start <= end <= _I64_MAX
            and _DEFAULT_DEVICE.dev is None):
        n = end - start  # the common arange(n) / arange(a, b)
        t = new_empty((n,), D.int64)
        if n:
            t._storage.backend.arange(t, 0.0, 0.0, start, 1)
        return t
    s = _number(start, op, "start")
    e = _number(end, op, "end")
    st = _number(step, op, "step")
    floating = any(isinstance(v, builtins.float) for v in (s, e, st))
    dt = _range_dtype(dtype, out, floating, op)
    for v in (s, e, st):
        if isinstance(v, builtins.float) and not math.isfinite(v):
            raise RuntimeError(f"{op}: unsupported range: {s} -> {e} (step {st})")
    if dt._kind == 2:
        fs, fe, fst = builtins.float(s), builtins.float(e), builtins.float(st)
        if fst == 0:
            raise RuntimeError(f"{op}: step must be nonzero")
        if (fst > 0 and fe < fs) or (fst < 0 and fe > fs):
            if not empty_ok:
                raise RuntimeError(f"{op}: upper bound and lower bound inconsistent with step "
                                   f"sign (start={s}, end={e}, step={st})")
            fe = fs
        q = (fe - fs) / fst
        if not q <= (1 << 62):
            raise RuntimeError(f"{op}: invalid size {q}, possible overflow")
        n = math.ceil(q)
        def fill(t):
            return check(t._storage.backend.arange(t, fs, fst, 0, 0), op)
    else:
        s, e, st = builtins.int(s), builtins.int(e), builtins.int(st)
        if st == 0:
            raise RuntimeError(f"{op}: step must be nonzero (after truncation to an integer "
                               f"for dtype {dt})" if floating else f"{op}: step must be nonzero")
        if (st > 0 and e < s) or (st < 0 and e > s):
            if not empty_ok:
                raise RuntimeError(f"{op}: upper bound and lower bound inconsistent with step "
                                   f"sign (start={s}, end={e}, step={st})")
            e = s
        for name, v in (("start", s), ("end", e), ("step", st)):
            if not _I64_MIN <= v <= _I64_MAX:
                raise RuntimeError(f"{op}: {name}={v} is out of the int64 range")
        n = -((s - e) // st)
        if n > (1 << 62):
            raise RuntimeError(f"{op}: invalid size {n}, possible overflow")
        def fill(t):
            return check(t._storage.backend.arange(t, 0.0, 0.0, s, st), op)
    return _emit(n, dt, device, out, requires_grad, op, fill)


def range(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,
          requires_grad=False):
    """Deprecated (as in PyTorch): like ``arange`` but ``end`` is included and the dtype is the
    default float dtype unless given. Use ``arange``."""
    op = "range"
    warnings.warn("fiamma.range is deprecated and will be removed in a future release because "
                  "its behavior is inconsistent with Python's range builtin. Instead, use "
                  "fiamma.arange, which produces values in [start, end).", UserWarning,
                  stacklevel=2)
    if end is None:
        start, end = 0, start
    s = builtins.float(_number(start, op, "start"))
    e = builtins.float(_number(end, op, "end"))
    st = builtins.float(_number(step, op, "step"))
    dt = _range_dtype(dtype, out, True, op)
    if not (math.isfinite(s) and math.isfinite(e) and math.isfinite(st)):
        raise RuntimeError(f"{op}: unsupported range: {s} -> {e} (step {st})")
    if dt._kind < 2:  # an integer dtype truncates the arguments first (as PyTorch's range)
        s, e, st = builtins.float(int(s)), builtins.float(int(e)), builtins.float(int(st))
    if st == 0:
        raise RuntimeError(f"{op}: step must be nonzero")
    if (st > 0 and e < s) or (st < 0 and e > s):
        raise RuntimeError(f"{op}: upper bound and lower bound inconsistent with step sign "
                           f"(start={s}, end={e}, step={st})")
    q = (e - s) / st
    if not q <= (1 << 62):
        raise RuntimeError(f"{op}: invalid size {q}, possible overflow")
    n = math.floor(q) + 1
    if dt._kind == 2:
        def fill(t):
            return check(t._storage.backend.arange(t, s, st, 0, 0), op)
    else:
        def fill(t):
            return check(t._storage.backend.arange(t, 0.0, 0.0, builtins.int(s),
                                                   builtins.int(st)), op)
    return _emit(n, dt, device, out, requires_grad, op, fill)


def _steps(steps, op):
    try:
        n = operator.index(steps)
    except TypeError:
        raise TypeError(f"{op}: steps must be an int, got {type(steps).__name__}") from None
    if n < 0:
        raise RuntimeError(f"{op}: number of steps must be non-negative, got {n}")
    return n


def _complex_number(x, op, name):
    """A Python complex from a complex number, NumPy complex scalar or one-element complex
    tensor; None for real values."""
    if isinstance(x, builtins.complex):
        return x
    if isinstance(x, np.generic) and x.dtype.kind == "c":
        return builtins.complex(x.item())
    if isinstance(x, Tensor) and x._dtype._kind == 3:
        if x._numel != 1:
            raise RuntimeError(f"{op}: {name} must be a number or a one-element tensor, got a "
                               f"tensor of shape {list(x._shape)}")
        return builtins.complex(x.item())
    return None


_PY_REAL = (builtins.int, builtins.float)


def _plain_reals(start, end, dtype, out):
    """The common call: Python int/float ends, no dtype or out (no complex result possible)."""
    return type(start) in _PY_REAL and type(end) in _PY_REAL and dtype is None and out is None


def _complex_space(op, values, dtype, out):
    """(start, end, complex dtype) when linspace/logspace must build complex values (a complex
    argument or a complex dtype, as PyTorch), else None."""
    cs = [_complex_number(v, op, n) for v, n in zip(values, ("start", "end", "base"))]
    dt = None
    if dtype is not None:
        dt = D.to_dtype(dtype, op)
    elif out is not None and isinstance(out, Tensor):
        dt = out._dtype
    if all(c is None for c in cs) and (dt is None or dt._kind != 3):
        return None
    if dt is None:
        dt = D.get_default_dtype().to_complex
    elif dt._kind != 3:
        raise RuntimeError(f"{op}: complex start/end/base need a complex dtype, got {dt}")
    s = cs[0] if cs[0] is not None else builtins.complex(_number(values[0], op, "start"))
    e = cs[1] if cs[1] is not None else builtins.complex(_number(values[1], op, "end"))
    return s, e, dt


def _complex_emit(re, im, n, dt, device, out, requires_grad, op):
    from fiamma._ops.complex_ops import imag_, real_

    def fill(t):
        real_(t).copy_(re)
        imag_(t).copy_(im)

    return _emit(n, dt, device, out, requires_grad, op, fill)


def _space_args(start, end, dt, op):
    s = builtins.float(_number(start, op, "start"))
    e = builtins.float(_number(end, op, "end"))
    if dt._kind == 1:
        info = np.iinfo(dt._np)
        # PyTorch's checked conversion: unsigned types also take negatives down to -max (wrapping)
        lo = -builtins.int(info.max) if info.min == 0 else builtins.int(info.min)
        for name, v in (("start", s), ("end", e)):
            if not (math.isfinite(v) and lo <= math.trunc(v) <= info.max):
                raise RuntimeError(f"{op}: {name}={v} cannot be converted to type {dt} without "
                                   "overflow")
    return s, e


def linspace(start, end, steps, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False):
    """``steps`` values evenly spaced from ``start`` to ``end`` inclusive (default float dtype).

    The first half is ``start + i*step`` and the second ``end - (steps-1-i)*step``, so both ends
    are exact. An integer ``dtype`` truncates start, end and every value toward zero.

    >>> import fiamma
    >>> fiamma.linspace(0, 1, 5).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    op = "linspace"
    n = _steps(steps, op)
    cx = None if _plain_reals(start, end, dtype, out) else \
        _complex_space(op, (start, end), dtype, out)
    if cx is not None:
        re = linspace(cx[0].real, cx[1].real, n, dtype=cx[2].to_real)
        im = linspace(cx[0].imag, cx[1].imag, n, dtype=cx[2].to_real)
        return _complex_emit(re, im, n, cx[2], device, out, requires_grad, op)
    dt = _range_dtype(dtype, out, True, op)
    s, e = _space_args(start, end, dt, op)
    return _emit(n, dt, device, out, requires_grad, op,
                 lambda t: check(t._storage.backend.linspace(t, s, e), op))


def logspace(start, end, steps, base=10.0, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False):
    """``base ** linspace(start, end, steps)`` (default float dtype).

    >>> import fiamma
    >>> fiamma.logspace(0, 3, 4, base=2).tolist()
    [1.0, 2.0, 4.0, 8.0]
    """
    op = "logspace"
    n = _steps(steps, op)
    cx = None if _plain_reals(start, end, dtype, out) and type(base) in _PY_REAL else \
        _complex_space(op, (start, end, base), dtype, out)
    if cx is not None:  # base ** z = exp(z log(base)) on the complex linspace
        z = linspace(cx[0], cx[1], n, dtype=cx[2])
        b = _complex_number(base, op, "base")
        b = builtins.complex(_number(base, op, "base")) if b is None else b
        v = (z * (cmath.log(b) if b != 0 else -math.inf)).exp() if n else z
        return _complex_emit(v.real, v.imag, n, cx[2], device, out, requires_grad, op)
    dt = _range_dtype(dtype, out, True, op)
    s = builtins.float(_number(start, op, "start"))
    e = builtins.float(_number(end, op, "end"))
    b = builtins.float(_number(base, op, "base"))
    if dt._kind < 2 and math.isfinite(s) and math.isfinite(e):
        s, e = builtins.float(int(s)), builtins.float(int(e))  # as PyTorch (and linspace)
    return _emit(n, dt, device, out, requires_grad, op,
                 lambda t: check(t._storage.backend.logspace(t, s, e, b), op))


def eye(n, m=None, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """A 2-d tensor with ones on the diagonal and zeros elsewhere (n rows, m columns).

    >>> import fiamma
    >>> fiamma.eye(2, 3).tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    op = "eye"
    try:
        n = operator.index(n)
        m = n if m is None else operator.index(m)
    except TypeError:
        raise TypeError(f"{op}: n and m must be ints, got {n!r}, {m!r}") from None
    if n < 0:
        raise RuntimeError(f"{op}: n must be greater or equal to 0, got {n}")
    if m < 0:
        raise RuntimeError(f"{op}: m must be greater or equal to 0, got {m}")
    dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype, op)
    if out is not None:
        check_out(out, (n, m), out._dtype if dtype is None else dt, op)
        t = out
        fill_(t, 0)
        t._bump()
    else:
        t = new_empty((n, m), dt, _dev(device), zero=True)
    k = builtins.min(n, m)
    if k:
        d = t
        if t._dtype._kind == 3:  # the real parts of the diagonal (a real view of t)
            from fiamma._ops.complex_ops import real_

            d = real_(t)
        check(t._storage.backend.fill_region((k,), d, 0, (d._stride[0] + d._stride[1],), 1.0,
                                             1, 1), op)
    return _finish(t, requires_grad)


def _tensor_new(cls, *args, **kwargs):
    """``Tensor(*sizes)`` / ``Tensor(data)`` (``Tensor.__new__``): a default-dtype tensor."""
    t = _legacy_tensor_new(*args, **kwargs)
    if cls is not Tensor:
        t = t._as_subclass(cls)
    return t


def _legacy_tensor_new(*args, dtype=None, device=None, requires_grad=False):
    """fiamma.Tensor(2, 3) -> uninitialised; fiamma.Tensor([1, 2]) -> data (default dtype)."""
    dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype, "Tensor")
    if not args:
        return empty(0, dtype=dt, device=device)
    if len(args) == 1 and not isinstance(args[0], builtins.int):
        a = args[0]
        if isinstance(a, Tensor):
            return a.detach()
        return tensor(a, dtype=dt, device=device)
    return empty(*args, dtype=dt, device=device)


_FILL_NUMBERS = (builtins.float, builtins.int, builtins.bool)


def _fill_method(self, value):
    if type(value) not in _FILL_NUMBERS:
        if isinstance(value, Tensor):
            if value._shape:
                raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got "
                                   f"tensor with {len(value._shape)} dimensions.")
        elif not isinstance(value, (builtins.float, builtins.int, builtins.complex, np.number,
                                    np.bool_)):
            raise TypeError(f"fill_: value must be a number or a 0-dimension tensor, got "
                            f"{type(value).__name__}")
    if self.requires_grad:
        G.check_inplace(self, "fill_")
    fill_(self, value)
    self._bump()
    if self.requires_grad or getattr(value, "requires_grad", False):
        G.record_inplace(ops.fill_, self, (self, value), {})
    return self


def _zero_method(self):
    return _fill_method(self, 0)


# Tensor methods of this module: attached by fiamma._methods (the one place that does)
METHODS = {"fill_": _fill_method, "zero_": _zero_method, "__new__": staticmethod(_tensor_new)}
