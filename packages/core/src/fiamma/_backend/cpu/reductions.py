"""CPU primitives of the reduction family: reductions over a set of dims, scans, softmax
(contract.Backend documents each)."""

from fiamma._lib import ffi, lib

__all__ = ["reduce_out_dtype", "scan_out_dtype", "reduce", "reduce_all", "scan", "softmax"]

reduce_out_dtype = lib.fm_reduce_out_dtype
scan_out_dtype = lib.fm_scan_out_dtype
_reduce = lib.fm_reduce
_reduce_contig = lib.fm_reduce_contig
_c_softmax = lib.fm_softmax
_c_scan = lib.fm_scan
_NULL = ffi.NULL
_ONE = (1,)


def reduce(op, x, rmask, out, sout, aux, saux, p):
    nd = len(x._shape)
    if aux is None:
        if x._contig and rmask == (1 << nd) - 1:  # all of contiguous memory
            return _reduce_contig(op, x._dtype.code, x._numel, x._ptr, out._ptr, p)
        return _reduce(op, x._dtype.code, nd, x._shape, x._ptr, x._stride, rmask, out._ptr,
                       sout, 0, _NULL, p)
    return _reduce(op, x._dtype.code, nd, x._shape, x._ptr, x._stride, rmask,
                   0 if out is None else out._ptr, sout, aux._ptr, saux, p)


def reduce_all(op, x, out):
    """reduce() of every element of the contiguous x into the 0-d out (CPU fast path)."""
    return _reduce_contig(op, x._dtype.code, x._numel, x._ptr, out._ptr, 0.0)


def _lanes(x, out):
    # a 0-d tensor is one lane of one element
    if x._shape:
        return len(x._shape), x._shape, x._stride, out._stride
    return 1, _ONE, _ONE, _ONE


def scan(op, x, out, dim):
    nd, shape, sin, sout = _lanes(x, out)
    return _c_scan(op, x._dtype.code, nd, shape, x._ptr, sin, out._ptr, sout, dim)


def softmax(log, x, out, dim):
    nd, shape, sin, sout = _lanes(x, out)
    return _c_softmax(log, x._dtype.code, nd, shape, x._ptr, sin, out._ptr, sout, dim)
