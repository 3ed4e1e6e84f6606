"""torchvision.models.quantization.mobilenet: the MobileNetV2 and V3 quantizable models."""
from fiamma.vision.models.quantization.mobilenetv2 import *  # noqa: F401,F403
from fiamma.vision.models.quantization.mobilenetv2 import __all__ as _mv2_all
from fiamma.vision.models.quantization.mobilenetv3 import *  # noqa: F401,F403
from fiamma.vision.models.quantization.mobilenetv3 import __all__ as _mv3_all

__all__ = _mv2_all + _mv3_all
