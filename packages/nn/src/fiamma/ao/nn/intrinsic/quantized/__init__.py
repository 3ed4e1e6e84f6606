"""``fiamma.ao.nn.intrinsic.quantized`` (``torch.ao.nn.intrinsic.quantized``): int8 modules of
the fused sequences, a ReLU clamping the requantized output at the zero point.

    >>> import fiamma.ao.nn.intrinsic.quantized as nniq
    >>> nniq.ConvReLU2d(3, 8, 3).weight().dtype
    fiamma.qint8
"""
from fiamma.ao.nn import intrinsic as nni
from fiamma.ao.nn.quantized import conv as nnq_conv, modules as nnq

__all__ = ["ConvReLU1d", "ConvReLU2d", "ConvReLU3d", "LinearReLU"]


class ConvReLU1d(nnq_conv.Conv1d):
    """Int8 Conv1d + ReLU (``nn.intrinsic.ConvReLU1d`` after convert)."""

    _FLOAT_MODULE = nni.ConvReLU1d
    _relu = True


class ConvReLU2d(nnq.Conv2d):
    """Int8 Conv2d + ReLU (``nn.intrinsic.ConvReLU2d`` after convert)."""

    _FLOAT_MODULE = nni.ConvReLU2d
    _relu = True


class ConvReLU3d(nnq_conv.Conv3d):
    """Int8 Conv3d + ReLU (``nn.intrinsic.ConvReLU3d`` after convert)."""

    _FLOAT_MODULE = nni.ConvReLU3d
    _relu = True


class LinearReLU(nnq.Linear):
    """Int8 Linear + ReLU (``nn.intrinsic.LinearReLU`` after convert)."""

    _FLOAT_MODULE = nni.LinearReLU
    _relu = True


from fiamma.ao.nn.intrinsic.quantized import dynamic  # noqa: E402,F401
