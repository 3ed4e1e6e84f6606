"""Derivatives of the elementwise ops: unary math, binary arithmetic, clamp/where/lerp/addc*.

Conventions follow PyTorch's derivatives.yaml: ties of maximum/minimum split the gradient in
half; abs has gradient sign(x) (0 at 0); pow's gradient w.r.t. the exponent is 0 where the base
is 0 and the exponent >= 0 (no NaN from 0 * log(0)); rounding ops, sign, floor_divide and
rounded div have zero gradient. Broadcasting is undone by the engine (sum_to_shape).
"""

import math

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd._formulas._common import is_tensor, unary as _unary
from fiamma.autograd_hook import ops

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _need(ctx, i):
    return ctx._needs(i)  # ctx.needs_input_grad[i], without building the tuple


def _cj(v):
    """A Python coefficient as the gradient multiplies by it (conjugated if complex)."""
    return v.conjugate() if isinstance(v, complex) else v


def _zeros(grad):
    return fiamma.zeros_like(grad)


def _zero_grads(ctx, grad):
    return tuple(_zeros(grad) if n else None for n in ctx.needs_input_grad)


# ---- unary ---------------------------------------------------------------------------------

def _x(ctx):
    return ctx.inputs[0]


def _y(ctx):
    return ctx.output


_unary(ops.exp, "output", lambda c, g: g * _y(c))
_unary(ops.exp2, "output", lambda c, g: g * _y(c) * _LN2)
_unary(ops.expm1, "output", lambda c, g: g * (_y(c) + 1))
_unary(ops.log, "inputs", lambda c, g: g / _x(c))
_unary(ops.log2, "inputs", lambda c, g: g / (_x(c) * _LN2))
_unary(ops.log10, "inputs", lambda c, g: g / (_x(c) * _LN10))
_unary(ops.log1p, "inputs", lambda c, g: g / (_x(c) + 1))
_unary(ops.sqrt, "output", lambda c, g: g / (_y(c) * 2))
_unary(ops.rsqrt, "output", lambda c, g: g * _y(c).pow(3) * -0.5)
_unary(ops.reciprocal, "output", lambda c, g: -g * _y(c) * _y(c))
_unary(ops.sin, "inputs", lambda c, g: g * _x(c).cos())
_unary(ops.cos, "inputs", lambda c, g: -g * _x(c).sin())
_unary(ops.tan, "output", lambda c, g: g * (_y(c) * _y(c) + 1))
_unary(ops.asin, "inputs", lambda c, g: g * (1 - _x(c) * _x(c)).rsqrt())
_unary(ops.acos, "inputs", lambda c, g: -g * (1 - _x(c) * _x(c)).rsqrt())
_unary(ops.atan, "inputs", lambda c, g: g / (_x(c) * _x(c) + 1))
_unary(ops.sinh, "inputs", lambda c, g: g * _x(c).cosh())
_unary(ops.cosh, "inputs", lambda c, g: g * _x(c).sinh())
_unary(ops.asinh, "inputs", lambda c, g: g * (_x(c) * _x(c) + 1).rsqrt())
_unary(ops.acosh, "inputs", lambda c, g: g * ((_x(c) - 1) * (_x(c) + 1) + 0.0).rsqrt())  # +0 at -1
_unary(ops.atanh, "inputs", lambda c, g: g / (1 - _x(c) * _x(c)))
# tanh, sigmoid and log_sigmoid: see activation.py (one fused pass for the first derivative)
_unary(ops.erf, "inputs", lambda c, g: g * (-_x(c) * _x(c)).exp() * _TWO_OVER_SQRT_PI)
_unary(ops.erfc, "inputs", lambda c, g: g * (-_x(c) * _x(c)).exp() * -_TWO_OVER_SQRT_PI)
_unary(ops.neg, "none", lambda c, g: -g)
def _abs_grad(c, g):
    x = _x(c)
    # complex z: g * z/|z| (sgn, PyTorch's complex abs gradient); real x: g * sign(x)
    return g * (x.sign() if x._dtype._kind != 3 else x.sgn())


_unary(ops.abs, "inputs", _abs_grad)
_unary(ops.square, "inputs", lambda c, g: g * _x(c) * 2)
_unary(ops.frac, "none", lambda c, g: g)
_unary(ops.relu, "output", lambda c, g: fiamma.relu_backward(g, _y(c)))
_unary(ops.nan_to_num, "inputs", lambda c, g: fiamma.where(_x(c).isfinite(), g, 0.0))
# piecewise constant: zero almost everywhere (PyTorch: zeros_like(grad))
for _n in (ops.sign, ops.sgn, ops.floor, ops.ceil, ops.trunc, ops.round):
    _unary(_n, "none", lambda c, g: _zeros(g))


# ---- binary --------------------------------------------------------------------------------

@derivative(ops.add, save="none")
def _add(ctx, grad):
    gb = None
    if ctx._e1 is not None:  # the node's edges, read directly (Node's slots)
        alpha = ctx._kwargs.get("alpha", 1)
        gb = grad if alpha == 1 else grad * _cj(alpha)
    return (grad if ctx._e0 is not None else None), gb


@derivative(ops.sub, save="none")
def _sub(ctx, grad):
    alpha = ctx.kwargs.get("alpha", 1)
    gb = None
    if _need(ctx, 1):
        gb = -grad if alpha == 1 else grad * -_cj(alpha)
    return grad if _need(ctx, 0) else None, gb


@derivative(ops.mul, save="inputs")
def _mul(ctx, grad):
    # each gradient reads only the other factor (an operand changed in place after the
    # product is fine when its own factor's gradient is not needed, as in PyTorch)
    return ((grad * ctx._input(1) if _need(ctx, 0) else None),
            (grad * ctx._input(0) if _need(ctx, 1) else None))


@derivative(ops.div, save="inputs")
def _div(ctx, grad):
    if ctx.kwargs.get("rounding_mode") is not None:  # trunc/floor: piecewise constant
        return _zero_grads(ctx, grad)
    # the numerator's gradient reads only the denominator
    b = ctx._input(1)
    ga = grad / b if _need(ctx, 0) else None
    gb = -grad * ctx._input(0) / (b * b) if _need(ctx, 1) else None
    return ga, gb


@derivative(ops.floor_divide, save="none")
def _floor_divide(ctx, grad):
    return _zero_grads(ctx, grad)


@derivative(ops.remainder, save="inputs")
def _remainder(ctx, grad):
    a, b = ctx.inputs
    gb = None
    if _need(ctx, 1):
        gb = -grad * fiamma.div(a, b, rounding_mode="floor")
    return grad if _need(ctx, 0) else None, gb


@derivative(ops.fmod, save="inputs")
def _fmod(ctx, grad):
    a, b = ctx.inputs
    gb = None
    if _need(ctx, 1):
        gb = -grad * fiamma.div(a, b, rounding_mode="trunc")
    return grad if _need(ctx, 0) else None, gb


@derivative(ops.pow, ops.float_power, save="both")
def _pow(ctx, grad):
    a, b = ctx.inputs
    if ctx.op == ops.float_power:  # computed in float64: an integer or bool exponent too
        a = a.double() if is_tensor(a) else a
        b = b.double() if is_tensor(b) else b
    ga = gb = None
    if _need(ctx, 0):
        if is_tensor(b):
            ga = fiamma.where(b == 0, 0.0, grad * b * a.pow(b - 1))
        elif b == 0:
            ga = _zeros(grad)
        elif b == 1:
            ga = grad * 1  # a new tensor (the gradient of a copy)
        elif b == 2 and is_tensor(a):
            ga = grad * 2 * a
        else:
            ga = grad * b * (a.pow(b - 1) if is_tensor(a) else a ** (b - 1))
    if _need(ctx, 1):
        y = ctx.output
        if is_tensor(a):
            safe = fiamma.where((a == 0) & (b >= 0), 1.0, a)
            gb = grad * fiamma.where((a == 0) & (b >= 0), 0.0, y * safe.log())
        else:
            la = math.log(a) if a > 0 else (-math.inf if a == 0 else math.nan)
            gb = grad * y * la
            if a == 0:  # 0 ** b: gradient 0 for b >= 0 (not 0 * -inf)
                gb = fiamma.where(b >= 0, 0.0, gb)
    return ga, gb


@derivative(ops.atan2, save="inputs")
def _atan2(ctx, grad):
    a, b = ctx.inputs
    denom = a * a + b * b
    denom = fiamma.where(denom == 0, 1.0, denom)  # at the origin: 0 (PyTorch's), not 0/0
    ga = grad * b / denom if _need(ctx, 0) else None
    gb = -grad * a / denom if _need(ctx, 1) else None
    return ga, gb


@derivative(ops.hypot, save="both")
def _hypot(ctx, grad):
    a, b = ctx.inputs
    y = ctx.output
    ga = grad * a / y if _need(ctx, 0) else None
    gb = grad * b / y if _need(ctx, 1) else None
    return ga, gb


@derivative(ops.copysign, save="both")
def _copysign(ctx, grad):
    a, _ = ctx.inputs
    ga = None
    if _need(ctx, 0):
        y = ctx.output
        safe = fiamma.where(a == 0, 1.0, a)
        ga = grad * fiamma.where(a == 0, 0.0, y / safe)
    return ga, (_zeros(grad) if _need(ctx, 1) else None)


def _max_min(greater):
    def formula(ctx, grad):
        a, b = ctx.inputs
        half = fiamma.where(a == b, grad * 0.5, grad)
        ga = gb = None
        if _need(ctx, 0):
            ga = fiamma.where(a < b if greater else a > b, 0.0, half)
        if _need(ctx, 1):
            gb = fiamma.where(a > b if greater else a < b, 0.0, half)
        return ga, gb

    return formula


derivative(ops.maximum, save="inputs")(_max_min(True))
derivative(ops.minimum, save="inputs")(_max_min(False))


def _fmax_fmin(greater):
    def formula(ctx, grad):
        a, b = ctx.inputs
        first = ((a >= b) if greater else (a <= b)) | b.isnan()
        ga = fiamma.where(first, grad, 0.0) if _need(ctx, 0) else None
        gb = fiamma.where(first, 0.0, grad) if _need(ctx, 1) else None
        return ga, gb

    return formula


derivative(ops.fmax, save="inputs")(_fmax_fmin(True))
derivative(ops.fmin, save="inputs")(_fmax_fmin(False))


# ---- ternary -------------------------------------------------------------------------------

@derivative(ops.clamp, save="inputs")
def _clamp(ctx, grad):
    """``clamp(x, lo, hi)``: the gradient goes to whichever of x, lo, hi is the result; where
    lo > hi the result is hi (PyTorch's rule); at x == lo or x == hi it goes to x; at
    x < lo == hi to none of them (PyTorch's: lo's gradient needs lo < hi)."""
    x, lo, hi = ctx.inputs
    if lo is not None and hi is not None:
        take_x = (x >= lo) & (x <= hi)
        take_hi = (x > hi) | (lo > hi) if is_tensor(hi) else None
        take_lo = (x < lo) & (lo < hi) if is_tensor(lo) else None
    elif lo is not None:
        take_x = x >= lo
        take_lo = (x < lo) if is_tensor(lo) else None
        take_hi = None
    else:
        take_x = x <= hi
        take_hi = (x > hi) if is_tensor(hi) else None
        take_lo = None
    gx = fiamma.where(take_x, grad, 0.0) if _need(ctx, 0) else None
    glo = fiamma.where(take_lo, grad, 0.0) if take_lo is not None and _need(ctx, 1) else None
    ghi = fiamma.where(take_hi, grad, 0.0) if take_hi is not None and _need(ctx, 2) else None
    return gx, glo, ghi


# where/addcmul/addcdiv read the condition or factors only: the selected values and the added
# input are not saved (may be written in place before backward, as in PyTorch)
@derivative(ops.where, save="inputs", unsaved=(1, 2))
def _where(ctx, grad):
    cond = ctx.inputs[0]
    ga = fiamma.where(cond, grad, 0.0) if _need(ctx, 1) else None
    gb = fiamma.where(cond, 0.0, grad) if _need(ctx, 2) else None
    return None, ga, gb


def _lerp_unsaved(inputs, kwargs):
    # a scalar weight: the ends' values are not needed (only the weight's gradient reads them)
    return (0, 1) if len(inputs) > 2 and not isinstance(inputs[2], fiamma.Tensor) else ()


@derivative(ops.lerp, save="inputs", unsaved=_lerp_unsaved)
def _lerp(ctx, grad):
    a, b, w = ctx.inputs
    ga = grad * (1 - w) if _need(ctx, 0) else None
    gb = grad * w if _need(ctx, 1) else None
    gw = grad * (b - a) if _need(ctx, 2) else None
    return ga, gb, gw


@derivative(ops.addcmul, save="inputs", unsaved=(0,))
def _addcmul(ctx, grad):
    _, t1, t2 = ctx.inputs
    v = _cj(ctx.kwargs.get("value", 1))
    gv = grad if v == 1 else grad * v
    return (grad if _need(ctx, 0) else None, gv * t2 if _need(ctx, 1) else None,
            gv * t1 if _need(ctx, 2) else None)


@derivative(ops.addcdiv, save="inputs", unsaved=(0,))
def _addcdiv(ctx, grad):
    _, t1, t2 = ctx.inputs
    v = _cj(ctx.kwargs.get("value", 1))
    gv = grad if v == 1 else grad * v
    g1 = gv / t2 if _need(ctx, 1) else None
    g2 = -gv * t1 / (t2 * t2) if _need(ctx, 2) else None
    return grad if _need(ctx, 0) else None, g1, g2
