"""RoIAlign (He et al., Mask R-CNN) with torchvision.ops' signature and sampling rules.

Bilinear sampling followed by averaging over each bin's sampling grid is separable in y and x
(a sample outside the image contributes zero, which is a zero factor on its axis), so each
region is ``Wy @ feature @ Wx^T`` with small per-region weight matrices built in NumPy.
The result is differentiable in ``input`` through fiamma's matmul; like torchvision, no
gradient flows to the boxes.

    >>> import fiamma
    >>> from fiamma.vision.ops import roi_align
    >>> x = fiamma.arange(16.).reshape(1, 1, 4, 4)
    >>> roi_align(x, [fiamma.tensor([[0., 0., 3., 3.]])], output_size=1).item()
    7.5
"""
import math

import numpy as np

import fiamma
from fiamma import nn

__all__ = ["roi_align", "RoIAlign"]


def _pair(v):
    return (int(v), int(v)) if isinstance(v, (int, float)) else (int(v[0]), int(v[1]))


def convert_boxes_to_roi_format(boxes):
    """A list of (K_i, 4) tensors -> one (K, 5) tensor whose first column is the image index."""
    parts = []
    for i, b in enumerate(boxes):
        idx = fiamma.full((b.shape[0], 1), float(i), dtype=b.dtype)
        parts.append(fiamma.cat([idx, b], dim=1))
    return fiamma.cat(parts, dim=0)


def _check_rois(op, boxes):
    if isinstance(boxes, (list, tuple)):
        for b in boxes:
            if b.ndim != 2 or b.shape[1] != 4:
                raise ValueError(f"{op}: the tensors in the boxes list should be (K, 4), got "
                                 f"{list(b.shape)}")
        return convert_boxes_to_roi_format(boxes)
    if not isinstance(boxes, fiamma.Tensor) or boxes.ndim != 2 or boxes.shape[1] != 5:
        raise ValueError(f"{op}: boxes should be a (K, 5) tensor or a list of (K_i, 4) "
                         f"tensors, got {getattr(boxes, 'shape', type(boxes).__name__)}")
    return boxes


def _axis_weights(start, size, n_bins, grid, length):
    """(n_bins, length) weights: row i averages the bilinear weights of the ``grid`` samples
    of bin i along one axis (torchvision's clamping and out-of-range rules)."""
    w = np.zeros((n_bins, length))
    bin_size = size / n_bins
    for i in range(n_bins):
        for s in range(grid):
            y = start + i * bin_size + (s + 0.5) * bin_size / grid
            if y < -1.0 or y > length:
                continue
            y = max(y, 0.0)
            low = int(y)
            if low >= length - 1:
                low = high = length - 1
                y = float(low)
            else:
                high = low + 1
            ly = y - low
            w[i, low] += (1.0 - ly) / grid
            w[i, high] += ly / grid
    return w


def roi_align(input, boxes, output_size, spatial_scale=1.0, sampling_ratio=-1, aligned=False):
    """Pool each region of ``boxes`` to ``output_size`` by averaging bilinear samples.

    ``input`` (N, C, H, W); ``boxes`` a (K, 5) tensor ``(batch_index, x1, y1, x2, y2)`` or a
    list of (K_i, 4) tensors, one per image, in input coordinates times ``1/spatial_scale``;
    ``sampling_ratio`` samples per bin and axis (<= 0: ``ceil(roi_size / bins)``);
    ``aligned=True`` shifts the boxes by -0.5 pixel. Returns (K, C, oh, ow)."""
    op = "roi_align"
    if not isinstance(input, fiamma.Tensor) or input.ndim != 4:
        raise ValueError(f"{op}: input should be a 4-d (N, C, H, W) tensor, got "
                         f"{getattr(input, 'shape', type(input).__name__)}")
    rois = _check_rois(op, boxes)
    ph, pw = _pair(output_size)
    n, c, h, w = input.shape
    r = rois.detach().to(fiamma.float64).numpy()
    k = r.shape[0]
    if k == 0:
        return fiamma.zeros((0, c, ph, pw), dtype=input.dtype)
    bidx = r[:, 0].astype(np.int64)
    if (bidx < 0).any() or (bidx >= n).any() or (r[:, 0] != bidx).any():
        raise IndexError(f"{op}: box batch indices must be integers in [0, {n}), got "
                         f"{sorted(set(r[:, 0].tolist()))[:5]}")
    offset = 0.5 if aligned else 0.0
    wy = np.zeros((k, ph, h))
    wx = np.zeros((k, pw, w))
    for j in range(k):
        x1, y1, x2, y2 = (r[j, 1:] * spatial_scale - offset).tolist()
        rw, rh = x2 - x1, y2 - y1
        if not aligned:     # torchvision's legacy behaviour: at least one pixel
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        gh = sampling_ratio if sampling_ratio > 0 else math.ceil(rh / ph)
        gw = sampling_ratio if sampling_ratio > 0 else math.ceil(rw / pw)
        if gh > 0:
            wy[j] = _axis_weights(y1, rh, ph, gh, h)
        if gw > 0:
            wx[j] = _axis_weights(x1, rw, pw, gw, w)
    wy_t = fiamma.from_numpy(wy).to(input.dtype)
    wx_t = fiamma.from_numpy(np.ascontiguousarray(wx.transpose(0, 2, 1))).to(input.dtype)
    outs = []
    order = []
    for b in np.unique(bidx).tolist():
        sel = np.nonzero(bidx == b)[0]
        order.append(sel)
        sel_t = fiamma.from_numpy(sel)
        feat = input[b].unsqueeze(0)                            # (1, C, H, W)
        rows = wy_t[sel_t].unsqueeze(1)                         # (Kb, 1, ph, H)
        cols = wx_t[sel_t].unsqueeze(1)                         # (Kb, 1, W, pw)
        outs.append(fiamma.matmul(fiamma.matmul(rows, feat), cols))   # (Kb, C, ph, pw)
    out = fiamma.cat(outs, dim=0)
    perm = np.argsort(np.concatenate(order), kind="stable")
    return out[fiamma.from_numpy(perm)]


class RoIAlign(nn.Module):
    """:func:`roi_align` as a module."""

    def __init__(self, output_size, spatial_scale, sampling_ratio, aligned=False):
        super().__init__()
        self.output_size = output_size
        self.spatial_scale = spatial_scale
        self.sampling_ratio = sampling_ratio
        self.aligned = aligned

    def forward(self, input, rois):
        return roi_align(input, rois, self.output_size, self.spatial_scale,
                         self.sampling_ratio, self.aligned)

    def __repr__(self):
        return (f"{self.__class__.__name__}(output_size={self.output_size}, "
                f"spatial_scale={self.spatial_scale}, sampling_ratio={self.sampling_ratio}, "
                f"aligned={self.aligned})")
