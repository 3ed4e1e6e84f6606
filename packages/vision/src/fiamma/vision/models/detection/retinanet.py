"""RetinaNet (torchvision.models.detection.retinanet): the model, its classification and
regression heads, the ResNet-50-FPN builders (v1 and v2) and their weights enums, with
torchvision's module names.

    >>> import fiamma
    >>> m = retinanet_resnet50_fpn(weights=None, weights_backbone=None, num_classes=3,
    ...                            min_size=64, max_size=64).eval()
    >>> sorted(m([fiamma.rand(3, 64, 48)])[0])
    ['boxes', 'labels', 'scores']
"""
import math
from functools import partial

import fiamma
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models.detection import _utils as det_utils
from fiamma.vision.models.detection._utils import overwrite_eps
from fiamma.vision.models.detection.anchor_utils import AnchorGenerator
from fiamma.vision.models.detection.backbone_utils import (
    _resnet_fpn_extractor,
    _validate_trainable_layers,
)
from fiamma.vision.models.detection.faster_rcnn import COCO_CATEGORIES, _load, _resolve
from fiamma.vision.models.detection.generalized_rcnn import _nms_detections, _single_stage_inputs
from fiamma.vision.models.detection.transform import GeneralizedRCNNTransform
from fiamma.vision.models.resnet import ResNet50_Weights, resnet50
from fiamma.vision.ops import boxes as box_ops, misc as misc_nn_ops, sigmoid_focal_loss
from fiamma.vision.ops.feature_pyramid_network import LastLevelP6P7
from fiamma.vision.transforms._presets import ObjectDetection

__all__ = ["RetinaNet", "RetinaNetHead", "RetinaNetClassificationHead",
           "RetinaNetRegressionHead", "RetinaNet_ResNet50_FPN_Weights",
           "RetinaNet_ResNet50_FPN_V2_Weights", "retinanet_resnet50_fpn",
           "retinanet_resnet50_fpn_v2"]


def _sum(xs):
    res = xs[0]
    for x in xs[1:]:
        res = res + x
    return res


def _v1_to_v2_weights(state_dict, prefix):
    for i in range(4):
        for kind in ("weight", "bias"):
            old, new = f"{prefix}conv.{2 * i}.{kind}", f"{prefix}conv.{i}.0.{kind}"
            if old in state_dict:
                state_dict[new] = state_dict.pop(old)


def _default_anchorgen():
    sizes = tuple((x, int(x * 2 ** (1.0 / 3)), int(x * 2 ** (2.0 / 3)))
                  for x in (32, 64, 128, 256, 512))
    return AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * len(sizes))


def _conv_stack(in_channels, norm_layer):
    # ReLU out of place: numerically the same as torchvision's inplace=True, but core's
    # autograd loses the graph when a GroupNorm output is modified in place (a view of its
    # internal (N, G, -1) result); see the notes for the lead
    return nn.Sequential(*[misc_nn_ops.Conv2dNormActivation(
        in_channels, in_channels, norm_layer=norm_layer, inplace=False) for _ in range(4)])


class _VersionedHead(nn.Module):
    _version = 2

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, *args, **kwargs):
        version = (local_metadata or {}).get("version", None)
        if version is None or version < 2:     # checkpoints from before Conv2dNormActivation
            _v1_to_v2_weights(state_dict, prefix)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs, *args, **kwargs)


def _flatten_levels(x, per_anchor):
    out = []
    for t in x:
        N, _, H, W = t.shape
        out.append(t.reshape(N, -1, per_anchor, H, W).permute(0, 3, 4, 1, 2)
                   .reshape(N, -1, per_anchor))
    return fiamma.cat(out, dim=1)


class RetinaNetClassificationHead(_VersionedHead):
    """Four 3x3 conv + ReLU layers and a 3x3 conv to ``num_anchors * num_classes`` logits (bias
    initialised to the prior ``prior_probability``); loss: sigmoid focal loss per image over
    the anchors not between the IoU thresholds, divided by the number of foreground anchors."""

    def __init__(self, in_channels, num_anchors, num_classes, prior_probability=0.01,
                 norm_layer=None):
        super().__init__()
        self.conv = _conv_stack(in_channels, norm_layer)
        for layer in self.conv.modules():
            if isinstance(layer, nn.Conv2d):
                nn.init.normal_(layer.weight, std=0.01)
                if layer.bias is not None:
                    nn.init.constant_(layer.bias, 0)
        self.cls_logits = nn.Conv2d(in_channels, num_anchors * num_classes, kernel_size=3,
                                    stride=1, padding=1)
        nn.init.normal_(self.cls_logits.weight, std=0.01)
        nn.init.constant_(self.cls_logits.bias,
                          -math.log((1 - prior_probability) / prior_probability))
        self.num_classes = num_classes
        self.num_anchors = num_anchors
        self.BETWEEN_THRESHOLDS = det_utils.Matcher.BETWEEN_THRESHOLDS

    def compute_loss(self, targets, head_outputs, matched_idxs):
        losses = []
        for target, logits, matched in zip(targets, head_outputs["cls_logits"], matched_idxs):
            fg = matched >= 0
            num_fg = int(fg.sum())
            fg_idx = fiamma.where(fg)[0]
            gt = fiamma.zeros(tuple(logits.shape), dtype=logits.dtype)
            if num_fg:
                gt[fg_idx, target["labels"][matched[fg_idx]]] = 1.0
            valid = fiamma.where(matched != self.BETWEEN_THRESHOLDS)[0]
            losses.append(sigmoid_focal_loss(logits[valid], gt[valid], reduction="sum")
                          / max(1, num_fg))
        return _sum(losses) / len(targets)

    def forward(self, x):
        return _flatten_levels([self.cls_logits(self.conv(f)) for f in x], self.num_classes)


class RetinaNetRegressionHead(_VersionedHead):
    """Four 3x3 conv + ReLU layers and a 3x3 conv to ``num_anchors * 4`` box deltas; loss
    (``_loss_type``, L1 by default) over the foreground anchors, divided by their number."""

    def __init__(self, in_channels, num_anchors, norm_layer=None):
        super().__init__()
        self.conv = _conv_stack(in_channels, norm_layer)
        self.bbox_reg = nn.Conv2d(in_channels, num_anchors * 4, kernel_size=3, stride=1,
                                  padding=1)
        nn.init.normal_(self.bbox_reg.weight, std=0.01)
        nn.init.zeros_(self.bbox_reg.bias)
        for layer in self.conv.modules():
            if isinstance(layer, nn.Conv2d):
                nn.init.normal_(layer.weight, std=0.01)
                if layer.bias is not None:
                    nn.init.zeros_(layer.bias)
        self.box_coder = det_utils.BoxCoder(weights=(1.0, 1.0, 1.0, 1.0))
        self._loss_type = "l1"

    def compute_loss(self, targets, head_outputs, anchors, matched_idxs):
        losses = []
        for target, reg, anc, matched in zip(targets, head_outputs["bbox_regression"], anchors,
                                             matched_idxs):
            fg = fiamma.where(matched >= 0)[0]
            num_fg = fg.numel()
            gt_boxes = target["boxes"][matched[fg]]
            losses.append(det_utils._box_loss(self._loss_type, self.box_coder, anc[fg],
                                              gt_boxes, reg[fg])
                          / max(1, num_fg))
        return _sum(losses) / max(1, len(targets))

    def forward(self, x):
        return _flatten_levels([self.bbox_reg(self.conv(f)) for f in x], 4)


class RetinaNetHead(nn.Module):
    """The classification and regression heads, applied to every FPN level."""

    def __init__(self, in_channels, num_anchors, num_classes, norm_layer=None):
        super().__init__()
        self.classification_head = RetinaNetClassificationHead(in_channels, num_anchors,
                                                               num_classes,
                                                               norm_layer=norm_layer)
        self.regression_head = RetinaNetRegressionHead(in_channels, num_anchors,
                                                       norm_layer=norm_layer)

    def compute_loss(self, targets, head_outputs, anchors, matched_idxs):
        return {"classification": self.classification_head.compute_loss(targets, head_outputs,
                                                                        matched_idxs),
                "bbox_regression": self.regression_head.compute_loss(targets, head_outputs,
                                                                     anchors, matched_idxs)}

    def forward(self, x):
        return {"cls_logits": self.classification_head(x),
                "bbox_regression": self.regression_head(x)}


class RetinaNet(nn.Module):
    """RetinaNet (Lin et al., "Focal Loss for Dense Object Detection") over ``backbone`` with
    torchvision's arguments and defaults (IoU 0.5/0.4 with low-quality matches, score threshold
    0.05, top 1000 candidates per level, NMS 0.5, 300 detections). Training returns
    ``{"classification", "bbox_regression"}`` losses, eval one dict of boxes/scores/labels per
    image."""

    def __init__(self, backbone, num_classes, min_size=800, max_size=1333, image_mean=None,
                 image_std=None, anchor_generator=None, head=None, proposal_matcher=None,
                 score_thresh=0.05, nms_thresh=0.5, detections_per_img=300, fg_iou_thresh=0.5,
                 bg_iou_thresh=0.4, topk_candidates=1000, **kwargs):
        super().__init__()
        if not hasattr(backbone, "out_channels"):
            raise ValueError("backbone should contain an attribute out_channels specifying the "
                             "number of output channels (assumed to be the same for all the "
                             "levels)")
        self.backbone = backbone
        if not isinstance(anchor_generator, (AnchorGenerator, type(None))):
            raise TypeError(f"anchor_generator should be of type AnchorGenerator or None "
                            f"instead of {type(anchor_generator).__name__}")
        if anchor_generator is None:
            anchor_generator = _default_anchorgen()
        self.anchor_generator = anchor_generator
        if head is None:
            head = RetinaNetHead(backbone.out_channels,
                                 anchor_generator.num_anchors_per_location()[0], num_classes)
        self.head = head
        if proposal_matcher is None:
            proposal_matcher = det_utils.Matcher(fg_iou_thresh, bg_iou_thresh,
                                                 allow_low_quality_matches=True)
        self.proposal_matcher = proposal_matcher
        self.box_coder = det_utils.BoxCoder(weights=(1.0, 1.0, 1.0, 1.0))
        if image_mean is None:
            image_mean = [0.485, 0.456, 0.406]
        if image_std is None:
            image_std = [0.229, 0.224, 0.225]
        self.transform = GeneralizedRCNNTransform(min_size, max_size, image_mean, image_std,
                                                  **kwargs)
        self.score_thresh = score_thresh
        self.nms_thresh = nms_thresh
        self.detections_per_img = detections_per_img
        self.topk_candidates = topk_candidates

    def compute_loss(self, targets, head_outputs, anchors):
        matched_idxs = []
        for anc, target in zip(anchors, targets):
            if target["boxes"].numel() == 0:
                matched_idxs.append(fiamma.full((anc.shape[0],), -1, dtype=fiamma.int64))
                continue
            matched_idxs.append(self.proposal_matcher(box_ops.box_iou(target["boxes"], anc)))
        return self.head.compute_loss(targets, head_outputs, anchors, matched_idxs)

    def postprocess_detections(self, head_outputs, anchors, image_shapes):
        class_logits = head_outputs["cls_logits"]
        box_regression = head_outputs["bbox_regression"]
        detections = []
        for index, image_shape in enumerate(image_shapes):
            image_boxes, image_scores, image_labels = [], [], []
            for reg, logits, anc in zip([br[index] for br in box_regression],
                                        [cl[index] for cl in class_logits], anchors[index]):
                num_classes = logits.shape[-1]
                scores = fiamma.sigmoid(logits).flatten()
                keep = scores > self.score_thresh
                scores = scores[keep]
                topk_idxs = fiamma.where(keep)[0]
                num_topk = det_utils._topk_min(topk_idxs, self.topk_candidates, 0)
                scores, idxs = scores.topk(num_topk)
                topk_idxs = topk_idxs[idxs]
                anchor_idxs = fiamma.div(topk_idxs, num_classes, rounding_mode="floor")
                labels = topk_idxs % num_classes
                boxes = self.box_coder.decode_single(reg[anchor_idxs], anc[anchor_idxs])
                image_boxes.append(box_ops.clip_boxes_to_image(boxes, image_shape))
                image_scores.append(scores)
                image_labels.append(labels)
            detections.append(_nms_detections(image_boxes, image_scores, image_labels,
                                              self.nms_thresh, self.detections_per_img))
        return detections

    def forward(self, images, targets=None):
        original_image_sizes, images, targets, features, head_outputs, anchors = \
            _single_stage_inputs(self, images, targets)
        if self.training:
            return self.compute_loss(targets, head_outputs, anchors)
        num_per_level = [f.shape[2] * f.shape[3] for f in features]
        A = head_outputs["cls_logits"].shape[1] // sum(num_per_level)
        num_per_level = [hw * A for hw in num_per_level]
        split_outputs = {k: list(v.split(num_per_level, dim=1)) for k, v in head_outputs.items()}
        split_anchors = [list(a.split(num_per_level)) for a in anchors]
        detections = self.postprocess_detections(split_outputs, split_anchors,
                                                 images.image_sizes)
        return self.transform.postprocess(detections, images.image_sizes, original_image_sizes)


_COMMON_META = {"categories": COCO_CATEGORIES, "min_size": (1, 1)}


class RetinaNet_ResNet50_FPN_Weights(WeightsEnum):
    COCO_V1 = Weights(
        url="https://download.pytorch.org/models/retinanet_resnet50_fpn_coco-eeacb38b.pth",
        transforms=ObjectDetection,
        meta={**_COMMON_META, "num_params": 34014999,
              "recipe": "https://github.com/pytorch/vision/tree/main/references/detection"
                        "#retinanet",
              "_metrics": {"COCO-val2017": {"box_map": 36.4}}, "_ops": 151.54,
              "_file_size": 130.267,
              "_docs": "These weights were produced by following a similar training recipe as "
                       "on the paper."})
    DEFAULT = COCO_V1


class RetinaNet_ResNet50_FPN_V2_Weights(WeightsEnum):
    COCO_V1 = Weights(
        url="https://download.pytorch.org/models/retinanet_resnet50_fpn_v2_coco-5905b1c5.pth",
        transforms=ObjectDetection,
        meta={**_COMMON_META, "num_params": 38198935,
              "recipe": "https://github.com/pytorch/vision/pull/5756",
              "_metrics": {"COCO-val2017": {"box_map": 41.5}}, "_ops": 152.238,
              "_file_size": 146.037,
              "_docs": "These weights were produced using an enhanced training recipe to boost "
                       "the model accuracy."})
    DEFAULT = COCO_V1


@register_model(weights=RetinaNet_ResNet50_FPN_Weights)
def retinanet_resnet50_fpn(*, weights=None, progress=True, num_classes=None,
                           weights_backbone=ResNet50_Weights.IMAGENET1K_V1,
                           trainable_backbone_layers=None, **kwargs):
    """RetinaNet with a ResNet-50-FPN backbone (P3-P7; torchvision's
    ``retinanet_resnet50_fpn``); arguments as :func:`fasterrcnn_resnet50_fpn`."""
    weights, weights_backbone, num_classes = _resolve(
        RetinaNet_ResNet50_FPN_Weights, weights, weights_backbone, num_classes)
    is_trained = weights is not None or weights_backbone is not None
    trainable_backbone_layers = _validate_trainable_layers(is_trained,
                                                           trainable_backbone_layers, 5, 3)
    norm_layer = misc_nn_ops.FrozenBatchNorm2d if is_trained else nn.BatchNorm2d
    backbone = resnet50(weights=weights_backbone, progress=progress, norm_layer=norm_layer)
    backbone = _resnet_fpn_extractor(backbone, trainable_backbone_layers,
                                     returned_layers=[2, 3, 4],
                                     extra_blocks=LastLevelP6P7(256, 256))
    model = RetinaNet(backbone, num_classes, **kwargs)
    _load(model, weights, progress)
    if weights == RetinaNet_ResNet50_FPN_Weights.COCO_V1:
        overwrite_eps(model, 0.0)
    return model


@register_model(weights=RetinaNet_ResNet50_FPN_V2_Weights)
def retinanet_resnet50_fpn_v2(*, weights=None, progress=True, num_classes=None,
                              weights_backbone=None, trainable_backbone_layers=None, **kwargs):
    """RetinaNet v2 (torchvision's ``retinanet_resnet50_fpn_v2``): P6/P7 from C5, GroupNorm
    heads and a GIoU box loss."""
    weights, weights_backbone, num_classes = _resolve(
        RetinaNet_ResNet50_FPN_V2_Weights, weights, weights_backbone, num_classes)
    is_trained = weights is not None or weights_backbone is not None
    trainable_backbone_layers = _validate_trainable_layers(is_trained,
                                                           trainable_backbone_layers, 5, 3)
    backbone = resnet50(weights=weights_backbone, progress=progress)
    backbone = _resnet_fpn_extractor(backbone, trainable_backbone_layers,
                                     returned_layers=[2, 3, 4],
                                     extra_blocks=LastLevelP6P7(2048, 256))
    anchor_generator = _default_anchorgen()
    head = RetinaNetHead(backbone.out_channels, anchor_generator.num_anchors_per_location()[0],
                         num_classes, norm_layer=partial(nn.GroupNorm, 32))
    head.regression_head._loss_type = "giou"
    model = RetinaNet(backbone, num_classes, anchor_generator=anchor_generator, head=head,
                      **kwargs)
    return _load(model, weights, progress)
