"""MNASNet (Tan et al., 2019) with torchvision's module names, depth multipliers, init and
weights: ``mnasnet0_5``, ``mnasnet0_75``, ``mnasnet1_0``, ``mnasnet1_3``.

    >>> import fiamma
    >>> from fiamma.vision.models import mnasnet0_5
    >>> m = mnasnet0_5(num_classes=10).eval()
    >>> m(fiamma.randn(1, 3, 32, 32)).shape
    fiamma.Size([1, 10])
"""
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.models._weights_util import build, classification_preset, registered_builder

__all__ = ["MNASNet", "MNASNet0_5_Weights", "MNASNet0_75_Weights", "MNASNet1_0_Weights",
           "MNASNet1_3_Weights", "mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3"]

# the paper's TensorFlow momentum 0.9997, in PyTorch's convention
_BN_MOMENTUM = 1 - 0.9997


class _InvertedResidual(nn.Module):
    def __init__(self, in_ch, out_ch, kernel_size, stride, expansion_factor, bn_momentum=0.1):
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"MNASNet: stride should be 1 or 2, got {stride}")
        if kernel_size not in (3, 5):
            raise ValueError(f"MNASNet: kernel_size should be 3 or 5, got {kernel_size}")
        mid_ch = in_ch * expansion_factor
        self.apply_residual = in_ch == out_ch and stride == 1
        self.layers = nn.Sequential(
            nn.Conv2d(in_ch, mid_ch, 1, bias=False),
            nn.BatchNorm2d(mid_ch, momentum=bn_momentum),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_ch, mid_ch, kernel_size, padding=kernel_size // 2, stride=stride,
                      groups=mid_ch, bias=False),
            nn.BatchNorm2d(mid_ch, momentum=bn_momentum),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_ch, out_ch, 1, bias=False),
            nn.BatchNorm2d(out_ch, momentum=bn_momentum),
        )

    def forward(self, input):
        if self.apply_residual:
            return self.layers(input) + input
        return self.layers(input)


def _stack(in_ch, out_ch, kernel_size, stride, exp_factor, repeats, bn_momentum):
    first = _InvertedResidual(in_ch, out_ch, kernel_size, stride, exp_factor, bn_momentum)
    rest = [_InvertedResidual(out_ch, out_ch, kernel_size, 1, exp_factor, bn_momentum)
            for _ in range(1, repeats)]
    return nn.Sequential(first, *rest)


def _round_to_multiple_of(val, divisor, round_up_bias=0.9):
    """Round ``val`` to the nearest multiple of ``divisor``, never more than 10% below it."""
    if not 0.0 < round_up_bias < 1.0:
        raise ValueError(f"MNASNet: round_up_bias should be in (0, 1), got {round_up_bias}")
    new_val = max(divisor, int(val + divisor / 2) // divisor * divisor)
    return new_val if new_val >= round_up_bias * val else new_val + divisor


def _get_depths(alpha):
    depths = [32, 16, 24, 40, 80, 96, 192, 320]
    return [_round_to_multiple_of(depth * alpha, 8) for depth in depths]


class MNASNet(nn.Module):
    """MNASNet with depth multiplier ``alpha``: ``layers`` (stem, six stacks of inverted
    residuals, 1x1 conv to 1280), global average, ``classifier`` (Dropout, Linear)."""

    _version = 2

    def __init__(self, alpha, num_classes=1000, dropout=0.2):
        super().__init__()
        if alpha <= 0.0:
            raise ValueError(f"MNASNet: alpha should be greater than 0.0, got {alpha}")
        self.alpha = alpha
        self.num_classes = num_classes
        d = _get_depths(alpha)
        m = _BN_MOMENTUM
        layers = [
            nn.Conv2d(3, d[0], 3, padding=1, stride=2, bias=False),
            nn.BatchNorm2d(d[0], momentum=m),
            nn.ReLU(inplace=True),
            nn.Conv2d(d[0], d[0], 3, padding=1, stride=1, groups=d[0], bias=False),
            nn.BatchNorm2d(d[0], momentum=m),
            nn.ReLU(inplace=True),
            nn.Conv2d(d[0], d[1], 1, padding=0, stride=1, bias=False),
            nn.BatchNorm2d(d[1], momentum=m),
            _stack(d[1], d[2], 3, 2, 3, 3, m),
            _stack(d[2], d[3], 5, 2, 3, 3, m),
            _stack(d[3], d[4], 5, 2, 6, 3, m),
            _stack(d[4], d[5], 3, 1, 6, 2, m),
            _stack(d[5], d[6], 5, 2, 6, 4, m),
            _stack(d[6], d[7], 3, 1, 6, 1, m),
            nn.Conv2d(d[7], 1280, 1, padding=0, stride=1, bias=False),
            nn.BatchNorm2d(1280, momentum=m),
            nn.ReLU(inplace=True),
        ]
        self.layers = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout, inplace=True),
                                        nn.Linear(1280, num_classes))
        for mod in self.modules():
            if isinstance(mod, nn.Conv2d):
                nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")
                if mod.bias is not None:
                    nn.init.zeros_(mod.bias)
            elif isinstance(mod, nn.BatchNorm2d):
                nn.init.ones_(mod.weight)
                nn.init.zeros_(mod.bias)
            elif isinstance(mod, nn.Linear):
                nn.init.kaiming_uniform_(mod.weight, mode="fan_out", nonlinearity="sigmoid")
                nn.init.zeros_(mod.bias)

    def forward(self, x):
        x = self.layers(x)
        x = x.mean([2, 3])
        return self.classifier(x)


_RECIPE_1E100 = "https://github.com/1e100/mnasnet_trainer"
_RECIPE_NEW = "https://github.com/pytorch/vision/pull/6019"


def _weights(file, resize, n, a1, a5, ops, size, recipe, docs):
    return Weights(
        url="https://download.pytorch.org/models/" + file,
        transforms=classification_preset(crop_size=224, resize_size=resize),
        meta={"categories": imagenet_categories(), "min_size": (1, 1), "recipe": recipe,
              "num_params": n, "_metrics": {"ImageNet-1K": {"acc@1": a1, "acc@5": a5}},
              "_ops": ops, "_file_size": size, "_docs": docs},
    )


_PAPER = "These weights reproduce closely the results of the paper."
_NEW = "These weights were trained from scratch with TorchVision's new training recipe."


class MNASNet0_5_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("mnasnet0.5_top1_67.823-3ffadce67e.pth", 256, 2218512, 67.734,
                             87.490, 0.104, 8.591, _RECIPE_1E100, _PAPER)
    DEFAULT = IMAGENET1K_V1


class MNASNet0_75_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("mnasnet0_75-7090bc5f.pth", 232, 3170208, 71.180, 90.496, 0.215,
                             12.303, _RECIPE_NEW, _NEW)
    DEFAULT = IMAGENET1K_V1


class MNASNet1_0_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("mnasnet1.0_top1_73.512-f206786ef8.pth", 256, 4383312, 73.456,
                             91.510, 0.314, 16.915, _RECIPE_1E100, _PAPER)
    DEFAULT = IMAGENET1K_V1


class MNASNet1_3_Weights(WeightsEnum):
    IMAGENET1K_V1 = _weights("mnasnet1_3-a4c69d6f.pth", 232, 6282256, 76.506, 93.522, 0.526,
                             24.246, _RECIPE_NEW, _NEW)
    DEFAULT = IMAGENET1K_V1


def _make_builder(alpha, name, enum_cls):
    def builder(*, weights=None, progress=True, **kwargs):
        return build(enum_cls, weights, progress, kwargs, lambda **kw: MNASNet(alpha, **kw))
    return registered_builder(builder, name, enum_cls, f"MNASNet with depth multiplier {alpha}")


mnasnet0_5 = _make_builder(0.5, "mnasnet0_5", MNASNet0_5_Weights)
mnasnet0_75 = _make_builder(0.75, "mnasnet0_75", MNASNet0_75_Weights)
mnasnet1_0 = _make_builder(1.0, "mnasnet1_0", MNASNet1_0_Weights)
mnasnet1_3 = _make_builder(1.3, "mnasnet1_3", MNASNet1_3_Weights)
