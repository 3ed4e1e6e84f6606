"""``fiamma.vision.models.quantization`` (torchvision's ``models.quantization``): the
quantizable model classes and builders.

``quantize=False`` builds the *float* quantizable models: the float network between
``QuantStub``/``DeQuantStub``, residual adds and concatenations through
``nn.quantized.FloatFunctional``, non-inplace ReLUs, and ``fuse_model(is_qat=None)`` fusing
conv+bn(+relu) as torchvision does; the float weights (``meta["unquantized"]`` of each
``*_QuantizedWeights``) load by key. ``quantize=True`` builds the int8 models as torchvision:
post-training quantization (``quantize_model``) for ResNet/ResNeXt/MobileNetV2/ShuffleNetV2/
GoogLeNet/Inception, quantization-aware training (``prepare_qat`` then ``convert``) for
MobileNetV3; the ``*_QuantizedWeights`` checkpoints (or local copies of them) load into those.

    >>> import fiamma
    >>> from fiamma.vision.models import quantization as q
    >>> m = q.resnet18(quantize=False).eval()
    >>> q.ResNet18_QuantizedWeights.DEFAULT.meta["unquantized"]
    ResNet18_Weights.IMAGENET1K_V1
    >>> type(q.resnet18(quantize=True, num_classes=10).fc).__name__
    'Linear'
"""
from fiamma.vision.models.quantization.googlenet import *  # noqa: F401,F403
from fiamma.vision.models.quantization.inception import *  # noqa: F401,F403
from fiamma.vision.models.quantization.mobilenet import *  # noqa: F401,F403
from fiamma.vision.models.quantization.resnet import *  # noqa: F401,F403
from fiamma.vision.models.quantization.shufflenetv2 import *  # noqa: F401,F403
