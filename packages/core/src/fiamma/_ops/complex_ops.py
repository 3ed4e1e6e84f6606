"""Complex tensors (complex64, complex128): the views between complex and real layouts
(``real``/``imag``/``view_as_real``/``view_as_complex``), the complex-only functions (``conj``,
``angle``, ``polar``, ``complex``, ``sgn``) and the complex arithmetic the elementwise drivers
hand over.

A complex element is two adjacent reals (real part first, as C99, NumPy and PyTorch store it),
so a complex tensor of shape S and strides T is the real tensor of shape S + (2,) and strides
2T + (1,) over the same memory: ``view_as_real`` is that view, ``.real``/``.imag`` are its two
slices. The arithmetic runs on the tensor memory through the device's array module (NumPy for
CPU tensors, zero-copy, writing straight into the result; CuPy/NumPy for the xp devices), which
computes complex numbers with C99's semantics, as PyTorch does.

``conj`` returns a new tensor (a copy with the imaginary part negated), not a lazily conjugated
view: ``is_conj()`` is always False and ``resolve_conj()`` returns its input.

Each function here records for autograd (``_rec``) when an input requires grad; the
derivatives (PyTorch's convention: conjugate Wirtinger) live in fiamma-autograd.
"""

import builtins
import math

import numpy as np

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import codes as K
from fiamma._storage import CPU
from fiamma._tensor import Tensor, _init, new_empty

__all__ = ["view_as_real", "view_as_complex", "view_as_real_copy", "view_as_complex_copy",
           "real", "imag", "conj", "conj_physical", "conj_physical_", "resolve_conj",
           "resolve_neg", "is_conj", "is_complex", "angle", "polar", "complex", "sgn"]

_new = object.__new__


class _Holder:
    __slots__ = ("__array_interface__", "_t")

    def __init__(self, t):
        isz = t._dtype.itemsize
        self._t = t
        self.__array_interface__ = {
            "version": 3, "shape": t._shape, "typestr": t._dtype._np.str,
            "data": (t._ptr, False), "strides": tuple(s * isz for s in t._stride)}


def arr(t):
    """Tensor t's memory as an array of its dtype, shared (NumPy for a CPU tensor, the device
    backend's array module otherwise)."""
    if t._storage.device is CPU:
        return np.asarray(_Holder(t))
    return t._storage.backend.raw(t)


def xp_of(t):
    """The array module computing on tensor t's device."""
    return np if t._storage.device is CPU else t._storage.backend.xp


def _t(x, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    return x


def _rec(op, res, inputs, kwargs=None):
    """Record ``op`` for autograd when a tensor input requires grad."""
    for t in inputs:
        if isinstance(t, Tensor) and t.requires_grad:
            G.record(op, res, inputs, kwargs)
            return res
    return res


def _reinterpret(x, dt, shape, stride, offset, op):
    """A view of x's memory as dtype dt (the same storage and version counter)."""
    t = _new(Tensor)
    _init(t, x._storage, dt, tuple(shape), tuple(stride), offset, None)
    b = getattr(x, "_base", None)
    t._base = x if b is None else b
    return t


# ---- views ---------------------------------------------------------------------------------

def view_as_real(input):
    """The real view of a complex tensor: shape (..., 2) holding (real, imag), sharing memory.

    >>> import fiamma
    >>> fiamma.view_as_real(fiamma.tensor([1 + 2j])).tolist()
    [[1.0, 2.0]]
    """
    x = _t(input, "view_as_real")
    if x._dtype._kind != 3:
        raise RuntimeError(f"view_as_real is only supported for complex tensors, got {x._dtype}")
    return _rec(ops.view_as_real, _reinterpret(x, x._dtype.to_real, x._shape + (2,),
                                             tuple(2 * s for s in x._stride) + (1,),
                                             2 * x._offset, "view_as_real"), (x,))


def view_as_complex(input):
    """The complex view of a float32/float64 tensor whose last dimension is 2 (real, imag) with
    stride 1, other strides even and an even storage offset; shares memory.

    >>> import fiamma
    >>> fiamma.view_as_complex(fiamma.tensor([[1.0, 2.0]])).tolist()
    [(1+2j)]
    """
    x = _t(input, "view_as_complex")
    if x._dtype not in (D.float32, D.float64):
        raise RuntimeError("view_as_complex is only supported for float and double tensors, but "
                           f"got a tensor of scalar type: {x._dtype}")
    if not x._shape or x._shape[-1] != 2:
        raise RuntimeError(f"view_as_complex: tensor must have a last dimension of size 2, got "
                           f"shape {tuple(x._shape)}")
    if x._stride[-1] != 1:
        raise RuntimeError(f"view_as_complex: tensor must have a last dimension with stride 1, "
                           f"got stride {x._stride[-1]}")
    if builtins.any(s % 2 for s in x._stride[:-1]):
        raise RuntimeError("view_as_complex: tensor must have a stride divisible by 2 for all "
                           f"but last dimension, got strides {tuple(x._stride)}")
    if x._offset % 2:
        raise RuntimeError("view_as_complex: tensor must have a storage_offset divisible by 2, "
                           f"got {x._offset}")
    return _rec(ops.view_as_complex, _reinterpret(x, x._dtype.to_complex, x._shape[:-1],
                                                tuple(s // 2 for s in x._stride[:-1]),
                                                x._offset // 2, "view_as_complex"), (x,))


def view_as_real_copy(input):
    """:func:`view_as_real` as a new tensor (no shared memory)."""
    return view_as_real(input).clone()


def view_as_complex_copy(input):
    """:func:`view_as_complex` as a new tensor (no shared memory)."""
    return view_as_complex(input).clone()


def _part(x, which, op):
    return _reinterpret(x, x._dtype.to_real, x._shape, tuple(2 * s for s in x._stride),
                        2 * x._offset + which, op)


def real(input):
    """The real part: a view for a complex tensor (writes show through), the tensor itself for
    a real one.

    >>> import fiamma
    >>> fiamma.real(fiamma.tensor([1 + 2j])).tolist()
    [1.0]
    """
    x = _t(input, "real")
    return _rec(ops.real, _part(x, 0, "real"), (x,)) if x._dtype._kind == 3 else x


def imag(input):
    """The imaginary part of a complex tensor, as a view (writes show through).

    >>> import fiamma
    >>> fiamma.imag(fiamma.tensor([1 + 2j])).tolist()
    [2.0]
    """
    x = _t(input, "imag")
    if x._dtype._kind != 3:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return _rec(ops.imag, _part(x, 1, "imag"), (x,))


# ---- complex-only functions ------------------------------------------------------------------

def _fresh_like(x, dt=None):
    return new_empty(x._shape, x._dtype if dt is None else dt, x._storage.device)


def conj_physical(input):
    """The complex conjugate as a new tensor (real tensors: a copy)."""
    x = _t(input, "conj_physical")
    if x._dtype._kind != 3:
        return x.clone()
    res = _fresh_like(x)
    if res._numel:
        xp_of(x).conjugate(arr(x), out=arr(res))
    return _rec(ops.conj, res, (x,))


def conj(input):
    """The complex conjugate (a new tensor: fiamma has no lazy conjugate bit); a real tensor is
    returned as it is, as PyTorch does.

    >>> import fiamma
    >>> fiamma.conj(fiamma.tensor([1 + 2j])).tolist()
    [(1-2j)]
    """
    x = _t(input, "conj")
    if x._dtype._kind != 3:
        return x
    res = conj_physical(x)
    return res


def conj_physical_(input):
    """Conjugate a complex tensor in place (negate its imaginary part); real tensors are left
    as they are. Returns the input."""
    x = _t(input, "conj_physical_")
    if x._dtype._kind == 3:
        imag_(x).neg_()
        x._bump()
    return x


def is_conj(input):
    """Whether the tensor is a lazily conjugated view: never, in fiamma (conj copies)."""
    _t(input, "is_conj")
    return False


def resolve_conj(input):
    """The tensor with a lazy conjugation applied: fiamma's tensors have none, so the input."""
    return _t(input, "resolve_conj")


def resolve_neg(input):
    """The tensor with a lazy negation applied: fiamma's tensors have none, so the input."""
    return _t(input, "resolve_neg")


def is_complex(input):
    """Whether the tensor's dtype is complex (complex64 or complex128)."""
    return _t(input, "is_complex")._dtype._kind == 3


def angle(input):
    """The argument of each element (atan2(imag, real)), a real tensor; for real input 0 for
    non-negative values and pi for negative ones (NaN stays NaN), integers giving the default
    float dtype.

    >>> import fiamma
    >>> round(fiamma.angle(fiamma.tensor([1j])).item(), 4)
    1.5708
    """
    x = _t(input, "angle")
    xp = xp_of(x)
    if x._dtype._kind == 3:
        res = _fresh_like(x, x._dtype.to_real)
        if res._numel:
            _put(res, xp.angle(arr(x)))
        return _rec(ops.angle, res, (x,))
    # real input: 0 or pi (NaN stays NaN), recorded as angle (a zero gradient, NaN inputs too)
    from fiamma._ops.elementwise import where

    f = (x if x._dtype._kind == 2 else x.to(D.get_default_dtype())).detach()
    return _rec(ops.angle, where(f < 0, math.pi, where(f.isnan(), f, 0.0)), (x,))


def _put(res, values):
    r = arr(res)
    r[...] = values


def complex(real, imag, *, out=None):
    """A complex tensor from real and imaginary parts (float32 -> complex64, float64 ->
    complex128; both of one dtype; broadcast).

    >>> import fiamma
    >>> fiamma.complex(fiamma.tensor([1.0]), fiamma.tensor([2.0])).tolist()
    [(1+2j)]
    """
    from fiamma._ops._common import broadcast_shapes, same_device

    re, im = _t(real, "complex"), _t(imag, "complex")
    if re._dtype is not im._dtype:
        raise RuntimeError(f"complex: expected both inputs to be of the same dtype, got "
                           f"{re._dtype} and {im._dtype}")
    if re._dtype not in (D.float32, D.float64):
        raise RuntimeError(f"complex: expected both inputs to be float32 or float64, got "
                           f"{re._dtype}")
    dev = same_device("complex", re, im)
    shape = broadcast_shapes(re._shape, im._shape, op="complex")
    res = new_empty(shape, re._dtype.to_complex, dev)
    if res._numel:
        with _NoGrad():
            real_(res).copy_(re.expand(shape))
            imag_(res).copy_(im.expand(shape))
    _rec(ops.complex, res, (re, im))
    if out is not None:
        out.copy_(res)
        res = out
    return res


class _NoGrad:
    """Grad mode off inside (the part copies of ``complex`` are not recorded)."""

    def __enter__(self):
        self.prev = G.set_grad_enabled_flag(False)

    def __exit__(self, *exc):
        G.set_grad_enabled_flag(self.prev)


def real_(x):
    return _reinterpret(x, x._dtype.to_real, x._shape, tuple(2 * s for s in x._stride),
                        2 * x._offset, "real")


def imag_(x):
    return _reinterpret(x, x._dtype.to_real, x._shape, tuple(2 * s for s in x._stride),
                        2 * x._offset + 1, "imag")


def polar(abs, angle, *, out=None):
    """The complex tensor abs * (cos(angle) + i sin(angle)) (float32/float64 inputs).

    >>> import fiamma
    >>> fiamma.polar(fiamma.tensor([2.0]), fiamma.tensor([0.0])).tolist()
    [(2+0j)]
    """
    r, th = _t(abs, "polar"), _t(angle, "polar")
    if r._dtype is not th._dtype or r._dtype not in (D.float32, D.float64):
        raise RuntimeError(f"polar: expected abs and angle of one dtype, float32 or float64, "
                           f"got {r._dtype} and {th._dtype}")
    return complex(r * th.cos(), r * th.sin(), out=out)


def sgn(input):
    """z / |z| for complex elements (0 where z is 0); sign(x) for real tensors.

    >>> import fiamma
    >>> fiamma.sgn(fiamma.tensor([3 + 4j])).tolist()
    [(0.6000000238418579+0.800000011920929j)]
    """
    x = _t(input, "sgn")
    if x._dtype._kind != 3:
        return x.sign()
    xp = xp_of(x)
    res = _fresh_like(x)
    if res._numel:
        a = arr(x)
        m = xp.abs(a)
        safe = xp.where(m == 0, 1, m).astype(m.dtype)
        _put(res, xp.where(m == 0, 0, a / safe))
    return _rec(ops.sgn, res, (x,))


def _same_dev(op, *ts):
    from fiamma._ops._common import on_device, same_device

    dev = same_device(op, *[t for t in ts if isinstance(t, Tensor)])
    return dev, [on_device(t, dev) if isinstance(t, Tensor) else t for t in ts]


def where(cond, a, b, ct, out=None):
    """where() with a complex result dtype ct (a, b: tensors or numbers)."""
    from fiamma._ops._common import broadcast_shapes, cast

    dev, (cond, a, b) = _same_dev("where", cond, a, b)
    shape = broadcast_shapes(*(t._shape for t in (cond, a, b) if isinstance(t, Tensor)),
                             op="where")
    res = new_empty(shape, ct, dev)
    if res._numel:
        xp = xp_of(res)
        A = arr(cast(a, ct)) if isinstance(a, Tensor) else ct._np.type(a)
        B = arr(cast(b, ct)) if isinstance(b, Tensor) else ct._np.type(b)
        _put(res, xp.where(arr(cond), A, B))
    _rec(ops.where, res, (cond, a, b))
    if out is not None:
        from fiamma._ops._common import check_out

        check_out(out, res._shape, ct, "where")  # dtype castable, shape resized as PyTorch
        out.copy_(res)
        return out
    return res


def isclose(a, b, rtol, atol, equal_nan):
    """isclose of two complex tensors of one dtype (PyTorch's rule: equal, or both NaN with
    equal_nan, or a finite |a - b| <= atol + rtol * |b|)."""
    from fiamma._ops._common import broadcast_shapes

    dev, (a, b) = _same_dev("isclose", a, b)
    res = new_empty(broadcast_shapes(a._shape, b._shape, op="isclose"), D.bool, dev)
    if res._numel:
        xp = xp_of(res)
        A, B = arr(a), arr(b)
        with np.errstate(all="ignore"):
            close = A == B
            if equal_nan:
                close |= xp.isnan(A) & xp.isnan(B)
            err = xp.abs(A - B)
            close |= xp.isfinite(err) & (err <= atol + rtol * xp.abs(B))
        _put(res, close)
    return res


# ---- the arithmetic the elementwise drivers hand over ------------------------------------------

# binary op code -> array-module function; the others (ordering comparisons, floor division,
# remainder, bitwise, min/max, ...) are not defined for complex numbers, as in PyTorch
BINARY = {K.BIN_ADD: "add", K.BIN_SUB: "subtract", K.BIN_MUL: "multiply",
          K.BIN_DIV: "true_divide", K.BIN_EQ: "equal", K.BIN_NE: "not_equal",
          K.BIN_POW: "power", K.BIN_ADD_ALPHA: None, K.BIN_LOGICAL_AND: "logical_and",
          K.BIN_LOGICAL_OR: "logical_or", K.BIN_LOGICAL_XOR: "logical_xor"}


def _operand(v, ct, xp):
    if isinstance(v, Tensor):
        return arr(v)
    return ct._np.type(v)


def binary_into(code, res, a, b, ct, params=None):
    """res = a op b for complex compute dtype ct (a, b: tensors already cast to ct and
    broadcastable to res, or Python numbers); res has dtype ct (bool for == and !=)."""
    xp = xp_of(res)
    A, B = _operand(a, ct, xp), _operand(b, ct, xp)
    if code == K.BIN_ADD_ALPHA:
        B = B * ct._np.type(params[0])
        fn = xp.add
    else:
        fn = getattr(xp, BINARY[code])
    with np.errstate(all="ignore"):  # inf - inf, 0 / 0, ...: NaN without a warning
        _store(res, fn, A, B, xp)


def _store(res, fn, A, B, xp):
    o = arr(res)
    if xp is np:
        fn(A, B, out=o, casting="unsafe")
    else:
        o[...] = fn(A, B)


# unary op code -> array-module function (complex -> complex unless listed in UNARY_REAL)
UNARY = {K.UN_NEG: "negative", K.UN_EXP: "exp", K.UN_LOG: "log", K.UN_LOG2: "log2",
         K.UN_LOG10: "log10", K.UN_LOG1P: "log1p", K.UN_EXPM1: "expm1", K.UN_SQRT: "sqrt",
         K.UN_SIN: "sin", K.UN_COS: "cos", K.UN_TAN: "tan", K.UN_ASIN: "arcsin",
         K.UN_ACOS: "arccos", K.UN_ATAN: "arctan", K.UN_SINH: "sinh", K.UN_COSH: "cosh",
         K.UN_TANH: "tanh", K.UN_ASINH: "arcsinh", K.UN_ACOSH: "arccosh",
         K.UN_ATANH: "arctanh", K.UN_RECIPROCAL: "reciprocal", K.UN_SQUARE: "square",
         K.UN_RSQRT: None, K.UN_SIGMOID: None, K.UN_EXP2: None,
         K.UN_ABS: "absolute", K.UN_ISNAN: "isnan", K.UN_ISINF: "isinf",
         K.UN_ISFINITE: "isfinite", K.UN_SIGN: None, K.UN_LOGICAL_NOT: "logical_not"}
# ops whose result is not complex: abs -> the real dtype, the predicates -> bool
UNARY_REAL = {K.UN_ABS: "real", K.UN_ISNAN: "bool", K.UN_ISINF: "bool", K.UN_ISFINITE: "bool",
              K.UN_LOGICAL_NOT: "bool"}


def unary_out_dtype(code, dt):
    """The result dtype of unary op ``code`` on complex dtype dt, or None (unsupported)."""
    if code not in UNARY or code == K.UN_SIGN:
        return None
    k = UNARY_REAL.get(code)
    return dt.to_real if k == "real" else D.bool if k == "bool" else dt


def unary_into(code, res, x):
    xp = xp_of(res)
    a = arr(x)
    name = UNARY[code]
    with np.errstate(all="ignore"):
        if name is not None:
            fn = getattr(xp, name)
            if xp is np and res._dtype is not D.bool:
                fn(a, out=arr(res))
                return
            v = fn(a)
        elif code == K.UN_RSQRT:
            v = 1 / xp.sqrt(a)
        elif code == K.UN_SIGMOID:
            v = 1 / (1 + xp.exp(-a))
        else:  # exp2: exp(a ln 2), the parts scaled separately (a complex product would make
            # inf * 0 = nan in the imaginary part of 2 ** inf)
            ln2 = np.log(2).astype(a.real.dtype)
            z = xp.empty_like(a)
            z.real[...] = a.real * ln2
            z.imag[...] = a.imag * ln2
            v = xp.exp(z)
    _put(res, v)
