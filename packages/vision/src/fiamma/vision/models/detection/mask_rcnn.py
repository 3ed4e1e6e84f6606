"""Mask R-CNN (torchvision.models.detection.mask_rcnn): Faster R-CNN plus a mask branch (RoIAlign
14x14, four 3x3 convs, a 2x2 transposed conv and a 1x1 conv to per-class mask logits), the
ResNet-50-FPN builders (v1 and v2) and their weights enums. Module names equal torchvision's, so
its checkpoints load by key.

    >>> import fiamma
    >>> m = maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=3,
    ...                           min_size=64, max_size=64).eval()
    >>> out = m([fiamma.rand(3, 64, 48)])
    >>> sorted(out[0]), out[0]["masks"].shape[1:]
    (['boxes', 'labels', 'masks', 'scores'], fiamma.Size([1, 64, 48]))
"""
from collections import OrderedDict

from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models.detection.faster_rcnn import (
    _COMMON_META,
    FasterRCNN,
    _backbone_out_channels,
    _faster_rcnn_args,
    _load,
    _resnet50_fpn_model,
    _resolve,
    _v2_parts,
)
from fiamma.vision.models.resnet import ResNet50_Weights
from fiamma.vision.ops import misc as misc_nn_ops
from fiamma.vision.ops.feature_pyramid_network import MultiScaleRoIAlign
from fiamma.vision.transforms._presets import ObjectDetection

__all__ = ["MaskRCNN", "MaskRCNN_ResNet50_FPN_Weights", "MaskRCNN_ResNet50_FPN_V2_Weights",
           "maskrcnn_resnet50_fpn", "maskrcnn_resnet50_fpn_v2", "MaskRCNNHeads",
           "MaskRCNNPredictor"]


class MaskRCNN(FasterRCNN):
    """Mask R-CNN (He et al., 2017): :class:`FasterRCNN`'s arguments plus ``mask_roi_pool``
    (default MultiScaleRoIAlign over FPN levels "0"-"3", 14x14, sampling ratio 2),
    ``mask_head`` (default four 256-channel 3x3 convs) and ``mask_predictor`` (default
    :class:`MaskRCNNPredictor`; then ``num_classes`` must be None). Training targets also need
    ``masks`` (N, H, W) uint8 per image and the losses gain ``loss_mask``; eval detections gain
    ``masks`` (N, 1, H, W), probabilities in [0, 1] in the original image's size."""

    def __init__(self, backbone, num_classes=None, min_size=800, max_size=1333,
                 image_mean=None, image_std=None, rpn_anchor_generator=None, rpn_head=None,
                 rpn_pre_nms_top_n_train=2000, rpn_pre_nms_top_n_test=1000,
                 rpn_post_nms_top_n_train=2000, rpn_post_nms_top_n_test=1000,
                 rpn_nms_thresh=0.7, rpn_fg_iou_thresh=0.7, rpn_bg_iou_thresh=0.3,
                 rpn_batch_size_per_image=256, rpn_positive_fraction=0.5, rpn_score_thresh=0.0,
                 box_roi_pool=None, box_head=None, box_predictor=None, box_score_thresh=0.05,
                 box_nms_thresh=0.5, box_detections_per_img=100, box_fg_iou_thresh=0.5,
                 box_bg_iou_thresh=0.5, box_batch_size_per_image=512,
                 box_positive_fraction=0.25, bbox_reg_weights=None, mask_roi_pool=None,
                 mask_head=None, mask_predictor=None, **kwargs):
        if not isinstance(mask_roi_pool, (MultiScaleRoIAlign, type(None))):
            raise TypeError(f"mask_roi_pool should be of type MultiScaleRoIAlign or None "
                            f"instead of {type(mask_roi_pool).__name__}")
        if num_classes is not None and mask_predictor is not None:
            raise ValueError("num_classes should be None when mask_predictor is specified")
        out_channels = _backbone_out_channels(backbone)
        if mask_roi_pool is None:
            mask_roi_pool = MultiScaleRoIAlign(featmap_names=["0", "1", "2", "3"],
                                               output_size=14, sampling_ratio=2)
        if mask_head is None:
            mask_head = MaskRCNNHeads(out_channels, (256, 256, 256, 256), 1)
        if mask_predictor is None:
            mask_predictor = MaskRCNNPredictor(256, 256, num_classes)
        super().__init__(backbone, **_faster_rcnn_args(locals()), **kwargs)
        self.roi_heads.mask_roi_pool = mask_roi_pool
        self.roi_heads.mask_head = mask_head
        self.roi_heads.mask_predictor = mask_predictor


class MaskRCNNHeads(nn.Sequential):
    """One 3x3 :class:`Conv2dNormActivation` (``dilation``, optional ``norm_layer``) per entry
    of ``layers``. Checkpoints from before the blocks were Conv2dNormActivation
    (``mask_fcn1.weight`` ...) load too."""

    _version = 2

    def __init__(self, in_channels, layers, dilation, norm_layer=None):
        blocks = []
        prev = in_channels
        for cur in layers:
            blocks.append(misc_nn_ops.Conv2dNormActivation(
                prev, cur, kernel_size=3, stride=1, padding=dilation, dilation=dilation,
                norm_layer=norm_layer))
            prev = cur
        super().__init__(*blocks)
        for layer in self.modules():
            if isinstance(layer, nn.Conv2d):
                nn.init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
                if layer.bias is not None:
                    nn.init.zeros_(layer.bias)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, *args, **kwargs):
        version = (local_metadata or {}).get("version", None)
        if version is None or version < 2:
            for i in range(len(self)):
                for kind in ("weight", "bias"):
                    old, new = f"{prefix}mask_fcn{i + 1}.{kind}", f"{prefix}{i}.0.{kind}"
                    if old in state_dict:
                        state_dict[new] = state_dict.pop(old)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs, *args, **kwargs)


class MaskRCNNPredictor(nn.Sequential):
    """2x2 stride-2 transposed conv (``conv5_mask``), ReLU, and a 1x1 conv to one mask logit map
    per class (``mask_fcn_logits``)."""

    def __init__(self, in_channels, dim_reduced, num_classes):
        super().__init__(OrderedDict([
            ("conv5_mask", nn.ConvTranspose2d(in_channels, dim_reduced, 2, 2, 0)),
            ("relu", nn.ReLU(inplace=True)),
            ("mask_fcn_logits", nn.Conv2d(dim_reduced, num_classes, 1, 1, 0)),
        ]))
        for name, param in self.named_parameters():
            if "weight" in name:
                nn.init.kaiming_normal_(param, mode="fan_out", nonlinearity="relu")


class MaskRCNN_ResNet50_FPN_Weights(WeightsEnum):
    COCO_V1 = Weights(
        url="https://download.pytorch.org/models/maskrcnn_resnet50_fpn_coco-bf2d0c1e.pth",
        transforms=ObjectDetection,
        meta={**_COMMON_META, "num_params": 44401393,
              "recipe": "https://github.com/pytorch/vision/tree/main/references/detection"
                        "#mask-r-cnn",
              "_metrics": {"COCO-val2017": {"box_map": 37.9, "mask_map": 34.6}},
              "_ops": 134.38, "_file_size": 169.84,
              "_docs": "These weights were produced by following a similar training recipe as "
                       "on the paper."})
    DEFAULT = COCO_V1


class MaskRCNN_ResNet50_FPN_V2_Weights(WeightsEnum):
    COCO_V1 = Weights(
        url="https://download.pytorch.org/models/maskrcnn_resnet50_fpn_v2_coco-73cbd019.pth",
        transforms=ObjectDetection,
        meta={**_COMMON_META, "num_params": 46359409,
              "recipe": "https://github.com/pytorch/vision/pull/5773",
              "_metrics": {"COCO-val2017": {"box_map": 47.4, "mask_map": 41.8}},
              "_ops": 333.577, "_file_size": 177.219,
              "_docs": "These weights were produced using an enhanced training recipe to boost "
                       "the model accuracy."})
    DEFAULT = COCO_V1


@register_model(weights=MaskRCNN_ResNet50_FPN_Weights)
def maskrcnn_resnet50_fpn(*, weights=None, progress=True, num_classes=None,
                          weights_backbone=ResNet50_Weights.IMAGENET1K_V1,
                          trainable_backbone_layers=None, **kwargs):
    """Mask R-CNN with a ResNet-50-FPN backbone (torchvision's ``maskrcnn_resnet50_fpn``).

    ``weights`` a :class:`MaskRCNN_ResNet50_FPN_Weights` member, its name, a local checkpoint
    path, a state dict or None; ``num_classes`` (default 91); ``weights_backbone`` (None to
    build offline); ``trainable_backbone_layers`` (0-5, default 3 when pretrained); other
    keyword arguments go to :class:`MaskRCNN`. With pretrained weights or backbone the ResNet
    uses FrozenBatchNorm2d (eps 0 for COCO_V1)."""
    weights, weights_backbone, num_classes = _resolve(
        MaskRCNN_ResNet50_FPN_Weights, weights, weights_backbone, num_classes)
    return _resnet50_fpn_model(MaskRCNN, MaskRCNN_ResNet50_FPN_Weights, weights,
                               weights_backbone, progress, trainable_backbone_layers,
                               num_classes=num_classes, **kwargs)


@register_model(weights=MaskRCNN_ResNet50_FPN_V2_Weights)
def maskrcnn_resnet50_fpn_v2(*, weights=None, progress=True, num_classes=None,
                             weights_backbone=None, trainable_backbone_layers=None, **kwargs):
    """Mask R-CNN v2 (Li et al., "Benchmarking Detection Transfer Learning with Vision
    Transformers"): batch-normed FPN, two-conv RPN head, 4-conv + 1-FC box head and batch-normed
    mask head (torchvision's ``maskrcnn_resnet50_fpn_v2``); arguments as
    :func:`maskrcnn_resnet50_fpn`."""
    weights, weights_backbone, num_classes = _resolve(
        MaskRCNN_ResNet50_FPN_V2_Weights, weights, weights_backbone, num_classes)
    backbone, anchor_gen, rpn_head, box_head = _v2_parts(weights, weights_backbone, progress,
                                                         trainable_backbone_layers)
    mask_head = MaskRCNNHeads(backbone.out_channels, [256, 256, 256, 256], 1,
                              norm_layer=nn.BatchNorm2d)
    model = MaskRCNN(backbone, num_classes=num_classes, rpn_anchor_generator=anchor_gen,
                     rpn_head=rpn_head, box_head=box_head, mask_head=mask_head, **kwargs)
    return _load(model, weights, progress)
