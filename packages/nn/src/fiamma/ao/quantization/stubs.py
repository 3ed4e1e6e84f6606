"""Quantize/dequantize markers (``torch.ao.quantization.stubs``): identities in float.

    >>> import fiamma
    >>> from fiamma.ao.quantization import QuantStub
    >>> x = fiamma.ones(2)
    >>> QuantStub()(x) is x
    True
"""
from fiamma import nn

__all__ = ["QuantStub", "DeQuantStub", "QuantWrapper"]


class QuantStub(nn.Module):
    """Marks where a quantized model converts float input to int8; the identity in float.
    ``qconfig`` (any object; stored as ``self.qconfig`` when given) is kept for code that sets
    it, though fiamma has no quantized conversion to use it."""

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x):
        return x


class DeQuantStub(nn.Module):
    """Marks where a quantized model converts back to float; the identity in float."""

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x):
        return x


class QuantWrapper(nn.Module):
    """``module`` between a :class:`QuantStub` (``quant``) and a :class:`DeQuantStub`
    (``dequant``); the module's ``qconfig``, if any, is passed to both."""

    def __init__(self, module):
        super().__init__()
        qconfig = getattr(module, "qconfig", None)
        self.add_module("quant", QuantStub(qconfig))
        self.add_module("dequant", DeQuantStub(qconfig))
        self.add_module("module", module)
        self.train(module.training)

    def forward(self, x):
        return self.dequant(self.module(self.quant(x)))
