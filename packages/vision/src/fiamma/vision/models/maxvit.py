"""MaxViT (torchvision.models.maxvit): Tu et al., "MaxViT: Multi-Axis Vision Transformer".
Each layer is an MBConv block followed by attention inside local windows and attention over a
sparse, image-wide grid. Same classes, module names (torchvision checkpoints load by key),
initialisation and weights enum as torchvision.

A MaxViT is built for one input size (``input_size``, 224x224 for ``maxvit_t``): every stage's
feature map must split into whole ``partition_size`` windows.

    >>> import fiamma
    >>> from fiamma.vision.models import MaxVit
    >>> m = MaxVit(input_size=(32, 32), stem_channels=8, partition_size=2,
    ...            block_channels=[16, 32], block_layers=[1, 1], head_dim=8,
    ...            stochastic_depth_prob=0.0, num_classes=3).eval()
    >>> tuple(m(fiamma.zeros(1, 3, 32, 32)).shape)
    (1, 3)
"""
import functools
from collections import OrderedDict

import fiamma
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.models._weights_util import build, classification_preset
from fiamma.vision.ops import Conv2dNormActivation, SqueezeExcitation, StochasticDepth
from fiamma.vision.transforms.functional import InterpolationMode

__all__ = ["MaxVit", "MaxVit_T_Weights", "maxvit_t"]


def _conv_out(size, kernel_size, stride, padding):
    return tuple((s - kernel_size + 2 * padding) // stride + 1 for s in size)


def _block_input_shapes(input_size, n_blocks):
    # the stem and every block halve the size with a 3x3, stride 2, padding 1 convolution
    shape = _conv_out(input_size, 3, 2, 1)
    shapes = []
    for _ in range(n_blocks):
        shape = _conv_out(shape, 3, 2, 1)
        shapes.append(shape)
    return shapes


def _relative_position_index(height, width):
    """``[i, j]``: the row of the bias table for the offset from token j to token i of an
    ``height x width`` window (offsets shifted to be non-negative, row-major)."""
    ys, xs = fiamma.meshgrid(fiamma.arange(height), fiamma.arange(width), indexing="ij")
    ys, xs = ys.flatten(), xs.flatten()
    dy = ys[:, None] - ys[None, :] + (height - 1)
    dx = xs[:, None] - xs[None, :] + (width - 1)
    return dy * (2 * width - 1) + dx


class MBConv(nn.Module):
    """Pre-norm inverted bottleneck: norm, 1x1 expand, 3x3 depthwise (strided), squeeze-excite,
    1x1 project, added to the input (average-pooled and 1x1-projected when the stride or the
    width changes)."""

    def __init__(self, in_channels, out_channels, expansion_ratio, squeeze_ratio, stride,
                 activation_layer, norm_layer, p_stochastic_dropout=0.0):
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"MBConv: stride must be 1 or 2, got {stride}")
        if stride != 1 or in_channels != out_channels:
            proj = [nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=1, bias=True)]
            if stride == 2:
                proj.insert(0, nn.AvgPool2d(kernel_size=3, stride=stride, padding=1))
            self.proj = nn.Sequential(*proj)
        else:
            self.proj = nn.Identity()
        mid = int(out_channels * expansion_ratio)
        sqz = int(out_channels * squeeze_ratio)
        self.stochastic_depth = (StochasticDepth(p_stochastic_dropout, mode="row")
                                 if p_stochastic_dropout else nn.Identity())
        self.layers = nn.Sequential(OrderedDict([
            ("pre_norm", norm_layer(in_channels)),
            ("conv_a", Conv2dNormActivation(in_channels, mid, kernel_size=1, stride=1, padding=0,
                                            activation_layer=activation_layer,
                                            norm_layer=norm_layer, inplace=None)),
            ("conv_b", Conv2dNormActivation(mid, mid, kernel_size=3, stride=stride, padding=1,
                                            activation_layer=activation_layer,
                                            norm_layer=norm_layer, groups=mid, inplace=None)),
            ("squeeze_excitation", SqueezeExcitation(mid, sqz, activation=nn.SiLU)),
            ("conv_c", nn.Conv2d(mid, out_channels, kernel_size=1, bias=True)),
        ]))

    def forward(self, x):
        return self.proj(x) + self.stochastic_depth(self.layers(x))


class RelativePositionalMultiHeadAttention(nn.Module):
    """Multi-head self-attention over ``(B, G, P, D)`` token groups, with a learned bias per
    relative offset inside a ``sqrt(P) x sqrt(P)`` window. The keys are scaled by
    ``feat_dim ** -0.5`` (the full width, as torchvision does)."""

    def __init__(self, feat_dim, head_dim, max_seq_len):
        super().__init__()
        if feat_dim % head_dim != 0:
            raise ValueError(f"feat_dim: {feat_dim} must be divisible by head_dim: {head_dim}")
        self.n_heads = feat_dim // head_dim
        self.head_dim = head_dim
        self.size = int(max_seq_len ** 0.5)
        self.max_seq_len = max_seq_len
        self.to_qkv = nn.Linear(feat_dim, self.n_heads * self.head_dim * 3)
        self.scale_factor = feat_dim ** -0.5
        self.merge = nn.Linear(self.head_dim * self.n_heads, feat_dim)
        self.relative_position_bias_table = nn.Parameter(
            fiamma.empty(((2 * self.size - 1) * (2 * self.size - 1), self.n_heads)))
        self.register_buffer("relative_position_index",
                             _relative_position_index(self.size, self.size))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def get_relative_positional_bias(self):
        """The bias ``(1, heads, P, P)`` added to the attention logits."""
        idx = self.relative_position_index.reshape(-1)
        bias = self.relative_position_bias_table[idx]
        bias = bias.reshape(self.max_seq_len, self.max_seq_len, -1).permute(2, 0, 1)
        return bias.contiguous().unsqueeze(0)

    def forward(self, x):
        B, G, P, D = x.shape
        H, DH = self.n_heads, self.head_dim
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(B, G, P, H, DH).permute(0, 1, 3, 2, 4) for t in (q, k, v))
        logits = q @ (k * self.scale_factor).transpose(-1, -2)
        attn = fiamma.softmax(logits + self.get_relative_positional_bias(), dim=-1)
        out = (attn @ v).permute(0, 1, 3, 2, 4).reshape(B, G, P, D)
        return self.merge(out)


class SwapAxes(nn.Module):
    """``x.swapaxes(a, b)`` as a module."""

    def __init__(self, a, b):
        super().__init__()
        self.a, self.b = a, b

    def forward(self, x):
        return x.transpose(self.a, self.b)


class WindowPartition(nn.Module):
    """``(B, C, H, W)`` to ``(B, H/p * W/p, p*p, C)``: the tokens of each p x p window."""

    def forward(self, x, p):
        B, C, H, W = x.shape
        x = x.reshape(B, C, H // p, p, W // p, p).permute(0, 2, 4, 3, 5, 1)
        return x.reshape(B, (H // p) * (W // p), p * p, C)


class WindowDepartition(nn.Module):
    """The inverse of :class:`WindowPartition` for ``h_partitions x w_partitions`` windows."""

    def forward(self, x, p, h_partitions, w_partitions):
        B, G, PP, C = x.shape
        x = x.reshape(B, h_partitions, w_partitions, p, p, C).permute(0, 5, 1, 3, 2, 4)
        return x.reshape(B, C, h_partitions * p, w_partitions * p)


class PartitionAttentionLayer(nn.Module):
    """Attention and MLP (both pre-norm, residual) over ``partition_size``-square groups of a
    ``grid_size`` feature map: local windows (``"window"``) or a dilated grid whose tokens are
    ``grid_size / partition_size`` apart (``"grid"``)."""

    def __init__(self, in_channels, head_dim, partition_size, partition_type, grid_size,
                 mlp_ratio, activation_layer, norm_layer, attention_dropout, mlp_dropout,
                 p_stochastic_dropout):
        super().__init__()
        if partition_type not in ("grid", "window"):
            raise ValueError("partition_type must be either 'grid' or 'window'")
        self.n_heads = in_channels // head_dim
        self.head_dim = head_dim
        self.n_partitions = grid_size[0] // partition_size
        self.partition_type = partition_type
        self.grid_size = grid_size
        if partition_type == "window":
            self.p, self.g = partition_size, self.n_partitions
        else:
            self.p, self.g = self.n_partitions, partition_size
        self.partition_op = WindowPartition()
        self.departition_op = WindowDepartition()
        swap = partition_type == "grid"
        self.partition_swap = SwapAxes(-2, -3) if swap else nn.Identity()
        self.departition_swap = SwapAxes(-2, -3) if swap else nn.Identity()
        self.attn_layer = nn.Sequential(
            norm_layer(in_channels),
            RelativePositionalMultiHeadAttention(in_channels, head_dim, partition_size ** 2),
            nn.Dropout(attention_dropout))
        self.mlp_layer = nn.Sequential(
            nn.LayerNorm(in_channels),
            nn.Linear(in_channels, in_channels * mlp_ratio),
            activation_layer(),
            nn.Linear(in_channels * mlp_ratio, in_channels),
            nn.Dropout(mlp_dropout))
        self.stochastic_dropout = StochasticDepth(p_stochastic_dropout, mode="row")

    def forward(self, x):
        if tuple(x.shape[-2:]) != tuple(self.grid_size):
            raise ValueError(f"MaxVit: a {self.partition_type} attention layer built for "
                             f"{tuple(self.grid_size)} feature maps got {tuple(x.shape[-2:])}; "
                             "build the model with the input_size of your images")
        gh, gw = self.grid_size[0] // self.p, self.grid_size[1] // self.p
        x = self.partition_swap(self.partition_op(x, self.p))
        x = x + self.stochastic_dropout(self.attn_layer(x))
        x = x + self.stochastic_dropout(self.mlp_layer(x))
        return self.departition_op(self.departition_swap(x), self.p, gh, gw)


class MaxVitLayer(nn.Module):
    """MBConv, window attention, grid attention (``layers``)."""

    def __init__(self, in_channels, out_channels, squeeze_ratio, expansion_ratio, stride,
                 norm_layer, activation_layer, head_dim, mlp_ratio, mlp_dropout,
                 attention_dropout, p_stochastic_dropout, partition_size, grid_size):
        super().__init__()
        attn = dict(head_dim=head_dim, partition_size=partition_size, grid_size=grid_size,
                    mlp_ratio=mlp_ratio, activation_layer=activation_layer,
                    norm_layer=nn.LayerNorm, attention_dropout=attention_dropout,
                    mlp_dropout=mlp_dropout, p_stochastic_dropout=p_stochastic_dropout)
        self.layers = nn.Sequential(OrderedDict([
            ("MBconv", MBConv(in_channels, out_channels, expansion_ratio, squeeze_ratio, stride,
                              activation_layer, norm_layer, p_stochastic_dropout)),
            ("window_attention", PartitionAttentionLayer(out_channels, partition_type="window",
                                                         **attn)),
            ("grid_attention", PartitionAttentionLayer(out_channels, partition_type="grid",
                                                       **attn)),
        ]))

    def forward(self, x):
        return self.layers(x)


class MaxVitBlock(nn.Module):
    """A stage: ``n_layers`` MaxVit layers, the first one halving the size."""

    def __init__(self, in_channels, out_channels, squeeze_ratio, expansion_ratio, norm_layer,
                 activation_layer, head_dim, mlp_ratio, mlp_dropout, attention_dropout,
                 partition_size, input_grid_size, n_layers, p_stochastic):
        super().__init__()
        if len(p_stochastic) != n_layers:
            raise ValueError(f"p_stochastic must have length n_layers={n_layers}, got "
                             f"p_stochastic={p_stochastic}.")
        self.grid_size = _conv_out(input_grid_size, kernel_size=3, stride=2, padding=1)
        self.layers = nn.ModuleList([
            MaxVitLayer(in_channels if i == 0 else out_channels, out_channels, squeeze_ratio,
                        expansion_ratio, 2 if i == 0 else 1, norm_layer, activation_layer,
                        head_dim, mlp_ratio, mlp_dropout, attention_dropout, p, partition_size,
                        self.grid_size)
            for i, p in enumerate(p_stochastic)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class MaxVit(nn.Module):
    """MaxViT for ``input_size`` images: a two-convolution stem (stride 2), stages of
    :class:`MaxVitBlock` (each halving the size), then average pooling, LayerNorm, a tanh
    hidden layer and a bias-free linear classifier.

    Args:
        input_size: (H, W) of the images; every stage's size must be a multiple of
            ``partition_size``.
        stem_channels: the stem's width (part of the shape).
        partition_size: the window and grid size of the attention.
        block_channels: each stage's width.
        block_layers: each stage's depth.
        head_dim: the attention heads' width.
        stochastic_depth_prob: the largest stochastic depth rate (linear over the layers).
        norm_layer: the convolutions' norm (default ``BatchNorm2d(eps=1e-3, momentum=0.01)``).
        activation_layer: default GELU.
        squeeze_ratio: 0.25, as in torchvision.
        expansion_ratio: 4, as in torchvision.
        mlp_ratio: 4, as in torchvision.
        mlp_dropout: 0.0, as in torchvision.
        attention_dropout: 0.0, as in torchvision.
        num_classes: 1000, as in torchvision.
    """

    def __init__(self, input_size, stem_channels, partition_size, block_channels, block_layers,
                 head_dim, stochastic_depth_prob, norm_layer=None, activation_layer=nn.GELU,
                 squeeze_ratio=0.25, expansion_ratio=4, mlp_ratio=4, mlp_dropout=0.0,
                 attention_dropout=0.0, num_classes=1000):
        super().__init__()
        if norm_layer is None:
            norm_layer = functools.partial(nn.BatchNorm2d, eps=1e-3, momentum=0.01)
        if len(block_channels) != len(block_layers):
            raise ValueError(f"MaxVit: block_channels ({len(block_channels)}) and block_layers "
                             f"({len(block_layers)}) need the same length")
        shapes = _block_input_shapes(input_size, len(block_channels))
        for idx, shape in enumerate(shapes):
            if shape[0] % partition_size or shape[1] % partition_size:
                raise ValueError(
                    f"Input size {shape} of block {idx} is not divisible by partition size "
                    f"{partition_size}. Consider changing the partition size or the input size."
                    f"\nCurrent configuration yields the following block input sizes: "
                    f"{shapes}.")
        self.stem = nn.Sequential(
            Conv2dNormActivation(3, stem_channels, 3, stride=2, norm_layer=norm_layer,
                                 activation_layer=activation_layer, bias=False, inplace=None),
            Conv2dNormActivation(stem_channels, stem_channels, 3, stride=1, norm_layer=None,
                                 activation_layer=None, bias=True))
        size = _conv_out(input_size, kernel_size=3, stride=2, padding=1)
        self.partition_size = partition_size
        total = sum(block_layers)
        step = stochastic_depth_prob / (total - 1) if total > 1 else 0.0
        rates = [i * step for i in range(total)]
        self.blocks = nn.ModuleList()
        start = 0
        for cin, cout, n in zip([stem_channels] + list(block_channels[:-1]), block_channels,
                                block_layers):
            self.blocks.append(MaxVitBlock(
                cin, cout, squeeze_ratio, expansion_ratio, norm_layer, activation_layer,
                head_dim, mlp_ratio, mlp_dropout, attention_dropout, partition_size,
                input_grid_size=size, n_layers=n, p_stochastic=rates[start:start + n]))
            size = self.blocks[-1].grid_size
            start += n
        c = block_channels[-1]
        self.classifier = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(c), nn.Linear(c, c), nn.Tanh(),
            nn.Linear(c, num_classes, bias=False))
        self._init_weights()

    def _init_weights(self):
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.classifier(x)


class MaxVit_T_Weights(WeightsEnum):
    IMAGENET1K_V1 = Weights(
        url="https://download.pytorch.org/models/maxvit_t-bc5ab103.pth",
        transforms=classification_preset(crop_size=224, resize_size=224,
                                         interpolation=InterpolationMode.BICUBIC),
        meta={"categories": imagenet_categories(), "num_params": 30919624,
              "min_size": (224, 224),
              "recipe": "https://github.com/pytorch/vision/tree/main/references/"
                        "classification#maxvit",
              "_metrics": {"ImageNet-1K": {"acc@1": 83.700, "acc@5": 96.722}},
              "_ops": 5.558, "_file_size": 118.769,
              "_docs": "These weights reproduce closely the results of the paper using a "
                       "similar training recipe.\n            They were trained with a "
                       "BatchNorm2D momentum of 0.99 instead of the more correct 0.01."})
    DEFAULT = IMAGENET1K_V1


@register_model(weights=MaxVit_T_Weights)
def maxvit_t(*, weights=None, progress=True, **kwargs):
    """MaxViT-T (Tu et al., MaxViT: Multi-Axis Vision Transformer), for 224x224 images.

    Args:
        weights: a :class:`MaxVit_T_Weights` member or its name (``"IMAGENET1K_V1"``,
            ``"DEFAULT"``), the path of a local checkpoint file, a state dict, or None (random
            initialisation, the default).
        progress: show a progress bar while downloading.
        **kwargs: passed to :class:`MaxVit` (``input_size``, ``num_classes``, ...).
    """
    from collections.abc import Mapping

    from fiamma.vision.models._api import resolve_weights
    if not isinstance(weights, Mapping) and \
            isinstance(resolve_weights(MaxVit_T_Weights, weights), WeightsEnum):
        size = MaxVit_T_Weights.DEFAULT.meta["min_size"]
        if kwargs.get("input_size", size) != size:
            raise ValueError(f"The parameter 'input_size' expected value {size} but got "
                             f"{kwargs['input_size']} instead.")
        kwargs["input_size"] = size
    input_size = kwargs.pop("input_size", (224, 224))
    return build(MaxVit_T_Weights, weights, progress, kwargs,
                 lambda **kw: MaxVit(input_size=input_size, stem_channels=64,
                                     partition_size=7, block_channels=[64, 128, 256, 512],
                                     block_layers=[2, 2, 5, 2], head_dim=32,
                                     stochastic_depth_prob=0.2, **kw))
