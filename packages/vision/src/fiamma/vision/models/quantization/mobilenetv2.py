"""Quantizable MobileNetV2 (torchvision.models.quantization.mobilenetv2) in float.

    >>> import fiamma
    >>> from fiamma.vision.models.quantization import mobilenet_v2
    >>> m = mobilenet_v2().eval()
    >>> m.fuse_model()
    >>> tuple(m(fiamma.randn(1, 3, 64, 64)).shape)
    (1, 1000)
"""
from fiamma import nn
from fiamma.ao.quantization import DeQuantStub, QuantStub
from fiamma.vision.models._api import register_model
from fiamma.vision.models._weights_util import build
from fiamma.vision.models.mobilenetv2 import InvertedResidual, MobileNet_V2_Weights, MobileNetV2
from fiamma.vision.models.quantization._common import _QAT_DOCS, qweights
from fiamma.vision.models.quantization.utils import (
    QuantizedWeightsEnum,
    build_quantized,
    check_float_request,
    fuse,
    pop_backend,
    replace_relu,
)
from fiamma.vision.ops.misc import Conv2dNormActivation

__all__ = ["QuantizableMobileNetV2", "MobileNet_V2_QuantizedWeights", "mobilenet_v2"]


class QuantizableInvertedResidual(InvertedResidual):
    """InvertedResidual whose residual add is ``skip_add.add``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.skip_add = nn.quantized.FloatFunctional()

    def forward(self, x):
        if self.use_res_connect:
            return self.skip_add.add(x, self.conv(x))
        return self.conv(x)

    def fuse_model(self, is_qat=None):
        for idx in range(len(self.conv)):
            if type(self.conv[idx]) is nn.Conv2d:
                fuse(self.conv, [str(idx), str(idx + 1)], is_qat)


class QuantizableMobileNetV2(MobileNetV2):
    """MobileNetV2 between ``quant`` and ``dequant`` stubs."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.quant = QuantStub()
        self.dequant = DeQuantStub()

    def forward(self, x):
        return self.dequant(super().forward(self.quant(x)))

    def fuse_model(self, is_qat=None):
        """Fuse conv+bn+relu of every Conv2dNormActivation and the final conv+bn of every
        block, in place (numerics unchanged)."""
        for m in self.modules():
            if type(m) is Conv2dNormActivation:
                fuse(m, ["0", "1", "2"], is_qat)
            if type(m) is QuantizableInvertedResidual:
                m.fuse_model(is_qat)


class MobileNet_V2_QuantizedWeights(QuantizedWeightsEnum):
    IMAGENET1K_QNNPACK_V1 = qweights(
        "mobilenet_v2_qnnpack_37f702c5.pth", 3504872, MobileNet_V2_Weights.IMAGENET1K_V1,
        71.658, 90.150, 0.301, 3.423, backend="qnnpack", docs=_QAT_DOCS,
        recipe="https://github.com/pytorch/vision/tree/main/references/classification"
               "#qat-mobilenetv2")
    DEFAULT = IMAGENET1K_QNNPACK_V1


@register_model(name="quantized_mobilenet_v2", weights=MobileNet_V2_QuantizedWeights)
def mobilenet_v2(*, weights=None, progress=True, quantize=False, **kwargs):
    """MobileNetV2 (torchvision's ``models.quantization.mobilenet_v2``). ``quantize=False``:
    the float quantizable model; ``weights``: None, a :class:`MobileNet_V2_Weights` member or
    name, or a checkpoint path (float weights). ``quantize=True``: the int8 model
    (post-training quantization for ``backend``, default fbgemm) into which the
    :class:`MobileNet_V2_QuantizedWeights` (or a local copy) load; other ``**kwargs`` go to
    :class:`QuantizableMobileNetV2`."""
    backend = pop_backend(kwargs)

    def make(**kw):
        model = QuantizableMobileNetV2(block=QuantizableInvertedResidual, **kw)
        replace_relu(model)
        return model
    if quantize:
        return build_quantized(make, MobileNet_V2_QuantizedWeights, weights, progress, kwargs,
                               backend or "qnnpack")
    check_float_request("mobilenet_v2", quantize, weights, MobileNet_V2_QuantizedWeights)
    return build(MobileNet_V2_Weights, weights, progress, kwargs, make)
