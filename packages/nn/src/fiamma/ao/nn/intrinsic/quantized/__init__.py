"""``fiamma.ao.nn.intrinsic.quantized`` (``torch.ao.nn.intrinsic.quantized``): int8 modules of
the fused sequences, a ReLU clamping the requantized output at the zero point.

    >>> import fiamma.ao.nn.intrinsic.quantized as nniq
    >>> nniq.ConvReLU2d(3, 8, 3).weight().dtype
    fiamma.qint8
"""
from fiamma.ao.nn import intrinsic as nni
from fiamma.ao.nn.quantized import modules as nnq

__all__ = ["ConvReLU2d", "LinearReLU"]


class ConvReLU2d(nnq.Conv2d):
    """Int8 Conv2d + ReLU (``nn.intrinsic.ConvReLU2d`` after convert)."""

    _FLOAT_MODULE = nni.ConvReLU2d
    _relu = True


class LinearReLU(nnq.Linear):
    """Int8 Linear + ReLU (``nn.intrinsic.LinearReLU`` after convert)."""

    _FLOAT_MODULE = nni.LinearReLU
    _relu = True
