"""SqueezeNet 1.0 and 1.1 (torchvision.models.squeezenet).

    >>> import fiamma
    >>> from fiamma.vision.models import squeezenet1_1
    >>> tuple(squeezenet1_1().eval()(fiamma.randn(1, 3, 64, 64)).shape)
    (1, 1000)
"""
from functools import partial

import fiamma
from fiamma import nn
from fiamma.nn import init
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models._builder import build_with_weights
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.transforms._presets import ImageClassification

__all__ = ["SqueezeNet", "SqueezeNet1_0_Weights", "SqueezeNet1_1_Weights", "squeezenet1_0",
           "squeezenet1_1"]


class Fire(nn.Module):
    """Squeeze (1x1) then expand into concatenated 1x1 and 3x3 branches."""

    def __init__(self, inplanes, squeeze_planes, expand1x1_planes, expand3x3_planes):
        super().__init__()
        self.inplanes = inplanes
        self.squeeze = nn.Conv2d(inplanes, squeeze_planes, kernel_size=1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze_planes, expand1x1_planes, kernel_size=1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze_planes, expand3x3_planes, kernel_size=3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x):
        x = self.squeeze_activation(self.squeeze(x))
        return fiamma.cat([self.expand1x1_activation(self.expand1x1(x)),
                           self.expand3x3_activation(self.expand3x3(x))], 1)


class SqueezeNet(nn.Module):
    """SqueezeNet ``version`` "1_0" or "1_1"; the classifier is a 1x1 convolution."""

    def __init__(self, version="1_0", num_classes=1000, dropout=0.5):
        super().__init__()
        self.num_classes = num_classes
        pool = partial(nn.MaxPool2d, kernel_size=3, stride=2, ceil_mode=True)
        if version == "1_0":
            self.features = nn.Sequential(
                nn.Conv2d(3, 96, kernel_size=7, stride=2), nn.ReLU(inplace=True), pool(),
                Fire(96, 16, 64, 64), Fire(128, 16, 64, 64), Fire(128, 32, 128, 128), pool(),
                Fire(256, 32, 128, 128), Fire(256, 48, 192, 192), Fire(384, 48, 192, 192),
                Fire(384, 64, 256, 256), pool(), Fire(512, 64, 256, 256))
        elif version == "1_1":
            self.features = nn.Sequential(
                nn.Conv2d(3, 64, kernel_size=3, stride=2), nn.ReLU(inplace=True), pool(),
                Fire(64, 16, 64, 64), Fire(128, 16, 64, 64), pool(),
                Fire(128, 32, 128, 128), Fire(256, 32, 128, 128), pool(),
                Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256),
                Fire(512, 64, 256, 256))
        else:
            raise ValueError(f"Unsupported SqueezeNet version {version}: 1_0 or 1_1 expected")
        final_conv = nn.Conv2d(512, self.num_classes, kernel_size=1)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), final_conv, nn.ReLU(inplace=True),
                                        nn.AdaptiveAvgPool2d((1, 1)))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                if m is final_conv:
                    init.normal_(m.weight, mean=0.0, std=0.01)
                else:
                    init.kaiming_uniform_(m.weight)
                if m.bias is not None:
                    init.constant_(m.bias, 0)

    def forward(self, x):
        return fiamma.flatten(self.classifier(self.features(x)), 1)


_COMMON_META = {
    "recipe": "https://github.com/pytorch/vision/pull/49#issuecomment-277560717",
    "_docs": "These weights reproduce closely the results of the paper using a simple training "
             "recipe.",
}


def _w(file, min_size, num_params, acc1, acc5):
    return Weights(url=f"https://download.pytorch.org/models/{file}",
                   transforms=partial(ImageClassification, crop_size=224),
                   meta={**_COMMON_META, "categories": imagenet_categories(),
                         "min_size": min_size, "num_params": num_params,
                         "_metrics": {"ImageNet-1K": {"acc@1": acc1, "acc@5": acc5}}})


class SqueezeNet1_0_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("squeezenet1_0-b66bff10.pth", (21, 21), 1248424, 58.092, 80.420)
    DEFAULT = IMAGENET1K_V1


class SqueezeNet1_1_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("squeezenet1_1-b8a52dc0.pth", (17, 17), 1235496, 58.178, 80.624)
    DEFAULT = IMAGENET1K_V1


@register_model(weights=SqueezeNet1_0_Weights)
def squeezenet1_0(*, weights=None, progress=True, **kwargs):
    """SqueezeNet 1.0 (Iandola et al., AlexNet-level accuracy with 50x fewer parameters).

    Args:
        weights: a member of :class:`SqueezeNet1_0_Weights`, its name, "DEFAULT", a local
            checkpoint path or None (random initialisation, the default).
        progress: show a progress bar while downloading.
        **kwargs: passed to :class:`SqueezeNet`.
    """
    return build_with_weights(partial(SqueezeNet, "1_0"), SqueezeNet1_0_Weights, weights,
                              progress, kwargs)


@register_model(weights=SqueezeNet1_1_Weights)
def squeezenet1_1(*, weights=None, progress=True, **kwargs):
    """SqueezeNet 1.1: 2.4x less computation than 1.0, same accuracy.

    Args:
        weights: a member of :class:`SqueezeNet1_1_Weights`, its name, "DEFAULT", a local
            checkpoint path or None (random initialisation, the default).
        progress: show a progress bar while downloading.
        **kwargs: passed to :class:`SqueezeNet`.
    """
    return build_with_weights(partial(SqueezeNet, "1_1"), SqueezeNet1_1_Weights, weights,
                              progress, kwargs)
