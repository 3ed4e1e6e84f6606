"""``fiamma.ao.nn.intrinsic.qat`` (``torch.ao.nn.intrinsic.qat``, also
``fiamma.nn.intrinsic.qat``): the fused quantization-aware-training modules (see
:mod:`fiamma.ao.nn.intrinsic.qat.modules`).

    >>> import fiamma.ao.nn.intrinsic.qat as nniqat
    >>> import fiamma.ao.quantization as tq
    >>> nniqat.ConvBn2d(3, 8, 3, qconfig=tq.default_qat_qconfig).bn
    BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
"""
from fiamma.ao.nn.intrinsic.qat import linear_fused, modules  # noqa: F401
from fiamma.ao.nn.intrinsic.qat.linear_fused import LinearBn1d
from fiamma.ao.nn.intrinsic.qat.modules import (
    ConvBn1d,
    ConvBn2d,
    ConvBn3d,
    ConvBnReLU1d,
    ConvBnReLU2d,
    ConvBnReLU3d,
    ConvReLU1d,
    ConvReLU2d,
    ConvReLU3d,
    LinearReLU,
    freeze_bn_stats,
    update_bn_stats,
)

__all__ = ["ConvBn1d", "ConvBn2d", "ConvBn3d", "ConvBnReLU1d", "ConvBnReLU2d", "ConvBnReLU3d",
           "ConvReLU1d", "ConvReLU2d", "ConvReLU3d", "LinearReLU", "LinearBn1d",
           "freeze_bn_stats", "update_bn_stats", "modules", "linear_fused"]


def __getattr__(name):
    from fiamma.ao._absent import absent
    absent(__name__, name, __all__)
