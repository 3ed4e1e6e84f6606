"""DeepLabV3 with ResNet-50/101 and MobileNetV3-Large backbones
(torchvision.models.segmentation.deeplabv3)."""
import fiamma
from fiamma import nn
from fiamma.nn import functional as F
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models._utils import IntermediateLayerGetter
from fiamma.vision.models.mobilenetv3 import MobileNet_V3_Large_Weights, mobilenet_v3_large
from fiamma.vision.models.resnet import ResNet50_Weights, ResNet101_Weights, resnet50, resnet101
from fiamma.vision.models.segmentation._utils import (
    FCNHead,
    _SimpleSegmentationModel,
    load_into,
    resolve,
    segmentation_meta,
    segmentation_preset,
)

__all__ = ["DeepLabV3", "DeepLabHead", "ASPP", "DeepLabV3_ResNet50_Weights",
           "DeepLabV3_ResNet101_Weights", "DeepLabV3_MobileNet_V3_Large_Weights",
           "deeplabv3_resnet50", "deeplabv3_resnet101", "deeplabv3_mobilenet_v3_large"]

_REF = "https://github.com/pytorch/vision/tree/main/references/segmentation#"


class DeepLabV3(_SimpleSegmentationModel):
    """DeepLabV3 ("Rethinking Atrous Convolution for Semantic Image Segmentation").

        >>> import fiamma
        >>> m = deeplabv3_resnet50(weights=None, weights_backbone=None, num_classes=2).eval()
        >>> tuple(m(fiamma.zeros(1, 3, 32, 32))["out"].shape)
        (1, 2, 32, 32)
    """


class ASPPConv(nn.Sequential):
    def __init__(self, in_channels, out_channels, dilation):
        super().__init__(
            nn.Conv2d(in_channels, out_channels, 3, padding=dilation, dilation=dilation,
                      bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
        )


class ASPPPooling(nn.Sequential):
    def __init__(self, in_channels, out_channels):
        super().__init__(
            nn.AdaptiveAvgPool2d(1),
            nn.Conv2d(in_channels, out_channels, 1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
        )

    def forward(self, x):
        size = tuple(x.shape[-2:])
        for mod in self:
            x = mod(x)
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


class ASPP(nn.Module):
    """Atrous spatial pyramid pooling: a 1x1 branch, one 3x3 branch per rate in
    ``atrous_rates``, image pooling; concatenated and projected to ``out_channels``."""

    def __init__(self, in_channels, atrous_rates, out_channels=256):
        super().__init__()
        modules = [nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, bias=False),
                                 nn.BatchNorm2d(out_channels), nn.ReLU())]
        for rate in tuple(atrous_rates):
            modules.append(ASPPConv(in_channels, out_channels, rate))
        modules.append(ASPPPooling(in_channels, out_channels))
        self.convs = nn.ModuleList(modules)
        self.project = nn.Sequential(
            nn.Conv2d(len(self.convs) * out_channels, out_channels, 1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
            nn.Dropout(0.5),
        )

    def forward(self, x):
        return self.project(fiamma.cat([conv(x) for conv in self.convs], dim=1))


class DeepLabHead(nn.Sequential):
    """ASPP, 3x3 conv 256, BN, ReLU, 1x1 conv to ``num_classes``."""

    def __init__(self, in_channels, num_classes, atrous_rates=(12, 24, 36)):
        super().__init__(
            ASPP(in_channels, atrous_rates),
            nn.Conv2d(256, 256, 3, padding=1, bias=False),
            nn.BatchNorm2d(256),
            nn.ReLU(),
            nn.Conv2d(256, num_classes, 1),
        )


def _w(file, num_params, recipe, miou, acc, ops, size):
    return Weights(url=f"https://download.pytorch.org/models/{file}",
                   transforms=segmentation_preset(520),
                   meta=segmentation_meta(num_params, _REF + recipe, miou, acc, ops, size))


class DeepLabV3_ResNet50_Weights(WeightsEnum):
    COCO_WITH_VOC_LABELS_V1 = _w("deeplabv3_resnet50_coco-cd0a2569.pth", 42004074,
                                 "deeplabv3_resnet50", 66.4, 92.4, 178.722, 160.515)
    DEFAULT = COCO_WITH_VOC_LABELS_V1


class DeepLabV3_ResNet101_Weights(WeightsEnum):
    COCO_WITH_VOC_LABELS_V1 = _w("deeplabv3_resnet101_coco-586e9e4e.pth", 60996202,
                                 "fcn_resnet101", 67.4, 92.4, 258.743, 233.217)
    DEFAULT = COCO_WITH_VOC_LABELS_V1


class DeepLabV3_MobileNet_V3_Large_Weights(WeightsEnum):
    COCO_WITH_VOC_LABELS_V1 = _w("deeplabv3_mobilenet_v3_large-fc3c493d.pth", 11029328,
                                 "deeplabv3_mobilenet_v3_large", 60.3, 91.2, 10.452, 42.301)
    DEFAULT = COCO_WITH_VOC_LABELS_V1


def _deeplabv3_resnet(backbone, num_classes, aux):
    layers = {"layer4": "out"}
    if aux:
        layers["layer3"] = "aux"
    body = IntermediateLayerGetter(backbone, layers)
    aux_classifier = FCNHead(1024, num_classes) if aux else None
    return DeepLabV3(body, DeepLabHead(2048, num_classes), aux_classifier)


def mobilenet_stages(features):
    """Indices of the stride-changing blocks of a MobileNetV3 ``features`` stack, with the first
    and last block (torchvision's stage indices)."""
    return ([0] + [i for i, b in enumerate(features) if getattr(b, "_is_cn", False)]
            + [len(features) - 1])


def _deeplabv3_mobilenetv3(backbone, num_classes, aux):
    features = backbone.features
    stages = mobilenet_stages(features)
    out_pos, aux_pos = stages[-1], stages[-4]     # C5 (output stride 16), C2 (stride 8)
    layers = {str(out_pos): "out"}
    if aux:
        layers[str(aux_pos)] = "aux"
    body = IntermediateLayerGetter(features, layers)
    aux_classifier = FCNHead(features[aux_pos].out_channels, num_classes) if aux else None
    return DeepLabV3(body, DeepLabHead(features[out_pos].out_channels, num_classes),
                     aux_classifier)


def _check_kwargs(name, kwargs):
    if kwargs:
        raise TypeError(f"{name}: unexpected arguments {sorted(kwargs)}")


def _resnet_builder(enum_cls, backbone_fn, backbone_enum, weights, progress, num_classes,
                    aux_loss, weights_backbone):
    weights, weights_backbone, num_classes, aux_loss = resolve(
        enum_cls, weights, backbone_enum, weights_backbone, num_classes, aux_loss)
    backbone = backbone_fn(weights=weights_backbone,
                           replace_stride_with_dilation=[False, True, True])
    return load_into(_deeplabv3_resnet(backbone, num_classes, aux_loss), weights, progress)


@register_model(weights=DeepLabV3_ResNet50_Weights)
def deeplabv3_resnet50(*, weights=None, progress=True, num_classes=None, aux_loss=None,
                       weights_backbone=ResNet50_Weights.IMAGENET1K_V1, **kwargs):
    """DeepLabV3-ResNet50 (torchvision's ``deeplabv3_resnet50``): ``weights``, ``num_classes``
    (default 21), ``aux_loss``, ``weights_backbone`` (None to build offline)."""
    _check_kwargs("deeplabv3_resnet50", kwargs)
    return _resnet_builder(DeepLabV3_ResNet50_Weights, resnet50, ResNet50_Weights, weights,
                           progress, num_classes, aux_loss, weights_backbone)


@register_model(weights=DeepLabV3_ResNet101_Weights)
def deeplabv3_resnet101(*, weights=None, progress=True, num_classes=None, aux_loss=None,
                        weights_backbone=ResNet101_Weights.IMAGENET1K_V1, **kwargs):
    """DeepLabV3-ResNet101 (torchvision's ``deeplabv3_resnet101``); arguments as
    :func:`deeplabv3_resnet50`."""
    _check_kwargs("deeplabv3_resnet101", kwargs)
    return _resnet_builder(DeepLabV3_ResNet101_Weights, resnet101, ResNet101_Weights, weights,
                           progress, num_classes, aux_loss, weights_backbone)


@register_model(weights=DeepLabV3_MobileNet_V3_Large_Weights)
def deeplabv3_mobilenet_v3_large(*, weights=None, progress=True, num_classes=None,
                                 aux_loss=None,
                                 weights_backbone=MobileNet_V3_Large_Weights.IMAGENET1K_V1,
                                 **kwargs):
    """DeepLabV3 on a dilated MobileNetV3-Large (torchvision's
    ``deeplabv3_mobilenet_v3_large``); arguments as :func:`deeplabv3_resnet50`."""
    _check_kwargs("deeplabv3_mobilenet_v3_large", kwargs)
    weights, weights_backbone, num_classes, aux_loss = resolve(
        DeepLabV3_MobileNet_V3_Large_Weights, weights, MobileNet_V3_Large_Weights,
        weights_backbone, num_classes, aux_loss)
    backbone = mobilenet_v3_large(weights=weights_backbone, dilated=True)
    return load_into(_deeplabv3_mobilenetv3(backbone, num_classes, aux_loss), weights, progress)
