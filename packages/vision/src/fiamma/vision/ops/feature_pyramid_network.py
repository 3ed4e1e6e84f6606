"""Feature Pyramid Network (Lin et al., 2017) and the multi-scale RoIAlign pooler, with
torchvision.ops' module names (``inner_blocks``, ``layer_blocks``, ``p6``/``p7``) and rules.

    >>> import fiamma
    >>> from collections import OrderedDict
    >>> from fiamma.vision.ops import FeaturePyramidNetwork
    >>> fpn = FeaturePyramidNetwork([8, 16], 4)
    >>> out = fpn(OrderedDict(a=fiamma.randn(1, 8, 16, 16), b=fiamma.randn(1, 16, 8, 8)))
    >>> [(k, tuple(v.shape)) for k, v in out.items()]
    [('a', (1, 4, 16, 16)), ('b', (1, 4, 8, 8))]
"""
import math
from collections import OrderedDict

import fiamma
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.vision.ops.boxes import box_area
from fiamma.vision.ops.misc import Conv2dNormActivation
from fiamma.vision.ops.roi_align import convert_boxes_to_roi_format, roi_align

__all__ = ["FeaturePyramidNetwork", "ExtraFPNBlock", "LastLevelMaxPool", "LastLevelP6P7",
           "MultiScaleRoIAlign"]


class ExtraFPNBlock(nn.Module):
    """Base of the blocks that add levels after the FPN: ``forward(results, x, names)``
    returns the extended ``(results, names)``."""

    def forward(self, results, x, names):
        raise NotImplementedError(f"{type(self).__name__} must implement forward")


class LastLevelMaxPool(ExtraFPNBlock):
    """Adds level ``'pool'``: a 1x1 max pool with stride 2 of the last level."""

    def forward(self, x, y, names):
        names.append("pool")
        x.append(F.max_pool2d(x[-1], kernel_size=1, stride=2, padding=0))
        return x, names


class LastLevelP6P7(ExtraFPNBlock):
    """Adds ``p6`` (3x3 stride-2 conv of P5, or of C5 when the widths differ) and ``p7``
    (3x3 stride-2 conv of relu(p6)), as RetinaNet."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.p6 = nn.Conv2d(in_channels, out_channels, 3, 2, 1)
        self.p7 = nn.Conv2d(out_channels, out_channels, 3, 2, 1)
        for module in (self.p6, self.p7):
            nn.init.kaiming_uniform_(module.weight, a=1)
            nn.init.constant_(module.bias, 0)
        self.use_P5 = in_channels == out_channels

    def forward(self, p, c, names):
        x = p[-1] if self.use_P5 else c[-1]
        p6 = self.p6(x)
        p7 = self.p7(F.relu(p6))
        p.extend([p6, p7])
        names.extend(["p6", "p7"])
        return p, names


class FeaturePyramidNetwork(nn.Module):
    """Top-down pathway with lateral 1x1 convolutions (``inner_blocks``) and 3x3 output
    convolutions (``layer_blocks``) over an ordered dict of feature maps, lowest level (largest
    map) first; returns an OrderedDict with the same keys (plus the extra block's)."""

    def __init__(self, in_channels_list, out_channels, extra_blocks=None, norm_layer=None):
        super().__init__()
        self.inner_blocks = nn.ModuleList()
        self.layer_blocks = nn.ModuleList()
        for in_channels in in_channels_list:
            if in_channels == 0:
                raise ValueError("FeaturePyramidNetwork: in_channels=0 is not supported")
            self.inner_blocks.append(Conv2dNormActivation(
                in_channels, out_channels, kernel_size=1, padding=0, norm_layer=norm_layer,
                activation_layer=None))
            self.layer_blocks.append(Conv2dNormActivation(
                out_channels, out_channels, kernel_size=3, norm_layer=norm_layer,
                activation_layer=None))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_uniform_(m.weight, a=1)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)
        if extra_blocks is not None and not isinstance(extra_blocks, ExtraFPNBlock):
            raise TypeError(f"FeaturePyramidNetwork: extra_blocks should be an ExtraFPNBlock, "
                            f"got {type(extra_blocks).__name__}")
        self.extra_blocks = extra_blocks

    def forward(self, x):
        names = list(x.keys())
        feats = list(x.values())
        if len(feats) != len(self.inner_blocks):
            raise ValueError(f"FeaturePyramidNetwork: expected {len(self.inner_blocks)} feature "
                             f"maps, got {len(feats)}")
        last_inner = self.inner_blocks[-1](feats[-1])
        results = [self.layer_blocks[-1](last_inner)]
        for idx in range(len(feats) - 2, -1, -1):
            lateral = self.inner_blocks[idx](feats[idx])
            top_down = F.interpolate(last_inner, size=tuple(lateral.shape[-2:]), mode="nearest")
            last_inner = lateral + top_down
            results.insert(0, self.layer_blocks[idx](last_inner))
        if self.extra_blocks is not None:
            results, names = self.extra_blocks(results, feats, names)
        return OrderedDict(zip(names, results))


def _infer_scale(feature, original_size):
    scales = []
    for s1, s2 in zip(feature.shape[-2:], original_size):
        approx = float(s1) / float(s2)
        scales.append(2.0 ** round(math.log2(approx)))
    return scales[0]


class _LevelMapper:
    """Level of each box by eq. 1 of the FPN paper:
    ``floor(canonical_level + log2(sqrt(area) / canonical_scale) + eps)``, clamped."""

    def __init__(self, k_min, k_max, canonical_scale=224, canonical_level=4, eps=1e-6):
        self.k_min, self.k_max = k_min, k_max
        self.s0, self.lvl0, self.eps = canonical_scale, canonical_level, eps

    def __call__(self, boxlists):
        # fiamma ops (not NumPy), so a trace (ONNX export) computes the levels from the boxes
        area = fiamma.cat([box_area(b).detach() for b in boxlists])
        lv = fiamma.floor(self.lvl0 + fiamma.log2(fiamma.sqrt(area) / self.s0) + self.eps)
        return fiamma.clamp(lv, self.k_min, self.k_max).to(fiamma.int64) - self.k_min


class MultiScaleRoIAlign(nn.Module):
    """RoIAlign over the FPN level each box maps to (by its size). ``forward(x, boxes,
    image_shapes)``: ``x`` an ordered dict of feature maps (those named in ``featmap_names``
    are used), ``boxes`` a list of (K_i, 4) tensors, ``image_shapes`` the images' (h, w)."""

    def __init__(self, featmap_names, output_size, sampling_ratio, *, canonical_scale=224,
                 canonical_level=4):
        super().__init__()
        if isinstance(output_size, int):
            output_size = (output_size, output_size)
        self.featmap_names = featmap_names
        self.sampling_ratio = sampling_ratio
        self.output_size = tuple(output_size)
        self.scales = None
        self.map_levels = None
        self.canonical_scale = canonical_scale
        self.canonical_level = canonical_level

    def forward(self, x, boxes, image_shapes):
        feats = [v for k, v in x.items() if k in self.featmap_names]
        if not feats:
            raise ValueError(f"MultiScaleRoIAlign: none of {self.featmap_names} is among the "
                             f"feature maps {list(x)}")
        max_h = max(s[0] for s in image_shapes)
        max_w = max(s[1] for s in image_shapes)
        scales = [_infer_scale(f, (max_h, max_w)) for f in feats]
        lvl_min, lvl_max = -math.log2(scales[0]), -math.log2(scales[-1])
        mapper = _LevelMapper(int(lvl_min), int(lvl_max), self.canonical_scale,
                              self.canonical_level)
        self.scales, self.map_levels = scales, mapper
        rois = convert_boxes_to_roi_format(boxes)
        if len(feats) == 1:
            return roi_align(feats[0], rois, self.output_size, scales[0], self.sampling_ratio)
        levels = mapper(boxes)
        parts, order = [], []
        for level, (feat, scale) in enumerate(zip(feats, scales)):
            # every level, empty or not: the same ops whatever the boxes (a trace follows them)
            idx = fiamma.where(levels == level)[0]
            parts.append(roi_align(feat, rois[idx], self.output_size, scale,
                                   self.sampling_ratio))
            order.append(idx)
        perm = fiamma.sort(fiamma.cat(order))[1]  # distinct indices: any sort is stable
        return fiamma.cat(parts, dim=0)[perm]

    def __repr__(self):
        return (f"{self.__class__.__name__}(featmap_names={self.featmap_names}, "
                f"output_size={self.output_size}, sampling_ratio={self.sampling_ratio})")
