"""Element-wise functions of the array API standard: fiamma's ops behind the standard's names,
parameters and promotion (0-d arrays and Python scalars promote like any array)."""

import math

import fiamma
from fiamma.array_api._dtypes import binary, check_array, is_scalar

_UNARY = {
    # standard name: fiamma op
    "abs": fiamma.abs, "acos": fiamma.acos, "acosh": fiamma.acosh, "asin": fiamma.asin,
    "asinh": fiamma.asinh, "atan": fiamma.atan, "atanh": fiamma.atanh, "cos": fiamma.cos,
    "cosh": fiamma.cosh, "exp": fiamma.exp, "isfinite": fiamma.isfinite,
    "isinf": fiamma.isinf, "isnan": fiamma.isnan, "log": fiamma.log, "log1p": fiamma.log1p,
    "log2": fiamma.log2, "log10": fiamma.log10, "logical_not": fiamma.logical_not,
    "negative": fiamma.neg, "sin": fiamma.sin, "sinh": fiamma.sinh, "square": fiamma.square,
    "sqrt": fiamma.sqrt, "tan": fiamma.tan, "signbit": fiamma.signbit,
    "reciprocal": fiamma.reciprocal,
}
_BINARY = {
    "add": fiamma.add, "atan2": fiamma.atan2, "bitwise_and": fiamma.bitwise_and,
    "bitwise_left_shift": fiamma.bitwise_left_shift, "bitwise_or": fiamma.bitwise_or,
    "bitwise_right_shift": fiamma.bitwise_right_shift, "bitwise_xor": fiamma.bitwise_xor,
    "copysign": fiamma.copysign, "divide": fiamma.div, "equal": fiamma.eq,
    "greater": fiamma.gt, "greater_equal": fiamma.ge,
    "hypot": fiamma.hypot, "less": fiamma.lt, "less_equal": fiamma.le,
    "logaddexp": fiamma.logaddexp, "logical_and": fiamma.logical_and,
    "logical_or": fiamma.logical_or, "logical_xor": fiamma.logical_xor,
    "maximum": fiamma.maximum, "minimum": fiamma.minimum, "multiply": fiamma.mul,
    "nextafter": fiamma.nextafter, "not_equal": fiamma.ne, "pow": fiamma.pow,
    "subtract": fiamma.sub,
}

__all__ = sorted(list(_UNARY) + list(_BINARY) + [
    "bitwise_invert", "ceil", "clip", "conj", "expm1", "floor", "floor_divide", "imag",
    "positive", "real", "remainder", "round", "sign", "tanh", "trunc"])


def _unary(name, op):
    def f(x, /):
        return op(check_array(x, name))

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"``{name}`` of each element of ``x`` (fiamma.{op.__name__}).\n\n"
                 f"    >>> import fiamma.array_api as xp\n"
                 f"    >>> tuple(xp.{name}(xp.asarray([0.5])).shape)\n    (1,)\n")
    return f


def _binary(name, op):
    def f(x1, x2, /):
        a, b = binary(x1, x2, name)
        return op(a, b)

    f.__name__ = f.__qualname__ = name
    arg = "[1, 2]), 1" if name.startswith("bitwise") else "[1.0, 2.0]), 1.0"
    f.__doc__ = (f"``{name}`` of each pair of broadcast elements (fiamma.{op.__name__}); the "
                 f"standard's type promotion, a Python scalar for either argument.\n\n"
                 f"    >>> import fiamma.array_api as xp\n"
                 f"    >>> tuple(xp.{name}(xp.asarray({arg}).shape)\n    (2,)\n")
    return f


for _n, _op in _UNARY.items():
    globals()[_n] = _unary(_n, _op)
for _n, _op in _BINARY.items():
    globals()[_n] = _binary(_n, _op)
del _n, _op


def _integral_identity(name, op):
    def f(x, /):
        check_array(x, name)
        if x._dtype._kind < 2:
            return x.clone()  # integers and bools are already integral
        return op(x)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"``{name}`` of each element (integer arrays are returned as a copy).\n\n"
                 f"    >>> import fiamma.array_api as xp\n"
                 f"    >>> tuple(xp.{name}(xp.asarray([1.5, -1.5])).shape)\n    (2,)\n")
    return f


ceil = _integral_identity("ceil", fiamma.ceil)
floor = _integral_identity("floor", fiamma.floor)
trunc = _integral_identity("trunc", fiamma.trunc)
round = _integral_identity("round", fiamma.round)


def expm1(x, /):
    """``exp(x) - 1``, accurate near 0; complex arrays follow the standard's special cases
    (C99's cexp with the -1 folded in).

    >>> import fiamma.array_api as xp
    >>> xp.expm1(xp.asarray([0.0])).tolist()
    [0.0]
    """
    check_array(x, "expm1")
    if x._dtype._kind != 3:
        return fiamma.expm1(x)
    re, im = fiamma.real(x), fiamma.imag(x)
    finite_im = fiamma.isfinite(im)
    half = fiamma.sin(im * 0.5)
    out_re = fiamma.expm1(re) * fiamma.cos(im) - 2.0 * half * half
    out_im = fiamma.exp(re) * fiamma.sin(im)
    zero_im = im == 0
    out_re = fiamma.where(zero_im, fiamma.expm1(re) + 0.0, out_re)  # cexp(-0) - 1 is +0
    out_im = fiamma.where(zero_im, im, out_im)  # keeps the zero's sign, also for inf/NaN real
    neg_inf, pos_inf = re == -math.inf, re == math.inf
    out_re = fiamma.where(neg_inf, fiamma.full_like(re, -1.0), out_re)
    out_im = fiamma.where(neg_inf & ~finite_im, fiamma.zeros_like(im), out_im)
    out_re = fiamma.where(pos_inf & ~finite_im, re, out_re)
    return fiamma.complex(out_re, out_im)


def tanh(x, /):
    """The hyperbolic tangent; for complex ``x`` with an infinite real part and a finite
    imaginary part exactly ``±1 ± 0j`` (the zero with the imaginary part's sign).

    >>> import fiamma.array_api as xp
    >>> xp.tanh(xp.asarray([0.0])).tolist()
    [0.0]
    """
    check_array(x, "tanh")
    r = fiamma.tanh(x)
    if x._dtype._kind != 3:
        return r
    re, im = fiamma.real(x), fiamma.imag(x)
    edge = fiamma.isinf(re) & fiamma.isfinite(im)
    out_re = fiamma.where(edge, fiamma.sign(re), fiamma.real(r))
    out_im = fiamma.where(edge, fiamma.copysign(fiamma.zeros_like(im), im), fiamma.imag(r))
    return fiamma.complex(out_re, out_im)


def floor_divide(x1, x2, /):
    """``floor(x1 / x2)`` per element; with an infinite operand the IEEE quotient's floor
    (inf // 2 is inf, 1 // -inf is -0), where PyTorch's floor_divide gives NaN.

    >>> import fiamma.array_api as xp
    >>> xp.floor_divide(xp.asarray([7.0, -7.0, float("inf")]), 2.0).tolist()
    [3.0, -4.0, inf]
    """
    a, b = binary(x1, x2, "floor_divide")
    r = fiamma.floor_divide(a, b)
    if a._dtype._kind == 2:
        inf = fiamma.isinf(a) | fiamma.isinf(b)
        r = fiamma.where(inf, fiamma.floor(a / b), r)
    return r


def remainder(x1, x2, /):
    """``x1 - floor(x1 / x2) * x2`` per element, with the sign of ``x2`` (also for a zero
    result: -0.0 % 1.0 is +0.0, as in Python).

    >>> import fiamma.array_api as xp
    >>> xp.remainder(xp.asarray([7, -7]), 3).tolist()
    [1, 2]
    """
    a, b = binary(x1, x2, "remainder")
    r = fiamma.remainder(a, b)
    if a._dtype._kind == 2:
        r = fiamma.where(r == 0, fiamma.copysign(r, b), r)
    return r


def bitwise_invert(x, /):
    """Bitwise NOT of integers, logical NOT of bools.

    >>> import fiamma.array_api as xp
    >>> xp.bitwise_invert(xp.asarray([0, 5], dtype=xp.int8)).tolist()
    [-1, -6]
    """
    return fiamma.bitwise_not(check_array(x, "bitwise_invert"))


def positive(x, /):
    """A copy of ``x`` (unary plus)."""
    return check_array(x, "positive").clone()


def sign(x, /):
    """-1, 0 or 1 per element (NaN for NaN); ``x / |x|`` for complex numbers (0 for 0).

    >>> import fiamma.array_api as xp
    >>> xp.sign(xp.asarray([-2.0, 0.0, 3.0])).tolist()
    [-1.0, 0.0, 1.0]
    """
    check_array(x, "sign")
    if x._dtype._kind == 3:
        return fiamma.sgn(x)
    if x._dtype._kind == 2:
        return fiamma.where(fiamma.isnan(x), x, fiamma.sign(x))  # PyTorch's sign(NaN) is 0
    return fiamma.sign(x)


def conj(x, /):
    """The complex conjugate (a copy of ``x`` for real arrays)."""
    check_array(x, "conj")
    return fiamma.conj_physical(x) if x._dtype._kind == 3 else x.clone()


def real(x, /):
    """The real part (``x`` itself, copied, for real arrays).

    >>> import fiamma.array_api as xp
    >>> xp.real(xp.asarray([1 + 2j])).tolist()
    [1.0]
    """
    check_array(x, "real")
    return fiamma.real(x).clone() if x._dtype._kind == 3 else x.clone()


def imag(x, /):
    """The imaginary part (zeros for real arrays)."""
    check_array(x, "imag")
    return fiamma.imag(x).clone() if x._dtype._kind == 3 else fiamma.zeros_like(x)


def clip(x, /, min=None, max=None):
    """``x`` limited to ``[min, max]`` (arrays or Python scalars); the result keeps x's dtype.

    >>> import fiamma.array_api as xp
    >>> xp.clip(xp.asarray([1, 5, 9]), 2, 6).tolist()
    [2, 5, 6]
    """
    check_array(x, "clip")
    if x._dtype._kind == 3:
        raise TypeError("clip: complex arrays have no order")
    out = x
    if min is not None:
        lo = fiamma.full((), min, dtype=x._dtype, device=x.device) if is_scalar(min) else min
        out = fiamma.maximum(out, lo.to(x._dtype))
    if max is not None:
        hi = fiamma.full((), max, dtype=x._dtype, device=x.device) if is_scalar(max) else max
        out = fiamma.minimum(out, hi.to(x._dtype))
    return out.clone() if out is x else out
