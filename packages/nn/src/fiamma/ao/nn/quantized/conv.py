"""Int8 1-d and 3-d convolutions (``torch.ao.nn.quantized.Conv1d`` / ``Conv3d``): the
:class:`~fiamma.ao.nn.quantized.Conv2d` module and arithmetic (exact integer sums, fbgemm's
float requantization) over ``(N, C, L)`` and ``(N, C, D, H, W)`` inputs. State-dict keys are
PyTorch's: ``weight`` (qint8), ``bias``, ``scale``, ``zero_point``.

    >>> import fiamma
    >>> import fiamma.ao.nn.quantized as nnq
    >>> m = nnq.Conv1d(2, 3, 3)
    >>> x = fiamma.quantize_per_tensor(fiamma.randn(1, 2, 8), 0.05, 128, fiamma.quint8)
    >>> m(x).shape
    fiamma.Size([1, 3, 6])
"""
from fiamma import nn
from fiamma.ao.nn.quantized.modules import _ConvNd

__all__ = ["Conv1d", "Conv3d"]


class Conv1d(_ConvNd):
    """Int8 1-d convolution: quint8 ``(N, C, L)`` in, qint8 weight (per channel or per
    tensor), float bias, quint8 out with ``scale``/``zero_point``."""

    _FLOAT_MODULE = nn.Conv1d
    _nd = 1


class Conv3d(_ConvNd):
    """Int8 3-d convolution: quint8 ``(N, C, D, H, W)`` in, qint8 weight, float bias, quint8
    out with ``scale``/``zero_point``."""

    _FLOAT_MODULE = nn.Conv3d
    _nd = 3
