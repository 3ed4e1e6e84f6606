"""Quantizable ResNet / ResNeXt (torchvision.models.quantization.resnet).

``quantize=True`` builds the int8 model (fused, observed on a random batch, converted with
the fbgemm or qnnpack qconfig, as torchvision's ``quantize_model``) and loads the int8
weights into it; ``quantize=False`` builds the float model with torchvision's module
names: ``quant``/``dequant`` stubs around the network, ``FloatFunctional`` residual adds
(``add_relu``/``skip_add_relu``), non-inplace ReLUs, and ``fuse_model()``.

    >>> import fiamma
    >>> from fiamma.vision.models.quantization import resnet18
    >>> m = resnet18().eval()
    >>> m.fuse_model()
    >>> type(m.conv1).__name__, tuple(m(fiamma.randn(1, 3, 64, 64)).shape)
    ('ConvReLU2d', (1, 1000))
"""
from fiamma import nn
from fiamma.ao.quantization import DeQuantStub, QuantStub
from fiamma.vision.models._api import register_model
from fiamma.vision.models._builder import build_with_weights, override_param
from fiamma.vision.models.quantization._common import qweights
from fiamma.vision.models.quantization.utils import (
    QuantizedWeightsEnum,
    build_quantized,
    check_float_request,
    fuse,
    pop_backend,
    replace_relu,
)
from fiamma.vision.models.resnet import (
    BasicBlock,
    Bottleneck,
    ResNet,
    ResNet18_Weights,
    ResNet50_Weights,
    ResNeXt101_32X8D_Weights,
    ResNeXt101_64X4D_Weights,
)

__all__ = ["QuantizableResNet", "ResNet18_QuantizedWeights", "ResNet50_QuantizedWeights",
           "ResNeXt101_32X8D_QuantizedWeights", "ResNeXt101_64X4D_QuantizedWeights",
           "resnet18", "resnet50", "resnext101_32x8d", "resnext101_64x4d"]


class QuantizableBasicBlock(BasicBlock):
    """BasicBlock whose residual add + ReLU is ``add_relu.add_relu``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.add_relu = nn.quantized.FloatFunctional()

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.add_relu.add_relu(out, identity)

    def fuse_model(self, is_qat=None):
        fuse(self, [["conv1", "bn1", "relu"], ["conv2", "bn2"]], is_qat)
        if self.downsample is not None:
            fuse(self.downsample, ["0", "1"], is_qat)


class QuantizableBottleneck(Bottleneck):
    """Bottleneck with separate ``relu1``/``relu2`` and ``skip_add_relu.add_relu``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.skip_add_relu = nn.quantized.FloatFunctional()
        self.relu1 = nn.ReLU(inplace=False)
        self.relu2 = nn.ReLU(inplace=False)

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.relu2(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.skip_add_relu.add_relu(out, identity)

    def fuse_model(self, is_qat=None):
        fuse(self, [["conv1", "bn1", "relu1"], ["conv2", "bn2", "relu2"], ["conv3", "bn3"]],
             is_qat)
        if self.downsample is not None:
            fuse(self.downsample, ["0", "1"], is_qat)


class QuantizableResNet(ResNet):
    """ResNet between a ``QuantStub`` (``quant``) and a ``DeQuantStub`` (``dequant``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.quant = QuantStub()
        self.dequant = DeQuantStub()

    def forward(self, x):
        return self.dequant(super().forward(self.quant(x)))

    def fuse_model(self, is_qat=None):
        """Fuse conv+bn(+relu) in place (eval: the batch norms fold into the convolutions;
        ``is_qat=True`` or a model in training mode: QAT fusion). The numerics are unchanged."""
        fuse(self, ["conv1", "bn1", "relu"], is_qat)
        for m in self.modules():
            if type(m) is QuantizableBottleneck or type(m) is QuantizableBasicBlock:
                m.fuse_model(is_qat)


def _resnet(builder, block, layers, float_enum, q_enum, weights, progress, quantize, kwargs):
    backend = pop_backend(kwargs)

    def make(**kw):
        model = QuantizableResNet(block, layers, **kw)
        replace_relu(model)
        return model
    make.__name__ = "QuantizableResNet"
    if quantize:
        return build_quantized(make, q_enum, weights, progress, kwargs, backend)
    check_float_request(builder, quantize, weights, q_enum)
    return build_with_weights(make, float_enum, weights, progress, kwargs)


class ResNet18_QuantizedWeights(QuantizedWeightsEnum):
    IMAGENET1K_FBGEMM_V1 = qweights("resnet18_fbgemm_16fa66dd.pth", 11689512,
                                    ResNet18_Weights.IMAGENET1K_V1, 69.494, 88.882, 1.814, 11.238)
    DEFAULT = IMAGENET1K_FBGEMM_V1


class ResNet50_QuantizedWeights(QuantizedWeightsEnum):
    IMAGENET1K_FBGEMM_V1 = qweights("resnet50_fbgemm_bf931d71.pth", 25557032,
                                    ResNet50_Weights.IMAGENET1K_V1, 75.920, 92.814, 4.089, 24.759)
    IMAGENET1K_FBGEMM_V2 = qweights("resnet50_fbgemm-23753f79.pth", 25557032,
                                    ResNet50_Weights.IMAGENET1K_V2, 80.282, 94.976, 4.089, 24.953,
                                    resize=232)
    DEFAULT = IMAGENET1K_FBGEMM_V2


class ResNeXt101_32X8D_QuantizedWeights(QuantizedWeightsEnum):
    IMAGENET1K_FBGEMM_V1 = qweights("resnext101_32x8_fbgemm_09835ccf.pth", 88791336,
                                    ResNeXt101_32X8D_Weights.IMAGENET1K_V1, 78.986, 94.480,
                                    16.414, 86.034)
    IMAGENET1K_FBGEMM_V2 = qweights("resnext101_32x8_fbgemm-ee16d00c.pth", 88791336,
                                    ResNeXt101_32X8D_Weights.IMAGENET1K_V2, 82.574, 96.132,
                                    16.414, 86.645, resize=232)
    DEFAULT = IMAGENET1K_FBGEMM_V2


class ResNeXt101_64X4D_QuantizedWeights(QuantizedWeightsEnum):
    IMAGENET1K_FBGEMM_V1 = qweights("resnext101_64x4d_fbgemm-605a1cb3.pth", 83455272,
                                    ResNeXt101_64X4D_Weights.IMAGENET1K_V1, 82.898, 96.326,
                                    15.46, 81.556, resize=232,
                                    recipe="https://github.com/pytorch/vision/pull/5935")
    DEFAULT = IMAGENET1K_FBGEMM_V1


_DOC = """{title} (torchvision's ``models.quantization.{name}``), int8 or float.

    Args:
        weights: with ``quantize=True``: None, a :class:`{q_enum}` member or name, or a local
            int8 checkpoint path; with ``quantize=False``: None, a :class:`{float_enum}`
            member or name (float weights, loaded by key), ``"DEFAULT"`` or a local path.
        progress: show a download progress bar.
        quantize: build the int8 model (``convert``-ed with ``backend``'s qconfig) instead of
            the float quantizable one.
        **kwargs: passed to :class:`QuantizableResNet` (``num_classes``, ...); ``backend``
            (``'fbgemm'`` default, or ``'qnnpack'``) selects the int8 qconfig.
"""


def _doc(fn, title, float_enum, q_enum):
    fn.__doc__ = _DOC.format(title=title, name=fn.__name__, float_enum=float_enum.__name__,
                             q_enum=q_enum.__name__)
    return fn


@register_model(name="quantized_resnet18", weights=ResNet18_QuantizedWeights)
def resnet18(*, weights=None, progress=True, quantize=False, **kwargs):
    return _resnet("resnet18", QuantizableBasicBlock, [2, 2, 2, 2], ResNet18_Weights,
                   ResNet18_QuantizedWeights, weights, progress, quantize, kwargs)


@register_model(name="quantized_resnet50", weights=ResNet50_QuantizedWeights)
def resnet50(*, weights=None, progress=True, quantize=False, **kwargs):
    return _resnet("resnet50", QuantizableBottleneck, [3, 4, 6, 3], ResNet50_Weights,
                   ResNet50_QuantizedWeights, weights, progress, quantize, kwargs)


@register_model(name="quantized_resnext101_32x8d", weights=ResNeXt101_32X8D_QuantizedWeights)
def resnext101_32x8d(*, weights=None, progress=True, quantize=False, **kwargs):
    override_param(kwargs, "groups", 32)
    override_param(kwargs, "width_per_group", 8)
    return _resnet("resnext101_32x8d", QuantizableBottleneck, [3, 4, 23, 3],
                   ResNeXt101_32X8D_Weights, ResNeXt101_32X8D_QuantizedWeights, weights,
                   progress, quantize, kwargs)


@register_model(name="quantized_resnext101_64x4d", weights=ResNeXt101_64X4D_QuantizedWeights)
def resnext101_64x4d(*, weights=None, progress=True, quantize=False, **kwargs):
    override_param(kwargs, "groups", 64)
    override_param(kwargs, "width_per_group", 4)
    return _resnet("resnext101_64x4d", QuantizableBottleneck, [3, 4, 23, 3],
                   ResNeXt101_64X4D_Weights, ResNeXt101_64X4D_QuantizedWeights, weights,
                   progress, quantize, kwargs)


_doc(resnet18, "ResNet-18", ResNet18_Weights, ResNet18_QuantizedWeights)
_doc(resnet50, "ResNet-50", ResNet50_Weights, ResNet50_QuantizedWeights)
_doc(resnext101_32x8d, "ResNeXt-101 32x8d", ResNeXt101_32X8D_Weights,
     ResNeXt101_32X8D_QuantizedWeights)
_doc(resnext101_64x4d, "ResNeXt-101 64x4d", ResNeXt101_64X4D_Weights,
     ResNeXt101_64X4D_QuantizedWeights)
