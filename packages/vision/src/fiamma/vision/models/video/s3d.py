"""S3D (torchvision.models.video.s3d): the separable 3D Inception network of Xie et al.,
"Rethinking Spatiotemporal Feature Learning" - every 3x3x3 convolution of I3D split into a
1xkxk spatial and a kx1x1 temporal one. Same classes, module names (torchvision checkpoints
load by key) and weights enum as torchvision.

The head pools with a fixed 2x7x7 window, so clips need at least 13 frames of 209x209 pixels
(224x224 in training); the window's outputs are averaged.

    >>> import fiamma
    >>> from fiamma.vision.models.video import s3d
    >>> model = s3d(weights=None, num_classes=5).eval()
    >>> tuple(model(fiamma.zeros(1, 3, 14, 224, 224)).shape)
    (1, 5)
"""
import functools

import fiamma
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models._meta import kinetics400_categories
from fiamma.vision.models._weights_util import build
from fiamma.vision.models.video.resnet import _video_preset
from fiamma.vision.ops import Conv3dNormActivation

__all__ = ["S3D", "S3D_Weights", "s3d"]


class TemporalSeparableConv(nn.Sequential):
    """A 1 x k x k convolution (spatial stride) then a k x 1 x 1 one (temporal stride), each
    with norm and ReLU."""

    def __init__(self, in_planes, out_planes, kernel_size, stride, padding, norm_layer):
        super().__init__(
            Conv3dNormActivation(in_planes, out_planes, kernel_size=(1, kernel_size, kernel_size),
                                 stride=(1, stride, stride), padding=(0, padding, padding),
                                 bias=False, norm_layer=norm_layer),
            Conv3dNormActivation(out_planes, out_planes, kernel_size=(kernel_size, 1, 1),
                                 stride=(stride, 1, 1), padding=(padding, 0, 0), bias=False,
                                 norm_layer=norm_layer))


class SepInceptionBlock3D(nn.Module):
    """Four branches concatenated on channels: 1x1x1; 1x1x1 then separable 3x3x3; the same with
    other widths; 3x3x3 max pooling then 1x1x1."""

    def __init__(self, in_planes, b0_out, b1_mid, b1_out, b2_mid, b2_out, b3_out, norm_layer):
        super().__init__()
        self.branch0 = Conv3dNormActivation(in_planes, b0_out, kernel_size=1, stride=1,
                                            norm_layer=norm_layer)
        self.branch1 = nn.Sequential(
            Conv3dNormActivation(in_planes, b1_mid, kernel_size=1, stride=1,
                                 norm_layer=norm_layer),
            TemporalSeparableConv(b1_mid, b1_out, kernel_size=3, stride=1, padding=1,
                                  norm_layer=norm_layer))
        self.branch2 = nn.Sequential(
            Conv3dNormActivation(in_planes, b2_mid, kernel_size=1, stride=1,
                                 norm_layer=norm_layer),
            TemporalSeparableConv(b2_mid, b2_out, kernel_size=3, stride=1, padding=1,
                                  norm_layer=norm_layer))
        self.branch3 = nn.Sequential(
            nn.MaxPool3d(kernel_size=(3, 3, 3), stride=1, padding=1),
            Conv3dNormActivation(in_planes, b3_out, kernel_size=1, stride=1,
                                 norm_layer=norm_layer))

    def forward(self, x):
        return fiamma.cat([self.branch0(x), self.branch1(x), self.branch2(x), self.branch3(x)],
                          1)


# (in, b0_out, b1_mid, b1_out, b2_mid, b2_out, b3_out) of the inception blocks, "pool" where a
# max pooling sits between them
_BLOCKS = [
    (192, 64, 96, 128, 16, 32, 32), (256, 128, 128, 192, 32, 96, 64), "pool3",
    (480, 192, 96, 208, 16, 48, 64), (512, 160, 112, 224, 24, 64, 64),
    (512, 128, 128, 256, 24, 64, 64), (512, 112, 144, 288, 32, 64, 64),
    (528, 256, 160, 320, 32, 128, 128), "pool2",
    (832, 256, 160, 320, 32, 128, 128), (832, 384, 192, 384, 48, 128, 128),
]


class S3D(nn.Module):
    """S3D over clips ``(N, 3, T, H, W)``: ``features`` (stem and nine separable inception
    blocks, 1024 channels at stride 8 in time and 32 in space), a 2x7x7 average pooling, then
    ``classifier`` (dropout and a 1x1x1 convolution) and the mean over the pooled positions.

    Args:
        num_classes: outputs (400, Kinetics-400).
        dropout: dropout probability before the classifier.
        norm_layer: the norm of every convolution (default ``BatchNorm3d(eps=0.001,
            momentum=0.001)``).
    """

    def __init__(self, num_classes=400, dropout=0.2, norm_layer=None):
        super().__init__()
        if norm_layer is None:
            norm_layer = functools.partial(nn.BatchNorm3d, eps=0.001, momentum=0.001)
        layers = [
            TemporalSeparableConv(3, 64, 7, 2, 3, norm_layer),
            nn.MaxPool3d(kernel_size=(1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1)),
            Conv3dNormActivation(64, 64, kernel_size=1, stride=1, norm_layer=norm_layer),
            TemporalSeparableConv(64, 192, 3, 1, 1, norm_layer),
            nn.MaxPool3d(kernel_size=(1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1)),
        ]
        for spec in _BLOCKS:
            if spec == "pool3":
                layers.append(nn.MaxPool3d(kernel_size=(3, 3, 3), stride=(2, 2, 2),
                                           padding=(1, 1, 1)))
            elif spec == "pool2":
                layers.append(nn.MaxPool3d(kernel_size=(2, 2, 2), stride=(2, 2, 2),
                                           padding=(0, 0, 0)))
            else:
                layers.append(SepInceptionBlock3D(*spec, norm_layer))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AvgPool3d(kernel_size=(2, 7, 7), stride=1)
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout),
            nn.Conv3d(1024, num_classes, kernel_size=1, stride=1, bias=True))

    def forward(self, x):
        if x.ndim != 5:
            raise ValueError(f"S3D: expected a clip (N, C, T, H, W), got shape {tuple(x.shape)}")
        x = self.features(x)
        if x.shape[2] < 2 or x.shape[3] < 7 or x.shape[4] < 7:
            raise ValueError(f"S3D: the clip {tuple(x.shape[2:])} (T, H, W) after the features "
                             "is smaller than the 2x7x7 pooling window; use at least 13 frames "
                             "of 209x209 pixels")
        x = self.classifier(self.avgpool(x))
        return x.mean(dim=(2, 3, 4))


class S3D_Weights(WeightsEnum):
    KINETICS400_V1 = Weights(
        url="https://download.pytorch.org/models/s3d-d76dad2f.pth",
        transforms=_video_preset(crop_size=(224, 224), resize_size=(256, 256)),
        meta={"min_size": (224, 224), "min_temporal_size": 14,
              "categories": kinetics400_categories(),
              "recipe": "https://github.com/pytorch/vision/tree/main/references/"
                        "video_classification#s3d",
              "_docs": "The weights aim to approximate the accuracy of the paper. The accuracies "
                       "are estimated on clip-level with parameters `frame_rate=15`, "
                       "`clips_per_video=1`, and `clip_len=128`.",
              "num_params": 8320048,
              "_metrics": {"Kinetics-400": {"acc@1": 68.368, "acc@5": 88.05}},
              "_ops": 17.979, "_file_size": 31.972})
    DEFAULT = KINETICS400_V1


@register_model(weights=S3D_Weights)
def s3d(*, weights=None, progress=True, **kwargs):
    """S3D (Xie et al., Rethinking Spatiotemporal Feature Learning).

    Args:
        weights: a :class:`S3D_Weights` member or its name (``"KINETICS400_V1"``,
            ``"DEFAULT"``), the path of a local checkpoint file, a state dict, or None (random
            initialisation, the default).
        progress: show a progress bar while downloading.
        **kwargs: passed to :class:`S3D` (``num_classes``, ``dropout``, ``norm_layer``).
    """
    return build(S3D_Weights, weights, progress, kwargs, lambda **kw: S3D(**kw))
