"""Derivatives of the special functions (lgamma, digamma, polygamma, erfinv, sinc, Bessel
I0/I1 and their scaled forms, ndtr/ndtri/log_ndtr, erfcx, entr, logit, mvlgamma, xlogy,
xlog1py, logaddexp/logaddexp2, zeta and gammainc/gammaincc in their second argument).

Written with the special functions themselves (``fiamma.special``), so they differentiate
again. Conventions follow PyTorch: xlogy's gradient w.r.t. x is log(y), 0 where x is 0 and
y <= 0 (xlog1py's: log1p(y), 0 where x is 0 and y <= -1); sinc's is 0 at
0; logit with eps has gradient 0 outside [eps, 1 - eps]; zeta has no gradient w.r.t. its first
argument.
"""

import math

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd._formulas._common import unary as _unary
from fiamma.autograd_hook import ops

_SQRT_PI_2 = math.sqrt(math.pi) / 2.0
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_LN2 = math.log(2.0)


def _sp():
    import fiamma.special as S

    return S


def _x(c):
    return c.inputs[0]


def _y(c):
    return c.output


_unary(ops.lgamma, "inputs", lambda c, g: g * fiamma.digamma(_x(c)))
_unary(ops.digamma, "inputs", lambda c, g: g * fiamma.polygamma(1, _x(c)))
_unary(ops.erfinv, "output", lambda c, g: g * _SQRT_PI_2 * (_y(c) * _y(c)).exp())
_unary(ops.i0, "inputs", lambda c, g: g * _sp().i1(_x(c)))
# i0e = exp(-|x|) i0: d/dx = i1e(x) - sgn(x) i0e(x)
_unary(ops.i0e, "both", lambda c, g: g * (_sp().i1e(_x(c)) - _x(c).sign() * _y(c)))
_unary(ops.ndtr, "inputs", lambda c, g: g * (_x(c) * _x(c) * -0.5).exp() * _INV_SQRT_2PI)
# ndtri: 1 / ndtr'(ndtri(x)) = sqrt(2 pi) exp(y^2 / 2)
_unary(ops.ndtri, "output", lambda c, g: g * (_y(c) * _y(c) * 0.5).exp() / _INV_SQRT_2PI)
def _log_ndtr_grad(c, g):
    """ndtr'(x) / ndtr(x): exp(-x^2/2 - log_ndtr(x)) / sqrt(2 pi) for x >= -1; below, with
    ndtr(x) = erfcx(-x / sqrt 2) e^{-x^2/2} / 2, sqrt(2 / pi) / erfcx(-x / sqrt 2) (the two
    ~x^2/2 terms of the first form cancel: ~x^2 ulps lost far in the lower tail)."""
    x, y = _x(c), _y(c)
    low = x < -1
    xl = fiamma.where(low, x, -1.0)  # each branch at points where it is finite
    xh = fiamma.where(low, 0.0, x)
    yh = fiamma.where(low, 0.0, y)
    tail = math.sqrt(2.0 / math.pi) / _sp().erfcx(xl * -math.sqrt(0.5))
    body = (xh * xh * -0.5 - yh).exp() * _INV_SQRT_2PI
    return g * fiamma.where(low, tail, body)


_unary(ops.log_ndtr, "both", _log_ndtr_grad)
# erfcx = exp(x^2) erfc(x): d/dx = 2 x erfcx(x) - 2 / sqrt(pi)
_unary(ops.erfcx, "both", lambda c, g: g * (_x(c) * _y(c) * 2 - 1.0 / _SQRT_PI_2))


@derivative(ops.i1, save="both")
def _i1(ctx, grad):
    """I1' = I0 - I1 / x (1/2 at 0)."""
    x, y = ctx.inputs[0], ctx.output
    safe = fiamma.where(x == 0, 1.0, x)
    d = fiamma.where(x == 0, 0.5, fiamma.i0(x) - y / safe)
    return (grad * d,)


@derivative(ops.i1e, save="both")
def _i1e(ctx, grad):
    """i1e = exp(-|x|) I1: d/dx = i0e - i1e (sgn(x) + 1/x) (1/2 at 0)."""
    x, y = ctx.inputs[0], ctx.output
    safe = fiamma.where(x == 0, 1.0, x)
    d = fiamma.where(x == 0, 0.5, _sp().i0e(x) - y * (x.sign() + 1.0 / safe))
    return (grad * d,)


@derivative(ops.sinc, save="inputs")
def _sinc(ctx, grad):
    """(cos(pi x) pi x - sin(pi x)) / (pi x^2); for |x| < 0.01 its Taylor series
    sum_k (-1)^k 2k pi^2k x^(2k-1) / (2k+1)! (the closed form cancels there, and is 0/0 once
    pi x^2 underflows)."""
    x = ctx.inputs[0]
    small = x.abs() < 0.01
    xb = fiamma.where(small, 1.0, x)
    px = xb * math.pi
    d = (px.cos() * px - px.sin()) / (px * xb)
    xs = fiamma.where(small, x, 0.0)
    p2 = (xs * math.pi) * (xs * math.pi)
    series = None
    for k in range(5, 0, -1):  # Horner in (pi x)^2, times pi^2 x
        coef = (-1) ** k * 2 * k / math.factorial(2 * k + 1)
        series = coef if series is None else coef + p2 * series
    series = series * (xs * (math.pi * math.pi))
    return (grad * fiamma.where(small, series, d),)


@derivative(ops.entr, save="inputs")
def _entr(ctx, grad):
    """-x log x: -(1 + log x) for x > 0 (-inf at 0, NaN below, as PyTorch)."""
    x = ctx.inputs[0]
    return (grad * -(x.log() + 1),)


@derivative(ops.polygamma, save="inputs")
def _polygamma(ctx, grad):
    n, x = ctx.inputs
    return None, grad * fiamma.polygamma(n + 1, x)


@derivative(ops.logit, save="inputs")
def _logit(ctx, grad):
    x = ctx.inputs[0]
    eps = ctx.kwargs.get("eps")
    if eps is None or eps < 0:  # no clamp (PyTorch ignores a negative eps): outside [0, 1]
        # logit is NaN, and so is its gradient. The NaN goes into the factor, not the result:
        # the gradient stays linear in `grad`, so tangents (computed by differentiating it
        # w.r.t. `grad`) are NaN there too, as PyTorch's forward mode gives.
        return (grad * fiamma.where((x < 0) | (x > 1), float("nan"), 1 / (x * (1 - x))),)
    return (fiamma.where((x < eps) | (x > 1 - eps), 0.0, grad / (x * (1 - x))),)


@derivative(ops.mvlgamma, save="inputs")
def _mvlgamma(ctx, grad):
    x = ctx.inputs[0]
    p = ctx.kwargs["p"]
    total = fiamma.digamma(x)
    for i in range(1, p):
        total = total + fiamma.digamma(x - i / 2.0)
    return (grad * total,)


@derivative(ops.xlogy, save="inputs")
def _xlogy(ctx, grad):
    a, b = ctx.inputs
    need = ctx.needs_input_grad
    ga = gb = None
    if need[0]:
        ga = fiamma.where((a == 0) & (b <= 0), 0.0, fiamma.xlogy(grad, b))
    if need[1]:
        gb = grad * a / b
    return ga, gb


@derivative(ops.xlog1py, save="inputs")
def _xlog1py(ctx, grad):
    a, b = ctx.inputs
    need = ctx.needs_input_grad
    ga = gb = None
    if need[0]:
        ga = fiamma.where((a == 0) & (b <= -1), 0.0, _sp().xlog1py(grad, b))
    if need[1]:
        gb = grad * a / (b + 1)
    return ga, gb


@derivative(ops.logaddexp, save="inputs")
def _logaddexp(ctx, grad):
    a, b = ctx.inputs
    need = ctx.needs_input_grad
    ga = grad * fiamma.sigmoid(a - b) if need[0] else None
    gb = grad * fiamma.sigmoid(b - a) if need[1] else None
    return ga, gb


@derivative(ops.logaddexp2, save="inputs")
def _logaddexp2(ctx, grad):
    a, b = ctx.inputs
    need = ctx.needs_input_grad
    ga = grad * fiamma.sigmoid((a - b) * _LN2) if need[0] else None
    gb = grad * fiamma.sigmoid((b - a) * _LN2) if need[1] else None
    return ga, gb


@derivative(ops.zeta, save="inputs")
def _zeta(ctx, grad):
    """d/dq zeta(s, q) = -s zeta(s + 1, q); no gradient w.r.t. s (as PyTorch)."""
    s, q = ctx.inputs
    gq = grad * -s * _sp().zeta(s + 1, q) if ctx.needs_input_grad[1] else None
    return None, gq


def _gammainc_grad(ctx, grad, sign, name):
    """d/dx P(a, x) = x^(a-1) e^-x / Gamma(a) = -d/dx Q(a, x); none w.r.t. a (as PyTorch)."""
    a, x = ctx.inputs
    if ctx.needs_input_grad[0]:
        raise RuntimeError(f"{name}: the derivative w.r.t. the first argument (a) is not "
                           "implemented (as in PyTorch); detach it")
    gx = None
    if ctx.needs_input_grad[1]:
        gx = grad * sign * ((a - 1) * x.log() - x - fiamma.lgamma(a)).exp()
    return None, gx


@derivative(ops.gammainc, save="inputs")
def _gammainc(ctx, grad):
    return _gammainc_grad(ctx, grad, 1.0, "gammainc")


@derivative(ops.gammaincc, save="inputs")
def _gammaincc(ctx, grad):
    return _gammainc_grad(ctx, grad, -1.0, "gammaincc")
