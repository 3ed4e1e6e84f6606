"""Lite R-ASPP on a dilated MobileNetV3-Large (torchvision.models.segmentation.lraspp)."""
from collections import OrderedDict

from fiamma import nn
from fiamma.nn import functional as F
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models._utils import IntermediateLayerGetter
from fiamma.vision.models.mobilenetv3 import MobileNet_V3_Large_Weights, mobilenet_v3_large
from fiamma.vision.models.segmentation._utils import (
    load_into,
    resolve,
    segmentation_meta,
    segmentation_preset,
)
from fiamma.vision.models.segmentation.deeplabv3 import mobilenet_stages

__all__ = ["LRASPP", "LRASPP_MobileNet_V3_Large_Weights", "lraspp_mobilenet_v3_large"]


class LRASPP(nn.Module):
    """Lite R-ASPP ("Searching for MobileNetV3"): ``backbone`` returns ``{"low", "high"}``
    features; returns ``OrderedDict(out=logits)`` at the input's size.

        >>> import fiamma
        >>> m = lraspp_mobilenet_v3_large(weights=None, weights_backbone=None).eval()
        >>> tuple(m(fiamma.zeros(1, 3, 64, 64))["out"].shape)
        (1, 21, 64, 64)
    """

    def __init__(self, backbone, low_channels, high_channels, num_classes, inter_channels=128):
        super().__init__()
        self.backbone = backbone
        self.classifier = LRASPPHead(low_channels, high_channels, num_classes, inter_channels)

    def forward(self, input):
        out = self.classifier(self.backbone(input))
        out = F.interpolate(out, size=tuple(input.shape[-2:]), mode="bilinear",
                            align_corners=False)
        return OrderedDict(out=out)


class LRASPPHead(nn.Module):
    def __init__(self, low_channels, high_channels, num_classes, inter_channels):
        super().__init__()
        self.cbr = nn.Sequential(
            nn.Conv2d(high_channels, inter_channels, 1, bias=False),
            nn.BatchNorm2d(inter_channels),
            nn.ReLU(inplace=True),
        )
        self.scale = nn.Sequential(
            nn.AdaptiveAvgPool2d(1),
            nn.Conv2d(high_channels, inter_channels, 1, bias=False),
            nn.Sigmoid(),
        )
        self.low_classifier = nn.Conv2d(low_channels, num_classes, 1)
        self.high_classifier = nn.Conv2d(inter_channels, num_classes, 1)

    def forward(self, input):
        low, high = input["low"], input["high"]
        x = self.cbr(high) * self.scale(high)
        x = F.interpolate(x, size=tuple(low.shape[-2:]), mode="bilinear", align_corners=False)
        return self.low_classifier(low) + self.high_classifier(x)


class LRASPP_MobileNet_V3_Large_Weights(WeightsEnum):
    COCO_WITH_VOC_LABELS_V1 = Weights(
        url="https://download.pytorch.org/models/lraspp_mobilenet_v3_large-d234d4ea.pth",
        transforms=segmentation_preset(520),
        meta=segmentation_meta(
            3221538,
            "https://github.com/pytorch/vision/tree/main/references/segmentation"
            "#lraspp_mobilenet_v3_large", 57.9, 91.2, 2.086, 12.49))
    DEFAULT = COCO_WITH_VOC_LABELS_V1


@register_model(weights=LRASPP_MobileNet_V3_Large_Weights)
def lraspp_mobilenet_v3_large(*, weights=None, progress=True, num_classes=None,
                              weights_backbone=MobileNet_V3_Large_Weights.IMAGENET1K_V1,
                              **kwargs):
    """LR-ASPP MobileNetV3-Large (torchvision's ``lraspp_mobilenet_v3_large``): ``weights``,
    ``num_classes`` (default 21), ``weights_backbone`` (None to build offline)."""
    if kwargs.pop("aux_loss", False):
        raise NotImplementedError("lraspp_mobilenet_v3_large: this model does not use an "
                                  "auxiliary loss")
    if kwargs:
        raise TypeError(f"lraspp_mobilenet_v3_large: unexpected arguments {sorted(kwargs)}")
    weights, weights_backbone, num_classes, _ = resolve(
        LRASPP_MobileNet_V3_Large_Weights, weights, MobileNet_V3_Large_Weights,
        weights_backbone, num_classes, aux_loss=True)
    features = mobilenet_v3_large(weights=weights_backbone, dilated=True).features
    stages = mobilenet_stages(features)
    low, high = stages[-4], stages[-1]
    body = IntermediateLayerGetter(features, {str(low): "low", str(high): "high"})
    model = LRASPP(body, features[low].out_channels, features[high].out_channels, num_classes)
    return load_into(model, weights, progress)
