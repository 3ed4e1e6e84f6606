"""FCN with a dilated ResNet-50/101 backbone (torchvision.models.segmentation.fcn)."""
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models._utils import IntermediateLayerGetter
from fiamma.vision.models.resnet import ResNet50_Weights, ResNet101_Weights, resnet50, resnet101
from fiamma.vision.models.segmentation._utils import (
    FCNHead,
    _SimpleSegmentationModel,
    load_into,
    resolve,
    segmentation_meta,
    segmentation_preset,
)

__all__ = ["FCN", "FCNHead", "FCN_ResNet50_Weights", "FCN_ResNet101_Weights", "fcn_resnet50",
           "fcn_resnet101"]

_REF = "https://github.com/pytorch/vision/tree/main/references/segmentation#"


class FCN(_SimpleSegmentationModel):
    """Fully-convolutional network: ``backbone`` returns ``{"out", ["aux"]}`` features,
    ``classifier``/``aux_classifier`` map them to per-class logits at the input's size.

        >>> import fiamma
        >>> m = fcn_resnet50(weights=None, weights_backbone=None, num_classes=3).eval()
        >>> tuple(m(fiamma.zeros(1, 3, 32, 32))["out"].shape)
        (1, 3, 32, 32)
    """


class FCN_ResNet50_Weights(WeightsEnum):
    COCO_WITH_VOC_LABELS_V1 = Weights(
        url="https://download.pytorch.org/models/fcn_resnet50_coco-1167a1af.pth",
        transforms=segmentation_preset(520),
        meta=segmentation_meta(35322218, _REF + "fcn_resnet50", 60.5, 91.4, 152.717, 135.009))
    DEFAULT = COCO_WITH_VOC_LABELS_V1


class FCN_ResNet101_Weights(WeightsEnum):
    COCO_WITH_VOC_LABELS_V1 = Weights(
        url="https://download.pytorch.org/models/fcn_resnet101_coco-7ecb50ca.pth",
        transforms=segmentation_preset(520),
        meta=segmentation_meta(54314346, _REF + "deeplabv3_resnet101", 63.7, 91.9, 232.738,
                               207.711))
    DEFAULT = COCO_WITH_VOC_LABELS_V1


def _fcn_resnet(backbone, num_classes, aux):
    layers = {"layer4": "out"}
    if aux:
        layers["layer3"] = "aux"
    body = IntermediateLayerGetter(backbone, layers)
    aux_classifier = FCNHead(1024, num_classes) if aux else None
    return FCN(body, FCNHead(2048, num_classes), aux_classifier)


def _build(enum_cls, backbone_fn, backbone_enum, weights, progress, num_classes, aux_loss,
           weights_backbone, kwargs):
    weights, weights_backbone, num_classes, aux_loss = resolve(
        enum_cls, weights, backbone_enum, weights_backbone, num_classes, aux_loss)
    backbone = backbone_fn(weights=weights_backbone,
                           replace_stride_with_dilation=[False, True, True])
    if kwargs:
        raise TypeError(f"{backbone_fn.__name__}: unexpected arguments {sorted(kwargs)}")
    return load_into(_fcn_resnet(backbone, num_classes, aux_loss), weights, progress)


@register_model(weights=FCN_ResNet50_Weights)
def fcn_resnet50(*, weights=None, progress=True, num_classes=None, aux_loss=None,
                 weights_backbone=ResNet50_Weights.IMAGENET1K_V1, **kwargs):
    """FCN-ResNet50 (torchvision's ``fcn_resnet50``): ``weights`` (member, name, "DEFAULT",
    None or a local path), ``num_classes`` (default 21), ``aux_loss``, ``weights_backbone``
    (ImageNet ResNet-50 by default, as torchvision; pass None to build offline)."""
    return _build(FCN_ResNet50_Weights, resnet50, ResNet50_Weights, weights, progress,
                  num_classes, aux_loss, weights_backbone, kwargs)


@register_model(weights=FCN_ResNet101_Weights)
def fcn_resnet101(*, weights=None, progress=True, num_classes=None, aux_loss=None,
                  weights_backbone=ResNet101_Weights.IMAGENET1K_V1, **kwargs):
    """FCN-ResNet101 (torchvision's ``fcn_resnet101``); arguments as :func:`fcn_resnet50`."""
    return _build(FCN_ResNet101_Weights, resnet101, ResNet101_Weights, weights, progress,
                  num_classes, aux_loss, weights_backbone, kwargs)
