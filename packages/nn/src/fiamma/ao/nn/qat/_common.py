"""What the quantization-aware-training modules share (``fiamma.ao.nn.qat`` and
``fiamma.ao.nn.intrinsic.qat``): the qconfig check and the weight fake-quantizer a QAT module
gets at construction, ``from_float``'s checks of the float module, ``to_float``'s copy of the
parameters, and the batch-norm plumbing of the fused ``*Bn*`` modules. A new QAT module
(``Embedding``, ``LinearBn1d``, ...) uses these instead of writing them again.

    >>> from fiamma import nn
    >>> import fiamma.ao.quantization as tq
    >>> from fiamma.ao.nn.qat import _common
    >>> lin = nn.Linear(4, 2)
    >>> _common.init_weight_fake_quant(lin, tq.default_qat_qconfig)
    >>> type(lin.weight_fake_quant).__name__
    'FakeQuantize'
"""
from fiamma import nn
from fiamma.nn.utils.parametrize import type_before_parametrizations


def need_qconfig(cls, qconfig):
    """Raise PyTorch's error for a QAT module ``cls`` built without a qconfig."""
    if qconfig is None:
        raise AssertionError(f"{cls.__name__}: qconfig must be provided for QAT module")


def init_weight_fake_quant(mod, qconfig):
    """Check ``qconfig`` and give the QAT module ``mod`` it (``mod.qconfig``) and its weight
    fake-quantizer (``mod.weight_fake_quant = qconfig.weight()``)."""
    need_qconfig(type(mod), qconfig)
    mod.qconfig = qconfig
    mod.weight_fake_quant = qconfig.weight()


def float_qconfig(cls, mod, accepts=None):
    """``cls.from_float``'s checks: ``mod`` is a ``cls._FLOAT_MODULE`` (looking through
    parametrizations; or ``accepts(mod, its_type)`` is true) with a qconfig. Returns
    ``mod.qconfig``."""
    t = type_before_parametrizations(mod)
    if t is not cls._FLOAT_MODULE and not (accepts is not None and accepts(mod, t)):
        raise AssertionError(f"qat.{cls.__name__}.from_float only works for "
                             f"{cls._FLOAT_MODULE.__name__}, got {t.__name__}")
    qconfig = getattr(mod, "qconfig", None)
    if qconfig is None:
        raise AssertionError("Input float module must have qconfig defined")
    return qconfig


def copy_params_detached(dst, src):
    """``to_float``: ``dst`` gets ``src``'s weight (and bias, when ``src`` has one) as new
    Parameters detached from ``src``'s; returns ``dst``."""
    dst.weight = nn.Parameter(src.weight.detach())
    if src.bias is not None:
        dst.bias = nn.Parameter(src.bias.detach())
    return dst


def float_conv(mod, conv_cls):
    """``to_float``'s float convolution: a ``conv_cls`` with the geometry of the QAT conv
    ``mod`` and its parameters (detached)."""
    conv = conv_cls(mod.in_channels, mod.out_channels, mod.kernel_size, mod.stride,
                    mod.padding, mod.dilation, mod.groups, mod.bias is not None,
                    mod.padding_mode)
    return copy_params_detached(conv, mod)


def share_bn(dst, bn):
    """``from_float`` of a fused ``*Bn*`` module: its batch norm ``dst`` shares ``bn``'s
    affine parameters and running statistics."""
    dst.weight = bn.weight
    dst.bias = bn.bias
    dst.running_mean = bn.running_mean
    dst.running_var = bn.running_var
    dst.num_batches_tracked = bn.num_batches_tracked


class BnStatsMixin:
    """The batch-norm switches of a fused QAT ``*Bn*`` module holding its batch norm as
    ``self.bn`` (mixed in before the float layer): ``freeze_bn_stats`` / ``update_bn_stats``
    and a ``train`` that keeps a frozen batch norm in eval mode."""

    def reset_running_stats(self):
        self.bn.reset_running_stats()

    def update_bn_stats(self):
        """The batch norm normalises with batch statistics and updates its running ones in
        training mode again."""
        self.freeze_bn = False
        self.bn.training = True
        return self

    def freeze_bn_stats(self):
        """The batch norm uses (and stops updating) its running statistics, also in training
        mode."""
        self.freeze_bn = True
        self.bn.training = False
        return self

    def train(self, mode=True):
        """As ``Module.train`` but a frozen batch norm stays in eval mode."""
        self.training = mode
        if not self.freeze_bn:
            for module in self.children():
                module.train(mode)
        return self
