"""GeneralizedRCNN (torchvision.models.detection.generalized_rcnn): transform -> backbone ->
RPN -> RoI heads -> postprocess."""
from collections import OrderedDict

import fiamma
from fiamma import nn

__all__ = ["GeneralizedRCNN"]


class GeneralizedRCNN(nn.Module):
    """``forward(images, targets=None)``: ``images`` a list of (C, H, W) float tensors in
    [0, 1] (sizes may differ). Training (targets: list of dicts with ``boxes`` (N, 4) xyxy
    float and ``labels`` (N,) int64) returns the dict of losses; eval returns one dict per image
    with ``boxes``, ``labels``, ``scores`` in the original image's coordinates."""

    def __init__(self, backbone, rpn, roi_heads, transform):
        super().__init__()
        self.transform = transform
        self.backbone = backbone
        self.rpn = rpn
        self.roi_heads = roi_heads

    def forward(self, images, targets=None):
        if self.training:
            _check_targets(targets)
        original_image_sizes = []
        for img in images:
            if img.ndim < 2:
                raise ValueError(f"expecting the last two dimensions of the Tensor to be H and "
                                 f"W instead got {list(img.shape)}")
            original_image_sizes.append((int(img.shape[-2]), int(img.shape[-1])))
        images, targets = self.transform(images, targets)
        _check_degenerate(targets)
        features = self.backbone(images.tensors)
        if isinstance(features, fiamma.Tensor):
            features = OrderedDict([("0", features)])
        proposals, proposal_losses = self.rpn(images, features, targets)
        detections, detector_losses = self.roi_heads(features, proposals, images.image_sizes,
                                                     targets)
        detections = self.transform.postprocess(detections, images.image_sizes,
                                                original_image_sizes)
        losses = {}
        losses.update(detector_losses)
        losses.update(proposal_losses)
        return losses if self.training else detections


def _check_targets(targets):
    if targets is None:
        raise ValueError("targets should not be none when in training mode")
    for target in targets:
        boxes = target["boxes"]
        if not isinstance(boxes, fiamma.Tensor):
            raise TypeError(f"Expected target boxes to be of type Tensor, got "
                            f"{type(boxes).__name__}.")
        if boxes.ndim != 2 or boxes.shape[-1] != 4:
            raise ValueError(f"Expected target boxes to be a tensor of shape [N, 4], "
                             f"got {list(boxes.shape)}.")
        kps = target.get("keypoints")
        if kps is not None and (not isinstance(kps, fiamma.Tensor) or kps.ndim != 3
                                or kps.shape[-1] != 3 or not kps.is_floating_point()):
            raise TypeError(f"target keypoints must be a float tensor of shape [N, K, 3], got "
                            f"{getattr(kps, 'dtype', type(kps).__name__)} of shape "
                            f"{list(getattr(kps, 'shape', []))}")
        masks = target.get("masks")
        if masks is not None and (not isinstance(masks, fiamma.Tensor) or masks.ndim != 3):
            raise ValueError(f"target masks must be a tensor of shape [N, H, W], got "
                             f"{list(getattr(masks, 'shape', []))}")


def _check_degenerate(targets):
    if targets is None:
        return
    for target_idx, target in enumerate(targets):
        boxes = target["boxes"]
        degenerate = (boxes[:, 2:] <= boxes[:, :2]).any(dim=1)
        if bool(degenerate.any()):
            bb_idx = int(fiamma.where(degenerate)[0][0])
            raise ValueError(f"All bounding boxes should have positive height and width. "
                             f"Found invalid box {boxes[bb_idx].tolist()} for target at index "
                             f"{target_idx}.")


def _single_stage_inputs(model, images, targets):
    """The shared first half of a single-stage detector's forward (RetinaNet, FCOS, SSD):
    checked targets, the transform, the backbone's features as a list, the head's outputs and
    the anchors. Returns (original image sizes, images, targets, features, head outputs,
    anchors)."""
    if model.training:
        _check_targets(targets)
    original_image_sizes = [(int(img.shape[-2]), int(img.shape[-1])) for img in images]
    images, targets = model.transform(images, targets)
    _check_degenerate(targets)
    features = model.backbone(images.tensors)
    if isinstance(features, fiamma.Tensor):
        features = OrderedDict([("0", features)])
    features = list(features.values())
    head_outputs = model.head(features)
    anchors = model.anchor_generator(images, features)
    return original_image_sizes, images, targets, features, head_outputs, anchors


def _nms_detections(boxes, scores, labels, nms_thresh, detections_per_img):
    """One image's detections from its per-level candidate lists: class-wise NMS, the best
    ``detections_per_img`` kept, as torchvision's result dict."""
    from fiamma.vision.ops import boxes as box_ops

    boxes, scores, labels = fiamma.cat(boxes, dim=0), fiamma.cat(scores, dim=0), \
        fiamma.cat(labels, dim=0)
    keep = box_ops.batched_nms(boxes, scores, labels, nms_thresh)[:detections_per_img]
    return {"boxes": boxes[keep], "scores": scores[keep], "labels": labels[keep]}
