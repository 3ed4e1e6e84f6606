"""What the segmentation models share: the backbone + classifier wrapper, the FCN head, the
weights metadata and the builder's weights/num_classes/aux_loss resolution."""
from collections import OrderedDict
from functools import partial

from fiamma import nn
from fiamma.nn import functional as F
from fiamma.vision.models._api import WeightsEnum, load_weights, resolve_weights

__all__ = ["_SimpleSegmentationModel", "FCNHead", "VOC_CATEGORIES", "segmentation_meta",
           "segmentation_preset"]

VOC_CATEGORIES = [
    "__background__", "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat",
    "chair", "cow", "diningtable", "dog", "horse", "motorbike", "person", "pottedplant",
    "sheep", "sofa", "train", "tvmonitor",
]

_VOC_DOCS = ("\n        These weights were trained on a subset of COCO, using only the 20 "
             "categories that are present in the Pascal VOC\n        dataset.\n    ")


def _semantic_segmentation(*args, **kwargs):
    from fiamma.vision.transforms._presets import SemanticSegmentation
    return SemanticSegmentation(*args, **kwargs)


def segmentation_preset(resize_size=520):
    """``partial(SemanticSegmentation, resize_size=...)``, imported when called."""
    return partial(_semantic_segmentation, resize_size=resize_size)


def segmentation_meta(num_params, recipe, miou, pixel_acc, ops, file_size):
    return {"categories": VOC_CATEGORIES, "min_size": (1, 1), "_docs": _VOC_DOCS,
            "num_params": num_params, "recipe": recipe,
            "_metrics": {"COCO-val2017-VOC-labels": {"miou": miou, "pixel_acc": pixel_acc}},
            "_ops": ops, "_file_size": file_size}


class _SimpleSegmentationModel(nn.Module):
    """backbone -> classifier (and aux_classifier on the "aux" feature), each upsampled
    bilinearly to the input's size; returns ``OrderedDict(out=..., [aux=...])``."""

    def __init__(self, backbone, classifier, aux_classifier=None):
        super().__init__()
        self.backbone = backbone
        self.classifier = classifier
        self.aux_classifier = aux_classifier

    def forward(self, x):
        size = tuple(x.shape[-2:])
        features = self.backbone(x)
        result = OrderedDict()
        out = self.classifier(features["out"])
        result["out"] = F.interpolate(out, size=size, mode="bilinear", align_corners=False)
        if self.aux_classifier is not None:
            aux = self.aux_classifier(features["aux"])
            result["aux"] = F.interpolate(aux, size=size, mode="bilinear", align_corners=False)
        return result


class FCNHead(nn.Sequential):
    """3x3 conv to ``in_channels // 4``, BN, ReLU, dropout 0.1, 1x1 conv to ``channels``."""

    def __init__(self, in_channels, channels):
        inter = in_channels // 4
        super().__init__(
            nn.Conv2d(in_channels, inter, 3, padding=1, bias=False),
            nn.BatchNorm2d(inter),
            nn.ReLU(),
            nn.Dropout(0.1),
            nn.Conv2d(inter, channels, 1),
        )


def _override(name, actual, expected):
    if actual is not None and actual != expected:
        raise ValueError(f"The parameter '{name}' expected value {expected} but got {actual} "
                         f"instead.")
    return expected


def resolve(enum_cls, weights, backbone_enum, weights_backbone, num_classes, aux_loss=None):
    """torchvision's rules: pretrained weights fix num_classes (and aux_loss=True where the
    checkpoint has an aux head) and drop the backbone weights; otherwise num_classes
    defaults to 21. Returns (weights, weights_backbone, num_classes, aux_loss)."""
    weights = resolve_weights(enum_cls, weights)
    weights_backbone = resolve_weights(backbone_enum, weights_backbone)
    if isinstance(weights, WeightsEnum):
        weights_backbone = None
        num_classes = _override("num_classes", num_classes, len(weights.meta["categories"]))
        aux_loss = _override("aux_loss", aux_loss, True)
    elif weights is not None:
        weights_backbone = None          # a local checkpoint holds the whole model
        if num_classes is None:
            num_classes = 21
    elif num_classes is None:
        num_classes = 21
    return weights, weights_backbone, num_classes, aux_loss


def load_into(model, weights, progress):
    if weights is None:
        return model
    sd = (weights.get_state_dict(progress=progress, check_hash=True)
          if isinstance(weights, WeightsEnum) else load_weights(weights))
    model.load_state_dict(sd)
    return model
