"""SSDlite (torchvision.models.detection.ssdlite): SSD with depthwise-separable prediction and
extra blocks over MobileNetV3-Large (Howard et al., 2019), the ``ssdlite320_mobilenet_v3_large``
builder and its weights enum, with torchvision's module names.

    >>> import fiamma
    >>> m = ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None,
    ...                                   num_classes=3).eval()
    >>> sorted(m([fiamma.rand(3, 64, 48)])[0])
    ['boxes', 'labels', 'scores']
"""
import warnings
from collections import OrderedDict
from functools import partial

from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models.detection import _utils as det_utils
from fiamma.vision.models.detection.anchor_utils import DefaultBoxGenerator
from fiamma.vision.models.detection.backbone_utils import (
    _freeze_stages,
    _validate_trainable_layers,
)
from fiamma.vision.models.detection.faster_rcnn import COCO_CATEGORIES, _load, _resolve
from fiamma.vision.models.detection.ssd import SSD, SSDScoringHead
from fiamma.vision.models.mobilenetv3 import MobileNet_V3_Large_Weights, mobilenet_v3_large
from fiamma.vision.ops.misc import Conv2dNormActivation
from fiamma.vision.transforms._presets import ObjectDetection

__all__ = ["SSDLiteHead", "SSDLiteClassificationHead", "SSDLiteRegressionHead",
           "SSDLiteFeatureExtractorMobileNet", "SSDLite320_MobileNet_V3_Large_Weights",
           "ssdlite320_mobilenet_v3_large"]


def _prediction_block(in_channels, out_channels, kernel_size, norm_layer):
    return nn.Sequential(
        Conv2dNormActivation(in_channels, in_channels, kernel_size=kernel_size,
                             groups=in_channels, norm_layer=norm_layer,
                             activation_layer=nn.ReLU6),
        nn.Conv2d(in_channels, out_channels, 1))


def _extra_block(in_channels, out_channels, norm_layer):
    mid = out_channels // 2
    return nn.Sequential(
        Conv2dNormActivation(in_channels, mid, kernel_size=1, norm_layer=norm_layer,
                             activation_layer=nn.ReLU6),
        Conv2dNormActivation(mid, mid, kernel_size=3, stride=2, groups=mid,
                             norm_layer=norm_layer, activation_layer=nn.ReLU6),
        Conv2dNormActivation(mid, out_channels, kernel_size=1, norm_layer=norm_layer,
                             activation_layer=nn.ReLU6))


def _normal_init(conv):
    for layer in conv.modules():
        if isinstance(layer, nn.Conv2d):
            nn.init.normal_(layer.weight, mean=0.0, std=0.03)
            if layer.bias is not None:
                nn.init.constant_(layer.bias, 0.0)


class SSDLiteClassificationHead(SSDScoringHead):
    """Per feature map: a 3x3 depthwise conv + norm + ReLU6 and a 1x1 conv to
    ``num_anchors[i] * num_classes`` logits."""

    def __init__(self, in_channels, num_anchors, num_classes, norm_layer):
        cls_logits = nn.ModuleList([_prediction_block(c, num_classes * a, 3, norm_layer)
                                    for c, a in zip(in_channels, num_anchors)])
        _normal_init(cls_logits)
        super().__init__(cls_logits, num_classes)


class SSDLiteRegressionHead(SSDScoringHead):
    """Per feature map: a 3x3 depthwise conv + norm + ReLU6 and a 1x1 conv to
    ``num_anchors[i] * 4`` box deltas."""

    def __init__(self, in_channels, num_anchors, norm_layer):
        bbox_reg = nn.ModuleList([_prediction_block(c, 4 * a, 3, norm_layer)
                                  for c, a in zip(in_channels, num_anchors)])
        _normal_init(bbox_reg)
        super().__init__(bbox_reg, 4)


class SSDLiteHead(nn.Module):
    def __init__(self, in_channels, num_anchors, num_classes, norm_layer):
        super().__init__()
        self.classification_head = SSDLiteClassificationHead(in_channels, num_anchors,
                                                             num_classes, norm_layer)
        self.regression_head = SSDLiteRegressionHead(in_channels, num_anchors, norm_layer)

    def forward(self, x):
        return {"bbox_regression": self.regression_head(x),
                "cls_logits": self.classification_head(x)}


class SSDLiteFeatureExtractorMobileNet(nn.Module):
    """MobileNet ``features`` split at block ``c4_pos`` (after its expansion layer: the C4
    map, and the rest: C5), then four extra blocks of 512, 256, 256, 128 channels (scaled by
    ``width_mult``, at least ``min_depth``); returns the six maps as an ordered dict."""

    def __init__(self, backbone, c4_pos, norm_layer, width_mult=1.0, min_depth=16):
        super().__init__()
        layers = list(backbone)
        if layers[c4_pos].use_res_connect:
            raise ValueError("backbone[c4_pos].use_res_connect should be False")
        c4 = layers[c4_pos].block
        self.features = nn.Sequential(
            nn.Sequential(*layers[:c4_pos], c4[0]),
            # the rest of block c4 keeps its keys (1, 2, ...), as a slice of it in PyTorch
            nn.Sequential(nn.Sequential(OrderedDict(list(c4.named_children())[1:])),
                          *layers[c4_pos + 1:]))

        def depth(d):
            return max(min_depth, int(d * width_mult))

        self.extra = nn.ModuleList([
            _extra_block(layers[-1].out_channels, depth(512), norm_layer),
            _extra_block(depth(512), depth(256), norm_layer),
            _extra_block(depth(256), depth(256), norm_layer),
            _extra_block(depth(256), depth(128), norm_layer)])
        _normal_init(self.extra)

    def forward(self, x):
        output = []
        for block in self.features:
            x = block(x)
            output.append(x)
        for block in self.extra:
            x = block(x)
            output.append(x)
        return OrderedDict([(str(i), v) for i, v in enumerate(output)])


def _mobilenet_extractor(backbone, trainable_layers, norm_layer):
    features = backbone.features
    stage_indices = ([0] + [i for i, b in enumerate(features) if getattr(b, "_is_cn", False)]
                     + [len(features) - 1])
    num_stages = len(stage_indices)
    if not 0 <= trainable_layers <= num_stages:
        raise ValueError(f"trainable_layers should be in the range [0, {num_stages}], instead "
                         f"got {trainable_layers}")
    _freeze_stages(features, stage_indices, trainable_layers)
    return SSDLiteFeatureExtractorMobileNet(features, stage_indices[-2], norm_layer)


class SSDLite320_MobileNet_V3_Large_Weights(WeightsEnum):
    COCO_V1 = Weights(
        url="https://download.pytorch.org/models/ssdlite320_mobilenet_v3_large_coco-a79551df.pth",
        transforms=ObjectDetection,
        meta={"num_params": 3440060, "categories": COCO_CATEGORIES, "min_size": (1, 1),
              "recipe": "https://github.com/pytorch/vision/tree/main/references/detection"
                        "#ssdlite320-mobilenetv3-large",
              "_metrics": {"COCO-val2017": {"box_map": 21.3}}, "_ops": 0.583,
              "_file_size": 13.418,
              "_docs": "These weights were produced by following a similar training recipe as "
                       "on the paper."})
    DEFAULT = COCO_V1


_BACKBONE_KWARGS = ("width_mult", "dilated", "dropout")


@register_model(weights=SSDLite320_MobileNet_V3_Large_Weights)
def ssdlite320_mobilenet_v3_large(*, weights=None, progress=True, num_classes=None,
                                  weights_backbone=MobileNet_V3_Large_Weights.IMAGENET1K_V1,
                                  trainable_backbone_layers=None, norm_layer=None, **kwargs):
    """SSDlite at 320x320 over MobileNetV3-Large (with the reduced tail when built without
    backbone weights), torchvision's ``ssdlite320_mobilenet_v3_large``: score threshold
    0.001, NMS 0.55, 300 detections and candidates, images normalised to [-1, 1].

    ``weights`` a :class:`SSDLite320_MobileNet_V3_Large_Weights` member, its name, a local
    checkpoint path, a state dict or None; ``num_classes`` (default 91); ``weights_backbone``
    (a :class:`MobileNet_V3_Large_Weights`; None to build offline);
    ``trainable_backbone_layers`` (0-6, default 6); ``norm_layer`` (default BatchNorm2d with
    eps 0.001, momentum 0.03); ``width_mult``/``dilated``/``dropout`` go to the MobileNet,
    other keyword arguments to :class:`SSD` (``size`` is fixed and ignored with a warning)."""
    if "size" in kwargs:
        warnings.warn("The size of the model is already fixed; ignoring the parameter.")
        kwargs.pop("size")
    weights, weights_backbone, num_classes = _resolve(
        SSDLite320_MobileNet_V3_Large_Weights, weights, weights_backbone, num_classes,
        backbone_enum=MobileNet_V3_Large_Weights)
    trainable_backbone_layers = _validate_trainable_layers(
        weights is not None or weights_backbone is not None, trainable_backbone_layers, 6, 6)
    reduce_tail = weights_backbone is None
    if norm_layer is None:
        norm_layer = partial(nn.BatchNorm2d, eps=0.001, momentum=0.03)
    backbone_kw = {k: kwargs.pop(k) for k in _BACKBONE_KWARGS if k in kwargs}
    backbone = mobilenet_v3_large(weights=weights_backbone, progress=progress,
                                  norm_layer=norm_layer, reduced_tail=reduce_tail,
                                  **backbone_kw)
    if weights_backbone is None:
        _normal_init(backbone)
    backbone = _mobilenet_extractor(backbone, trainable_backbone_layers, norm_layer)
    size = (320, 320)
    anchor_generator = DefaultBoxGenerator([[2, 3] for _ in range(6)], min_ratio=0.2,
                                           max_ratio=0.95)
    out_channels = det_utils.retrieve_out_channels(backbone, size)
    num_anchors = anchor_generator.num_anchors_per_location()
    if len(out_channels) != len(anchor_generator.aspect_ratios):
        raise ValueError(f"The length of the output channels from the backbone "
                         f"{len(out_channels)} do not match the length of the anchor generator "
                         f"aspect ratios {len(anchor_generator.aspect_ratios)}")
    kwargs = {"score_thresh": 0.001, "nms_thresh": 0.55, "detections_per_img": 300,
              "topk_candidates": 300, "image_mean": [0.5, 0.5, 0.5],
              "image_std": [0.5, 0.5, 0.5], **kwargs}
    model = SSD(backbone, anchor_generator, size, num_classes,
                head=SSDLiteHead(out_channels, num_anchors, num_classes, norm_layer), **kwargs)
    return _load(model, weights, progress)
