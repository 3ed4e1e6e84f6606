"""Inception v3 (Szegedy et al., 2015) with torchvision's module names (``Conv2d_1a_3x3``,
``Mixed_5b``, ``AuxLogits``, ...), initialisation, input transform and weights.

In training mode with ``aux_logits=True`` the model returns ``InceptionOutputs(logits,
aux_logits)``; otherwise the logits. Inputs must be at least 75x75.

    >>> import fiamma
    >>> from fiamma.vision.models import inception_v3
    >>> m = inception_v3(num_classes=10, aux_logits=False, init_weights=True).eval()
    >>> m(fiamma.randn(1, 3, 75, 75)).shape
    fiamma.Size([1, 10])
"""
import warnings
from collections import namedtuple

import fiamma
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.models._weights_util import classification_preset
from fiamma.vision.models.googlenet import BasicConv2d, build_with_aux_heads, transform_input

__all__ = ["Inception3", "InceptionOutputs", "_InceptionOutputs", "Inception_V3_Weights",
           "inception_v3", "InceptionA", "InceptionB", "InceptionC", "InceptionD",
           "InceptionE", "InceptionAux"]

InceptionOutputs = namedtuple("InceptionOutputs", ["logits", "aux_logits"])
_InceptionOutputs = InceptionOutputs


def _avg3(x):
    return F.avg_pool2d(x, kernel_size=3, stride=1, padding=1)


class InceptionA(nn.Module):
    """35x35 module: 1x1 | 1x1->5x5 | 1x1->3x3->3x3 | avgpool->1x1 (``pool_features``)."""

    def __init__(self, in_channels, pool_features, conv_block=None):
        super().__init__()
        c = conv_block or BasicConv2d
        self.branch1x1 = c(in_channels, 64, kernel_size=1)
        self.branch5x5_1 = c(in_channels, 48, kernel_size=1)
        self.branch5x5_2 = c(48, 64, kernel_size=5, padding=2)
        self.branch3x3dbl_1 = c(in_channels, 64, kernel_size=1)
        self.branch3x3dbl_2 = c(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = c(96, 96, kernel_size=3, padding=1)
        self.branch_pool = c(in_channels, pool_features, kernel_size=1)

    def forward(self, x):
        b1 = self.branch1x1(x)
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = self.branch_pool(_avg3(x))
        return fiamma.cat([b1, b5, b3, bp], 1)


class InceptionB(nn.Module):
    """Grid reduction 35->17: strided 3x3 | 1x1->3x3->strided 3x3 | strided max pool."""

    def __init__(self, in_channels, conv_block=None):
        super().__init__()
        c = conv_block or BasicConv2d
        self.branch3x3 = c(in_channels, 384, kernel_size=3, stride=2)
        self.branch3x3dbl_1 = c(in_channels, 64, kernel_size=1)
        self.branch3x3dbl_2 = c(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = c(96, 96, kernel_size=3, stride=2)

    def forward(self, x):
        b3 = self.branch3x3(x)
        bd = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = F.max_pool2d(x, kernel_size=3, stride=2)
        return fiamma.cat([b3, bd, bp], 1)


class InceptionC(nn.Module):
    """17x17 module with factorised 7x7 convolutions (1x7 and 7x1)."""

    def __init__(self, in_channels, channels_7x7, conv_block=None):
        super().__init__()
        c = conv_block or BasicConv2d
        c7 = channels_7x7
        self.branch1x1 = c(in_channels, 192, kernel_size=1)
        self.branch7x7_1 = c(in_channels, c7, kernel_size=1)
        self.branch7x7_2 = c(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7_3 = c(c7, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = c(in_channels, c7, kernel_size=1)
        self.branch7x7dbl_2 = c(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = c(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = c(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = c(c7, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch_pool = c(in_channels, 192, kernel_size=1)

    def forward(self, x):
        b1 = self.branch1x1(x)
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        bd = self.branch7x7dbl_1(x)
        for layer in (self.branch7x7dbl_2, self.branch7x7dbl_3, self.branch7x7dbl_4,
                      self.branch7x7dbl_5):
            bd = layer(bd)
        bp = self.branch_pool(_avg3(x))
        return fiamma.cat([b1, b7, bd, bp], 1)


class InceptionD(nn.Module):
    """Grid reduction 17->8: 1x1->strided 3x3 | 1x1->1x7->7x1->strided 3x3 | max pool."""

    def __init__(self, in_channels, conv_block=None):
        super().__init__()
        c = conv_block or BasicConv2d
        self.branch3x3_1 = c(in_channels, 192, kernel_size=1)
        self.branch3x3_2 = c(192, 320, kernel_size=3, stride=2)
        self.branch7x7x3_1 = c(in_channels, 192, kernel_size=1)
        self.branch7x7x3_2 = c(192, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7x3_3 = c(192, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7x3_4 = c(192, 192, kernel_size=3, stride=2)

    def forward(self, x):
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_4(self.branch7x7x3_3(self.branch7x7x3_2(self.branch7x7x3_1(x))))
        bp = F.max_pool2d(x, kernel_size=3, stride=2)
        return fiamma.cat([b3, b7, bp], 1)


class InceptionE(nn.Module):
    """8x8 module with expanded filter banks (parallel 1x3 and 3x1 outputs)."""

    def __init__(self, in_channels, conv_block=None):
        super().__init__()
        c = conv_block or BasicConv2d
        self.branch1x1 = c(in_channels, 320, kernel_size=1)
        self.branch3x3_1 = c(in_channels, 384, kernel_size=1)
        self.branch3x3_2a = c(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3_2b = c(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = c(in_channels, 448, kernel_size=1)
        self.branch3x3dbl_2 = c(448, 384, kernel_size=3, padding=1)
        self.branch3x3dbl_3a = c(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = c(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch_pool = c(in_channels, 192, kernel_size=1)

    def forward(self, x):
        b1 = self.branch1x1(x)
        b3 = self.branch3x3_1(x)
        b3 = fiamma.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        bd = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        bd = fiamma.cat([self.branch3x3dbl_3a(bd), self.branch3x3dbl_3b(bd)], 1)
        bp = self.branch_pool(_avg3(x))
        return fiamma.cat([b1, b3, bd, bp], 1)


class InceptionAux(nn.Module):
    """Auxiliary classifier on the 17x17 grid: avgpool 5/3, 1x1 conv, 5x5 conv, FC."""

    def __init__(self, in_channels, num_classes, conv_block=None):
        super().__init__()
        c = conv_block or BasicConv2d
        self.conv0 = c(in_channels, 128, kernel_size=1)
        self.conv1 = c(128, 768, kernel_size=5)
        self.conv1.stddev = 0.01
        self.fc = nn.Linear(768, num_classes)
        self.fc.stddev = 0.001

    def forward(self, x):
        x = F.avg_pool2d(x, kernel_size=5, stride=3)
        x = self.conv1(self.conv0(x))
        x = F.adaptive_avg_pool2d(x, (1, 1)).flatten(1)
        return self.fc(x)


class Inception3(nn.Module):
    """Inception v3: stem, Mixed_5b..Mixed_7c, optional ``AuxLogits`` (training only),
    average pool, dropout, ``fc``."""

    def __init__(self, num_classes=1000, aux_logits=True, transform_input=False,
                 inception_blocks=None, init_weights=None, dropout=0.5):
        super().__init__()
        if inception_blocks is None:
            inception_blocks = [BasicConv2d, InceptionA, InceptionB, InceptionC, InceptionD,
                                InceptionE, InceptionAux]
        if init_weights is None:
            warnings.warn("The default weight initialization of inception_v3 will be changed in "
                          "future releases of torchvision. If you wish to keep the old behavior "
                          "(which leads to long initialization times due to scipy/scipy#11299), "
                          "please set init_weights=True.", FutureWarning, stacklevel=2)
            init_weights = True
        if len(inception_blocks) != 7:
            raise ValueError(f"Inception3: inception_blocks should have 7 entries, got "
                             f"{len(inception_blocks)}")
        conv, block_a, block_b, block_c, block_d, block_e, aux = inception_blocks
        self.aux_logits = aux_logits
        self.transform_input = transform_input
        self.Conv2d_1a_3x3 = conv(3, 32, kernel_size=3, stride=2)
        self.Conv2d_2a_3x3 = conv(32, 32, kernel_size=3)
        self.Conv2d_2b_3x3 = conv(32, 64, kernel_size=3, padding=1)
        self.maxpool1 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.Conv2d_3b_1x1 = conv(64, 80, kernel_size=1)
        self.Conv2d_4a_3x3 = conv(80, 192, kernel_size=3)
        self.maxpool2 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.Mixed_5b = block_a(192, pool_features=32)
        self.Mixed_5c = block_a(256, pool_features=64)
        self.Mixed_5d = block_a(288, pool_features=64)
        self.Mixed_6a = block_b(288)
        self.Mixed_6b = block_c(768, channels_7x7=128)
        self.Mixed_6c = block_c(768, channels_7x7=160)
        self.Mixed_6d = block_c(768, channels_7x7=160)
        self.Mixed_6e = block_c(768, channels_7x7=192)
        self.AuxLogits = aux(768, num_classes) if aux_logits else None
        self.Mixed_7a = block_d(768)
        self.Mixed_7b = block_e(1280)
        self.Mixed_7c = block_e(2048)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(p=dropout)
        self.fc = nn.Linear(2048, num_classes)
        if init_weights:
            for m in self.modules():
                if isinstance(m, (nn.Conv2d, nn.Linear)):
                    std = float(getattr(m, "stddev", 0.1))
                    nn.init.trunc_normal_(m.weight, mean=0.0, std=std, a=-2, b=2)
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.ones_(m.weight)
                    nn.init.zeros_(m.bias)

    def forward(self, x):
        if x.ndim != 4 or x.shape[-1] < 75 or x.shape[-2] < 75:
            raise ValueError(f"Inception3: expected an (N, 3, H, W) input with H, W >= 75, got "
                             f"shape {tuple(x.shape)}")
        if self.transform_input:
            x = transform_input(x)
        for name in ("Conv2d_1a_3x3", "Conv2d_2a_3x3", "Conv2d_2b_3x3", "maxpool1",
                     "Conv2d_3b_1x1", "Conv2d_4a_3x3", "maxpool2", "Mixed_5b", "Mixed_5c",
                     "Mixed_5d", "Mixed_6a", "Mixed_6b", "Mixed_6c", "Mixed_6d", "Mixed_6e"):
            x = getattr(self, name)(x)
        aux = self.AuxLogits(x) if self.AuxLogits is not None and self.training else None
        x = self.Mixed_7c(self.Mixed_7b(self.Mixed_7a(x)))
        x = self.dropout(self.avgpool(x))
        x = self.fc(x.flatten(1))
        if self.training and self.aux_logits:
            return InceptionOutputs(x, aux)
        return x


class Inception_V3_Weights(WeightsEnum):
    IMAGENET1K_V1 = Weights(
        url="https://download.pytorch.org/models/inception_v3_google-0cc3c7bd.pth",
        transforms=classification_preset(crop_size=299, resize_size=342),
        meta={"num_params": 27161264, "categories": imagenet_categories(), "min_size": (75, 75),
              "recipe": "https://github.com/pytorch/vision/tree/main/references/"
                        "classification#inception-v3",
              "_metrics": {"ImageNet-1K": {"acc@1": 77.294, "acc@5": 93.450}},
              "_ops": 5.713, "_file_size": 103.903,
              "_docs": "These weights are ported from the original paper."},
    )
    DEFAULT = IMAGENET1K_V1


def _strip_inception_aux(model):
    model.aux_logits = False
    model.AuxLogits = None


@register_model(weights=Inception_V3_Weights)
def inception_v3(*, weights=None, progress=True, **kwargs):
    """Inception v3 (torchvision's ``inception_v3``). ``weights``: an
    :class:`Inception_V3_Weights` member or name, ``"DEFAULT"``, None, or a checkpoint path;
    ``**kwargs`` go to :class:`Inception3` (``num_classes``, ``aux_logits``,
    ``transform_input``, ...)."""
    return build_with_aux_heads(Inception3, Inception_V3_Weights, weights, progress, kwargs,
                                ("AuxLogits.",), _strip_inception_aux)
