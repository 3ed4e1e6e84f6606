"""ShuffleNetV2 (Ma et al., 2018) with torchvision's module names, defaults and weights."""
import fiamma
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.models._weights_util import build, classification_preset

__all__ = ["ShuffleNetV2", "ShuffleNet_V2_X0_5_Weights", "ShuffleNet_V2_X1_0_Weights",
           "ShuffleNet_V2_X1_5_Weights", "ShuffleNet_V2_X2_0_Weights", "shufflenet_v2_x0_5",
           "shufflenet_v2_x1_0", "shufflenet_v2_x1_5", "shufflenet_v2_x2_0"]


def channel_shuffle(x, groups):
    n, c, h, w = x.shape
    x = x.reshape(n, groups, c // groups, h, w).transpose(1, 2)
    return x.reshape(n, c, h, w)


def _depthwise_conv(i, o, kernel_size, stride=1, padding=0, bias=False):
    return nn.Conv2d(i, o, kernel_size, stride, padding, bias=bias, groups=i)


class InvertedResidual(nn.Module):
    """ShuffleNetV2 unit: split (stride 1) or duplicate (stride 2) the channels, run the
    branches, concatenate, shuffle."""

    def __init__(self, inp, oup, stride):
        super().__init__()
        if not 1 <= stride <= 3:
            raise ValueError(f"InvertedResidual: illegal stride value {stride}")
        self.stride = stride
        branch_features = oup // 2
        if stride == 1 and inp != branch_features << 1:
            raise ValueError(f"InvertedResidual: invalid combination of stride {stride}, "
                             f"inp {inp} and oup {oup} values. If stride == 1 then inp should "
                             f"be equal to oup // 2 << 1.")
        if stride > 1:
            self.branch1 = nn.Sequential(
                _depthwise_conv(inp, inp, 3, stride, 1),
                nn.BatchNorm2d(inp),
                nn.Conv2d(inp, branch_features, 1, 1, 0, bias=False),
                nn.BatchNorm2d(branch_features),
                nn.ReLU(inplace=True),
            )
        else:
            self.branch1 = nn.Sequential()
        self.branch2 = nn.Sequential(
            nn.Conv2d(inp if stride > 1 else branch_features, branch_features, 1, 1, 0,
                      bias=False),
            nn.BatchNorm2d(branch_features),
            nn.ReLU(inplace=True),
            _depthwise_conv(branch_features, branch_features, 3, stride, 1),
            nn.BatchNorm2d(branch_features),
            nn.Conv2d(branch_features, branch_features, 1, 1, 0, bias=False),
            nn.BatchNorm2d(branch_features),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = fiamma.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = fiamma.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    """ShuffleNetV2: ``conv1``, ``maxpool``, ``stage2``-``stage4``, ``conv5``, global mean,
    ``fc``.

        >>> m = shufflenet_v2_x0_5(num_classes=10).eval()
        >>> m(fiamma.randn(1, 3, 64, 64)).shape
        fiamma.Size([1, 10])
    """

    def __init__(self, stages_repeats, stages_out_channels, num_classes=1000,
                 inverted_residual=InvertedResidual):
        super().__init__()
        if len(stages_repeats) != 3:
            raise ValueError("ShuffleNetV2: expected stages_repeats as list of 3 positive ints")
        if len(stages_out_channels) != 5:
            raise ValueError("ShuffleNetV2: expected stages_out_channels as list of 5 positive "
                             "ints")
        self._stage_out_channels = stages_out_channels
        input_channels = 3
        output_channels = self._stage_out_channels[0]
        self.conv1 = nn.Sequential(
            nn.Conv2d(input_channels, output_channels, 3, 2, 1, bias=False),
            nn.BatchNorm2d(output_channels),
            nn.ReLU(inplace=True),
        )
        input_channels = output_channels
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        for name, repeats, output_channels in zip(("stage2", "stage3", "stage4"), stages_repeats,
                                                  self._stage_out_channels[1:]):
            seq = [inverted_residual(input_channels, output_channels, 2)]
            seq += [inverted_residual(output_channels, output_channels, 1)
                    for _ in range(repeats - 1)]
            setattr(self, name, nn.Sequential(*seq))
            input_channels = output_channels
        output_channels = self._stage_out_channels[-1]
        self.conv5 = nn.Sequential(
            nn.Conv2d(input_channels, output_channels, 1, 1, 0, bias=False),
            nn.BatchNorm2d(output_channels),
            nn.ReLU(inplace=True),
        )
        self.fc = nn.Linear(output_channels, num_classes)

    def forward(self, x):
        x = self.conv1(x)
        x = self.maxpool(x)
        x = self.stage2(x)
        x = self.stage3(x)
        x = self.stage4(x)
        x = self.conv5(x)
        x = x.mean([2, 3])
        return self.fc(x)


_COMMON_META = {
    "min_size": (1, 1),
    "categories": imagenet_categories(),
    "recipe": "https://github.com/ericsun99/Shufflenet-v2-Pytorch",
}
_NEW_RECIPE = "https://github.com/pytorch/vision/pull/5906"


def _weights(url, num_params, acc1, acc5, ops, size, resize=None):
    kw = {"crop_size": 224} if resize is None else {"crop_size": 224, "resize_size": resize}
    meta = {**_COMMON_META, "num_params": num_params,
            "_metrics": {"ImageNet-1K": {"acc@1": acc1, "acc@5": acc5}},
            "_ops": ops, "_file_size": size}
    if resize is not None:
        meta["recipe"] = _NEW_RECIPE
    return Weights(url=url, transforms=classification_preset(**kw), meta=meta)


class ShuffleNet_V2_X0_5_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("https://download.pytorch.org/models/shufflenetv2_x0.5-f707e7126e.pth",
                             1366792, 60.552, 81.746, 0.04, 5.282)
    DEFAULT = IMAGENET1K_V1


class ShuffleNet_V2_X1_0_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("https://download.pytorch.org/models/shufflenetv2_x1-5666bf0f80.pth",
                             2278604, 69.362, 88.316, 0.145, 8.791)
    DEFAULT = IMAGENET1K_V1


class ShuffleNet_V2_X1_5_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("https://download.pytorch.org/models/shufflenetv2_x1_5-3c479a10.pth",
                             3503624, 72.996, 91.086, 0.296, 13.557, resize=232)
    DEFAULT = IMAGENET1K_V1


class ShuffleNet_V2_X2_0_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("https://download.pytorch.org/models/shufflenetv2_x2_0-8be3c8ee.pth",
                             7393996, 76.230, 93.006, 0.583, 28.433, resize=232)
    DEFAULT = IMAGENET1K_V1


def _shufflenetv2(enum_cls, weights, progress, kwargs, repeats, channels):
    return build(enum_cls, weights, progress, kwargs,
                 lambda **kw: ShuffleNetV2(repeats, channels, **kw))


@register_model(weights=ShuffleNet_V2_X0_5_Weights)
def shufflenet_v2_x0_5(*, weights=None, progress=True, **kwargs):
    """ShuffleNetV2 with 0.5x output channels (torchvision's ``shufflenet_v2_x0_5``)."""
    return _shufflenetv2(ShuffleNet_V2_X0_5_Weights, weights, progress, kwargs, [4, 8, 4],
                         [24, 48, 96, 192, 1024])


@register_model(weights=ShuffleNet_V2_X1_0_Weights)
def shufflenet_v2_x1_0(*, weights=None, progress=True, **kwargs):
    """ShuffleNetV2 with 1.0x output channels (torchvision's ``shufflenet_v2_x1_0``)."""
    return _shufflenetv2(ShuffleNet_V2_X1_0_Weights, weights, progress, kwargs, [4, 8, 4],
                         [24, 116, 232, 464, 1024])


@register_model(weights=ShuffleNet_V2_X1_5_Weights)
def shufflenet_v2_x1_5(*, weights=None, progress=True, **kwargs):
    """ShuffleNetV2 with 1.5x output channels (torchvision's ``shufflenet_v2_x1_5``)."""
    return _shufflenetv2(ShuffleNet_V2_X1_5_Weights, weights, progress, kwargs, [4, 8, 4],
                         [24, 176, 352, 704, 1024])


@register_model(weights=ShuffleNet_V2_X2_0_Weights)
def shufflenet_v2_x2_0(*, weights=None, progress=True, **kwargs):
    """ShuffleNetV2 with 2.0x output channels (torchvision's ``shufflenet_v2_x2_0``)."""
    return _shufflenetv2(ShuffleNet_V2_X2_0_Weights, weights, progress, kwargs, [4, 8, 4],
                         [24, 244, 488, 976, 2048])
