"""ONNX converters for the shape ops: the view steps of a trace (permute, reshape, slice,
expand, squeeze), joins, repeats, flips, triangles, gathers, and the sizes a trace keeps
symbolic (``symsize`` expressions built from Shape/Gather/arithmetic nodes)."""

import numpy as np

from fiamma.jit import Value
from fiamma.jit._views import dynamic_target

from ._converters import _kw, _onnx_type, _operand, _out_dtype, _x, converter

# ---- shape ----------------------------------------------------------------------------------

@converter("permute")
def _permute(ctx, node, outs):
    return ctx.add("Transpose", [node.args[0]], outs, perm=list(node.kwargs["arg"]))


@converter("reshape")
def _reshape(ctx, node, outs):
    x = node.args[0]
    if node.kwargs.get("symsize") is not None:
        if ctx.dynamic:
            return ctx.add("Reshape", [x, sym_sizes(ctx, node.kwargs["arg"],
                                                    node.kwargs["symsize"])], outs)
        # no dynamic axes: the traced sizes (the user's -1 kept)
        return ctx.add("Reshape", [x, ctx.ints(node.kwargs["arg"])], outs)
    if "sym" in node.kwargs:
        return ctx.add("Reshape", [x, _sym_shape(ctx, node, list(node.kwargs["arg"]))], outs)
    # the input's own leading sizes (0: copied) and a merge/split of the next dims (-1) stay
    # free, so batch axes stay dynamic
    target, keep = dynamic_target(node.kwargs["arg"], ctx.shape(x))
    target[:keep] = [0] * keep
    return ctx.add("Reshape", [x, ctx.ints(target)], outs)


@converter("unsqueeze", "squeeze")
def _squeeze(ctx, node, outs):
    d = node.kwargs["dim"]
    return ctx.add("Unsqueeze" if node.op == "unsqueeze" else "Squeeze",
                   [node.args[0], ctx.ints([d] if isinstance(d, int) else list(d))], outs)


@converter("slice")
def _slice(ctx, node, outs):
    sl = node.kwargs["arg"]
    axes = [a for a, _, _, _ in sl]
    starts, ends = [s for _, s, _, _ in sl], [e for _, _, e, _ in sl]
    syms = node.kwargs.get("symsize")
    if syms is not None and ctx.dynamic:  # bounds read from shapes
        st = sym_sizes(ctx, starts, [s for s, _ in syms])
        en = sym_sizes(ctx, ends, [e for _, e in syms])
    else:
        st, en = ctx.ints(starts), ctx.ints(ends)
    return ctx.add("Slice", [node.args[0], st, en, ctx.ints(axes),
                             ctx.ints([step for _, _, _, step in sl])], outs)


@converter("expand")
def _expand(ctx, node, outs):
    x = node.args[0]
    shape = list(node.kwargs["arg"])
    xs = (1,) * (len(shape) - ctx.rank(x)) + ctx.shape(x)
    ones = [1 if a == b or b == -1 else b for a, b in zip(xs, shape)]
    syms = node.kwargs.get("symsize")
    if syms is not None and ctx.dynamic:
        return ctx.add("Expand", [x, sym_sizes(ctx, ones, syms)], outs)
    if "sym" in node.kwargs:
        return ctx.add("Expand", [x, _sym_shape(ctx, node, ones)], outs)
    return ctx.add("Expand", [x, ctx.ints(ones)], outs)


def sym_expr(ctx, e):
    """An int64 [1] tensor computing a symbolic size expression (fiamma.jit._symbolic) from
    the shapes of the graph's values."""
    if not isinstance(e, tuple):
        return ctx.ints([int(e)])
    op = e[0]
    if op == "dim":
        return ctx.add("Gather", [ctx.shape_of(e[1]), ctx.ints([int(e[2])])], axis=0)
    if op == "neg":
        return ctx.add("Neg", [sym_expr(ctx, e[1])])
    a, b = sym_expr(ctx, e[1]), sym_expr(ctx, e[2])
    if op == "floordiv":  # ONNX's integer Div truncates: floor for the signs sizes have
        return ctx.add("Div", [a, b])
    return ctx.add({"add": "Add", "sub": "Sub", "mul": "Mul", "mod": "Mod", "min": "Min",
                    "max": "Max"}[op], [a, b])


def sym_sizes(ctx, arg, symsize):
    """A 1-D int64 shape: the traced ``arg`` with the symbolic entries computed in the file."""
    if all(s is None for s in symsize):
        return ctx.ints(arg)
    parts = [ctx.ints([int(a)]) if s is None else sym_expr(ctx, s)
             for a, s in zip(arg, symsize)]
    return ctx.add("Concat", parts, axis=0)


@converter("full")
def _full(ctx, node, outs):
    kw = node.kwargs
    dt = _out_dtype(ctx, node)
    value = ctx.helper.make_tensor("value", _onnx_type(ctx, dt), [1],
                                   [np.asarray(kw["fill_value"], dt).item()])
    shape = sym_sizes(ctx, kw["size"], kw["symsize"]) if ctx.dynamic else ctx.ints(kw["size"])
    return ctx.add("ConstantOfShape", [shape], outs, value=value)


@converter("arange")
def _arange(ctx, node, outs):
    kw = node.kwargs
    dt = _out_dtype(ctx, node)
    ends = kw["size"] if not ctx.dynamic else [None] * 3
    parts = []
    for a, s, e in zip(kw["size"], kw["symsize"], ends):
        if s is None or e is not None:
            parts.append(ctx.const(np.asarray(a, dt), "range"))
        else:
            v = ctx.add("Squeeze", [sym_expr(ctx, s), ctx.ints([0])])
            parts.append(ctx.add("Cast", [v], to=_onnx_type(ctx, dt)) if dt != np.int64 else v)
    return ctx.add("Range", parts, outs)


def _sym_shape(ctx, node, sizes):
    """A shape whose marked entries are k * (the dynamic input axis's size), computed in the
    file from the input's shape (see fiamma.onnx._symbolic)."""
    i, ax, sym = node.kwargs["sym"]
    n = ctx.add("Gather", [ctx.add("Shape", [ctx.name(ctx.graph.inputs[i])]), ctx.ints([ax])],
                axis=0)
    parts = []
    marked = dict(sym)
    for j, v in enumerate(sizes):
        if j in marked:
            parts.append(n if marked[j] == 1 else ctx.add("Mul", [n, ctx.ints([marked[j]])]))
        else:
            parts.append(ctx.ints([v]))
    return ctx.add("Concat", parts, axis=0)


@converter("cat")
def _cat(ctx, node, outs):
    dt = _out_dtype(ctx, node)
    # PyTorch's cat skips 1-D empty tensors
    parts = [_operand(ctx, p, dt) for p in node.args if ctx.shape(p) != (0,)]
    return ctx.add("Concat", parts, outs, axis=int(node.kwargs.get("dim", 0)))


@converter("stack")
def _stack(ctx, node, outs):
    d = int(node.kwargs.get("dim", 0))
    if d < 0:
        d += ctx.rank(node.args[0]) + 1
    axes = ctx.ints([d])
    parts = [ctx.add("Unsqueeze", [p, axes]) for p in node.args]
    return ctx.add("Concat", parts, outs, axis=d)


@converter("repeat", "tile")
def _repeat(ctx, node, outs):
    x = node.args[0]
    reps = list(node.kwargs.get("repeats", node.kwargs.get("dims", node.args[1:])))
    r = ctx.rank(x)
    y = ctx.name(x)
    if len(reps) > r:
        y = ctx.add("Reshape", [y, ctx.ints((1,) * (len(reps) - r) + ctx.shape(x))])
    elif len(reps) < r:
        reps = [1] * (r - len(reps)) + reps
    return ctx.add("Tile", [y, ctx.ints(reps)], outs)


@converter("repeat_interleave")
def _repeat_interleave(ctx, node, outs):
    """An int count: Unsqueeze after ``dim``, Tile that axis, Reshape it into ``dim`` (the
    other sizes from the input's Shape, so dynamic axes stay free); per-slice counts known
    when tracing (a constant tensor): a Gather of the repeated indices."""
    x = node.args[0]
    reps, dim = node.kwargs.get("repeats"), node.kwargs.get("dim")
    y = ctx.name(x)
    r = ctx.rank(x)
    if dim is None or r == 0:
        y = ctx.add("Reshape", [y, ctx.ints([-1])])
        shape, d, r = ctx.add("Shape", [y]), 0, 1
    else:
        shape, d = ctx.shape_of(x), dim + r if dim < 0 else dim
    if isinstance(reps, Value):
        if not ctx.is_const(reps):
            ctx.unsupported("repeat_interleave with counts computed by the model has no "
                            "converter (the output size depends on the values)")
        counts = np.asarray(ctx.value(reps)).reshape(-1).astype(np.int64)
        n = (ctx.shape(x)[d] if dim is not None and r == ctx.rank(x) else
             int(np.prod(ctx.shape(x))))
        if counts.size == 1:
            counts = np.full(n, counts[0])
        idx = ctx.const(np.repeat(np.arange(n, dtype=np.int64), counts), "ints")
        return ctx.add("Gather", [y, idx], outs, axis=d)
    reps = int(reps)
    u = ctx.add("Unsqueeze", [y, ctx.ints([d + 1])])
    t = ctx.add("Tile", [u, ctx.ints([1] * (d + 1) + [reps] + [1] * (r - d - 1))])
    parts = [ctx.ints([-1])]
    if d > 0:
        parts.insert(0, ctx.add("Slice", [shape, ctx.ints([0]), ctx.ints([d])]))
    if d + 1 < r:
        parts.append(ctx.add("Slice", [shape, ctx.ints([d + 1]), ctx.ints([r])]))
    target = parts[0] if len(parts) == 1 else ctx.add("Concat", parts, axis=0)
    return ctx.add("Reshape", [t, target], outs)


@converter("flip")
def _flip(ctx, node, outs):
    dims = node.kwargs["dims"]
    n = len(dims)
    big = np.iinfo(np.int64).max
    return ctx.add("Slice", [node.args[0], ctx.ints([-1] * n), ctx.ints([-big] * n),
                             ctx.ints(dims), ctx.ints([-1] * n)], outs)


@converter("tril", "triu")
def _trilu(ctx, node, outs):
    k = int(_kw(node, "diagonal", 1, 0))
    return ctx.add("Trilu", [ctx.name(node.args[0]), ctx.const(np.asarray(k, np.int64))], outs,
                   upper=int(node.op == "triu"))


@converter("index_select")
def _index_select(ctx, node, outs):
    x, dim, idx = node.args[:3]
    i = ctx.name(idx)
    if ctx.np_dtype(idx) != np.int64:
        i = ctx.add("Cast", [i], to=_onnx_type(ctx, np.int64))
    return ctx.add("Gather", [ctx.name(x), i], outs, axis=int(dim))


@converter("embedding")
def _embedding(ctx, node, outs):
    """torch.embedding's lookup: Gather of the weight's rows (padding_idx and the gradient
    options only matter for training)."""
    w, idx = node.args[:2]
    return ctx.add("Gather", [ctx.name(w), _operand(ctx, idx, np.dtype(np.int64))], outs,
                   axis=0)


@converter("gather")
def _gather(ctx, node, outs):
    x, dim, idx = node.args[:3]
    return ctx.add("GatherElements", [x, _operand(ctx, idx, np.dtype(np.int64))], outs,
                   axis=int(dim))


@converter("cumsum")
def _cumsum(ctx, node, outs):
    d = _kw(node, "dim", 1, 0)
    return ctx.add("CumSum", [_x(ctx, node), ctx.const(np.asarray(d, np.int64))], outs)
