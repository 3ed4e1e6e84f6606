"""ONNX converters for the ops with data-dependent sizes that detection models use: nonzero
(NonZero), fiamma.detection.nms (NonMaxSuppression), fiamma.vision's roi_align (RoiAlign),
top-k with a count computed from sizes (TopK with a computed K) and advanced indexing with
several index tensors (GatherND)."""

import numpy as np

from ._converters import _int_floordiv, _operand, converter
from ._shape import sym_expr


@converter("nonzero")
def _nonzero(ctx, node, outs):
    x = node.args[0]
    if ctx.rank(x) == 0:
        ctx.unsupported("nonzero of a 0-d tensor has no converter")
    nz = ctx.add("NonZero", [x])                                   # (ndim, count)
    if not node.kwargs.get("as_tuple"):
        return ctx.add("Transpose", [nz], outs, perm=[1, 0])
    for j, o in enumerate(outs):
        ctx.add("Gather", [nz, ctx.const(np.asarray(j, np.int64))], o, axis=0)
    return outs


@converter("nms")
def _nms(ctx, node, outs):
    """Greedy NMS of one class: ONNX's NonMaxSuppression over a batch of one and one class
    keeps the same boxes in the same (decreasing score) order; it takes the corners in either
    order, and a box is dropped when its IoU is greater than the threshold, as in fiamma."""
    boxes, scores = node.args
    dt = ctx.np_dtype(boxes)
    b = ctx.add("Unsqueeze", [_operand(ctx, boxes, np.dtype(np.float32)) if dt != np.float32
                              else ctx.name(boxes), ctx.ints([0])])
    s = ctx.add("Unsqueeze", [_operand(ctx, scores, np.dtype(np.float32))
                              if ctx.np_dtype(scores) != np.float32 else ctx.name(scores),
                              ctx.ints([0, 1])])
    most = ctx.const(np.asarray([np.iinfo(np.int64).max], np.int64), "max_boxes")
    iou = ctx.const(np.asarray([node.kwargs["iou_threshold"]], np.float32), "iou")
    sel = ctx.add("NonMaxSuppression", [b, s, most, iou], center_point_box=0)  # (K, 3)
    return ctx.add("Gather", [sel, ctx.const(np.asarray(2, np.int64))], outs, axis=1)


@converter("roi_align")
def _roi_align(ctx, node, outs):
    """torchvision's roi_align: ``aligned=False`` is ONNX's ``output_half_pixel`` (regions at
    least one pixel), ``aligned=True`` its ``half_pixel``; sampling_ratio <= 0 (adaptive) is
    ONNX's 0."""
    x, rois = node.args
    kw = node.kwargs
    dt = ctx.np_dtype(x)
    r = _operand(ctx, rois, dt)
    idx = ctx.add("Cast", [ctx.add("Gather", [r, ctx.const(np.asarray(0, np.int64))], axis=1)],
                  to=ctx.helper.np_dtype_to_tensor_dtype(np.dtype(np.int64)))
    box = ctx.add("Slice", [r, ctx.ints([1]), ctx.ints([5]), ctx.ints([1])])
    oh, ow = kw["output_size"]
    return ctx.add("RoiAlign", [x, box, idx], outs[:1], mode="avg", output_height=int(oh),
                   output_width=int(ow), sampling_ratio=max(int(kw["sampling_ratio"]), 0),
                   spatial_scale=float(kw["spatial_scale"]),
                   coordinate_transformation_mode="half_pixel" if kw["aligned"]
                   else "output_half_pixel")


@converter("topk")
def _topk(ctx, node, outs):
    kw = node.kwargs
    k = sym_expr(ctx, kw["symk"]) if kw.get("symk") is not None and ctx.dynamic \
        else ctx.ints([int(kw["k"])])
    return ctx.add("TopK", [node.args[0], k], outs, axis=int(kw.get("dim", -1)),
                   largest=int(kw.get("largest", True)), sorted=1)


@converter("sort")
def _sort(ctx, node, outs):
    x = node.args[0]
    kw = node.kwargs
    d = int(kw.get("dim", -1)) % ctx.rank(x)
    if kw.get("stable"):
        ctx.unsupported("sort(stable=True) has no converter (ONNX TopK does not promise it)")
    n = ctx.add("Gather", [ctx.shape_of(x), ctx.ints([d])], axis=0) if ctx.dynamic \
        else ctx.ints([ctx.shape(x)[d]])
    return ctx.add("TopK", [x, n], outs, axis=d,
                   largest=int(bool(kw.get("descending", False))), sorted=1)


@converter("argsort")
def _argsort(ctx, node, outs):
    """TopK over the whole dim, its indices (fiamma's argsort is stable; TopK orders equal
    values by ONNX Runtime's rule, so ties may come in another order)."""
    x = node.args[0]
    kw = node.kwargs
    d = int(kw.get("dim", -1)) % max(ctx.rank(x), 1)
    n = ctx.add("Gather", [ctx.shape_of(x), ctx.ints([d])], axis=0) if ctx.dynamic \
        else ctx.ints([ctx.shape(x)[d]])
    ctx.add("TopK", [x, n], [ctx.fresh("sorted"), outs[0]], axis=d,
            largest=int(bool(kw.get("descending", False))), sorted=1)
    return outs


@converter("index")
def _index(ctx, node, outs):
    """One index tensor: Gather along its dim; several (adjacent, from dim 0): GatherND over
    the broadcast indices stacked on a last axis."""
    x, indices = node.args
    used = [(p, t) for p, t in enumerate(indices) if t is not None]
    if any(ctx.np_dtype(t).kind == "b" for _, t in used):
        ctx.unsupported("advanced indexing with a boolean mask has no converter")
    if len(used) == 1:
        p, t = used[0]
        return ctx.add("Gather", [x, _operand(ctx, t, np.dtype(np.int64))], outs, axis=p)
    if [p for p, _ in used] != list(range(len(used))):
        ctx.unsupported("advanced indexing with index tensors that are not the first dims "
                        "has no converter")
    idx = [_operand(ctx, t, np.dtype(np.int64)) for _, t in used]
    total = idx[0]
    for i in idx[1:]:
        total = ctx.add("Add", [total, i])
    shape = ctx.add("Shape", [total])
    last = ctx.ints([-1])
    parts = [ctx.add("Unsqueeze", [ctx.add("Expand", [i, shape]), last]) for i in idx]
    # negative positions count from the end in fiamma; GatherND takes them too
    return ctx.add("GatherND", [x, ctx.add("Concat", parts, axis=-1)], outs)


@converter("bitwise_and", "bitwise_or", "bitwise_xor")
def _bitwise(ctx, node, outs):
    dt = ctx.np_dtype(node.outputs[0])
    a, b = (_operand(ctx, x, dt) for x in node.args[:2])
    name = node.op.split("_")[1]
    if dt.kind == "b":
        return ctx.add(name.capitalize(), [a, b], outs)
    if ctx.opset < 18:
        ctx.unsupported(f"integer {node.op} needs opset 18 or newer")
    return ctx.add("Bitwise" + name.capitalize(), [a, b], outs)


@converter("floor_divide")
def _floor_divide(ctx, node, outs):
    dt = ctx.np_dtype(node.outputs[0])
    a, b = (_operand(ctx, x, dt) for x in node.args[:2])
    if dt.kind == "f":
        return ctx.add("Floor", [ctx.add("Div", [a, b])], outs)
    return _int_floordiv(ctx, a, b, dt, outs)
