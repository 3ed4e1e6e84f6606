"""Faster R-CNN (torchvision.models.detection.faster_rcnn): the model class, its box heads,
the ResNet-50-FPN builders (v1 and v2) and their weights enums. Module names equal
torchvision's, so its checkpoints load by key.

    >>> import fiamma
    >>> m = fasterrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=3,
    ...                             min_size=64, max_size=64).eval()
    >>> out = m([fiamma.rand(3, 64, 48)])
    >>> sorted(out[0])
    ['boxes', 'labels', 'scores']
"""
import inspect
from collections.abc import Mapping

from fiamma import nn
from fiamma.nn import functional as F
from fiamma.vision.models._api import (
    Weights,
    WeightsEnum,
    load_weights,
    register_model,
    resolve_weights,
)
from fiamma.vision.models.detection._utils import overwrite_eps
from fiamma.vision.models.detection.anchor_utils import AnchorGenerator
from fiamma.vision.models.detection.backbone_utils import (
    _resnet_fpn_extractor,
    _validate_trainable_layers,
)
from fiamma.vision.models.detection.generalized_rcnn import GeneralizedRCNN
from fiamma.vision.models.detection.roi_heads import RoIHeads
from fiamma.vision.models.detection.rpn import RegionProposalNetwork, RPNHead
from fiamma.vision.models.detection.transform import GeneralizedRCNNTransform
from fiamma.vision.models.resnet import ResNet50_Weights, resnet50
from fiamma.vision.ops import misc as misc_nn_ops
from fiamma.vision.ops.feature_pyramid_network import MultiScaleRoIAlign
from fiamma.vision.transforms._presets import ObjectDetection

__all__ = ["FasterRCNN", "FasterRCNN_ResNet50_FPN_Weights", "FasterRCNN_ResNet50_FPN_V2_Weights",
           "fasterrcnn_resnet50_fpn", "fasterrcnn_resnet50_fpn_v2", "TwoMLPHead",
           "FastRCNNPredictor", "FastRCNNConvFCHead"]

COCO_CATEGORIES = [
    "__background__", "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train",
    "truck", "boat", "traffic light", "fire hydrant", "N/A", "stop sign", "parking meter",
    "bench", "bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra",
    "giraffe", "N/A", "backpack", "umbrella", "N/A", "N/A", "handbag", "tie", "suitcase",
    "frisbee", "skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove",
    "skateboard", "surfboard", "tennis racket", "bottle", "N/A", "wine glass", "cup", "fork",
    "knife", "spoon", "bowl", "banana", "apple", "sandwich", "orange", "broccoli", "carrot",
    "hot dog", "pizza", "donut", "cake", "chair", "couch", "potted plant", "bed", "N/A",
    "dining table", "N/A", "N/A", "toilet", "N/A", "tv", "laptop", "mouse", "remote",
    "keyboard", "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator", "N/A",
    "book", "clock", "vase", "scissors", "teddy bear", "hair drier", "toothbrush",
]


def _default_anchorgen():
    anchor_sizes = ((32,), (64,), (128,), (256,), (512,))
    aspect_ratios = ((0.5, 1.0, 2.0),) * len(anchor_sizes)
    return AnchorGenerator(anchor_sizes, aspect_ratios)


def _backbone_out_channels(backbone):
    """``backbone.out_channels`` (the channels of every feature level), or torchvision's
    ValueError when the backbone does not say."""
    if not hasattr(backbone, "out_channels"):
        raise ValueError("backbone should contain an attribute out_channels specifying the "
                         "number of output channels (assumed to be the same for all the "
                         "levels)")
    return backbone.out_channels


def _faster_rcnn_args(scope):
    """FasterRCNN's arguments after ``backbone``, by name, from a subclass constructor's
    ``locals()`` (Mask and Keypoint R-CNN repeat FasterRCNN's signature and pass it on)."""
    return {name: scope[name] for name in _FASTER_RCNN_PARAMS}


class FasterRCNN(GeneralizedRCNN):
    """Faster R-CNN (Ren et al., 2015) over ``backbone`` (a module with ``out_channels``
    returning a tensor or an ordered dict of feature maps), with torchvision's arguments and
    defaults (``min_size=800``, ``max_size=1333``, RPN 2000/1000 proposals before/after NMS
    in training, 1000/1000 in eval, box score threshold 0.05, NMS 0.5, 100 detections)."""

    def __init__(self, backbone, num_classes=None, min_size=800, max_size=1333,
                 image_mean=None, image_std=None, rpn_anchor_generator=None, rpn_head=None,
                 rpn_pre_nms_top_n_train=2000, rpn_pre_nms_top_n_test=1000,
                 rpn_post_nms_top_n_train=2000, rpn_post_nms_top_n_test=1000,
                 rpn_nms_thresh=0.7, rpn_fg_iou_thresh=0.7, rpn_bg_iou_thresh=0.3,
                 rpn_batch_size_per_image=256, rpn_positive_fraction=0.5, rpn_score_thresh=0.0,
                 box_roi_pool=None, box_head=None, box_predictor=None, box_score_thresh=0.05,
                 box_nms_thresh=0.5, box_detections_per_img=100, box_fg_iou_thresh=0.5,
                 box_bg_iou_thresh=0.5, box_batch_size_per_image=512,
                 box_positive_fraction=0.25, bbox_reg_weights=None, **kwargs):
        out_channels = _backbone_out_channels(backbone)
        if not isinstance(rpn_anchor_generator, (AnchorGenerator, type(None))):
            raise TypeError(f"rpn_anchor_generator should be of type AnchorGenerator or None "
                            f"instead of {type(rpn_anchor_generator).__name__}")
        if not isinstance(box_roi_pool, (MultiScaleRoIAlign, type(None))):
            raise TypeError(f"box_roi_pool should be of type MultiScaleRoIAlign or None "
                            f"instead of {type(box_roi_pool).__name__}")
        if num_classes is not None:
            if box_predictor is not None:
                raise ValueError("num_classes should be None when box_predictor is specified")
        elif box_predictor is None:
            raise ValueError("num_classes should not be None when box_predictor is not "
                             "specified")
        if rpn_anchor_generator is None:
            rpn_anchor_generator = _default_anchorgen()
        if rpn_head is None:
            rpn_head = RPNHead(out_channels, rpn_anchor_generator.num_anchors_per_location()[0])
        rpn = RegionProposalNetwork(
            rpn_anchor_generator, rpn_head, rpn_fg_iou_thresh, rpn_bg_iou_thresh,
            rpn_batch_size_per_image, rpn_positive_fraction,
            dict(training=rpn_pre_nms_top_n_train, testing=rpn_pre_nms_top_n_test),
            dict(training=rpn_post_nms_top_n_train, testing=rpn_post_nms_top_n_test),
            rpn_nms_thresh, score_thresh=rpn_score_thresh)
        if box_roi_pool is None:
            box_roi_pool = MultiScaleRoIAlign(featmap_names=["0", "1", "2", "3"], output_size=7,
                                              sampling_ratio=2)
        if box_head is None:
            resolution = box_roi_pool.output_size[0]
            box_head = TwoMLPHead(out_channels * resolution ** 2, 1024)
        if box_predictor is None:
            box_predictor = FastRCNNPredictor(1024, num_classes)
        roi_heads = RoIHeads(box_roi_pool, box_head, box_predictor, box_fg_iou_thresh,
                             box_bg_iou_thresh, box_batch_size_per_image,
                             box_positive_fraction, bbox_reg_weights, box_score_thresh,
                             box_nms_thresh, box_detections_per_img)
        if image_mean is None:
            image_mean = [0.485, 0.456, 0.406]
        if image_std is None:
            image_std = [0.229, 0.224, 0.225]
        transform = GeneralizedRCNNTransform(min_size, max_size, image_mean, image_std,
                                             **kwargs)
        super().__init__(backbone, rpn, roi_heads, transform)


_FASTER_RCNN_PARAMS = tuple(inspect.signature(FasterRCNN.__init__).parameters)[2:-1]


class TwoMLPHead(nn.Module):
    """Two fully connected layers with ReLU (``fc6``, ``fc7``) over the flattened RoI
    features."""

    def __init__(self, in_channels, representation_size):
        super().__init__()
        self.fc6 = nn.Linear(in_channels, representation_size)
        self.fc7 = nn.Linear(representation_size, representation_size)

    def forward(self, x):
        x = x.flatten(start_dim=1)
        return F.relu(self.fc7(F.relu(self.fc6(x))))


class FastRCNNConvFCHead(nn.Sequential):
    """``conv_layers`` 3x3 Conv2dNormActivation layers, flatten, then Linear + ReLU per entry
    of ``fc_layers`` (the box head of Faster R-CNN v2)."""

    def __init__(self, input_size, conv_layers, fc_layers, norm_layer=None):
        in_channels, in_height, in_width = input_size
        blocks = []
        prev = in_channels
        for cur in conv_layers:
            blocks.append(misc_nn_ops.Conv2dNormActivation(prev, cur, norm_layer=norm_layer))
            prev = cur
        blocks.append(nn.Flatten())
        prev = prev * in_height * in_width
        for cur in fc_layers:
            blocks.append(nn.Linear(prev, cur))
            blocks.append(nn.ReLU(inplace=True))
            prev = cur
        super().__init__(*blocks)
        for layer in self.modules():
            if isinstance(layer, nn.Conv2d):
                nn.init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
                if layer.bias is not None:
                    nn.init.zeros_(layer.bias)


class FastRCNNPredictor(nn.Module):
    """Class scores (``cls_score``) and per-class box deltas (``bbox_pred``) for Fast
    R-CNN."""

    def __init__(self, in_channels, num_classes):
        super().__init__()
        self.cls_score = nn.Linear(in_channels, num_classes)
        self.bbox_pred = nn.Linear(in_channels, num_classes * 4)

    def forward(self, x):
        if x.ndim == 4 and list(x.shape[2:]) != [1, 1]:
            raise ValueError(f"x has the wrong shape, expecting the last two dimensions to be "
                             f"[1,1] instead of {list(x.shape[2:])}")
        x = x.flatten(start_dim=1)
        return self.cls_score(x), self.bbox_pred(x)


_COMMON_META = {"categories": COCO_CATEGORIES, "min_size": (1, 1)}
_REF = "https://github.com/pytorch/vision/tree/main/references/detection#"


class FasterRCNN_ResNet50_FPN_Weights(WeightsEnum):
    COCO_V1 = Weights(
        url="https://download.pytorch.org/models/fasterrcnn_resnet50_fpn_coco-258fb6c6.pth",
        transforms=ObjectDetection,
        meta={**_COMMON_META, "num_params": 41755286,
              "recipe": _REF + "faster-r-cnn-resnet-50-fpn",
              "_metrics": {"COCO-val2017": {"box_map": 37.0}}, "_ops": 134.38,
              "_file_size": 159.743,
              "_docs": "These weights were produced by following a similar training recipe as "
                       "on the paper."})
    DEFAULT = COCO_V1


class FasterRCNN_ResNet50_FPN_V2_Weights(WeightsEnum):
    COCO_V1 = Weights(
        url="https://download.pytorch.org/models/fasterrcnn_resnet50_fpn_v2_coco-dd69338a.pth",
        transforms=ObjectDetection,
        meta={**_COMMON_META, "num_params": 43712278,
              "recipe": "https://github.com/pytorch/vision/pull/5763",
              "_metrics": {"COCO-val2017": {"box_map": 46.7}}, "_ops": 280.371,
              "_file_size": 167.104,
              "_docs": "These weights were produced using an enhanced training recipe to boost "
                       "the model accuracy."})
    DEFAULT = COCO_V1


def _resolve(enum_cls, weights, weights_backbone, num_classes,
             backbone_enum=ResNet50_Weights, default_classes=91):
    """(weights, weights_backbone, num_classes) of a detection builder: ``weights`` an
    ``enum_cls`` member or its name (num_classes must then agree with its categories), a local
    checkpoint path or an already loaded state dict (both hold the whole model, so no backbone
    weights are loaded), or None."""
    if not isinstance(weights, Mapping):
        weights = resolve_weights(enum_cls, weights)
    weights_backbone = resolve_weights(backbone_enum, weights_backbone)
    if isinstance(weights, WeightsEnum):
        weights_backbone = None
        expected = len(weights.meta["categories"])
        if num_classes is not None and num_classes != expected:
            raise ValueError(f"The parameter 'num_classes' expected value {expected} but got "
                             f"{num_classes} instead.")
        num_classes = expected
    elif weights is not None:
        weights_backbone = None          # a local checkpoint holds the whole model
        if num_classes is None:
            num_classes = default_classes
    elif num_classes is None:
        num_classes = default_classes
    return weights, weights_backbone, num_classes


def _load(model, weights, progress):
    if weights is None:
        return model
    if isinstance(weights, WeightsEnum):
        sd = weights.get_state_dict(progress=progress, check_hash=True)
    elif isinstance(weights, Mapping):
        sd = weights
    else:
        sd = load_weights(weights)
    model.load_state_dict(sd)
    return model


def _resnet50_fpn_model(model_cls, enum_cls, weights, weights_backbone, progress,
                        trainable_backbone_layers, *args, **kwargs):
    """The v1 ResNet-50-FPN builders' body (Faster/Mask/Keypoint R-CNN): a ResNet-50 with
    FrozenBatchNorm2d when anything is pretrained, its FPN extractor, ``model_cls(backbone,
    *args, **kwargs)``, the weights loaded, and eps 0 for the COCO_V1 checkpoints (they were
    trained so)."""
    is_trained = weights is not None or weights_backbone is not None
    trainable_backbone_layers = _validate_trainable_layers(is_trained,
                                                           trainable_backbone_layers, 5, 3)
    norm_layer = misc_nn_ops.FrozenBatchNorm2d if is_trained else nn.BatchNorm2d
    backbone = resnet50(weights=weights_backbone, progress=progress, norm_layer=norm_layer)
    backbone = _resnet_fpn_extractor(backbone, trainable_backbone_layers)
    model = _load(model_cls(backbone, *args, **kwargs), weights, progress)
    if weights == enum_cls.COCO_V1:
        overwrite_eps(model, 0.0)
    return model


@register_model(weights=FasterRCNN_ResNet50_FPN_Weights)
def fasterrcnn_resnet50_fpn(*, weights=None, progress=True, num_classes=None,
                            weights_backbone=ResNet50_Weights.IMAGENET1K_V1,
                            trainable_backbone_layers=None, **kwargs):
    """Faster R-CNN with a ResNet-50-FPN backbone (torchvision's ``fasterrcnn_resnet50_fpn``).

    ``weights`` a :class:`FasterRCNN_ResNet50_FPN_Weights` member, its name, a local checkpoint
    path, a state dict or None; ``num_classes`` (default 91, COCO with background);
    ``weights_backbone`` (None to build offline); ``trainable_backbone_layers`` (0-5, default 3
    when pretrained); other keyword arguments go to :class:`FasterRCNN`. With pretrained weights
    or backbone the ResNet uses FrozenBatchNorm2d (eps 0 for COCO_V1, as that checkpoint was
    trained)."""
    weights, weights_backbone, num_classes = _resolve(
        FasterRCNN_ResNet50_FPN_Weights, weights, weights_backbone, num_classes)
    return _resnet50_fpn_model(FasterRCNN, FasterRCNN_ResNet50_FPN_Weights, weights,
                               weights_backbone, progress, trainable_backbone_layers,
                               num_classes=num_classes, **kwargs)


def _v2_parts(weights, weights_backbone, progress, trainable_backbone_layers):
    """The v2 builders' shared parts (Faster and Mask R-CNN v2): a ResNet-50 with a
    batch-normed FPN, the default anchors, a two-conv RPN head and a 4-conv + 1-FC box head."""
    is_trained = weights is not None or weights_backbone is not None
    trainable_backbone_layers = _validate_trainable_layers(is_trained,
                                                           trainable_backbone_layers, 5, 3)
    backbone = resnet50(weights=weights_backbone, progress=progress)
    backbone = _resnet_fpn_extractor(backbone, trainable_backbone_layers,
                                     norm_layer=nn.BatchNorm2d)
    anchor_gen = _default_anchorgen()
    rpn_head = RPNHead(backbone.out_channels, anchor_gen.num_anchors_per_location()[0],
                       conv_depth=2)
    box_head = FastRCNNConvFCHead((backbone.out_channels, 7, 7), [256, 256, 256, 256], [1024],
                                  norm_layer=nn.BatchNorm2d)
    return backbone, anchor_gen, rpn_head, box_head


@register_model(weights=FasterRCNN_ResNet50_FPN_V2_Weights)
def fasterrcnn_resnet50_fpn_v2(*, weights=None, progress=True, num_classes=None,
                               weights_backbone=None, trainable_backbone_layers=None,
                               **kwargs):
    """Faster R-CNN v2 (Li et al., "Benchmarking Detection Transfer Learning with Vision
    Transformers"): ResNet-50-FPN with batch-normed FPN, a two-conv RPN head and a 4-conv +
    1-FC box head (torchvision's ``fasterrcnn_resnet50_fpn_v2``); arguments as
    :func:`fasterrcnn_resnet50_fpn`."""
    weights, weights_backbone, num_classes = _resolve(
        FasterRCNN_ResNet50_FPN_V2_Weights, weights, weights_backbone, num_classes)
    backbone, anchor_gen, rpn_head, box_head = _v2_parts(weights, weights_backbone, progress,
                                                         trainable_backbone_layers)
    model = FasterRCNN(backbone, num_classes=num_classes, rpn_anchor_generator=anchor_gen,
                       rpn_head=rpn_head, box_head=box_head, **kwargs)
    return _load(model, weights, progress)


# the MobileNetV3 builders live in their own file (they import this module's helpers)
from fiamma.vision.models.detection._faster_rcnn_mobilenet import (  # noqa: E402
    FasterRCNN_MobileNet_V3_Large_320_FPN_Weights,
    FasterRCNN_MobileNet_V3_Large_FPN_Weights,
    fasterrcnn_mobilenet_v3_large_320_fpn,
    fasterrcnn_mobilenet_v3_large_fpn,
)

__all__ += ["FasterRCNN_MobileNet_V3_Large_FPN_Weights",
            "FasterRCNN_MobileNet_V3_Large_320_FPN_Weights",
            "fasterrcnn_mobilenet_v3_large_fpn", "fasterrcnn_mobilenet_v3_large_320_fpn"]
