"""Swin Transformer V1 and V2 (torchvision.models.swin_transformer): shifted-window attention
with a relative position bias (V1: learned table; V2: continuous bias from a small MLP over
log-spaced coordinates, cosine attention with a learned logit scale, post-norm blocks), the
same module names and builders, so torchvision checkpoints load by key.

    >>> import fiamma
    >>> m = swin_t(num_classes=10).eval()
    >>> tuple(m(fiamma.rand(1, 3, 64, 64)).shape)
    (1, 10)
"""
import math
from functools import partial

import numpy as np

import fiamma
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.models._weights_util import build, classification_preset, registered_builder
from fiamma.vision.ops.misc import MLP, Permute
from fiamma.vision.ops.stochastic_depth import StochasticDepth
from fiamma.vision.transforms.functional import InterpolationMode

__all__ = ["SwinTransformer", "Swin_T_Weights", "Swin_S_Weights", "Swin_B_Weights",
           "Swin_V2_T_Weights", "Swin_V2_S_Weights", "Swin_V2_B_Weights", "swin_t", "swin_s",
           "swin_b", "swin_v2_t", "swin_v2_s", "swin_v2_b"]


def _patch_merging_pad(x):
    H, W = x.shape[-3], x.shape[-2]
    x = F.pad(x, (0, 0, 0, W % 2, 0, H % 2))
    x0 = x[..., 0::2, 0::2, :]
    x1 = x[..., 1::2, 0::2, :]
    x2 = x[..., 0::2, 1::2, :]
    x3 = x[..., 1::2, 1::2, :]
    return fiamma.cat([x0, x1, x2, x3], -1)


class PatchMerging(nn.Module):
    """2x2 neighbourhoods concatenated (4C), normalised, projected to 2C (channels last)."""

    def __init__(self, dim, norm_layer=nn.LayerNorm):
        super().__init__()
        self.dim = dim
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = norm_layer(4 * dim)

    def forward(self, x):
        return self.reduction(self.norm(_patch_merging_pad(x)))


class PatchMergingV2(nn.Module):
    """Swin V2's patch merging: project to 2C, then normalise."""

    def __init__(self, dim, norm_layer=nn.LayerNorm):
        super().__init__()
        self.dim = dim
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = norm_layer(2 * dim)

    def forward(self, x):
        return self.norm(self.reduction(_patch_merging_pad(x)))


def _get_relative_position_bias(table, index, window_size):
    n = window_size[0] * window_size[1]
    bias = table[index].reshape(n, n, -1)
    return bias.permute(2, 0, 1).contiguous().unsqueeze(0)


def _shift_mask(pad_h, pad_w, window_size, shift_size):
    """(num_windows, N, N) additive mask: -100 between tokens that came from different
    regions of the rolled map (NumPy, then one tensor)."""
    img = np.zeros((pad_h, pad_w))
    count = 0
    for h in ((0, -window_size[0]), (-window_size[0], -shift_size[0]), (-shift_size[0], None)):
        for w in ((0, -window_size[1]), (-window_size[1], -shift_size[1]),
                  (-shift_size[1], None)):
            img[h[0]:h[1], w[0]:w[1]] = count
            count += 1
    nw = (pad_h // window_size[0]) * (pad_w // window_size[1])
    m = img.reshape(pad_h // window_size[0], window_size[0], pad_w // window_size[1],
                    window_size[1]).transpose(0, 2, 1, 3).reshape(nw, -1)
    diff = m[:, None, :] - m[:, :, None]
    return np.where(diff != 0, -100.0, 0.0)


def shifted_window_attention(input, qkv_weight, proj_weight, relative_position_bias,
                             window_size, num_heads, shift_size, attention_dropout=0.0,
                             dropout=0.0, qkv_bias=None, proj_bias=None, logit_scale=None,
                             training=True):
    """Window multi-head self-attention on a channels-last (B, H, W, C) map, padded to whole
    windows and rolled by ``-shift_size`` when shifting (torchvision's function)."""
    B, H, W, C = input.shape
    pad_r = (window_size[1] - W % window_size[1]) % window_size[1]
    pad_b = (window_size[0] - H % window_size[0]) % window_size[0]
    x = F.pad(input, (0, 0, 0, pad_r, 0, pad_b))
    pad_H, pad_W = x.shape[1], x.shape[2]
    shift_size = list(shift_size)
    if window_size[0] >= pad_H:
        shift_size[0] = 0
    if window_size[1] >= pad_W:
        shift_size[1] = 0
    if sum(shift_size) > 0:
        x = fiamma.roll(x, shifts=(-shift_size[0], -shift_size[1]), dims=(1, 2))
    num_windows = (pad_H // window_size[0]) * (pad_W // window_size[1])
    x = x.reshape(B, pad_H // window_size[0], window_size[0], pad_W // window_size[1],
                  window_size[1], C)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(B * num_windows, window_size[0] * window_size[1], C)
    if logit_scale is not None and qkv_bias is not None:
        length = qkv_bias.numel() // 3
        # V2 has no key bias; the mask is a constant (built in NumPy, so a trace records no
        # in-place write)
        keep = np.ones(qkv_bias.shape)
        keep[length:2 * length] = 0.0
        qkv_bias = qkv_bias * fiamma.from_numpy(keep).to(qkv_bias.dtype)
    qkv = F.linear(x, qkv_weight, qkv_bias)
    qkv = qkv.reshape(x.shape[0], x.shape[1], 3, num_heads, C // num_heads).permute(
        2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    if logit_scale is not None:
        attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        attn = attn * fiamma.clamp(logit_scale, max=math.log(100.0)).exp()
    else:
        q = q * (C // num_heads) ** -0.5
        attn = q.matmul(k.transpose(-2, -1))
    attn = attn + relative_position_bias
    if sum(shift_size) > 0:
        mask = fiamma.from_numpy(_shift_mask(pad_H, pad_W, window_size, shift_size)).to(
            attn.dtype)
        n = x.shape[1]
        attn = attn.reshape(x.shape[0] // num_windows, num_windows, num_heads, n, n)
        attn = attn + mask.unsqueeze(1).unsqueeze(0)
        attn = attn.reshape(-1, num_heads, n, n)
    attn = F.softmax(attn, dim=-1)
    attn = F.dropout(attn, p=attention_dropout, training=training)
    x = attn.matmul(v).transpose(1, 2).reshape(x.shape[0], x.shape[1], C)
    x = F.linear(x, proj_weight, proj_bias)
    x = F.dropout(x, p=dropout, training=training)
    x = x.reshape(B, pad_H // window_size[0], pad_W // window_size[1], window_size[0],
                  window_size[1], C)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(B, pad_H, pad_W, C)
    if sum(shift_size) > 0:
        x = fiamma.roll(x, shifts=(shift_size[0], shift_size[1]), dims=(1, 2))
    return x[:, :H, :W, :].contiguous()


class ShiftedWindowAttention(nn.Module):
    """(Shifted) window attention with a learned relative position bias table."""

    def __init__(self, dim, window_size, shift_size, num_heads, qkv_bias=True, proj_bias=True,
                 attention_dropout=0.0, dropout=0.0):
        super().__init__()
        if len(window_size) != 2 or len(shift_size) != 2:
            raise ValueError("window_size and shift_size must be of length 2")
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
        wh, ww = self.window_size
        self.relative_position_bias_table = nn.Parameter(
            fiamma.zeros((2 * wh - 1) * (2 * ww - 1), self.num_heads))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def define_relative_position_index(self):
        wh, ww = self.window_size
        coords = np.stack(np.meshgrid(np.arange(wh), np.arange(ww), indexing="ij")).reshape(2, -1)
        rel = (coords[:, :, None] - coords[:, None, :]).transpose(1, 2, 0)
        rel[:, :, 0] += wh - 1
        rel[:, :, 1] += ww - 1
        rel[:, :, 0] *= 2 * ww - 1
        self.register_buffer("relative_position_index",
                             fiamma.from_numpy(rel.sum(-1).reshape(-1).astype(np.int64)))

    def get_relative_position_bias(self):
        return _get_relative_position_bias(self.relative_position_bias_table,
                                           self.relative_position_index, self.window_size)

    def forward(self, x):
        return shifted_window_attention(
            x, self.qkv.weight, self.proj.weight, self.get_relative_position_bias(),
            self.window_size, self.num_heads, shift_size=self.shift_size,
            attention_dropout=self.attention_dropout, dropout=self.dropout,
            qkv_bias=self.qkv.bias, proj_bias=self.proj.bias, training=self.training)


class ShiftedWindowAttentionV2(ShiftedWindowAttention):
    """Swin V2's attention: cosine similarity with a learned per-head logit scale and a
    continuous position bias (``cpb_mlp`` over log-spaced relative coordinates)."""

    def __init__(self, dim, window_size, shift_size, num_heads, qkv_bias=True, proj_bias=True,
                 attention_dropout=0.0, dropout=0.0):
        super().__init__(dim, window_size, shift_size, num_heads, qkv_bias=qkv_bias,
                         proj_bias=proj_bias, attention_dropout=attention_dropout,
                         dropout=dropout)
        self.logit_scale = nn.Parameter(fiamma.log(10 * fiamma.ones((num_heads, 1, 1))))
        self.cpb_mlp = nn.Sequential(nn.Linear(2, 512, bias=True), nn.ReLU(inplace=True),
                                     nn.Linear(512, num_heads, bias=False))
        if qkv_bias:
            length = self.qkv.bias.numel() // 3
            with fiamma.no_grad():
                self.qkv.bias[length:2 * length] = 0.0

    def define_relative_position_bias_table(self):
        wh, ww = self.window_size
        h = np.arange(-(wh - 1), wh, dtype=np.float32)
        w = np.arange(-(ww - 1), ww, dtype=np.float32)
        table = np.stack(np.meshgrid(h, w, indexing="ij")).transpose(1, 2, 0)[None].copy()
        table[:, :, :, 0] /= wh - 1
        table[:, :, :, 1] /= ww - 1
        table *= 8
        table = np.sign(table) * np.log2(np.abs(table) + 1.0) / 3.0
        self.register_buffer("relative_coords_table",
                             fiamma.from_numpy(table.astype(np.float32)))

    def get_relative_position_bias(self):
        bias = _get_relative_position_bias(
            self.cpb_mlp(self.relative_coords_table).reshape(-1, self.num_heads),
            self.relative_position_index, self.window_size)
        return 16 * fiamma.sigmoid(bias)

    def forward(self, x):
        return shifted_window_attention(
            x, self.qkv.weight, self.proj.weight, self.get_relative_position_bias(),
            self.window_size, self.num_heads, shift_size=self.shift_size,
            attention_dropout=self.attention_dropout, dropout=self.dropout,
            qkv_bias=self.qkv.bias, proj_bias=self.proj.bias, logit_scale=self.logit_scale,
            training=self.training)


class SwinTransformerBlock(nn.Module):
    """Pre-norm block: x + SD(attn(norm1(x))), then x + SD(mlp(norm2(x)))."""

    def __init__(self, dim, num_heads, window_size, shift_size, mlp_ratio=4.0, dropout=0.0,
                 attention_dropout=0.0, stochastic_depth_prob=0.0, norm_layer=nn.LayerNorm,
                 attn_layer=ShiftedWindowAttention):
        super().__init__()
        self.norm1 = norm_layer(dim)
        self.attn = attn_layer(dim, window_size, shift_size, num_heads,
                               attention_dropout=attention_dropout, dropout=dropout)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.norm2 = norm_layer(dim)
        self.mlp = MLP(dim, [int(dim * mlp_ratio), dim], activation_layer=nn.GELU, inplace=None,
                       dropout=dropout)
        for m in self.mlp.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.normal_(m.bias, std=1e-6)

    def forward(self, x):
        x = x + self.stochastic_depth(self.attn(self.norm1(x)))
        return x + self.stochastic_depth(self.mlp(self.norm2(x)))


class SwinTransformerBlockV2(SwinTransformerBlock):
    """Post-norm block (Swin V2): x + SD(norm1(attn(x))), then x + SD(norm2(mlp(x)))."""

    def __init__(self, dim, num_heads, window_size, shift_size, mlp_ratio=4.0, dropout=0.0,
                 attention_dropout=0.0, stochastic_depth_prob=0.0, norm_layer=nn.LayerNorm,
                 attn_layer=ShiftedWindowAttentionV2):
        super().__init__(dim, num_heads, window_size, shift_size, mlp_ratio=mlp_ratio,
                         dropout=dropout, attention_dropout=attention_dropout,
                         stochastic_depth_prob=stochastic_depth_prob, norm_layer=norm_layer,
                         attn_layer=attn_layer)

    def forward(self, x):
        x = x + self.stochastic_depth(self.norm1(self.attn(x)))
        return x + self.stochastic_depth(self.norm2(self.mlp(x)))


class SwinTransformer(nn.Module):
    """Swin Transformer: patch embedding (conv ``patch_size``, channels last, norm), four
    stages of (shifted) window blocks with patch merging between them, norm, average pool,
    linear head. Stochastic depth grows linearly to ``stochastic_depth_prob``."""

    def __init__(self, patch_size, embed_dim, depths, num_heads, window_size, mlp_ratio=4.0,
                 dropout=0.0, attention_dropout=0.0, stochastic_depth_prob=0.1,
                 num_classes=1000, norm_layer=None, block=None, downsample_layer=PatchMerging):
        super().__init__()
        self.num_classes = num_classes
        if block is None:
            block = SwinTransformerBlock
        if norm_layer is None:
            norm_layer = partial(nn.LayerNorm, eps=1e-5)
        layers = [nn.Sequential(
            nn.Conv2d(3, embed_dim, kernel_size=(patch_size[0], patch_size[1]),
                      stride=(patch_size[0], patch_size[1])),
            Permute([0, 2, 3, 1]),
            norm_layer(embed_dim))]
        total = sum(depths)
        block_id = 0
        for i_stage, depth in enumerate(depths):
            dim = embed_dim * 2 ** i_stage
            stage = []
            for i_layer in range(depth):
                sd_prob = stochastic_depth_prob * float(block_id) / (total - 1)
                stage.append(block(dim, num_heads[i_stage], window_size=window_size,
                                   shift_size=[0 if i_layer % 2 == 0 else w // 2
                                               for w in window_size],
                                   mlp_ratio=mlp_ratio, dropout=dropout,
                                   attention_dropout=attention_dropout,
                                   stochastic_depth_prob=sd_prob, norm_layer=norm_layer))
                block_id += 1
            layers.append(nn.Sequential(*stage))
            if i_stage < len(depths) - 1:
                layers.append(downsample_layer(dim, norm_layer))
        self.features = nn.Sequential(*layers)
        num_features = embed_dim * 2 ** (len(depths) - 1)
        self.norm = norm_layer(num_features)
        self.permute = Permute([0, 3, 1, 2])
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten(1)
        self.head = nn.Linear(num_features, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.norm(self.features(x))
        return self.head(self.flatten(self.avgpool(self.permute(x))))


_CONFIGS = {
    # name: (embed_dim, depths, heads, window, sd, v2, file, crop, resize, params, acc1, acc5,
    #        ops, size)
    "t": (96, [2, 2, 6, 2], [3, 6, 12, 24], 7, 0.2, False, "swin_t-704ceda3.pth", 224, 232,
          28288354, 81.474, 95.776, 4.491, 108.19),
    "s": (96, [2, 2, 18, 2], [3, 6, 12, 24], 7, 0.3, False, "swin_s-5e29d889.pth", 224, 246,
          49606258, 83.196, 96.36, 8.741, 189.786),
    "b": (128, [2, 2, 18, 2], [4, 8, 16, 32], 7, 0.5, False, "swin_b-68c6b09e.pth", 224, 238,
          87768224, 83.582, 96.64, 15.431, 335.364),
    "v2_t": (96, [2, 2, 6, 2], [3, 6, 12, 24], 8, 0.2, True, "swin_v2_t-b137f0e2.pth", 256,
             260, 28351570, 82.072, 96.132, 5.94, 108.626),
    "v2_s": (96, [2, 2, 18, 2], [3, 6, 12, 24], 8, 0.3, True, "swin_v2_s-637d8ceb.pth", 256,
             260, 49737442, 83.712, 96.816, 11.546, 190.675),
    "v2_b": (128, [2, 2, 18, 2], [4, 8, 16, 32], 8, 0.5, True, "swin_v2_b-781e5279.pth", 256,
             272, 87930848, 84.112, 96.864, 20.325, 336.372),
}
_RECIPE = "https://github.com/pytorch/vision/tree/main/references/classification#"


def _weights(name):
    (_, _, _, _, _, v2, file, crop, resize, n, a1, a5, ops, size) = _CONFIGS[name]
    return Weights(
        url="https://download.pytorch.org/models/" + file,
        transforms=classification_preset(crop_size=crop, resize_size=resize,
                                         interpolation=InterpolationMode.BICUBIC),
        meta={"categories": imagenet_categories(), "num_params": n, "min_size": (crop, crop),
              "recipe": _RECIPE + ("swintransformer-v2" if v2 else "swintransformer"),
              "_metrics": {"ImageNet-1K": {"acc@1": a1, "acc@5": a5}}, "_ops": ops,
              "_file_size": size,
              "_docs": "These weights reproduce closely the results of the paper using a "
                       "similar training recipe."})


class Swin_T_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("t")
    DEFAULT = IMAGENET1K_V1


class Swin_S_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("s")
    DEFAULT = IMAGENET1K_V1


class Swin_B_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("b")
    DEFAULT = IMAGENET1K_V1


class Swin_V2_T_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("v2_t")
    DEFAULT = IMAGENET1K_V1


class Swin_V2_S_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("v2_s")
    DEFAULT = IMAGENET1K_V1


class Swin_V2_B_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("v2_b")
    DEFAULT = IMAGENET1K_V1


def _make_builder(name, enum_cls):
    embed, depths, heads, window, sd, v2 = _CONFIGS[name][:6]
    extra = dict(block=SwinTransformerBlockV2, downsample_layer=PatchMergingV2) if v2 else {}

    def builder(*, weights=None, progress=True, **kwargs):
        return build(enum_cls, weights, progress, kwargs,
                     lambda **kw: SwinTransformer(patch_size=[4, 4], embed_dim=embed,
                                                  depths=depths, num_heads=heads,
                                                  window_size=[window, window],
                                                  stochastic_depth_prob=kw.pop(
                                                      "stochastic_depth_prob", sd),
                                                  **extra, **kw))
    return registered_builder(builder, f"swin_{name}", enum_cls,
                              f"Swin Transformer {'V2 ' if v2 else ''}{name[-1].upper()}")


swin_t = _make_builder("t", Swin_T_Weights)
swin_s = _make_builder("s", Swin_S_Weights)
swin_b = _make_builder("b", Swin_B_Weights)
swin_v2_t = _make_builder("v2_t", Swin_V2_T_Weights)
swin_v2_s = _make_builder("v2_s", Swin_V2_S_Weights)
swin_v2_b = _make_builder("v2_b", Swin_V2_B_Weights)
