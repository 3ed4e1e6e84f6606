"""Linear + BatchNorm1d for quantization-aware training (``torch.ao.nn.intrinsic.qat.
LinearBn1d``).

As the QAT ``ConvBn*d``: the weight scaled by ``gamma / sqrt(running_var + eps)`` (the weight
the int8 model will have once the batch norm is folded) is fake-quantized, multiplied with a
zero bias, divided back by the same factor, the linear bias added, and the result goes through
``bn`` (batch statistics in training, running ones in eval or after ``freeze_bn_stats``).
``convert`` folds the batch norm into an int8 :class:`fiamma.ao.nn.quantized.Linear`.

    >>> import fiamma
    >>> from fiamma import nn
    >>> import fiamma.ao.nn.intrinsic as nni
    >>> import fiamma.ao.nn.intrinsic.qat as nniqat
    >>> import fiamma.ao.quantization as tq
    >>> f = nni.LinearBn1d(nn.Linear(4, 3), nn.BatchNorm1d(3))
    >>> f.qconfig = tq.get_default_qat_qconfig("qnnpack")
    >>> m = nniqat.LinearBn1d.from_float(f)
    >>> m(fiamma.randn(5, 4)).shape
    fiamma.Size([5, 3])
"""
import fiamma
from fiamma import nn
from fiamma.ao.nn import intrinsic as nni
from fiamma.ao.nn.qat._common import BnStatsMixin, share_bn
from fiamma.nn import functional as F
from fiamma.nn.utils.parametrize import type_before_parametrizations

__all__ = ["LinearBn1d"]


class LinearBn1d(BnStatsMixin, nn.Linear):
    """Linear + BatchNorm1d with a fake-quantized, batch-norm-scaled weight (QAT); the
    batch-norm switches (``freeze_bn_stats``, ``update_bn_stats``, ``train``) are
    :class:`~fiamma.ao.nn.qat._common.BnStatsMixin`'s."""

    _FLOAT_MODULE = nni.LinearBn1d

    def __init__(self, in_features, out_features, bias=True, eps=1e-05, momentum=0.1,
                 freeze_bn=False, qconfig=None):
        nn.Linear.__init__(self, in_features, out_features, bias)
        if not qconfig:
            raise AssertionError("LinearBn1d: qconfig must be provided for QAT module")
        self.qconfig = qconfig
        self.freeze_bn = freeze_bn if self.training else True
        self.bn = nn.BatchNorm1d(out_features, eps, momentum, True, True)
        self.weight_fake_quant = self.qconfig.weight()
        if bias:
            self.bias = nn.Parameter(fiamma.empty(out_features))
        else:
            self.register_parameter("bias", None)
        self.reset_bn_parameters()
        if self.training and not freeze_bn:
            self.update_bn_stats()
        else:
            self.freeze_bn_stats()

    def reset_bn_parameters(self):
        """Running statistics reset, ``bn.weight`` uniform in [0, 1), ``bn.bias`` zero and the
        linear bias uniform in +-1/sqrt(in_features) (PyTorch's ``LinearBn1d`` leaves its new
        bias uninitialised; ``from_float`` replaces it either way)."""
        self.bn.reset_running_stats()
        nn.init.uniform_(self.bn.weight)
        nn.init.zeros_(self.bn.bias)
        if self.bias is not None:  # fiamma.empty is not guaranteed finite
            bound = 1 / self.in_features ** 0.5 if self.in_features else 0
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        running_std = fiamma.sqrt(self.bn.running_var + self.bn.eps)
        scale_factor = self.bn.weight / running_std
        scaled_weight = self.weight_fake_quant(self.weight * scale_factor.reshape(-1, 1))
        zero_bias = fiamma.zeros(self.out_features, dtype=scaled_weight.dtype)
        out = F.linear(input, scaled_weight, zero_bias) / scale_factor.reshape(1, -1)
        if self.bias is not None:
            out = out + self.bias.reshape(1, -1)
        return self.bn(out)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The QAT module of an ``nn.intrinsic.LinearBn1d`` (sharing its parameters and
        batch-norm buffers)."""
        if type_before_parametrizations(mod) is not nni.LinearBn1d:
            raise AssertionError(f"qat.{cls.__name__}.from_float only works for "
                                 f"LinearBn1d, got {type(mod).__name__}")
        if not getattr(mod, "qconfig", None):
            raise AssertionError("Input float module must have a valid qconfig")
        linear, bn = mod[0], mod[1]
        q = cls(linear.in_features, linear.out_features, linear.bias is not None, bn.eps,
                bn.momentum, False, mod.qconfig)
        q.weight = linear.weight
        q.bias = linear.bias
        share_bn(q.bn, bn)
        return q

    def to_float(self):
        """A float ``nn.Linear`` with the batch norm's running statistics folded in (as
        PyTorch's)."""
        linear = nn.Linear(self.in_features, self.out_features)
        linear.weight, linear.bias = nn.utils.fuse_linear_bn_weights(
            self.weight, self.bias, self.bn.running_mean, self.bn.running_var, self.bn.eps,
            self.bn.weight, self.bn.bias)
        return linear
