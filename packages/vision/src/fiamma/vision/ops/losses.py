"""Detection losses with torchvision.ops' names and semantics: the focal loss and the
generalized / distance / complete IoU losses of paired boxes (x1, y1, x2, y2). ``reduction``
is ``'none'``, ``'mean'`` (0 for no boxes) or ``'sum'``.

    >>> import fiamma
    >>> from fiamma.vision.ops import generalized_box_iou_loss
    >>> b = fiamma.tensor([[0., 0., 2., 2.]])
    >>> generalized_box_iou_loss(b, b).tolist()
    [0.0]
"""
import math

import fiamma
import fiamma.nn.functional as F

__all__ = ["sigmoid_focal_loss", "generalized_box_iou_loss", "distance_box_iou_loss",
           "complete_box_iou_loss"]


def _reduce(op, loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean() if loss.numel() > 0 else 0.0 * loss.sum()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{op}: invalid value for reduction: {reduction!r}; supported: 'none', "
                     f"'mean', 'sum'")


def sigmoid_focal_loss(inputs, targets, alpha=0.25, gamma=2, reduction="none"):
    """Focal loss (Lin et al., RetinaNet): binary cross entropy on logits ``inputs`` scaled by
    ``(1 - p_t) ** gamma`` and, when ``alpha >= 0``, by ``alpha_t``."""
    if reduction not in ("none", "mean", "sum"):
        _reduce("sigmoid_focal_loss", inputs, reduction)
    p = fiamma.sigmoid(inputs)
    ce = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce * ((1 - p_t) ** gamma)
    if alpha >= 0:
        alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
        loss = alpha_t * loss
    return _reduce("sigmoid_focal_loss", loss, reduction)


def _check_pair(op, boxes1, boxes2):
    for name, b in (("boxes1", boxes1), ("boxes2", boxes2)):
        if not isinstance(b, fiamma.Tensor):
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(b).__name__}")
        if b.ndim < 1 or b.shape[-1] != 4:
            raise ValueError(f"{op}: {name} should have a last dimension of 4, got shape "
                             f"{list(b.shape)}")
    if not boxes1.is_floating_point():
        boxes1 = boxes1.float()
    if not boxes2.is_floating_point():
        boxes2 = boxes2.float()
    return boxes1, boxes2


def _inter_union(boxes1, boxes2):
    x1, y1, x2, y2 = boxes1.unbind(-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(-1)
    xk1 = fiamma.maximum(x1, x1g)
    yk1 = fiamma.maximum(y1, y1g)
    xk2 = fiamma.minimum(x2, x2g)
    yk2 = fiamma.minimum(y2, y2g)
    overlap = (yk2 > yk1) & (xk2 > xk1)
    inter = fiamma.where(overlap, (xk2 - xk1) * (yk2 - yk1), fiamma.zeros_like(x1))
    union = (x2 - x1) * (y2 - y1) + (x2g - x1g) * (y2g - y1g) - inter
    return inter, union


def _enclosing(boxes1, boxes2):
    x1, y1, x2, y2 = boxes1.unbind(-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(-1)
    return (fiamma.minimum(x1, x1g), fiamma.minimum(y1, y1g), fiamma.maximum(x2, x2g),
            fiamma.maximum(y2, y2g))


def generalized_box_iou_loss(boxes1, boxes2, reduction="none", eps=1e-7):
    """``1 - GIoU`` of each pair ``boxes1[i]``, ``boxes2[i]`` (same shape (..., 4))."""
    boxes1, boxes2 = _check_pair("generalized_box_iou_loss", boxes1, boxes2)
    inter, union = _inter_union(boxes1, boxes2)
    iou = inter / (union + eps)
    xc1, yc1, xc2, yc2 = _enclosing(boxes1, boxes2)
    area_c = (xc2 - xc1) * (yc2 - yc1)
    giou = iou - (area_c - union) / (area_c + eps)
    return _reduce("generalized_box_iou_loss", 1 - giou, reduction)


def _diou_iou_loss(boxes1, boxes2, eps):
    inter, union = _inter_union(boxes1, boxes2)
    iou = inter / (union + eps)
    xc1, yc1, xc2, yc2 = _enclosing(boxes1, boxes2)
    diag = (xc2 - xc1) ** 2 + (yc2 - yc1) ** 2 + eps
    x1, y1, x2, y2 = boxes1.unbind(-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(-1)
    centers = ((x1 + x2) / 2 - (x1g + x2g) / 2) ** 2 + ((y1 + y2) / 2 - (y1g + y2g) / 2) ** 2
    return 1 - iou + centers / diag, iou


def distance_box_iou_loss(boxes1, boxes2, reduction="none", eps=1e-7):
    """``1 - DIoU`` of each pair of boxes."""
    boxes1, boxes2 = _check_pair("distance_box_iou_loss", boxes1, boxes2)
    loss, _ = _diou_iou_loss(boxes1, boxes2, eps)
    return _reduce("distance_box_iou_loss", loss, reduction)


def complete_box_iou_loss(boxes1, boxes2, reduction="none", eps=1e-7):
    """``1 - CIoU`` of each pair of boxes (the ``alpha`` weight is not differentiated)."""
    boxes1, boxes2 = _check_pair("complete_box_iou_loss", boxes1, boxes2)
    diou_loss, iou = _diou_iou_loss(boxes1, boxes2, eps)
    x1, y1, x2, y2 = boxes1.unbind(-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(-1)
    v = (4 / math.pi ** 2) * (fiamma.atan((x2g - x1g) / (y2g - y1g))
                              - fiamma.atan((x2 - x1) / (y2 - y1))) ** 2
    with fiamma.no_grad():
        alpha = v / (1 - iou + v + eps)
    return _reduce("complete_box_iou_loss", diou_loss + alpha * v, reduction)
