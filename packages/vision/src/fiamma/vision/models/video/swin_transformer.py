"""Video Swin Transformer (torchvision.models.video.swin_transformer): Liu et al., "Video Swin
Transformer" - Swin's shifted-window attention over 3D (time, height, width) windows. The
blocks and patch merging are the image Swin's (:mod:`fiamma.vision.models.swin_transformer`)
with a 3D attention layer. Same classes, module names (torchvision checkpoints load by key),
initialisation and weights enums as torchvision.

    >>> import fiamma
    >>> from fiamma.vision.models.video import SwinTransformer3d
    >>> m = SwinTransformer3d(patch_size=[2, 4, 4], embed_dim=16, depths=[1, 1],
    ...                       num_heads=[2, 4], window_size=[2, 3, 3], num_classes=5).eval()
    >>> tuple(m(fiamma.zeros(1, 3, 4, 24, 24)).shape)
    (1, 5)
"""
import functools

import numpy as np

import fiamma
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models._meta import kinetics400_categories
from fiamma.vision.models._weights_util import build
from fiamma.vision.models.swin_transformer import PatchMerging, SwinTransformerBlock
from fiamma.vision.models.video.resnet import _video_preset

__all__ = ["SwinTransformer3d", "Swin3D_T_Weights", "Swin3D_S_Weights", "Swin3D_B_Weights",
           "swin3d_t", "swin3d_s", "swin3d_b"]


def _window_and_shift(shift_size, size_dhw, window_size):
    # a window no smaller than the map covers all of it, and is not shifted
    window, shift = list(window_size), list(shift_size)
    for i in range(3):
        if size_dhw[i] <= window[i]:
            window[i], shift[i] = size_dhw[i], 0
    return window, shift


def _pad_size_3d(size_dhw, patch_size):
    return tuple((patch_size[i] - size_dhw[i] % patch_size[i]) % patch_size[i] for i in range(3))


@functools.lru_cache(maxsize=32)
def _attention_mask_3d(size_dhw, window_size, shift_size):
    """(windows, Wd*Wh*Ww, Wd*Wh*Ww) float32: -100 between tokens that the cyclic shift brought
    from different regions, 0 within one region."""
    region = np.zeros(size_dhw, dtype=np.float32)
    bounds = [((0, -window_size[i]), (-window_size[i], -shift_size[i]), (-shift_size[i], None))
              for i in range(3)]
    count = 0
    for d in bounds[0]:
        for h in bounds[1]:
            for w in bounds[2]:
                region[d[0]:d[1], h[0]:h[1], w[0]:w[1]] = count
                count += 1
    nd, nh, nw = (size_dhw[i] // window_size[i] for i in range(3))
    region = region.reshape(nd, window_size[0], nh, window_size[1], nw, window_size[2])
    region = region.transpose(0, 2, 4, 1, 3, 5).reshape(nd * nh * nw, -1)
    diff = region[:, None, :] - region[:, :, None]
    return np.where(diff != 0, -100.0, 0.0).astype(np.float32)


def shifted_window_attention_3d(input, qkv_weight, proj_weight, relative_position_bias,
                                window_size, num_heads, shift_size, attention_dropout=0.0,
                                dropout=0.0, qkv_bias=None, proj_bias=None, training=True):
    """Multi-head self-attention within (shifted) 3D windows of ``input`` ``(B, T, H, W, C)``,
    with ``relative_position_bias`` added to the logits; the map is zero-padded to whole
    windows and cropped back."""
    b, t, h, w, c = input.shape
    pad = _pad_size_3d((t, h, w), window_size)
    x = F.pad(input, (0, 0, 0, pad[2], 0, pad[1], 0, pad[0]))
    _, tp, hp, wp, _ = x.shape
    if sum(shift_size) > 0:
        x = fiamma.roll(x, shifts=(-shift_size[0], -shift_size[1], -shift_size[2]),
                        dims=(1, 2, 3))
    nd, nh, nw = tp // window_size[0], hp // window_size[1], wp // window_size[2]
    n_win = nd * nh * nw
    vol = window_size[0] * window_size[1] * window_size[2]
    x = x.reshape(b, nd, window_size[0], nh, window_size[1], nw, window_size[2], c)
    x = x.permute(0, 1, 3, 5, 2, 4, 6, 7).reshape(b * n_win, vol, c)
    qkv = F.linear(x, qkv_weight, qkv_bias)
    qkv = qkv.reshape(b * n_win, vol, 3, num_heads, c // num_heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    attn = (q * (c // num_heads) ** -0.5) @ k.transpose(-2, -1)
    attn = attn + relative_position_bias
    if sum(shift_size) > 0:
        mask = fiamma.from_numpy(_attention_mask_3d((tp, hp, wp), tuple(window_size),
                                                    tuple(shift_size)))
        mask = mask.to(dtype=attn.dtype, device=attn.device)
        attn = attn.reshape(b, n_win, num_heads, vol, vol) + mask[None, :, None]
        attn = attn.reshape(-1, num_heads, vol, vol)
    attn = F.dropout(F.softmax(attn, dim=-1), p=attention_dropout, training=training)
    x = (attn @ v).transpose(1, 2).reshape(b * n_win, vol, c)
    x = F.dropout(F.linear(x, proj_weight, proj_bias), p=dropout, training=training)
    x = x.reshape(b, nd, nh, nw, window_size[0], window_size[1], window_size[2], c)
    x = x.permute(0, 1, 4, 2, 5, 3, 6, 7).reshape(b, tp, hp, wp, c)
    if sum(shift_size) > 0:
        x = fiamma.roll(x, shifts=(shift_size[0], shift_size[1], shift_size[2]), dims=(1, 2, 3))
    return x[:, :t, :h, :w, :].contiguous()


class ShiftedWindowAttention3d(nn.Module):
    """3D window attention with a learned bias per relative (dt, dy, dx) offset. On maps not
    larger than the window, the window shrinks to the map and the bias is the leading
    ``vol x vol`` block of the full window's index (as torchvision)."""

    def __init__(self, dim, window_size, shift_size, num_heads, qkv_bias=True, proj_bias=True,
                 attention_dropout=0.0, dropout=0.0):
        super().__init__()
        if len(window_size) != 3 or len(shift_size) != 3:
            raise ValueError("window_size and shift_size must be of length 3")
        self.window_size = list(window_size)
        self.shift_size = list(shift_size)
        self.num_heads = num_heads
        self.attention_dropout = attention_dropout
        self.dropout = dropout
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim, bias=proj_bias)
        self.define_relative_position_bias_table()
        self.define_relative_position_index()

    def define_relative_position_bias_table(self):
        wd, wh, ww = self.window_size
        self.relative_position_bias_table = nn.Parameter(
            fiamma.zeros((2 * wd - 1) * (2 * wh - 1) * (2 * ww - 1), self.num_heads))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def define_relative_position_index(self):
        wd, wh, ww = self.window_size
        coords = np.stack(np.meshgrid(np.arange(wd), np.arange(wh), np.arange(ww),
                                      indexing="ij")).reshape(3, -1)
        rel = (coords[:, :, None] - coords[:, None, :]).transpose(1, 2, 0)
        rel = rel + np.array([wd - 1, wh - 1, ww - 1])
        index = (rel * np.array([(2 * wh - 1) * (2 * ww - 1), 2 * ww - 1, 1])).sum(-1)
        self.register_buffer("relative_position_index", fiamma.from_numpy(index.astype(np.int64)))

    def get_relative_position_bias(self, window_size):
        vol = window_size[0] * window_size[1] * window_size[2]
        idx = self.relative_position_index[:vol, :vol].flatten()
        bias = self.relative_position_bias_table[idx].reshape(vol, vol, -1)
        return bias.permute(2, 0, 1).contiguous().unsqueeze(0)

    def forward(self, x):
        _, t, h, w, _ = x.shape
        window, shift = _window_and_shift(self.shift_size, [t, h, w], self.window_size)
        return shifted_window_attention_3d(
            x, self.qkv.weight, self.proj.weight, self.get_relative_position_bias(window),
            window, self.num_heads, shift_size=shift, attention_dropout=self.attention_dropout,
            dropout=self.dropout, qkv_bias=self.qkv.bias, proj_bias=self.proj.bias,
            training=self.training)


class PatchEmbed3d(nn.Module):
    """Non-overlapping ``patch_size`` patches (the clip zero-padded to whole patches) projected
    by a strided Conv3d to ``embed_dim``, returned channels last ``(B, T', H', W', C)``."""

    def __init__(self, patch_size, in_channels=3, embed_dim=96, norm_layer=None):
        super().__init__()
        self.tuple_patch_size = (patch_size[0], patch_size[1], patch_size[2])
        self.proj = nn.Conv3d(in_channels, embed_dim, kernel_size=self.tuple_patch_size,
                              stride=self.tuple_patch_size)
        self.norm = norm_layer(embed_dim) if norm_layer is not None else nn.Identity()

    def forward(self, x):
        if x.ndim != 5:
            raise ValueError(f"SwinTransformer3d: expected a clip (N, C, T, H, W), got shape "
                             f"{tuple(x.shape)}")
        _, _, t, h, w = x.shape
        pad = _pad_size_3d((t, h, w), self.tuple_patch_size)
        x = F.pad(x, (0, pad[2], 0, pad[1], 0, pad[0]))
        return self.norm(self.proj(x).permute(0, 2, 3, 4, 1))


class SwinTransformer3d(nn.Module):
    """Video Swin: 3D patch embedding, stages of Swin blocks with 3D (shifted) windows and
    patch merging between them (over H and W), LayerNorm, global average pooling and a linear
    head.

    Args:
        patch_size: the patch embedding's (T, H, W) stride.
        embed_dim: the first stage's width.
        depths: each stage's depth.
        num_heads: each stage's attention heads.
        window_size: the attention window (T, H, W).
        mlp_ratio: 4.0, as the image Swin.
        dropout: 0.0, as the image Swin.
        attention_dropout: 0.0, as the image Swin.
        stochastic_depth_prob: the largest stochastic depth rate (default 0.1), linear over
            the blocks.
        num_classes: 400 (Kinetics-400).
        norm_layer: a replacement part.
        block: a replacement part.
        downsample_layer: a replacement part.
        patch_embed: a replacement part.
    """

    def __init__(self, patch_size, embed_dim, depths, num_heads, window_size, mlp_ratio=4.0,
                 dropout=0.0, attention_dropout=0.0, stochastic_depth_prob=0.1,
                 num_classes=400, norm_layer=None, block=None, downsample_layer=PatchMerging,
                 patch_embed=None):
        super().__init__()
        self.num_classes = num_classes
        if block is None:
            block = functools.partial(SwinTransformerBlock, attn_layer=ShiftedWindowAttention3d)
        if norm_layer is None:
            norm_layer = functools.partial(nn.LayerNorm, eps=1e-5)
        if patch_embed is None:
            patch_embed = PatchEmbed3d
        self.patch_embed = patch_embed(patch_size=patch_size, embed_dim=embed_dim,
                                       norm_layer=norm_layer)
        self.pos_drop = nn.Dropout(p=dropout)
        layers = []
        total = sum(depths)
        block_id = 0
        for i_stage, depth in enumerate(depths):
            dim = embed_dim * 2 ** i_stage
            stage = []
            for i_layer in range(depth):
                sd = stochastic_depth_prob * float(block_id) / (total - 1) if total > 1 else 0.0
                stage.append(block(dim, num_heads[i_stage], window_size=window_size,
                                   shift_size=[0 if i_layer % 2 == 0 else w // 2
                                               for w in window_size],
                                   mlp_ratio=mlp_ratio, dropout=dropout,
                                   attention_dropout=attention_dropout,
                                   stochastic_depth_prob=sd, norm_layer=norm_layer,
                                   attn_layer=ShiftedWindowAttention3d))
                block_id += 1
            layers.append(nn.Sequential(*stage))
            if i_stage < len(depths) - 1:
                layers.append(downsample_layer(dim, norm_layer))
        self.features = nn.Sequential(*layers)
        self.num_features = embed_dim * 2 ** (len(depths) - 1)
        self.norm = norm_layer(self.num_features)
        self.avgpool = nn.AdaptiveAvgPool3d(1)
        self.head = nn.Linear(self.num_features, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.features(self.pos_drop(self.patch_embed(x)))
        x = self.norm(x).permute(0, 4, 1, 2, 3)
        return self.head(self.avgpool(x).flatten(1))


_RECIPE = "https://github.com/SwinTransformer/Video-Swin-Transformer#kinetics-400"


def _weights(file, n, acc1, acc5, ops, size, docs):
    return Weights(
        url="https://download.pytorch.org/models/" + file,
        transforms=_video_preset(crop_size=(224, 224), resize_size=(256,),
                                 mean=(0.4850, 0.4560, 0.4060), std=(0.2290, 0.2240, 0.2250)),
        meta={"categories": kinetics400_categories(), "min_size": (1, 1),
              "min_temporal_size": 1, "recipe": _RECIPE, "_docs": docs, "num_params": n,
              "_metrics": {"Kinetics-400": {"acc@1": acc1, "acc@5": acc5}}, "_ops": ops,
              "_file_size": size})


_PORTED = ("The weights were ported from the paper. The accuracies are estimated on video-level "
           "with parameters `frame_rate=15`, `clips_per_video=12`, and `clip_len=32`")


class Swin3D_T_Weights(WeightsEnum):
    KINETICS400_V1 = _weights("swin3d_t-7615ae03.pth", 28158070, 77.715, 93.519, 43.882,
                              121.543, _PORTED)
    DEFAULT = KINETICS400_V1


class Swin3D_S_Weights(WeightsEnum):
    KINETICS400_V1 = _weights("swin3d_s-da41c237.pth", 49816678, 79.521, 94.158, 82.841,
                              218.288, _PORTED)
    DEFAULT = KINETICS400_V1


class Swin3D_B_Weights(WeightsEnum):
    KINETICS400_V1 = _weights("swin3d_b_1k-24f7c7c6.pth", 88048984, 79.427, 94.386, 140.667,
                              364.134, _PORTED)
    KINETICS400_IMAGENET22K_V1 = _weights("swin3d_b_22k-7c6ae6fa.pth", 88048984, 81.643,
                                          95.574, 140.667, 364.134, _PORTED)
    DEFAULT = KINETICS400_V1


def _make_builder(name, enum_cls, embed_dim, depths, num_heads):
    def builder(*, weights=None, progress=True, **kwargs):
        return build(enum_cls, weights, progress, kwargs,
                     lambda **kw: SwinTransformer3d(
                         patch_size=[2, 4, 4], embed_dim=embed_dim, depths=depths,
                         num_heads=num_heads, window_size=[8, 7, 7],
                         stochastic_depth_prob=kw.pop("stochastic_depth_prob", 0.1), **kw))
    builder.__name__ = builder.__qualname__ = name
    builder.__doc__ = (f"Video Swin Transformer {name[-1].upper()} (torchvision's ``{name}``)."
                       f"\n\n    Args:\n        weights: a :class:`{enum_cls.__name__}` member "
                       "or its name, ``\"DEFAULT\"``, a local checkpoint path, a state dict,\n"
                       "            or None.\n"
                       "        progress: show a progress bar while downloading.\n"
                       "        **kwargs: passed to :class:`SwinTransformer3d`.\n")
    return register_model(weights=enum_cls)(builder)


swin3d_t = _make_builder("swin3d_t", Swin3D_T_Weights, 96, [2, 2, 6, 2], [3, 6, 12, 24])
swin3d_s = _make_builder("swin3d_s", Swin3D_S_Weights, 96, [2, 2, 18, 2], [3, 6, 12, 24])
swin3d_b = _make_builder("swin3d_b", Swin3D_B_Weights, 128, [2, 2, 18, 2], [4, 8, 16, 32])
