"""Quantization-aware-training modules (``torch.ao.nn.qat``): float layers whose weight goes
through ``weight_fake_quant`` (the qconfig's weight fake-quantize) on every forward, so training
sees the int8 rounding. ``prepare_qat`` swaps them in; ``convert`` turns them into int8 modules
with the qparams their fake-quantizers learned.

    >>> import fiamma
    >>> from fiamma import nn
    >>> import fiamma.ao.quantization as tq
    >>> import fiamma.ao.nn.qat as nnqat
    >>> lin = nn.Linear(4, 2)
    >>> lin.qconfig = tq.get_default_qat_qconfig("qnnpack")
    >>> q = nnqat.Linear.from_float(lin)
    >>> sorted(k for k in q.state_dict() if not k.startswith("weight_fake_quant."))
    ['bias', 'weight']
    >>> q(fiamma.randn(3, 4)).shape
    fiamma.Size([3, 2])
"""
from fiamma import nn
from fiamma.ao.nn.qat._common import (
    copy_params_detached,
    float_conv,
    float_qconfig,
    init_weight_fake_quant,
)
from fiamma.nn import functional as F

__all__ = ["Conv1d", "Conv2d", "Conv3d", "Linear"]


def _copy_params(dst, src):
    dst.weight = src.weight
    dst.bias = src.bias


class _QATConv:
    """What the QAT convolutions share: ``forward`` with the fake-quantized weight,
    ``from_float`` (a float conv or a fused conv+relu) and ``to_float``."""

    _FLOAT_MODULE = None
    _FLOAT_CONV_MODULE = None
    _FLOAT_RELU_MODULE = None

    def _qat_init(self, qconfig):
        init_weight_fake_quant(self, qconfig)

    def forward(self, input):
        return self._conv_forward(input, self.weight_fake_quant(self.weight), self.bias)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        qconfig = float_qconfig(cls, mod)
        if isinstance(mod, nn.Sequential):  # a fused conv + relu
            mod = mod[0]
        q = cls(mod.in_channels, mod.out_channels, mod.kernel_size, stride=mod.stride,
                padding=mod.padding, dilation=mod.dilation, groups=mod.groups,
                bias=mod.bias is not None, padding_mode=mod.padding_mode, qconfig=qconfig)
        _copy_params(q, mod)
        return q

    def to_float(self):
        """The float conv (and ReLU, for the fused module) with this module's parameters."""
        conv = float_conv(self, self._FLOAT_CONV_MODULE)
        if self._FLOAT_RELU_MODULE is not None:
            return self._FLOAT_MODULE(conv, self._FLOAT_RELU_MODULE())
        return conv


def _conv(name, base, doc):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", qconfig=None, device=None,
                 dtype=None):
        base.__init__(self, in_channels, out_channels, kernel_size, stride=stride,
                      padding=padding, dilation=dilation, groups=groups, bias=bias,
                      padding_mode=padding_mode)
        self._qat_init(qconfig)
    return type(name, (_QATConv, base), {
        "__init__": __init__, "__doc__": doc, "__module__": __name__,
        "_FLOAT_MODULE": base, "_FLOAT_CONV_MODULE": base})


Conv1d = _conv("Conv1d", nn.Conv1d, "Conv1d whose weight is fake-quantized (QAT).")
Conv2d = _conv("Conv2d", nn.Conv2d, "Conv2d whose weight is fake-quantized (QAT).")
Conv3d = _conv("Conv3d", nn.Conv3d, "Conv3d whose weight is fake-quantized (QAT).")


class Linear(nn.Linear):
    """Linear layer whose weight is fake-quantized (QAT)."""

    _FLOAT_MODULE = nn.Linear

    def __init__(self, in_features, out_features, bias=True, qconfig=None, device=None,
                 dtype=None):
        super().__init__(in_features, out_features, bias)
        init_weight_fake_quant(self, qconfig)

    def forward(self, input):
        return F.linear(input, self.weight_fake_quant(self.weight), self.bias)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        qconfig = float_qconfig(cls, mod, accepts=lambda mod, t: (
            cls._FLOAT_MODULE is nn.Linear and issubclass(t, nn.Linear)
            and not hasattr(mod, "weight_fake_quant")))
        if isinstance(mod, nn.Sequential):  # a fused linear + relu
            mod = mod[0]
        q = cls(mod.in_features, mod.out_features, bias=mod.bias is not None, qconfig=qconfig)
        _copy_params(q, mod)
        return q

    def to_float(self):
        """The float ``nn.Linear`` with this module's parameters."""
        return copy_params_detached(
            nn.Linear(self.in_features, self.out_features, self.bias is not None), self)
