"""fiamma.vision.models.segmentation: torchvision's semantic segmentation models (FCN,
DeepLabV3, LR-ASPP) with their weights enums; outputs are ``OrderedDict(out=..., [aux=...])``.

    >>> import fiamma
    >>> from fiamma.vision.models import segmentation
    >>> m = segmentation.fcn_resnet50(weights=None, weights_backbone=None).eval()
"""
from fiamma.vision.models.segmentation.deeplabv3 import *  # noqa: F401,F403
from fiamma.vision.models.segmentation.fcn import *  # noqa: F401,F403
from fiamma.vision.models.segmentation.lraspp import *  # noqa: F401,F403
