"""Quantizable ShuffleNetV2 (torchvision.models.quantization.shufflenetv2) in float.

    >>> import fiamma
    >>> from fiamma.vision.models.quantization import shufflenet_v2_x0_5
    >>> m = shufflenet_v2_x0_5().eval()
    >>> m.fuse_model()
    >>> tuple(m(fiamma.randn(1, 3, 64, 64)).shape)
    (1, 1000)
"""
from fiamma import nn
from fiamma.ao.quantization import DeQuantStub, QuantStub
from fiamma.vision.models._api import register_model
from fiamma.vision.models._weights_util import build
from fiamma.vision.models.quantization._common import qweights
from fiamma.vision.models.quantization.utils import (
    QuantizedWeightsEnum,
    build_quantized,
    check_float_request,
    fuse,
    pop_backend,
    replace_relu,
)
from fiamma.vision.models.shufflenetv2 import (
    InvertedResidual,
    ShuffleNet_V2_X0_5_Weights,
    ShuffleNet_V2_X1_0_Weights,
    ShuffleNet_V2_X1_5_Weights,
    ShuffleNet_V2_X2_0_Weights,
    ShuffleNetV2,
    channel_shuffle,
)

__all__ = ["QuantizableShuffleNetV2", "ShuffleNet_V2_X0_5_QuantizedWeights",
           "ShuffleNet_V2_X1_0_QuantizedWeights", "ShuffleNet_V2_X1_5_QuantizedWeights",
           "ShuffleNet_V2_X2_0_QuantizedWeights", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0",
           "shufflenet_v2_x1_5", "shufflenet_v2_x2_0"]


class QuantizableInvertedResidual(InvertedResidual):
    """ShuffleNetV2 unit concatenating through ``cat.cat``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cat = nn.quantized.FloatFunctional()

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = self.cat.cat([x1, self.branch2(x2)], dim=1)
        else:
            out = self.cat.cat([self.branch1(x), self.branch2(x)], dim=1)
        return channel_shuffle(out, 2)


class QuantizableShuffleNetV2(ShuffleNetV2):
    """ShuffleNetV2 with quantizable units between ``quant`` and ``dequant`` stubs."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, inverted_residual=QuantizableInvertedResidual, **kwargs)
        self.quant = QuantStub()
        self.dequant = DeQuantStub()

    def forward(self, x):
        return self.dequant(super().forward(self.quant(x)))

    def fuse_model(self, is_qat=None):
        """Fuse conv+bn(+relu) in ``conv1``, ``conv5`` and every unit's branches, in place
        (numerics unchanged)."""
        for name, m in self._modules.items():
            if name in ("conv1", "conv5") and m is not None:
                fuse(m, [["0", "1", "2"]], is_qat)
        for m in self.modules():
            if type(m) is QuantizableInvertedResidual:
                if len(m.branch1._modules) > 0:
                    fuse(m.branch1, [["0", "1"], ["2", "3", "4"]], is_qat)
                fuse(m.branch2, [["0", "1", "2"], ["3", "4"], ["5", "6", "7"]], is_qat)


class ShuffleNet_V2_X0_5_QuantizedWeights(QuantizedWeightsEnum):
    IMAGENET1K_FBGEMM_V1 = qweights("shufflenetv2_x0.5_fbgemm-00845098.pth", 1366792,
                                    ShuffleNet_V2_X0_5_Weights.IMAGENET1K_V1, 57.972, 79.780,
                                    0.04, 1.501)
    DEFAULT = IMAGENET1K_FBGEMM_V1


class ShuffleNet_V2_X1_0_QuantizedWeights(QuantizedWeightsEnum):
    IMAGENET1K_FBGEMM_V1 = qweights("shufflenetv2_x1_fbgemm-1e62bb32.pth", 2278604,
                                    ShuffleNet_V2_X1_0_Weights.IMAGENET1K_V1, 68.360, 87.582,
                                    0.145, 2.334)
    DEFAULT = IMAGENET1K_FBGEMM_V1


class ShuffleNet_V2_X1_5_QuantizedWeights(QuantizedWeightsEnum):
    IMAGENET1K_FBGEMM_V1 = qweights("shufflenetv2_x1_5_fbgemm-d7401f05.pth", 3503624,
                                    ShuffleNet_V2_X1_5_Weights.IMAGENET1K_V1, 72.052, 90.700,
                                    0.296, 3.672, resize=232,
                                    recipe="https://github.com/pytorch/vision/pull/5906")
    DEFAULT = IMAGENET1K_FBGEMM_V1


class ShuffleNet_V2_X2_0_QuantizedWeights(QuantizedWeightsEnum):
    IMAGENET1K_FBGEMM_V1 = qweights("shufflenetv2_x2_0_fbgemm-5cac526c.pth", 7393996,
                                    ShuffleNet_V2_X2_0_Weights.IMAGENET1K_V1, 75.354, 92.488,
                                    0.583, 7.467, resize=232,
                                    recipe="https://github.com/pytorch/vision/pull/5906")
    DEFAULT = IMAGENET1K_FBGEMM_V1


def _shufflenetv2(builder, float_enum, q_enum, weights, progress, quantize, kwargs, repeats,
                  channels):
    backend = pop_backend(kwargs)

    def make(**kw):
        model = QuantizableShuffleNetV2(repeats, channels, **kw)
        replace_relu(model)
        return model
    if quantize:
        return build_quantized(make, q_enum, weights, progress, kwargs, backend)
    check_float_request(builder, quantize, weights, q_enum)
    return build(float_enum, weights, progress, kwargs, make)


_DOC = """ShuffleNetV2 {x} (torchvision's ``models.quantization.{name}``). ``quantize=False``:
    the float quantizable model; ``weights``: None, a :class:`{f}` member or name, or a
    checkpoint path (float weights). ``quantize=True``: the int8 model (post-training
    quantization for ``backend``, default fbgemm) into which :class:`{q}` (or a local copy)
    load."""


@register_model(name="quantized_shufflenet_v2_x0_5", weights=ShuffleNet_V2_X0_5_QuantizedWeights)
def shufflenet_v2_x0_5(*, weights=None, progress=True, quantize=False, **kwargs):
    return _shufflenetv2("shufflenet_v2_x0_5", ShuffleNet_V2_X0_5_Weights,
                         ShuffleNet_V2_X0_5_QuantizedWeights, weights, progress, quantize,
                         kwargs, [4, 8, 4], [24, 48, 96, 192, 1024])


@register_model(name="quantized_shufflenet_v2_x1_0", weights=ShuffleNet_V2_X1_0_QuantizedWeights)
def shufflenet_v2_x1_0(*, weights=None, progress=True, quantize=False, **kwargs):
    return _shufflenetv2("shufflenet_v2_x1_0", ShuffleNet_V2_X1_0_Weights,
                         ShuffleNet_V2_X1_0_QuantizedWeights, weights, progress, quantize,
                         kwargs, [4, 8, 4], [24, 116, 232, 464, 1024])


@register_model(name="quantized_shufflenet_v2_x1_5", weights=ShuffleNet_V2_X1_5_QuantizedWeights)
def shufflenet_v2_x1_5(*, weights=None, progress=True, quantize=False, **kwargs):
    return _shufflenetv2("shufflenet_v2_x1_5", ShuffleNet_V2_X1_5_Weights,
                         ShuffleNet_V2_X1_5_QuantizedWeights, weights, progress, quantize,
                         kwargs, [4, 8, 4], [24, 176, 352, 704, 1024])


@register_model(name="quantized_shufflenet_v2_x2_0", weights=ShuffleNet_V2_X2_0_QuantizedWeights)
def shufflenet_v2_x2_0(*, weights=None, progress=True, quantize=False, **kwargs):
    return _shufflenetv2("shufflenet_v2_x2_0", ShuffleNet_V2_X2_0_Weights,
                         ShuffleNet_V2_X2_0_QuantizedWeights, weights, progress, quantize,
                         kwargs, [4, 8, 4], [24, 244, 488, 976, 2048])


for _fn, _x, _f, _q in (
        (shufflenet_v2_x0_5, "0.5x", ShuffleNet_V2_X0_5_Weights,
         ShuffleNet_V2_X0_5_QuantizedWeights),
        (shufflenet_v2_x1_0, "1.0x", ShuffleNet_V2_X1_0_Weights,
         ShuffleNet_V2_X1_0_QuantizedWeights),
        (shufflenet_v2_x1_5, "1.5x", ShuffleNet_V2_X1_5_Weights,
         ShuffleNet_V2_X1_5_QuantizedWeights),
        (shufflenet_v2_x2_0, "2.0x", ShuffleNet_V2_X2_0_Weights,
         ShuffleNet_V2_X2_0_QuantizedWeights)):
    _fn.__doc__ = _DOC.format(x=_x, name=_fn.__name__, f=_f.__name__, q=_q.__name__)
