"""RegNet X and Y (Radosavovic et al., 2020) with torchvision's module names (so checkpoints
load by key), width quantisation, initialisation and weights enums.

    >>> import fiamma
    >>> from fiamma.vision.models import regnet_y_400mf
    >>> m = regnet_y_400mf(num_classes=10).eval()
    >>> m(fiamma.randn(1, 3, 32, 32)).shape
    fiamma.Size([1, 10])
"""
import math
from collections import OrderedDict
from functools import partial

import numpy as np

import fiamma
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.models._weights_util import (
    build,
    classification_preset,
    make_divisible,
    registered_builder,
)
from fiamma.vision.ops.misc import Conv2dNormActivation, SqueezeExcitation
from fiamma.vision.transforms.functional import InterpolationMode

_SIZES = ["400mf", "800mf", "1_6gf", "3_2gf", "8gf", "16gf", "32gf"]
_NAMES = [f"regnet_y_{s}" for s in _SIZES + ["128gf"]] + [f"regnet_x_{s}" for s in _SIZES]


def _enum_name(name):
    return "RegNet_" + name[7:].upper() + "_Weights"


__all__ = ["RegNet", "BlockParams", "SimpleStemIN", "BottleneckTransform", "ResBottleneckBlock",
           "AnyStage"] + _NAMES + [_enum_name(n) for n in _NAMES]


class SimpleStemIN(Conv2dNormActivation):
    """The stem: 3x3 stride-2 convolution, norm, activation."""

    def __init__(self, width_in, width_out, norm_layer, activation_layer):
        super().__init__(width_in, width_out, kernel_size=3, stride=2, norm_layer=norm_layer,
                         activation_layer=activation_layer)


class BottleneckTransform(nn.Sequential):
    """1x1 (``a``), grouped 3x3 (``b``), optional squeeze-excitation (``se``), 1x1 (``c``)."""

    def __init__(self, width_in, width_out, stride, norm_layer, activation_layer, group_width,
                 bottleneck_multiplier, se_ratio):
        layers = OrderedDict()
        w_b = int(round(width_out * bottleneck_multiplier))
        g = w_b // group_width
        layers["a"] = Conv2dNormActivation(width_in, w_b, kernel_size=1, stride=1,
                                           norm_layer=norm_layer,
                                           activation_layer=activation_layer)
        layers["b"] = Conv2dNormActivation(w_b, w_b, kernel_size=3, stride=stride, groups=g,
                                           norm_layer=norm_layer,
                                           activation_layer=activation_layer)
        if se_ratio:
            # the squeeze width is a fraction of the block's input width, not of w_b
            layers["se"] = SqueezeExcitation(w_b, int(round(se_ratio * width_in)),
                                             activation=activation_layer)
        layers["c"] = Conv2dNormActivation(w_b, width_out, kernel_size=1, stride=1,
                                           norm_layer=norm_layer, activation_layer=None)
        super().__init__(layers)


class ResBottleneckBlock(nn.Module):
    """Residual bottleneck block: ``activation(proj(x) + f(x))``, ``proj`` a 1x1 projection
    when the width or resolution changes."""

    def __init__(self, width_in, width_out, stride, norm_layer, activation_layer, group_width=1,
                 bottleneck_multiplier=1.0, se_ratio=None):
        super().__init__()
        self.proj = None
        if width_in != width_out or stride != 1:
            self.proj = Conv2dNormActivation(width_in, width_out, kernel_size=1, stride=stride,
                                             norm_layer=norm_layer, activation_layer=None)
        self.f = BottleneckTransform(width_in, width_out, stride, norm_layer, activation_layer,
                                     group_width, bottleneck_multiplier, se_ratio)
        self.activation = activation_layer(inplace=True)

    def forward(self, x):
        if self.proj is not None:
            x = self.proj(x) + self.f(x)
        else:
            x = x + self.f(x)
        return self.activation(x)


class AnyStage(nn.Sequential):
    """``depth`` blocks named ``block{stage_index}-{i}``; the first one strides."""

    def __init__(self, width_in, width_out, stride, depth, block_constructor, norm_layer,
                 activation_layer, group_width, bottleneck_multiplier, se_ratio=None,
                 stage_index=0):
        super().__init__()
        for i in range(depth):
            block = block_constructor(width_in if i == 0 else width_out, width_out,
                                      stride if i == 0 else 1, norm_layer, activation_layer,
                                      group_width, bottleneck_multiplier, se_ratio)
            self.add_module(f"block{stage_index}-{i}", block)


class BlockParams:
    """Per-stage depths, widths, group widths, bottleneck multipliers and strides."""

    def __init__(self, depths, widths, group_widths, bottleneck_multipliers, strides,
                 se_ratio=None):
        self.depths = depths
        self.widths = widths
        self.group_widths = group_widths
        self.bottleneck_multipliers = bottleneck_multipliers
        self.strides = strides
        self.se_ratio = se_ratio

    @classmethod
    def from_init_params(cls, depth, w_0, w_a, w_m, group_width, bottleneck_multiplier=1.0,
                         se_ratio=None, **kwargs):
        """The quantised linear parameterisation of the paper: block widths
        ``w_0 * w_m ** round(log(u_j / w_0) / log(w_m))`` with ``u_j = w_0 + w_a * j``,
        rounded to multiples of 8; consecutive equal widths form a stage."""
        quant, stride = 8, 2
        if w_a < 0 or w_0 <= 0 or w_m <= 1 or w_0 % 8 != 0:
            raise ValueError(f"RegNet: invalid settings w_0={w_0}, w_a={w_a}, w_m={w_m} "
                             f"(need w_a >= 0, w_0 > 0 a multiple of 8, w_m > 1)")
        # float32 as torchvision computes it, so the rounding ties fall the same way
        f32 = np.float32
        widths_cont = np.arange(depth).astype(f32) * f32(w_a) + f32(w_0)
        capacity = np.round(np.log(widths_cont / f32(w_0)) / f32(math.log(w_m)))
        widths = (np.round(f32(w_0) * np.power(f32(w_m), capacity.astype(f32)) / f32(quant))
                  * f32(quant)).astype(np.int64).tolist()
        num_stages = len(set(widths))
        splits = [w != wp for w, wp in zip(widths + [0], [0] + widths)]
        stage_widths = [w for w, t in zip(widths, splits[:-1]) if t]
        starts = [d for d, t in enumerate(splits) if t]
        stage_depths = [b - a for a, b in zip(starts, starts[1:])]
        strides = [stride] * num_stages
        bottleneck_multipliers = [bottleneck_multiplier] * num_stages
        group_widths = [group_width] * num_stages
        stage_widths, group_widths = cls._adjust_widths_groups_compatibilty(
            stage_widths, bottleneck_multipliers, group_widths)
        return cls(depths=stage_depths, widths=stage_widths, group_widths=group_widths,
                   bottleneck_multipliers=bottleneck_multipliers, strides=strides,
                   se_ratio=se_ratio)

    def _get_expanded_params(self):
        return zip(self.widths, self.strides, self.depths, self.group_widths,
                   self.bottleneck_multipliers)

    @staticmethod
    def _adjust_widths_groups_compatibilty(stage_widths, bottleneck_ratios, group_widths):
        """Make each bottleneck width a multiple of its (possibly reduced) group width."""
        widths = [int(w * b) for w, b in zip(stage_widths, bottleneck_ratios)]
        group_widths_min = [min(g, w_bot) for g, w_bot in zip(group_widths, widths)]
        ws_bot = [make_divisible(w_bot, g) for w_bot, g in zip(widths, group_widths_min)]
        stage_widths = [int(w_bot / b) for w_bot, b in zip(ws_bot, bottleneck_ratios)]
        return stage_widths, group_widths_min


class RegNet(nn.Module):
    """``stem``, ``trunk_output`` (stages ``block1``..), ``avgpool``, ``fc``."""

    def __init__(self, block_params, num_classes=1000, stem_width=32, stem_type=None,
                 block_type=None, norm_layer=None, activation=None):
        super().__init__()
        stem_type = stem_type or SimpleStemIN
        norm_layer = norm_layer or nn.BatchNorm2d
        block_type = block_type or ResBottleneckBlock
        activation = activation or nn.ReLU
        self.stem = stem_type(3, stem_width, norm_layer, activation)
        current_width = stem_width
        blocks = []
        for i, (width_out, stride, depth, group_width, bottleneck_multiplier) in enumerate(
                block_params._get_expanded_params()):
            blocks.append((f"block{i + 1}", AnyStage(
                current_width, width_out, stride, depth, block_type, norm_layer, activation,
                group_width, bottleneck_multiplier, block_params.se_ratio, stage_index=i + 1)))
            current_width = width_out
        self.trunk_output = nn.Sequential(OrderedDict(blocks))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(current_width, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                nn.init.normal_(m.weight, mean=0.0, std=math.sqrt(2.0 / fan_out))
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0.0, std=0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.stem(x)
        x = self.trunk_output(x)
        x = self.avgpool(x)
        x = fiamma.flatten(x, 1)
        return self.fc(x)


# name: (depth, w_0, w_a, w_m, group_width, se_ratio)
_PARAMS = {
    "regnet_y_400mf": (16, 48, 27.89, 2.09, 8, 0.25),
    "regnet_y_800mf": (14, 56, 38.84, 2.4, 16, 0.25),
    "regnet_y_1_6gf": (27, 48, 20.71, 2.65, 24, 0.25),
    "regnet_y_3_2gf": (21, 80, 42.63, 2.66, 24, 0.25),
    "regnet_y_8gf": (17, 192, 76.82, 2.19, 56, 0.25),
    "regnet_y_16gf": (18, 200, 106.23, 2.48, 112, 0.25),
    "regnet_y_32gf": (20, 232, 115.89, 2.53, 232, 0.25),
    "regnet_y_128gf": (27, 456, 160.83, 2.52, 264, 0.25),
    "regnet_x_400mf": (22, 24, 24.48, 2.54, 16, None),
    "regnet_x_800mf": (16, 56, 35.73, 2.28, 16, None),
    "regnet_x_1_6gf": (18, 80, 34.01, 2.25, 24, None),
    "regnet_x_3_2gf": (25, 88, 26.31, 2.25, 48, None),
    "regnet_x_8gf": (23, 80, 49.56, 2.88, 120, None),
    "regnet_x_16gf": (22, 216, 55.59, 2.1, 128, None),
    "regnet_x_32gf": (23, 320, 69.86, 2.0, 168, None),
}

_REF = "https://github.com/pytorch/vision/"
_V1_RECIPE = {"400mf": "small", "800mf": "small", "1_6gf": "small", "3_2gf": "medium",
              "8gf": "medium", "16gf": "large", "32gf": "large"}
_SWAG_LICENSE = "https://github.com/facebookresearch/SWAG/blob/main/LICENSE"

# name: (num_params, V1 (hash, acc@1, acc@5, file MB), V2 (hash, acc@1, acc@5, fixres recipe),
#        GFLOPS)
_W = {
    "regnet_y_400mf": (4344144, ("c65dace8", 74.046, 91.716, 16.806),
                       ("e6988f5f", 75.804, 92.742, False), 0.402),
    "regnet_y_800mf": (6432512, ("1b27b58c", 76.420, 93.136, 24.774),
                       ("58fc7688", 78.828, 94.502, False), 0.834),
    "regnet_y_1_6gf": (11202430, ("b11a554e", 77.950, 93.966, 43.152),
                       ("0d7bc02a", 80.876, 95.444, False), 1.612),
    "regnet_y_3_2gf": (19436338, ("b5a9779c", 78.948, 94.576, 74.567),
                       ("9180c971", 81.982, 95.972, False), 3.176),
    "regnet_y_8gf": (39381472, ("d0d0e4a8", 80.032, 95.048, 150.701),
                     ("dc2b1b54", 82.828, 96.330, False), 8.473),
    "regnet_y_16gf": (83590140, ("9e6ed7dd", 80.424, 95.240, 319.49),
                      ("3e4a00f9", 82.886, 96.328, False), 15.912),
    "regnet_y_32gf": (145046770, ("4dee3f7a", 80.878, 95.340, 554.076),
                      ("8db6d4b5", 83.368, 96.498, False), 32.28),
    "regnet_y_128gf": (644812894, None, None, None),
    "regnet_x_400mf": (5495976, ("adf1edd5", 72.834, 90.950, 21.258),
                       ("62229a5f", 74.864, 92.322, True, 21.257), 0.414),
    "regnet_x_800mf": (7259656, ("ad17e45c", 75.212, 92.348, 27.945),
                       ("94a99ebd", 77.522, 93.826, True), 0.8),
    "regnet_x_1_6gf": (9190136, ("e3633e7f", 77.040, 93.440, 35.339),
                       ("a12f2b72", 79.668, 94.922, True), 1.603),
    "regnet_x_3_2gf": (15296552, ("f342aeae", 78.364, 93.992, 58.756),
                       ("7071aa85", 81.196, 95.430, False), 3.177),
    "regnet_x_8gf": (39572648, ("03ceed89", 79.344, 94.686, 151.456),
                     ("2b70d774", 81.682, 95.678, False), 7.995),
    "regnet_x_16gf": (54278536, ("2007eb11", 80.058, 94.944, 207.627),
                      ("ba3796d7", 82.716, 96.196, False), 15.941),
    "regnet_x_32gf": (107811560, ("9d47f8d0", 80.622, 95.248, 412.039),
                      ("6eb8fdc6", 83.014, 96.288, False), 31.736),
}

# name: E2E (hash, acc@1, acc@5, GFLOPS), LINEAR (hash, acc@1, acc@5, GFLOPS), file MB
_SWAG = {
    "regnet_y_16gf": (("43afe44d", 86.012, 98.054, 46.735), ("f3ec0043", 83.976, 97.244, 15.912),
                      319.49),
    "regnet_y_32gf": (("04fdfa75", 86.838, 98.362, 94.826), ("e1583746", 84.622, 97.480, 32.28),
                      554.076),
    "regnet_y_128gf": (("c8ce3e52", 88.228, 98.682, 374.57), ("cbe8ce12", 86.068, 97.844, 127.518),
                       2461.564),
}


def _meta(name, n, recipe, a1, a5, ops, size, **extra):
    return {"categories": imagenet_categories(), "min_size": (1, 1), "num_params": n,
            "recipe": recipe, "_metrics": {"ImageNet-1K": {"acc@1": a1, "acc@5": a5}},
            "_ops": ops, "_file_size": size, **extra}


def _make_enum(name):
    n, v1, v2, ops = _W[name]
    members = {}
    url = "https://download.pytorch.org/models/"
    if v1 is not None:
        h, a1, a5, size = v1
        size_tag = name.rsplit("_", 1)[1] if name.count("_") == 2 else name[9:]
        group = "medium" if name == "regnet_x_16gf" else _V1_RECIPE[size_tag]
        recipe = f"{_REF}tree/main/references/classification#{group}-models"
        members["IMAGENET1K_V1"] = Weights(
            url=f"{url}{name}-{h}.pth",
            transforms=classification_preset(crop_size=224),
            meta=_meta(name, n, recipe, a1, a5, ops, size,
                       _docs="These weights reproduce closely the results of the paper using "
                             "a simple training recipe."))
        h, a1, a5, fixres, *size2 = v2
        recipe = f"{_REF}issues/3995#new-recipe" + ("-with-fixres" if fixres else "")
        members["IMAGENET1K_V2"] = Weights(
            url=f"{url}{name}-{h}.pth",
            transforms=classification_preset(crop_size=224, resize_size=232),
            meta=_meta(name, n, recipe, a1, a5, ops, size2[0] if size2 else size,
                       _docs="These weights improve upon the results of the original paper by "
                             "using a modified version of TorchVision's new training recipe."))
    if name in _SWAG:
        (he, e1, e5, eops), (hl, l1, l5, lops), size = _SWAG[name]
        members["IMAGENET1K_SWAG_E2E_V1"] = Weights(
            url=f"{url}{name}_swag-{he}.pth",
            transforms=classification_preset(crop_size=384, resize_size=384,
                                             interpolation=InterpolationMode.BICUBIC),
            meta=_meta(name, n, "https://github.com/facebookresearch/SWAG", e1, e5, eops, size,
                       license=_SWAG_LICENSE,
                       _docs="These weights are learnt via transfer learning by end-to-end "
                             "fine-tuning the original SWAG weights on ImageNet-1K data."))
        members["IMAGENET1K_SWAG_LINEAR_V1"] = Weights(
            url=f"{url}{name}_lc_swag-{hl}.pth",
            transforms=classification_preset(crop_size=224, resize_size=224,
                                             interpolation=InterpolationMode.BICUBIC),
            meta=_meta(name, n, "https://github.com/pytorch/vision/pull/5793", l1, l5, lops,
                       size, license=_SWAG_LICENSE,
                       _docs="These weights are composed of the original frozen SWAG trunk "
                             "weights and a linear classifier learnt on top of them trained on "
                             "ImageNet-1K data."))
    members["DEFAULT"] = members.get("IMAGENET1K_V2", members.get("IMAGENET1K_SWAG_E2E_V1"))
    return WeightsEnum(_enum_name(name), members, module=__name__)


def _make_builder(name, enum_cls):
    depth, w_0, w_a, w_m, group_width, se_ratio = _PARAMS[name]

    def builder(*, weights=None, progress=True, **kwargs):
        params = BlockParams.from_init_params(depth=depth, w_0=w_0, w_a=w_a, w_m=w_m,
                                              group_width=group_width, se_ratio=se_ratio)
        kwargs.setdefault("norm_layer", partial(nn.BatchNorm2d, eps=1e-05, momentum=0.1))
        return build(enum_cls, weights, progress, kwargs,
                     lambda **kw: RegNet(params, **kw))
    return registered_builder(builder, name, enum_cls, name)


RegNet_Y_400MF_Weights = _make_enum("regnet_y_400mf")
RegNet_Y_800MF_Weights = _make_enum("regnet_y_800mf")
RegNet_Y_1_6GF_Weights = _make_enum("regnet_y_1_6gf")
RegNet_Y_3_2GF_Weights = _make_enum("regnet_y_3_2gf")
RegNet_Y_8GF_Weights = _make_enum("regnet_y_8gf")
RegNet_Y_16GF_Weights = _make_enum("regnet_y_16gf")
RegNet_Y_32GF_Weights = _make_enum("regnet_y_32gf")
RegNet_Y_128GF_Weights = _make_enum("regnet_y_128gf")
RegNet_X_400MF_Weights = _make_enum("regnet_x_400mf")
RegNet_X_800MF_Weights = _make_enum("regnet_x_800mf")
RegNet_X_1_6GF_Weights = _make_enum("regnet_x_1_6gf")
RegNet_X_3_2GF_Weights = _make_enum("regnet_x_3_2gf")
RegNet_X_8GF_Weights = _make_enum("regnet_x_8gf")
RegNet_X_16GF_Weights = _make_enum("regnet_x_16gf")
RegNet_X_32GF_Weights = _make_enum("regnet_x_32gf")

regnet_y_400mf = _make_builder("regnet_y_400mf", RegNet_Y_400MF_Weights)
regnet_y_800mf = _make_builder("regnet_y_800mf", RegNet_Y_800MF_Weights)
regnet_y_1_6gf = _make_builder("regnet_y_1_6gf", RegNet_Y_1_6GF_Weights)
regnet_y_3_2gf = _make_builder("regnet_y_3_2gf", RegNet_Y_3_2GF_Weights)
regnet_y_8gf = _make_builder("regnet_y_8gf", RegNet_Y_8GF_Weights)
regnet_y_16gf = _make_builder("regnet_y_16gf", RegNet_Y_16GF_Weights)
regnet_y_32gf = _make_builder("regnet_y_32gf", RegNet_Y_32GF_Weights)
regnet_y_128gf = _make_builder("regnet_y_128gf", RegNet_Y_128GF_Weights)
regnet_x_400mf = _make_builder("regnet_x_400mf", RegNet_X_400MF_Weights)
regnet_x_800mf = _make_builder("regnet_x_800mf", RegNet_X_800MF_Weights)
regnet_x_1_6gf = _make_builder("regnet_x_1_6gf", RegNet_X_1_6GF_Weights)
regnet_x_3_2gf = _make_builder("regnet_x_3_2gf", RegNet_X_3_2GF_Weights)
regnet_x_8gf = _make_builder("regnet_x_8gf", RegNet_X_8GF_Weights)
regnet_x_16gf = _make_builder("regnet_x_16gf", RegNet_X_16GF_Weights)
regnet_x_32gf = _make_builder("regnet_x_32gf", RegNet_X_32GF_Weights)
