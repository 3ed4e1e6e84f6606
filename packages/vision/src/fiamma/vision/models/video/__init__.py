"""fiamma.vision.models.video: torchvision's video classification models (R3D-18, MC3-18,
R(2+1)D-18, S3D, Video Swin T/S/B, MViT V1-B/V2-S) with their Kinetics-400 weights enums.
Inputs are clips ``(N, C, T, H, W)``.

    >>> import fiamma
    >>> from fiamma.vision.models import video
    >>> m = video.r3d_18(weights=None).eval()
    >>> tuple(m(fiamma.zeros(1, 3, 4, 32, 32)).shape)
    (1, 400)
"""
from fiamma.vision.models.video.mvit import *  # noqa: F401,F403
from fiamma.vision.models.video.resnet import *  # noqa: F401,F403
from fiamma.vision.models.video.s3d import *  # noqa: F401,F403
from fiamma.vision.models.video.swin_transformer import *  # noqa: F401,F403
