"""CPU primitives of the elementwise family: unary, binary and ternary kernels over strided,
broadcast operands (contract.Backend documents each). A contiguous case goes to the C library's
contiguous kernel (no per-element index arithmetic)."""

from fiamma._lib import ffi, lib

__all__ = ["binary_out_dtype", "unary_out_dtype", "ternary_out_dtype", "binary",
           "binary_params", "binary_scalar", "unary", "unary_contig", "ternary", "special_unary",
           "special_binary"]

binary_out_dtype = lib.fm_binary_out_dtype
unary_out_dtype = lib.fm_unary_out_dtype
ternary_out_dtype = lib.fm_ternary_out_dtype
_binary = lib.fm_binary
_binary_contig = lib.fm_binary_contig
_binary_params = lib.fm_binary_params
_binary_scalar = lib.fm_binary_scalar
_binary_scalar_contig = lib.fm_binary_scalar_contig
_unary = lib.fm_unary
_unary_contig = lib.fm_unary_contig
_ternary = lib.fm_ternary
_NULL = ffi.NULL


def binary(op, shape, out, a, sa, b, sb):
    if a._shape == shape == b._shape and out._contig and a._contig and b._contig:
        return _binary_contig(op, a._dtype.code, out._numel, out._ptr, a._ptr, b._ptr)
    return _binary(op, a._dtype.code, len(shape), shape, out._ptr, out._stride, a._ptr, sa,
                   b._ptr, sb)


def binary_params(op, shape, out, a, sa, b, sb, p0, p1, p2):
    return _binary_params(op, a._dtype.code, len(shape), shape, out._ptr, out._stride, a._ptr, sa,
                          b._ptr, sb, p0, p1, p2)


def binary_scalar(op, shape, out, a, sa, fval, ival, scalar_first):
    if out._contig and a._contig and a._shape == shape:
        return _binary_scalar_contig(op, a._dtype.code, out._numel, out._ptr, a._ptr, fval, ival,
                                     scalar_first)
    return _binary_scalar(op, a._dtype.code, len(shape), shape, out._ptr, out._stride, a._ptr,
                          sa, fval, ival, scalar_first)


def unary_contig(op, out, x):
    """unary() of a contiguous x into the contiguous out, without parameters (CPU fast
    path)."""
    return _unary_contig(op, x._dtype.code, out._numel, out._ptr, x._ptr)


def unary(op, out, x, p0, p1, p2):
    if out._contig and x._contig and not (p0 or p1 or p2):
        return _unary_contig(op, x._dtype.code, out._numel, out._ptr, x._ptr)
    return _unary(op, x._dtype.code, len(x._shape), x._shape, out._ptr, out._stride, x._ptr,
                  x._stride, p0, p1, p2)


_ONE = (1,)


def _flat(t, shape):
    return t is None or (t._contig and t._shape == shape)


def ternary(op, dtype, shape, out, a, sa, b, sb, c, sc, bf, bi, cf, ci, p0):
    if out._contig and a._contig and a._shape == shape and _flat(b, shape) and _flat(c, shape):
        # all of one contiguous shape: one flat run (strides (1,))
        shape = (out._numel,)
        so = sa = sb = sc = _ONE
    else:
        so = out._stride
    if b is None:
        pb, sb = 0, _NULL
    else:
        pb = b._ptr
    if c is None:
        pc, sc = 0, _NULL
    else:
        pc = c._ptr
    return _ternary(op, dtype.code, len(shape), shape, out._ptr, so, a._ptr, sa, pb, sb, pc, sc,
                    bf, bi, cf, ci, p0)


_special_unary = lib.fm_special_unary
_special_binary = lib.fm_special_binary


def special_unary(op, out, x, p0):
    return _special_unary(op, x._dtype.code, len(x._shape), x._shape, out._ptr, out._stride,
                          x._ptr, x._stride, p0)


def special_binary(op, shape, out, a, sa, b, sb):
    return _special_binary(op, a._dtype.code, len(shape), shape, out._ptr, out._stride, a._ptr,
                           sa, b._ptr, sb)
