"""``fiamma.ao.quantization`` (``torch.ao.quantization``, also ``fiamma.quantization``):
PyTorch's eager-mode post-training quantization, on real int8 tensors.

Stubs and fusion (:class:`QuantStub`, :class:`DeQuantStub`, :class:`QuantWrapper`,
:func:`fuse_modules`), observers (:class:`MinMaxObserver`, :class:`HistogramObserver`, ...),
:class:`QConfig` and the engines' defaults (:func:`get_default_qconfig`), and the workflow
(:func:`prepare`, :func:`convert`, :func:`quantize`), and dynamic quantization
(:func:`quantize_dynamic` with ``default_dynamic_qconfig``, ``per_channel_dynamic_qconfig``,
``float16_dynamic_qconfig``). FX graph mode is not built and raises AttributeError by name.

    >>> from fiamma import nn
    >>> import fiamma.ao.quantization as tq
    >>> m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()).eval()
    >>> type(tq.fuse_modules(m, ["0", "1", "2"])[0]).__name__
    'ConvReLU2d'
"""
from fiamma.ao.quantization.fake_quantize import *  # noqa: F401,F403,E402
from fiamma.ao.quantization.fake_quantize import __all__ as _fq_all  # noqa: E402
from fiamma.ao.quantization.fuse_modules import fuse_known_modules, fuse_modules, fuse_modules_qat
from fiamma.ao.quantization.fuser_method_mappings import (
    fuse_conv_bn,
    fuse_conv_bn_relu,
    fuse_convtranspose_bn,
    fuse_linear_bn,
    get_fuser_method,
)
from fiamma.ao.quantization.observer import *  # noqa: F401,F403,E402
from fiamma.ao.quantization.observer import __all__ as _obs_all  # noqa: E402
from fiamma.ao.quantization.qconfig import *  # noqa: F401,F403,E402
from fiamma.ao.quantization.qconfig import __all__ as _qc_all  # noqa: E402
from fiamma.ao.quantization.quantize import *  # noqa: F401,F403,E402
from fiamma.ao.quantization.quantize import __all__ as _qz_all  # noqa: E402
from fiamma.ao.quantization.stubs import DeQuantStub, QuantStub, QuantWrapper

__all__ = ["QuantStub", "DeQuantStub", "QuantWrapper", "fuse_modules", "fuse_modules_qat",
           "fuse_known_modules", "fuse_conv_bn", "fuse_conv_bn_relu", "fuse_linear_bn",
           "fuse_convtranspose_bn", "get_fuser_method"] + _obs_all + _fq_all + _qc_all + _qz_all

_SUBMODULES = {"fuse_modules", "fuser_method_mappings", "stubs", "observer", "fake_quantize",
               "qconfig", "quantize"}


def __getattr__(name):
    from fiamma.ao._absent import absent
    absent(__name__, name, set(__all__) | _SUBMODULES)
