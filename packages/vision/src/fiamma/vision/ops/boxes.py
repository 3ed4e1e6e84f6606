"""Box operations with torchvision.ops' names and semantics. Boxes are (N, 4) tensors in
``(x1, y1, x2, y2)`` form with ``0 <= x1 < x2`` and ``0 <= y1 < y2`` unless a function says
otherwise; the IoU functions are differentiable.

    >>> import fiamma
    >>> from fiamma.vision.ops import box_iou, nms
    >>> b = fiamma.tensor([[0., 0., 2., 2.], [1., 1., 3., 3.]])
    >>> round(box_iou(b, b)[0, 1].item(), 4)
    0.1429
    >>> nms(b, fiamma.tensor([0.9, 0.8]), 0.1).tolist()
    [0]
"""
import math

import fiamma
from fiamma import detection

__all__ = ["nms", "batched_nms", "remove_small_boxes", "clip_boxes_to_image", "box_convert",
           "box_area", "box_iou", "generalized_box_iou", "distance_box_iou", "complete_box_iou",
           "masks_to_boxes"]


def _check_boxes(op, boxes, name="boxes"):
    if not isinstance(boxes, fiamma.Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(boxes).__name__}")
    if boxes.ndim < 1 or boxes.shape[-1] != 4:
        raise ValueError(f"{op}: {name} should have a last dimension of size 4, got shape "
                         f"{list(boxes.shape)}")


def _upcast(t):
    """Integer boxes to float32/int64 so products do not overflow (torchvision's rule)."""
    if t.is_floating_point():
        return t if t.dtype in (fiamma.float32, fiamma.float64) else t.float()
    return t if t.dtype in (fiamma.int32, fiamma.int64) else t.int()


def nms(boxes, scores, iou_threshold):
    """Indices (int64) of the boxes greedy non-maximum suppression keeps, in decreasing score
    order: a box is dropped when its IoU with a kept, higher-scored box is greater than
    ``iou_threshold``. ``boxes`` (N, 4) float, ``scores`` (N,)."""
    _check_boxes("nms", boxes)
    if boxes.ndim != 2:
        raise ValueError(f"nms: boxes should be of shape (N, 4), got {list(boxes.shape)}")
    if not boxes.is_floating_point() or not scores.is_floating_point():
        raise TypeError(f"nms: boxes and scores must be floating point, got {boxes.dtype} and "
                        f"{scores.dtype}")
    dt = fiamma.float64 if fiamma.float64 in (boxes.dtype, scores.dtype) else fiamma.float32
    return detection.nms(boxes.to(dt), scores.to(dt), float(iou_threshold))


def batched_nms(boxes, scores, idxs, iou_threshold):
    """NMS done independently per category ``idxs`` (N,): boxes of different categories never
    suppress each other. Returns the kept indices sorted by decreasing score."""
    _check_boxes("batched_nms", boxes)
    if boxes.numel() == 0:
        return fiamma.empty(0, dtype=fiamma.int64)
    if idxs.shape != scores.shape or scores.shape[0] != boxes.shape[0]:
        raise ValueError(f"batched_nms: boxes {list(boxes.shape)}, scores "
                         f"{list(scores.shape)} and idxs {list(idxs.shape)} must agree on N")
    # shift each category into its own region so boxes of two categories never overlap; the
    # -inf changes no maximum and keeps the ops valid for no boxes, which a fiamma.jit trace
    # (made with boxes, so past the branch above) then meets
    flat = boxes.reshape(-1)
    max_coordinate = fiamma.cat([flat, flat.new_full((1,), float("-inf"))]).max()
    offsets = idxs.to(boxes.dtype) * (max_coordinate + 1)
    return nms(boxes + offsets[:, None], scores, iou_threshold)


def remove_small_boxes(boxes, min_size):
    """Indices of the boxes whose width and height are both at least ``min_size``."""
    _check_boxes("remove_small_boxes", boxes)
    ws = boxes[:, 2] - boxes[:, 0]
    hs = boxes[:, 3] - boxes[:, 1]
    keep = (ws >= min_size) & (hs >= min_size)
    return fiamma.where(keep)[0]


def clip_boxes_to_image(boxes, size):
    """Boxes clipped to an image of ``size`` = (height, width)."""
    _check_boxes("clip_boxes_to_image", boxes)
    height, width = size
    x = boxes[..., 0::2].clamp(min=0, max=width)
    y = boxes[..., 1::2].clamp(min=0, max=height)
    return fiamma.stack((x, y), dim=-1).reshape(boxes.shape)


_FORMATS = ("xyxy", "xywh", "cxcywh")


def box_convert(boxes, in_fmt, out_fmt):
    """Convert boxes between ``'xyxy'`` (corners), ``'xywh'`` (corner, size) and
    ``'cxcywh'`` (centre, size)."""
    _check_boxes("box_convert", boxes)
    for f in (in_fmt, out_fmt):
        if f not in _FORMATS:
            raise ValueError(f"box_convert: unsupported box format {f!r}; supported are "
                             f"{_FORMATS} (the rotated formats are not implemented)")
    if in_fmt == out_fmt:
        return boxes.clone()
    a, b, c, d = boxes.unbind(-1)
    if in_fmt == "xywh":
        a, b, c, d = a, b, a + c, b + d
    elif in_fmt == "cxcywh":
        a, b, c, d = a - 0.5 * c, b - 0.5 * d, a + 0.5 * c, b + 0.5 * d
    if out_fmt == "xywh":
        a, b, c, d = a, b, c - a, d - b
    elif out_fmt == "cxcywh":
        a, b, c, d = (a + c) / 2, (b + d) / 2, c - a, d - b
    return fiamma.stack((a, b, c, d), dim=-1)


def box_area(boxes):
    """Area of each (x1, y1, x2, y2) box."""
    _check_boxes("box_area", boxes)
    boxes = _upcast(boxes)
    return (boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])


def _box_inter_union(boxes1, boxes2):
    area1 = box_area(boxes1)
    area2 = box_area(boxes2)
    lt = fiamma.maximum(boxes1[:, None, :2], boxes2[None, :, :2])
    rb = fiamma.minimum(boxes1[:, None, 2:], boxes2[None, :, 2:])
    wh = _upcast(rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    union = area1[:, None] + area2[None, :] - inter
    return inter, union


def box_iou(boxes1, boxes2):
    """(N, M) intersection over union of every pair of boxes."""
    _check_boxes("box_iou", boxes1, "boxes1")
    _check_boxes("box_iou", boxes2, "boxes2")
    inter, union = _box_inter_union(boxes1, boxes2)
    return inter / union


def generalized_box_iou(boxes1, boxes2):
    """(N, M) generalized IoU (Rezatofighi et al.): IoU minus the share of the smallest
    enclosing box not covered by the union."""
    _check_boxes("generalized_box_iou", boxes1, "boxes1")
    _check_boxes("generalized_box_iou", boxes2, "boxes2")
    inter, union = _box_inter_union(boxes1, boxes2)
    iou = inter / union
    lti = fiamma.minimum(boxes1[:, None, :2], boxes2[None, :, :2])
    rbi = fiamma.maximum(boxes1[:, None, 2:], boxes2[None, :, 2:])
    whi = _upcast(rbi - lti).clamp(min=0)
    areai = whi[..., 0] * whi[..., 1]
    return iou - (areai - union) / areai


def _box_diou_iou(boxes1, boxes2, eps):
    iou = box_iou(boxes1, boxes2)
    lti = fiamma.minimum(boxes1[:, None, :2], boxes2[None, :, :2])
    rbi = fiamma.maximum(boxes1[:, None, 2:], boxes2[None, :, 2:])
    whi = _upcast(rbi - lti).clamp(min=0)
    diag = whi[..., 0] ** 2 + whi[..., 1] ** 2 + eps
    b1, b2 = _upcast(boxes1), _upcast(boxes2)
    x_p = (b1[:, 0] + b1[:, 2]) / 2
    y_p = (b1[:, 1] + b1[:, 3]) / 2
    x_g = (b2[:, 0] + b2[:, 2]) / 2
    y_g = (b2[:, 1] + b2[:, 3]) / 2
    centers = (x_p[:, None] - x_g[None, :]) ** 2 + (y_p[:, None] - y_g[None, :]) ** 2
    return iou - centers / diag, iou


def distance_box_iou(boxes1, boxes2, eps=1e-7):
    """(N, M) distance IoU (Zheng et al.): IoU minus the squared centre distance over the
    squared diagonal of the enclosing box."""
    _check_boxes("distance_box_iou", boxes1, "boxes1")
    _check_boxes("distance_box_iou", boxes2, "boxes2")
    return _box_diou_iou(boxes1, boxes2, eps)[0]


def complete_box_iou(boxes1, boxes2, eps=1e-7):
    """(N, M) complete IoU: distance IoU minus ``alpha * v``, ``v`` the aspect-ratio
    consistency term."""
    _check_boxes("complete_box_iou", boxes1, "boxes1")
    _check_boxes("complete_box_iou", boxes2, "boxes2")
    b1, b2 = _upcast(boxes1), _upcast(boxes2)
    diou, iou = _box_diou_iou(b1, b2, eps)
    w_pred = b1[:, None, 2] - b1[:, None, 0]
    h_pred = b1[:, None, 3] - b1[:, None, 1]
    w_gt = b2[:, 2] - b2[:, 0]
    h_gt = b2[:, 3] - b2[:, 1]
    v = (4 / math.pi ** 2) * (fiamma.atan(w_pred / h_pred) - fiamma.atan(w_gt / h_gt)) ** 2
    with fiamma.no_grad():
        alpha = v / (1 - iou + v + eps)
    return diou - alpha * v


def masks_to_boxes(masks):
    """(N, 4) float boxes (x1, y1, x2, y2) tightly enclosing the non-zero pixels of each mask
    in ``masks`` (N, H, W); the corners are pixel indices (inclusive)."""
    if masks.ndim != 3:
        raise ValueError(f"masks_to_boxes: masks should be (N, H, W), got {list(masks.shape)}")
    n = masks.shape[0]
    if n == 0:
        return fiamma.zeros((0, 4))
    nz = masks != 0
    rows = nz.any(dim=2)     # (N, H)
    cols = nz.any(dim=1)     # (N, W)
    empty = ~rows.any(dim=1)
    if bool(empty.any()):
        i = int(fiamma.where(empty)[0][0])
        raise ValueError(f"masks_to_boxes: mask {i} has no non-zero pixel")
    h, w = masks.shape[1], masks.shape[2]
    ys = fiamma.arange(h, dtype=fiamma.float32)
    xs = fiamma.arange(w, dtype=fiamma.float32)
    big = float(max(h, w) + 1)
    y1 = fiamma.where(rows, ys, big).amin(dim=1)
    y2 = fiamma.where(rows, ys, -1.0).amax(dim=1)
    x1 = fiamma.where(cols, xs, big).amin(dim=1)
    x2 = fiamma.where(cols, xs, -1.0).amax(dim=1)
    return fiamma.stack((x1, y1, x2, y2), dim=1)
