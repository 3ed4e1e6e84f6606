"""Backbones with a Feature Pyramid Network for the detectors
(torchvision.models.detection.backbone_utils)."""
import warnings

from fiamma import nn
from fiamma.vision.models import resnet
from fiamma.vision.models._utils import IntermediateLayerGetter
from fiamma.vision.ops.feature_pyramid_network import (  # noqa: F401
    ExtraFPNBlock,
    FeaturePyramidNetwork,
    LastLevelMaxPool,
)
from fiamma.vision.ops.misc import FrozenBatchNorm2d

__all__ = ["BackboneWithFPN", "resnet_fpn_backbone", "mobilenet_backbone"]


class BackboneWithFPN(nn.Module):
    """``body`` (an IntermediateLayerGetter of ``backbone`` returning ``return_layers``) followed
    by an FPN with ``out_channels`` channels on every level (``LastLevelMaxPool`` by default).

        >>> import fiamma
        >>> from fiamma.vision.models import resnet18
        >>> b = BackboneWithFPN(resnet18(), {"layer3": "0", "layer4": "1"}, [256, 512], 32)
        >>> [(k, tuple(v.shape)) for k, v in b(fiamma.zeros(1, 3, 64, 64)).items()]
        [('0', (1, 32, 4, 4)), ('1', (1, 32, 2, 2)), ('pool', (1, 32, 1, 1))]
    """

    def __init__(self, backbone, return_layers, in_channels_list, out_channels,
                 extra_blocks=None, norm_layer=None):
        super().__init__()
        if extra_blocks is None:
            extra_blocks = LastLevelMaxPool()
        self.body = IntermediateLayerGetter(backbone, return_layers=return_layers)
        self.fpn = FeaturePyramidNetwork(in_channels_list=in_channels_list,
                                         out_channels=out_channels, extra_blocks=extra_blocks,
                                         norm_layer=norm_layer)
        self.out_channels = out_channels

    def forward(self, x):
        return self.fpn(self.body(x))


def resnet_fpn_backbone(*, backbone_name, weights, norm_layer=FrozenBatchNorm2d,
                        trainable_layers=3, returned_layers=None, extra_blocks=None):
    """A torchvision ResNet named ``backbone_name`` ('resnet18' ... 'wide_resnet101_2') with an
    FPN of 256 channels; the first ``5 - trainable_layers`` stages are frozen."""
    names = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d",
             "resnext101_32x8d", "resnext101_64x4d", "wide_resnet50_2", "wide_resnet101_2")
    if backbone_name not in names:
        raise ValueError(f"resnet_fpn_backbone: unknown backbone_name {backbone_name!r}; "
                         f"expected one of {names}")
    backbone = getattr(resnet, backbone_name)(weights=weights, norm_layer=norm_layer)
    return _resnet_fpn_extractor(backbone, trainable_layers, returned_layers, extra_blocks)


def _resnet_fpn_extractor(backbone, trainable_layers, returned_layers=None, extra_blocks=None,
                          norm_layer=None):
    if trainable_layers < 0 or trainable_layers > 5:
        raise ValueError(f"Trainable layers should be in the range [0,5], got "
                         f"{trainable_layers}")
    layers_to_train = ["layer4", "layer3", "layer2", "layer1", "conv1"][:trainable_layers]
    if trainable_layers == 5:
        layers_to_train.append("bn1")
    for name, parameter in backbone.named_parameters():
        if all(not name.startswith(layer) for layer in layers_to_train):
            parameter.requires_grad_(False)
    if extra_blocks is None:
        extra_blocks = LastLevelMaxPool()
    if returned_layers is None:
        returned_layers = [1, 2, 3, 4]
    if min(returned_layers) <= 0 or max(returned_layers) >= 5:
        raise ValueError(f"Each returned layer should be in the range [1,4]. Got "
                         f"{returned_layers}")
    return_layers = {f"layer{k}": str(v) for v, k in enumerate(returned_layers)}
    in_channels_stage2 = backbone.inplanes // 8
    in_channels_list = [in_channels_stage2 * 2 ** (i - 1) for i in returned_layers]
    return BackboneWithFPN(backbone, return_layers, in_channels_list, 256,
                           extra_blocks=extra_blocks, norm_layer=norm_layer)


def mobilenet_backbone(*, backbone_name, weights, fpn, norm_layer=FrozenBatchNorm2d,
                       trainable_layers=2, returned_layers=None, extra_blocks=None):
    """The ``features`` of a torchvision MobileNet named ``backbone_name`` ('mobilenet_v2',
    'mobilenet_v3_large', 'mobilenet_v3_small'), with an FPN of 256 channels when ``fpn``, or
    else followed by a 1x1 conv to 256 channels; the first stages are frozen so that
    ``trainable_layers`` stages train.

        >>> import fiamma
        >>> b = mobilenet_backbone(backbone_name="mobilenet_v3_small", weights=None, fpn=True)
        >>> [(k, tuple(v.shape)) for k, v in b(fiamma.zeros(1, 3, 64, 64)).items()]
        [('0', (1, 256, 2, 2)), ('1', (1, 256, 2, 2)), ('pool', (1, 256, 1, 1))]
    """
    from fiamma.vision.models import mobilenetv2, mobilenetv3
    builders = {"mobilenet_v2": mobilenetv2.mobilenet_v2,
                "mobilenet_v3_large": mobilenetv3.mobilenet_v3_large,
                "mobilenet_v3_small": mobilenetv3.mobilenet_v3_small}
    if backbone_name not in builders:
        raise ValueError(f"mobilenet_backbone: unknown backbone_name {backbone_name!r}; expected "
                         f"one of {tuple(builders)}")
    backbone = builders[backbone_name](weights=weights, norm_layer=norm_layer)
    return _mobilenet_extractor(backbone, fpn, trainable_layers, returned_layers, extra_blocks)


def _freeze_stages(features, stage_indices, trainable_layers):
    """Stop the gradients of the blocks of ``features`` before its last ``trainable_layers``
    stages (stage k starts at block ``stage_indices[k]``; 0: every block frozen)."""
    num_stages = len(stage_indices)
    freeze_before = (len(features) if trainable_layers == 0
                     else stage_indices[num_stages - trainable_layers])
    for b in list(features)[:freeze_before]:
        for parameter in b.parameters():
            parameter.requires_grad_(False)


def _mobilenet_extractor(backbone, fpn, trainable_layers, returned_layers=None,
                         extra_blocks=None, norm_layer=None):
    backbone = backbone.features
    # stages start at the stem, at every strided block and at the last conv
    stage_indices = ([0] + [i for i, b in enumerate(backbone) if getattr(b, "_is_cn", False)]
                     + [len(backbone) - 1])
    num_stages = len(stage_indices)
    if trainable_layers < 0 or trainable_layers > num_stages:
        raise ValueError(f"Trainable layers should be in the range [0,{num_stages}], got "
                         f"{trainable_layers} ")
    _freeze_stages(backbone, stage_indices, trainable_layers)
    out_channels = 256
    if fpn:
        if extra_blocks is None:
            extra_blocks = LastLevelMaxPool()
        if returned_layers is None:
            returned_layers = [num_stages - 2, num_stages - 1]
        if min(returned_layers) < 0 or max(returned_layers) >= num_stages:
            raise ValueError(f"Each returned layer should be in the range [0,{num_stages - 1}], "
                             f"got {returned_layers} ")
        return_layers = {f"{stage_indices[k]}": str(v) for v, k in enumerate(returned_layers)}
        in_channels_list = [backbone[stage_indices[i]].out_channels for i in returned_layers]
        return BackboneWithFPN(backbone, return_layers, in_channels_list, out_channels,
                               extra_blocks=extra_blocks, norm_layer=norm_layer)
    m = nn.Sequential(backbone, nn.Conv2d(backbone[-1].out_channels, out_channels, 1))
    m.out_channels = out_channels
    return m


def _validate_trainable_layers(is_trained, trainable_backbone_layers, max_value, default_value):
    if not is_trained:
        if trainable_backbone_layers is not None:
            warnings.warn("Changing trainable_backbone_layers has no effect if neither "
                          "pretrained nor pretrained_backbone have been set to True, falling "
                          f"back to trainable_backbone_layers={max_value} so that all layers "
                          "are trainable")
        trainable_backbone_layers = max_value
    if trainable_backbone_layers is None:
        trainable_backbone_layers = default_value
    if trainable_backbone_layers < 0 or trainable_backbone_layers > max_value:
        raise ValueError(f"Trainable backbone layers should be in the range [0,{max_value}], "
                         f"got {trainable_backbone_layers} ")
    return trainable_backbone_layers

