"""ONNX converters for reductions and the index-valued/order ops (argmax, max/min with
indices, topk, sort, any/all, var/std, norm, one_hot)."""

import numpy as np

from ._converters import _kw, _onnx_type, _operand, _out_dtype, converter

# ---- reductions -----------------------------------------------------------------------------

_REDUCE = {"sum": "ReduceSum", "mean": "ReduceMean", "amax": "ReduceMax", "amin": "ReduceMin",
           "prod": "ReduceProd", "logsumexp": "ReduceLogSumExp"}


@converter(*_REDUCE)
def _reduce(ctx, node, outs):
    x = node.args[0]
    dim = _kw(node, "dim", 1, None)
    keep = bool(_kw(node, "keepdim", 2, False))
    r = ctx.rank(x)
    if dim is None or dim == () or dim == []:
        axes = list(range(r))
    else:
        axes = [int(d) % max(r, 1) for d in (dim if isinstance(dim, (tuple, list)) else [dim])]
    dt = _out_dtype(ctx, node)
    xin = _operand(ctx, x, dt)
    op = _REDUCE[node.op]
    if op == "ReduceSum" or ctx.opset >= 18:
        return ctx.add(op, [xin, ctx.ints(axes)], outs, keepdims=int(keep))
    return ctx.add(op, [xin], outs, axes=axes, keepdims=int(keep))


def _reduce_mean(ctx, x, axes):
    if ctx.opset >= 18:
        return ctx.add("ReduceMean", [x, ctx.ints(axes)], keepdims=1)
    return ctx.add("ReduceMean", [x], axes=list(axes), keepdims=1)


# ---- index-valued and order ops -------------------------------------------------------------

def _axes(ctx, x, dim):
    r = ctx.rank(x)
    if dim is None or dim == () or dim == []:
        return list(range(r))
    return [int(d) % max(r, 1) for d in (dim if isinstance(dim, (tuple, list)) else [dim])]


def _reduce_op(ctx, op, x, axes, keep, outs=None):
    if op == "ReduceSum" or ctx.opset >= 18:
        return ctx.add(op, [x, ctx.ints(axes)], outs, keepdims=int(keep))
    return ctx.add(op, [x], outs, axes=list(axes), keepdims=int(keep))


@converter("argmax", "argmin")
def _argmax(ctx, node, outs):
    x = node.args[0]
    dim, keep = node.kwargs.get("dim"), bool(node.kwargs.get("keepdim", False))
    op = "ArgMax" if node.op == "argmax" else "ArgMin"
    if dim is None:
        flat = ctx.add("Reshape", [x, ctx.ints([-1])])
        y = ctx.add(op, [flat], axis=0, keepdims=0)
        if keep:
            return ctx.add("Reshape", [y, ctx.ints([1] * ctx.rank(x))], outs)
        return ctx.add("Identity", [y], outs)
    return ctx.add(op, [x], outs, axis=int(dim), keepdims=int(keep))


@converter("max", "min")
def _maxmin(ctx, node, outs):
    x = node.args[0]
    dim, keep = node.kwargs.get("dim"), bool(node.kwargs.get("keepdim", False))
    red = "ReduceMax" if node.op == "max" else "ReduceMin"
    if dim is None or isinstance(dim, (tuple, list)):
        return _reduce_op(ctx, red, ctx.name(x), _axes(ctx, x, dim), keep, outs[:1])
    _reduce_op(ctx, red, ctx.name(x), _axes(ctx, x, dim), keep, outs[:1])
    return ctx.add("ArgMax" if node.op == "max" else "ArgMin", [x], outs[1:2],
                   axis=int(dim), keepdims=int(keep))


@converter("any", "all")
def _anyall(ctx, node, outs):
    x = node.args[0]
    kw = node.kwargs
    i = ctx.add("Cast", [x], to=_onnx_type(ctx, np.int32))
    r = _reduce_op(ctx, "ReduceMax" if node.op == "any" else "ReduceMin", i,
                   _axes(ctx, x, kw.get("dim")), bool(kw.get("keepdim", False)))
    return ctx.add("Cast", [r], outs, to=_onnx_type(ctx, np.bool_))


@converter("var", "std")
def _var(ctx, node, outs):
    x = node.args[0]
    kw = node.kwargs
    axes = _axes(ctx, x, kw.get("dim"))
    keep = bool(kw.get("keepdim", False))
    corr = kw.get("correction")
    corr = 1.0 if corr is None else float(corr)
    n = int(np.prod([ctx.shape(x)[a] for a in axes]))
    d = ctx.add("Sub", [x, _reduce_mean(ctx, ctx.name(x), axes)])
    ss = _reduce_op(ctx, "ReduceSum", ctx.add("Mul", [d, d]), axes, keep)
    v = ctx.add("Div", [ss, ctx.scalar_like(x, max(n - corr, 0.0))])
    return ctx.add("Sqrt" if node.op == "std" else "Identity", [v], outs)


@converter("norm")
def _norm(ctx, node, outs):
    x = node.args[0]
    kw = node.kwargs
    p = kw.get("p", 2.0)
    if node.kwargs.get("dtype") is not None:
        ctx.unsupported("norm with dtype= has no converter")
    axes = _axes(ctx, x, kw.get("dim"))
    keep = bool(kw.get("keepdim", False))
    if p in (2, 2.0, "fro"):
        return _reduce_op(ctx, "ReduceL2", ctx.name(x), axes, keep, outs)
    if p in (1, 1.0):
        return _reduce_op(ctx, "ReduceL1", ctx.name(x), axes, keep, outs)
    if p == float("inf"):
        return _reduce_op(ctx, "ReduceMax", ctx.add("Abs", [x]), axes, keep, outs)
    ctx.unsupported(f"norm with p={p!r} has no converter")


@converter("one_hot")
def _one_hot(ctx, node, outs):
    x = node.args[0]
    c = int(node.kwargs["num_classes"])
    return ctx.add("OneHot", [_operand(ctx, x, np.dtype(np.int64)),
                              ctx.const(np.asarray(c, np.int64)),
                              ctx.const(np.asarray([0, 1], np.int64))], outs, axis=-1)


