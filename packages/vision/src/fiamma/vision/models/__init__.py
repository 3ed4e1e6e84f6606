"""fiamma.vision.models: torchvision's architectures, builders, weights enums and registry.

    >>> from fiamma.vision import models
    >>> m = models.get_model("resnet18", weights=None)
"""

from fiamma.vision.models import (  # noqa: F401,E402
    detection,
    feature_extraction,
    mobilenet,
    optical_flow,
    quantization,
    segmentation,
    video,
)
from fiamma.vision.models._api import *  # noqa: F401,F403
from fiamma.vision.models.alexnet import *  # noqa: F401,F403
from fiamma.vision.models.convnext import *  # noqa: F401,F403
from fiamma.vision.models.densenet import *  # noqa: F401,F403
from fiamma.vision.models.efficientnet import *  # noqa: F401,F403
from fiamma.vision.models.googlenet import *  # noqa: F401,F403
from fiamma.vision.models.inception import *  # noqa: F401,F403
from fiamma.vision.models.maxvit import *  # noqa: F401,F403
from fiamma.vision.models.mnasnet import *  # noqa: F401,F403
from fiamma.vision.models.mobilenetv2 import *  # noqa: F401,F403
from fiamma.vision.models.mobilenetv3 import *  # noqa: F401,F403
from fiamma.vision.models.regnet import *  # noqa: F401,F403
from fiamma.vision.models.resnet import *  # noqa: F401,F403
from fiamma.vision.models.shufflenetv2 import *  # noqa: F401,F403
from fiamma.vision.models.squeezenet import *  # noqa: F401,F403
from fiamma.vision.models.swin_transformer import *  # noqa: F401,F403
from fiamma.vision.models.vgg import *  # noqa: F401,F403
from fiamma.vision.models.vision_transformer import *  # noqa: F401,F403
