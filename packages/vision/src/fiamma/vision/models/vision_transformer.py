"""Vision Transformer (Dosovitskiy et al., 2020) with torchvision's module names
(``conv_proj``, ``class_token``, ``encoder.pos_embedding``,
``encoder.layers.encoder_layer_N.{ln_1,self_attention,ln_2,mlp}``, ``encoder.ln``,
``heads.head``), defaults, init and weights."""
import math
from collections import OrderedDict
from functools import partial

import fiamma
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model, resolve_weights
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.models._weights_util import build, classification_preset, overwrite_named_param
from fiamma.vision.ops.misc import MLP
from fiamma.vision.transforms.functional import InterpolationMode

__all__ = ["VisionTransformer", "ViT_B_16_Weights", "ViT_B_32_Weights", "ViT_L_16_Weights",
           "ViT_L_32_Weights", "ViT_H_14_Weights", "vit_b_16", "vit_b_32", "vit_l_16",
           "vit_l_32", "vit_h_14"]


class MLPBlock(MLP):
    """Transformer MLP: Linear, GELU, Dropout, Linear, Dropout (keys ``0.*`` and ``3.*``)."""

    def __init__(self, in_dim, mlp_dim, dropout):
        super().__init__(in_dim, [mlp_dim, in_dim], activation_layer=nn.GELU, inplace=None,
                         dropout=dropout)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.normal_(m.bias, std=1e-6)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, *args, **kwargs):
        # checkpoints of torchvision < 0.14 name the two layers linear_1 / linear_2
        for i, j in ((1, 0), (2, 3)):
            for kind in ("weight", "bias"):
                old = f"{prefix}linear_{i}.{kind}"
                if old in state_dict:
                    state_dict[f"{prefix}{j}.{kind}"] = state_dict.pop(old)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs, *args, **kwargs)


class EncoderBlock(nn.Module):
    """Pre-norm transformer layer: ``x + attn(ln_1(x))``, then ``+ mlp(ln_2(.))``."""

    def __init__(self, num_heads, hidden_dim, mlp_dim, dropout, attention_dropout,
                 norm_layer=partial(nn.LayerNorm, eps=1e-6)):
        super().__init__()
        self.num_heads = num_heads
        self.ln_1 = norm_layer(hidden_dim)
        self.self_attention = nn.MultiheadAttention(hidden_dim, num_heads,
                                                    dropout=attention_dropout, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.ln_2 = norm_layer(hidden_dim)
        self.mlp = MLPBlock(hidden_dim, mlp_dim, dropout)

    def forward(self, input):
        if input.ndim != 3:
            raise ValueError(f"EncoderBlock: expected (batch_size, seq_length, hidden_dim) got "
                             f"{tuple(input.shape)}")
        x = self.ln_1(input)
        x, _ = self.self_attention(x, x, x, need_weights=False)
        x = self.dropout(x)
        x = x + input
        y = self.ln_2(x)
        y = self.mlp(y)
        return x + y


class Encoder(nn.Module):
    """Learned position embedding, dropout, ``num_layers`` :class:`EncoderBlock`, LayerNorm."""

    def __init__(self, seq_length, num_layers, num_heads, hidden_dim, mlp_dim, dropout,
                 attention_dropout, norm_layer=partial(nn.LayerNorm, eps=1e-6)):
        super().__init__()
        self.pos_embedding = nn.Parameter(fiamma.empty(1, seq_length, hidden_dim).normal_(std=0.02))
        self.dropout = nn.Dropout(dropout)
        layers = OrderedDict()
        for i in range(num_layers):
            layers[f"encoder_layer_{i}"] = EncoderBlock(num_heads, hidden_dim, mlp_dim, dropout,
                                                        attention_dropout, norm_layer)
        self.layers = nn.Sequential(layers)
        self.ln = norm_layer(hidden_dim)

    def forward(self, input):
        if input.ndim != 3:
            raise ValueError(f"Encoder: expected (batch_size, seq_length, hidden_dim) got "
                             f"{tuple(input.shape)}")
        input = input + self.pos_embedding
        return self.ln(self.layers(self.dropout(input)))


class VisionTransformer(nn.Module):
    """ViT: non-overlapping ``patch_size`` patches embedded by ``conv_proj``, a class token,
    the :class:`Encoder`, and ``heads`` on the class token's output.

        >>> m = VisionTransformer(32, 8, num_layers=2, num_heads=2, hidden_dim=16, mlp_dim=32,
        ...                       num_classes=10).eval()
        >>> m(fiamma.randn(1, 3, 32, 32)).shape
        fiamma.Size([1, 10])
    """

    def __init__(self, image_size, patch_size, num_layers, num_heads, hidden_dim, mlp_dim,
                 dropout=0.0, attention_dropout=0.0, num_classes=1000, representation_size=None,
                 norm_layer=partial(nn.LayerNorm, eps=1e-6), conv_stem_configs=None):
        super().__init__()
        if image_size % patch_size != 0:
            raise ValueError(f"VisionTransformer: input shape indivisible by patch size: "
                             f"{image_size} % {patch_size}")
        if conv_stem_configs is not None:
            raise NotImplementedError("VisionTransformer: conv_stem_configs is not supported")
        self.image_size = image_size
        self.patch_size = patch_size
        self.hidden_dim = hidden_dim
        self.mlp_dim = mlp_dim
        self.attention_dropout = attention_dropout
        self.dropout = dropout
        self.num_classes = num_classes
        self.representation_size = representation_size
        self.norm_layer = norm_layer
        self.conv_proj = nn.Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)
        seq_length = (image_size // patch_size) ** 2
        self.class_token = nn.Parameter(fiamma.zeros(1, 1, hidden_dim))
        seq_length += 1
        self.encoder = Encoder(seq_length, num_layers, num_heads, hidden_dim, mlp_dim, dropout,
                               attention_dropout, norm_layer)
        self.seq_length = seq_length
        heads = OrderedDict()
        if representation_size is None:
            heads["head"] = nn.Linear(hidden_dim, num_classes)
        else:
            heads["pre_logits"] = nn.Linear(hidden_dim, representation_size)
            heads["act"] = nn.Tanh()
            heads["head"] = nn.Linear(representation_size, num_classes)
        self.heads = nn.Sequential(heads)
        fan_in = self.conv_proj.in_channels * self.conv_proj.kernel_size[0] * \
            self.conv_proj.kernel_size[1]
        nn.init.trunc_normal_(self.conv_proj.weight, std=math.sqrt(1 / fan_in))
        if self.conv_proj.bias is not None:
            nn.init.zeros_(self.conv_proj.bias)
        if hasattr(self.heads, "pre_logits"):
            fan_in = self.heads.pre_logits.in_features
            nn.init.trunc_normal_(self.heads.pre_logits.weight, std=math.sqrt(1 / fan_in))
            nn.init.zeros_(self.heads.pre_logits.bias)
        nn.init.zeros_(self.heads.head.weight)
        nn.init.zeros_(self.heads.head.bias)

    def _process_input(self, x):
        n, c, h, w = x.shape
        p = self.patch_size
        if h != self.image_size or w != self.image_size:
            raise ValueError(f"VisionTransformer: wrong image size: expected "
                             f"{self.image_size}x{self.image_size}, got {h}x{w}")
        n_h, n_w = h // p, w // p
        x = self.conv_proj(x)
        x = x.reshape(n, self.hidden_dim, n_h * n_w)
        return x.permute(0, 2, 1)

    def forward(self, x):
        x = self._process_input(x)
        n = x.shape[0]
        batch_class_token = self.class_token.expand(n, -1, -1)
        x = fiamma.cat([batch_class_token, x], dim=1)
        x = self.encoder(x)
        x = x[:, 0]
        return self.heads(x)


def _vision_transformer(enum_cls, weights, progress, kwargs, **arch):
    w = resolve_weights(enum_cls, weights)
    if isinstance(w, WeightsEnum):
        overwrite_named_param(kwargs, "image_size", w.meta["min_size"][0])
    image_size = kwargs.pop("image_size", 224)
    return build(enum_cls, w, progress, kwargs,
                 partial(VisionTransformer, image_size=image_size, **arch))


_COMMON_META = {"categories": imagenet_categories()}
_RECIPES = "https://github.com/pytorch/vision/tree/main/references/classification#"


def _v1(url, num_params, acc1, acc5, ops, size, recipe, resize=None):
    kw = {"crop_size": 224} if resize is None else {"crop_size": 224, "resize_size": resize}
    return Weights(
        url="https://download.pytorch.org/models/" + url,
        transforms=classification_preset(**kw),
        meta={**_COMMON_META, "num_params": num_params, "min_size": (224, 224),
              "recipe": _RECIPES + recipe,
              "_metrics": {"ImageNet-1K": {"acc@1": acc1, "acc@5": acc5}},
              "_ops": ops, "_file_size": size,
              "_docs": "These weights were trained from scratch by using a modified version of "
                       "DeIT's training recipe."},
    )


def _swag(url, size, num_params, acc1, acc5, ops, file_size, linear):
    docs = ("These weights are composed of the original frozen SWAG trunk weights and a linear "
            "classifier learnt on top of them trained on ImageNet-1K data." if linear else
            "These weights are learnt via transfer learning by end-to-end fine-tuning the "
            "original SWAG weights on ImageNet-1K data.")
    meta = {**_COMMON_META, "recipe": "https://github.com/facebookresearch/SWAG",
            "license": "https://github.com/facebookresearch/SWAG/blob/main/LICENSE",
            "num_params": num_params, "min_size": (size, size),
            "_metrics": {"ImageNet-1K": {"acc@1": acc1, "acc@5": acc5}},
            "_ops": ops, "_file_size": file_size, "_docs": docs}
    if linear:
        meta["recipe"] = "https://github.com/pytorch/vision/pull/5793"
    return Weights(url="https://download.pytorch.org/models/" + url,
                   transforms=classification_preset(crop_size=size, resize_size=size,
                                                    interpolation=InterpolationMode.BICUBIC),
                   meta=meta)


class ViT_B_16_Weights(WeightsEnum):
    IMAGENET1K_V1 = _v1("vit_b_16-c867db91.pth", 86567656, 81.072, 95.318, 17.564, 330.285,
                        "vit_b_16")
    IMAGENET1K_SWAG_E2E_V1 = _swag("vit_b_16_swag-9ac1b537.pth", 384, 86859496, 85.304, 97.650,
                                   55.484, 331.398, False)
    IMAGENET1K_SWAG_LINEAR_V1 = _swag("vit_b_16_lc_swag-4e70ced5.pth", 224, 86567656, 81.886,
                                      96.180, 17.564, 330.285, True)
    DEFAULT = IMAGENET1K_V1


class ViT_B_32_Weights(WeightsEnum):
    IMAGENET1K_V1 = _v1("vit_b_32-d86f8d99.pth", 88224232, 75.912, 92.466, 4.409, 336.604,
                        "vit_b_32")
    DEFAULT = IMAGENET1K_V1


class ViT_L_16_Weights(WeightsEnum):
    IMAGENET1K_V1 = _v1("vit_l_16-852ce7e3.pth", 304326632, 79.662, 94.638, 61.555, 1161.023,
                        "vit_l_16", resize=242)
    IMAGENET1K_SWAG_E2E_V1 = _swag("vit_l_16_swag-4f3808c9.pth", 512, 305174504, 88.064, 98.512,
                                   361.986, 1164.258, False)
    IMAGENET1K_SWAG_LINEAR_V1 = _swag("vit_l_16_lc_swag-4d563306.pth", 224, 304326632, 85.146,
                                      97.422, 61.555, 1161.023, True)
    DEFAULT = IMAGENET1K_V1


class ViT_L_32_Weights(WeightsEnum):
    IMAGENET1K_V1 = _v1("vit_l_32-c7638314.pth", 306535400, 76.972, 93.07, 15.378, 1169.449,
                        "vit_l_32")
    DEFAULT = IMAGENET1K_V1


class ViT_H_14_Weights(WeightsEnum):
    IMAGENET1K_SWAG_E2E_V1 = _swag("vit_h_14_swag-80465313.pth", 518, 633470440, 88.552, 98.694,
                                   1016.717, 2416.643, False)
    IMAGENET1K_SWAG_LINEAR_V1 = _swag("vit_h_14_lc_swag-c1eb923e.pth", 224, 632045800, 85.708,
                                      97.730, 167.295, 2411.209, True)
    DEFAULT = IMAGENET1K_SWAG_E2E_V1


@register_model(weights=ViT_B_16_Weights)
def vit_b_16(*, weights=None, progress=True, **kwargs):
    """ViT-B/16 (torchvision's ``vit_b_16``). ``weights``: a :class:`ViT_B_16_Weights` member
    or name, ``"DEFAULT"``, None, or a checkpoint path."""
    return _vision_transformer(ViT_B_16_Weights, weights, progress, kwargs, patch_size=16,
                               num_layers=12, num_heads=12, hidden_dim=768, mlp_dim=3072)


@register_model(weights=ViT_B_32_Weights)
def vit_b_32(*, weights=None, progress=True, **kwargs):
    """ViT-B/32 (torchvision's ``vit_b_32``)."""
    return _vision_transformer(ViT_B_32_Weights, weights, progress, kwargs, patch_size=32,
                               num_layers=12, num_heads=12, hidden_dim=768, mlp_dim=3072)


@register_model(weights=ViT_L_16_Weights)
def vit_l_16(*, weights=None, progress=True, **kwargs):
    """ViT-L/16 (torchvision's ``vit_l_16``)."""
    return _vision_transformer(ViT_L_16_Weights, weights, progress, kwargs, patch_size=16,
                               num_layers=24, num_heads=16, hidden_dim=1024, mlp_dim=4096)


@register_model(weights=ViT_L_32_Weights)
def vit_l_32(*, weights=None, progress=True, **kwargs):
    """ViT-L/32 (torchvision's ``vit_l_32``)."""
    return _vision_transformer(ViT_L_32_Weights, weights, progress, kwargs, patch_size=32,
                               num_layers=24, num_heads=16, hidden_dim=1024, mlp_dim=4096)


@register_model(weights=ViT_H_14_Weights)
def vit_h_14(*, weights=None, progress=True, **kwargs):
    """ViT-H/14 (torchvision's ``vit_h_14``; SWAG weights only)."""
    return _vision_transformer(ViT_H_14_Weights, weights, progress, kwargs, patch_size=14,
                               num_layers=32,
                               num_heads=16, hidden_dim=1280, mlp_dim=5120)
