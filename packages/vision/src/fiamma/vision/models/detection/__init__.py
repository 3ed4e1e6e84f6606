"""fiamma.vision.models.detection: torchvision's Faster R-CNN (ResNet-50-FPN v1/v2,
MobileNetV3-Large FPN), Mask R-CNN (v1/v2), Keypoint R-CNN, RetinaNet (v1/v2), FCOS, SSD300 and
SSDlite320 with their anchor generators, box coders, RPN, RoI heads and transform, under
torchvision's module and class names so its checkpoints load by key. Training mode returns the
losses dict, eval mode a list of ``{"boxes", "labels", "scores"}`` dicts (plus ``masks`` or
``keypoints``/``keypoints_scores``).

    >>> from fiamma.vision.models import detection
    >>> m = detection.fasterrcnn_resnet50_fpn(weights=None, weights_backbone=None)
"""
from fiamma.vision.models.detection.anchor_utils import (  # noqa: F401
    AnchorGenerator,
    DefaultBoxGenerator,
)
from fiamma.vision.models.detection.faster_rcnn import *  # noqa: F401,F403
from fiamma.vision.models.detection.fcos import *  # noqa: F401,F403
from fiamma.vision.models.detection.image_list import ImageList  # noqa: F401
from fiamma.vision.models.detection.keypoint_rcnn import *  # noqa: F401,F403
from fiamma.vision.models.detection.mask_rcnn import *  # noqa: F401,F403
from fiamma.vision.models.detection.retinanet import *  # noqa: F401,F403
from fiamma.vision.models.detection.rpn import RegionProposalNetwork, RPNHead  # noqa: F401
from fiamma.vision.models.detection.ssd import *  # noqa: F401,F403
from fiamma.vision.models.detection.ssdlite import *  # noqa: F401,F403
from fiamma.vision.models.detection.transform import GeneralizedRCNNTransform  # noqa: F401
