"""``fiamma.ao.quantization`` (``torch.ao.quantization``, also ``fiamma.quantization``): the
float side of eager-mode quantization.

What exists: :class:`QuantStub`, :class:`DeQuantStub`, :class:`QuantWrapper` (identities in
float: they mark where a quantized model would convert), :func:`fuse_modules` and
:func:`fuse_modules_qat` with the fuser methods they use. What does not: observers,
``QConfig``, ``prepare``/``convert``/``quantize`` and everything producing int8 tensors;
fiamma has no quantized tensors or kernels, and asking for those names raises AttributeError
saying so.

    >>> from fiamma import nn
    >>> import fiamma.ao.quantization as tq
    >>> m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()).eval()
    >>> type(tq.fuse_modules(m, ["0", "1", "2"])[0]).__name__
    'ConvReLU2d'
"""
from fiamma.ao.quantization.fuse_modules import fuse_known_modules, fuse_modules, fuse_modules_qat
from fiamma.ao.quantization.fuser_method_mappings import (
    fuse_conv_bn,
    fuse_conv_bn_relu,
    fuse_convtranspose_bn,
    fuse_linear_bn,
    get_fuser_method,
)
from fiamma.ao.quantization.stubs import DeQuantStub, QuantStub, QuantWrapper

__all__ = ["QuantStub", "DeQuantStub", "QuantWrapper", "fuse_modules", "fuse_modules_qat",
           "fuse_known_modules", "fuse_conv_bn", "fuse_conv_bn_relu", "fuse_linear_bn",
           "fuse_convtranspose_bn", "get_fuser_method"]

_SUBMODULES = {"fuse_modules", "fuser_method_mappings", "stubs"}


def __getattr__(name):
    from fiamma.ao._absent import absent
    absent(__name__, name, set(__all__) | _SUBMODULES)
