"""DropBlock (Ghiasi et al., 2018) with torchvision.ops' names and rules: contiguous
``block_size`` squares (cubes) of each feature map are zeroed in training, and the rest is
rescaled so the expected sum is kept.

    >>> import fiamma
    >>> from fiamma.vision.ops import DropBlock2d
    >>> DropBlock2d(0.0, 3)(fiamma.ones(1, 1, 4, 4)).sum().item()
    16.0
"""
import fiamma
import fiamma.nn.functional as F
from fiamma import nn

__all__ = ["drop_block2d", "drop_block3d", "DropBlock2d", "DropBlock3d"]


def _drop_block(op, input, p, block_size, inplace, eps, training, nsp):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"{op}: drop probability has to be between 0 and 1, but got {p}")
    if input.ndim != nsp + 2:
        raise ValueError(f"{op}: input should be {nsp + 2}-dimensional, got {input.ndim}-d "
                         f"shape {tuple(input.shape)}")
    if not training or p == 0.0:
        return input
    n, c, *sizes = input.shape
    block_size = min(block_size, *sizes)
    if block_size % 2 == 0:
        raise ValueError(f"{op}: block size should be odd, got {block_size}")
    # the seed rate that drops a fraction p of the map once the seeds grow into blocks
    valid = 1
    for s in sizes:
        valid *= s - block_size + 1
    total = 1
    for s in sizes:
        total *= s
    gamma = (p * total) / ((block_size ** nsp) * valid)
    seeds = (fiamma.rand(n, c, *[s - block_size + 1 for s in sizes]) < gamma).to(input.dtype)
    pad = block_size // 2
    seeds = F.pad(seeds, [pad] * (2 * nsp), value=0.0)
    pool = F.max_pool2d if nsp == 2 else F.max_pool3d
    mask = 1 - pool(seeds, kernel_size=block_size, stride=1, padding=pad)
    scale = mask.numel() / (eps + float(mask.sum()))
    if inplace:
        return input.mul_(mask).mul_(scale)
    return input * mask * scale


def drop_block2d(input, p, block_size, inplace=False, eps=1e-06, training=True):
    """DropBlock on (N, C, H, W): drop ``block_size`` x ``block_size`` squares so that about
    a fraction ``p`` of each map is zeroed, then rescale by numel / (kept + eps)."""
    return _drop_block("drop_block2d", input, p, block_size, inplace, eps, training, 2)


def drop_block3d(input, p, block_size, inplace=False, eps=1e-06, training=True):
    """DropBlock on (N, C, D, H, W) with cubic blocks."""
    return _drop_block("drop_block3d", input, p, block_size, inplace, eps, training, 3)


class DropBlock2d(nn.Module):
    """:func:`drop_block2d` as a module (active in training mode only)."""

    def __init__(self, p, block_size, inplace=False, eps=1e-06):
        super().__init__()
        self.p, self.block_size, self.inplace, self.eps = p, block_size, inplace, eps

    def forward(self, input):
        return drop_block2d(input, self.p, self.block_size, self.inplace, self.eps,
                            self.training)

    def __repr__(self):
        return (f"{self.__class__.__name__}(p={self.p}, block_size={self.block_size}, "
                f"inplace={self.inplace})")


class DropBlock3d(DropBlock2d):
    """:func:`drop_block3d` as a module (active in training mode only)."""

    def forward(self, input):
        return drop_block3d(input, self.p, self.block_size, self.inplace, self.eps,
                            self.training)
