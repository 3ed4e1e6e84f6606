"""ONNX converters: one function per op of a traced graph.

``conv(ctx, node, outs)``: ``node`` is the traced node (arguments as recorded, tensors as
:class:`fiamma.jit.Value`), ``outs`` the ONNX names its results must get.
"""

import math

import numpy as np

from fiamma.jit import Value

CONVERTERS = {}


def converter(*names):
    def deco(fn):
        for n in names:
            CONVERTERS[n] = fn
        return fn
    return deco


def _operand(ctx, x, like_dtype):
    """A tensor argument's ONNX name, cast to ``like_dtype``; a Python scalar as a constant."""
    if isinstance(x, Value):
        if ctx.np_dtype(x) != like_dtype:
            return ctx.add("Cast", [x], to=_onnx_type(ctx, like_dtype))
        return ctx.name(x)
    return ctx.const(np.asarray(x, dtype=like_dtype), "scalar")


def _onnx_type(ctx, np_dtype):
    return ctx.helper.np_dtype_to_tensor_dtype(np.dtype(np_dtype))


def _out_dtype(ctx, node):
    return ctx.np_dtype(node.outputs[0])


# ---- elementwise ----------------------------------------------------------------------------

_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow",
           "maximum": "Max", "minimum": "Min", "fmod": "Mod", "atan2": None}
_COMPARE = {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater",
            "ge": "GreaterOrEqual", "ne": "Equal"}


@converter(*[k for k, v in _BINARY.items() if v])
def _binary(ctx, node, outs):
    a, b = node.args[0], node.args[1]
    dt = _out_dtype(ctx, node)
    kw = node.kwargs
    rounding = kw.get("rounding_mode")
    if node.op == "div" and dt.kind != "f":
        if rounding == "floor":
            return _int_floordiv(ctx, _operand(ctx, a, dt), _operand(ctx, b, dt), dt, outs)
        if rounding == "trunc":  # ONNX's integer Div truncates
            return ctx.add("Div", [_operand(ctx, a, dt), _operand(ctx, b, dt)], outs)
        ctx.unsupported("integer true division has no converter")
    if node.op == "pow" and not isinstance(b, Value):
        xa = _operand(ctx, a, dt)
        if b == 2:
            return ctx.add("Mul", [xa, xa], outs)
        if b == 0.5:
            return ctx.add("Sqrt", [xa], outs)
    xa, xb = _operand(ctx, a, dt), _operand(ctx, b, dt)
    alpha = kw.get("alpha", 1)
    if alpha not in (1, None) and node.op in ("add", "sub"):
        xb = ctx.add("Mul", [xb, ctx.const(np.asarray(alpha, dt))])
    op = _BINARY[node.op]
    if node.op == "fmod":
        return ctx.add("Mod", [xa, xb], outs, fmod=1)
    if rounding == "floor":
        return ctx.add("Floor", [ctx.add("Div", [xa, xb])], outs)
    if rounding == "trunc":
        return _trunc(ctx, ctx.add("Div", [xa, xb]), outs)
    return ctx.add(op, [xa, xb], outs)


def _int_floordiv(ctx, a, b, dt, outs):
    """Integer division rounding down: ONNX's Div truncates, one less where the remainder is
    non-zero and the signs differ."""
    q = ctx.add("Div", [a, b])
    r = ctx.add("Sub", [a, ctx.add("Mul", [q, b])])
    zero = ctx.add("Sub", [b, b])
    neg = ctx.add("Xor", [ctx.add("Less", [r, zero]), ctx.add("Less", [b, zero])])
    fix = ctx.add("And", [ctx.add("Not", [ctx.add("Equal", [r, zero])]), neg])
    return ctx.add("Sub", [q, ctx.add("Cast", [fix], to=_onnx_type(ctx, dt))], outs)


def _trunc(ctx, x, outs):
    s = ctx.add("Sign", [x])
    a = ctx.add("Floor", [ctx.add("Abs", [x])])
    return ctx.add("Mul", [s, a], outs)


@converter("remainder")
def _remainder(ctx, node, outs):
    dt = _out_dtype(ctx, node)
    a, b = _operand(ctx, node.args[0], dt), _operand(ctx, node.args[1], dt)
    return ctx.add("Mod", [a, b], outs, fmod=0 if dt.kind != "f" else 1) if dt.kind != "f" \
        else ctx.add("Sub", [a, ctx.add("Mul", [b, ctx.add("Floor", [ctx.add("Div", [a, b])])])],
                     outs)


@converter(*_COMPARE)
def _compare(ctx, node, outs):
    a, b = node.args
    ts = [x for x in (a, b) if isinstance(x, Value)]
    dt = np.result_type(*[ctx.np_dtype(t) for t in ts])
    xa, xb = _operand(ctx, a, dt), _operand(ctx, b, dt)
    if node.op == "ne":
        return ctx.add("Not", [ctx.add("Equal", [xa, xb])], outs)
    return ctx.add(_COMPARE[node.op], [xa, xb], outs)


@converter("logical_and", "logical_or")
def _logical(ctx, node, outs):
    a, b = (_operand(ctx, x, np.dtype(bool)) for x in node.args[:2])
    return ctx.add("And" if node.op == "logical_and" else "Or", [a, b], outs)


@converter("logical_not")
def _logical_not(ctx, node, outs):
    return ctx.add("Not", [_operand(ctx, node.args[0], np.dtype(bool))], outs)


@converter("addcmul", "addcdiv")
def _addc(ctx, node, outs):
    x, t1, t2 = node.args[:3]
    dt = _out_dtype(ctx, node)
    p = ctx.add("Mul" if node.op == "addcmul" else "Div",
                [_operand(ctx, t1, dt), _operand(ctx, t2, dt)])
    value = node.kwargs.get("value", 1)
    if value != 1:
        p = ctx.add("Mul", [p, ctx.const(np.asarray(value, dt))])
    return ctx.add("Add", [_operand(ctx, x, dt), p], outs)


@converter("where")
def _where(ctx, node, outs):
    c, a, b = node.args
    dt = _out_dtype(ctx, node)
    return ctx.add("Where", [_operand(ctx, c, np.dtype(bool)), _operand(ctx, a, dt),
                             _operand(ctx, b, dt)], outs)


@converter("masked_fill")
def _masked_fill(ctx, node, outs):
    x, mask, value = node.args
    dt = _out_dtype(ctx, node)
    return ctx.add("Where", [_operand(ctx, mask, np.dtype(bool)), _operand(ctx, value, dt),
                             _operand(ctx, x, dt)], outs)


_UNARY = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log",
          "sqrt": "Sqrt", "neg": "Neg", "abs": "Abs", "erf": "Erf", "sin": "Sin", "cos": "Cos",
          "tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh",
          "cosh": "Cosh", "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh",
          "floor": "Floor", "ceil": "Ceil", "reciprocal": "Reciprocal", "sign": "Sign",
          "round": "Round", "hardswish": "HardSwish", "selu": "Selu", "softsign": "Softsign"}


@converter(*_UNARY)
def _unary(ctx, node, outs):
    if node.op == "round" and node.kwargs.get("decimals", 0):
        ctx.unsupported("round with decimals has no converter")
    x = _operand(ctx, node.args[0], _out_dtype(ctx, node))
    return ctx.add(_UNARY[node.op], [x], outs)


def _x(ctx, node):
    return _operand(ctx, node.args[0], _out_dtype(ctx, node))


@converter("rsqrt")
def _rsqrt(ctx, node, outs):
    return ctx.add("Reciprocal", [ctx.add("Sqrt", [_x(ctx, node)])], outs)


@converter("square")
def _square(ctx, node, outs):
    x = _x(ctx, node)
    return ctx.add("Mul", [x, x], outs)


@converter("exp2")
def _exp2(ctx, node, outs):
    return ctx.add("Pow", [ctx.scalar_like(node.args[0], 2.0), _x(ctx, node)], outs)


@converter("log2", "log10")
def _logb(ctx, node, outs):
    b = 2.0 if node.op == "log2" else 10.0
    return ctx.add("Div", [ctx.add("Log", [_x(ctx, node)]),
                           ctx.scalar_like(node.args[0], math.log(b))], outs)


@converter("log1p")
def _log1p(ctx, node, outs):
    return ctx.add("Log", [ctx.add("Add", [_x(ctx, node), ctx.scalar_like(node.args[0], 1)])],
                   outs)


@converter("expm1")
def _expm1(ctx, node, outs):
    return ctx.add("Sub", [ctx.add("Exp", [_x(ctx, node)]), ctx.scalar_like(node.args[0], 1)],
                   outs)


@converter("silu")
def _silu(ctx, node, outs):
    x = _x(ctx, node)
    return ctx.add("Mul", [x, ctx.add("Sigmoid", [x])], outs)


@converter("mish")
def _mish(ctx, node, outs):
    x = _x(ctx, node)
    return ctx.add("Mul", [x, ctx.add("Tanh", [ctx.add("Softplus", [x])])], outs)


@converter("gelu")
def _gelu(ctx, node, outs):
    x = _x(ctx, node)
    approx = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
    if ctx.opset >= 20:
        return ctx.add("Gelu", [x], outs, approximate=approx)
    def c(v):
        return ctx.scalar_like(node.args[0], v)

    if approx == "tanh":
        inner = ctx.add("Mul", [c(math.sqrt(2 / math.pi)), ctx.add(
            "Add", [x, ctx.add("Mul", [c(0.044715), ctx.add("Mul", [x, ctx.add(
                "Mul", [x, x])])])])])
        t = ctx.add("Tanh", [inner])
    else:
        t = ctx.add("Erf", [ctx.add("Mul", [x, c(1 / math.sqrt(2))])])
    return ctx.add("Mul", [ctx.add("Mul", [x, c(0.5)]), ctx.add("Add", [t, c(1.0)])], outs)


def _kw(node, name, pos, default):
    if name in node.kwargs:
        return node.kwargs[name]
    return node.args[pos] if len(node.args) > pos else default


def _params(node, names, defaults):
    """An activation's parameters: core's fused activations record them as ``params``; the
    public functions' keyword or positional arguments otherwise."""
    p = node.kwargs.get("params")
    if p is not None:
        return tuple(float(v) for v in p) + tuple(defaults[len(p):])
    return tuple(float(_kw(node, n, i + 1, d)) for i, (n, d) in enumerate(zip(names, defaults)))


@converter("leaky_relu")
def _leaky(ctx, node, outs):
    (slope,) = _params(node, ("negative_slope",), (0.01,))
    return ctx.add("LeakyRelu", [_x(ctx, node)], outs, alpha=slope)


@converter("elu")
def _elu(ctx, node, outs):
    """ELU with PyTorch's (alpha, scale, input_scale): Elu, Selu or Celu where one matches,
    else the formula."""
    alpha, scale, iscale = _params(node, ("alpha", "scale", "input_scale"), (1.0, 1.0, 1.0))
    x = _x(ctx, node)
    if iscale == 1.0 and scale == 1.0:
        return ctx.add("Elu", [x], outs, alpha=alpha)
    if iscale == 1.0:
        return ctx.add("Selu", [x], outs, alpha=alpha, gamma=scale)
    if scale == 1.0 and alpha * iscale == 1.0:
        return ctx.add("Celu", [x], outs, alpha=alpha)

    def c(v):
        return ctx.scalar_like(node.args[0], v)

    neg = ctx.add("Mul", [ctx.add("Sub", [ctx.add("Exp", [ctx.add("Mul", [x, c(iscale)])]),
                                          c(1.0)]), c(alpha * scale)])
    return ctx.add("Where", [ctx.add("Greater", [x, c(0.0)]), ctx.add("Mul", [x, c(scale)]),
                             neg], outs)


@converter("celu")
def _celu(ctx, node, outs):
    return ctx.add("Celu", [_x(ctx, node)], outs, alpha=float(_kw(node, "alpha", 1, 1.0)))


@converter("softplus")
def _softplus(ctx, node, outs):
    beta, threshold = _params(node, ("beta", "threshold"), (1.0, 20.0))
    x = _x(ctx, node)
    def c(v):
        return ctx.scalar_like(node.args[0], v)

    bx = ctx.add("Mul", [x, c(beta)]) if beta != 1 else x
    sp = ctx.add("Softplus", [bx])
    if beta != 1:
        sp = ctx.add("Div", [sp, c(beta)])
    return ctx.add("Where", [ctx.add("Greater", [bx, c(threshold)]), x, sp], outs)


@converter("log_sigmoid")
def _log_sigmoid(ctx, node, outs):
    # log(sigmoid(x)) = -softplus(-x) (ONNX's Softplus is the stable log(exp(x) + 1))
    return ctx.add("Neg", [ctx.add("Softplus", [ctx.add("Neg", [_x(ctx, node)])])], outs)


@converter("hardsigmoid")
def _hardsigmoid(ctx, node, outs):
    return ctx.add("HardSigmoid", [_x(ctx, node)], outs, alpha=1 / 6, beta=0.5)


def _clip(ctx, node, outs, lo, hi):
    dt = _out_dtype(ctx, node)
    ins = [_x(ctx, node),
           "" if lo is None else _operand(ctx, lo, dt),
           "" if hi is None else _operand(ctx, hi, dt)]
    if any(isinstance(v, Value) for v in (lo, hi)):
        y = ins[0]
        if lo is not None:
            y = ctx.add("Max", [y, ins[1]])
        if hi is not None:
            y = ctx.add("Min", [y, ins[2]])
        return ctx.add("Identity", [y], outs)
    while ins and ins[-1] == "":
        ins.pop()
    return ctx.add("Clip", ins, outs)


@converter("clamp")
def _clamp(ctx, node, outs):
    return _clip(ctx, node, outs, _kw(node, "min", 1, None), _kw(node, "max", 2, None))


@converter("clamp_min")
def _clamp_min(ctx, node, outs):
    return _clip(ctx, node, outs, _kw(node, "min", 1, None), None)


@converter("clamp_max")
def _clamp_max(ctx, node, outs):
    return _clip(ctx, node, outs, None, _kw(node, "max", 1, None))


@converter("hardtanh")
def _hardtanh(ctx, node, outs):
    lo, hi = _params(node, ("min_val", "max_val"), (-1.0, 1.0))
    return _clip(ctx, node, outs, lo, hi)


@converter("softshrink", "hardshrink")
def _shrink(ctx, node, outs):
    (lambd,) = _params(node, ("lambd",), (0.5,))
    return ctx.add("Shrink", [_x(ctx, node)], outs, lambd=lambd,
                   bias=lambd if node.op == "softshrink" else 0.0)


@converter("threshold")
def _threshold(ctx, node, outs):
    t, v = _params(node, ("threshold", "value"), (0.0, 0.0))
    x = _x(ctx, node)
    return ctx.add("Where", [ctx.add("LessOrEqual", [x, ctx.scalar_like(node.args[0], t)]),
                             ctx.scalar_like(node.args[0], v), x], outs)


@converter("relu6")
def _relu6(ctx, node, outs):
    return _clip(ctx, node, outs, 0.0, 6.0)


@converter("prelu")
def _prelu(ctx, node, outs):
    x, w = node.args[:2]
    r = ctx.rank(x)
    wn = ctx.name(w)
    if r > 2 and ctx.shape(w) and ctx.shape(w)[0] > 1:
        wn = ctx.add("Reshape", [wn, ctx.ints([-1] + [1] * (r - 2))])
    return ctx.add("PRelu", [ctx.name(x), wn], outs)


@converter("softmax", "log_softmax")
def _softmax(ctx, node, outs):
    x = node.args[0]
    dim = _kw(node, "dim", 1, None)
    dt = node.kwargs.get("dtype")
    xin = ctx.name(x)
    if dt is not None:
        xin = ctx.add("Cast", [xin], to=_onnx_type(ctx, _out_dtype(ctx, node)))
    return ctx.add("Softmax" if node.op == "softmax" else "LogSoftmax", [xin], outs,
                   axis=int(dim if dim is not None else -1))


@converter("to", "copy")
def _to(ctx, node, outs):
    x = node.args[0]
    dt = _out_dtype(ctx, node)
    y = ctx.name(x)
    if ctx.np_dtype(x) != dt:
        y = ctx.add("Cast", [y], to=_onnx_type(ctx, dt))
    if node.op == "copy" and ctx.shape(x) != tuple(node.kwargs["shape"]):
        shape = node.kwargs["shape"]
        xs = (1,) * (len(shape) - ctx.rank(x)) + ctx.shape(x)
        return ctx.add("Expand", [y, ctx.ints([1 if a == b else b for a, b in zip(xs, shape)])],
                       outs)
    return ctx.add("Identity", [y], outs)


@converter("clone")
def _clone(ctx, node, outs):
    return ctx.add("Identity", [node.args[0]], outs)


# ---- linear algebra -------------------------------------------------------------------------

@converter("matmul", "mm", "bmm")
def _matmul(ctx, node, outs):
    return ctx.add("MatMul", node.args[:2], outs)


@converter("addmm")
def _addmm(ctx, node, outs):
    bias, a, b = node.args[:3]
    beta = float(node.kwargs.get("beta", 1))
    alpha = float(node.kwargs.get("alpha", 1))
    return ctx.add("Gemm", [a, b, bias], outs, alpha=alpha, beta=beta)


@converter("baddbmm")
def _baddbmm(ctx, node, outs):
    inp, a, b = node.args[:3]
    beta = float(node.kwargs.get("beta", 1))
    alpha = float(node.kwargs.get("alpha", 1))
    p = ctx.add("MatMul", [a, b])
    if alpha != 1:
        p = ctx.add("Mul", [p, ctx.scalar_like(a, alpha)])
    if beta == 0:
        return ctx.add("Identity", [p], outs)
    i = ctx.name(inp) if beta == 1 else ctx.add("Mul", [inp, ctx.scalar_like(inp, beta)])
    return ctx.add("Add", [i, p], outs)


@converter("scatter")
def _scatter(ctx, node, outs):
    x, dim, idx = node.args[:3]
    src = node.args[3] if len(node.args) > 3 else node.kwargs.get("src", node.kwargs.get("value"))
    if node.kwargs.get("reduce"):
        ctx.unsupported("scatter with reduce= has no converter")
    dt = _out_dtype(ctx, node)
    i = _operand(ctx, idx, np.dtype(np.int64))
    if isinstance(src, Value):
        s = _operand(ctx, src, dt)
    else:
        s = ctx.add("Expand", [ctx.const(np.asarray(src, dt)), ctx.add("Shape", [i])])
    return ctx.add("ScatterElements", [ctx.name(x), i, s], outs, axis=int(dim))
