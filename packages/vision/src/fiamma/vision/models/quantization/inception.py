"""Quantizable Inception v3 (torchvision.models.quantization.inception) in float.

    >>> import fiamma
    >>> from fiamma.vision.models.quantization import inception_v3
    >>> m = inception_v3(init_weights=False).eval()
    >>> m.fuse_model()
    >>> tuple(m(fiamma.randn(1, 3, 75, 75)).shape)
    (1, 1000)
"""
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.ao.quantization import DeQuantStub, QuantStub
from fiamma.vision.models._api import register_model, resolve_weights
from fiamma.vision.models.googlenet import build_with_aux_heads, transform_input
from fiamma.vision.models.inception import (
    Inception3,
    Inception_V3_Weights,
    InceptionA,
    InceptionAux,
    InceptionB,
    InceptionC,
    InceptionD,
    InceptionE,
    InceptionOutputs,
)
from fiamma.vision.models.quantization._common import qweights
from fiamma.vision.models.quantization.googlenet import QuantizableBasicConv2d
from fiamma.vision.models.quantization.utils import (
    QuantizedWeightsEnum,
    check_float_request,
    pop_backend,
    quantize_model,
    replace_relu,
)

__all__ = ["QuantizableInception3", "Inception_V3_QuantizedWeights", "inception_v3"]


def _avg3(x):
    return F.avg_pool2d(x, kernel_size=3, stride=1, padding=1)


class QuantizableInceptionA(InceptionA):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, conv_block=QuantizableBasicConv2d, **kwargs)
        self.myop = nn.quantized.FloatFunctional()

    def forward(self, x):
        b1 = self.branch1x1(x)
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return self.myop.cat([b1, b5, b3, self.branch_pool(_avg3(x))], 1)


class QuantizableInceptionB(InceptionB):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, conv_block=QuantizableBasicConv2d, **kwargs)
        self.myop = nn.quantized.FloatFunctional()

    def forward(self, x):
        b3 = self.branch3x3(x)
        bd = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return self.myop.cat([b3, bd, F.max_pool2d(x, kernel_size=3, stride=2)], 1)


class QuantizableInceptionC(InceptionC):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, conv_block=QuantizableBasicConv2d, **kwargs)
        self.myop = nn.quantized.FloatFunctional()

    def forward(self, x):
        b1 = self.branch1x1(x)
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        bd = self.branch7x7dbl_1(x)
        for layer in (self.branch7x7dbl_2, self.branch7x7dbl_3, self.branch7x7dbl_4,
                      self.branch7x7dbl_5):
            bd = layer(bd)
        return self.myop.cat([b1, b7, bd, self.branch_pool(_avg3(x))], 1)


class QuantizableInceptionD(InceptionD):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, conv_block=QuantizableBasicConv2d, **kwargs)
        self.myop = nn.quantized.FloatFunctional()

    def forward(self, x):
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_4(self.branch7x7x3_3(self.branch7x7x3_2(self.branch7x7x3_1(x))))
        return self.myop.cat([b3, b7, F.max_pool2d(x, kernel_size=3, stride=2)], 1)


class QuantizableInceptionE(InceptionE):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, conv_block=QuantizableBasicConv2d, **kwargs)
        self.myop1 = nn.quantized.FloatFunctional()
        self.myop2 = nn.quantized.FloatFunctional()
        self.myop3 = nn.quantized.FloatFunctional()

    def forward(self, x):
        b1 = self.branch1x1(x)
        b3 = self.branch3x3_1(x)
        b3 = self.myop1.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        bd = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        bd = self.myop2.cat([self.branch3x3dbl_3a(bd), self.branch3x3dbl_3b(bd)], 1)
        return self.myop3.cat([b1, b3, bd, self.branch_pool(_avg3(x))], 1)


class QuantizableInceptionAux(InceptionAux):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, conv_block=QuantizableBasicConv2d, **kwargs)


class QuantizableInception3(Inception3):
    """Inception v3 with quantizable blocks between ``quant`` and ``dequant`` stubs."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, inception_blocks=[
            QuantizableBasicConv2d, QuantizableInceptionA, QuantizableInceptionB,
            QuantizableInceptionC, QuantizableInceptionD, QuantizableInceptionE,
            QuantizableInceptionAux], **kwargs)
        self.quant = QuantStub()
        self.dequant = DeQuantStub()

    def forward(self, x):
        if x.ndim != 4 or x.shape[-1] < 75 or x.shape[-2] < 75:
            raise ValueError(f"QuantizableInception3: expected an (N, 3, H, W) input with "
                             f"H, W >= 75, got shape {tuple(x.shape)}")
        if self.transform_input:
            x = transform_input(x)
        x = self.quant(x)
        for name in ("Conv2d_1a_3x3", "Conv2d_2a_3x3", "Conv2d_2b_3x3", "maxpool1",
                     "Conv2d_3b_1x1", "Conv2d_4a_3x3", "maxpool2", "Mixed_5b", "Mixed_5c",
                     "Mixed_5d", "Mixed_6a", "Mixed_6b", "Mixed_6c", "Mixed_6d", "Mixed_6e"):
            x = getattr(self, name)(x)
        aux = self.AuxLogits(x) if self.AuxLogits is not None and self.training else None
        x = self.Mixed_7c(self.Mixed_7b(self.Mixed_7a(x)))
        x = self.fc(self.dropout(self.avgpool(x)).flatten(1))
        x = self.dequant(x)
        if self.training and self.aux_logits:
            return InceptionOutputs(x, aux)
        return x

    def fuse_model(self, is_qat=None):
        """Fuse conv+bn+relu of every QuantizableBasicConv2d in place (numerics unchanged)."""
        for m in self.modules():
            if type(m) is QuantizableBasicConv2d:
                m.fuse_model(is_qat)


class Inception_V3_QuantizedWeights(QuantizedWeightsEnum):
    IMAGENET1K_FBGEMM_V1 = qweights("inception_v3_google_fbgemm-a2837893.pth", 27161264,
                                    Inception_V3_Weights.IMAGENET1K_V1, 77.176, 93.354, 5.713,
                                    23.146, crop=299, resize=342, min_size=(75, 75))
    DEFAULT = IMAGENET1K_FBGEMM_V1


def _aux_off(model):
    # torchvision's quantizable builder keeps the (untrained) AuxLogits module and only
    # switches it off, so the state dict keeps its keys
    model.aux_logits = False


@register_model(name="quantized_inception_v3", weights=Inception_V3_QuantizedWeights)
def inception_v3(*, weights=None, progress=True, quantize=False, **kwargs):
    """Inception v3 (torchvision's ``models.quantization.inception_v3``) as the float
    quantizable model. ``weights``: None, an :class:`Inception_V3_Weights` member or name,
    or a checkpoint path (float weights; ``transform_input=True`` unless given, and
    ``aux_logits`` switched off unless asked for, keeping the AuxLogits module as torchvision
    does); the int8 :class:`Inception_V3_QuantizedWeights` (or an int8 checkpoint path) load
    with ``quantize=True``, which builds the int8 model (``backend``: fbgemm or qnnpack)."""
    backend = pop_backend(kwargs)
    # an int8 enum checkpoint has no AuxLogits: dropped before the load unless asked for
    drop_aux = (quantize and not kwargs.get("aux_logits", False) and isinstance(
        resolve_weights(Inception_V3_QuantizedWeights, weights), Inception_V3_QuantizedWeights))

    def make(**kw):
        model = QuantizableInception3(**kw)
        replace_relu(model)
        if quantize:  # as torchvision: int8, and the aux head dropped before the load
            quantize_model(model, backend or "fbgemm")
            if drop_aux:
                model.aux_logits = False
                model.AuxLogits = None
        return model
    make.__name__ = "inception_v3"
    if quantize:
        return build_with_aux_heads(make, Inception_V3_QuantizedWeights, weights, progress,
                                    kwargs, ("AuxLogits.",), _aux_off)
    check_float_request("inception_v3", quantize, weights, Inception_V3_QuantizedWeights)
    return build_with_aux_heads(make, Inception_V3_Weights, weights, progress, kwargs,
                                ("AuxLogits.",), _aux_off)
