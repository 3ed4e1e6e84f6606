"""Convolutions and sliding-block ops of ``fiamma.nn.functional``: conv1d/2d/3d,
conv_transpose1d/2d/3d (core's C kernels, see ``fiamma.conv2d``), unfold and fold (core's
``im2col``/``col2im``)."""

import fiamma

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "unfold", "fold"]


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution over (N, C_in, L) or (C_in, L); see ``fiamma.conv1d``."""
    return fiamma.conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution over (N, C_in, H, W) or (C_in, H, W); ``padding`` may be an int, a
    pair, ``'valid'`` or ``'same'``.

    >>> import fiamma
    >>> from fiamma.nn import functional as F
    >>> F.conv2d(fiamma.ones(1, 1, 3, 3), fiamma.ones(1, 1, 2, 2), padding="same").shape
    fiamma.Size([1, 1, 3, 3])
    """
    return fiamma.conv2d(input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution over (N, C_in, D, H, W) or unbatched; see ``fiamma.conv3d``."""
    return fiamma.conv3d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-D transposed convolution; ``weight`` is (C_in, C_out / groups, k)."""
    return fiamma.conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups,
                                   dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """2-D transposed convolution; ``weight`` is (C_in, C_out / groups, kH, kW)."""
    return fiamma.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups,
                                   dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """3-D transposed convolution; ``weight`` is (C_in, C_out / groups, kD, kH, kW)."""
    return fiamma.conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups,
                                   dilation)


def _pair(v, name):
    if isinstance(v, (list, tuple)):
        if len(v) != 2:
            raise ValueError(f"expected {name} to be an int or a pair, got {list(v)}")
        return tuple(v)
    return (v, v)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Sliding local blocks of a (N, C, H, W) or (C, H, W) input as columns: (N, C * kH * kW,
    L), L the number of block positions.

    >>> import fiamma
    >>> from fiamma.nn import functional as F
    >>> F.unfold(fiamma.ones(1, 2, 3, 3), 2).shape
    fiamma.Size([1, 8, 4])
    """
    if input.dim() not in (3, 4):
        raise NotImplementedError(f"unfold: Input Error: Only 3D or 4D input Tensors are "
                                  f"supported (got {input.dim()}D)")
    unbatched = input.dim() == 3
    x = input.unsqueeze(0) if unbatched else input
    out = fiamma.im2col(x, _pair(kernel_size, "kernel_size"), _pair(dilation, "dilation"),
                        _pair(padding, "padding"), _pair(stride, "stride"))
    return out.squeeze(0) if unbatched else out


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Sum columns (N, C * kH * kW, L) or (C * kH * kW, L) back into an image of
    ``output_size`` (overlaps add up): the adjoint of ``unfold``."""
    if input.dim() not in (2, 3):
        raise NotImplementedError(f"fold: Input Error: Only unbatched (2D) or batched (3D) input "
                                  f"Tensors are supported (got {input.dim()}D)")
    unbatched = input.dim() == 2
    x = input.unsqueeze(0) if unbatched else input
    out = fiamma.col2im(x, _pair(output_size, "output_size"), _pair(kernel_size, "kernel_size"),
                        _pair(dilation, "dilation"), _pair(padding, "padding"),
                        _pair(stride, "stride"))
    return out.squeeze(0) if unbatched else out
