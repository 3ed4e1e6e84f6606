"""CPU primitives of the index family: advanced-index gather/scatter, the dim-wise index ops,
boolean masks, nonzero, bincount and histc (contract.Backend documents each).

``bad`` arguments are a Python list (or None): on codes.ERR_INDEX the primitive stores what
the op layer needs for its message there (which index array and the value, or the value)."""

from fiamma._backend.codes import ERR_INDEX
from fiamma._lib import ffi, lib

__all__ = ["index_gather", "index_scatter", "nonzero_count", "nonzero", "masked_select",
           "masked_put", "ixop", "bincount", "histc"]

_gather = lib.fm_index_gather
_scatter = lib.fm_index_scatter
_ixop = lib.fm_ixop
_NULL = ffi.NULL


def _at(t, off):
    return t._ptr + off * t._dtype.itemsize


def index_gather(shape, out, x, xoff, sx, idx, sidx, isize, istride, bad):
    dt = x._dtype.code
    base = _at(x, xoff)
    ptrs = [t._ptr for t in idx]
    rc = _gather(dt, len(shape), shape, out._ptr, out._stride, base, sx, len(idx), ptrs, sidx,
                 isize, istride, _NULL)
    if rc == ERR_INDEX and bad is not None:
        # a gather has no side effects: run it again to learn which index was bad
        buf = ffi.new("int64_t[2]")
        rc = _gather(dt, len(shape), shape, out._ptr, out._stride, base, sx, len(idx), ptrs,
                     sidx, isize, istride, buf)
        bad[:] = [buf[0], buf[1]]
    return rc


def index_scatter(shape, dst, doff, sdst, val, sval, idx, sidx, isize, istride, accumulate,
                  bad):
    dt = dst._dtype.code
    base = _at(dst, doff)
    ptrs = [t._ptr for t in idx]
    rc = _scatter(dt, len(shape), shape, base, sdst, val._ptr, sval, len(idx), ptrs, sidx, isize,
                  istride, accumulate, _NULL)
    if rc == ERR_INDEX and bad is not None:
        # every index is checked before the first write: nothing was written, run it again
        buf = ffi.new("int64_t[2]")
        rc = _scatter(dt, len(shape), shape, base, sdst, val._ptr, sval, len(idx), ptrs, sidx,
                      isize, istride, accumulate, buf)
        bad[:] = [buf[0], buf[1]]
    return rc


def nonzero_count(shape, x, sx):
    """(status, the number of nonzero elements of the view (shape, sx) of x)."""
    cnt = ffi.new("int64_t[1]")
    rc = lib.fm_nonzero_count(x._dtype.code, len(shape), shape, x._ptr, sx, cnt)
    return rc, cnt[0]


def nonzero(x, out, srow, scol, cap):
    cnt = ffi.new("int64_t[1]")
    rc = lib.fm_nonzero(x._dtype.code, len(x._shape), x._shape, x._ptr, x._stride, out._ptr,
                        srow, scol, cap, cnt)
    return rc, cnt[0]


def masked_select(shape, out, cap, x, sx, mask, smask):
    cnt = ffi.new("int64_t[1]")
    rc = lib.fm_masked_select(x._dtype.code, len(shape), shape, out._ptr, cap, x._ptr, sx,
                              mask._ptr, smask, cnt)
    return rc, cnt[0]


def masked_put(shape, dst, sdst, mask, smask, val, nval, sval):
    return lib.fm_masked_put(dst._dtype.code, len(shape), shape, dst._ptr, sdst, mask._ptr, smask,
                             val._ptr, nval, sval, _NULL)


def ixop(mode, shape, a, sa, b, sb, idx, sidx, isize, istride, wrap, precheck, bad, init=None):
    buf = ffi.new("int64_t[1]")
    if init is None:
        rc = _ixop(mode, b._dtype.code, len(shape), shape, a._ptr, sa, b._ptr, sb, idx._ptr,
                   sidx, isize, istride, wrap, precheck, buf)
    else:  # b starts as a copy of init (same contiguous layout), made by the kernel's threads
        rc = lib.fm_ixop_init(mode, b._dtype.code, len(shape), shape, a._ptr, sa, b._ptr, sb,
                              idx._ptr, sidx, isize, istride, wrap, 0, init._ptr,
                              init._numel * init._dtype.itemsize, buf)
    if rc == ERR_INDEX and bad is not None:
        bad[:] = [buf[0]]
    return rc


def bincount(x, n, sx, w, sw, out, nbins, bad):
    buf = ffi.new("int64_t[1]")
    rc = lib.fm_bincount(x._dtype.code, n, x._ptr, sx, out._dtype.code,
                         w._ptr if w is not None else 0, sw, out._ptr, nbins, buf)
    if rc == ERR_INDEX and bad is not None:
        bad[:] = [buf[0]]
    return rc


def histc(x, bins, lo, hi, edges, out):
    """``edges``: a contiguous float64 NumPy array of the bins + 1 edges."""
    ep = ffi.cast("const double *", edges.ctypes.data)
    return lib.fm_histc(x._dtype.code, len(x._shape), x._shape, x._ptr, x._stride, bins, lo, hi,
                        ep, out._ptr)
