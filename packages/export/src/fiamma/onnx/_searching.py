"""ONNX converters of searchsorted/bucketize and unique/unique_consecutive.

searchsorted is fiamma's binary search step for step (every value's ``lo``/``hi`` halved
together in a Loop that stops when all have met), so it gives the same index as eager for any
sequence, NaNs and unsorted sequences included. unique sorts with TopK (ascending, stable, NaNs
last in ONNX Runtime, as fiamma sorts) and then finds the runs of equal values, as
unique_consecutive does on the unsorted values: NaNs stay distinct and -0.0 equals 0.0, as in
eager. ONNX's own Unique is not used for that: ONNX Runtime merges NaNs with other values.
unique along a ``dim`` is ONNX Unique (slices compared in order) for integer and bool tensors;
for floating ones it is refused (NaN again)."""

import numpy as np

from ._converters import _onnx_type, converter

_BIG = np.iinfo(np.int64).max
# dtypes ONNX Runtime compares and sorts, for those it does not (the casts keep the order)
_COMPARABLE = {"bool": np.int32, "int8": np.int32, "int16": np.int32, "uint8": np.int32,
               "uint16": np.int32, "uint32": np.int64, "float16": np.float32,
               "bfloat16": np.float32}


def _as(ctx, x, dt):
    """``x`` (a traced value or an ONNX name) cast to ``dt`` when its dtype differs."""
    have = ctx.np_dtype(x) if not isinstance(x, str) else None
    if have is not None and have == np.dtype(dt):
        return ctx.name(x)
    return ctx.add("Cast", [x], to=_onnx_type(ctx, dt))


def _to_compute(ctx, x, ct, dt):
    """``x`` in the op's compute dtype ``ct`` (rounded as eager casts it), then in ``dt``."""
    if ctx.np_dtype(x).name != ct:
        x = ctx.add("Cast", [x], to=_onnx_type(ctx, np.dtype(ct)))
        return x if np.dtype(ct) == dt else ctx.add("Cast", [x], to=_onnx_type(ctx, dt))
    return _as(ctx, x, dt)


def _comparable(dtype_name):
    return np.dtype(_COMPARABLE.get(dtype_name, dtype_name))


def _ci(ctx, v):
    return ctx.const(np.asarray(v, np.int64))


@converter("searchsorted")
def _searchsorted(ctx, node, outs):
    kw = node.kwargs
    seq = node.args[0]
    rest = list(node.args[1:])
    sorter = rest.pop() if kw.get("sorter") else None
    ct = kw.get("compute_dtype") or ctx.np_dtype(seq).name
    if ct in ("complex64", "complex128"):
        ctx.unsupported(f"{node.op} of complex tensors has no converter")
    dt = _comparable(ct)
    if dt == np.uint64:
        ctx.unsupported(f"{node.op} of uint64 tensors has no converter (ONNX Runtime does not "
                        "compare them)")
    s = _to_compute(ctx, seq, ct, dt)
    if kw.get("scalar") is not None:
        v = ctx.const(np.asarray(np.asarray(kw["scalar"]).astype(ct), dt))
    else:
        v = _to_compute(ctx, rest[0], ct, dt)
    one_d = ctx.rank(seq) == 1
    n = ctx.add("Gather", [ctx.add("Shape", [s]), _ci(ctx, -1)], axis=0)          # scalar
    vshape = ctx.add("Shape", [v])
    lo0 = ctx.add("ConstantOfShape", [vshape], value=ctx.helper.make_tensor(
        "zero", _onnx_type(ctx, np.int64), [1], [0]))
    hi0 = ctx.add("Expand", [n, vshape])
    start = ctx.add("And", [ctx.add("Greater", [n, _ci(ctx, 0)]),
                            ctx.add("Greater", [ctx.add("Size", [v]), _ci(ctx, 0)])])
    last = ctx.add("Sub", [n, _ci(ctx, 1)])

    outer, ctx.nodes = ctx.nodes, []                     # the Loop's body: one halving step
    it, cond, lo, hi = (ctx.fresh(h) for h in ("iter", "cond", "lo", "hi"))

    def take(data, idx):
        if one_d:
            return ctx.add("Gather", [data, idx], axis=0)
        return ctx.add("GatherElements", [data, idx], axis=-1)

    act = ctx.add("Less", [lo, hi])
    mid = ctx.add("Add", [lo, ctx.add("Div", [ctx.add("Sub", [hi, lo]), _ci(ctx, 2)])])
    at = ctx.add("Min", [mid, last])
    if sorter is not None:
        at = take(sorter, at)
    m = take(s, at)
    go = ctx.add("Not", [ctx.add("Greater" if kw.get("right") else "GreaterOrEqual", [m, v])])
    lo1 = ctx.add("Where", [ctx.add("And", [act, go]),
                            ctx.add("Add", [mid, _ci(ctx, 1)]), lo])
    hi1 = ctx.add("Where", [ctx.add("And", [act, ctx.add("Not", [go])]), mid, hi])
    more = ctx.add("Cast", [ctx.add("Less", [lo1, hi1])], to=_onnx_type(ctx, np.int64))
    cond1 = ctx.add("Greater", [ctx.add("ReduceMax", [more], keepdims=0), _ci(ctx, 0)])
    i64, b = _onnx_type(ctx, np.int64), _onnx_type(ctx, np.bool_)
    info = ctx.helper.make_tensor_value_info
    body = ctx.helper.make_graph(
        ctx.nodes, ctx.fresh("searchsorted_body"),
        [info(it, i64, []), info(cond, b, []), info(lo, i64, None), info(hi, i64, None)],
        [info(cond1, b, []), info(lo1, i64, None), info(hi1, i64, None)])
    ctx.nodes = outer
    res = ctx.fresh("lo")
    ctx.add("Loop", [_ci(ctx, 64), start, lo0, hi0], [res, ctx.fresh("hi")], body=body)
    if kw.get("out_int32"):
        return ctx.add("Cast", [res], outs, to=_onnx_type(ctx, np.int32))
    return ctx.add("Identity", [res], outs)


def _runs(ctx, data, rows):
    """Runs of equal consecutive elements (rows: slices along axis 0) of ``data``: the flag of
    each run's first element, its positions, the run of each element, each run's length."""
    n = ctx.add("Slice", [ctx.add("Shape", [data]), _ci(ctx, [0]), _ci(ctx, [1])])   # (1,)
    prev = ctx.add("Slice", [data, _ci(ctx, [0]), _ci(ctx, [-1]), _ci(ctx, [0])])
    nxt = ctx.add("Slice", [data, _ci(ctx, [1]), _ci(ctx, [_BIG]), _ci(ctx, [0])])
    new = ctx.add("Not", [ctx.add("Equal", [nxt, prev])])          # NaN != NaN: distinct
    if rows:
        new = ctx.add("Greater", [ctx.add("ReduceSum", [
            ctx.add("Cast", [new], to=_onnx_type(ctx, np.int64)), _ci(ctx, [1])], keepdims=0),
            _ci(ctx, 0)])
    flag = ctx.add("Concat", [ctx.const(np.asarray([True])), new], axis=0)
    flag = ctx.add("Slice", [flag, _ci(ctx, [0]), n])              # none for an empty input
    starts = ctx.add("Squeeze", [ctx.add("NonZero", [flag]), _ci(ctx, [0])])
    inverse = ctx.add("Sub", [ctx.add("CumSum", [
        ctx.add("Cast", [flag], to=_onnx_type(ctx, np.int64)), _ci(ctx, 0)]), _ci(ctx, 1)])
    ends = ctx.add("Concat", [ctx.add("Slice", [starts, _ci(ctx, [1]), _ci(ctx, [_BIG])]), n],
                   axis=0)
    counts = ctx.add("Sub", [ends, starts])
    return flag, starts, inverse, counts


def _results(ctx, node, outs, values, inverse, counts):
    kw = node.kwargs
    want = [values] + ([inverse] if kw.get("return_inverse") else []) + \
        ([counts] if kw.get("return_counts") else [])
    for w, o in zip(want, outs):
        ctx.add("Identity", [w], o)
    return outs


def _dim(ctx, node):
    d = node.kwargs.get("dim")
    if d is None:
        return None
    nd = ctx.rank(node.args[0])
    if nd == 0:
        ctx.unsupported(f"{node.op}(dim={d}) of a 0-d tensor")
    return int(d) % nd


@converter("unique_consecutive")
def _unique_consecutive(ctx, node, outs):
    x = node.args[0]
    d = _dim(ctx, node)
    if d is None:
        flat = ctx.add("Reshape", [x, _ci(ctx, [-1])])
        flag, _, inverse, counts = _runs(ctx, flat, rows=False)
        values = ctx.add("Compress", [flat, flag], axis=0)
        inverse = ctx.add("Reshape", [inverse, ctx.shape_of(x)])
    else:
        nd = ctx.rank(x)
        perm = [d] + [i for i in range(nd) if i != d]
        moved = ctx.add("Transpose", [x], perm=perm)
        shp = ctx.add("Shape", [moved])
        rest = ctx.add("ReduceProd", [ctx.add("Slice", [shp, _ci(ctx, [1]), _ci(ctx, [_BIG])])],
                       keepdims=1)
        rows = ctx.add("Reshape", [moved, ctx.add("Concat", [
            ctx.add("Slice", [shp, _ci(ctx, [0]), _ci(ctx, [1])]), rest], axis=0)])
        flag, _, inverse, counts = _runs(ctx, rows, rows=True)
        values = ctx.add("Compress", [x, flag], axis=d)
    return _results(ctx, node, outs, values, inverse, counts)


@converter("unique")
def _unique(ctx, node, outs):
    x = node.args[0]
    dt = ctx.np_dtype(x)
    d = _dim(ctx, node)
    if dt.kind == "c":
        ctx.unsupported("unique of a complex tensor has no converter")
    if d is not None:
        if dt.kind == "f":
            ctx.unsupported(f"unique(dim={node.kwargs['dim']}) of a floating tensor has no "
                            "converter (ONNX Unique merges NaNs with other values)")
        vals, _, inverse, counts = ctx.add(
            "Unique", [_as(ctx, x, _comparable(dt.name))],
            [ctx.fresh("u"), ctx.fresh("first"), ctx.fresh("inv"), ctx.fresh("cnt")],
            axis=d, sorted=1)
        return _results(ctx, node, outs, _as(ctx, vals, dt) if _comparable(dt.name) != dt
                        else vals, inverse, counts)
    key_dt = _comparable(dt.name)
    if key_dt == np.uint64:
        ctx.unsupported("unique of a uint64 tensor has no converter (ONNX Runtime does not "
                        "sort it)")
    flat = ctx.add("Reshape", [x, _ci(ctx, [-1])])
    n = ctx.add("Shape", [flat])
    key = flat if key_dt == dt else ctx.add("Cast", [flat], to=_onnx_type(ctx, key_dt))
    _, order = ctx.add("TopK", [key, n], [ctx.fresh("sorted"), ctx.fresh("order")], axis=0,
                       largest=0, sorted=1)
    data = ctx.add("Gather", [flat, order], axis=0)
    flag, _, inv_sorted, counts = _runs(ctx, data, rows=False)
    values = ctx.add("Compress", [data, flag], axis=0)
    zeros = ctx.add("ConstantOfShape", [n], value=ctx.helper.make_tensor(
        "zero", _onnx_type(ctx, np.int64), [1], [0]))
    inverse = ctx.add("ScatterElements", [zeros, order, inv_sorted], axis=0)
    inverse = ctx.add("Reshape", [inverse, ctx.shape_of(x)])
    return _results(ctx, node, outs, values, inverse, counts)


def _tensor_args(ctx, node):
    return dict(zip(node.kwargs.get("tensor_args", ()), node.args))


@converter("count_nonzero")
def _count_nonzero(ctx, node, outs):
    x = node.args[0]
    dim = node.kwargs.get("dim")
    nz = ctx.add("Cast", [ctx.add("Not", [ctx.add("Equal", [x, ctx.scalar_like(x, 0)])])],
                 to=_onnx_type(ctx, np.int64))
    if dim is None:
        return ctx.add("ReduceSum", [ctx.add("Reshape", [nz, _ci(ctx, [-1])]), _ci(ctx, [0])],
                       outs, keepdims=0)
    dims = [dim] if isinstance(dim, int) else list(dim)
    return ctx.add("ReduceSum", [nz, _ci(ctx, dims)], outs, keepdims=0)


@converter("isin")
def _isin(ctx, node, outs):
    """Each element against every test element (Equal over a broadcast, then any): memory
    elements x test elements; NaN is in nothing, as in eager."""
    kw = node.kwargs
    given = _tensor_args(ctx, node)
    ct = kw["compute_dtype"]
    dt = _comparable(ct)
    if dt.kind == "c" or dt == np.uint64:
        ctx.unsupported(f"isin of {ct} tensors has no converter")

    def side(p):
        if p in given:
            return _to_compute(ctx, given[p], ct, dt)
        return ctx.const(np.asarray(np.asarray(kw[p]).astype(ct), dt))

    e, t = side("elements"), side("test_elements")
    hit = ctx.add("Equal", [ctx.add("Unsqueeze", [e, _ci(ctx, [-1])]),
                            ctx.add("Reshape", [t, _ci(ctx, [-1])])])
    n = ctx.add("ReduceSum", [ctx.add("Cast", [hit], to=_onnx_type(ctx, np.int64)),
                              _ci(ctx, [-1])], keepdims=0)
    return ctx.add("LessOrEqual" if kw.get("invert") else "Greater", [n, _ci(ctx, 0)], outs)


@converter("bincount")
def _bincount(ctx, node, outs):
    """A ScatterElements adding ones (or the weights) into max(input) + 1 (at least
    ``minlength``) zeros. Negative values, which eager refuses, are not checked in the file."""
    given = _tensor_args(ctx, node)
    x = given["input"]
    odt = ctx.np_dtype(node.outputs[0])
    minlength = int(node.kwargs.get("minlength") or 0)
    xi = _as(ctx, x, np.int64)
    top = ctx.add("ReduceMax", [ctx.add("Concat", [xi, _ci(ctx, [minlength - 1])], axis=0)],
                  keepdims=1)
    size = ctx.add("Add", [top, _ci(ctx, [1])])
    zeros = ctx.add("ConstantOfShape", [size], value=ctx.helper.make_tensor(
        "zero", _onnx_type(ctx, odt), [1], [0]))
    if "weights" in given:
        upd = _as(ctx, given["weights"], odt)
    else:
        upd = ctx.add("ConstantOfShape", [ctx.add("Shape", [xi])], value=ctx.helper.make_tensor(
            "one", _onnx_type(ctx, odt), [1], [1]))
    return ctx.add("ScatterElements", [zeros, xi, upd], outs, axis=0, reduction="add")
