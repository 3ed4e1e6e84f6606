"""Quantizable GoogLeNet (torchvision.models.quantization.googlenet) in float.

    >>> import fiamma
    >>> from fiamma.vision.models.quantization import googlenet
    >>> m = googlenet(init_weights=True).eval()
    >>> m.fuse_model()
    >>> tuple(m(fiamma.randn(1, 3, 64, 64)).shape)
    (1, 1000)
"""
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.ao.quantization import DeQuantStub, QuantStub
from fiamma.vision.models._api import register_model
from fiamma.vision.models.googlenet import (
    BasicConv2d,
    GoogLeNet,
    GoogLeNet_Weights,
    GoogLeNetOutputs,
    Inception,
    InceptionAux,
    build_with_aux_heads,
    transform_input,
)
from fiamma.vision.models.quantization._common import qweights
from fiamma.vision.models.quantization.utils import (
    QuantizedWeightsEnum,
    check_float_request,
    fuse,
    pop_backend,
    quantize_model,
    replace_relu,
)

__all__ = ["QuantizableGoogLeNet", "GoogLeNet_QuantizedWeights", "googlenet"]


class QuantizableBasicConv2d(BasicConv2d):
    """conv + bn + ``relu`` module (fusable)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))

    def fuse_model(self, is_qat=None):
        fuse(self, ["conv", "bn", "relu"], is_qat)


class QuantizableInception(Inception):
    """Inception block concatenating through ``cat.cat``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, conv_block=QuantizableBasicConv2d, **kwargs)
        self.cat = nn.quantized.FloatFunctional()

    def forward(self, x):
        return self.cat.cat([self.branch1(x), self.branch2(x), self.branch3(x),
                             self.branch4(x)], 1)


class QuantizableInceptionAux(InceptionAux):
    """Auxiliary classifier with a ``relu`` module after ``fc1``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, conv_block=QuantizableBasicConv2d, **kwargs)
        self.relu = nn.ReLU()

    def forward(self, x):
        x = self.conv(F.adaptive_avg_pool2d(x, (4, 4)))
        x = self.relu(self.fc1(x.flatten(1)))
        return self.fc2(self.dropout(x))


class QuantizableGoogLeNet(GoogLeNet):
    """GoogLeNet with quantizable blocks between ``quant`` and ``dequant`` stubs. In training
    mode with ``aux_logits`` it returns ``GoogLeNetOutputs`` in the order torchvision's
    quantizable GoogLeNet does: ``aux_logits2`` from ``aux1`` (after inception4a),
    ``aux_logits1`` from ``aux2``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, blocks=[QuantizableBasicConv2d, QuantizableInception,
                                        QuantizableInceptionAux], **kwargs)
        self.quant = QuantStub()
        self.dequant = DeQuantStub()

    def forward(self, x):
        if self.transform_input:
            x = transform_input(x)
        x = self.quant(x)
        x = self.maxpool1(self.conv1(x))
        x = self.maxpool2(self.conv3(self.conv2(x)))
        x = self.maxpool3(self.inception3b(self.inception3a(x)))
        x = self.inception4a(x)
        aux1 = self.aux1(x) if self.aux1 is not None and self.training else None
        x = self.inception4d(self.inception4c(self.inception4b(x)))
        aux2 = self.aux2(x) if self.aux2 is not None and self.training else None
        x = self.maxpool4(self.inception4e(x))
        x = self.inception5b(self.inception5a(x))
        x = self.fc(self.dropout(self.avgpool(x).flatten(1)))
        x = self.dequant(x)
        if self.training and self.aux_logits:
            return GoogLeNetOutputs(x, aux1, aux2)
        return x

    def fuse_model(self, is_qat=None):
        """Fuse conv+bn+relu of every QuantizableBasicConv2d in place (numerics unchanged)."""
        for m in self.modules():
            if type(m) is QuantizableBasicConv2d:
                m.fuse_model(is_qat)


class GoogLeNet_QuantizedWeights(QuantizedWeightsEnum):
    IMAGENET1K_FBGEMM_V1 = qweights("googlenet_fbgemm-c81f6644.pth", 6624904,
                                    GoogLeNet_Weights.IMAGENET1K_V1, 69.826, 89.404, 1.498,
                                    12.618, min_size=(15, 15))
    DEFAULT = IMAGENET1K_FBGEMM_V1


def _strip_aux(model):
    model.aux_logits = False
    model.aux1 = None
    model.aux2 = None


@register_model(name="quantized_googlenet", weights=GoogLeNet_QuantizedWeights)
def googlenet(*, weights=None, progress=True, quantize=False, **kwargs):
    """GoogLeNet (torchvision's ``models.quantization.googlenet``) as the float quantizable
    model. ``weights``: None, a :class:`GoogLeNet_Weights` member or name, or a checkpoint
    path (float weights; as in torchvision they set ``transform_input=True`` unless given and
    the untrained auxiliary heads are dropped unless ``aux_logits=True``); the int8
    :class:`GoogLeNet_QuantizedWeights` (or an int8 checkpoint path) load with
    ``quantize=True``, which builds the int8 model (``backend``: fbgemm or qnnpack)."""
    backend = pop_backend(kwargs)

    def make(**kw):
        model = QuantizableGoogLeNet(**kw)
        replace_relu(model)
        if quantize:  # as torchvision: converted to int8 before the weights load
            quantize_model(model, backend or "fbgemm")
        return model
    make.__name__ = "googlenet"
    if quantize:
        return build_with_aux_heads(make, GoogLeNet_QuantizedWeights, weights, progress,
                                    kwargs, ("aux1.", "aux2."), _strip_aux)
    check_float_request("googlenet", quantize, weights, GoogLeNet_QuantizedWeights)
    return build_with_aux_heads(make, GoogLeNet_Weights, weights, progress, kwargs,
                                ("aux1.", "aux2."), _strip_aux)
