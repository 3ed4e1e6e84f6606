"""Searching, sorting and set functions of the array API standard."""

from collections import namedtuple

import fiamma
from fiamma.array_api._dtypes import binary, check_array, int64
from fiamma.array_api._statistical import norm_axes

__all__ = ["argmax", "argmin", "count_nonzero", "nonzero", "searchsorted", "where",
           "argsort", "sort", "unique_all", "unique_counts", "unique_inverse", "unique_values"]


def _arg(op, name):
    def f(x, /, *, axis=None, keepdims=False):
        check_array(x, name)
        if x._dtype._kind == 3:
            raise TypeError(f"{name}: complex arrays have no order")
        if axis is None:
            if x.numel() == 0:
                raise ValueError(f"{name}: zero-size array")
            r = op(x.reshape(-1), 0)
            return r.reshape((1,) * x.ndim) if keepdims else r
        if x.ndim == 0:
            norm_axes(axis, 0, name)
            return fiamma.zeros((), dtype=int64, device=x.device)
        return op(x, axis, keepdims)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"The index of the first {name[3:]}imum along ``axis`` (of the flattened "
                 f"array when None).\n\n"
                 f"    >>> import fiamma.array_api as xp\n"
                 f"    >>> xp.{name}(xp.asarray([[1, 5], [7, 0]]), axis=1).ndim\n    1\n")
    return f


argmax = _arg(fiamma.argmax, "argmax")
argmin = _arg(fiamma.argmin, "argmin")


def count_nonzero(x, /, *, axis=None, keepdims=False):
    """The number of nonzero elements over ``axis`` (default integer dtype).

    >>> import fiamma.array_api as xp
    >>> xp.count_nonzero(xp.asarray([0, 3, 0, 1])).item()
    2
    """
    check_array(x, "count_nonzero")
    axes = norm_axes(axis, x.ndim, "count_nonzero")
    nz = (x != 0).to(int64)
    if x.ndim == 0:
        return nz
    if not axes:
        return nz
    return fiamma.sum(nz, dim=axes, keepdim=keepdims)


def nonzero(x, /):
    """A tuple of index arrays, one per axis, of the nonzero elements (row-major order).

    >>> import fiamma.array_api as xp
    >>> [i.tolist() for i in xp.nonzero(xp.asarray([[0, 1], [2, 0]]))]
    [[0, 1], [1, 0]]
    """
    check_array(x, "nonzero")
    if x.ndim == 0:
        raise ValueError("nonzero: zero-dimensional arrays are not allowed (the array API "
                         "standard); reshape to 1-D first")
    return tuple(fiamma.nonzero(x, as_tuple=True))


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """Indices where the elements of ``x2`` would be inserted into the sorted 1-D ``x1``.

    >>> import fiamma.array_api as xp
    >>> xp.searchsorted(xp.asarray([1, 3, 5]), xp.asarray([3, 6]), side="right").tolist()
    [2, 3]
    """
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    check_array(x1, "searchsorted")
    if x1.ndim != 1:
        raise ValueError(f"searchsorted: x1 must be 1-D, got {x1.ndim} dimensions")
    a, b = binary(x1, x2, "searchsorted")
    if sorter is not None:
        a = fiamma.take(a, sorter.to(int64))
    if b.ndim == 0:
        return fiamma.searchsorted(a, b.reshape(1), side=side).reshape(())
    return fiamma.searchsorted(a, b.contiguous(), side=side)


def where(condition, x1, x2, /):
    """Elements of ``x1`` where ``condition`` is true, of ``x2`` elsewhere (broadcast;
    ``x1``/``x2`` may be Python scalars).

    >>> import fiamma.array_api as xp
    >>> xp.where(xp.asarray([True, False]), xp.asarray([1, 2]), 0).tolist()
    [1, 0]
    """
    check_array(condition, "where")
    a, b = binary(x1, x2, "where")
    return fiamma.where(condition.to(fiamma.bool), a, b)


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    """Indices that sort ``x`` along ``axis`` (stable: equal elements keep their order, also
    when descending).

    >>> import fiamma.array_api as xp
    >>> xp.argsort(xp.asarray([2, 1, 2]), descending=True).tolist()
    [0, 2, 1]
    """
    check_array(x, "argsort")
    if x.ndim == 0:
        norm_axes(axis, 0, "argsort")
        return fiamma.zeros((), dtype=int64, device=x.device)
    return fiamma.argsort(x, dim=axis, descending=descending, stable=True)


def sort(x, /, *, axis=-1, descending=False, stable=True):
    """``x`` sorted along ``axis`` (an array, not a (values, indices) pair).

    >>> import fiamma.array_api as xp
    >>> xp.sort(xp.asarray([3, 1, 2])).tolist()
    [1, 2, 3]
    """
    check_array(x, "sort")
    if x.ndim == 0:
        norm_axes(axis, 0, "sort")
        return x.clone()
    return fiamma.sort(x, dim=axis, descending=descending, stable=True)[0]


UniqueAllResult = namedtuple("UniqueAllResult", "values indices inverse_indices counts")
UniqueCountsResult = namedtuple("UniqueCountsResult", "values counts")
UniqueInverseResult = namedtuple("UniqueInverseResult", "values inverse_indices")


def _stable_order(flat):
    """A stable sorting permutation of 1-D ``flat``; complex values in lexicographic (real,
    imaginary) order by two stable sorts (fiamma's sort takes real dtypes only)."""
    if flat._dtype._kind != 3:
        return fiamma.argsort(flat, stable=True)
    order = fiamma.argsort(fiamma.imag(flat).contiguous(), stable=True)
    re = fiamma.real(flat).contiguous()[order]
    return order[fiamma.argsort(re, stable=True)]


def _unique(x, op):
    """Sorted distinct values of flattened ``x`` (every NaN distinct), the index of each one's
    first occurrence, each element's position in the values, and the counts."""
    check_array(x, op)
    flat = x.reshape(-1)
    n = flat.shape[0]
    if n == 0:
        e = fiamma.empty((0,), dtype=int64, device=x.device)
        return flat.clone(), e, e.reshape(x.shape), e
    order = _stable_order(flat)
    s = flat[order]
    # a new value starts where the sorted neighbour differs; NaN != NaN keeps NaNs apart
    new = fiamma.ones((n,), dtype=fiamma.bool, device=x.device)
    if n > 1:
        new[1:] = s[1:] != s[:-1]
    group = fiamma.cumsum(new.to(int64), 0) - 1
    starts = fiamma.nonzero(new, as_tuple=True)[0]
    values = s[starts]
    first = order[starts]  # stable sort: a group's first element is its first occurrence
    ends = fiamma.cat([starts[1:], fiamma.full((1,), n, dtype=int64, device=x.device)])
    counts = ends - starts
    inverse = fiamma.empty((n,), dtype=int64, device=x.device)
    inverse[order] = group
    return values, first, inverse.reshape(x.shape), counts


def unique_all(x, /):
    """Distinct values with first indices, inverse indices (x's shape) and counts.

    >>> import fiamma.array_api as xp
    >>> r = xp.unique_all(xp.asarray([3, 1, 3]))
    >>> r.values.tolist(), r.indices.tolist(), r.inverse_indices.tolist(), r.counts.tolist()
    ([1, 3], [1, 0], [1, 0, 1], [1, 2])
    """
    return UniqueAllResult(*_unique(x, "unique_all"))


def unique_counts(x, /):
    """Distinct values and how often each occurs."""
    v, _, _, c = _unique(x, "unique_counts")
    return UniqueCountsResult(v, c)


def unique_inverse(x, /):
    """Distinct values and each element's index into them (x's shape)."""
    v, _, inv, _ = _unique(x, "unique_inverse")
    return UniqueInverseResult(v, inv)


def unique_values(x, /):
    """The distinct values, sorted (each NaN counts as distinct).

    >>> import fiamma.array_api as xp
    >>> xp.unique_values(xp.asarray([2, 1, 2])).tolist()
    [1, 2]
    """
    return _unique(x, "unique_values")[0]
