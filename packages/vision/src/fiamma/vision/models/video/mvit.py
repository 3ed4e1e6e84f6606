"""MViT (torchvision.models.video.mvit): Multiscale Vision Transformers - Fan et al. (V1) and
Li et al., "MViTv2" (V2: relative position embeddings, residual pooling). Attention pools its
queries, keys and values with depthwise 3D convolutions, so the token grid shrinks and the
width grows stage by stage. Same classes, module names (torchvision checkpoints load by key),
initialisation and weights enums as torchvision.

An MViT is built for one clip size (``temporal_size`` frames of ``spatial_size``; 16 x 224 x
224 for the published weights).

    >>> import fiamma
    >>> from fiamma.vision.models.video import MViT
    >>> from fiamma.vision.models.video.mvit import MSBlockConfig
    >>> cfg = [MSBlockConfig(1, 16, 32, [3, 3, 3], [3, 3, 3], [1, 2, 2], [1, 2, 2])]
    >>> m = MViT(spatial_size=(32, 32), temporal_size=4, block_setting=cfg,
    ...          residual_pool=True, residual_with_cls_embed=False, rel_pos_embed=True,
    ...          proj_after_attn=True, num_classes=5).eval()
    >>> tuple(m(fiamma.zeros(1, 3, 4, 32, 32)).shape)
    (1, 5)
"""
import functools
import math
from dataclasses import dataclass

import numpy as np

import fiamma
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models._meta import kinetics400_categories
from fiamma.vision.models._weights_util import build, overwrite_named_param
from fiamma.vision.models.video.resnet import _video_preset
from fiamma.vision.ops import MLP, StochasticDepth

__all__ = ["MViT", "MViT_V1_B_Weights", "mvit_v1_b", "MViT_V2_S_Weights", "mvit_v2_s"]


@dataclass
class MSBlockConfig:
    """One block: heads, input/output width, and the pooling kernels and strides of the
    queries and of the keys/values ((T, H, W) each; ``[]`` for no pooling)."""
    num_heads: int
    input_channels: int
    output_channels: int
    kernel_q: list
    kernel_kv: list
    stride_q: list
    stride_kv: list


def _prod(s):
    return math.prod(s)


class Pool(nn.Module):
    """Pools the token grid of ``(B, [heads,] 1 + T*H*W, C)`` (the class token passes
    through), then applies ``norm`` (and ``activation``) to all tokens."""

    def __init__(self, pool, norm, activation=None, norm_before_pool=False):
        super().__init__()
        self.pool = pool
        layers = [m for m in (norm, activation) if m is not None]
        self.norm_act = nn.Sequential(*layers) if layers else None
        self.norm_before_pool = norm_before_pool

    def forward(self, x, thw):
        squeeze = x.ndim == 3
        if squeeze:
            x = x.unsqueeze(1)
        elif x.ndim != 4:
            raise ValueError(f"Unsupported input dimension {tuple(x.shape)}")
        cls_tok, x = x[:, :, :1], x[:, :, 1:]
        x = x.transpose(2, 3)
        B, N, C = x.shape[:3]
        x = x.reshape((B * N, C) + tuple(thw)).contiguous()
        if self.norm_before_pool and self.norm_act is not None:
            x = self.norm_act(x)
        x = self.pool(x)
        T, H, W = x.shape[2:]
        x = fiamma.cat((cls_tok, x.reshape(B, N, C, -1).transpose(2, 3)), dim=2)
        if not self.norm_before_pool and self.norm_act is not None:
            x = self.norm_act(x)
        return (x.squeeze(1) if squeeze else x), (T, H, W)


def _interpolate(embedding, d):
    if embedding.shape[0] == d:
        return embedding
    return F.interpolate(embedding.permute(1, 0).unsqueeze(0), size=d,
                         mode="linear").squeeze(0).permute(1, 0)


def _rel_index(q, k):
    # float32 arithmetic then truncation, as torchvision computes it
    qr, kr = np.float32(max(k / q, 1.0)), np.float32(max(q / k, 1.0))
    dist = (np.arange(q, dtype=np.float32)[:, None] * qr
            - (np.arange(k, dtype=np.float32)[None, :] + np.float32(1.0 - k)) * kr)
    return fiamma.from_numpy(dist.astype(np.int64))


def _add_rel_pos(attn, q, q_thw, k_thw, rel_pos_h, rel_pos_w, rel_pos_t):
    """MViTv2's decomposed relative position term: for each query, a learned vector per
    relative offset along T, H and W, dotted with the query, added to the logits of the grid
    tokens (not the class token)."""
    q_t, q_h, q_w = q_thw
    k_t, k_h, k_w = k_thw
    Rh = _interpolate(rel_pos_h, 2 * max(q_h, k_h) - 1)[_rel_index(q_h, k_h)]
    Rw = _interpolate(rel_pos_w, 2 * max(q_w, k_w) - 1)[_rel_index(q_w, k_w)]
    Rt = _interpolate(rel_pos_t, 2 * max(q_t, k_t) - 1)[_rel_index(q_t, k_t)]
    B, n_head, _, dim = q.shape
    r_q = q[:, :, 1:].reshape(B, n_head, q_t, q_h, q_w, dim)
    rel_h = fiamma.einsum("bythwc,hkc->bythwk", r_q, Rh)
    rel_w = fiamma.einsum("bythwc,wkc->bythwk", r_q, Rw)
    rel_t = fiamma.einsum("bythwc,tkc->bythwk", r_q, Rt)
    rel = (rel_h[:, :, :, :, :, None, :, None] + rel_w[:, :, :, :, :, None, None, :]
           + rel_t[:, :, :, :, :, :, None, None])
    rel = rel.reshape(B, n_head, q_t * q_h * q_w, k_t * k_h * k_w)
    return attn + F.pad(rel, (1, 0, 1, 0))


class MultiscaleAttention(nn.Module):
    """Multi-head attention whose queries and keys/values are pooled (depthwise Conv3d +
    LayerNorm) before attending; with ``residual_pool`` the pooled queries are added to the
    output (to the grid tokens only unless ``residual_with_cls_embed``)."""

    def __init__(self, input_size, embed_dim, output_dim, num_heads, kernel_q, kernel_kv,
                 stride_q, stride_kv, residual_pool, residual_with_cls_embed, rel_pos_embed,
                 dropout=0.0, norm_layer=nn.LayerNorm):
        super().__init__()
        self.embed_dim = embed_dim
        self.output_dim = output_dim
        self.num_heads = num_heads
        self.head_dim = output_dim // num_heads
        self.scaler = 1.0 / math.sqrt(self.head_dim)
        self.residual_pool = residual_pool
        self.residual_with_cls_embed = residual_with_cls_embed
        self.qkv = nn.Linear(embed_dim, 3 * output_dim)
        layers = [nn.Linear(output_dim, output_dim)]
        if dropout > 0.0:
            layers.append(nn.Dropout(dropout, inplace=True))
        self.project = nn.Sequential(*layers)

        def pool(kernel, stride):
            return Pool(nn.Conv3d(self.head_dim, self.head_dim, kernel, stride=stride,
                                  padding=[k // 2 for k in kernel], groups=self.head_dim,
                                  bias=False), norm_layer(self.head_dim))
        self.pool_q = pool(kernel_q, stride_q) if _prod(kernel_q) > 1 or _prod(stride_q) > 1 \
            else None
        pool_kv = _prod(kernel_kv) > 1 or _prod(stride_kv) > 1
        self.pool_k = pool(kernel_kv, stride_kv) if pool_kv else None
        self.pool_v = pool(kernel_kv, stride_kv) if pool_kv else None
        self.rel_pos_h = self.rel_pos_w = self.rel_pos_t = None
        if rel_pos_embed:
            size = max(input_size[1:])
            q_size = size // stride_q[1] if len(stride_q) > 0 else size
            kv_size = size // stride_kv[1] if len(stride_kv) > 0 else size
            spatial = 2 * max(q_size, kv_size) - 1
            temporal = 2 * input_size[0] - 1
            if spatial < 1 or temporal < 1:
                raise ValueError(
                    f"MViT: the relative position embeddings need a token grid of at least "
                    f"1 x 1 x 1, got {tuple(input_size)} pooled by strides {tuple(stride_q)} / "
                    f"{tuple(stride_kv)}: build the model for a larger spatial_size or "
                    "temporal_size")
            self.rel_pos_h = nn.Parameter(fiamma.zeros(spatial, self.head_dim))
            self.rel_pos_w = nn.Parameter(fiamma.zeros(spatial, self.head_dim))
            self.rel_pos_t = nn.Parameter(fiamma.zeros(temporal, self.head_dim))
            for p in (self.rel_pos_h, self.rel_pos_w, self.rel_pos_t):
                nn.init.trunc_normal_(p, std=0.02)

    def forward(self, x, thw):
        B, N, _ = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).transpose(1, 3)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        k, k_thw = self.pool_k(k, thw) if self.pool_k is not None else (k, thw)
        if self.pool_v is not None:
            v = self.pool_v(v, thw)[0]
        if self.pool_q is not None:
            q, thw = self.pool_q(q, thw)
        attn = (self.scaler * q) @ k.transpose(2, 3)
        if self.rel_pos_h is not None:
            attn = _add_rel_pos(attn, q, thw, k_thw, self.rel_pos_h, self.rel_pos_w,
                                self.rel_pos_t)
        x = attn.softmax(dim=-1) @ v
        if self.residual_pool:
            x = x + (q if self.residual_with_cls_embed else F.pad(q[:, :, 1:], (0, 0, 1, 0)))
        x = x.transpose(1, 2).reshape(B, -1, self.output_dim)
        return self.project(x), thw


class MultiscaleBlock(nn.Module):
    """Pre-norm attention (the skip path max-pooled like the queries) and MLP, with a linear
    projection where the width changes (before the MLP, or after the attention with
    ``proj_after_attn``)."""

    def __init__(self, input_size, cnf, residual_pool, residual_with_cls_embed, rel_pos_embed,
                 proj_after_attn, dropout=0.0, stochastic_depth_prob=0.0,
                 norm_layer=nn.LayerNorm):
        super().__init__()
        self.proj_after_attn = proj_after_attn
        self.pool_skip = None
        if _prod(cnf.stride_q) > 1:
            kernel = [s + 1 if s > 1 else s for s in cnf.stride_q]
            self.pool_skip = Pool(nn.MaxPool3d(kernel, stride=cnf.stride_q,
                                               padding=[k // 2 for k in kernel]), None)
        attn_dim = cnf.output_channels if proj_after_attn else cnf.input_channels
        self.norm1 = norm_layer(cnf.input_channels)
        self.norm2 = norm_layer(attn_dim)
        self.needs_transposal = isinstance(self.norm1, nn.BatchNorm1d)
        self.attn = MultiscaleAttention(
            input_size, cnf.input_channels, attn_dim, cnf.num_heads, kernel_q=cnf.kernel_q,
            kernel_kv=cnf.kernel_kv, stride_q=cnf.stride_q, stride_kv=cnf.stride_kv,
            rel_pos_embed=rel_pos_embed, residual_pool=residual_pool,
            residual_with_cls_embed=residual_with_cls_embed, dropout=dropout,
            norm_layer=norm_layer)
        self.mlp = MLP(attn_dim, [4 * attn_dim, cnf.output_channels], activation_layer=nn.GELU,
                       dropout=dropout, inplace=None)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.project = None
        if cnf.input_channels != cnf.output_channels:
            self.project = nn.Linear(cnf.input_channels, cnf.output_channels)

    def _norm(self, norm, x):
        return norm(x.transpose(1, 2)).transpose(1, 2) if self.needs_transposal else norm(x)

    def forward(self, x, thw):
        x_norm1 = self._norm(self.norm1, x)
        x_attn, thw_new = self.attn(x_norm1, thw)
        if self.project is not None and self.proj_after_attn:
            x = self.project(x_norm1)
        x_skip = x if self.pool_skip is None else self.pool_skip(x, thw)[0]
        x = x_skip + self.stochastic_depth(x_attn)
        x_norm2 = self._norm(self.norm2, x)
        x_proj = x if self.project is None or self.proj_after_attn else self.project(x_norm2)
        return x_proj + self.stochastic_depth(self.mlp(x_norm2)), thw_new


class PositionalEncoding(nn.Module):
    """Prepends the class token; without relative position embeddings, adds learned absolute
    ones (temporal + spatial, and one for the class token)."""

    def __init__(self, embed_size, spatial_size, temporal_size, rel_pos_embed):
        super().__init__()
        self.spatial_size = tuple(spatial_size)
        self.temporal_size = temporal_size
        self.class_token = nn.Parameter(fiamma.zeros(embed_size))
        self.spatial_pos = self.temporal_pos = self.class_pos = None
        if not rel_pos_embed:
            self.spatial_pos = nn.Parameter(
                fiamma.zeros(self.spatial_size[0] * self.spatial_size[1], embed_size))
            self.temporal_pos = nn.Parameter(fiamma.zeros(self.temporal_size, embed_size))
            self.class_pos = nn.Parameter(fiamma.zeros(embed_size))

    def forward(self, x):
        cls_tok = self.class_token.expand(x.shape[0], -1).unsqueeze(1)
        x = fiamma.cat((cls_tok, x), dim=1)
        if self.spatial_pos is not None:
            hw, e = self.spatial_pos.shape
            pos = (self.temporal_pos[:, None, :] + self.spatial_pos[None]).reshape(-1, e)
            pos = fiamma.cat((self.class_pos.unsqueeze(0), pos), dim=0).unsqueeze(0)
            x = x + pos
        return x


class MViT(nn.Module):
    """MViT for clips of ``temporal_size`` frames of ``spatial_size`` pixels: a strided Conv3d
    patch embedding, the class token and position encoding, one :class:`MultiscaleBlock` per
    ``block_setting`` entry, LayerNorm, and a dropout + linear head on the class token.

    Args:
        spatial_size: the frame size (H, W) the model is built for.
        temporal_size: the clip length the model is built for.
        block_setting: a list of :class:`MSBlockConfig`.
        residual_pool: a V2 option (on for V2, off for V1).
        residual_with_cls_embed: a V2 option (off for V2 and V1).
        rel_pos_embed: a V2 option (on for V2, off for V1).
        proj_after_attn: a V2 option (on for V2, off for V1).
        dropout: of the head (0.5); attention_dropout: in the blocks (0.0).
        stochastic_depth_prob: the largest rate, linear over the blocks.
        num_classes: 400 (Kinetics-400); block, norm_layer (LayerNorm eps 1e-6): parts.
        patch_embed_kernel: (3, 7, 7).
        patch_embed_stride: (2, 4, 4).
        patch_embed_padding: (1, 3, 3).
    """

    def __init__(self, spatial_size, temporal_size, block_setting, residual_pool,
                 residual_with_cls_embed, rel_pos_embed, proj_after_attn, dropout=0.5,
                 attention_dropout=0.0, stochastic_depth_prob=0.0, num_classes=400, block=None,
                 norm_layer=None, patch_embed_kernel=(3, 7, 7), patch_embed_stride=(2, 4, 4),
                 patch_embed_padding=(1, 3, 3)):
        super().__init__()
        total = len(block_setting)
        if total == 0:
            raise ValueError("The configuration parameter can't be empty.")
        block = block or MultiscaleBlock
        norm_layer = norm_layer or functools.partial(nn.LayerNorm, eps=1e-6)
        self.conv_proj = nn.Conv3d(3, block_setting[0].input_channels,
                                   kernel_size=patch_embed_kernel, stride=patch_embed_stride,
                                   padding=patch_embed_padding)
        size = [s // st for s, st in zip((temporal_size,) + tuple(spatial_size),
                                         self.conv_proj.stride)]
        self.pos_encoding = PositionalEncoding(block_setting[0].input_channels, (size[1], size[2]),
                                               size[0], rel_pos_embed)
        self.blocks = nn.ModuleList()
        for i, cnf in enumerate(block_setting):
            self.blocks.append(block(
                input_size=size, cnf=cnf, residual_pool=residual_pool,
                residual_with_cls_embed=residual_with_cls_embed, rel_pos_embed=rel_pos_embed,
                proj_after_attn=proj_after_attn, dropout=attention_dropout,
                stochastic_depth_prob=stochastic_depth_prob * i / (total - 1.0) if total > 1
                else 0.0,
                norm_layer=norm_layer))
            if len(cnf.stride_q) > 0:
                size = [s // st for s, st in zip(size, cnf.stride_q)]
        self.norm = norm_layer(block_setting[-1].output_channels)
        self.head = nn.Sequential(nn.Dropout(dropout, inplace=True),
                                  nn.Linear(block_setting[-1].output_channels, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0.0)
            elif isinstance(m, nn.LayerNorm):
                if m.weight is not None:
                    nn.init.constant_(m.weight, 1.0)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0.0)
            elif isinstance(m, PositionalEncoding):
                for p in m.parameters():
                    nn.init.trunc_normal_(p, std=0.02)

    def forward(self, x):
        if x.ndim == 4:
            x = x.unsqueeze(2)
        elif x.ndim != 5:
            raise ValueError(f"MViT: expected a clip (N, C, T, H, W) or an image (N, C, H, W), "
                             f"got shape {tuple(x.shape)}")
        x = self.conv_proj(x)
        thw = (self.pos_encoding.temporal_size,) + self.pos_encoding.spatial_size
        if tuple(x.shape[2:]) != thw:
            raise ValueError(f"MViT: built for {thw} patches (T, H, W), the clip gives "
                             f"{tuple(x.shape[2:])}; build it with this clip's "
                             "temporal_size/spatial_size")
        x = self.pos_encoding(x.flatten(2).transpose(1, 2))
        for blk in self.blocks:
            x, thw = blk(x, thw)
        return self.head(self.norm(x)[:, 0])


def _weights(file, recipe, n, acc1, acc5, ops, size):
    return Weights(
        url="https://download.pytorch.org/models/" + file,
        transforms=_video_preset(crop_size=(224, 224), resize_size=(256,),
                                 mean=(0.45, 0.45, 0.45), std=(0.225, 0.225, 0.225)),
        meta={"min_size": (224, 224), "min_temporal_size": 16,
              "categories": kinetics400_categories(), "recipe": recipe,
              "_docs": "The weights were ported from the paper. The accuracies are estimated on "
                       "video-level with parameters `frame_rate=7.5`, `clips_per_video=5`, and "
                       "`clip_len=16`",
              "num_params": n, "_metrics": {"Kinetics-400": {"acc@1": acc1, "acc@5": acc5}},
              "_ops": ops, "_file_size": size})


class MViT_V1_B_Weights(WeightsEnum):
    KINETICS400_V1 = _weights(
        "mvit_v1_b-dbeb1030.pth",
        "https://github.com/facebookresearch/pytorchvideo/blob/main/docs/source/model_zoo.md",
        36610672, 78.477, 93.582, 70.599, 139.764)
    DEFAULT = KINETICS400_V1


class MViT_V2_S_Weights(WeightsEnum):
    KINETICS400_V1 = _weights(
        "mvit_v2_s-ae3be167.pth",
        "https://github.com/facebookresearch/SlowFast/blob/main/MODEL_ZOO.md",
        34537744, 80.757, 94.665, 64.224, 131.884)
    DEFAULT = KINETICS400_V1


_HEADS = [1, 2, 2, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 8, 8]
_KV_STRIDES = [[1, 8, 8], [1, 4, 4], [1, 4, 4]] + [[1, 2, 2]] * 11 + [[1, 1, 1]] * 2


def _v1_setting():
    ins = [96, 192, 192] + [384] * 11 + [768, 768]
    outs = [192, 192] + [384] * 11 + [768] * 3
    pooled = {1, 3, 14}  # the blocks whose queries are pooled (stride 1x2x2)
    return [MSBlockConfig(_HEADS[i], ins[i], outs[i], [3, 3, 3] if i in pooled else [],
                          [3, 3, 3], [1, 2, 2] if i in pooled else [], _KV_STRIDES[i])
            for i in range(16)]


def _v2_setting():
    ins = [96, 96, 192, 192] + [384] * 11 + [768]
    outs = [96, 192, 192] + [384] * 11 + [768, 768]
    pooled = {1, 3, 14}
    return [MSBlockConfig(_HEADS[i], ins[i], outs[i], [3, 3, 3], [3, 3, 3],
                          [1, 2, 2] if i in pooled else [1, 1, 1], _KV_STRIDES[i])
            for i in range(16)]


def _mvit(enum_cls, weights, progress, kwargs, setting, **options):
    from collections.abc import Mapping

    from fiamma.vision.models._api import resolve_weights
    if not isinstance(weights, Mapping) and \
            isinstance(resolve_weights(enum_cls, weights), WeightsEnum):
        meta = enum_cls.DEFAULT.meta
        overwrite_named_param(kwargs, "spatial_size", meta["min_size"])
        overwrite_named_param(kwargs, "temporal_size", meta["min_temporal_size"])
    spatial = kwargs.pop("spatial_size", (224, 224))
    temporal = kwargs.pop("temporal_size", 16)
    sd = kwargs.pop("stochastic_depth_prob", 0.2)
    return build(enum_cls, weights, progress, kwargs,
                 lambda **kw: MViT(spatial_size=spatial, temporal_size=temporal,
                                   block_setting=setting, stochastic_depth_prob=sd, **options,
                                   **kw))


_ARGS = """

    Args:
        weights: a :class:`{0}` member or its name (``"KINETICS400_V1"``, ``"DEFAULT"``), the
            path of a local checkpoint file, a state dict, or None (random initialisation).
        progress: show a progress bar while downloading.
        **kwargs: passed to :class:`MViT` (``spatial_size``, ``temporal_size``,
            ``num_classes``, ``stochastic_depth_prob``, ...).
"""


@register_model(weights=MViT_V1_B_Weights)
def mvit_v1_b(*, weights=None, progress=True, **kwargs):
    return _mvit(MViT_V1_B_Weights, weights, progress, kwargs, _v1_setting(),
                 residual_pool=False, residual_with_cls_embed=False, rel_pos_embed=False,
                 proj_after_attn=False)


@register_model(weights=MViT_V2_S_Weights)
def mvit_v2_s(*, weights=None, progress=True, **kwargs):
    return _mvit(MViT_V2_S_Weights, weights, progress, kwargs, _v2_setting(),
                 residual_pool=True, residual_with_cls_embed=False, rel_pos_embed=True,
                 proj_after_attn=True)


mvit_v1_b.__doc__ = ("MViT V1-B (Fan et al., Multiscale Vision Transformers), for 16 x 224 x "
                     "224 clips." + _ARGS.format("MViT_V1_B_Weights"))
mvit_v2_s.__doc__ = ("MViTv2-S (Li et al., MViTv2: Improved Multiscale Vision Transformers), "
                     "for 16 x 224 x 224 clips." + _ARGS.format("MViT_V2_S_Weights"))
