"""Image transforms with torchvision.transforms' names and semantics.

Works on PIL images (through Pillow) and on fiamma tensors (..., C, H, W), uint8 or float.

Example:
    >>> import fiamma
    >>> from fiamma.vision import transforms as T
    >>> _ = fiamma.manual_seed(0)
    >>> tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor()])
"""
# (autoaugment and transforms: torchvision's module paths of the classes below)
from fiamma.vision.transforms import autoaugment, functional, transforms  # noqa: F401
from fiamma.vision.transforms._autoaugment import *  # noqa: F401,F403
from fiamma.vision.transforms._autoaugment import __all__ as _a_all
from fiamma.vision.transforms._presets import ImageClassification  # noqa: F401
from fiamma.vision.transforms._transforms import *  # noqa: F401,F403
from fiamma.vision.transforms._transforms import __all__ as _t_all
from fiamma.vision.transforms._transforms_more import (  # noqa: F401
    ElasticTransform,
    LinearTransformation,
)

__all__ = list(_t_all) + list(_a_all) + ["functional", "ImageClassification",
                                         "ElasticTransform", "LinearTransformation"]


def __getattr__(name):
    # `transforms.v2` imports on first attribute access, as after torchvision's own import
    if name == "v2":
        import importlib
        return importlib.import_module("fiamma.vision.transforms.v2")
    raise AttributeError(f"module 'fiamma.vision.transforms' has no attribute {name!r}")
