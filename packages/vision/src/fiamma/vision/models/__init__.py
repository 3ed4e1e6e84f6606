"""fiamma.vision.models: torchvision's architectures, builders, weights enums and registry.

    >>> from fiamma.vision import models
    >>> m = models.get_model("resnet18", weights=None)
"""

from fiamma.vision.models._api import *  # noqa: F401,F403
