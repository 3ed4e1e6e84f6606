"""SSD (torchvision.models.detection.ssd): the Single Shot MultiBox Detector of Liu et al.
(2016) with its scoring heads, hard-negative-mining loss, the VGG-16 feature extractor, the
``ssd300_vgg16`` builder and its weights enum, with torchvision's module names.

    >>> import fiamma
    >>> m = ssd300_vgg16(weights=None, weights_backbone=None, num_classes=3).eval()
    >>> out = m([fiamma.rand(3, 64, 48)])
    >>> sorted(out[0]), out[0]["boxes"].shape[1]
    (['boxes', 'labels', 'scores'], 4)
"""
import warnings
from collections import OrderedDict

import fiamma
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models.detection import _utils as det_utils
from fiamma.vision.models.detection.anchor_utils import DefaultBoxGenerator
from fiamma.vision.models.detection.backbone_utils import (
    _freeze_stages,
    _validate_trainable_layers,
)
from fiamma.vision.models.detection.faster_rcnn import COCO_CATEGORIES, _load, _resolve
from fiamma.vision.models.detection.generalized_rcnn import _nms_detections, _single_stage_inputs
from fiamma.vision.models.detection.transform import GeneralizedRCNNTransform
from fiamma.vision.models.vgg import VGG16_Weights, vgg16
from fiamma.vision.ops import boxes as box_ops
from fiamma.vision.transforms._presets import ObjectDetection

__all__ = ["SSD", "SSDHead", "SSDScoringHead", "SSDClassificationHead", "SSDRegressionHead",
           "SSDFeatureExtractorVGG", "SSD300_VGG16_Weights", "ssd300_vgg16"]


def _xavier_init(conv):
    for layer in conv.modules():
        if isinstance(layer, nn.Conv2d):
            nn.init.xavier_uniform_(layer.weight)
            if layer.bias is not None:
                nn.init.constant_(layer.bias, 0.0)


class SSDScoringHead(nn.Module):
    """Applies ``module_list[i]`` to feature map ``i`` and concatenates the (N, H*W*A,
    ``num_columns``) results over the maps."""

    def __init__(self, module_list, num_columns):
        super().__init__()
        self.module_list = module_list
        self.num_columns = num_columns

    def forward(self, x):
        if len(x) != len(self.module_list):
            raise ValueError(f"{type(self).__name__}: {len(x)} feature maps for "
                             f"{len(self.module_list)} prediction layers")
        out = []
        for module, features in zip(self.module_list, x):
            r = module(features)
            n, _, h, w = r.shape
            out.append(r.reshape(n, -1, self.num_columns, h, w).permute(0, 3, 4, 1, 2)
                       .reshape(n, -1, self.num_columns))
        return fiamma.cat(out, dim=1)


class SSDClassificationHead(SSDScoringHead):
    """A 3x3 conv to ``num_anchors[i] * num_classes`` logits per feature map."""

    def __init__(self, in_channels, num_anchors, num_classes):
        cls_logits = nn.ModuleList([nn.Conv2d(c, num_classes * a, kernel_size=3, padding=1)
                                    for c, a in zip(in_channels, num_anchors)])
        _xavier_init(cls_logits)
        super().__init__(cls_logits, num_classes)


class SSDRegressionHead(SSDScoringHead):
    """A 3x3 conv to ``num_anchors[i] * 4`` box deltas per feature map."""

    def __init__(self, in_channels, num_anchors):
        bbox_reg = nn.ModuleList([nn.Conv2d(c, 4 * a, kernel_size=3, padding=1)
                                  for c, a in zip(in_channels, num_anchors)])
        _xavier_init(bbox_reg)
        super().__init__(bbox_reg, 4)


class SSDHead(nn.Module):
    def __init__(self, in_channels, num_anchors, num_classes):
        super().__init__()
        self.classification_head = SSDClassificationHead(in_channels, num_anchors, num_classes)
        self.regression_head = SSDRegressionHead(in_channels, num_anchors)

    def forward(self, x):
        return {"bbox_regression": self.regression_head(x),
                "cls_logits": self.classification_head(x)}


class SSD(nn.Module):
    """SSD over ``backbone`` (returning a tensor or an ordered dict of feature maps) with
    ``anchor_generator`` (a :class:`DefaultBoxGenerator`) on images resized to ``size``
    (h, w); torchvision's arguments and defaults (score threshold 0.01, NMS 0.45, 200
    detections, IoU 0.5 matching, 400 candidates per class, 3 hard negatives per positive).
    Training returns ``{"bbox_regression", "classification"}``, eval a list of detections."""

    def __init__(self, backbone, anchor_generator, size, num_classes, image_mean=None,
                 image_std=None, head=None, score_thresh=0.01, nms_thresh=0.45,
                 detections_per_img=200, iou_thresh=0.5, topk_candidates=400,
                 positive_fraction=0.25, **kwargs):
        super().__init__()
        if not isinstance(anchor_generator, DefaultBoxGenerator):
            raise TypeError(f"anchor_generator should be a DefaultBoxGenerator, got "
                            f"{type(anchor_generator).__name__}")
        self.backbone = backbone
        self.anchor_generator = anchor_generator
        self.box_coder = det_utils.BoxCoder(weights=(10.0, 10.0, 5.0, 5.0))
        if head is None:
            if hasattr(backbone, "out_channels"):
                out_channels = backbone.out_channels
            else:
                out_channels = det_utils.retrieve_out_channels(backbone, size)
            if len(out_channels) != len(anchor_generator.aspect_ratios):
                raise ValueError(f"The length of the output channels from the backbone "
                                 f"({len(out_channels)}) do not match the length of the anchor "
                                 f"generator aspect ratios "
                                 f"({len(anchor_generator.aspect_ratios)})")
            head = SSDHead(out_channels, anchor_generator.num_anchors_per_location(),
                           num_classes)
        self.head = head
        self.proposal_matcher = det_utils.SSDMatcher(iou_thresh)
        image_mean = image_mean if image_mean is not None else [0.485, 0.456, 0.406]
        image_std = image_std if image_std is not None else [0.229, 0.224, 0.225]
        self.transform = GeneralizedRCNNTransform(min(size), max(size), image_mean, image_std,
                                                  size_divisible=1, fixed_size=size, **kwargs)
        self.score_thresh = score_thresh
        self.nms_thresh = nms_thresh
        self.detections_per_img = detections_per_img
        self.topk_candidates = topk_candidates
        self.neg_to_pos_ratio = (1.0 - positive_fraction) / positive_fraction

    def compute_loss(self, targets, head_outputs, anchors, matched_idxs):
        """Smooth L1 of the positives' deltas plus cross-entropy of the positives and of the
        ``neg_to_pos_ratio`` x positives hardest negatives of each image, both divided by the
        number of positives in the batch."""
        bbox_regression = head_outputs["bbox_regression"]
        cls_logits = head_outputs["cls_logits"]
        num_fg = 0
        bbox_loss, cls_targets = [], []
        for target, reg, logits, anc, matched in zip(targets, bbox_regression, cls_logits,
                                                      anchors, matched_idxs):
            fg_idx = fiamma.where(matched >= 0)[0]
            fg_matched = matched[fg_idx]
            num_fg += int(fg_matched.numel())
            gt = target["boxes"][fg_matched]
            tgt = self.box_coder.encode_single(gt, anc[fg_idx])
            bbox_loss.append(F.smooth_l1_loss(reg[fg_idx], tgt, reduction="sum"))
            cls_t = fiamma.zeros((int(logits.shape[0]),), dtype=target["labels"].dtype)
            cls_t[fg_idx] = target["labels"][fg_matched]
            cls_targets.append(cls_t)
        bbox_loss = fiamma.stack(bbox_loss)
        cls_targets = fiamma.stack(cls_targets)
        num_classes = cls_logits.shape[-1]
        cls_loss = F.cross_entropy(cls_logits.reshape(-1, num_classes), cls_targets.reshape(-1),
                                   reduction="none").reshape(tuple(cls_targets.shape))
        fg = cls_targets > 0
        num_negative = self.neg_to_pos_ratio * fg.sum(1, keepdim=True)
        # hard negatives: the background anchors of highest loss (positives ranked last)
        negative_loss = fiamma.where(fg, float("-inf"), cls_loss.detach())
        _, idx = negative_loss.sort(1, descending=True)
        background = idx.sort(1)[1] < num_negative
        n = max(1, num_fg)
        return {"bbox_regression": bbox_loss.sum() / n,
                "classification": (cls_loss[fg].sum() + cls_loss[background].sum()) / n}

    def postprocess_detections(self, head_outputs, image_anchors, image_shapes):
        bbox_regression = head_outputs["bbox_regression"]
        pred_scores = F.softmax(head_outputs["cls_logits"], dim=-1)
        num_classes = pred_scores.shape[-1]
        detections = []
        for boxes, scores, anchors, image_shape in zip(bbox_regression, pred_scores,
                                                       image_anchors, image_shapes):
            boxes = box_ops.clip_boxes_to_image(self.box_coder.decode_single(boxes, anchors),
                                                image_shape)
            image_boxes, image_scores, image_labels = [], [], []
            for label in range(1, num_classes):
                score = scores[:, label]
                keep = score > self.score_thresh
                score, box = score[keep], boxes[keep]
                score, idxs = score.topk(det_utils._topk_min(score, self.topk_candidates, 0))
                image_boxes.append(box[idxs])
                image_scores.append(score)
                image_labels.append(fiamma.full((score.shape[0],), label,
                                                dtype=fiamma.int64))
            detections.append(_nms_detections(image_boxes, image_scores, image_labels,
                                              self.nms_thresh, self.detections_per_img))
        return detections

    def forward(self, images, targets=None):
        original_image_sizes, images, targets, features, head_outputs, anchors = \
            _single_stage_inputs(self, images, targets)
        if self.training:
            matched_idxs = []
            for anc, target in zip(anchors, targets):
                if target["boxes"].numel() == 0:
                    matched_idxs.append(fiamma.full((int(anc.shape[0]),), -1,
                                                    dtype=fiamma.int64))
                else:
                    matched_idxs.append(self.proposal_matcher(
                        box_ops.box_iou(target["boxes"], anc)))
            return self.compute_loss(targets, head_outputs, anchors, matched_idxs)
        detections = self.postprocess_detections(head_outputs, anchors, images.image_sizes)
        return self.transform.postprocess(detections, images.image_sizes, original_image_sizes)


class SSDFeatureExtractorVGG(nn.Module):
    """VGG-16's ``features`` cut for SSD: conv4_3 (L2-normalised, scaled by the learnt
    ``scale_weight``, initially 20), then conv5 + the dilated fc6/fc7 convs, then four (five
    with ``highres``) extra blocks; returns the six (seven) maps as an ordered dict. The third
    max-pool rounds up (``ceil_mode``), as in the paper."""

    def __init__(self, backbone, highres):
        super().__init__()
        layers = list(backbone)
        pools = [i for i, layer in enumerate(layers) if isinstance(layer, nn.MaxPool2d)]
        if len(pools) != 5:
            raise ValueError(f"SSDFeatureExtractorVGG: expected VGG features with 5 max-pool "
                             f"layers, got {len(pools)}")
        maxpool3_pos, maxpool4_pos = pools[2], pools[3]
        layers[maxpool3_pos].ceil_mode = True
        self.scale_weight = nn.Parameter(fiamma.ones(512) * 20)
        self.features = nn.Sequential(*layers[:maxpool4_pos])

        def block(cin, mid, cout, **kw):
            return nn.Sequential(nn.Conv2d(cin, mid, kernel_size=1), nn.ReLU(inplace=True),
                                 nn.Conv2d(mid, cout, **kw), nn.ReLU(inplace=True))

        extra = nn.ModuleList([
            block(1024, 256, 512, kernel_size=3, padding=1, stride=2),     # conv8_2
            block(512, 128, 256, kernel_size=3, padding=1, stride=2),      # conv9_2
            block(256, 128, 256, kernel_size=3),                           # conv10_2
            block(256, 128, 256, kernel_size=3),                           # conv11_2
        ])
        if highres:
            extra.append(block(256, 128, 256, kernel_size=4))              # conv12_2
        _xavier_init(extra)
        fc = nn.Sequential(
            nn.MaxPool2d(kernel_size=3, stride=1, padding=1, ceil_mode=False),
            nn.Conv2d(512, 1024, kernel_size=3, padding=6, dilation=6),    # fc6, atrous
            nn.ReLU(inplace=True),
            nn.Conv2d(1024, 1024, kernel_size=1),                          # fc7
            nn.ReLU(inplace=True))
        _xavier_init(fc)
        extra.insert(0, nn.Sequential(*layers[maxpool4_pos:-1], fc))
        self.extra = extra

    def forward(self, x):
        x = self.features(x)
        output = [self.scale_weight.reshape(1, -1, 1, 1) * F.normalize(x)]
        for block in self.extra:
            x = block(x)
            output.append(x)
        return OrderedDict([(str(i), v) for i, v in enumerate(output)])


def _vgg_extractor(backbone, highres, trainable_layers):
    features = backbone.features
    stage_indices = [0] + [i for i, b in enumerate(features)
                           if isinstance(b, nn.MaxPool2d)][:-1]
    num_stages = len(stage_indices)
    if not 0 <= trainable_layers <= num_stages:
        raise ValueError(f"trainable_layers should be in the range [0, {num_stages}]. Instead "
                         f"got {trainable_layers}")
    _freeze_stages(features, stage_indices, trainable_layers)
    return SSDFeatureExtractorVGG(features, highres)


class SSD300_VGG16_Weights(WeightsEnum):
    COCO_V1 = Weights(
        url="https://download.pytorch.org/models/ssd300_vgg16_coco-b556d3b4.pth",
        transforms=ObjectDetection,
        meta={"num_params": 35641826, "categories": COCO_CATEGORIES, "min_size": (1, 1),
              "recipe": "https://github.com/pytorch/vision/tree/main/references/detection"
                        "#ssd300-vgg16",
              "_metrics": {"COCO-val2017": {"box_map": 25.1}}, "_ops": 34.858,
              "_file_size": 135.988,
              "_docs": "These weights were produced by following a similar training recipe as "
                       "on the paper."})
    DEFAULT = COCO_V1


@register_model(weights=SSD300_VGG16_Weights)
def ssd300_vgg16(*, weights=None, progress=True, num_classes=None,
                 weights_backbone=VGG16_Weights.IMAGENET1K_FEATURES,
                 trainable_backbone_layers=None, **kwargs):
    """SSD300 with a VGG-16 backbone (torchvision's ``ssd300_vgg16``): images resized to
    300x300, normalised with the Caffe means (and std 1/255), 6 feature maps with 4 or 6
    default boxes per location.

    ``weights`` a :class:`SSD300_VGG16_Weights` member, its name, a local checkpoint path, a
    state dict or None; ``num_classes`` (default 91); ``weights_backbone`` (a
    :class:`VGG16_Weights`; None to build offline); ``trainable_backbone_layers`` (0-5,
    default 4 when pretrained); other keyword arguments go to :class:`SSD` (``size`` is
    fixed and ignored with a warning)."""
    if "size" in kwargs:
        warnings.warn("The size of the model is already fixed; ignoring the parameter.")
        kwargs.pop("size")
    weights, weights_backbone, num_classes = _resolve(
        SSD300_VGG16_Weights, weights, weights_backbone, num_classes,
        backbone_enum=VGG16_Weights)
    trainable_backbone_layers = _validate_trainable_layers(
        weights is not None or weights_backbone is not None, trainable_backbone_layers, 5, 4)
    backbone = vgg16(weights=weights_backbone, progress=progress)
    backbone = _vgg_extractor(backbone, False, trainable_backbone_layers)
    anchor_generator = DefaultBoxGenerator(
        [[2], [2, 3], [2, 3], [2, 3], [2], [2]],
        scales=[0.07, 0.15, 0.33, 0.51, 0.69, 0.87, 1.05], steps=[8, 16, 32, 64, 100, 300])
    kwargs = {"image_mean": [0.48235, 0.45882, 0.40784],
              "image_std": [1.0 / 255.0, 1.0 / 255.0, 1.0 / 255.0], **kwargs}
    model = SSD(backbone, anchor_generator, (300, 300), num_classes, **kwargs)
    return _load(model, weights, progress)
