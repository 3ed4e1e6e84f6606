"""GoogLeNet (Inception v1, Szegedy et al., 2014) with torchvision's module names, auxiliary
classifiers, input transform and weights.

In training mode with ``aux_logits=True`` the model returns ``GoogLeNetOutputs(logits,
aux_logits2, aux_logits1)``; otherwise the logits. The pretrained weights expect
``transform_input=True`` (the builder sets it) and come without usable auxiliary heads, so
the builder drops them unless ``aux_logits=True`` is asked for.

    >>> import fiamma
    >>> from fiamma.vision.models import googlenet
    >>> m = googlenet(num_classes=10, aux_logits=False, init_weights=True).eval()
    >>> m(fiamma.randn(1, 3, 64, 64)).shape
    fiamma.Size([1, 10])
"""
import warnings
from collections import namedtuple
from pathlib import Path

import fiamma
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.vision.models._api import (
    Weights,
    WeightsEnum,
    load_weights,
    register_model,
    resolve_weights,
)
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.models._weights_util import classification_preset, overwrite_named_param

__all__ = ["GoogLeNet", "GoogLeNetOutputs", "_GoogLeNetOutputs", "GoogLeNet_Weights",
           "googlenet", "BasicConv2d", "Inception", "InceptionAux"]

GoogLeNetOutputs = namedtuple("GoogLeNetOutputs", ["logits", "aux_logits2", "aux_logits1"])
_GoogLeNetOutputs = GoogLeNetOutputs


class BasicConv2d(nn.Module):
    """Conv2d (no bias) + BatchNorm2d(eps=0.001) + ReLU."""

    def __init__(self, in_channels, out_channels, **kwargs):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, bias=False, **kwargs)
        self.bn = nn.BatchNorm2d(out_channels, eps=0.001)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)), inplace=True)


class Inception(nn.Module):
    """Four parallel branches concatenated on channels: 1x1; 1x1 -> 3x3; 1x1 -> 3x3 (the
    "5x5" branch, a 3x3 in torchvision's weights); 3x3 max pool -> 1x1."""

    def __init__(self, in_channels, ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj,
                 conv_block=None):
        super().__init__()
        conv_block = conv_block or BasicConv2d
        self.branch1 = conv_block(in_channels, ch1x1, kernel_size=1)
        self.branch2 = nn.Sequential(conv_block(in_channels, ch3x3red, kernel_size=1),
                                     conv_block(ch3x3red, ch3x3, kernel_size=3, padding=1))
        self.branch3 = nn.Sequential(conv_block(in_channels, ch5x5red, kernel_size=1),
                                     conv_block(ch5x5red, ch5x5, kernel_size=3, padding=1))
        self.branch4 = nn.Sequential(
            nn.MaxPool2d(kernel_size=3, stride=1, padding=1, ceil_mode=True),
            conv_block(in_channels, pool_proj, kernel_size=1))

    def forward(self, x):
        return fiamma.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)],
                          1)


class InceptionAux(nn.Module):
    """Auxiliary classifier: 4x4 adaptive average, 1x1 conv to 128, FC 2048->1024, ReLU,
    dropout, FC to ``num_classes``."""

    def __init__(self, in_channels, num_classes, conv_block=None, dropout=0.7):
        super().__init__()
        conv_block = conv_block or BasicConv2d
        self.conv = conv_block(in_channels, 128, kernel_size=1)
        self.fc1 = nn.Linear(2048, 1024)
        self.fc2 = nn.Linear(1024, num_classes)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(x, (4, 4))
        x = self.conv(x)
        x = x.flatten(1)  # a method: int8 tensors after convert
        x = F.relu(self.fc1(x), inplace=True)
        x = self.dropout(x)
        return self.fc2(x)


def transform_input(x):
    """Map an input normalised with ImageNet's mean/std to one normalised with 0.5/0.5 per
    channel (what the ported Inception/GoogLeNet weights were trained on)."""
    chans = []
    for c, (mean, std) in enumerate(((0.485, 0.229), (0.456, 0.224), (0.406, 0.225))):
        chans.append(x[:, c:c + 1] * (std / 0.5) + (mean - 0.5) / 0.5)
    return fiamma.cat(chans, 1)


class GoogLeNet(nn.Module):
    """GoogLeNet: stem convolutions, nine Inception modules, optional auxiliary classifiers
    ``aux1``/``aux2`` (training only), average pool, dropout, ``fc``."""

    def __init__(self, num_classes=1000, aux_logits=True, transform_input=False,
                 init_weights=None, blocks=None, dropout=0.2, dropout_aux=0.7):
        super().__init__()
        if blocks is None:
            blocks = [BasicConv2d, Inception, InceptionAux]
        if init_weights is None:
            warnings.warn("The default weight initialization of GoogleNet will be changed in "
                          "future releases of torchvision. If you wish to keep the old behavior "
                          "(which leads to long initialization times due to scipy/scipy#11299), "
                          "please set init_weights=True.", FutureWarning, stacklevel=2)
            init_weights = True
        if len(blocks) != 3:
            raise ValueError(f"GoogLeNet: blocks should have 3 entries, got {len(blocks)}")
        conv_block, inception_block, aux_block = blocks
        self.aux_logits = aux_logits
        self.transform_input = transform_input
        self.conv1 = conv_block(3, 64, kernel_size=7, stride=2, padding=3)
        self.maxpool1 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.conv2 = conv_block(64, 64, kernel_size=1)
        self.conv3 = conv_block(64, 192, kernel_size=3, padding=1)
        self.maxpool2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.inception3a = inception_block(192, 64, 96, 128, 16, 32, 32)
        self.inception3b = inception_block(256, 128, 128, 192, 32, 96, 64)
        self.maxpool3 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.inception4a = inception_block(480, 192, 96, 208, 16, 48, 64)
        self.inception4b = inception_block(512, 160, 112, 224, 24, 64, 64)
        self.inception4c = inception_block(512, 128, 128, 256, 24, 64, 64)
        self.inception4d = inception_block(512, 112, 144, 288, 32, 64, 64)
        self.inception4e = inception_block(528, 256, 160, 320, 32, 128, 128)
        self.maxpool4 = nn.MaxPool2d(2, stride=2, ceil_mode=True)
        self.inception5a = inception_block(832, 256, 160, 320, 32, 128, 128)
        self.inception5b = inception_block(832, 384, 192, 384, 48, 128, 128)
        if aux_logits:
            self.aux1 = aux_block(512, num_classes, dropout=dropout_aux)
            self.aux2 = aux_block(528, num_classes, dropout=dropout_aux)
        else:
            self.aux1 = None
            self.aux2 = None
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(p=dropout)
        self.fc = nn.Linear(1024, num_classes)
        if init_weights:
            for m in self.modules():
                if isinstance(m, (nn.Conv2d, nn.Linear)):
                    nn.init.trunc_normal_(m.weight, mean=0.0, std=0.01, a=-2, b=2)
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.ones_(m.weight)
                    nn.init.zeros_(m.bias)

    def forward(self, x):
        if self.transform_input:
            x = transform_input(x)
        x = self.maxpool1(self.conv1(x))
        x = self.maxpool2(self.conv3(self.conv2(x)))
        x = self.maxpool3(self.inception3b(self.inception3a(x)))
        x = self.inception4a(x)
        aux1 = self.aux1(x) if self.aux1 is not None and self.training else None
        x = self.inception4d(self.inception4c(self.inception4b(x)))
        aux2 = self.aux2(x) if self.aux2 is not None and self.training else None
        x = self.maxpool4(self.inception4e(x))
        x = self.inception5b(self.inception5a(x))
        x = self.avgpool(x).flatten(1)
        x = self.fc(self.dropout(x))
        if self.training and self.aux_logits:
            # torchvision's: aux_logits2 is the head after inception4d, aux_logits1 after 4a
            # (its quantizable GoogLeNet swaps them; fiamma's quantizable one follows that)
            return GoogLeNetOutputs(x, aux2, aux1)
        return x


class GoogLeNet_Weights(WeightsEnum):
    IMAGENET1K_V1 = Weights(
        url="https://download.pytorch.org/models/googlenet-1378be20.pth",
        transforms=classification_preset(crop_size=224),
        meta={"num_params": 6624904, "categories": imagenet_categories(), "min_size": (15, 15),
              "recipe": "https://github.com/pytorch/vision/tree/main/references/"
                        "classification#googlenet",
              "_metrics": {"ImageNet-1K": {"acc@1": 69.778, "acc@5": 89.530}},
              "_ops": 1.498, "_file_size": 49.731,
              "_docs": "These weights are ported from the original paper."},
    )
    DEFAULT = IMAGENET1K_V1


def build_with_aux_heads(ctor, enum_cls, weights, progress, kwargs, aux_prefixes, strip):
    """The pretrained-weights step shared by GoogLeNet and Inception3: an enum member sets
    ``transform_input=True`` (unless given), ``aux_logits=True`` and ``init_weights=False``
    to load by key; the auxiliary heads (untrained in those checkpoints) are then removed by
    ``strip(model)`` unless the caller asked for ``aux_logits=True``. A local checkpoint
    path loads into the model the kwargs describe; its auxiliary heads are kept only when
    the file has them and ``aux_logits`` is not False."""
    weights = resolve_weights(enum_cls, weights)
    want_aux = kwargs.get("aux_logits", False)
    if weights is None:
        return ctor(**kwargs)
    if isinstance(weights, Path):
        state_dict = load_weights(weights)
        has_aux = any(k.startswith(aux_prefixes) for k in state_dict)
        kwargs.setdefault("init_weights", False)
        kwargs.setdefault("aux_logits", has_aux)
        if kwargs["aux_logits"] and not has_aux:
            raise ValueError(f"{ctor.__name__}: aux_logits=True but the checkpoint {weights} "
                             f"has no auxiliary classifier weights")
        if has_aux and not kwargs["aux_logits"]:
            state_dict = {k: v for k, v in state_dict.items()
                          if not k.startswith(aux_prefixes)}
        model = ctor(**kwargs)
        model.load_state_dict(state_dict)
        return model
    kwargs.setdefault("transform_input", True)
    overwrite_named_param(kwargs, "aux_logits", True)
    overwrite_named_param(kwargs, "init_weights", False)
    overwrite_named_param(kwargs, "num_classes", len(weights.meta["categories"]))
    model = ctor(**kwargs)
    model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
    if not want_aux:
        strip(model)
    else:
        warnings.warn(f"auxiliary heads in the pretrained {ctor.__name__} model are NOT "
                      f"pretrained, so make sure to train them", UserWarning, stacklevel=3)
    return model


def _strip_googlenet_aux(model):
    model.aux_logits = False
    model.aux1 = None
    model.aux2 = None


@register_model(weights=GoogLeNet_Weights)
def googlenet(*, weights=None, progress=True, **kwargs):
    """GoogLeNet (torchvision's ``googlenet``). ``weights``: a :class:`GoogLeNet_Weights`
    member or name, ``"DEFAULT"``, None, or a checkpoint path; ``**kwargs`` go to
    :class:`GoogLeNet` (``num_classes``, ``aux_logits``, ``transform_input``, ...)."""
    return build_with_aux_heads(GoogLeNet, GoogLeNet_Weights, weights, progress, kwargs,
                                ("aux1.", "aux2."), _strip_googlenet_aux)
