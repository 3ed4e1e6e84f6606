"""Sorting and searching with PyTorch's names and semantics.

sort / argsort / msort, topk, kthvalue, median / nanmedian, mode, unique / unique_consecutive,
searchsorted / bucketize, cummax / cummin, diff. The C kernels (csrc/sort.c) work along one
dimension of a strided tensor; NaN sorts as the largest value, ties keep the input order.
Results with indices are named tuples (``values, indices``) like ``torch.return_types``.

>>> import fiamma
>>> v, i = fiamma.tensor([3.0, 1.0, 2.0]).sort()
>>> v.tolist(), i.tolist()
([1.0, 2.0, 3.0], [1, 2, 0])
"""

import builtins
import collections
import numbers

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check, codes as K
from fiamma._ops._common import check_out
from fiamma._ops.reduce import _layout, return_types
from fiamma._tensor import Tensor, _copy_into, new_empty, wrap_dim

__all__ = [
    "argsort", "bucketize", "cummax", "cummin", "diff", "kthvalue", "median", "mode", "msort",
    "nanmedian", "searchsorted", "sort", "topk", "unique", "unique_consecutive",
]

_tuple_new = tuple.__new__

for _name in ("sort", "topk", "kthvalue", "median", "nanmedian", "mode", "cummax", "cummin"):
    setattr(return_types, _name, collections.namedtuple(_name, ["values", "indices"]))


class SortIndexError(IndexError, RuntimeError):
    """An out-of-range k or an empty dimension in a sorting op (PyTorch raises RuntimeError or
    IndexError for these; this is both)."""


def _check_tensor(x, name):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a Tensor as input, got {type(x).__name__}")
    if x._dtype._kind == 3:  # checked here for every backend (the array-module one would sort)
        raise TypeError(f"{name}: not implemented for dtype {x._dtype} (complex numbers have "
                        "no order, as in PyTorch)")


def _fail(rc, name, x, detail=""):
    if rc == K.ERR_DTYPE:
        raise TypeError(f"{name}: not implemented for dtype {x._dtype}")
    check(rc, name, detail)


def _geom(x, t):
    """(ndim, shape, in strides, out strides) with a 0-d tensor seen as one element of 1-d."""
    if x._shape:
        return len(x._shape), x._shape, x._stride, t
    return 1, (1,), (1,), (1,) if t is not None else None


def _deliver(pair, values, indices, out, name):
    """The named tuple, copied into ``out=(values, indices)`` when given."""
    if out is None:
        return _tuple_new(pair, (values, indices))
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(f"{name}: out must be a tuple of two tensors (values, indices)")
    ov, oi = out
    check_out(ov, values._shape, values._dtype, name)
    check_out(oi, indices._shape, indices._dtype, name)
    _copy_into(ov, values)
    _copy_into(oi, indices)
    return pair(ov, oi)


# ---- sort ------------------------------------------------------------------------------------

def _sort_run(x, d, descending, want_values=True):
    shape = x._shape
    dev = x._storage.device
    values = new_empty(shape, x._dtype, dev) if want_values else None
    indices = new_empty(shape, D.int64, dev)
    if x._numel:
        nd, sh, st, _ = _geom(x, None)
        ost = indices._stride if shape else (1,)
        rc = indices._storage.backend.sort(sh, x, st, d, 1 if descending else 0, values, ost,
                                           indices, ost)
        if rc:
            _fail(rc, "sort", x)
    return values, indices


def sort(input, dim=-1, descending=False, stable=False, *, out=None):
    """Sort along ``dim``: a named tuple ``(values, indices)`` with ``input.gather(dim, indices)
    == values``. The sort is always stable (``stable`` is accepted for PyTorch compatibility);
    NaN sorts as the largest value.

    >>> import fiamma
    >>> fiamma.tensor([[2, 9, 1]]).sort(descending=True).indices.tolist()
    [[1, 0, 2]]
    """
    _check_tensor(input, "sort")
    d = wrap_dim(dim, len(input._shape), "sort")
    values, indices = _sort_run(input, d, descending)
    res = _deliver(return_types.sort, values, indices, out, "sort")
    if input.requires_grad:
        G.record(ops.sort, res, (input,), {"dim": d, "descending": builtins.bool(descending),
                                         "stable": builtins.bool(stable)})
    return res


def argsort(input, dim=-1, descending=False, stable=False):
    """The indices that sort ``input`` along ``dim`` (stable; see ``sort``).

    >>> import fiamma
    >>> fiamma.tensor([3, 1, 2]).argsort().tolist()
    [1, 2, 0]
    """
    _check_tensor(input, "argsort")
    d = wrap_dim(dim, len(input._shape), "argsort")
    return _sort_run(input, d, descending, False)[1]


def _sort_values(x, d, name):
    """The sorted values alone (ascending along ``d``): long lanes of 16/32-bit dtypes take the
    vectorised quicksort, which carries no indices."""
    values = new_empty(x._shape, x._dtype, x._storage.device)
    if x._numel:
        nd, sh, st, _ = _geom(x, None)
        ost = values._stride if x._shape else (1,)
        rc = values._storage.backend.sort(sh, x, st, d, 0, values, ost, None, ost)
        if rc:
            _fail(rc, name, x)
    return values


def msort(input, *, out=None):
    """Sort along the first dimension (values only): ``sort(input, dim=0).values``, without
    computing the indices when no gradient is needed.

    >>> import fiamma
    >>> fiamma.msort(fiamma.tensor([[3, 1], [2, 5]])).tolist()
    [[2, 1], [3, 5]]
    """
    _check_tensor(input, "msort")
    if input.requires_grad:
        res = sort(input, 0).values
    else:
        res = _sort_values(input, wrap_dim(0, len(input._shape), "msort"), "msort")
    if out is not None:
        check_out(out, res._shape, res._dtype, "msort")
        _copy_into(out, res)
        return out
    return res


def _lane_out(x, d, n):
    """(shape, strides) of a result with ``n`` elements along ``d`` (contiguous)."""
    from fiamma._tensor import contiguous_strides

    shape = x._shape[:d] + (n,) + x._shape[d + 1:] if x._shape else ()
    return shape, contiguous_strides(shape)


def topk(input, k, dim=-1, largest=True, sorted=True, *, out=None):
    """The ``k`` largest (or, with ``largest=False``, smallest) elements along ``dim`` as
    ``(values, indices)``, best first (also when ``sorted=False``). NaN counts as largest.

    >>> import fiamma
    >>> fiamma.tensor([1.0, 5.0, 3.0, 4.0]).topk(2).values.tolist()
    [5.0, 4.0]
    """
    _check_tensor(input, "topk")
    nd = len(input._shape)
    d = wrap_dim(dim, nd, "topk")
    n = input._shape[d] if nd else 1
    k = int(k)
    if k < 0 or k > n:
        raise SortIndexError(f"topk(): selected index k out of range: k={k} for dimension {d} "
                             f"of size {n}")
    shape, ost = _lane_out(input, d, k)
    values = new_empty(shape, input._dtype, input._storage.device)
    indices = new_empty(shape, D.int64, input._storage.device)
    if values._numel:
        ndg, sh, st, os_ = _geom(input, ost)
        rc = values._storage.backend.topk(sh, input, st, d, k if nd else 1, 1 if largest else 0,
                                          values, os_, indices, os_)
        if rc:
            _fail(rc, "topk", input)
    res = _deliver(return_types.topk, values, indices, out, "topk")
    if input.requires_grad:
        G.record(ops.topk, res, (input,), {"k": k, "dim": d, "largest": builtins.bool(largest),
                                         "sorted": builtins.bool(sorted)})
    return res


# ---- k-th value, median, mode -----------------------------------------------------------------

def _select(mode, name, pair, input, dim, keepdim, out, k=0):
    """One (value, index) per lane along ``dim``."""
    nd = len(input._shape)
    d = wrap_dim(dim, nd, name)
    n = input._shape[d] if nd else 1
    if n == 0:
        raise SortIndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    if nd:
        oshape, so = _layout(input._shape, 1 << d, keepdim)
    else:
        oshape, so = (), (0,)
    values = new_empty(oshape, input._dtype, input._storage.device)
    indices = new_empty(oshape, D.int64, input._storage.device)
    if values._numel:
        ndg, sh, st, _ = _geom(input, None)
        rc = values._storage.backend.select(mode, sh, input, st, d, k, values, so, indices, so)
        if rc:
            _fail(rc, name, input)
    res = _deliver(pair, values, indices, out, name)
    if input.requires_grad:
        kw = {"dim": d, "keepdim": builtins.bool(keepdim)}
        if mode == K.SEL_KTH:
            kw["k"] = k + 1
        G.record(name, res, (input,), kw)
    return res


def kthvalue(input, k, dim=-1, keepdim=False, *, out=None):
    """The ``k``-th smallest element (1-based) along ``dim`` as ``(values, indices)``.

    >>> import fiamma
    >>> fiamma.tensor([4.0, 1.0, 3.0]).kthvalue(2).values.item()
    3.0
    """
    _check_tensor(input, "kthvalue")
    nd = len(input._shape)
    d = wrap_dim(dim, nd, "kthvalue")
    n = input._shape[d] if nd else 1
    k = int(k)
    if not 1 <= k <= n:
        raise SortIndexError(f"kthvalue(): selected number k out of range for dimension {d}: "
                             f"k={k}, size {n}")
    return _select(K.SEL_KTH, ops.kthvalue, return_types.kthvalue, input, d, keepdim, out,
                   k - 1)


def _median_all(mode, name, input, out):
    x = input.detach().contiguous()
    if x._numel == 0:
        if input._dtype._kind != 2:
            raise SortIndexError(f"{name}(): cannot compute the median of an empty tensor of "
                                 f"dtype {input._dtype}")
        from fiamma._creation import full

        res = full((), float("nan"), dtype=input._dtype, device=input._storage.device)
    else:
        flat = x._view((x._numel,), (1,), op=ops.view)
        res = new_empty((), input._dtype, input._storage.device)
        rc = res._storage.backend.select(mode, (x._numel,), flat, (1,), 0, 0, res, (1,), None,
                                         None)
        if rc:
            _fail(rc, name, input)
    if out is not None:
        check_out(out, res._shape, res._dtype, name)
        _copy_into(out, res)
        res = out
    if input.requires_grad:
        G.record(name, res, (input,), {"dim": None, "keepdim": False})
    return res


def median(input, dim=None, keepdim=False, *, out=None):
    """The lower median: of all elements (a 0-d tensor) when ``dim`` is None, else
    ``(values, indices)`` along ``dim``. NaN propagates (use ``nanmedian`` to skip NaNs).

    >>> import fiamma
    >>> fiamma.tensor([4, 1, 3, 2]).median().item()
    2
    """
    _check_tensor(input, "median")
    if dim is None:
        return _median_all(K.SEL_MEDIAN, ops.median, input, out)
    return _select(K.SEL_MEDIAN, ops.median, return_types.median, input, dim, keepdim, out)


def nanmedian(input, dim=None, keepdim=False, *, out=None):
    """``median`` ignoring NaNs (NaN only where every element is NaN)."""
    _check_tensor(input, "nanmedian")
    if dim is None:
        return _median_all(K.SEL_NANMEDIAN, ops.nanmedian, input, out)
    return _select(K.SEL_NANMEDIAN, ops.nanmedian, return_types.nanmedian, input, dim,
                   keepdim, out)


def mode(input, dim=-1, keepdim=False, *, out=None):
    """The most frequent value along ``dim`` (the smallest on ties) and the index of its last
    occurrence, as ``(values, indices)``.

    >>> import fiamma
    >>> fiamma.tensor([3, 1, 3, 1, 2]).mode().values.item()
    1
    """
    _check_tensor(input, "mode")
    return _select(K.SEL_MODE, ops.mode, return_types.mode, input, dim, keepdim, out)


# ---- cummax / cummin ---------------------------------------------------------------------------

def _cumext(ismin, name, pair, input, dim, out):
    _check_tensor(input, name)
    d = wrap_dim(dim, len(input._shape), name)
    values = new_empty(input._shape, input._dtype, input._storage.device)
    indices = new_empty(input._shape, D.int64, input._storage.device)
    if values._numel:
        nd, sh, st, os_ = _geom(input, values._stride)
        rc = values._storage.backend.cumext(ismin, sh, input, st, d, values, os_, indices, os_)
        if rc:
            _fail(rc, name, input)
    res = _deliver(pair, values, indices, out, name)
    if input.requires_grad:
        G.record(name, res, (input,), {"dim": d})
    return res


def cummax(input, dim, *, out=None):
    """Running maximum along ``dim`` and the index where it was reached (the last one on ties);
    NaN propagates.

    >>> import fiamma
    >>> fiamma.tensor([1, 3, 2, 5]).cummax(0).values.tolist()
    [1, 3, 3, 5]
    """
    return _cumext(0, ops.cummax, return_types.cummax, input, dim, out)


def cummin(input, dim, *, out=None):
    """Running minimum along ``dim`` (see ``cummax``)."""
    return _cumext(1, ops.cummin, return_types.cummin, input, dim, out)

# ---- searchsorted / bucketize -----------------------------------------------------------------

def _as_tensor(x, name, what):
    if isinstance(x, Tensor):
        _check_tensor(x, name)
        return x
    raise TypeError(f"{name}: {what} must be a Tensor, got {type(x).__name__}")


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None, out=None):
    """Indices where the elements of ``input`` would be inserted into ``sorted_sequence`` (sorted
    along its last dimension) to keep it sorted: the first such place, or the last with
    ``right=True`` / ``side='right'``. A 1-d sequence serves every value; an N-d one must match
    ``input`` in all but the last dimension. ``sorter`` gives the sorting order of an unsorted
    sequence. The result is int64 (int32 with ``out_int32``) shaped like ``input``.

    >>> import fiamma
    >>> fiamma.searchsorted(fiamma.tensor([1, 3, 5, 7]), fiamma.tensor([3, 6])).tolist()
    [1, 3]
    """
    name = "searchsorted"
    seq = _as_tensor(sorted_sequence, name, "sorted_sequence")
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"{name}(): side can only be 'left' or 'right' but got {side!r}")
        if right and side == "left":
            raise RuntimeError(f"{name}(): side and right can't be set to opposites, got side "
                               f"of left while right was True")
        right = side == "right"
    scalar = not isinstance(input, Tensor)
    if scalar:
        if not isinstance(input, (numbers.Number,)) or isinstance(input, complex):
            raise TypeError(f"{name}: input must be a Tensor or a real number, got "
                            f"{type(input).__name__}")
        if len(seq._shape) != 1:
            raise RuntimeError(f"{name}(): input value can be a scalar only when boundaries "
                               f"tensor dimension is 1, but we got boundaries tensor dim("
                               f"{len(seq._shape)})")
    else:
        _check_tensor(input, name)
    if len(seq._shape) == 0:
        raise RuntimeError(f"{name}(): boundaries tensor should have positive dimension, but "
                           "got 0 dimension")
    if not scalar and len(seq._shape) > 1 and (
            len(seq._shape) != len(input._shape) or seq._shape[:-1] != input._shape[:-1]):
        raise RuntimeError(f"{name}(): boundaries tensor should be 1 dimension or the first N-1 "
                           f"dimensions of boundaries tensor and input value tensor must match, "
                           f"but we got boundaries tensor {list(seq._shape)} and input value "
                           f"tensor {list(input._shape)}")
    if sorter is not None:
        sorter = _as_tensor(sorter, name, "sorter")
        if sorter._dtype is not D.int64:
            raise TypeError(f"{name}(): sorter must be a tensor of long dtype but got dtype "
                            f"{sorter._dtype}")
        if sorter._shape != seq._shape:
            raise RuntimeError(f"{name}(): boundary and sorter must have the same size, but "
                               f"got boundary tensor {list(seq._shape)} and got sorter tensor "
                               f"{list(sorter._shape)}")
    from fiamma._creation import tensor as _tensor
    from fiamma._ops._common import cast

    ct = D.result_type(seq, input)
    vals = _tensor(input, dtype=ct, device=seq._storage.device) if scalar else \
        cast(input, ct).contiguous()
    sq = cast(seq, ct).contiguous()
    odt = D.int32 if out_int32 else D.int64
    res = new_empty(vals._shape, odt, vals._storage.device)
    if res._numel:
        nseq = sq._shape[-1]
        nval = vals._shape[-1] if vals._shape else 1
        nlanes = res._numel // nval
        seq_ls = nseq if len(sq._shape) > 1 else 0
        so = sorter.contiguous() if sorter is not None else None
        bad = [0]
        rc = res._storage.backend.searchsorted(nlanes, nseq, sq, seq_ls, so, seq_ls, nval, vals,
                                               nval, 1 if right else 0, res, bad)
        if rc == K.ERR_INDEX:
            raise IndexError(f"{name}(): sorter index out of range: {bad[0]} not in "
                             f"[0, {nseq})")
        if rc:
            _fail(rc, name, sq)
    if out is not None:
        check_out(out, res._shape, res._dtype, name)
        _copy_into(out, res)
        return out
    return res


def bucketize(input, boundaries, *, out_int32=False, right=False, out=None):
    """The bucket of each element of ``input`` among the 1-d ``boundaries``: ``i`` such that
    ``boundaries[i-1] < x <= boundaries[i]`` (``right=True``: ``boundaries[i-1] <= x <
    boundaries[i]``), i.e. ``searchsorted(boundaries, input, right=right)``.

    >>> import fiamma
    >>> fiamma.bucketize(fiamma.tensor([1, 5, 9]), fiamma.tensor([1, 3, 5, 7])).tolist()
    [0, 2, 4]
    """
    b = _as_tensor(boundaries, "bucketize", "boundaries")
    if len(b._shape) != 1:
        raise RuntimeError(f"bucketize(): boundaries tensor must be 1 dimension, but got dim("
                           f"{len(b._shape)})")
    return searchsorted(b, input, out_int32=out_int32, right=right, out=out)


# ---- unique ------------------------------------------------------------------------------------

def _runs(x2d, n, m, order, origpos, want_inverse, want_counts, name):
    """Group equal consecutive rows; (first rows tensor, inverse or None, counts or None)."""
    dev = x2d._storage.device
    first = new_empty((n,), D.int64, dev)
    inverse = new_empty((n,), D.int64, dev) if want_inverse else None
    counts = new_empty((n,), D.int64, dev) if want_counts else None
    rc, g = first._storage.backend.unique_runs(n, m, x2d, order, origpos, first, inverse, counts)
    if rc:
        _fail(rc, name, x2d)
    first = first[:g]
    if counts is not None:
        counts = counts[:g].clone()
    return first, inverse, counts


def _unique_impl(input, consecutive, return_inverse, return_counts, dim, name):
    _check_tensor(input, name)
    input = input.detach()
    if dim is None:
        x = input.contiguous()
        flat = x._view((x._numel,), (1,), op=ops.view)
        n = x._numel
        order = pos = None
        if consecutive:
            data = flat
        elif return_inverse:
            data, pos = _sort_run(flat, 0, False, True)
        else:  # runs of equal values need no indices: the values-only sort
            data = _sort_values(flat, 0, name)
        first, inv, counts = _runs(data, n, 1, order, pos, return_inverse, return_counts, name)
        values = data[first]
        if inv is not None:
            inv = inv.reshape(input._shape)
    else:
        nd = len(input._shape)
        d = wrap_dim(dim, nd, name)
        if nd == 0:
            raise IndexError(f"{name}(): dim {dim} given for a 0-d tensor")
        perm = (d,) + tuple(i for i in range(nd) if i != d)
        moved = input.permute(*perm).contiguous()
        n = moved._shape[0]
        rest = moved._shape[1:]
        m = 1
        for s in rest:
            m *= s
        x2d = moved._view((n, m), (m, 1), op=ops.view)
        if consecutive or n == 0:
            order = None
        else:
            order = new_empty((n,), D.int64, x2d._storage.device)
            rc = order._storage.backend.sort_rows(n, m, x2d, order)
            if rc:
                _fail(rc, name, x2d)
        first, inv, counts = _runs(x2d, n, m, order, order, return_inverse, return_counts, name)
        rows = x2d[first]
        out_moved = rows.reshape((rows._shape[0],) + rest)
        back = [0] * nd
        for i, p in enumerate(perm):
            back[p] = i
        values = out_moved.permute(*back).contiguous()
    res = [values]
    if return_inverse:
        res.append(inv)
    if return_counts:
        res.append(counts)
    return res[0] if len(res) == 1 else tuple(res)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements of ``input`` (flattened, or the distinct slices along ``dim``) in
    ascending order; with ``return_inverse`` also the index of each input element (slice) in
    the result, with ``return_counts`` how often each occurs. NaNs are all distinct (as in
    PyTorch). The result is always sorted.

    >>> import fiamma
    >>> u, c = fiamma.tensor([3, 1, 3, 2]).unique(return_counts=True)
    >>> u.tolist(), c.tolist()
    ([1, 2, 3], [1, 1, 2])
    """
    return _unique_impl(input, False, return_inverse, return_counts, dim, "unique")


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """``unique`` of runs: only consecutive equal elements (slices along ``dim``) merge.

    >>> import fiamma
    >>> fiamma.tensor([1, 1, 2, 2, 1]).unique_consecutive().tolist()
    [1, 2, 1]
    """
    return _unique_impl(input, True, return_inverse, return_counts, dim, "unique_consecutive")


# ---- diff --------------------------------------------------------------------------------------

def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim`` (``out[i] = x[i+1] - x[i]``; bool inputs
    use ``!=``), after concatenating ``prepend`` / ``append`` along ``dim``. ``n=0``: a copy
    of ``input``, with ``prepend`` / ``append`` left out (as in PyTorch).

    >>> import fiamma
    >>> fiamma.tensor([1, 4, 9, 16]).diff().tolist()
    [3, 5, 7]
    """
    from fiamma._ops.elementwise import ne, sub
    from fiamma._ops.join import cat

    name = ops.diff
    if not isinstance(input, Tensor):  # complex allowed: a difference needs no order
        raise TypeError(f"{name}: expected a Tensor as input, got {type(input).__name__}")
    nd = len(input._shape)
    if nd == 0:
        raise RuntimeError(f"{name}(): expects input to be at least one-dimensional")
    d = wrap_dim(dim, nd, name)
    if isinstance(n, builtins.bool) or not isinstance(n, (numbers.Integral, Tensor)):
        raise TypeError(f"{name}(): argument 'n' must be int, not {type(n).__name__}")
    n = int(n)
    if n < 0:
        raise RuntimeError(f"{name}(): order must be non-negative but got {n}")
    parts = []
    for extra, what in ((prepend, "prepend"), (append, "append")):
        if extra is None:
            parts.append(None)
            continue
        if not isinstance(extra, Tensor):
            if not isinstance(extra, numbers.Number):
                raise TypeError(f"{name}(): {what} must be a Tensor, got {type(extra).__name__}")
            from fiamma._creation import full

            # a number keeps its kind (2.5 beside an integer input is not truncated)
            extra = full(input._shape[:d] + (1,) + input._shape[d + 1:], extra,
                         dtype=D.result_type(input, extra), device=input._storage.device)
        elif len(extra._shape) != nd:
            raise RuntimeError(f"{name}(): expected {what} to have the same number of dimensions "
                               f"as input ({nd}), got {len(extra._shape)}")
        parts.append(extra)
    if n == 0:  # PyTorch: a copy of the input; prepend/append are only checked, not joined
        return input.clone()
    x = input.detach()
    pieces = [p.detach() for p in (parts[0],) if p is not None] + [x] + \
        [p.detach() for p in (parts[1],) if p is not None]
    if len(pieces) > 1:
        x = cat(pieces, d)
    for _ in range(n):
        m = x._shape[d]
        if m == 0:
            break
        hi = x.narrow(d, 1, m - 1)
        lo = x.narrow(d, 0, m - 1)
        x = ne(hi, lo) if x._dtype is D.bool else sub(hi, lo)
    if input.requires_grad or builtins.any(p is not None and p.requires_grad for p in parts):
        # prepend and append are inputs too (None where absent), so they get gradients
        G.record(name, x, (input, parts[0], parts[1]), {"n": n, "dim": d})
    return x

# Tensor methods of this module: attached by fiamma._methods (the one place that does)
METHODS = {
    "sort": sort, "argsort": argsort, "msort": msort, "topk": topk, "kthvalue": kthvalue,
    "median": median, "nanmedian": nanmedian, "mode": mode, "cummax": cummax, "cummin": cummin,
    "unique": unique, "unique_consecutive": unique_consecutive, "diff": diff,
}
