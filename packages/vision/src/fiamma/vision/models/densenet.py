"""DenseNet-121/161/169/201 (torchvision.models.densenet): same module names, so torchvision
checkpoints load by key (old-style ``norm.1`` keys are renamed as torchvision does).

``memory_efficient`` is accepted for API compatibility but ignored: fiamma has no gradient
checkpointing yet, so the features are always kept (same results, more memory in training).

    >>> import fiamma
    >>> from fiamma.vision.models import densenet121
    >>> tuple(densenet121().eval()(fiamma.randn(1, 3, 64, 64)).shape)
    (1, 1000)
"""
import re
from collections import OrderedDict
from functools import partial

import fiamma
from fiamma import nn
from fiamma.nn import functional as F
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models._builder import build_with_weights
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.transforms._presets import ImageClassification

__all__ = ["DenseNet", "DenseNet121_Weights", "DenseNet161_Weights", "DenseNet169_Weights",
           "DenseNet201_Weights", "densenet121", "densenet161", "densenet169", "densenet201"]


class _DenseLayer(nn.Module):
    def __init__(self, num_input_features, growth_rate, bn_size, drop_rate,
                 memory_efficient=False):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(num_input_features)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(num_input_features, bn_size * growth_rate, kernel_size=1,
                               stride=1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, kernel_size=3, stride=1,
                               padding=1, bias=False)
        self.drop_rate = float(drop_rate)
        self.memory_efficient = memory_efficient

    def bn_function(self, inputs):
        return self.conv1(self.relu1(self.norm1(fiamma.cat(inputs, 1))))

    def forward(self, input):
        prev = [input] if isinstance(input, fiamma.Tensor) else input
        new = self.conv2(self.relu2(self.norm2(self.bn_function(prev))))
        if self.drop_rate > 0:
            new = F.dropout(new, p=self.drop_rate, training=self.training)
        return new


class _DenseBlock(nn.ModuleDict):
    _version = 2

    def __init__(self, num_layers, num_input_features, bn_size, growth_rate, drop_rate,
                 memory_efficient=False):
        super().__init__()
        for i in range(num_layers):
            self.add_module(f"denselayer{i + 1}", _DenseLayer(
                num_input_features + i * growth_rate, growth_rate=growth_rate, bn_size=bn_size,
                drop_rate=drop_rate, memory_efficient=memory_efficient))

    def forward(self, init_features):
        features = [init_features]
        for _, layer in self.items():
            features.append(layer(features))
        return fiamma.cat(features, 1)


class _Transition(nn.Sequential):
    def __init__(self, num_input_features, num_output_features):
        super().__init__()
        self.norm = nn.BatchNorm2d(num_input_features)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(num_input_features, num_output_features, kernel_size=1, stride=1,
                              bias=False)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)


class DenseNet(nn.Module):
    """DenseNet-BC (Huang et al., Densely Connected Convolutional Networks).

    Args:
        growth_rate: filters added per layer (``k``); block_config: layers per dense block;
        num_init_features: stem filters; bn_size: bottleneck width factor;
        drop_rate: dropout after each dense layer; num_classes: classifier outputs;
        memory_efficient: accepted, ignored (no checkpointing in fiamma yet).
    """

    def __init__(self, growth_rate=32, block_config=(6, 12, 24, 16), num_init_features=64,
                 bn_size=4, drop_rate=0, num_classes=1000, memory_efficient=False):
        super().__init__()
        self.features = nn.Sequential(OrderedDict([
            ("conv0", nn.Conv2d(3, num_init_features, kernel_size=7, stride=2, padding=3,
                                bias=False)),
            ("norm0", nn.BatchNorm2d(num_init_features)),
            ("relu0", nn.ReLU(inplace=True)),
            ("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1)),
        ]))
        num_features = num_init_features
        for i, num_layers in enumerate(block_config):
            self.features.add_module(f"denseblock{i + 1}", _DenseBlock(
                num_layers=num_layers, num_input_features=num_features, bn_size=bn_size,
                growth_rate=growth_rate, drop_rate=drop_rate, memory_efficient=memory_efficient))
            num_features += num_layers * growth_rate
            if i != len(block_config) - 1:
                self.features.add_module(f"transition{i + 1}",
                                         _Transition(num_features, num_features // 2))
                num_features //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(num_features))
        self.classifier = nn.Linear(num_features, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        out = F.relu(self.features(x), inplace=True)
        out = F.adaptive_avg_pool2d(out, (1, 1))
        return self.classifier(fiamma.flatten(out, 1))


# torchvision's published checkpoints use the old names "norm.1", "conv.2", ...
_OLD_KEY = re.compile(
    r"^(.*denselayer\d+\.(?:norm|relu|conv))\.((?:[12])\.(?:weight|bias|running_mean|running_var))$")


def _fix_keys(state_dict, model):
    out = OrderedDict()
    for k, v in state_dict.items():
        m = _OLD_KEY.match(k)
        out[m.group(1) + m.group(2) if m else k] = v
    # checkpoints older than BatchNorm's num_batches_tracked lack it (PyTorch fills it in the
    # same way when it loads such a file)
    for k, v in model.state_dict().items():
        if k.endswith("num_batches_tracked") and k not in out:
            out[k] = v
    return out


def _densenet(growth_rate, block_config, num_init_features, enum_cls, weights, progress,
              **kwargs):
    return build_with_weights(partial(DenseNet, growth_rate, block_config, num_init_features),
                              enum_cls, weights, progress, kwargs, fix_state_dict=_fix_keys)


_COMMON_META = {"min_size": (29, 29), "recipe": "https://github.com/pytorch/vision/pull/116",
                "_docs": "These weights are ported from LuaTorch."}


def _w(file, num_params, acc1, acc5):
    return Weights(url=f"https://download.pytorch.org/models/{file}",
                   transforms=partial(ImageClassification, crop_size=224),
                   meta={**_COMMON_META, "categories": imagenet_categories(),
                         "num_params": num_params,
                         "_metrics": {"ImageNet-1K": {"acc@1": acc1, "acc@5": acc5}}})


class DenseNet121_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("densenet121-a639ec97.pth", 7978856, 74.434, 91.972)
    DEFAULT = IMAGENET1K_V1


class DenseNet161_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("densenet161-8d451a50.pth", 28681000, 77.138, 93.560)
    DEFAULT = IMAGENET1K_V1


class DenseNet169_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("densenet169-b2777c0a.pth", 14149480, 75.600, 92.806)
    DEFAULT = IMAGENET1K_V1


class DenseNet201_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("densenet201-c1103571.pth", 20013928, 76.896, 93.370)
    DEFAULT = IMAGENET1K_V1


def _builder(name, growth, blocks, init_features, enum_cls):
    def build(*, weights=None, progress=True, **kwargs):
        return _densenet(growth, blocks, init_features, enum_cls, weights, progress, **kwargs)
    build.__name__ = build.__qualname__ = name
    build.__module__ = __name__
    build.__doc__ = (f"DenseNet-{name[8:]} (Huang et al., Densely Connected Convolutional "
                     "Networks).\n\n    Args:\n        weights: a member of "
                     f":class:`{enum_cls.__name__}`, its name, \"DEFAULT\", a local checkpoint "
                     "path or None.\n        progress: show a progress bar while downloading.\n"
                     "        **kwargs: passed to :class:`DenseNet`.\n")
    return register_model(weights=enum_cls)(build)


densenet121 = _builder("densenet121", 32, (6, 12, 24, 16), 64, DenseNet121_Weights)
densenet161 = _builder("densenet161", 48, (6, 12, 36, 24), 96, DenseNet161_Weights)
densenet169 = _builder("densenet169", 32, (6, 12, 32, 32), 64, DenseNet169_Weights)
densenet201 = _builder("densenet201", 32, (6, 12, 48, 32), 64, DenseNet201_Weights)
