"""Ops whose result size depends on the values (data-dependent sizes), recorded as themselves
while a trace runs, so the traced module and the ONNX file compute them from the inputs:
``nonzero`` (and ``where(condition)``, ``argwhere`` and boolean-mask indexing through it),
``fiamma.detection.nms``, ``topk`` with a count computed from sizes (``fiamma.sym_min(k,
x.shape[0])``) and fiamma.vision's ``roi_align`` (whose sampling grid core computes from the
boxes' values in NumPy, which a trace would bake in) and ``heatmaps_to_keypoints`` (Keypoint
R-CNN's decoding: each detection's heatmaps resized to a size read from its box's values)."""

import sys

import fiamma
from fiamma import Tensor

from ._errors import TracingError
from ._graph import Node
from ._searching import patch_searching
from ._symbolic import SymInt

__all__ = ["DATA_DEPENDENT", "patch_dynamic"]

# ops whose results have a size the values decide (their consumers' sizes follow at run time)
DATA_DEPENDENT = ("nonzero", "nms", "unique", "unique_consecutive", "bincount")

# the modules of fiamma.vision that call roi_align by a name of their own
_ROI_MODULES = ("fiamma.vision.ops.roi_align", "fiamma.vision.ops",
                "fiamma.vision.ops.feature_pyramid_network",
                "fiamma.vision.models.detection._roi_masks")


def patch_dynamic(h):
    """Wrap the ops; ``h`` carries the size patcher's helpers (put, live, mine, tracer)."""
    put, live, mine, tracer = h.put, h.live, h.mine, h.tracer

    def record(op, args, kw, outs):
        try:
            refs = [tracer.ref(a, op) for a in args]
        except TracingError:
            return
        names = []
        for o in outs:
            name = tracer.new_name()
            if id(o) in tracer.vals:
                tracer.vals[id(o)] = name
                tracer.g.meta[name] = (tuple(o._shape), str(o._dtype).split(".")[-1])
            else:
                tracer.bind(o, name)
            names.append(name)
        tracer.g.nodes.append(Node(op, refs, kw, names, tracer.source()))

    def nonzero_like(owner, name, kind):
        orig = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)

        def fn(input, *a, **kw):
            if kind == "where" and (a or kw.get("input") is not None
                                    or kw.get("other") is not None):
                return orig(input, *a, **kw)
            if not (isinstance(input, Tensor) and live() and mine(input)) or \
                    kw.get("out") is not None:
                return orig(input, *a, **kw)
            as_tuple = kind == "where" or bool(kw.get("as_tuple", False))
            out = orig(input, *a, **kw)
            record("nonzero", [input], {"as_tuple": as_tuple},
                   list(out) if as_tuple else [out])
            return out
        put(owner, name, fn)

    nonzero_like(fiamma, "nonzero", "nonzero")
    nonzero_like(Tensor, "nonzero", "nonzero")
    nonzero_like(fiamma, "where", "where")
    for owner in (fiamma, Tensor):
        if hasattr(owner, "argwhere"):
            nonzero_like(owner, "argwhere", "argwhere")

    import fiamma.detection as det

    nms_orig = det.nms

    def nms(boxes, scores, iou_threshold):
        out = nms_orig(boxes, scores, iou_threshold)
        if live() and (mine(boxes) or mine(scores)):
            record("nms", [boxes, scores], {"iou_threshold": float(iou_threshold)}, [out])
        return out

    put(det, "nms", nms)

    def topk_like(owner, name):
        orig = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)

        def fn(input, k, *a, **kw):
            if not (isinstance(k, SymInt) and live() and mine(input)):
                return orig(input, k, *a, **kw)
            out = orig(input, int.__int__(k), *a, **kw)
            name_ = tracer.vals.get(id(out[0]))
            for node in reversed(tracer.g.nodes):
                if node.op == "topk" and name_ in node.outputs:
                    node.kwargs["symk"] = k.expr
                    break
            return out
        put(owner, name, fn)

    topk_like(fiamma, "topk")
    topk_like(Tensor, "topk")

    def argsort_like(owner):
        """argsort's int64 result is not recorded by core (no gradient): recorded here."""
        orig = owner.__dict__["argsort"] if isinstance(owner, type) else owner.argsort

        def fn(input, dim=-1, descending=False, stable=False):
            out = orig(input, dim, descending, stable)
            if live() and mine(input) and id(out) not in tracer.vals:
                record("argsort", [input], {"dim": int(dim) % max(input.dim(), 1),
                                            "descending": bool(descending),
                                            "stable": bool(stable)}, [out])
            return out
        put(owner, "argsort", fn)

    argsort_like(fiamma)
    argsort_like(Tensor)
    _patch_scalar_sizes(put, live, tracer)
    _patch_roi_align(put, live, mine, tracer)
    _patch_heatmaps(put, live, mine, tracer)
    patch_searching(put, live, mine, tracer)


# the modules of fiamma.vision that call heatmaps_to_keypoints by a name of their own
_KEYPOINT_MODULES = ("fiamma.vision.models.detection._roi_masks",
                     "fiamma.vision.models.detection.roi_heads")


def _patch_heatmaps(put, live, mine, tracer):
    """Keypoint R-CNN's decoding, one leaf op: its eager form loops over the detections in
    Python with resize sizes read from the boxes (``.tolist()``), which a trace would bake in;
    the runner calls it again, the ONNX converter is a Loop over the detections."""
    mod = sys.modules.get(_KEYPOINT_MODULES[0])
    if mod is None:
        return
    orig = mod.heatmaps_to_keypoints

    def heatmaps_to_keypoints(maps, rois):
        if not (live() and (mine(maps) or mine(rois))):
            return orig(maps, rois)
        return tracer.leaf("heatmaps_to_keypoints", lambda: orig(maps, rois), [maps, rois],
                           {}, [])

    for name in _KEYPOINT_MODULES:
        m = sys.modules.get(name)
        if m is not None and getattr(m, "heatmaps_to_keypoints", None) is orig:
            put(m, "heatmaps_to_keypoints", heatmaps_to_keypoints)


def _patch_roi_align(put, live, mine, tracer):
    mod = sys.modules.get("fiamma.vision.ops.roi_align")
    if mod is None:
        return
    orig = mod.roi_align

    def roi_align(input, boxes, output_size, spatial_scale=1.0, sampling_ratio=-1,
                  aligned=False):
        traced = mine(input) or (mine(boxes) if isinstance(boxes, Tensor) else
                                 any(mine(b) for b in boxes))
        if not (live() and traced):
            return orig(input, boxes, output_size, spatial_scale, sampling_ratio, aligned)
        rois = boxes if isinstance(boxes, Tensor) else mod.convert_boxes_to_roi_format(boxes)
        oh, ow = mod._pair(output_size)
        attrs = {"output_size": (oh, ow), "spatial_scale": float(spatial_scale),
                 "sampling_ratio": int(sampling_ratio), "aligned": bool(aligned)}
        return tracer.leaf("roi_align", lambda: orig(input, rois, output_size, spatial_scale,
                                                     sampling_ratio, aligned),
                           [input, rois], attrs, [])

    for name in _ROI_MODULES:
        m = sys.modules.get(name)
        if m is not None and getattr(m, "roi_align", None) is orig:
            put(m, "roi_align", roi_align)


_ARITH = ("add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod",
          "maximum", "minimum", "pow", "eq", "ne", "lt", "le", "gt", "ge")
_DUNDER = ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv",
           "rfloordiv", "mod", "rmod", "pow", "rpow", "eq", "ne", "lt", "le", "gt", "ge")


def _patch_scalar_sizes(put, live, tracer):
    """A size (SymInt) used as a tensor op's scalar operand (``idx + x.shape[1]``): its value
    is a constant of the graph (a TracerWarning says so), and it is passed as a plain int so
    the result keeps the integer dtype (core treats only exact ints as integer scalars)."""
    from ._symbolic import _warn_baked

    def wrap(owner, name):
        orig = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)

        def fn(*args, **kw):
            if any(type(a) is SymInt for a in args) and live():
                _warn_baked("a size read from a traced tensor's shape used as a tensor "
                            "op's scalar operand")
                args = tuple(int.__int__(a) if type(a) is SymInt else a for a in args)
            return orig(*args, **kw)
        put(owner, name, fn)

    for n in _ARITH:
        if hasattr(fiamma, n):
            wrap(fiamma, n)
    for n in _DUNDER:
        if f"__{n}__" in Tensor.__dict__:
            wrap(Tensor, f"__{n}__")
