"""Video ResNets (torchvision.models.video.resnet): R3D-18 (3D convolutions throughout), MC3-18
(3D in the first stage, 2D after it) and R(2+1)D-18 (each 3D convolution factored into a spatial
and a temporal one), from Tran et al., "A Closer Look at Spatiotemporal Convolutions for Action
Recognition". Same classes, module names (torchvision checkpoints load by key),
initialisation and weights enums as torchvision.

    >>> import fiamma
    >>> from fiamma.vision.models.video import r2plus1d_18
    >>> model = r2plus1d_18(weights=None, num_classes=10).eval()
    >>> tuple(model(fiamma.zeros(2, 3, 4, 32, 32)).shape)
    (2, 10)
"""
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models._meta import kinetics400_categories
from fiamma.vision.models._weights_util import build

__all__ = ["VideoResNet", "BasicBlock", "Bottleneck", "Conv3DSimple", "Conv2Plus1D",
           "Conv3DNoTemporal", "BasicStem", "R2Plus1dStem", "R3D_18_Weights", "MC3_18_Weights",
           "R2Plus1D_18_Weights", "r3d_18", "mc3_18", "r2plus1d_18"]


class Conv3DSimple(nn.Conv3d):
    """A full 3x3x3 convolution (no bias); ``midplanes`` is unused, kept so every conv builder
    takes the same arguments."""

    def __init__(self, in_planes, out_planes, midplanes=None, stride=1, padding=1):
        super().__init__(in_planes, out_planes, kernel_size=(3, 3, 3), stride=stride,
                         padding=padding, bias=False)

    @staticmethod
    def get_downsample_stride(stride):
        return stride, stride, stride


class Conv2Plus1D(nn.Sequential):
    """A 1x3x3 spatial convolution to ``midplanes`` channels, batch norm and ReLU, then a 3x1x1
    temporal convolution: the (2+1)D factorisation of a 3x3x3 convolution."""

    def __init__(self, in_planes, out_planes, midplanes, stride=1, padding=1):
        super().__init__(
            nn.Conv3d(in_planes, midplanes, kernel_size=(1, 3, 3), stride=(1, stride, stride),
                      padding=(0, padding, padding), bias=False),
            nn.BatchNorm3d(midplanes),
            nn.ReLU(inplace=True),
            nn.Conv3d(midplanes, out_planes, kernel_size=(3, 1, 1), stride=(stride, 1, 1),
                      padding=(padding, 0, 0), bias=False),
        )

    @staticmethod
    def get_downsample_stride(stride):
        return stride, stride, stride


class Conv3DNoTemporal(nn.Conv3d):
    """A 1x3x3 convolution: spatial only, the time axis is neither mixed nor strided."""

    def __init__(self, in_planes, out_planes, midplanes=None, stride=1, padding=1):
        super().__init__(in_planes, out_planes, kernel_size=(1, 3, 3), stride=(1, stride, stride),
                         padding=(0, padding, padding), bias=False)

    @staticmethod
    def get_downsample_stride(stride):
        return 1, stride, stride


def _midplanes(inplanes, planes):
    # the width at which a (2+1)D block has the parameter count of the 3x3x3 block it replaces
    return (inplanes * planes * 3 * 3 * 3) // (inplanes * 3 * 3 + 3 * planes)


class BasicBlock(nn.Module):
    """Two convolutions from ``conv_builder`` with batch norm and a residual connection."""
    expansion = 1

    def __init__(self, inplanes, planes, conv_builder, stride=1, downsample=None):
        super().__init__()
        mid = _midplanes(inplanes, planes)
        self.conv1 = nn.Sequential(conv_builder(inplanes, planes, mid, stride),
                                   nn.BatchNorm3d(planes), nn.ReLU(inplace=True))
        self.conv2 = nn.Sequential(conv_builder(planes, planes, mid), nn.BatchNorm3d(planes))
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        residual = x if self.downsample is None else self.downsample(x)
        out = self.conv2(self.conv1(x))
        out += residual
        return self.relu(out)


class Bottleneck(nn.Module):
    """1x1x1 reduce, a ``conv_builder`` convolution (strided), 1x1x1 expand (x4), residual."""
    expansion = 4

    def __init__(self, inplanes, planes, conv_builder, stride=1, downsample=None):
        super().__init__()
        mid = _midplanes(inplanes, planes)
        self.conv1 = nn.Sequential(nn.Conv3d(inplanes, planes, kernel_size=1, bias=False),
                                   nn.BatchNorm3d(planes), nn.ReLU(inplace=True))
        self.conv2 = nn.Sequential(conv_builder(planes, planes, mid, stride),
                                   nn.BatchNorm3d(planes), nn.ReLU(inplace=True))
        self.conv3 = nn.Sequential(
            nn.Conv3d(planes, planes * self.expansion, kernel_size=1, bias=False),
            nn.BatchNorm3d(planes * self.expansion))
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        residual = x if self.downsample is None else self.downsample(x)
        out = self.conv3(self.conv2(self.conv1(x)))
        out += residual
        return self.relu(out)


class BasicStem(nn.Sequential):
    """The R3D/MC3 stem: a 3x7x7 convolution to 64 channels (spatial stride 2), BN, ReLU."""

    def __init__(self):
        super().__init__(
            nn.Conv3d(3, 64, kernel_size=(3, 7, 7), stride=(1, 2, 2), padding=(1, 3, 3),
                      bias=False),
            nn.BatchNorm3d(64),
            nn.ReLU(inplace=True))


class R2Plus1dStem(nn.Sequential):
    """The R(2+1)D stem: a 1x7x7 convolution to 45 channels (spatial stride 2), BN, ReLU, then a
    3x1x1 convolution to 64 channels, BN, ReLU."""

    def __init__(self):
        super().__init__(
            nn.Conv3d(3, 45, kernel_size=(1, 7, 7), stride=(1, 2, 2), padding=(0, 3, 3),
                      bias=False),
            nn.BatchNorm3d(45),
            nn.ReLU(inplace=True),
            nn.Conv3d(45, 64, kernel_size=(3, 1, 1), stride=(1, 1, 1), padding=(1, 0, 0),
                      bias=False),
            nn.BatchNorm3d(64),
            nn.ReLU(inplace=True))


class VideoResNet(nn.Module):
    """A ResNet over clips ``(N, 3, T, H, W)``: ``stem()``, four stages of ``block`` whose
    convolutions come from ``conv_makers[i]`` (64, 128, 256, 512 channels; stages 2-4 stride
    2), global average pooling and a linear classifier.

    Args:
        block: :class:`BasicBlock` or :class:`Bottleneck`.
        conv_makers: four convolution builders (:class:`Conv3DSimple`, :class:`Conv2Plus1D`,
            :class:`Conv3DNoTemporal`), one per stage.
        layers: the number of blocks per stage.
        stem: the stem's class (:class:`BasicStem`, :class:`R2Plus1dStem`).
        num_classes: outputs of the classifier (400, Kinetics-400).
        zero_init_residual: zero the last batch norm of each Bottleneck.
    """

    def __init__(self, block, conv_makers, layers, stem, num_classes=400,
                 zero_init_residual=False):
        super().__init__()
        if len(conv_makers) != 4 or len(layers) != 4:
            raise ValueError("VideoResNet: conv_makers and layers need 4 entries each, got "
                             f"{len(conv_makers)} and {len(layers)}")
        self.inplanes = 64
        self.stem = stem()
        self.layer1 = self._make_layer(block, conv_makers[0], 64, layers[0], stride=1)
        self.layer2 = self._make_layer(block, conv_makers[1], 128, layers[1], stride=2)
        self.layer3 = self._make_layer(block, conv_makers[2], 256, layers[2], stride=2)
        self.layer4 = self._make_layer(block, conv_makers[3], 512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv3d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.BatchNorm3d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, Bottleneck):
                    nn.init.constant_(m.conv3[1].weight, 0)

    def _make_layer(self, block, conv_builder, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv3d(self.inplanes, planes * block.expansion, kernel_size=1,
                          stride=conv_builder.get_downsample_stride(stride), bias=False),
                nn.BatchNorm3d(planes * block.expansion))
        layers = [block(self.inplanes, planes, conv_builder, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes, conv_builder) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        if x.ndim != 5:
            raise ValueError(f"VideoResNet: expected a clip (N, C, T, H, W), got shape "
                             f"{tuple(x.shape)}")
        x = self.stem(x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.avgpool(x).flatten(1))


def _video_preset(**kwargs):
    import functools

    def make(**kw):
        from fiamma.vision.transforms._presets import VideoClassification
        return VideoClassification(**kw)
    return functools.partial(make, **kwargs)


_DOCS = ("The weights reproduce closely the accuracy of the paper. The accuracies are estimated "
         "on video-level with parameters `frame_rate=15`, `clips_per_video=5`, and "
         "`clip_len=16`.")


def _weights(file, n, acc1, acc5, ops, size):
    return Weights(
        url="https://download.pytorch.org/models/" + file,
        transforms=_video_preset(crop_size=(112, 112), resize_size=(128, 171)),
        meta={"min_size": (1, 1), "categories": kinetics400_categories(),
              "recipe": "https://github.com/pytorch/vision/tree/main/references/"
                        "video_classification",
              "_docs": _DOCS, "num_params": n,
              "_metrics": {"Kinetics-400": {"acc@1": acc1, "acc@5": acc5}},
              "_ops": ops, "_file_size": size})


class R3D_18_Weights(WeightsEnum):
    KINETICS400_V1 = _weights("r3d_18-b3b3357e.pth", 33371472, 63.2, 83.479, 40.697, 127.359)
    DEFAULT = KINETICS400_V1


class MC3_18_Weights(WeightsEnum):
    KINETICS400_V1 = _weights("mc3_18-a90a0ba3.pth", 11695440, 63.96, 84.13, 43.343, 44.672)
    DEFAULT = KINETICS400_V1


class R2Plus1D_18_Weights(WeightsEnum):
    KINETICS400_V1 = _weights("r2plus1d_18-91a641e6.pth", 31505325, 67.463, 86.175, 40.519,
                              120.318)
    DEFAULT = KINETICS400_V1


def _video_resnet(enum_cls, weights, progress, kwargs, conv_makers, stem):
    return build(enum_cls, weights, progress, kwargs,
                 lambda **kw: VideoResNet(BasicBlock, conv_makers, [2, 2, 2, 2], stem, **kw))


_ARGS = """

    Args:
        weights: a :class:`{0}` member or its name (``"KINETICS400_V1"``, ``"DEFAULT"``), the
            path of a local checkpoint file, a state dict, or None (random initialisation, the
            default).
        progress: show a progress bar while downloading.
        **kwargs: passed to :class:`VideoResNet` (``num_classes``, ``zero_init_residual``).
"""


@register_model(weights=R3D_18_Weights)
def r3d_18(*, weights=None, progress=True, **kwargs):
    return _video_resnet(R3D_18_Weights, weights, progress, kwargs, [Conv3DSimple] * 4,
                         BasicStem)


@register_model(weights=MC3_18_Weights)
def mc3_18(*, weights=None, progress=True, **kwargs):
    return _video_resnet(MC3_18_Weights, weights, progress, kwargs,
                         [Conv3DSimple] + [Conv3DNoTemporal] * 3, BasicStem)


@register_model(weights=R2Plus1D_18_Weights)
def r2plus1d_18(*, weights=None, progress=True, **kwargs):
    return _video_resnet(R2Plus1D_18_Weights, weights, progress, kwargs, [Conv2Plus1D] * 4,
                         R2Plus1dStem)


r3d_18.__doc__ = "R3D-18: an 18-layer ResNet of 3x3x3 convolutions." + _ARGS.format(
    "R3D_18_Weights")
mc3_18.__doc__ = ("MC3-18: 3D convolutions in the first stage, 2D (1x3x3) ones after it."
                  + _ARGS.format("MC3_18_Weights"))
r2plus1d_18.__doc__ = ("R(2+1)D-18: every 3D convolution factored into a 1x3x3 spatial and a "
                       "3x1x1 temporal one." + _ARGS.format("R2Plus1D_18_Weights"))
