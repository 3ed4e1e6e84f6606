"""``torch.nn.modules.channelshuffle``: PyTorch's module path of :class:`ChannelShuffle`
(defined in ``fiamma.nn.modules.pixelshuffle``)."""

from fiamma.nn.modules.pixelshuffle import ChannelShuffle

__all__ = ["ChannelShuffle"]
