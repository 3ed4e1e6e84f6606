"""VGG 11/13/16/19 with and without batch norm (torchvision.models.vgg): same module names,
initialisation and weights enums.

    >>> import fiamma
    >>> from fiamma.vision.models import vgg16
    >>> tuple(vgg16().eval()(fiamma.randn(1, 3, 64, 64)).shape)
    (1, 1000)
"""
from functools import partial

import fiamma
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models._builder import build_with_weights
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.transforms._presets import ImageClassification

__all__ = ["VGG", "VGG11_Weights", "VGG11_BN_Weights", "VGG13_Weights", "VGG13_BN_Weights",
           "VGG16_Weights", "VGG16_BN_Weights", "VGG19_Weights", "VGG19_BN_Weights",
           "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn"]


class VGG(nn.Module):
    """``features`` (convolutions), a 7x7 adaptive average pool and a 3-layer classifier."""

    def __init__(self, features, num_classes=1000, init_weights=True, dropout=0.5):
        super().__init__()
        self.features = features
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, num_classes))
        if init_weights:
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                    if m.bias is not None:
                        nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, 0, 0.01)
                    nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(fiamma.flatten(x, 1))


def make_layers(cfg, batch_norm=False):
    """The ``features`` Sequential for a config list (ints: 3x3 conv widths, "M": max pool)."""
    layers = []
    in_channels = 3
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        else:
            conv = nn.Conv2d(in_channels, v, kernel_size=3, padding=1)
            layers += [conv, nn.BatchNorm2d(v), nn.ReLU(inplace=True)] if batch_norm \
                else [conv, nn.ReLU(inplace=True)]
            in_channels = v
    return nn.Sequential(*layers)


cfgs = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "B": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
          512, 512, 512, "M"],
    "E": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
          512, 512, 512, 512, "M"],
}


def _vgg(cfg, batch_norm, enum_cls, weights, progress, **kwargs):
    def no_init(kw):
        kw["init_weights"] = False
    return build_with_weights(
        lambda **kw: VGG(make_layers(cfgs[cfg], batch_norm=batch_norm), **kw),
        enum_cls, weights, progress, kwargs, before_load=no_init)


_COMMON_META = {
    "min_size": (32, 32),
    "recipe": "https://github.com/pytorch/vision/tree/main/references/classification#alexnet-and-vgg",
    "_docs": "These weights were trained from scratch by using a simplified training recipe.",
}


def _w(file, num_params, acc1, acc5, **extra):
    return Weights(url=f"https://download.pytorch.org/models/{file}",
                   transforms=partial(ImageClassification, crop_size=224),
                   meta={**_COMMON_META, "categories": imagenet_categories(),
                         "num_params": num_params,
                         "_metrics": {"ImageNet-1K": {"acc@1": acc1, "acc@5": acc5}}, **extra})


class VGG11_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("vgg11-8a719046.pth", 132863336, 69.020, 88.628)
    DEFAULT = IMAGENET1K_V1


class VGG11_BN_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("vgg11_bn-6002323d.pth", 132868840, 70.370, 89.810)
    DEFAULT = IMAGENET1K_V1


class VGG13_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("vgg13-19584684.pth", 133047848, 69.928, 89.246)
    DEFAULT = IMAGENET1K_V1


class VGG13_BN_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("vgg13_bn-abd245e5.pth", 133053736, 71.586, 90.374)
    DEFAULT = IMAGENET1K_V1


class VGG16_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("vgg16-397923af.pth", 138357544, 71.592, 90.382)
    # features only (ported from amdegroot/ssd.pytorch): the classifier holds no valid values
    IMAGENET1K_FEATURES = Weights(
        url="https://download.pytorch.org/models/vgg16_features-amdegroot-88682ab5.pth",
        transforms=partial(ImageClassification, crop_size=224, mean=(0.48235, 0.45882, 0.40784),
                           std=(1.0 / 255.0, 1.0 / 255.0, 1.0 / 255.0)),
        meta={**_COMMON_META, "num_params": 138357544, "categories": None,
              "recipe": "https://github.com/amdegroot/ssd.pytorch#training-ssd",
              "_metrics": {"ImageNet-1K": {"acc@1": float("nan"), "acc@5": float("nan")}},
              "_docs": "Only the `features` module has valid values (feature extraction); the "
                       "inputs use the paper's original standardisation."})
    DEFAULT = IMAGENET1K_V1


class VGG16_BN_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("vgg16_bn-6c64b313.pth", 138365992, 73.360, 91.516)
    DEFAULT = IMAGENET1K_V1


class VGG19_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("vgg19-dcbb9e9d.pth", 143667240, 72.376, 90.876)
    DEFAULT = IMAGENET1K_V1


class VGG19_BN_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("vgg19_bn-c79401a0.pth", 143678248, 74.218, 91.842)
    DEFAULT = IMAGENET1K_V1


def _builder(name, cfg, bn, enum_cls):
    def build(*, weights=None, progress=True, **kwargs):
        return _vgg(cfg, bn, enum_cls, weights, progress, **kwargs)
    build.__name__ = build.__qualname__ = name
    build.__doc__ = (f"VGG-{name[3:5]}{' with batch norm' if bn else ''} (Simonyan & Zisserman, "
                     "Very Deep Convolutional Networks).\n\n    Args:\n        weights: a member "
                     f"of :class:`{enum_cls.__name__}`, its name, \"DEFAULT\", a local checkpoint "
                     "path or None.\n        progress: show a progress bar while downloading.\n"
                     "        **kwargs: passed to :class:`VGG`.\n")
    build.__module__ = __name__
    return register_model(weights=enum_cls)(build)


vgg11 = _builder("vgg11", "A", False, VGG11_Weights)
vgg11_bn = _builder("vgg11_bn", "A", True, VGG11_BN_Weights)
vgg13 = _builder("vgg13", "B", False, VGG13_Weights)
vgg13_bn = _builder("vgg13_bn", "B", True, VGG13_BN_Weights)
vgg16 = _builder("vgg16", "D", False, VGG16_Weights)
vgg16_bn = _builder("vgg16_bn", "D", True, VGG16_BN_Weights)
vgg19 = _builder("vgg19", "E", False, VGG19_Weights)
vgg19_bn = _builder("vgg19_bn", "E", True, VGG19_BN_Weights)
