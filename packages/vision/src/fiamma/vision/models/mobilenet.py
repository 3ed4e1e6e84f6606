"""``fiamma.vision.models.mobilenet``: MobileNet V2 and V3 in one module, as
``torchvision.models.mobilenet`` re-exports them.

    >>> from fiamma.vision.models.mobilenet import mobilenet_v3_small
    >>> m = mobilenet_v3_small(weights=None)
"""
from fiamma.vision.models.mobilenetv2 import *  # noqa: F401,F403
from fiamma.vision.models.mobilenetv2 import __all__ as mv2_all
from fiamma.vision.models.mobilenetv3 import *  # noqa: F401,F403
from fiamma.vision.models.mobilenetv3 import __all__ as mv3_all

__all__ = mv2_all + mv3_all
