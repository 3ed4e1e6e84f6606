"""ResNet, ResNeXt and Wide ResNet (torchvision.models.resnet): same classes, builders, module
names (so torchvision checkpoints load by key), initialisation and weights enums.

    >>> import fiamma
    >>> from fiamma.vision.models import resnet50
    >>> model = resnet50(weights=None).eval()
    >>> tuple(model(fiamma.randn(1, 3, 224, 224)).shape)
    (1, 1000)
"""
from functools import partial

from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models._builder import build_with_weights
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.transforms._presets import ImageClassification

__all__ = [
    "ResNet", "BasicBlock", "Bottleneck",
    "ResNet18_Weights", "ResNet34_Weights", "ResNet50_Weights", "ResNet101_Weights",
    "ResNet152_Weights", "ResNeXt50_32X4D_Weights", "ResNeXt101_32X8D_Weights",
    "ResNeXt101_64X4D_Weights", "Wide_ResNet50_2_Weights", "Wide_ResNet101_2_Weights",
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d",
    "resnext101_32x8d", "resnext101_64x4d", "wide_resnet50_2", "wide_resnet101_2",
]


def conv3x3(in_planes, out_planes, stride=1, groups=1, dilation=1):
    """3x3 convolution with padding, no bias."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation,
                     groups=groups, bias=False, dilation=dilation)


def conv1x1(in_planes, out_planes, stride=1):
    """1x1 convolution, no bias."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a residual connection (ResNet-18/34)."""
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64,
                 dilation=1, norm_layer=None):
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        if groups != 1 or base_width != 64:
            raise ValueError("BasicBlock only supports groups=1 and base_width=64")
        if dilation > 1:
            raise NotImplementedError("Dilation > 1 not supported in BasicBlock")
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided, grouped), 1x1 expand, with a residual connection. The stride
    sits on the 3x3 convolution (ResNet V1.5), as in torchvision."""
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64,
                 dilation=1, norm_layer=None):
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = norm_layer(width)
        self.conv2 = conv3x3(width, width, stride, groups, dilation)
        self.bn2 = norm_layer(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = norm_layer(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    """The ResNet trunk: a 7x7 stem, four stages of ``block``, global average pool, ``fc``."""

    def __init__(self, block, layers, num_classes=1000, zero_init_residual=False, groups=1,
                 width_per_group=64, replace_stride_with_dilation=None, norm_layer=None):
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        self._norm_layer = norm_layer
        self.inplanes = 64
        self.dilation = 1
        if replace_stride_with_dilation is None:
            replace_stride_with_dilation = [False, False, False]
        if len(replace_stride_with_dilation) != 3:
            raise ValueError("replace_stride_with_dilation should be None or a 3-element tuple, "
                             f"got {replace_stride_with_dilation}")
        self.groups = groups
        self.base_width = width_per_group
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = norm_layer(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2,
                                       dilate=replace_stride_with_dilation[0])
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2,
                                       dilate=replace_stride_with_dilation[1])
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2,
                                       dilate=replace_stride_with_dilation[2])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, Bottleneck) and m.bn3.weight is not None:
                    nn.init.constant_(m.bn3.weight, 0)
                elif isinstance(m, BasicBlock) and m.bn2.weight is not None:
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
        norm_layer = self._norm_layer
        downsample = None
        previous_dilation = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       norm_layer(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample, self.groups, self.base_width,
                        previous_dilation, norm_layer)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes, groups=self.groups,
                                base_width=self.base_width, dilation=self.dilation,
                                norm_layer=norm_layer))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = self.avgpool(x).flatten(1)  # a method: int8 tensors after convert
        return self.fc(x)


def _resnet(block, layers, enum_cls, weights, progress, **kwargs):
    return build_with_weights(lambda **kw: ResNet(block, layers, **kw), enum_cls, weights,
                              progress, kwargs)


_COMMON_META = {"min_size": (1, 1)}
_V1_DOCS = ("These weights reproduce closely the results of the paper using a simple training "
            "recipe.")
_V2_DOCS = ("These weights improve upon the results of the original paper by using TorchVision's "
            "new training recipe.")
_RECIPE = "https://github.com/pytorch/vision/tree/main/references/classification#resnet"


def _w(file, num_params, acc1, acc5, v2=False, recipe=_RECIPE, resize=None, docs=None):
    resize = resize or (232 if v2 else 256)
    return Weights(
        url=f"https://download.pytorch.org/models/{file}",
        transforms=partial(ImageClassification, crop_size=224, resize_size=resize),
        meta={**_COMMON_META, "categories": imagenet_categories(), "num_params": num_params,
              "recipe": recipe,
              "_metrics": {"ImageNet-1K": {"acc@1": acc1, "acc@5": acc5}},
              "_docs": docs or (_V2_DOCS if v2 else _V1_DOCS)})


_NEW = "https://github.com/pytorch/vision/issues/3995#new-recipe"


class ResNet18_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("resnet18-f37072fd.pth", 11689512, 69.758, 89.078)
    DEFAULT = IMAGENET1K_V1


class ResNet34_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("resnet34-b627a593.pth", 21797672, 73.314, 91.420)
    DEFAULT = IMAGENET1K_V1


class ResNet50_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("resnet50-0676ba61.pth", 25557032, 76.130, 92.862)
    IMAGENET1K_V2 = _w("resnet50-11ad3fa6.pth", 25557032, 80.858, 95.434, v2=True,
                       recipe="https://github.com/pytorch/vision/issues/3995#issuecomment-1013906621")
    DEFAULT = IMAGENET1K_V2


class ResNet101_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("resnet101-63fe2227.pth", 44549160, 77.374, 93.546)
    IMAGENET1K_V2 = _w("resnet101-cd907fc2.pth", 44549160, 81.886, 95.780, v2=True, recipe=_NEW)
    DEFAULT = IMAGENET1K_V2


class ResNet152_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("resnet152-394f9c45.pth", 60192808, 78.312, 94.046)
    IMAGENET1K_V2 = _w("resnet152-f82ba261.pth", 60192808, 82.284, 96.002, v2=True, recipe=_NEW)
    DEFAULT = IMAGENET1K_V2


_RX = "https://github.com/pytorch/vision/tree/main/references/classification#resnext"


class ResNeXt50_32X4D_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("resnext50_32x4d-7cdf4587.pth", 25028904, 77.618, 93.698, recipe=_RX)
    IMAGENET1K_V2 = _w("resnext50_32x4d-1a0047aa.pth", 25028904, 81.198, 95.340, v2=True,
                       recipe=_NEW)
    DEFAULT = IMAGENET1K_V2


class ResNeXt101_32X8D_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("resnext101_32x8d-8ba56ff5.pth", 88791336, 79.312, 94.526, recipe=_RX)
    IMAGENET1K_V2 = _w("resnext101_32x8d-110c445d.pth", 88791336, 82.834, 96.228, v2=True,
                       recipe=_NEW + "-with-fixres")
    DEFAULT = IMAGENET1K_V2


class ResNeXt101_64X4D_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("resnext101_64x4d-173b62eb.pth", 83455272, 83.246, 96.454, v2=True,
                       recipe="https://github.com/pytorch/vision/pull/5935",
                       docs="These weights were trained from scratch by using TorchVision's new "
                            "training recipe.")
    DEFAULT = IMAGENET1K_V1


_WRN = "https://github.com/pytorch/vision/pull/912#issue-445437439"


class Wide_ResNet50_2_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("wide_resnet50_2-95faca4d.pth", 68883240, 78.468, 94.086, recipe=_WRN)
    IMAGENET1K_V2 = _w("wide_resnet50_2-9ba9bcbe.pth", 68883240, 81.602, 95.758, v2=True,
                       recipe=_NEW + "-with-fixres")
    DEFAULT = IMAGENET1K_V2


class Wide_ResNet101_2_Weights(WeightsEnum):
    IMAGENET1K_V1 = _w("wide_resnet101_2-32ee1156.pth", 126886696, 78.848, 94.284, recipe=_WRN)
    IMAGENET1K_V2 = _w("wide_resnet101_2-d733dc28.pth", 126886696, 82.510, 96.020, v2=True,
                       recipe=_NEW)
    DEFAULT = IMAGENET1K_V2


_ARGS_DOC = """
    Args:
        weights: a member of the weights enum, its name (``"IMAGENET1K_V1"``, ``"DEFAULT"``),
            the path of a local checkpoint file, or None (random initialisation, the default).
        progress: show a progress bar while downloading.
        **kwargs: passed to :class:`ResNet` (``num_classes``, ``zero_init_residual``, ...).
"""


def _doc(fn, title):
    fn.__doc__ = title + "\n" + _ARGS_DOC
    return fn


@register_model(weights=ResNet18_Weights)
def resnet18(*, weights=None, progress=True, **kwargs):
    return _resnet(BasicBlock, [2, 2, 2, 2], ResNet18_Weights, weights, progress, **kwargs)


@register_model(weights=ResNet34_Weights)
def resnet34(*, weights=None, progress=True, **kwargs):
    return _resnet(BasicBlock, [3, 4, 6, 3], ResNet34_Weights, weights, progress, **kwargs)


@register_model(weights=ResNet50_Weights)
def resnet50(*, weights=None, progress=True, **kwargs):
    return _resnet(Bottleneck, [3, 4, 6, 3], ResNet50_Weights, weights, progress, **kwargs)


@register_model(weights=ResNet101_Weights)
def resnet101(*, weights=None, progress=True, **kwargs):
    return _resnet(Bottleneck, [3, 4, 23, 3], ResNet101_Weights, weights, progress, **kwargs)


@register_model(weights=ResNet152_Weights)
def resnet152(*, weights=None, progress=True, **kwargs):
    return _resnet(Bottleneck, [3, 8, 36, 3], ResNet152_Weights, weights, progress, **kwargs)


@register_model(weights=ResNeXt50_32X4D_Weights)
def resnext50_32x4d(*, weights=None, progress=True, **kwargs):
    kwargs.update(groups=32, width_per_group=4)
    return _resnet(Bottleneck, [3, 4, 6, 3], ResNeXt50_32X4D_Weights, weights, progress, **kwargs)


@register_model(weights=ResNeXt101_32X8D_Weights)
def resnext101_32x8d(*, weights=None, progress=True, **kwargs):
    kwargs.update(groups=32, width_per_group=8)
    return _resnet(Bottleneck, [3, 4, 23, 3], ResNeXt101_32X8D_Weights, weights, progress,
                   **kwargs)


@register_model(weights=ResNeXt101_64X4D_Weights)
def resnext101_64x4d(*, weights=None, progress=True, **kwargs):
    kwargs.update(groups=64, width_per_group=4)
    return _resnet(Bottleneck, [3, 4, 23, 3], ResNeXt101_64X4D_Weights, weights, progress,
                   **kwargs)


@register_model(weights=Wide_ResNet50_2_Weights)
def wide_resnet50_2(*, weights=None, progress=True, **kwargs):
    kwargs.update(width_per_group=128)
    return _resnet(Bottleneck, [3, 4, 6, 3], Wide_ResNet50_2_Weights, weights, progress, **kwargs)


@register_model(weights=Wide_ResNet101_2_Weights)
def wide_resnet101_2(*, weights=None, progress=True, **kwargs):
    kwargs.update(width_per_group=128)
    return _resnet(Bottleneck, [3, 4, 23, 3], Wide_ResNet101_2_Weights, weights, progress,
                   **kwargs)


_doc(resnet18, "ResNet-18 (He et al., Deep Residual Learning for Image Recognition).")
_doc(resnet34, "ResNet-34 (He et al., Deep Residual Learning for Image Recognition).")
_doc(resnet50, "ResNet-50 (V1.5: stride on the 3x3 convolution), as torchvision's.")
_doc(resnet101, "ResNet-101 (V1.5), as torchvision's.")
_doc(resnet152, "ResNet-152 (V1.5), as torchvision's.")
_doc(resnext50_32x4d, "ResNeXt-50 32x4d (Aggregated Residual Transformations).")
_doc(resnext101_32x8d, "ResNeXt-101 32x8d (Aggregated Residual Transformations).")
_doc(resnext101_64x4d, "ResNeXt-101 64x4d (Aggregated Residual Transformations).")
_doc(wide_resnet50_2, "Wide ResNet-50-2: bottleneck channels twice ResNet-50's.")
_doc(wide_resnet101_2, "Wide ResNet-101-2: bottleneck channels twice ResNet-101's.")
