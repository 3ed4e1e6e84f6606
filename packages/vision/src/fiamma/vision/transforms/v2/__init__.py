"""transforms.v2: transforms that apply jointly to images, videos, bounding boxes, masks and
keypoints in any nesting of dicts, lists and tuples (torchvision.transforms.v2).

A plain tensor is taken for an image only when the sample has no ``tv_tensors.Image``,
``Video`` or PIL image, and only the first one; other values pass through unchanged.

    >>> import fiamma
    >>> from fiamma.vision import tv_tensors
    >>> from fiamma.vision.transforms import v2
    >>> img = tv_tensors.Image(fiamma.zeros(3, 10, 20, dtype=fiamma.uint8))
    >>> boxes = tv_tensors.BoundingBoxes([[2, 2, 6, 8]], format="XYXY", canvas_size=(10, 20))
    >>> out = v2.Resize((20, 40))({"image": img, "boxes": boxes})
    >>> out["boxes"].tolist(), out["boxes"].canvas_size
    ([[4, 4, 12, 16]], (20, 40))
"""
from fiamma.vision.transforms.v2 import functional  # noqa: F401
from fiamma.vision.transforms.v2._augment import CutMix, MixUp  # noqa: F401
from fiamma.vision.transforms.v2._auto_augment import (  # noqa: F401
    AugMix,
    AutoAugment,
    AutoAugmentPolicy,
    RandAugment,
    TrivialAugmentWide,
)
from fiamma.vision.transforms.v2._transforms import *  # noqa: F401,F403
from fiamma.vision.transforms.v2._transforms import __all__ as _all
from fiamma.vision.transforms.v2.functional import InterpolationMode  # noqa: F401

__all__ = list(_all) + ["functional", "InterpolationMode", "MixUp", "CutMix",
                          "AutoAugment", "AutoAugmentPolicy", "RandAugment",
                          "TrivialAugmentWide", "AugMix"]

# torchvision 0.28's further v2 transforms and helpers (their own modules)
from fiamma.vision.transforms.v2 import _color, _geometry, _misc, _utils  # noqa: E402
from fiamma.vision.transforms.v2._color import *  # noqa: E402,F401,F403
from fiamma.vision.transforms.v2._geometry import *  # noqa: E402,F401,F403
from fiamma.vision.transforms.v2._misc import *  # noqa: E402,F401,F403
from fiamma.vision.transforms.v2._utils import *  # noqa: E402,F401,F403

__all__ += _color.__all__ + _geometry.__all__ + _misc.__all__ + _utils.__all__
