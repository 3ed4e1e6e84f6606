"""Keypoint R-CNN (torchvision.models.detection.keypoint_rcnn): Faster R-CNN plus a keypoint
branch (RoIAlign 14x14, eight 512-channel 3x3 convs, a 4x4 stride-2 transposed conv and a 2x
bilinear upsampling to one 56x56 heatmap per keypoint), the ResNet-50-FPN builder and its
weights enum. Module names equal torchvision's, so its checkpoints load by key.

    >>> import fiamma
    >>> m = keypointrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_keypoints=5,
    ...                               min_size=64, max_size=64).eval()
    >>> out = m([fiamma.rand(3, 64, 48)])
    >>> sorted(out[0])
    ['boxes', 'keypoints', 'keypoints_scores', 'labels', 'scores']
"""
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models.detection.faster_rcnn import (
    FasterRCNN,
    _backbone_out_channels,
    _faster_rcnn_args,
    _resnet50_fpn_model,
    _resolve,
)
from fiamma.vision.models.resnet import ResNet50_Weights
from fiamma.vision.ops.feature_pyramid_network import MultiScaleRoIAlign
from fiamma.vision.transforms._presets import ObjectDetection

__all__ = ["KeypointRCNN", "KeypointRCNN_ResNet50_FPN_Weights", "keypointrcnn_resnet50_fpn",
           "KeypointRCNNHeads", "KeypointRCNNPredictor"]

COCO_PERSON_CATEGORIES = ["no person", "person"]
COCO_PERSON_KEYPOINT_NAMES = [
    "nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder",
    "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip",
    "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle",
]


class KeypointRCNN(FasterRCNN):
    """Keypoint R-CNN (He et al., 2017): :class:`FasterRCNN`'s arguments (``min_size``
    defaults to the training scales ``(640, 672, 704, 736, 768, 800)``) plus
    ``keypoint_roi_pool``, ``keypoint_head``, ``keypoint_predictor`` and ``num_keypoints``
    (default 17; must be None with a ``keypoint_predictor``). Training targets also need
    ``keypoints`` (N, K, 3) float ``(x, y, visibility)`` per image and the losses gain
    ``loss_keypoint``; eval detections gain ``keypoints`` (N, K, 3) and
    ``keypoints_scores`` (N, K)."""

    def __init__(self, backbone, num_classes=None, min_size=None, max_size=1333,
                 image_mean=None, image_std=None, rpn_anchor_generator=None, rpn_head=None,
                 rpn_pre_nms_top_n_train=2000, rpn_pre_nms_top_n_test=1000,
                 rpn_post_nms_top_n_train=2000, rpn_post_nms_top_n_test=1000,
                 rpn_nms_thresh=0.7, rpn_fg_iou_thresh=0.7, rpn_bg_iou_thresh=0.3,
                 rpn_batch_size_per_image=256, rpn_positive_fraction=0.5, rpn_score_thresh=0.0,
                 box_roi_pool=None, box_head=None, box_predictor=None, box_score_thresh=0.05,
                 box_nms_thresh=0.5, box_detections_per_img=100, box_fg_iou_thresh=0.5,
                 box_bg_iou_thresh=0.5, box_batch_size_per_image=512,
                 box_positive_fraction=0.25, bbox_reg_weights=None, keypoint_roi_pool=None,
                 keypoint_head=None, keypoint_predictor=None, num_keypoints=None, **kwargs):
        if not isinstance(keypoint_roi_pool, (MultiScaleRoIAlign, type(None))):
            raise TypeError(f"keypoint_roi_pool should be of type MultiScaleRoIAlign or None "
                            f"instead of {type(keypoint_roi_pool).__name__}")
        if min_size is None:
            min_size = (640, 672, 704, 736, 768, 800)
        if num_keypoints is not None:
            if keypoint_predictor is not None:
                raise ValueError("num_keypoints should be None when keypoint_predictor is "
                                 "specified")
        else:
            num_keypoints = 17
        out_channels = _backbone_out_channels(backbone)
        if keypoint_roi_pool is None:
            keypoint_roi_pool = MultiScaleRoIAlign(featmap_names=["0", "1", "2", "3"],
                                                   output_size=14, sampling_ratio=2)
        if keypoint_head is None:
            keypoint_head = KeypointRCNNHeads(out_channels, tuple(512 for _ in range(8)))
        if keypoint_predictor is None:
            keypoint_predictor = KeypointRCNNPredictor(512, num_keypoints)
        super().__init__(backbone, **_faster_rcnn_args(locals()), **kwargs)
        self.roi_heads.keypoint_roi_pool = keypoint_roi_pool
        self.roi_heads.keypoint_head = keypoint_head
        self.roi_heads.keypoint_predictor = keypoint_predictor


class KeypointRCNNHeads(nn.Sequential):
    """A 3x3 conv + ReLU per entry of ``layers`` (keys ``0``, ``2``, ... as torchvision's)."""

    def __init__(self, in_channels, layers):
        blocks = []
        prev = in_channels
        for cur in layers:
            blocks.append(nn.Conv2d(prev, cur, 3, stride=1, padding=1))
            blocks.append(nn.ReLU(inplace=True))
            prev = cur
        super().__init__(*blocks)
        for m in self.children():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.constant_(m.bias, 0)


class KeypointRCNNPredictor(nn.Module):
    """A 4x4 stride-2 transposed conv to one logit map per keypoint (``kps_score_lowres``),
    then a 2x bilinear upsampling: 14x14 RoI features give 56x56 heatmaps."""

    def __init__(self, in_channels, num_keypoints):
        super().__init__()
        self.kps_score_lowres = nn.ConvTranspose2d(in_channels, num_keypoints, 4, stride=2,
                                                   padding=1)
        nn.init.kaiming_normal_(self.kps_score_lowres.weight, mode="fan_out",
                                nonlinearity="relu")
        nn.init.constant_(self.kps_score_lowres.bias, 0)
        self.up_scale = 2
        self.out_channels = num_keypoints

    def forward(self, x):
        x = self.kps_score_lowres(x)
        return F.interpolate(x, scale_factor=float(self.up_scale), mode="bilinear",
                             align_corners=False, recompute_scale_factor=False)


_COMMON_META = {"categories": COCO_PERSON_CATEGORIES,
                "keypoint_names": COCO_PERSON_KEYPOINT_NAMES, "min_size": (1, 1)}


class KeypointRCNN_ResNet50_FPN_Weights(WeightsEnum):
    COCO_LEGACY = Weights(
        url="https://download.pytorch.org/models/keypointrcnn_resnet50_fpn_coco-9f466800.pth",
        transforms=ObjectDetection,
        meta={**_COMMON_META, "num_params": 59137258,
              "recipe": "https://github.com/pytorch/vision/issues/1606",
              "_metrics": {"COCO-val2017": {"box_map": 50.6, "kp_map": 61.1}},
              "_ops": 133.924, "_file_size": 226.054,
              "_docs": "These weights were produced by following a similar training recipe as "
                       "on the paper but use a checkpoint from an early epoch."})
    COCO_V1 = Weights(
        url="https://download.pytorch.org/models/keypointrcnn_resnet50_fpn_coco-fc266e95.pth",
        transforms=ObjectDetection,
        meta={**_COMMON_META, "num_params": 59137258,
              "recipe": "https://github.com/pytorch/vision/tree/main/references/detection"
                        "#keypoint-r-cnn",
              "_metrics": {"COCO-val2017": {"box_map": 54.6, "kp_map": 65.0}},
              "_ops": 137.42, "_file_size": 226.054,
              "_docs": "These weights were produced by following a similar training recipe as "
                       "on the paper."})
    DEFAULT = COCO_V1


@register_model(weights=KeypointRCNN_ResNet50_FPN_Weights)
def keypointrcnn_resnet50_fpn(*, weights=None, progress=True, num_classes=None,
                              num_keypoints=None,
                              weights_backbone=ResNet50_Weights.IMAGENET1K_V1,
                              trainable_backbone_layers=None, **kwargs):
    """Keypoint R-CNN with a ResNet-50-FPN backbone (torchvision's
    ``keypointrcnn_resnet50_fpn``).

    ``weights`` a :class:`KeypointRCNN_ResNet50_FPN_Weights` member, its name, a local
    checkpoint path, a state dict or None; ``num_classes`` (default 2: no person, person);
    ``num_keypoints`` (default 17, COCO's); ``weights_backbone`` (None to build offline);
    ``trainable_backbone_layers`` (0-5, default 3 when pretrained); other keyword arguments go
    to :class:`KeypointRCNN`. With pretrained weights or backbone the ResNet uses
    FrozenBatchNorm2d (eps 0 for COCO_V1)."""
    enum_cls = KeypointRCNN_ResNet50_FPN_Weights
    weights, weights_backbone, num_classes = _resolve(enum_cls, weights, weights_backbone,
                                                      num_classes, default_classes=2)
    if isinstance(weights, enum_cls):
        expected = len(weights.meta["keypoint_names"])
        if num_keypoints is not None and num_keypoints != expected:
            raise ValueError(f"The parameter 'num_keypoints' expected value {expected} but got "
                             f"{num_keypoints} instead.")
        num_keypoints = expected
    elif num_keypoints is None:
        num_keypoints = 17
    return _resnet50_fpn_model(KeypointRCNN, enum_cls, weights, weights_backbone, progress,
                               trainable_backbone_layers, num_classes,
                               num_keypoints=num_keypoints, **kwargs)
