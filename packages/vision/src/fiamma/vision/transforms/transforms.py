"""``torchvision.transforms.transforms``: the module path of the v1 transform classes
(``from torchvision.transforms.transforms import Compose``); the classes are the ones at
``fiamma.vision.transforms``."""

from fiamma.vision.transforms._transforms import *  # noqa: F401,F403
from fiamma.vision.transforms._transforms import __all__ as _t_all
from fiamma.vision.transforms._transforms_more import ElasticTransform, LinearTransformation

__all__ = list(_t_all) + ["ElasticTransform", "LinearTransformation"]
