"""``fiamma.ao`` (PyTorch's ``torch.ao``): eager-mode int8 quantization.

``fiamma.ao.quantization`` has the workflow (observers, qconfigs, ``prepare``/``convert``),
``fiamma.ao.nn`` the fused float modules and the int8 modules. The quantized tensor type and
dtypes live here too and are what ``fiamma.quint8``, ``fiamma.quantize_per_tensor``, ... are.

    >>> import fiamma.ao.quantization as tq
    >>> tq.QuantStub()
    QuantStub()
"""
from fiamma.ao import nn, quantization  # noqa: E402,F401
from fiamma.nn._qtensor import (  # noqa: F401
    QTensor,
    dequantize,
    per_channel_affine,
    per_channel_affine_float_qparams,
    per_channel_symmetric,
    per_tensor_affine,
    per_tensor_symmetric,
    qint8,
    qint32,
    quantize_per_channel,
    quantize_per_tensor,
    quantize_per_tensor_dynamic,
    quint4x2,
    quint8,
)

__all__ = ["nn", "quantization", "QTensor", "quint8", "qint8", "qint32", "quint4x2",
           "per_tensor_affine",
           "per_channel_affine", "per_tensor_symmetric", "per_channel_symmetric",
           "per_channel_affine_float_qparams", "quantize_per_tensor", "quantize_per_channel",
           "quantize_per_tensor_dynamic", "dequantize"]
