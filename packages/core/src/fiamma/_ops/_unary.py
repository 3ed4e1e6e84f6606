"""Unary elementwise functions (exp, sin, sigmoid, floor, isnan, nan_to_num, ...).

Each is one C op run by ``elementwise.unary``. Math functions of floating inputs ("float_only")
give integer and bool inputs the default float dtype, as in PyTorch; rounding functions are the
identity on integers; predicates (isnan, signbit, ...) return bool. ``elementwise`` re-exports
everything here and installs the methods and in-place forms.
"""

import builtins
import importlib as _importlib

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import codes as K
from fiamma._ops._common import cast, check_out
from fiamma._ops.elementwise import _finish, unary
from fiamma._tensor import Tensor, _copy_into


def _op(code, name, doc, float_only=False, no_bool=None):
    """A public unary function ``name(input, *, out=None)`` running C op ``code``.
    ``no_bool``: the RuntimeError message for bool input (PyTorch rejects some ops on bool)."""

    def fn(input, *, out=None):
        if no_bool and isinstance(input, Tensor) and input._dtype is D.bool:
            raise RuntimeError(f"{name}: {no_bool}")
        return unary(code, name, input, out, float_only=float_only)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _math(code, name, what):
    return _op(code, name, f"{what}, elementwise. Integer and bool inputs give the default "
               "float dtype.", float_only=True)


exp = _math(K.UN_EXP, ops.exp, "e to the power of input")
exp.__doc__ += """

    >>> import fiamma
    >>> fiamma.exp(fiamma.tensor([0.0, 1.0])).tolist()
    [1.0, 2.7182817459106445]
    """
exp2 = _math(K.UN_EXP2, ops.exp2, "2 to the power of input")
expm1 = _math(K.UN_EXPM1, ops.expm1, "exp(input) - 1, accurate near 0")
log = _math(K.UN_LOG, ops.log, "The natural logarithm")
log2 = _math(K.UN_LOG2, ops.log2, "The base-2 logarithm")
log10 = _math(K.UN_LOG10, ops.log10, "The base-10 logarithm")
log1p = _math(K.UN_LOG1P, ops.log1p, "log(1 + input), accurate near 0")
sqrt = _math(K.UN_SQRT, ops.sqrt, "The square root")
rsqrt = _math(K.UN_RSQRT, ops.rsqrt, "1 / sqrt(input)")
reciprocal = _math(K.UN_RECIPROCAL, ops.reciprocal, "1 / input")
sin = _math(K.UN_SIN, ops.sin, "The sine")
cos = _math(K.UN_COS, ops.cos, "The cosine")
tan = _math(K.UN_TAN, ops.tan, "The tangent")
asin = _math(K.UN_ASIN, ops.asin, "The arcsine")
acos = _math(K.UN_ACOS, ops.acos, "The arccosine")
atan = _math(K.UN_ATAN, ops.atan, "The arctangent")
sinh = _math(K.UN_SINH, ops.sinh, "The hyperbolic sine")
cosh = _math(K.UN_COSH, ops.cosh, "The hyperbolic cosine")
tanh = _math(K.UN_TANH, ops.tanh, "The hyperbolic tangent")
asinh = _math(K.UN_ASINH, ops.asinh, "The inverse hyperbolic sine")
acosh = _math(K.UN_ACOSH, ops.acosh, "The inverse hyperbolic cosine")
atanh = _math(K.UN_ATANH, ops.atanh, "The inverse hyperbolic tangent")
sigmoid = _math(K.UN_SIGMOID, ops.sigmoid, "The logistic function 1 / (1 + exp(-input))")
sigmoid.__doc__ += """

    >>> import fiamma
    >>> fiamma.sigmoid(fiamma.tensor([0.0])).tolist()
    [0.5]
    """
erf = _math(K.UN_ERF, ops.erf, "The error function")
erfc = _math(K.UN_ERFC, ops.erfc, "The complementary error function 1 - erf(input)")

arcsin, arccos, arctan = asin, acos, atan
arcsinh, arccosh, arctanh = asinh, acosh, atanh

_NEG_BOOL = ("Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
             "to invert a mask, use the `~` or `logical_not()` operator instead.")
neg = _op(K.UN_NEG, ops.neg, "``-input`` (integers wrap; not defined for bool).",
          no_bool=_NEG_BOOL)
negative = neg
abs = _op(K.UN_ABS, ops.abs, "The absolute value (not defined for bool).")
absolute = abs
sign = _op(K.UN_SIGN, ops.sign, "-1, 0 or 1 by the sign of input (0 for NaN), same dtype.")
sgn = sign
floor = _op(K.UN_FLOOR, ops.floor, "Round toward -inf (the identity on integers).")
ceil = _op(K.UN_CEIL, ops.ceil, "Round toward +inf (the identity on integers).")
trunc = _op(K.UN_TRUNC, ops.trunc, "Round toward zero (the identity on integers).")
fix = trunc
frac = _op(K.UN_FRAC, ops.frac, "``input - trunc(input)`` (floating dtypes).")
relu = _op(K.UN_RELU, ops.relu, "``max(input, 0)``; NaN stays NaN.")
relu.__doc__ += """

    >>> import fiamma
    >>> fiamma.relu(fiamma.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """
isnan = _op(K.UN_ISNAN, ops.isnan, "True where input is NaN.")
isinf = _op(K.UN_ISINF, ops.isinf, "True where input is +inf or -inf.")
isposinf = _op(K.UN_ISPOSINF, ops.isposinf, "True where input is +inf.")
isneginf = _op(K.UN_ISNEGINF, ops.isneginf, "True where input is -inf.")
isfinite = _op(K.UN_ISFINITE, ops.isfinite, "True where input is neither inf nor NaN.")
signbit = _op(K.UN_SIGNBIT, ops.signbit, "True where the sign bit is set (-0.0 included).")
logical_not = _op(K.UN_LOGICAL_NOT, ops.logical_not, "True where input is zero.")
bitwise_not = _op(K.UN_BITWISE_NOT, ops.bitwise_not,
                  "``~input`` on integer tensors; logical NOT on bool tensors.")


def square(input, *, out=None):
    """``input * input``, same dtype (bool gives int64, as in PyTorch)."""
    if isinstance(input, Tensor) and input._dtype is D.bool:
        res = unary(K.UN_SQUARE, ops.square, cast(input, D.int64), out, record=False)
        if input.requires_grad:
            G.record(ops.square, res, (input,), {})
        return res
    return unary(K.UN_SQUARE, ops.square, input, out)


def positive(input):
    """Returns ``input`` itself (not defined for bool)."""
    if isinstance(input, Tensor) and input._dtype is D.bool:
        raise RuntimeError("positive: The `+` operator, on a bool tensor is not supported.")
    return input


def round(input, *, decimals=0, out=None):
    """Round half to even; with ``decimals`` round to that many decimal places (negative:
    to tens, hundreds, ...; floating dtypes only).

    >>> import fiamma
    >>> fiamma.round(fiamma.tensor([0.5, 1.5, 2.5])).tolist()
    [0.0, 2.0, 2.0]
    >>> fiamma.round(fiamma.tensor([1234.5678]), decimals=2).tolist()
    [1234.5699462890625]
    """
    if decimals == 0:
        return unary(K.UN_ROUND, ops.round, input, out)
    d = builtins.int(decimals)
    return unary(K.UN_ROUND_DECIMALS, ops.round, input, out, p0=10.0 ** builtins.abs(d),
                 p1=1.0 if d < 0 else 0.0, kwargs={"decimals": d})


def nan_to_num(input, nan=0.0, posinf=None, neginf=None, *, out=None):
    """Replace NaN by ``nan`` (0), +inf by ``posinf`` and -inf by ``neginf`` (default: the
    dtype's largest / lowest finite value). Integer and bool tensors are copied unchanged."""
    if not isinstance(input, Tensor):
        raise TypeError(f"nan_to_num: expected a Tensor, got {type(input).__name__}")
    if input._dtype._kind == 3:  # the real and imaginary parts separately
        cx = _importlib.import_module("fiamma._ops.complex_ops")
        res = cx.complex(nan_to_num(input.real, nan, posinf, neginf),
                         nan_to_num(input.imag, nan, posinf, neginf))
        if out is None:
            return res
        check_out(out, res._shape, res._dtype, "nan_to_num")
        return _finish(res, out)
    if input._dtype._kind != 2:
        res = input.clone() if out is None else out
        if out is not None:
            check_out(out, input._shape, input._dtype, "nan_to_num")
            _copy_into(out, input)
            res = _finish(out, out)
        return res
    fi = D.finfo(input._dtype)
    p1 = fi.max if posinf is None else builtins.float(posinf)
    p2 = fi.min if neginf is None else builtins.float(neginf)
    p0 = 0.0 if nan is None else builtins.float(nan)  # PyTorch's parser takes None as 0
    return unary(K.UN_NAN_TO_NUM, ops.nan_to_num, input, out, p0=p0, p1=p1,
                 p2=p2, kwargs={"nan": nan, "posinf": posinf, "neginf": neginf})


def _log_sigmoid(input, *, out=None):
    """log(sigmoid(input)), stable for large |input| (for fiamma.nn's logsigmoid)."""
    return unary(K.UN_LOG_SIGMOID, ops.log_sigmoid, input, out, float_only=True)


__all__ = [
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal",
    "sin", "cos", "tan", "asin", "acos", "atan", "arcsin", "arccos", "arctan", "sinh", "cosh",
    "tanh", "asinh", "acosh", "atanh", "arcsinh", "arccosh", "arctanh", "sigmoid", "erf", "erfc",
    "neg", "negative", "abs", "absolute", "sign", "sgn", "positive", "square", "floor", "ceil",
    "round", "trunc", "fix", "frac", "relu", "isnan", "isinf", "isposinf", "isneginf",
    "isfinite", "signbit", "nan_to_num", "logical_not", "bitwise_not",
]

# Tensor methods; those with an in-place form in PyTorch get ``name_`` too
_G = globals()
UNARY_METHODS = {n: _G[n] for n in __all__}
UNARY_INPLACE = [n for n in __all__ if n not in (
    "positive", "isnan", "isinf", "isposinf", "isneginf", "isfinite", "signbit")]
