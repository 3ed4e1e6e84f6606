"""MobileNetV3 (Howard et al., 2019), Large and Small, with torchvision's module names,
defaults, init and weights."""
from functools import partial

from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.models._weights_util import (
    build,
    classification_preset,
    init_weights,
    make_divisible,
    normal_linear,
)
from fiamma.vision.ops.misc import Conv2dNormActivation, SqueezeExcitation as SElayer

__all__ = ["MobileNetV3", "MobileNet_V3_Large_Weights", "MobileNet_V3_Small_Weights",
           "mobilenet_v3_large", "mobilenet_v3_small"]


class InvertedResidualConfig:
    """One block's settings; channel counts are scaled by ``width_mult`` and rounded to 8."""

    def __init__(self, input_channels, kernel, expanded_channels, out_channels, use_se,
                 activation, stride, dilation, width_mult):
        self.input_channels = self.adjust_channels(input_channels, width_mult)
        self.kernel = kernel
        self.expanded_channels = self.adjust_channels(expanded_channels, width_mult)
        self.out_channels = self.adjust_channels(out_channels, width_mult)
        self.use_se = use_se
        self.use_hs = activation == "HS"
        self.stride = stride
        self.dilation = dilation

    @staticmethod
    def adjust_channels(channels, width_mult):
        return make_divisible(channels * width_mult, 8)


class InvertedResidual(nn.Module):
    """Expand (1x1) -> depthwise (k x k) -> [SE with hard-sigmoid] -> project (1x1)."""

    def __init__(self, cnf, norm_layer, se_layer=partial(SElayer, scale_activation=nn.Hardsigmoid)):
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError(f"InvertedResidual: illegal stride value {cnf.stride}")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        activation_layer = nn.Hardswish if cnf.use_hs else nn.ReLU
        layers = []
        if cnf.expanded_channels != cnf.input_channels:
            layers.append(Conv2dNormActivation(cnf.input_channels, cnf.expanded_channels,
                                               kernel_size=1, norm_layer=norm_layer,
                                               activation_layer=activation_layer))
        stride = 1 if cnf.dilation > 1 else cnf.stride
        layers.append(Conv2dNormActivation(cnf.expanded_channels, cnf.expanded_channels,
                                           kernel_size=cnf.kernel, stride=stride,
                                           dilation=cnf.dilation, groups=cnf.expanded_channels,
                                           norm_layer=norm_layer,
                                           activation_layer=activation_layer))
        if cnf.use_se:
            squeeze_channels = make_divisible(cnf.expanded_channels // 4, 8)
            layers.append(se_layer(cnf.expanded_channels, squeeze_channels))
        layers.append(Conv2dNormActivation(cnf.expanded_channels, cnf.out_channels, kernel_size=1,
                                           norm_layer=norm_layer, activation_layer=None))
        self.block = nn.Sequential(*layers)
        self.out_channels = cnf.out_channels
        self._is_cn = cnf.stride > 1

    def forward(self, input):
        result = self.block(input)
        if self.use_res_connect:
            result = result + input
        return result


class MobileNetV3(nn.Module):
    """MobileNetV3 from a list of :class:`InvertedResidualConfig`: ``features``, ``avgpool``,
    ``classifier`` (Linear, Hardswish, Dropout, Linear).

        >>> m = mobilenet_v3_small(num_classes=10).eval()
        >>> m(fiamma.randn(1, 3, 64, 64)).shape
        fiamma.Size([1, 10])
    """

    def __init__(self, inverted_residual_setting, last_channel, num_classes=1000, block=None,
                 norm_layer=None, dropout=0.2, **kwargs):
        super().__init__()
        if not inverted_residual_setting:
            raise ValueError("MobileNetV3: the inverted_residual_setting should not be empty")
        if not all(isinstance(s, InvertedResidualConfig) for s in inverted_residual_setting):
            raise TypeError("MobileNetV3: the inverted_residual_setting should be a list of "
                            "InvertedResidualConfig")
        if block is None:
            block = InvertedResidual
        if norm_layer is None:
            norm_layer = partial(nn.BatchNorm2d, eps=0.001, momentum=0.01)
        layers = []
        firstconv_output_channels = inverted_residual_setting[0].input_channels
        layers.append(Conv2dNormActivation(3, firstconv_output_channels, kernel_size=3, stride=2,
                                           norm_layer=norm_layer,
                                           activation_layer=nn.Hardswish))
        for cnf in inverted_residual_setting:
            layers.append(block(cnf, norm_layer))
        lastconv_input_channels = inverted_residual_setting[-1].out_channels
        lastconv_output_channels = 6 * lastconv_input_channels
        layers.append(Conv2dNormActivation(lastconv_input_channels, lastconv_output_channels,
                                           kernel_size=1, norm_layer=norm_layer,
                                           activation_layer=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(lastconv_output_channels, last_channel),
            nn.Hardswish(inplace=True),
            nn.Dropout(p=dropout, inplace=True),
            nn.Linear(last_channel, num_classes),
        )
        init_weights(self, normal_linear)

    def forward(self, x):
        x = self.features(x)
        x = self.avgpool(x)
        x = x.flatten(1)  # a method: int8 tensors after convert
        return self.classifier(x)


def _mobilenet_v3_conf(arch, width_mult=1.0, reduced_tail=False, dilated=False, **kwargs):
    reduce_divider = 2 if reduced_tail else 1
    dilation = 2 if dilated else 1
    bneck_conf = partial(InvertedResidualConfig, width_mult=width_mult)
    adjust_channels = partial(InvertedResidualConfig.adjust_channels, width_mult=width_mult)
    rd = reduce_divider
    if arch == "mobilenet_v3_large":
        setting = [
            bneck_conf(16, 3, 16, 16, False, "RE", 1, 1),
            bneck_conf(16, 3, 64, 24, False, "RE", 2, 1),  # C1
            bneck_conf(24, 3, 72, 24, False, "RE", 1, 1),
            bneck_conf(24, 5, 72, 40, True, "RE", 2, 1),  # C2
            bneck_conf(40, 5, 120, 40, True, "RE", 1, 1),
            bneck_conf(40, 5, 120, 40, True, "RE", 1, 1),
            bneck_conf(40, 3, 240, 80, False, "HS", 2, 1),  # C3
            bneck_conf(80, 3, 200, 80, False, "HS", 1, 1),
            bneck_conf(80, 3, 184, 80, False, "HS", 1, 1),
            bneck_conf(80, 3, 184, 80, False, "HS", 1, 1),
            bneck_conf(80, 3, 480, 112, True, "HS", 1, 1),
            bneck_conf(112, 3, 672, 112, True, "HS", 1, 1),
            bneck_conf(112, 5, 672, 160 // rd, True, "HS", 2, dilation),  # C4
            bneck_conf(160 // rd, 5, 960 // rd, 160 // rd, True, "HS", 1, dilation),
            bneck_conf(160 // rd, 5, 960 // rd, 160 // rd, True, "HS", 1, dilation),
        ]
        last_channel = adjust_channels(1280 // rd)
    elif arch == "mobilenet_v3_small":
        setting = [
            bneck_conf(16, 3, 16, 16, True, "RE", 2, 1),  # C1
            bneck_conf(16, 3, 72, 24, False, "RE", 2, 1),  # C2
            bneck_conf(24, 3, 88, 24, False, "RE", 1, 1),
            bneck_conf(24, 5, 96, 40, True, "HS", 2, 1),  # C3
            bneck_conf(40, 5, 240, 40, True, "HS", 1, 1),
            bneck_conf(40, 5, 240, 40, True, "HS", 1, 1),
            bneck_conf(40, 5, 120, 48, True, "HS", 1, 1),
            bneck_conf(48, 5, 144, 48, True, "HS", 1, 1),
            bneck_conf(48, 5, 288, 96 // rd, True, "HS", 2, dilation),  # C4
            bneck_conf(96 // rd, 5, 576 // rd, 96 // rd, True, "HS", 1, dilation),
            bneck_conf(96 // rd, 5, 576 // rd, 96 // rd, True, "HS", 1, dilation),
        ]
        last_channel = adjust_channels(1024 // rd)
    else:
        raise ValueError(f"Unsupported model type {arch}")
    return setting, last_channel


def _mobilenet_v3(arch, enum_cls, weights, progress, kwargs):
    conf = {k: kwargs.pop(k) for k in ("width_mult", "reduced_tail", "dilated") if k in kwargs}
    setting, last_channel = _mobilenet_v3_conf(arch, **conf)
    return build(enum_cls, weights, progress, kwargs,
                 lambda **kw: MobileNetV3(setting, last_channel, **kw))


_COMMON_META = {"min_size": (1, 1), "categories": imagenet_categories()}


class MobileNet_V3_Large_Weights(WeightsEnum):
    IMAGENET1K_V1 = Weights(
        url="https://download.pytorch.org/models/mobilenet_v3_large-8738ca79.pth",
        transforms=classification_preset(crop_size=224),
        meta={**_COMMON_META, "num_params": 5483032,
              "recipe": "https://github.com/pytorch/vision/tree/main/references/classification#mobilenetv3-large--small",
              "_metrics": {"ImageNet-1K": {"acc@1": 74.042, "acc@5": 91.340}},
              "_ops": 0.217, "_file_size": 21.114},
    )
    IMAGENET1K_V2 = Weights(
        url="https://download.pytorch.org/models/mobilenet_v3_large-5c1a4163.pth",
        transforms=classification_preset(crop_size=224, resize_size=232),
        meta={**_COMMON_META, "num_params": 5483032,
              "recipe": "https://github.com/pytorch/vision/issues/3995#new-recipe-with-reg-tuning",
              "_metrics": {"ImageNet-1K": {"acc@1": 75.274, "acc@5": 92.566}},
              "_ops": 0.217, "_file_size": 21.107},
    )
    DEFAULT = IMAGENET1K_V2


class MobileNet_V3_Small_Weights(WeightsEnum):
    IMAGENET1K_V1 = Weights(
        url="https://download.pytorch.org/models/mobilenet_v3_small-047dcff4.pth",
        transforms=classification_preset(crop_size=224),
        meta={**_COMMON_META, "num_params": 2542856,
              "recipe": "https://github.com/pytorch/vision/tree/main/references/classification#mobilenetv3-large--small",
              "_metrics": {"ImageNet-1K": {"acc@1": 67.668, "acc@5": 87.402}},
              "_ops": 0.057, "_file_size": 9.829},
    )
    DEFAULT = IMAGENET1K_V1


@register_model(weights=MobileNet_V3_Large_Weights)
def mobilenet_v3_large(*, weights=None, progress=True, **kwargs):
    """MobileNetV3-Large (torchvision's ``mobilenet_v3_large``; also ``width_mult``,
    ``reduced_tail``, ``dilated``). ``weights``: member, name, ``"DEFAULT"``, None or a path."""
    return _mobilenet_v3("mobilenet_v3_large", MobileNet_V3_Large_Weights, weights, progress,
                         kwargs)


@register_model(weights=MobileNet_V3_Small_Weights)
def mobilenet_v3_small(*, weights=None, progress=True, **kwargs):
    """MobileNetV3-Small (torchvision's ``mobilenet_v3_small``). ``weights`` as for
    :func:`mobilenet_v3_large`."""
    return _mobilenet_v3("mobilenet_v3_small", MobileNet_V3_Small_Weights, weights, progress,
                         kwargs)
