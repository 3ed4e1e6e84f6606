"""Quantizable MobileNetV3-Large (torchvision.models.quantization.mobilenetv3): the float
quantizable model, and with ``quantize=True`` the int8 model torchvision builds through
quantization-aware training (``fuse_model(is_qat=True)``, ``prepare_qat``, the QAT weights,
``convert``).

    >>> import fiamma
    >>> from fiamma.vision.models.quantization import mobilenet_v3_large
    >>> m = mobilenet_v3_large().eval()
    >>> m.fuse_model()
    >>> tuple(m(fiamma.randn(1, 3, 64, 64)).shape)
    (1, 1000)
    >>> q = mobilenet_v3_large(quantize=True, num_classes=10)
    >>> type(q.features[0][0]).__name__, tuple(q(fiamma.rand(1, 3, 64, 64)).shape)
    ('Conv2d', (1, 10))
"""
from fiamma import nn
from fiamma.ao.quantization import DeQuantStub, QuantStub
from fiamma.vision.models._api import register_model
from fiamma.vision.models._weights_util import build
from fiamma.vision.models.mobilenetv3 import (
    InvertedResidual,
    MobileNet_V3_Large_Weights,
    MobileNetV3,
    _mobilenet_v3_conf,
)
from fiamma.vision.models.quantization._common import _QAT_DOCS, qweights
from fiamma.vision.models.quantization.utils import (
    QuantizedWeightsEnum,
    build_qat_quantized,
    check_float_request,
    fuse,
    pop_backend,
    replace_relu,
)
from fiamma.vision.ops.misc import Conv2dNormActivation, SqueezeExcitation

__all__ = ["QuantizableMobileNetV3", "MobileNet_V3_Large_QuantizedWeights",
           "mobilenet_v3_large"]


class QuantizableSqueezeExcitation(SqueezeExcitation):
    """Squeeze-excitation (hard-sigmoid scale) whose product is ``skip_mul.mul``."""

    def __init__(self, *args, **kwargs):
        kwargs["scale_activation"] = nn.Hardsigmoid
        super().__init__(*args, **kwargs)
        self.skip_mul = nn.quantized.FloatFunctional()

    def forward(self, input):
        return self.skip_mul.mul(self._scale(input), input)

    def fuse_model(self, is_qat=None):
        fuse(self, ["fc1", "activation"], is_qat)


class QuantizableInvertedResidual(InvertedResidual):
    """InvertedResidual with the quantizable SE layer and ``skip_add.add``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, se_layer=QuantizableSqueezeExcitation, **kwargs)
        self.skip_add = nn.quantized.FloatFunctional()

    def forward(self, x):
        if self.use_res_connect:
            return self.skip_add.add(x, self.block(x))
        return self.block(x)


class QuantizableMobileNetV3(MobileNetV3):
    """MobileNetV3 between ``quant`` and ``dequant`` stubs."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.quant = QuantStub()
        self.dequant = DeQuantStub()

    def forward(self, x):
        return self.dequant(super().forward(self.quant(x)))

    def fuse_model(self, is_qat=None):
        """Fuse conv+bn(+relu) of every Conv2dNormActivation (Hardswish stays separate) and
        fc1+relu of every SE layer, in place (numerics unchanged)."""
        for m in self.modules():
            if type(m) is Conv2dNormActivation:
                names = ["0", "1"]
                if len(m) == 3 and type(m[2]) is nn.ReLU:
                    names.append("2")
                fuse(m, names, is_qat)
            elif type(m) is QuantizableSqueezeExcitation:
                m.fuse_model(is_qat)


class MobileNet_V3_Large_QuantizedWeights(QuantizedWeightsEnum):
    IMAGENET1K_QNNPACK_V1 = qweights(
        "mobilenet_v3_large_qnnpack-5bcacf28.pth", 5483032,
        MobileNet_V3_Large_Weights.IMAGENET1K_V1, 73.004, 90.858, 0.217, 21.554,
        backend="qnnpack", docs=_QAT_DOCS,
        recipe="https://github.com/pytorch/vision/tree/main/references/classification"
               "#qat-mobilenetv3")
    DEFAULT = IMAGENET1K_QNNPACK_V1


@register_model(name="quantized_mobilenet_v3_large",
                weights=MobileNet_V3_Large_QuantizedWeights)
def mobilenet_v3_large(*, weights=None, progress=True, quantize=False, **kwargs):
    """MobileNetV3-Large (torchvision's ``models.quantization.mobilenet_v3_large``).
    ``quantize=False``: the float quantizable model; ``weights``: None, a
    :class:`MobileNet_V3_Large_Weights` member or name, a checkpoint path or a state dict
    (float weights). ``quantize=True``: the int8 model, built as torchvision does through QAT
    (``fuse_model(is_qat=True)``, ``get_default_qat_qconfig(backend)``, ``prepare_qat``,
    loading ``weights``, ``convert``); ``weights`` then is a
    :class:`MobileNet_V3_Large_QuantizedWeights` member or name, a local file of the QAT
    checkpoint (the downloaded ``mobilenet_v3_large_qnnpack-5bcacf28.pth``) or its state dict;
    ``backend`` defaults to qnnpack. ``width_mult``/``reduced_tail``/``dilated`` and other
    ``**kwargs`` as for :func:`fiamma.vision.models.mobilenet_v3_large`."""
    backend = pop_backend(kwargs)
    conf = {k: kwargs.pop(k) for k in ("width_mult", "reduced_tail", "dilated") if k in kwargs}
    setting, last_channel = _mobilenet_v3_conf("mobilenet_v3_large", **conf)

    def make(**kw):
        model = QuantizableMobileNetV3(setting, last_channel, block=QuantizableInvertedResidual,
                                       **kw)
        replace_relu(model)
        return model
    if quantize:
        return build_qat_quantized(make, MobileNet_V3_Large_QuantizedWeights, weights, progress,
                                   kwargs, backend)
    check_float_request("mobilenet_v3_large", quantize, weights,
                        MobileNet_V3_Large_QuantizedWeights)
    return build(MobileNet_V3_Large_Weights, weights, progress, kwargs, make)
