"""CPU primitives of the sort family: sort, topk, selection (kth value, median, mode), cumulative
extremes, searchsorted and the row grouping behind unique (contract.Backend documents each).
Optional operands (None) are not written or not read."""

from fiamma._backend.codes import ERR_INDEX
from fiamma._lib import ffi, lib

__all__ = ["sort", "topk", "select", "cumext", "searchsorted", "unique_runs", "sort_rows"]

_NULL = ffi.NULL


def _p(t):
    return 0 if t is None else t._ptr


def sort(shape, x, sx, dim, descending, values, sv, indices, si):
    return lib.fm_sort(x._dtype.code, len(shape), shape, x._ptr, sx, dim, descending, _p(values),
                       sv, _p(indices), si)


def topk(shape, x, sx, dim, k, largest, values, sv, indices, si):
    return lib.fm_topk(x._dtype.code, len(shape), shape, x._ptr, sx, dim, k, largest,
                       values._ptr, sv, indices._ptr, si)


def select(mode, shape, x, sx, dim, k, values, sv, indices, si):
    return lib.fm_select(mode, x._dtype.code, len(shape), shape, x._ptr, sx, dim, k, values._ptr,
                         sv, _p(indices), _NULL if si is None else si)


def cumext(ismin, shape, x, sx, dim, values, sv, indices, si):
    return lib.fm_cumext(ismin, x._dtype.code, len(shape), shape, x._ptr, sx, dim, values._ptr,
                         sv, indices._ptr, si)


def searchsorted(nlanes, nseq, seq, seq_ls, sorter, sorter_ls, nval, vals, val_ls, right, out,
                 bad):
    buf = ffi.new("int64_t *")
    rc = lib.fm_searchsorted(seq._dtype.code, nlanes, nseq, seq._ptr, seq_ls, _p(sorter),
                             sorter_ls, nval, vals._ptr, val_ls, right,
                             1 if out._dtype.itemsize == 4 else 0, out._ptr, buf)
    if rc == ERR_INDEX and bad is not None:
        bad[:] = [buf[0]]
    return rc


def unique_runs(n, m, data, order, origpos, first, inverse, counts):
    """(status, the number of groups)."""
    ng = ffi.new("int64_t *")
    rc = lib.fm_unique_runs(data._dtype.code, n, m, data._ptr, _p(order), _p(origpos),
                            first._ptr, _p(inverse), _p(counts), ng)
    return rc, ng[0]


def sort_rows(n, m, data, perm):
    return lib.fm_sort_rows(data._dtype.code, n, m, data._ptr, perm._ptr)
