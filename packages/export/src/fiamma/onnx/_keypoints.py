"""The ONNX converter of Keypoint R-CNN's decoding (fiamma.vision's ``heatmaps_to_keypoints``):
a Loop over the detections, each iteration resizing one detection's heatmaps (bicubic) to its
box's size in pixels (rounded up) and taking the argmax. The resize is written out with the
same tap tables and the same order of float operations as fiamma's upsampling kernel (the
A = -0.75 cubic weights, clamped borders, the taps along the width summed first, then the
rows), so given the same heatmaps and boxes the file picks the same cells and scores as eager.
A Loop, not one padded grid for all detections: the grid would hold detections x keypoints x
the largest box's pixels (gigabytes for 100 detections on an 800 x 1333 image)."""

import numpy as np

from ._converters import _onnx_type, converter

_A = -0.75  # the bicubic convolution constant (PyTorch's)


def _cubic_taps(ctx, out_f, out_i, n_in, dt):
    """Tap tables of a resize from ``n_in`` to ``out_i`` (int64 scalar; ``out_f`` the same size
    in ``dt``) with align_corners=False: four index vectors (out,) and four weight vectors."""
    c = lambda v: ctx.const(np.asarray(v, dt))                      # noqa: E731
    ci = lambda v: ctx.const(np.asarray(v, np.int64))               # noqa: E731
    o = ctx.add("Cast", [ctx.add("Range", [ci(0), out_i, ci(1)])], to=_onnx_type(ctx, dt))
    scale = ctx.add("Div", [c(n_in), out_f])
    r = ctx.add("Sub", [ctx.add("Mul", [scale, ctx.add("Add", [o, c(0.5)])]), c(0.5)])
    rf = r if dt == np.float32 else ctx.add("Cast", [r], to=_onnx_type(ctx, np.float32))
    i = ctx.add("Min", [ctx.add("Cast", [ctx.add("Floor", [rf])],
                                to=_onnx_type(ctx, np.int64)), ci(n_in - 1)])
    t = ctx.add("Sub", [r, ctx.add("Cast", [i], to=_onnx_type(ctx, dt))])
    t = ctx.add("Min", [ctx.add("Max", [t, c(0)]), c(1)])
    x1 = ctx.add("Add", [t, c(1)])
    x2 = ctx.add("Sub", [c(1), t])
    x3 = ctx.add("Sub", [c(2), t])

    def far(x):   # ((A x - 5A) x + 8A) x - 4A
        v = ctx.add("Sub", [ctx.add("Mul", [c(_A), x]), c(5 * _A)])
        v = ctx.add("Add", [ctx.add("Mul", [v, x]), c(8 * _A)])
        return ctx.add("Sub", [ctx.add("Mul", [v, x]), c(4 * _A)])

    def near(x):  # ((A + 2) x - (A + 3)) x x + 1
        v = ctx.add("Sub", [ctx.add("Mul", [c(_A + 2), x]), c(_A + 3)])
        return ctx.add("Add", [ctx.add("Mul", [ctx.add("Mul", [v, x]), x]), c(1)])

    weights = [far(x1), near(t), near(x2), far(x3)]
    idx = [ctx.add("Max", [ctx.add("Min", [ctx.add("Add", [i, ci(k - 1)]), ci(n_in - 1)]),
                           ci(0)]) for k in range(4)]
    return idx, weights


def _sum_taps(ctx, parts):
    acc = parts[0]
    for p in parts[1:]:
        acc = ctx.add("Add", [acc, p])
    return acc


@converter("heatmaps_to_keypoints")
def _heatmaps_to_keypoints(ctx, node, outs):
    maps, rois = node.args[:2]
    dt = ctx.np_dtype(maps)
    if dt.kind != "f" or ctx.np_dtype(rois) != dt:
        ctx.unsupported(f"heatmaps_to_keypoints of {dt} heatmaps and {ctx.np_dtype(rois)} "
                        "boxes has no converter (both must be the same float type)")
    _, p, sh, sw = ctx.shape(maps)
    helper = ctx.helper
    outer = ctx.nodes
    ctx.nodes = []                                   # the Loop's body
    it, cond = ctx.fresh("iter"), ctx.fresh("cond")
    c = lambda v: ctx.const(np.asarray(v, dt))      # noqa: E731
    ci = lambda v: ctx.const(np.asarray(v, np.int64))  # noqa: E731
    m = ctx.add("Gather", [maps, it], axis=0)                         # (P, S, S)
    r = ctx.add("Gather", [rois, it], axis=0)                         # (4,)
    x0, y0, x1, y1 = (ctx.add("Gather", [r, ci(k)], axis=0) for k in range(4))
    w = ctx.add("Max", [ctx.add("Sub", [x1, x0]), c(1)])
    h = ctx.add("Max", [ctx.add("Sub", [y1, y0]), c(1)])
    wc, hc = ctx.add("Ceil", [w]), ctx.add("Ceil", [h])
    wi = ctx.add("Cast", [wc], to=_onnx_type(ctx, np.int64))
    hi = ctx.add("Cast", [hc], to=_onnx_type(ctx, np.int64))
    # along the width: every input row once (P, S, rw), then the rows (P, rh, rw)
    idx, wts = _cubic_taps(ctx, wc, wi, sw, dt)
    rows = _sum_taps(ctx, [ctx.add("Mul", [wt, ctx.add("Gather", [m, ix], axis=2)])
                           for ix, wt in zip(idx, wts)])
    idx, wts = _cubic_taps(ctx, hc, hi, sh, dt)
    big = _sum_taps(ctx, [ctx.add("Mul", [ctx.add("Unsqueeze", [wt, ci([1])]),
                                          ctx.add("Gather", [rows, ix], axis=1)])
                          for ix, wt in zip(idx, wts)])
    flat = ctx.add("Reshape", [big, ci([p, -1])])                     # (P, rh * rw)
    pos = ctx.add("ArgMax", [flat], axis=1, keepdims=1, select_last_index=0)  # (P, 1)
    best = ctx.add("Squeeze", [ctx.add("GatherElements", [flat, pos], axis=1), ci([1])])
    pos = ctx.add("Squeeze", [pos, ci([1])])
    xi = ctx.add("Mod", [pos, wi])
    yi = ctx.add("Div", [ctx.add("Sub", [pos, xi]), wi])

    def coord(k, size, size_c, start):
        v = ctx.add("Add", [ctx.add("Cast", [k], to=_onnx_type(ctx, dt)), c(0.5)])
        v = ctx.add("Add", [ctx.add("Mul", [v, ctx.add("Div", [size, size_c])]), start])
        return ctx.add("Unsqueeze", [v, ci([1])])

    kp = ctx.add("Concat", [coord(xi, w, wc, x0), coord(yi, h, hc, y0),
                            ctx.const(np.ones((p, 1), dt))], axis=1)  # (P, 3)
    cond_out = ctx.add("Identity", [cond])
    vt = _onnx_type(ctx, dt)
    body = helper.make_graph(
        ctx.nodes, ctx.fresh("keypoints_body"),
        [helper.make_tensor_value_info(it, _onnx_type(ctx, np.int64), []),
         helper.make_tensor_value_info(cond, _onnx_type(ctx, np.bool_), [])],
        [helper.make_tensor_value_info(cond_out, _onnx_type(ctx, np.bool_), []),
         helper.make_tensor_value_info(kp, vt, [p, 3]),
         helper.make_tensor_value_info(best, vt, [p])])
    ctx.nodes = outer
    k = ctx.add("Gather", [ctx.shape_of(maps), ci(0)], axis=0)
    kps, scores = ctx.add("Loop", [k, ctx.const(np.asarray(True))], [ctx.fresh("kp"),
                                                                     ctx.fresh("sc")], body=body)
    # no detections: the Loop's stacked outputs have no iteration to take their shape from
    ctx.add("Reshape", [kps, ci([-1, p, 3])], outs[0])
    return ctx.add("Reshape", [scores, ci([-1, p])], outs[1])
