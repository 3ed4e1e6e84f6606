"""Fused quantization-aware-training modules (``torch.ao.nn.intrinsic.qat``).

``ConvBn*d`` / ``ConvBnReLU*d`` keep the batch norm as a module (``bn``) and follow PyTorch's
approximate folding: the weight scaled by ``gamma / sqrt(running_var + eps)`` is
fake-quantized, convolved with a zero bias, divided back by the same factor, the conv bias
added, and the result goes through ``bn`` (batch statistics in training, running ones in eval
or after :meth:`freeze_bn_stats`). So the weight the int8 model will have (the BN-folded one)
is what training sees rounded. ``ConvReLU*d`` and ``LinearReLU`` are the QAT conv/linear with
a ReLU.

    >>> import fiamma
    >>> from fiamma import nn
    >>> import fiamma.ao.nn.intrinsic as nni
    >>> import fiamma.ao.nn.intrinsic.qat as nniqat
    >>> import fiamma.ao.quantization as tq
    >>> f = nni.ConvBnReLU2d(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    >>> f.qconfig = tq.get_default_qat_qconfig("qnnpack")
    >>> m = nniqat.ConvBnReLU2d.from_float(f)
    >>> m(fiamma.randn(2, 3, 6, 6)).shape
    fiamma.Size([2, 4, 4, 4])
"""
import fiamma
from fiamma import nn
from fiamma.ao.nn import intrinsic as nni
from fiamma.ao.nn.qat import modules as nnqat
from fiamma.ao.nn.qat._common import (
    BnStatsMixin,
    float_conv,
    float_qconfig,
    need_qconfig,
    share_bn,
)
from fiamma.nn import functional as F

__all__ = ["ConvBn1d", "ConvBn2d", "ConvBn3d", "ConvBnReLU1d", "ConvBnReLU2d", "ConvBnReLU3d",
           "ConvReLU1d", "ConvReLU2d", "ConvReLU3d", "LinearReLU", "freeze_bn_stats",
           "update_bn_stats"]

_BN = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}
_CONV = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}


class _ConvBnNd(BnStatsMixin):
    """Conv + BatchNorm for QAT (mixed into ``nn.Conv{1,2,3}d``)."""

    _FLOAT_MODULE = None
    _FLOAT_RELU_MODULE = None
    _relu = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=None, padding_mode="zeros", eps=1e-05, momentum=0.1,
                 freeze_bn=False, qconfig=None, dim=2):
        _CONV[self._nd].__init__(self, in_channels, out_channels, kernel_size, stride=stride,
                                 padding=padding, dilation=dilation, groups=groups, bias=False,
                                 padding_mode=padding_mode)
        need_qconfig(type(self), qconfig)
        self.qconfig = qconfig
        self.freeze_bn = freeze_bn if self.training else True
        self.bn = _BN[self._nd](out_channels, eps, momentum, True, True)
        self.weight_fake_quant = self.qconfig.weight()
        if bias:
            self.bias = nn.Parameter(fiamma.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_bn_parameters()
        if self.training:
            self.freeze_bn_stats() if freeze_bn else self.update_bn_stats()
        else:
            self.freeze_bn_stats()

    def reset_bn_parameters(self):
        self.bn.reset_running_stats()
        nn.init.uniform_(self.bn.weight)
        nn.init.zeros_(self.bn.bias)
        if self.bias is not None:
            fan_in, _ = nn.init._fans(self.weight)
            bound = 1 / fan_in ** 0.5
            nn.init.uniform_(self.bias, -bound, bound)

    def _forward(self, input):
        running_std = fiamma.sqrt(self.bn.running_var + self.bn.eps)
        scale_factor = self.bn.weight / running_std
        wshape = [1] * self.weight.dim()
        wshape[0] = -1
        bshape = [1] * self.weight.dim()
        bshape[1] = -1
        scaled_weight = self.weight_fake_quant(self.weight * scale_factor.reshape(wshape))
        zero_bias = fiamma.zeros(self.out_channels, dtype=scaled_weight.dtype)
        conv = self._conv_forward(input, scaled_weight, zero_bias)
        conv_orig = conv / scale_factor.reshape(bshape)
        if self.bias is not None:
            conv_orig = conv_orig + self.bias.reshape(bshape)
        return self.bn(conv_orig)

    def forward(self, input):
        out = self._forward(input)
        return F.relu(out) if self._relu else out

    def extra_repr(self):
        return _CONV[self._nd].extra_repr(self)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        qconfig = float_qconfig(cls, mod)
        conv, bn = mod[0], mod[1]
        q = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride,
                conv.padding, conv.dilation, conv.groups, conv.bias is not None,
                conv.padding_mode, bn.eps, bn.momentum, False, qconfig)
        q.weight = conv.weight
        q.bias = conv.bias
        share_bn(q.bn, bn)
        return q

    def to_float(self):
        """The float fused module (conv, batch norm[, ReLU]) with these parameters and
        statistics."""
        mods = [float_conv(self, _CONV[self._nd]), self.bn]
        if self._relu:
            mods.append(nn.ReLU())
        return self._FLOAT_MODULE(*mods)


def _convbn(name, nd, relu):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=None, padding_mode="zeros", eps=1e-05,
                 momentum=0.1, freeze_bn=False, qconfig=None):
        _ConvBnNd.__init__(self, in_channels, out_channels, kernel_size, stride, padding,
                           dilation, groups, bias, padding_mode, eps, momentum, freeze_bn,
                           qconfig, nd)
    float_name = name
    doc = (f"Conv{nd}d + BatchNorm{nd}d{' + ReLU' if relu else ''} for quantization-aware "
           "training (PyTorch's approximate batch-norm folding).")
    return type(name, (_ConvBnNd, _CONV[nd]), {
        "__init__": __init__, "__doc__": doc, "__module__": __name__, "_nd": nd,
        "_relu": relu, "_FLOAT_MODULE": getattr(nni, float_name)})


ConvBn1d = _convbn("ConvBn1d", 1, False)
ConvBn2d = _convbn("ConvBn2d", 2, False)
ConvBn3d = _convbn("ConvBn3d", 3, False)
ConvBnReLU1d = _convbn("ConvBnReLU1d", 1, True)
ConvBnReLU2d = _convbn("ConvBnReLU2d", 2, True)
ConvBnReLU3d = _convbn("ConvBnReLU3d", 3, True)


class ConvReLU1d(nnqat.Conv1d):
    """QAT Conv1d followed by ReLU (from ``nn.intrinsic.ConvReLU1d``). As in PyTorch, the
    default ``prepare_qat`` mapping leaves a fused Conv1d + ReLU float (it is quantized at
    ``convert``); this module is for a custom mapping or direct use."""

    _FLOAT_MODULE = nni.ConvReLU1d
    _FLOAT_RELU_MODULE = nn.ReLU

    def forward(self, input):
        return F.relu(super().forward(input))


class ConvReLU2d(nnqat.Conv2d):
    """QAT Conv2d followed by ReLU (from ``nn.intrinsic.ConvReLU2d``)."""

    _FLOAT_MODULE = nni.ConvReLU2d
    _FLOAT_RELU_MODULE = nn.ReLU

    def forward(self, input):
        return F.relu(super().forward(input))


class ConvReLU3d(nnqat.Conv3d):
    """QAT Conv3d followed by ReLU (from ``nn.intrinsic.ConvReLU3d``)."""

    _FLOAT_MODULE = nni.ConvReLU3d
    _FLOAT_RELU_MODULE = nn.ReLU

    def forward(self, input):
        return F.relu(super().forward(input))


class LinearReLU(nnqat.Linear):
    """QAT Linear followed by ReLU (from ``nn.intrinsic.LinearReLU``)."""

    _FLOAT_MODULE = nni.LinearReLU

    def forward(self, input):
        return F.relu(super().forward(input))

    def to_float(self):
        return nni.LinearReLU(super().to_float(), nn.ReLU())


def freeze_bn_stats(mod):
    """``model.apply(freeze_bn_stats)``: freeze the batch-norm statistics of the QAT conv-bn
    modules."""
    if isinstance(mod, _ConvBnNd):
        mod.freeze_bn_stats()


def update_bn_stats(mod):
    """``model.apply(update_bn_stats)``: let the QAT conv-bn modules' batch norms update their
    statistics again."""
    if isinstance(mod, _ConvBnNd):
        mod.update_bn_stats()
