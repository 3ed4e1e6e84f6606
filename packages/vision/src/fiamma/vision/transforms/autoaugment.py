"""``torchvision.transforms.autoaugment``: the module path of the automatic augmentation
policies (``from torchvision.transforms.autoaugment import AutoAugmentPolicy``); the classes
are the ones at ``fiamma.vision.transforms``."""

from fiamma.vision.transforms._autoaugment import *  # noqa: F401,F403
from fiamma.vision.transforms._autoaugment import __all__  # noqa: F401
