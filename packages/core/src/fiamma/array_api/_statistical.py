"""Statistical and utility functions of the array API standard (reductions with ``axis`` /
``keepdims``, where ``axis=()`` reduces over nothing, unlike PyTorch's ``dim=()``)."""

import builtins
import operator

import fiamma
from fiamma.array_api._dtypes import UNSIGNED, binary, check_array, int64

__all__ = ["cumulative_prod", "cumulative_sum", "max", "mean", "min", "prod", "std", "sum",
           "var", "all", "any", "diff"]


def norm_axes(axis, ndim, op):
    """``axis`` as a sorted tuple of non-negative axes (all axes for None)."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
    out = []
    for a in axes:
        a = operator.index(a)
        if not (-ndim <= a < builtins.max(ndim, 1)):
            raise IndexError(f"{op}: axis {a} is out of range for an array of {ndim} "
                             "dimensions")
        out.append(a % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {axis}")
    return tuple(sorted(out))


def _reduce(op, name, x, axis, keepdims, **kw):
    check_array(x, name)
    axes = norm_axes(axis, x.ndim, name)
    if x.ndim == 0:
        return op(x.reshape(1), dim=(0,), keepdim=False, **kw)
    if not axes:
        return None
    return op(x, dim=axes, keepdim=keepdims, **kw)


def accumulation_dtype(x, dtype):
    """The standard's result dtype of sum/prod/cumulative_*: the default integer dtype (or
    the unsigned one of its width) for narrower integers and bools, x's dtype otherwise."""
    if dtype is not None:
        return dtype
    d = x._dtype
    if d._kind >= 2:
        return d
    if d in UNSIGNED:
        return getattr(fiamma, "uint64", int64)
    return int64


def sum(x, /, *, axis=None, dtype=None, keepdims=False):
    """The sum over ``axis`` (all axes when None).

    >>> import fiamma.array_api as xp
    >>> xp.sum(xp.asarray([[1, 2], [3, 4]], dtype=xp.int8), axis=0).tolist()
    [4, 6]
    """
    dt = accumulation_dtype(check_array(x, "sum"), dtype)
    r = _reduce(fiamma.sum, "sum", x, axis, keepdims, dtype=dt)
    return x.to(dt, copy=True) if r is None else r


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    """The product over ``axis`` (all axes when None).

    >>> import fiamma.array_api as xp
    >>> xp.prod(xp.asarray([[1, 2], [3, 4]]), axis=(0, 1)).item()
    24
    """
    dt = accumulation_dtype(check_array(x, "prod"), dtype)
    axes = norm_axes(axis, x.ndim, "prod")
    r = x.to(dt, copy=True)
    if x.ndim == 0:
        return r
    for a in reversed(axes):  # one axis at a time, from the last
        r = fiamma.prod(r, dim=a, keepdim=keepdims, dtype=dt)
    return r


def _minmax(op, name):
    def f(x, /, *, axis=None, keepdims=False):
        check_array(x, name)
        if x._dtype._kind == 3:
            raise TypeError(f"{name}: complex arrays have no order")
        if x.numel() == 0 and (axis is None or x.ndim == 0):
            raise ValueError(f"{name}: zero-size array has no {name}imum")
        r = _reduce(op, name, x, axis, keepdims)
        return x.clone() if r is None else r

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"The {name}imum over ``axis`` (all axes when None); NaN propagates.\n\n"
                 f"    >>> import fiamma.array_api as xp\n"
                 f"    >>> xp.{name}(xp.asarray([3, 1, 2])).item() in (1, 3)\n    True\n")
    return f


max = _minmax(fiamma.amax, "max")
min = _minmax(fiamma.amin, "min")


def mean(x, /, *, axis=None, keepdims=False):
    """The arithmetic mean over ``axis`` (floating arrays)."""
    check_array(x, "mean")
    r = _reduce(fiamma.mean, "mean", x, axis, keepdims)
    return x.clone() if r is None else r


def _moment(op, name):
    def f(x, /, *, axis=None, correction=0.0, keepdims=False):
        check_array(x, name)
        r = _reduce(op, name, x, axis, keepdims, correction=correction)
        if r is None:  # over no axes: one element each, N - correction degrees of freedom
            v = fiamma.abs(x - x) ** 2 / builtins.max(1.0 - correction, 0.0)
            return fiamma.sqrt(v) if name == "std" else v
        return r

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"The {'standard deviation' if name == 'std' else 'variance'} over ``axis`` "
                 f"with ``correction`` (0: population, 1: Bessel's).\n\n"
                 f"    >>> import fiamma.array_api as xp\n"
                 f"    >>> xp.{name}(xp.asarray([1.0, 1.0])).item()\n    0.0\n")
    return f


std = _moment(fiamma.std, "std")
var = _moment(fiamma.var, "var")


def _cumulative(op, name, identity):
    def f(x, /, *, axis=None, dtype=None, include_initial=False):
        check_array(x, name)
        if axis is None:
            if x.ndim > 1:
                raise ValueError(f"{name}: axis is required for arrays of more than one "
                                 "dimension")
            if x.ndim == 0:
                x = x.reshape(1)
            axis = 0
        nd = x.ndim
        if not -nd <= axis < nd:
            raise IndexError(f"{name}: axis {axis} is out of range for {nd} dimensions")
        axis %= nd
        dt = accumulation_dtype(x, dtype)
        out = op(x.to(dt), axis) if x.shape[axis] else x.to(dt, copy=True)
        if include_initial:
            shape = list(x.shape)
            shape[axis] = 1
            out = fiamma.cat([fiamma.full(shape, identity, dtype=dt, device=x.device), out],
                             dim=axis)
        return out

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"The running {'sum' if identity == 0 else 'product'} along ``axis`` (may be "
                 f"None for 1-D arrays); ``include_initial`` prepends the identity.\n\n"
                 f"    >>> import fiamma.array_api as xp\n"
                 f"    >>> tuple(xp.{name}(xp.asarray([1, 2, 3]), include_initial=True).shape)\n"
                 f"    (4,)\n")
    return f


cumulative_sum = _cumulative(fiamma.cumsum, "cumulative_sum", 0)
cumulative_prod = _cumulative(fiamma.cumprod, "cumulative_prod", 1)


def _logical(op, name):
    def f(x, /, *, axis=None, keepdims=False):
        check_array(x, name)
        r = _reduce(op, name, x, axis, keepdims)
        return (x != 0) if r is None else r

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"Whether {'every' if name == 'all' else 'any'} element over ``axis`` is "
                 f"nonzero (a bool array).\n\n"
                 f"    >>> import fiamma.array_api as xp\n"
                 f"    >>> bool(xp.{name}(xp.asarray([0, 1])))\n    {name == 'any'}\n")
    return f


all = _logical(fiamma.all, "all")
any = _logical(fiamma.any, "any")


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    """The ``n``-th forward difference along ``axis`` (``prepend``/``append`` joined first).

    >>> import fiamma.array_api as xp
    >>> xp.diff(xp.asarray([1, 4, 9])).tolist()
    [3, 5]
    """
    check_array(x, "diff")
    if n < 0:
        raise ValueError(f"diff: n must be non-negative, got {n}")
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        d = parts[0]._dtype
        for p in parts[1:]:
            d = binary(fiamma.empty(0, dtype=d), p, "diff")[0]._dtype
        x = fiamma.cat([p.to(d) for p in parts], dim=axis)
    for _ in range(n):
        if x.shape[axis] == 0:
            break
        x = fiamma.diff(x, dim=axis) if x._dtype is not fiamma.bool else \
            fiamma.logical_xor(x.narrow(axis, 1, x.shape[axis] - 1),
                               x.narrow(axis, 0, x.shape[axis] - 1))
    return x
