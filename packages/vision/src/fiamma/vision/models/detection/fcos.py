"""FCOS (torchvision.models.detection.fcos): the anchor-free one-stage detector of Tian et al.
(2019) with its classification and regression/centre-ness heads, the ResNet-50-FPN builder and
its weights enum, with torchvision's module names.

    >>> import fiamma
    >>> m = fcos_resnet50_fpn(weights=None, weights_backbone=None, num_classes=3,
    ...                       min_size=64, max_size=64, score_thresh=0.0).eval()
    >>> sorted(m([fiamma.rand(3, 64, 48)])[0])
    ['boxes', 'labels', 'scores']
"""
import math
from functools import partial

import fiamma
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models.detection import _utils as det_utils
from fiamma.vision.models.detection.anchor_utils import AnchorGenerator
from fiamma.vision.models.detection.backbone_utils import (
    _resnet_fpn_extractor,
    _validate_trainable_layers,
)
from fiamma.vision.models.detection.faster_rcnn import COCO_CATEGORIES, _load, _resolve
from fiamma.vision.models.detection.generalized_rcnn import _nms_detections, _single_stage_inputs
from fiamma.vision.models.detection.transform import GeneralizedRCNNTransform
from fiamma.vision.models.resnet import ResNet50_Weights, resnet50
from fiamma.vision.ops import (
    boxes as box_ops,
    generalized_box_iou_loss,
    misc as misc_nn_ops,
    sigmoid_focal_loss,
)
from fiamma.vision.ops.feature_pyramid_network import LastLevelP6P7
from fiamma.vision.transforms._presets import ObjectDetection

__all__ = ["FCOS", "FCOSHead", "FCOSClassificationHead", "FCOSRegressionHead",
           "FCOS_ResNet50_FPN_Weights", "fcos_resnet50_fpn"]


def _conv_stack(in_channels, num_convs, norm_layer):
    layers = []
    for _ in range(num_convs):
        layers += [nn.Conv2d(in_channels, in_channels, kernel_size=3, stride=1, padding=1),
                   norm_layer(in_channels), nn.ReLU()]
    stack = nn.Sequential(*layers)
    for layer in stack.children():
        if isinstance(layer, nn.Conv2d):
            nn.init.normal_(layer.weight, std=0.01)
            nn.init.constant_(layer.bias, 0)
    return stack


def _flatten(t, per_anchor):
    n, _, h, w = t.shape
    return t.reshape(n, -1, per_anchor, h, w).permute(0, 3, 4, 1, 2).reshape(n, -1, per_anchor)


class FCOSClassificationHead(nn.Module):
    """``num_convs`` 3x3 conv + norm (default GroupNorm(32)) + ReLU layers and a 3x3 conv to
    ``num_anchors * num_classes`` logits (bias set from ``prior_probability``)."""

    def __init__(self, in_channels, num_anchors, num_classes, num_convs=4,
                 prior_probability=0.01, norm_layer=None):
        super().__init__()
        self.num_classes = num_classes
        self.num_anchors = num_anchors
        self.conv = _conv_stack(in_channels, num_convs, norm_layer or partial(nn.GroupNorm, 32))
        self.cls_logits = nn.Conv2d(in_channels, num_anchors * num_classes, kernel_size=3,
                                    stride=1, padding=1)
        nn.init.normal_(self.cls_logits.weight, std=0.01)
        nn.init.constant_(self.cls_logits.bias,
                          -math.log((1 - prior_probability) / prior_probability))

    def forward(self, x):
        return fiamma.cat([_flatten(self.cls_logits(self.conv(f)), self.num_classes)
                           for f in x], dim=1)


class FCOSRegressionHead(nn.Module):
    """``num_convs`` conv + norm + ReLU layers, then two 3x3 convs: the ReLU'd box offsets
    (``bbox_reg``) and the centre-ness logit (``bbox_ctrness``) of each location."""

    def __init__(self, in_channels, num_anchors, num_convs=4, norm_layer=None):
        super().__init__()
        self.conv = _conv_stack(in_channels, num_convs, norm_layer or partial(nn.GroupNorm, 32))
        self.bbox_reg = nn.Conv2d(in_channels, num_anchors * 4, kernel_size=3, stride=1,
                                  padding=1)
        self.bbox_ctrness = nn.Conv2d(in_channels, num_anchors, kernel_size=3, stride=1,
                                      padding=1)
        for layer in (self.bbox_reg, self.bbox_ctrness):
            nn.init.normal_(layer.weight, std=0.01)
            nn.init.zeros_(layer.bias)

    def forward(self, x):
        regs, ctrs = [], []
        for f in x:
            t = self.conv(f)
            regs.append(_flatten(F.relu(self.bbox_reg(t)), 4))
            ctrs.append(_flatten(self.bbox_ctrness(t), 1))
        return fiamma.cat(regs, dim=1), fiamma.cat(ctrs, dim=1)


class FCOSHead(nn.Module):
    """The classification and regression heads and FCOS's losses: sigmoid focal loss over all
    locations, GIoU loss of the decoded boxes and BCE of the centre-ness over the foreground
    ones, each summed over the batch and divided by the number of foreground locations."""

    def __init__(self, in_channels, num_anchors, num_classes, num_convs=4):
        super().__init__()
        self.box_coder = det_utils.BoxLinearCoder(normalize_by_size=True)
        self.classification_head = FCOSClassificationHead(in_channels, num_anchors,
                                                          num_classes, num_convs)
        self.regression_head = FCOSRegressionHead(in_channels, num_anchors, num_convs)

    def compute_loss(self, targets, head_outputs, anchors, matched_idxs):
        cls_logits = head_outputs["cls_logits"]
        bbox_regression = head_outputs["bbox_regression"]
        bbox_ctrness = head_outputs["bbox_ctrness"]
        gt_classes, gt_boxes = [], []
        for target, matched in zip(targets, matched_idxs):
            n = int(matched.shape[0])
            if len(target["labels"]) == 0:
                cls = fiamma.zeros((n,), dtype=target["labels"].dtype)
                box = fiamma.zeros((n, 4), dtype=target["boxes"].dtype)
            else:
                cls = target["labels"][matched.clamp(min=0)]
                box = target["boxes"][matched.clamp(min=0)]
            gt_classes.append(fiamma.where(matched < 0, -1, cls))
            gt_boxes.append(box)
        gt_boxes, gt_classes = fiamma.stack(gt_boxes), fiamma.stack(gt_classes)
        anchors = fiamma.stack(list(anchors))
        fg = gt_classes >= 0
        num_fg = max(1, int(fg.sum()))
        fg_b, fg_a = fiamma.where(fg)
        onehot = fiamma.zeros(tuple(cls_logits.shape), dtype=cls_logits.dtype)
        onehot[fg_b, fg_a, gt_classes[fg_b, fg_a]] = 1.0
        loss_cls = sigmoid_focal_loss(cls_logits, onehot, reduction="sum")
        pred_boxes = self.box_coder.decode(bbox_regression, anchors)
        loss_reg = generalized_box_iou_loss(pred_boxes[fg_b, fg_a], gt_boxes[fg_b, fg_a],
                                            reduction="sum")
        reg_targets = self.box_coder.encode(anchors, gt_boxes)
        lr, tb = reg_targets[..., 0::2], reg_targets[..., 1::2]
        ctr_targets = fiamma.sqrt((lr.min(dim=-1)[0] / lr.max(dim=-1)[0])
                                  * (tb.min(dim=-1)[0] / tb.max(dim=-1)[0]))
        pred_ctr = bbox_ctrness[..., 0]
        loss_ctr = F.binary_cross_entropy_with_logits(pred_ctr[fg_b, fg_a],
                                                      ctr_targets[fg_b, fg_a], reduction="sum")
        return {"classification": loss_cls / num_fg, "bbox_regression": loss_reg / num_fg,
                "bbox_ctrness": loss_ctr / num_fg}

    def forward(self, x):
        bbox_regression, bbox_ctrness = self.regression_head(x)
        return {"cls_logits": self.classification_head(x), "bbox_regression": bbox_regression,
                "bbox_ctrness": bbox_ctrness}


class FCOS(nn.Module):
    """FCOS over ``backbone`` (a module with ``out_channels`` returning a tensor or an ordered
    dict of feature maps), torchvision's arguments and defaults: one anchor per location (its
    size the level's stride, 8-128 by default), centre sampling radius 1.5, score threshold
    0.2, NMS 0.6, 100 detections, 1000 candidates per level. Training returns
    ``{"classification", "bbox_regression", "bbox_ctrness"}``, eval a list of detections."""

    def __init__(self, backbone, num_classes, min_size=800, max_size=1333, image_mean=None,
                 image_std=None, anchor_generator=None, head=None, center_sampling_radius=1.5,
                 score_thresh=0.2, nms_thresh=0.6, detections_per_img=100,
                 topk_candidates=1000, **kwargs):
        super().__init__()
        if not hasattr(backbone, "out_channels"):
            raise ValueError("backbone should contain an attribute out_channels specifying the "
                             "number of output channels (assumed to be the same for all the "
                             "levels)")
        if not isinstance(anchor_generator, (AnchorGenerator, type(None))):
            raise TypeError(f"anchor_generator should be of type AnchorGenerator or None, "
                            f"instead got {type(anchor_generator).__name__}")
        self.backbone = backbone
        if anchor_generator is None:
            sizes = ((8,), (16,), (32,), (64,), (128,))
            anchor_generator = AnchorGenerator(sizes, ((1.0,),) * len(sizes))
        if anchor_generator.num_anchors_per_location()[0] != 1:
            raise ValueError(f"anchor_generator.num_anchors_per_location()[0] should be 1 "
                             f"instead of {anchor_generator.num_anchors_per_location()[0]}")
        self.anchor_generator = anchor_generator
        if head is None:
            head = FCOSHead(backbone.out_channels, 1, num_classes)
        self.head = head
        self.box_coder = det_utils.BoxLinearCoder(normalize_by_size=True)
        image_mean = image_mean if image_mean is not None else [0.485, 0.456, 0.406]
        image_std = image_std if image_std is not None else [0.229, 0.224, 0.225]
        self.transform = GeneralizedRCNNTransform(min_size, max_size, image_mean, image_std,
                                                  **kwargs)
        self.center_sampling_radius = center_sampling_radius
        self.score_thresh = score_thresh
        self.nms_thresh = nms_thresh
        self.detections_per_img = detections_per_img
        self.topk_candidates = topk_candidates

    def compute_loss(self, targets, head_outputs, anchors, num_anchors_per_level):
        """Match each location to the smallest ground truth whose centre region (radius
        ``center_sampling_radius`` strides) holds it, which contains it, and whose largest
        distance from it lies in the level's range (4-8 strides; open-ended at the ends)."""
        matched_idxs = []
        for anc, target in zip(anchors, targets):
            if target["boxes"].numel() == 0:
                matched_idxs.append(fiamma.full((anc.shape[0],), -1, dtype=fiamma.int64))
                continue
            gt = target["boxes"]
            gt_ctr = (gt[:, :2] + gt[:, 2:]) / 2
            anc_ctr = (anc[:, :2] + anc[:, 2:]) / 2
            anc_size = anc[:, 2] - anc[:, 0]
            match = ((anc_ctr[:, None, :] - gt_ctr[None, :, :]).abs().max(dim=2)[0]
                     < self.center_sampling_radius * anc_size[:, None])
            x, y = anc_ctr[:, 0:1], anc_ctr[:, 1:2]
            x0, y0, x1, y1 = gt[None, :, 0], gt[None, :, 1], gt[None, :, 2], gt[None, :, 3]
            dist = fiamma.stack([x - x0, y - y0, x1 - x, y1 - y], dim=2)
            match = match & (dist.min(dim=2)[0] > 0)
            n_first, n_last = num_anchors_per_level[0], num_anchors_per_level[-1]
            pos = fiamma.arange(int(anc.shape[0]))
            lower = fiamma.where(pos < n_first, 0.0, anc_size * 4)
            upper = fiamma.where(pos >= anc.shape[0] - n_last, float("inf"), anc_size * 8)
            far = dist.max(dim=2)[0]
            match = match & (far > lower[:, None]) & (far < upper[:, None])
            areas = (gt[:, 2] - gt[:, 0]) * (gt[:, 3] - gt[:, 1])
            # prefer the smallest box: the score is 1e8 - area for a match, 0 otherwise
            score = match.to(fiamma.float32) * (1e8 - areas[None, :])
            best, idx = score.max(dim=1)
            matched_idxs.append(fiamma.where(best < 1e-5, -1, idx))
        return self.head.compute_loss(targets, head_outputs, anchors, matched_idxs)

    def postprocess_detections(self, head_outputs, anchors, image_shapes):
        detections = []
        for index, image_shape in enumerate(image_shapes):
            image_boxes, image_scores, image_labels = [], [], []
            for reg, logits, ctr, anc in zip(
                    [r[index] for r in head_outputs["bbox_regression"]],
                    [c[index] for c in head_outputs["cls_logits"]],
                    [c[index] for c in head_outputs["bbox_ctrness"]], anchors[index]):
                num_classes = logits.shape[-1]
                scores = fiamma.sqrt(fiamma.sigmoid(logits) * fiamma.sigmoid(ctr)).flatten()
                keep = scores > self.score_thresh
                scores = scores[keep]
                topk_idxs = fiamma.where(keep)[0]
                num_topk = det_utils._topk_min(topk_idxs, self.topk_candidates, 0)
                scores, idxs = scores.topk(num_topk)
                topk_idxs = topk_idxs[idxs]
                anchor_idxs = fiamma.div(topk_idxs, num_classes, rounding_mode="floor")
                boxes = self.box_coder.decode(reg[anchor_idxs], anc[anchor_idxs])
                image_boxes.append(box_ops.clip_boxes_to_image(boxes, image_shape))
                image_scores.append(scores)
                image_labels.append(topk_idxs % num_classes)
            detections.append(_nms_detections(image_boxes, image_scores, image_labels,
                                              self.nms_thresh, self.detections_per_img))
        return detections

    def forward(self, images, targets=None):
        original_image_sizes, images, targets, features, head_outputs, anchors = \
            _single_stage_inputs(self, images, targets)
        num_per_level = [int(f.shape[2] * f.shape[3]) for f in features]
        if self.training:
            return self.compute_loss(targets, head_outputs, anchors, num_per_level)
        split_outputs = {k: list(v.split(num_per_level, dim=1)) for k, v in head_outputs.items()}
        split_anchors = [list(a.split(num_per_level)) for a in anchors]
        detections = self.postprocess_detections(split_outputs, split_anchors,
                                                 images.image_sizes)
        return self.transform.postprocess(detections, images.image_sizes, original_image_sizes)


class FCOS_ResNet50_FPN_Weights(WeightsEnum):
    COCO_V1 = Weights(
        url="https://download.pytorch.org/models/fcos_resnet50_fpn_coco-99b0c9b7.pth",
        transforms=ObjectDetection,
        meta={"num_params": 32269600, "categories": COCO_CATEGORIES, "min_size": (1, 1),
              "recipe": "https://github.com/pytorch/vision/tree/main/references/detection"
                        "#fcos-resnet-50-fpn",
              "_metrics": {"COCO-val2017": {"box_map": 39.2}}, "_ops": 128.207,
              "_file_size": 123.608,
              "_docs": "These weights were produced by following a similar training recipe as "
                       "on the paper."})
    DEFAULT = COCO_V1


@register_model(weights=FCOS_ResNet50_FPN_Weights)
def fcos_resnet50_fpn(*, weights=None, progress=True, num_classes=None,
                      weights_backbone=ResNet50_Weights.IMAGENET1K_V1,
                      trainable_backbone_layers=None, **kwargs):
    """FCOS with a ResNet-50-FPN backbone (P3-P7: layers 2-4 and LastLevelP6P7), torchvision's
    ``fcos_resnet50_fpn``.

    ``weights`` a :class:`FCOS_ResNet50_FPN_Weights` member, its name, a local checkpoint
    path, a state dict or None; ``num_classes`` (default 91); ``weights_backbone`` (None to
    build offline); ``trainable_backbone_layers`` (0-5, default 3 when pretrained); other
    keyword arguments go to :class:`FCOS`."""
    weights, weights_backbone, num_classes = _resolve(
        FCOS_ResNet50_FPN_Weights, weights, weights_backbone, num_classes)
    is_trained = weights is not None or weights_backbone is not None
    trainable_backbone_layers = _validate_trainable_layers(is_trained,
                                                           trainable_backbone_layers, 5, 3)
    norm_layer = misc_nn_ops.FrozenBatchNorm2d if is_trained else nn.BatchNorm2d
    backbone = resnet50(weights=weights_backbone, progress=progress, norm_layer=norm_layer)
    backbone = _resnet_fpn_extractor(backbone, trainable_backbone_layers,
                                     returned_layers=[2, 3, 4],
                                     extra_blocks=LastLevelP6P7(256, 256))
    model = FCOS(backbone, num_classes, **kwargs)
    return _load(model, weights, progress)
