"""Faster R-CNN with a MobileNetV3-Large FPN backbone (torchvision's
``fasterrcnn_mobilenet_v3_large_fpn`` and ``fasterrcnn_mobilenet_v3_large_320_fpn``) and their
weights enums; re-exported from ``faster_rcnn`` and ``detection``.

    >>> import fiamma
    >>> m = fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None,
    ...                                           num_classes=3).eval()
    >>> sorted(m([fiamma.rand(3, 64, 48)])[0])
    ['boxes', 'labels', 'scores']
"""
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models.detection.anchor_utils import AnchorGenerator
from fiamma.vision.models.detection.backbone_utils import (
    _mobilenet_extractor,
    _validate_trainable_layers,
)
from fiamma.vision.models.detection.faster_rcnn import (
    _COMMON_META,
    FasterRCNN,
    _load,
    _resolve,
)
from fiamma.vision.models.mobilenetv3 import MobileNet_V3_Large_Weights, mobilenet_v3_large
from fiamma.vision.ops import misc as misc_nn_ops
from fiamma.vision.transforms._presets import ObjectDetection

__all__ = ["FasterRCNN_MobileNet_V3_Large_FPN_Weights",
           "FasterRCNN_MobileNet_V3_Large_320_FPN_Weights", "fasterrcnn_mobilenet_v3_large_fpn",
           "fasterrcnn_mobilenet_v3_large_320_fpn"]

_REF = "https://github.com/pytorch/vision/tree/main/references/detection#"
_DOCS = "These weights were produced by following a similar training recipe as on the paper."


class FasterRCNN_MobileNet_V3_Large_FPN_Weights(WeightsEnum):
    COCO_V1 = Weights(
        url="https://download.pytorch.org/models/fasterrcnn_mobilenet_v3_large_fpn-fb6a3cc7.pth",
        transforms=ObjectDetection,
        meta={**_COMMON_META, "num_params": 19386354,
              "recipe": _REF + "faster-r-cnn-mobilenetv3-large-fpn",
              "_metrics": {"COCO-val2017": {"box_map": 32.8}}, "_ops": 4.494,
              "_file_size": 74.239, "_docs": _DOCS})
    DEFAULT = COCO_V1


class FasterRCNN_MobileNet_V3_Large_320_FPN_Weights(WeightsEnum):
    COCO_V1 = Weights(
        url="https://download.pytorch.org/models/"
            "fasterrcnn_mobilenet_v3_large_320_fpn-907ea3f9.pth",
        transforms=ObjectDetection,
        meta={**_COMMON_META, "num_params": 19386354,
              "recipe": _REF + "faster-r-cnn-mobilenetv3-large-320-fpn",
              "_metrics": {"COCO-val2017": {"box_map": 22.8}}, "_ops": 0.719,
              "_file_size": 74.239, "_docs": _DOCS})
    DEFAULT = COCO_V1


def _fasterrcnn_mobilenet_v3_large_fpn(enum_cls, weights, progress, num_classes,
                                       weights_backbone, trainable_backbone_layers, **kwargs):
    weights, weights_backbone, num_classes = _resolve(
        enum_cls, weights, weights_backbone, num_classes, backbone_enum=MobileNet_V3_Large_Weights)
    is_trained = weights is not None or weights_backbone is not None
    trainable_backbone_layers = _validate_trainable_layers(is_trained,
                                                           trainable_backbone_layers, 6, 3)
    norm_layer = misc_nn_ops.FrozenBatchNorm2d if is_trained else nn.BatchNorm2d
    backbone = mobilenet_v3_large(weights=weights_backbone, progress=progress,
                                  norm_layer=norm_layer)
    backbone = _mobilenet_extractor(backbone, True, trainable_backbone_layers)
    anchor_sizes = ((32, 64, 128, 256, 512),) * 3
    aspect_ratios = ((0.5, 1.0, 2.0),) * len(anchor_sizes)
    model = FasterRCNN(backbone, num_classes,
                       rpn_anchor_generator=AnchorGenerator(anchor_sizes, aspect_ratios),
                       **kwargs)
    return _load(model, weights, progress)


@register_model(weights=FasterRCNN_MobileNet_V3_Large_FPN_Weights)
def fasterrcnn_mobilenet_v3_large_fpn(*, weights=None, progress=True, num_classes=None,
                                      weights_backbone=MobileNet_V3_Large_Weights.IMAGENET1K_V1,
                                      trainable_backbone_layers=None, **kwargs):
    """Faster R-CNN over the last two stages of MobileNetV3-Large with an FPN (5 anchor sizes
    x 3 ratios on each of its 3 levels), RPN score threshold 0.05.

    ``weights`` a :class:`FasterRCNN_MobileNet_V3_Large_FPN_Weights` member, its name, a local
    checkpoint path, a state dict or None; ``num_classes`` (default 91); ``weights_backbone``
    (a :class:`MobileNet_V3_Large_Weights`; None to build offline);
    ``trainable_backbone_layers`` (0-6, default 3 when pretrained); other keyword arguments go
    to :class:`FasterRCNN`."""
    kwargs = {"rpn_score_thresh": 0.05, **kwargs}
    return _fasterrcnn_mobilenet_v3_large_fpn(
        FasterRCNN_MobileNet_V3_Large_FPN_Weights, weights, progress, num_classes,
        weights_backbone, trainable_backbone_layers, **kwargs)


@register_model(weights=FasterRCNN_MobileNet_V3_Large_320_FPN_Weights)
def fasterrcnn_mobilenet_v3_large_320_fpn(
        *, weights=None, progress=True, num_classes=None,
        weights_backbone=MobileNet_V3_Large_Weights.IMAGENET1K_V1,
        trainable_backbone_layers=None, **kwargs):
    """The low-resolution variant of :func:`fasterrcnn_mobilenet_v3_large_fpn`: images resized
    to 320 (at most 640), 150 RPN proposals before and after NMS in eval; same arguments."""
    kwargs = {"min_size": 320, "max_size": 640, "rpn_pre_nms_top_n_test": 150,
              "rpn_post_nms_top_n_test": 150, "rpn_score_thresh": 0.05, **kwargs}
    return _fasterrcnn_mobilenet_v3_large_fpn(
        FasterRCNN_MobileNet_V3_Large_320_FPN_Weights, weights, progress, num_classes,
        weights_backbone, trainable_backbone_layers, **kwargs)
