"""Pooling functions with ``torch.nn.functional``'s names and signatures; the kernels (and their
derivatives) are core ops (``fiamma.max_pool2d``, ``fiamma.avg_pool2d``, ...).

>>> import fiamma
>>> from fiamma.nn import functional as F
>>> F.max_pool2d(fiamma.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
[[[[5.0, 7.0], [13.0, 15.0]]]]
"""

import fiamma
from fiamma.nn._qtensor import QTensor as _QT

__all__ = [
    "max_pool1d", "max_pool2d", "max_pool3d",
    "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
    "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
    "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "max_unpool1d", "max_unpool2d", "max_unpool3d",
    "lp_pool1d", "lp_pool2d", "lp_pool3d",
]


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-d max pool over a (C, L) or (N, C, L) input; see ``fiamma.max_pool1d``."""
    return fiamma.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode,
                             return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-d max pool over a (C, H, W) or (N, C, H, W) input (``stride`` defaults to
    ``kernel_size``); with ``return_indices`` also the flat per-plane indices of the maxima.

    >>> import fiamma
    >>> from fiamma.nn import functional as F
    >>> F.max_pool2d(fiamma.ones(1, 1, 4, 4), 3, stride=2, padding=1).shape
    fiamma.Size([1, 1, 2, 2])
    """
    if type(input) is _QT:  # int8: fiamma.ao's kernel
        from fiamma.ao.nn.quantized import functional as qF
        return qF.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode,
                             return_indices)
    return fiamma.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode,
                             return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """3-d max pool over a (C, D, H, W) or (N, C, D, H, W) input."""
    return fiamma.max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode,
                             return_indices)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """``(values, indices)`` of a 1-d max pool."""
    return fiamma.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """``(values, indices)`` of a 2-d max pool."""
    return fiamma.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """``(values, indices)`` of a 3-d max pool."""
    return fiamma.max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """1-d average pool; see ``fiamma.avg_pool1d``."""
    return fiamma.avg_pool1d(input, kernel_size, stride, padding, ceil_mode, count_include_pad)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-d average pool (zero padding counted unless ``count_include_pad=False``; a fixed
    divisor with ``divisor_override``)."""
    if type(input) is _QT:
        from fiamma.ao.nn.quantized import functional as qF
        return qF.avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                             divisor_override)
    return fiamma.avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                             divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """3-d average pool."""
    return fiamma.avg_pool3d(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                             divisor_override)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Adaptive 1-d max pool to ``output_size`` positions."""
    return fiamma.adaptive_max_pool1d(input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Adaptive 2-d max pool to ``output_size`` (int or pair; None keeps that size)."""
    return fiamma.adaptive_max_pool2d(input, output_size, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Adaptive 3-d max pool."""
    return fiamma.adaptive_max_pool3d(input, output_size, return_indices)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return fiamma.adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    return fiamma.adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    return fiamma.adaptive_max_pool3d(input, output_size, True)


def adaptive_avg_pool1d(input, output_size):
    """Adaptive 1-d average pool to ``output_size`` positions."""
    return fiamma.adaptive_avg_pool1d(input, output_size)


def adaptive_avg_pool2d(input, output_size):
    """Adaptive 2-d average pool (``output_size`` int or pair; None keeps that size).

    >>> import fiamma
    >>> from fiamma.nn import functional as F
    >>> F.adaptive_avg_pool2d(fiamma.ones(2, 8, 7, 7), 1).shape
    fiamma.Size([2, 8, 1, 1])
    """
    if type(input) is _QT:
        from fiamma.ao.nn.quantized import functional as qF
        return qF.adaptive_avg_pool2d(input, output_size)
    return fiamma.adaptive_avg_pool2d(input, output_size)


def adaptive_avg_pool3d(input, output_size):
    """Adaptive 3-d average pool."""
    return fiamma.adaptive_avg_pool3d(input, output_size)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Partial inverse of ``max_pool1d``: zeros except the values at their indices."""
    return fiamma.max_unpool1d(input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Partial inverse of ``max_pool2d`` (``output_size`` resolves the ambiguous sizes)."""
    return fiamma.max_unpool2d(input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Partial inverse of ``max_pool3d``."""
    return fiamma.max_unpool3d(input, indices, kernel_size, stride, padding, output_size)


_INF = (float("inf"), -float("inf"))


def _lp_inf(max_pool, input, norm_type, kernel_size, stride, ceil_mode):
    """PyTorch's p = +-inf limits of lp_pool: the largest (smallest) |x| of each window."""
    if norm_type > 0:
        return max_pool(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    return -max_pool(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``(sum over each window of x**p) ** (1/p)`` over the last dim."""
    if isinstance(norm_type, float) and norm_type in _INF:  # p = +-inf: max / min of |x|
        return _lp_inf(max_pool1d, input, norm_type, kernel_size, stride, ceil_mode)
    return fiamma.lp_pool1d(input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """2-d power-average pool: ``(sum over each window of x**p) ** (1/p)``."""
    if isinstance(norm_type, float) and norm_type in _INF:  # p = +-inf: max / min of |x|
        return _lp_inf(max_pool2d, input, norm_type, kernel_size, stride, ceil_mode)
    return fiamma.lp_pool2d(input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """3-d power-average pool."""
    if isinstance(norm_type, float) and norm_type in _INF:  # p = +-inf: max / min of |x|
        return _lp_inf(max_pool3d, input, norm_type, kernel_size, stride, ceil_mode)
    return fiamma.lp_pool3d(input, norm_type, kernel_size, stride, ceil_mode)
