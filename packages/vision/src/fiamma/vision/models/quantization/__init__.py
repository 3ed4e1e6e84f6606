"""``fiamma.vision.models.quantization`` (torchvision's ``models.quantization``): the
quantizable model classes and builders, in float.

fiamma has no quantized (int8) tensors or kernels, so these builders make the *float*
quantizable models: the float network between ``QuantStub``/``DeQuantStub``, residual adds
and concatenations through ``nn.quantized.FloatFunctional``, non-inplace ReLUs, and
``fuse_model(is_qat=None)`` fusing conv+bn(+relu) as torchvision does. Module names and
state-dict keys equal torchvision's, so the float weights (``meta["unquantized"]`` of each
``*_QuantizedWeights``) load by key. ``quantize=True`` and the ``*_QuantizedWeights``
checkpoints (int8) raise NotImplementedError naming what is missing.

    >>> import fiamma
    >>> from fiamma.vision.models import quantization as q
    >>> m = q.resnet18(quantize=False).eval()
    >>> q.ResNet18_QuantizedWeights.DEFAULT.meta["unquantized"]
    ResNet18_Weights.IMAGENET1K_V1
    >>> q.resnet18(quantize=True)
    Traceback (most recent call last):
    ...
    NotImplementedError: resnet18(quantize=True) needs quantized int8 tensors and kernels ...
"""
from fiamma.vision.models.quantization.googlenet import *  # noqa: F401,F403
from fiamma.vision.models.quantization.inception import *  # noqa: F401,F403
from fiamma.vision.models.quantization.mobilenet import *  # noqa: F401,F403
from fiamma.vision.models.quantization.resnet import *  # noqa: F401,F403
from fiamma.vision.models.quantization.shufflenetv2 import *  # noqa: F401,F403
