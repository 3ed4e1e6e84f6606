"""ONNX converters for core's fused elementwise losses (``fiamma.fused.loss``: mse_loss,
l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy, binary_cross_entropy_with_logits,
soft_margin_loss, kl_div): the loss's formula in ONNX ops, then ReduceMean/ReduceSum over all
elements for ``mean``/``sum``; and for ``fiamma.fused.nll_loss``, ONNX's
NegativeLogLikelihoodLoss. ONNX has no log1p: BCE's ``log(1 - x)`` is ``Log(1 - x)``
(the same value except for x below ~1e-8, where both round to -x); the softplus terms are
ONNX's Softplus."""

import numpy as np

from ._converters import _onnx_type, _operand, _out_dtype, converter
from ._reduce import _reduce_op

_NAMES = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
          "binary_cross_entropy_with_logits", "soft_margin_loss", "kl_div")


@converter(*_NAMES)
def _loss(ctx, node, outs):
    args = list(node.args) + [None] * (4 - len(node.args))
    x, t, w, pw = args[:4]
    reduction = node.kwargs.get("reduction", "mean")
    p = float(node.kwargs.get("param", 0.0))
    dt = _out_dtype(ctx, node)
    X, T = _operand(ctx, x, dt), _operand(ctx, t, dt)

    def c(v):
        return ctx.scalar_like(None, v, dtype=dt)

    def add(op, *ins):
        return ctx.add(op, list(ins))

    name = node.op
    if name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"):
        d = add("Sub", X, T)
        a = add("Abs", d)
        if name == "mse_loss":
            v = add("Mul", d, d)
        elif name == "l1_loss":
            v = a
        elif name == "smooth_l1_loss":
            v = add("Where", add("Less", a, c(p)), add("Mul", add("Mul", a, a), c(0.5 / p)),
                    add("Sub", a, c(0.5 * p)))
        else:
            v = add("Where", add("LessOrEqual", a, c(p)), add("Mul", add("Mul", a, a), c(0.5)),
                    add("Mul", add("Sub", a, c(0.5 * p)), c(p)))
    elif name == "binary_cross_entropy":
        lx = add("Max", add("Log", X), c(-100.0))
        l1x = add("Max", add("Log", add("Sub", c(1.0), X)), c(-100.0))
        v = add("Sub", add("Mul", add("Sub", T, c(1.0)), l1x), add("Mul", T, lx))
    elif name == "binary_cross_entropy_with_logits":
        sp = add("Softplus", add("Neg", X))
        if pw is not None:
            lw = add("Add", c(1.0), add("Mul", add("Sub", _operand(ctx, pw, dt), c(1.0)), T))
            sp = add("Mul", lw, sp)
        v = add("Add", add("Mul", add("Sub", c(1.0), T), X), sp)
    elif name == "soft_margin_loss":
        v = add("Softplus", add("Neg", add("Mul", T, X)))
    elif p:  # kl_div, log-space target
        v = add("Mul", add("Exp", T), add("Sub", T, X))
    else:  # kl_div: xlogy(t, t) - t x
        tl = add("Where", add("Equal", T, c(0.0)), c(0.0), add("Mul", T, add("Log", T)))
        v = add("Sub", tl, add("Mul", T, X))
    if w is not None:
        v = add("Mul", v, _operand(ctx, w, dt))
    if reduction == "none":
        return ctx.add("Identity", [v], outs)
    flat = add("Reshape", v, ctx.ints([-1]))
    op = "ReduceMean" if reduction == "mean" else "ReduceSum"
    if reduction == "batchmean" and ctx.rank(x):  # kl_div: the sum over the first size
        total = _reduce_op(ctx, op, flat, [0], False)
        b = ctx.add("Gather", [ctx.shape_of(x), ctx.const(np.asarray(0, np.int64))], axis=0)
        return ctx.add("Div", [total, ctx.add("Cast", [b], to=_onnx_type(ctx, dt))], outs)
    return _reduce_op(ctx, op, flat, [0], False, outs)


@converter("nll_loss", "cross_entropy_loss")
def _nll_loss(ctx, node, outs):
    """ONNX's NegativeLogLikelihoodLoss (opset 12+), which has PyTorch's semantics (class
    weights, ignore_index, the weighted mean); a (C,) input is run as one row of (1, C).
    Cross entropy is LogSoftmax over the class dim first (without label smoothing)."""
    args = list(node.args) + [None] * (3 - len(node.args))
    x, t, w = args[:3]
    kw = node.kwargs
    reduction = kw.get("reduction", "mean")
    dt = ctx.np_dtype(x)
    X, T = ctx.name(x), _operand(ctx, t, np.dtype(np.int64))
    if node.op == "cross_entropy_loss":
        if kw.get("label_smoothing"):
            ctx.unsupported("cross_entropy with label_smoothing has no converter")
        X = ctx.add("LogSoftmax", [X], axis=0 if ctx.rank(x) == 1 else 1)
    one_d = ctx.rank(x) == 1
    if one_d:
        X = ctx.add("Unsqueeze", [X, ctx.ints([0])])
        T = ctx.add("Unsqueeze", [T, ctx.ints([0])])
    ins = [X, T] + ([_operand(ctx, w, dt)] if w is not None else [])
    attrs = {"reduction": reduction, "ignore_index": int(kw.get("ignore_index", -100))}
    if one_d and reduction == "none":
        v = ctx.add("NegativeLogLikelihoodLoss", ins, **attrs)
        return ctx.add("Squeeze", [v, ctx.ints([0])], outs)
    return ctx.add("NegativeLogLikelihoodLoss", ins, outs, **attrs)
