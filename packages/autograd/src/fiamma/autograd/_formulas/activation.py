"""Derivatives of core's fused activations: ``gelu`` (its first derivative is core's fused
``gelu_backward``) and ``gelu_backward`` (written in differentiable fiamma ops, so higher
orders work).

gelu_backward(g, x) = g d(x) with d = gelu'. Its derivative is d(x) along g and g d'(x) along x:
  exact:  d = Phi + x phi,  d' = phi (2 - x^2)                 (phi' = -x phi)
  tanh:   u = k (x + c x^3), t = tanh(u), d = (1 + t)/2 + x (1 - t^2) u'/2,
          d' = (1 - t^2) (u' + x (u'' - 2 t u'^2) / 2),  u' = k (1 + 3 c x^2), u'' = 6 k c x.
"""

import math

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd._formulas._common import linked
from fiamma.autograd_hook import ops

_K = math.sqrt(2.0 / math.pi)
_C = 0.044715
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _need(ctx, i):
    return ctx._needs(i)  # ctx.needs_input_grad[i], without building the tuple


def _curvature(x, approximate):
    """gelu''(x) in differentiable ops."""
    if approximate == "none":
        return (-0.5 * x * x).exp() * _INV_SQRT_2PI * (2.0 - x * x)
    t = (_K * (x + _C * x * x * x)).tanh()
    du = _K * (1.0 + 3.0 * _C * x * x)
    return (1.0 - t * t) * (du + 0.5 * x * (6.0 * _K * _C * x - 2.0 * t * du * du))


@derivative(ops.gelu, save="inputs")
def _gelu(ctx, grad):
    # core's float32 exact gelu may record gelu'(x) computed in its forward pass ("_grad"):
    # the first derivative is then one product (the same rounding as gelu_backward's)
    d = ctx.kwargs.get("_grad")
    if d is not None and not fiamma.is_grad_enabled():
        return (grad * d,)
    (x,) = ctx.inputs
    approximate = ctx.kwargs["approximate"]
    return (fiamma.gelu_backward(grad, x, approximate),)


@derivative(ops.gelu_backward, save="inputs")
def _gelu_backward(ctx, grad):
    g, x = ctx.inputs
    approximate = ctx.kwargs["approximate"]
    dg = fiamma.gelu_backward(grad, x, approximate) if _need(ctx, 0) else None
    dx = grad * g * _curvature(x, approximate) if _need(ctx, 1) else None
    return dg, dx


@derivative(ops.relu_backward, save="inputs")
def _relu_backward(ctx, grad):
    # where(y > 0, g, 0): linear in g; the mask is piecewise constant in y
    g, y = ctx.inputs
    dg = fiamma.relu_backward(grad, y) if _need(ctx, 0) else None
    dy = fiamma.zeros_like(y) if _need(ctx, 1) else None
    return dg, dy


# ---- core's parameterised activations (fiamma.fused.activation) ------------------------------
# The first derivative is one fused pass (fused.activation_backward); when a graph of the
# gradient is wanted (create_graph) the same formula is composed of differentiable ops, so
# higher orders work.

def _act_grad(name, grad, x, p):
    # one fused pass; under create_graph core's same formula in differentiable ops
    return fiamma.fused.activation_backward(name, grad, x, *p,
                                            create_graph=fiamma.is_grad_enabled())


def _act_formula(name):
    if name in _PIECEWISE_LINEAR:
        def formula(ctx, grad):
            (x,) = ctx.inputs
            p = ctx.kwargs.get("params", ()) if ctx.kwargs else ()
            return (linked(_act_grad(name, grad, x, tuple(p)), x),)
        formula.__name__ = f"_{name}"
        return formula

    def formula(ctx, grad):
        (x,) = ctx.inputs
        p = ctx.kwargs.get("params", ()) if ctx.kwargs else ()
        return (_act_grad(name, grad, x, tuple(p)),)
    formula.__name__ = f"_{name}"
    return formula


# their gradient is constant in x: kept in the graph (zero derivative) under create_graph
_PIECEWISE_LINEAR = {"leaky_relu", "hardtanh", "softshrink", "hardshrink", "threshold",
                     "hardsigmoid"}
_NPARAMS = {"silu": 0, "leaky_relu": 1, "elu": 3, "hardswish": 0, "hardsigmoid": 0,
            "softplus": 2, "mish": 0, "log_sigmoid": 0, "hardtanh": 2, "softshrink": 1,
            "hardshrink": 1, "threshold": 2}
for _name in _NPARAMS:
    derivative(getattr(ops, _name), save="inputs")(_act_formula(_name))


@derivative(ops.sigmoid, save="output")
def _sigmoid(ctx, grad):
    y = ctx.output
    if y.dtype != grad.dtype:  # (complex: the conjugated output, composed)
        return (grad * y * (1 - y),)
    return (fiamma.fused.activation_backward("sigmoid", grad, y,
                                             create_graph=fiamma.is_grad_enabled()),)


@derivative(ops.tanh, save="output")
def _tanh(ctx, grad):
    y = ctx.output
    if y.dtype != grad.dtype:
        return (grad * (1 - y * y),)
    return (fiamma.fused.activation_backward("tanh", grad, y,
                                             create_graph=fiamma.is_grad_enabled()),)
