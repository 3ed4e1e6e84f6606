"""Pixel and channel shuffles (``torch.nn.PixelShuffle``, ``PixelUnshuffle``,
``ChannelShuffle``)."""

from fiamma.nn import functional as F
from fiamma.nn.modules.module import Module

__all__ = ["PixelShuffle", "PixelUnshuffle", "ChannelShuffle"]


class PixelShuffle(Module):
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r) with r = ``upscale_factor``.

    >>> import fiamma
    >>> from fiamma import nn
    >>> nn.PixelShuffle(2)(fiamma.ones(1, 8, 3, 3)).shape
    fiamma.Size([1, 2, 6, 6])
    """

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W) with r = ``downscale_factor``."""

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """Split the channels into ``groups`` groups and interleave them (ShuffleNet)."""

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"
