"""CPU primitives of the elementwise family: unary, binary and ternary kernels over strided,
broadcast operands (contract.Backend documents each). A contiguous case goes to the C library's
contiguous kernel (no per-element index arithmetic)."""

from fiamma._lib import ffi, lib

__all__ = ["binary_out_dtype", "unary_out_dtype", "ternary_out_dtype", "binary", "unary",
           "unary_contig", "ternary", "special_unary", "special_binary"]

binary_out_dtype = lib.fm_binary_out_dtype
unary_out_dtype = lib.fm_unary_out_dtype
ternary_out_dtype = lib.fm_ternary_out_dtype
_binary = lib.fm_binary
_binary_contig = lib.fm_binary_contig
_binary_scalar_contig = lib.fm_binary_scalar_contig
_unary = lib.fm_unary
_unary_contig = lib.fm_unary_contig
_ternary = lib.fm_ternary
_NULL = ffi.NULL
_NO_PARAMS = (0.0, 0.0, 0.0)

# shapes and strides as C arrays, converted once: cffi converts a tuple argument element by
# element into a temporary array at every call (~85 ns for a short one; a lookup here ~30 ns)
_ARRAYS = {}
_new_array = ffi.new


def _array(t):
    if len(_ARRAYS) >= 4096:
        _ARRAYS.clear()
    a = _ARRAYS[t] = _new_array("int64_t[]", t)
    return a


_arr = _ARRAYS.get


def binary(op, shape, out, a, sa, b, sb, params=None):
    """The one binary primitive over fm_binary (a number operand, whose strides are None, is
    address 0 and the (double, int64) pair), or its contiguous specialisations
    (fm_binary_contig, fm_binary_scalar_contig) when every operand runs flat over ``shape`` and
    there are no parameters."""
    if sa is not None and sb is not None:  # two tensors
        if params is None and a._shape == shape == b._shape and out._contig and a._contig and \
                b._contig:
            return _binary_contig(op, a._dtype.code, out._numel, out._ptr, a._ptr, b._ptr)
        p0, p1, p2 = params or _NO_PARAMS
        so = out._stride
        return _binary(op, a._dtype.code, len(shape), _arr(shape) or _array(shape), out._ptr,
                       _arr(so) or _array(so), a._ptr, _arr(sa) or _array(sa), b._ptr,
                       _arr(sb) or _array(sb), 0.0, 0, p0, p1, p2)
    if sb is None:
        t, pa, pb, s = a, a._ptr, 0, b
    else:
        t, pa, pb, s = b, 0, b._ptr, a
    sf, si = (s, 0) if type(s) is float else (0.0, s)
    if t._contig and out._contig and t._shape == shape and params is None:
        return _binary_scalar_contig(op, t._dtype.code, out._numel, out._ptr, pa, pb, sf, si)
    p0, p1, p2 = params or _NO_PARAMS
    so = out._stride
    st = sa if sb is None else sb
    st = _arr(st) or _array(st)
    return _binary(op, t._dtype.code, len(shape), _arr(shape) or _array(shape), out._ptr,
                   _arr(so) or _array(so), pa, _NULL if sa is None else st, pb,
                   _NULL if sb is None else st, sf, si, p0, p1, p2)


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
