"""ConvNeXt (Liu et al., 2022) with torchvision's module names, defaults, initialisation and
weights: ``convnext_tiny``/``small``/``base``/``large``.

    >>> import fiamma
    >>> from fiamma.vision.models import convnext_tiny
    >>> m = convnext_tiny(num_classes=10).eval()
    >>> m(fiamma.randn(1, 3, 32, 32)).shape
    fiamma.Size([1, 10])
"""
from functools import partial

import fiamma
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.models._weights_util import build, classification_preset, registered_builder
from fiamma.vision.ops.misc import Conv2dNormActivation, Permute
from fiamma.vision.ops.stochastic_depth import StochasticDepth
from fiamma.vision.transforms.functional import InterpolationMode

__all__ = ["ConvNeXt", "CNBlock", "CNBlockConfig", "LayerNorm2d", "ConvNeXt_Tiny_Weights",
           "ConvNeXt_Small_Weights", "ConvNeXt_Base_Weights", "ConvNeXt_Large_Weights",
           "convnext_tiny", "convnext_small", "convnext_base", "convnext_large"]


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channel dimension of an NCHW tensor (each pixel normalised across
    its channels), with LayerNorm's parameters ``weight``/``bias`` of shape (C,).

        >>> LayerNorm2d(8)(fiamma.randn(2, 8, 5, 5)).shape
        fiamma.Size([2, 8, 5, 5])
    """

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"LayerNorm2d: expected a 4-d (N, C, H, W) input, got {x.ndim}-d "
                             f"shape {tuple(x.shape)}")
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class CNBlock(nn.Module):
    """Depthwise 7x7 conv, LayerNorm, Linear(4x) + GELU + Linear in channels-last layout,
    scaled per channel by ``layer_scale`` and added to the input (with stochastic depth)."""

    def __init__(self, dim, layer_scale, stochastic_depth_prob, norm_layer=None):
        super().__init__()
        if norm_layer is None:
            norm_layer = partial(nn.LayerNorm, eps=1e-6)
        self.block = nn.Sequential(
            nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim, bias=True),
            Permute([0, 2, 3, 1]),
            norm_layer(dim),
            nn.Linear(dim, 4 * dim, bias=True),
            nn.GELU(),
            nn.Linear(4 * dim, dim, bias=True),
            Permute([0, 3, 1, 2]),
        )
        self.layer_scale = nn.Parameter(fiamma.ones(dim, 1, 1) * layer_scale)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")

    def forward(self, input):
        result = self.layer_scale * self.block(input)
        result = self.stochastic_depth(result)
        return result + input


class CNBlockConfig:
    """One stage: ``num_layers`` blocks of width ``input_channels``, then (if
    ``out_channels`` is not None) a 2x2 stride-2 downsampling to ``out_channels``."""

    def __init__(self, input_channels, out_channels, num_layers):
        self.input_channels = input_channels
        self.out_channels = out_channels
        self.num_layers = num_layers

    def __repr__(self):
        return (f"CNBlockConfig(input_channels={self.input_channels}, "
                f"out_channels={self.out_channels}, num_layers={self.num_layers})")


class ConvNeXt(nn.Module):
    """ConvNeXt from a list of :class:`CNBlockConfig`: ``features`` (4x4 patchify stem,
    stages and downsampling layers), ``avgpool``, ``classifier`` (LayerNorm2d, Flatten,
    Linear)."""

    def __init__(self, block_setting, stochastic_depth_prob=0.0, layer_scale=1e-6,
                 num_classes=1000, block=None, norm_layer=None, **kwargs):
        super().__init__()
        if not block_setting:
            raise ValueError("ConvNeXt: the block_setting should not be empty")
        if not all(isinstance(s, CNBlockConfig) for s in block_setting):
            raise TypeError("ConvNeXt: the block_setting should be a list of CNBlockConfig")
        if kwargs:
            raise TypeError(f"ConvNeXt: unexpected keyword arguments {sorted(kwargs)}")
        block = block or CNBlock
        norm_layer = norm_layer or partial(LayerNorm2d, eps=1e-6)
        layers = [Conv2dNormActivation(3, block_setting[0].input_channels, kernel_size=4,
                                       stride=4, padding=0, norm_layer=norm_layer,
                                       activation_layer=None, bias=True)]
        total_stage_blocks = sum(cnf.num_layers for cnf in block_setting)
        stage_block_id = 0
        for cnf in block_setting:
            stage = []
            for _ in range(cnf.num_layers):
                # the drop rate grows linearly from 0 to stochastic_depth_prob
                sd_prob = stochastic_depth_prob * stage_block_id / max(total_stage_blocks - 1.0,
                                                                       1.0)
                stage.append(block(cnf.input_channels, layer_scale, sd_prob))
                stage_block_id += 1
            layers.append(nn.Sequential(*stage))
            if cnf.out_channels is not None:
                layers.append(nn.Sequential(
                    norm_layer(cnf.input_channels),
                    nn.Conv2d(cnf.input_channels, cnf.out_channels, kernel_size=2, stride=2)))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        last = block_setting[-1]
        last_channels = last.out_channels if last.out_channels is not None else \
            last.input_channels
        self.classifier = nn.Sequential(norm_layer(last_channels), nn.Flatten(1),
                                        nn.Linear(last_channels, num_classes))
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.features(x)
        x = self.avgpool(x)
        return self.classifier(x)


_RECIPE = "https://github.com/pytorch/vision/tree/main/references/classification#convnext"

# name: (stage widths, stage depths, stochastic depth, file, resize, num_params, acc@1, acc@5,
#        GFLOPS, file size MB)
_CONFIGS = {
    "tiny": ((96, 192, 384, 768), (3, 3, 9, 3), 0.1, "convnext_tiny-983f1562.pth", 236,
             28589128, 82.520, 96.146, 4.456, 109.119),
    "small": ((96, 192, 384, 768), (3, 3, 27, 3), 0.4, "convnext_small-0c510722.pth", 230,
              50223688, 83.616, 96.650, 8.684, 191.703),
    "base": ((128, 256, 512, 1024), (3, 3, 27, 3), 0.5, "convnext_base-6075fbad.pth", 232,
             88591464, 84.062, 96.870, 15.355, 338.064),
    "large": ((192, 384, 768, 1536), (3, 3, 27, 3), 0.5, "convnext_large-ea097f82.pth", 232,
              197767336, 84.414, 96.976, 34.361, 754.537),
}


def _weights(name):
    _, _, _, file, resize, n, a1, a5, ops, size = _CONFIGS[name]
    return Weights(
        url="https://download.pytorch.org/models/" + file,
        transforms=classification_preset(crop_size=224, resize_size=resize,
                                         interpolation=InterpolationMode.BILINEAR),
        meta={"categories": imagenet_categories(), "min_size": (32, 32), "recipe": _RECIPE,
              "num_params": n, "_metrics": {"ImageNet-1K": {"acc@1": a1, "acc@5": a5}},
              "_ops": ops, "_file_size": size,
              "_docs": "These weights improve upon the results of the original paper by using "
                       "a modified version of TorchVision's new training recipe."},
    )


class ConvNeXt_Tiny_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("tiny")
    DEFAULT = IMAGENET1K_V1


class ConvNeXt_Small_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("small")
    DEFAULT = IMAGENET1K_V1


class ConvNeXt_Base_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("base")
    DEFAULT = IMAGENET1K_V1


class ConvNeXt_Large_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("large")
    DEFAULT = IMAGENET1K_V1


def _make_builder(name, enum_cls):
    widths, depths, sd = _CONFIGS[name][:3]

    def builder(*, weights=None, progress=True, **kwargs):
        setting = [CNBlockConfig(widths[i], widths[i + 1] if i < 3 else None, depths[i])
                   for i in range(4)]
        sd_prob = kwargs.pop("stochastic_depth_prob", sd)
        return build(enum_cls, weights, progress, kwargs,
                     lambda **kw: ConvNeXt(setting, stochastic_depth_prob=sd_prob, **kw))
    return registered_builder(builder, f"convnext_{name}", enum_cls,
                              f"ConvNeXt {name.capitalize()}")


convnext_tiny = _make_builder("tiny", ConvNeXt_Tiny_Weights)
convnext_small = _make_builder("small", ConvNeXt_Small_Weights)
convnext_base = _make_builder("base", ConvNeXt_Base_Weights)
convnext_large = _make_builder("large", ConvNeXt_Large_Weights)
