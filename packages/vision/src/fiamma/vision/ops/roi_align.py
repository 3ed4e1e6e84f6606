"""RoIAlign (He et al., Mask R-CNN) with torchvision.ops' signature and sampling rules.

Bilinear sampling followed by averaging over each bin's sampling grid is separable in y and x
(a sample outside the image contributes zero, which is a zero factor on its axis). The taps'
pixel indices and weights are computed in NumPy from the boxes (vectorised over boxes, bins and
samples); the pixels are fetched with one fiamma gather of channel vectors per chunk of boxes
and reduced with two small batched matmuls (y taps, then x taps), so the cost is proportional
to the samples, not to the feature map, and every op is a fiamma op (any device, autograd in
``input``; like torchvision, no gradient flows to the boxes).

    >>> import fiamma
    >>> from fiamma.vision.ops import roi_align
    >>> x = fiamma.arange(16.).reshape(1, 1, 4, 4)
    >>> round(roi_align(x, [fiamma.tensor([[0., 0., 3., 3.]])], output_size=1).item(), 5)
    7.5
"""

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


def _axis_samples(start, size, n_bins, grid, length, dt):
    """Bilinear taps of every sample along one axis, vectorised over the K boxes.

    ``start``, ``size`` (K,) region start and extent, ``grid`` (K,) samples per bin. Returns
    ``idx`` (K, n_bins, 2G) int64 pixel indices and ``w`` (K, n_bins, 2G) weights (each
    already divided by the box's grid count; zero for padding and out-of-range samples), G the
    largest grid."""
    k = start.shape[0]
    g = max(int(grid.max()) if k else 0, 1)
    bin_size = size / n_bins                                             # (K,)
    i = np.arange(n_bins, dtype=dt)[None, :, None]
    s = np.arange(g, dtype=dt)[None, None, :]
    gk = np.maximum(grid, 1).astype(dt)[:, None, None]
    y = (start[:, None, None] + i * bin_size[:, None, None]
         + (s + dt(0.5)) * bin_size[:, None, None] / gk)                 # (K, n_bins, G)
    valid = (s < grid[:, None, None]) & (y >= -1.0) & (y <= length)
    y = np.maximum(y, 0)
    low = np.floor(y).astype(np.int64)
    edge = low >= length - 1
    low = np.where(edge, length - 1, low)
    high = np.where(edge, length - 1, low + 1)
    frac = np.where(edge, 0, y - low)
    inv = np.where(valid, 1 / gk, 0)
    idx = np.concatenate([np.where(valid, low, 0), np.where(valid, high, 0)], axis=2)
    w = np.concatenate([(1 - frac) * inv, frac * inv], axis=2)
    return idx, w.astype(dt)


_CHUNK_ELEMS = 1 << 22     # gathered values per chunk of boxes (bounds the temporary memory)


def _prepare(op, input, boxes):
    """Validated (input, rois as float64 NumPy (K, 5), batch indices (K,) int64)."""
    if not isinstance(input, fiamma.Tensor) or input.ndim != 4:
        raise ValueError(f"{op}: input should be a 4-d (N, C, H, W) tensor, got "
                         f"{getattr(input, 'shape', type(input).__name__)}")
    rois = _check_rois(op, boxes)
    n = input.shape[0]
    r = rois.detach().to(fiamma.float64).numpy()
    bidx = r[:, 0].astype(np.int64)
    if (bidx < 0).any() or (bidx >= n).any() or (r[:, 0] != bidx).any():
        raise IndexError(f"{op}: box batch indices must be integers in [0, {n}), got "
                         f"{sorted(set(r[:, 0].tolist()))[:5]}")
    return r, bidx


def _separable_pool(input, bidx, iy, wy, ix, wx, position_sensitive=False):
    """``out[k, c, i, j] = sum_{r, s} wy[k, i, r] * wx[k, j, s] * X[k, c', iy[k, i, r],
    ix[k, j, s]]`` with X the box's image and c' = c (or ``(c * ph + i) * pw + j`` when
    ``position_sensitive``): one fiamma gather of channel vectors per chunk of boxes and two
    small batched matmuls. Returns (K, C_out, ph, pw)."""
    n, c, h, w = input.shape
    k, ph, ry = iy.shape
    pw, rx = ix.shape[1], ix.shape[2]
    lin = ((bidx[:, None, None, None, None] * h + iy[:, :, :, None, None]) * w
           + ix[:, None, None, :, :])                                 # (K, ph, Ry, pw, Rx)
    if position_sensitive:
        bins = ph * pw
        if c % bins:
            raise ValueError(f"input channels ({c}) must be a multiple of output_size[0] * "
                             f"output_size[1] ({bins})")
        cout = c // bins
        flat = input.reshape(n, cout, bins, h, w).permute(0, 3, 4, 2, 1).reshape(
            n * h * w * bins, cout)
        lin = (lin * bins + (np.arange(ph)[:, None, None, None] * pw
                             + np.arange(pw)[None, None, :, None]))
    else:
        cout = c
        flat = input.permute(0, 2, 3, 1).reshape(n * h * w, c)
    lin = lin.reshape(k, ph * ry, pw * rx)
    wy_t = fiamma.from_numpy(np.ascontiguousarray(wy).reshape(k, ph, 1, ry)).to(input.dtype)
    wx_t = fiamma.from_numpy(np.ascontiguousarray(wx).reshape(k, 1, pw, 1, rx)).to(input.dtype)
    per_box = ph * ry * pw * rx * cout
    step = max(1, _CHUNK_ELEMS // max(per_box, 1))
    outs = []
    for a in range(0, k, step):
        b = min(k, a + step)
        kb = b - a
        g = flat[fiamma.from_numpy(lin[a:b])]                     # (kb, ph*Ry, pw*Rx, C)
        g = g.reshape(kb, ph, ry, pw * rx * cout)
        t = fiamma.matmul(wy_t[a:b], g)                            # (kb, ph, 1, pw*Rx*C)
        t = t.reshape(kb, ph, pw, rx, cout)
        o = fiamma.matmul(wx_t[a:b].expand(kb, ph, pw, 1, rx), t)  # (kb, ph, pw, 1, C)
        outs.append(o.reshape(kb, ph, pw, cout))
    out = outs[0] if len(outs) == 1 else fiamma.cat(outs, dim=0)
    return out.permute(0, 3, 1, 2).contiguous()


def _bilinear_taps(r, h, w, ph, pw, spatial_scale, sampling_ratio, aligned, min_one, dt):
    offset = dt(0.5 if aligned else 0.0)
    xy = r[:, 1:].astype(dt) * dt(spatial_scale) - offset
    x1, y1, x2, y2 = xy[:, 0], xy[:, 1], xy[:, 2], xy[:, 3]
    rw, rh = x2 - x1, y2 - y1
    if min_one:             # torchvision's legacy roi_align: at least one pixel
        rw, rh = np.maximum(rw, 1), np.maximum(rh, 1)
    k = r.shape[0]
    if sampling_ratio > 0:
        gh = gw = np.full(k, int(sampling_ratio))
    else:
        gh = np.ceil(rh / ph).astype(np.int64)
        gw = np.ceil(rw / pw).astype(np.int64)
    iy, wy = _axis_samples(y1, rh, ph, gh, h, dt)             # (K, ph, Ry)
    ix, wx = _axis_samples(x1, rw, pw, gw, w, dt)             # (K, pw, Rx)
    return iy, wy, ix, wx


def roi_align(input, boxes, output_size, spatial_scale=1.0, sampling_ratio=-1, aligned=False):
    """Pool each region of ``boxes`` to ``output_size`` by averaging bilinear samples.

    ``input`` (N, C, H, W); ``boxes`` a (K, 5) tensor ``(batch_index, x1, y1, x2, y2)`` or a
    list of (K_i, 4) tensors, one per image, in input coordinates times ``1/spatial_scale``;
    ``sampling_ratio`` samples per bin and axis (<= 0: ``ceil(roi_size / bins)``);
    ``aligned=True`` shifts the boxes by -0.5 pixel. Returns (K, C, oh, ow)."""
    r, bidx = _prepare("roi_align", input, boxes)
    ph, pw = _pair(output_size)
    n, c, h, w = input.shape
    if r.shape[0] == 0:
        return fiamma.zeros((0, c, ph, pw), dtype=input.dtype)
    dt = np.float64 if input.dtype == fiamma.float64 else np.float32
    iy, wy, ix, wx = _bilinear_taps(r, h, w, ph, pw, spatial_scale, sampling_ratio, aligned,
                                    not aligned, dt)
    return _separable_pool(input, bidx, iy, wy, ix, wx)


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
