"""MobileNetV2 (Sandler et al., 2018) with torchvision's module names, defaults, init and
weights."""
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
from fiamma.vision.ops.misc import Conv2dNormActivation

__all__ = ["MobileNetV2", "MobileNet_V2_Weights", "mobilenet_v2"]


class InvertedResidual(nn.Module):
    """Expand (1x1) -> depthwise (3x3) -> linear project (1x1), residual when shapes allow."""

    def __init__(self, inp, oup, stride, expand_ratio, norm_layer=None):
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"InvertedResidual: stride should be 1 or 2 instead of {stride}")
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        self.stride = stride
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers = []
        if expand_ratio != 1:
            layers.append(Conv2dNormActivation(inp, hidden_dim, kernel_size=1,
                                               norm_layer=norm_layer,
                                               activation_layer=nn.ReLU6))
        layers += [
            Conv2dNormActivation(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim,
                                 norm_layer=norm_layer, activation_layer=nn.ReLU6),
            nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
            norm_layer(oup),
        ]
        self.conv = nn.Sequential(*layers)
        self.out_channels = oup
        self._is_cn = stride > 1

    def forward(self, x):
        if self.use_res_connect:
            return x + self.conv(x)
        return self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2: ``features`` (stem, 17 inverted residual blocks, 1x1 conv to
    ``last_channel``), global average pool, ``classifier`` (Dropout, Linear).

        >>> m = MobileNetV2(num_classes=10).eval()
        >>> m(fiamma.randn(1, 3, 64, 64)).shape
        fiamma.Size([1, 10])
    """

    def __init__(self, num_classes=1000, width_mult=1.0, inverted_residual_setting=None,
                 round_nearest=8, block=None, norm_layer=None, dropout=0.2):
        super().__init__()
        if block is None:
            block = InvertedResidual
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        input_channel = 32
        last_channel = 1280
        if inverted_residual_setting is None:
            inverted_residual_setting = [
                # t, c, n, s
                [1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2],
                [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1],
            ]
        if len(inverted_residual_setting) == 0 or len(inverted_residual_setting[0]) != 4:
            raise ValueError(f"MobileNetV2: inverted_residual_setting should be a non-empty list "
                             f"of 4-element lists, got {inverted_residual_setting}")
        input_channel = make_divisible(input_channel * width_mult, round_nearest)
        self.last_channel = make_divisible(last_channel * max(1.0, width_mult), round_nearest)
        features = [Conv2dNormActivation(3, input_channel, stride=2, norm_layer=norm_layer,
                                         activation_layer=nn.ReLU6)]
        for t, c, n, s in inverted_residual_setting:
            output_channel = make_divisible(c * width_mult, round_nearest)
            for i in range(n):
                features.append(block(input_channel, output_channel, s if i == 0 else 1, t,
                                      norm_layer=norm_layer))
                input_channel = output_channel
        features.append(Conv2dNormActivation(input_channel, self.last_channel, kernel_size=1,
                                             norm_layer=norm_layer, activation_layer=nn.ReLU6))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout),
                                        nn.Linear(self.last_channel, num_classes))
        init_weights(self, normal_linear)

    def forward(self, x):
        x = self.features(x)
        x = nn.functional.adaptive_avg_pool2d(x, (1, 1))
        x = x.flatten(1)  # a method: int8 tensors after convert
        return self.classifier(x)


_COMMON_META = {
    "num_params": 3504872,
    "min_size": (1, 1),
    "categories": imagenet_categories(),
}


class MobileNet_V2_Weights(WeightsEnum):
    IMAGENET1K_V1 = Weights(
        url="https://download.pytorch.org/models/mobilenet_v2-b0353104.pth",
        transforms=classification_preset(crop_size=224),
        meta={**_COMMON_META,
              "recipe": "https://github.com/pytorch/vision/tree/main/references/classification#mobilenetv2",
              "_metrics": {"ImageNet-1K": {"acc@1": 71.878, "acc@5": 90.286}},
              "_ops": 0.301, "_file_size": 13.555},
    )
    IMAGENET1K_V2 = Weights(
        url="https://download.pytorch.org/models/mobilenet_v2-7ebf99e0.pth",
        transforms=classification_preset(crop_size=224, resize_size=232),
        meta={**_COMMON_META,
              "recipe": "https://github.com/pytorch/vision/issues/3995#new-recipe-with-reg-tuning",
              "_metrics": {"ImageNet-1K": {"acc@1": 72.154, "acc@5": 90.822}},
              "_ops": 0.301, "_file_size": 13.598},
    )
    DEFAULT = IMAGENET1K_V2


@register_model(weights=MobileNet_V2_Weights)
def mobilenet_v2(*, weights=None, progress=True, **kwargs):
    """MobileNetV2 (torchvision's ``mobilenet_v2``). ``weights``: a
    :class:`MobileNet_V2_Weights` member or name, ``"DEFAULT"``, None, or a checkpoint path."""
    return build(MobileNet_V2_Weights, weights, progress, kwargs, MobileNetV2)
