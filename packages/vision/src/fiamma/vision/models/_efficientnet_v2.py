"""EfficientNetV2 S/M/L (Tan & Le, 2021) as torchvision builds them: Fused-MBConv stages
(one full k x k convolution in place of the expand + depthwise pair) followed by MBConv stages,
re-exported from :mod:`fiamma.vision.models.efficientnet`."""
from functools import partial

from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.models._weights_util import (
    build,
    classification_preset,
    make_divisible,
    registered_builder,
)
from fiamma.vision.ops.misc import Conv2dNormActivation
from fiamma.vision.ops.stochastic_depth import StochasticDepth
from fiamma.vision.transforms.functional import InterpolationMode

__all__ = ["FusedMBConvConfig", "FusedMBConv", "EfficientNet_V2_S_Weights",
           "EfficientNet_V2_M_Weights", "EfficientNet_V2_L_Weights", "efficientnet_v2_s",
           "efficientnet_v2_m", "efficientnet_v2_l"]


class FusedMBConvConfig:
    """Settings of one stage of Fused-MBConv blocks (channels used as given)."""

    def __init__(self, expand_ratio, kernel, stride, input_channels, out_channels, num_layers,
                 block=None):
        self.expand_ratio = expand_ratio
        self.kernel = kernel
        self.stride = stride
        self.input_channels = input_channels
        self.out_channels = out_channels
        self.num_layers = num_layers
        self.block = block or FusedMBConv

    @staticmethod
    def adjust_channels(channels, width_mult, min_value=None):
        return make_divisible(channels * width_mult, 8, min_value)


class FusedMBConv(nn.Module):
    """k x k expand conv (strided) + 1x1 projection, or a single k x k conv when the expand
    ratio is 1; residual with stochastic depth when shapes allow."""

    def __init__(self, cnf, stochastic_depth_prob, norm_layer):
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError(f"FusedMBConv: illegal stride value {cnf.stride}")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        expanded = cnf.adjust_channels(cnf.input_channels, cnf.expand_ratio)
        if expanded != cnf.input_channels:
            layers = [
                Conv2dNormActivation(cnf.input_channels, expanded, kernel_size=cnf.kernel,
                                     stride=cnf.stride, norm_layer=norm_layer,
                                     activation_layer=nn.SiLU),
                Conv2dNormActivation(expanded, cnf.out_channels, kernel_size=1,
                                     norm_layer=norm_layer, activation_layer=None)]
        else:
            layers = [Conv2dNormActivation(cnf.input_channels, cnf.out_channels,
                                           kernel_size=cnf.kernel, stride=cnf.stride,
                                           norm_layer=norm_layer, activation_layer=nn.SiLU)]
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.out_channels = cnf.out_channels

    def forward(self, input):
        result = self.block(input)
        if self.use_res_connect:
            result = self.stochastic_depth(result)
            result = result + input
        return result


def _v2_conf(arch):
    from fiamma.vision.models.efficientnet import MBConvConfig
    fused, mb = FusedMBConvConfig, MBConvConfig
    if arch == "s":
        return [fused(1, 3, 1, 24, 24, 2), fused(4, 3, 2, 24, 48, 4), fused(4, 3, 2, 48, 64, 4),
                mb(4, 3, 2, 64, 128, 6), mb(6, 3, 1, 128, 160, 9), mb(6, 3, 2, 160, 256, 15)]
    if arch == "m":
        return [fused(1, 3, 1, 24, 24, 3), fused(4, 3, 2, 24, 48, 5), fused(4, 3, 2, 48, 80, 5),
                mb(4, 3, 2, 80, 160, 7), mb(6, 3, 1, 160, 176, 14), mb(6, 3, 2, 176, 304, 18),
                mb(6, 3, 1, 304, 512, 5)]
    return [fused(1, 3, 1, 32, 32, 4), fused(4, 3, 2, 32, 64, 7), fused(4, 3, 2, 64, 96, 7),
            mb(4, 3, 2, 96, 192, 10), mb(6, 3, 1, 192, 224, 19), mb(6, 3, 2, 224, 384, 25),
            mb(6, 3, 1, 384, 640, 7)]


_RECIPE = "https://github.com/pytorch/vision/tree/main/references/classification#efficientnet-v2"


def _weights(file, size, n, a1, a5, ops, mb, interp="BILINEAR", mean=None, std=None):
    extra = {} if mean is None else {"mean": mean, "std": std}
    return Weights(
        url="https://download.pytorch.org/models/" + file,
        transforms=classification_preset(crop_size=size, resize_size=size,
                                         interpolation=InterpolationMode[interp], **extra),
        meta={"categories": imagenet_categories(), "min_size": (33, 33), "recipe": _RECIPE,
              "num_params": n, "_metrics": {"ImageNet-1K": {"acc@1": a1, "acc@5": a5}},
              "_ops": ops, "_file_size": mb},
    )


class EfficientNet_V2_S_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("efficientnet_v2_s-dd5fe13b.pth", 384, 21458488, 84.228, 96.878,
                             8.366, 82.704)
    DEFAULT = IMAGENET1K_V1


class EfficientNet_V2_M_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("efficientnet_v2_m-dc08266a.pth", 480, 54139356, 85.112, 97.156,
                             24.582, 208.010)
    DEFAULT = IMAGENET1K_V1


class EfficientNet_V2_L_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("efficientnet_v2_l-59c71312.pth", 480, 118515272, 85.808, 97.788,
                             56.080, 454.573, "BICUBIC", (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    DEFAULT = IMAGENET1K_V1


def _make_builder(arch, dropout, enum_cls):
    def builder(*, weights=None, progress=True, **kwargs):
        from fiamma.vision.models.efficientnet import EfficientNet
        setting = _v2_conf(arch)
        drop = kwargs.pop("dropout", dropout)
        kwargs.setdefault("norm_layer", partial(nn.BatchNorm2d, eps=1e-03))
        return build(enum_cls, weights, progress, kwargs,
                     lambda **kw: EfficientNet(setting, drop, last_channel=1280, **kw))
    return registered_builder(builder, f"efficientnet_v2_{arch}", enum_cls,
                              f"EfficientNetV2-{arch.upper()}")


efficientnet_v2_s = _make_builder("s", 0.2, EfficientNet_V2_S_Weights)
efficientnet_v2_m = _make_builder("m", 0.3, EfficientNet_V2_M_Weights)
efficientnet_v2_l = _make_builder("l", 0.4, EfficientNet_V2_L_Weights)
