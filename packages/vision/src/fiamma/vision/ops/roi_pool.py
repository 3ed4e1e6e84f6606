"""roi_pool (Fast R-CNN max pooling over integer bins), ps_roi_align and ps_roi_pool
(position-sensitive pooling of R-FCN) with torchvision.ops' signatures and rules.

All three are vectorised the same way as :func:`roi_align`: the bins' pixel indices (and
weights) are computed in NumPy from the boxes, the pixels are fetched with fiamma gathers of
channel vectors, and the reduction is a fiamma max or two batched matmuls; so they run on every
device and are differentiable in ``input`` (no gradient to the boxes, as torchvision).

    >>> import fiamma
    >>> from fiamma.vision.ops import roi_pool, ps_roi_align
    >>> x = fiamma.arange(16.).reshape(1, 1, 4, 4)
    >>> roi_pool(x, [fiamma.tensor([[0., 0., 3., 3.]])], output_size=2).tolist()
    [[[[5.0, 7.0], [13.0, 15.0]]]]
    >>> tuple(ps_roi_align(fiamma.rand(1, 8, 6, 6), [fiamma.tensor([[0., 0., 4., 4.]])],
    ...                    2).shape)
    (1, 2, 2, 2)
"""
import numpy as np

import fiamma
from fiamma import nn
from fiamma.vision.ops.roi_align import (
    _CHUNK_ELEMS,
    _bilinear_taps,
    _pair,
    _prepare,
    _separable_pool,
)

__all__ = ["roi_pool", "RoIPool", "ps_roi_align", "PSRoIAlign", "ps_roi_pool", "PSRoIPool"]


def _round(v):
    """C's round(): halves away from zero."""
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def _int_bins(start, length, n_bins, size, dt):
    """Integer bin bounds [lo, hi) (K, n_bins) clipped to [0, size], torchvision's rule."""
    bin_size = length.astype(dt) / dt(n_bins)
    i = np.arange(n_bins, dtype=dt)
    lo = np.floor(i[None, :] * bin_size[:, None]).astype(np.int64) + start[:, None]
    hi = np.ceil((i[None, :] + 1) * bin_size[:, None]).astype(np.int64) + start[:, None]
    return np.clip(lo, 0, size), np.clip(hi, 0, size)


def _window(lo, hi):
    """Pixel indices (K, n, B) of each bin padded to the widest, and their validity."""
    width = max(int((hi - lo).max()) if lo.size else 0, 1)
    idx = lo[:, :, None] + np.arange(width)[None, None, :]
    valid = idx < hi[:, :, None]
    return np.where(valid, idx, 0), valid


def _rounded_rois(r, spatial_scale, dt, plus_one):
    s = _round(r[:, 1:].astype(dt) * dt(spatial_scale)).astype(np.int64)
    x1, y1, x2, y2 = s[:, 0], s[:, 1], s[:, 2], s[:, 3]
    extra = 1 if plus_one else 0
    return x1, y1, np.maximum(x2 - x1 + extra, 1), np.maximum(y2 - y1 + extra, 1)


def roi_pool(input, boxes, output_size, spatial_scale=1.0):
    """Max-pool each region of ``boxes`` into ``output_size`` bins (Fast R-CNN's RoIPool):
    the box corners are rounded to pixels at ``spatial_scale``, bin ``i`` covers the pixels
    ``[floor(i * s), ceil((i + 1) * s))`` (``s`` = box size / bins) clipped to the map; an
    empty bin is 0. ``boxes`` as :func:`roi_align`. Returns (K, C, oh, ow)."""
    r, bidx = _prepare("roi_pool", input, boxes)
    ph, pw = _pair(output_size)
    n, c, h, w = input.shape
    k = r.shape[0]
    if k == 0:
        return fiamma.zeros((0, c, ph, pw), dtype=input.dtype)
    dt = np.float64 if input.dtype == fiamma.float64 else np.float32
    x1, y1, rw, rh = _rounded_rois(r, spatial_scale, dt, plus_one=True)
    ylo, yhi = _int_bins(y1, rh, ph, h, dt)
    xlo, xhi = _int_bins(x1, rw, pw, w, dt)
    iy, vy = _window(ylo, yhi)                                    # (K, ph, By)
    ix, vx = _window(xlo, xhi)                                    # (K, pw, Bx)
    by, bx = iy.shape[2], ix.shape[2]
    lin = ((bidx[:, None, None, None, None] * h + iy[:, :, None, :, None]) * w
           + ix[:, None, :, None, :])                              # (K, ph, pw, By, Bx)
    valid = vy[:, :, None, :, None] & vx[:, None, :, None, :]
    empty = ~valid.reshape(k, ph, pw, -1).any(axis=3)              # (K, ph, pw)
    flat = input.permute(0, 2, 3, 1).reshape(n * h * w, c)
    step = max(1, _CHUNK_ELEMS // max(ph * pw * by * bx * c, 1))
    outs = []
    for a in range(0, k, step):
        b = min(k, a + step)
        kb = b - a
        g = flat[fiamma.from_numpy(lin[a:b].reshape(kb, ph, pw, by * bx))]  # (kb,ph,pw,B,C)
        mask = fiamma.from_numpy(~valid[a:b].reshape(kb, ph, pw, by * bx, 1))
        g = g.masked_fill(mask, float("-inf"))
        m = g.max(dim=3)[0]                                        # (kb, ph, pw, C)
        m = m.masked_fill(fiamma.from_numpy(empty[a:b, :, :, None]), 0.0)
        outs.append(m)
    out = outs[0] if len(outs) == 1 else fiamma.cat(outs, dim=0)
    return out.permute(0, 3, 1, 2).contiguous()


def ps_roi_align(input, boxes, output_size, spatial_scale=1.0, sampling_ratio=-1):
    """Position-sensitive RoIAlign (R-FCN): bin ``(i, j)`` of output channel ``c`` averages
    bilinear samples of input channel ``(c * oh + i) * ow + j``; ``input`` has
    ``C_out * oh * ow`` channels. Boxes are shifted by -0.5 pixel (torchvision's rule) and
    ``sampling_ratio`` is as :func:`roi_align`'s; a box of zero width or height with
    ``sampling_ratio <= 0`` has no samples and gives 0 (torchvision: NaN, from 0 / 0). Returns
    (K, C_out, oh, ow)."""
    r, bidx = _prepare("ps_roi_align", input, boxes)
    ph, pw = _pair(output_size)
    n, c, h, w = input.shape
    if c % (ph * pw):
        raise ValueError(f"ps_roi_align: input channels ({c}) must be a multiple of "
                         f"output_size[0] * output_size[1] ({ph * pw})")
    if r.shape[0] == 0:
        return fiamma.zeros((0, c // (ph * pw), ph, pw), dtype=input.dtype)
    dt = np.float64 if input.dtype == fiamma.float64 else np.float32
    iy, wy, ix, wx = _bilinear_taps(r, h, w, ph, pw, spatial_scale, sampling_ratio, True,
                                    False, dt)
    return _separable_pool(input, bidx, iy, wy, ix, wx, position_sensitive=True)


def ps_roi_pool(input, boxes, output_size, spatial_scale=1.0):
    """Position-sensitive RoIPool (R-FCN): bin ``(i, j)`` of output channel ``c`` is the mean
    of input channel ``(c * oh + i) * ow + j`` over the bin's pixels (integer bins as
    :func:`roi_pool`, box size ``max(x2 - x1, 1)`` after rounding, bounds clipped to
    ``size - 1`` as torchvision's kernels); an empty bin is 0. The gradient is this forward's
    derivative, so the last row and column of ``input`` get none; torchvision's backward clips
    its bins to ``size`` instead (not its forward's derivative there) and differs for bins
    that reach the last row/column."""
    r, bidx = _prepare("ps_roi_pool", input, boxes)
    ph, pw = _pair(output_size)
    n, c, h, w = input.shape
    if c % (ph * pw):
        raise ValueError(f"ps_roi_pool: input channels ({c}) must be a multiple of "
                         f"output_size[0] * output_size[1] ({ph * pw})")
    if r.shape[0] == 0:
        return fiamma.zeros((0, c // (ph * pw), ph, pw), dtype=input.dtype)
    dt = np.float64 if input.dtype == fiamma.float64 else np.float32
    x1, y1, rw, rh = _rounded_rois(r, spatial_scale, dt, plus_one=False)
    # torchvision's forward clips the bins to [0, size - 1] (its backward to size): the last
    # row/column of the map is never pooled; the forward is matched here, and the gradient is
    # its derivative (autograd through the gather and matmuls)
    iy, vy = _window(*_int_bins(y1, rh, ph, h - 1, dt))
    ix, vx = _window(*_int_bins(x1, rw, pw, w - 1, dt))
    ny = np.maximum(vy.sum(axis=2, keepdims=True), 1)
    nx = np.maximum(vx.sum(axis=2, keepdims=True), 1)
    wy = (vy / ny).astype(dt)
    wx = (vx / nx).astype(dt)
    return _separable_pool(input, bidx, iy, wy, ix, wx, position_sensitive=True)


class _PoolModule(nn.Module):
    _fn = None
    _args = ()

    def __init__(self, output_size, spatial_scale, *extra):
        super().__init__()
        self.output_size = output_size
        self.spatial_scale = spatial_scale
        for name, value in zip(self._args, extra):
            setattr(self, name, value)

    def forward(self, input, rois):
        return type(self)._fn(input, rois, self.output_size, self.spatial_scale,
                              *(getattr(self, a) for a in self._args))

    def __repr__(self):
        extra = "".join(f", {a}={getattr(self, a)}" for a in self._args)
        return (f"{self.__class__.__name__}(output_size={self.output_size}, "
                f"spatial_scale={self.spatial_scale}{extra})")


class RoIPool(_PoolModule):
    """:func:`roi_pool` as a module: ``RoIPool(output_size, spatial_scale)``."""
    _fn = staticmethod(roi_pool)


class PSRoIAlign(_PoolModule):
    """:func:`ps_roi_align` as a module: ``PSRoIAlign(output_size, spatial_scale,
    sampling_ratio)``."""
    _fn = staticmethod(ps_roi_align)
    _args = ("sampling_ratio",)


class PSRoIPool(_PoolModule):
    """:func:`ps_roi_pool` as a module: ``PSRoIPool(output_size, spatial_scale)``."""
    _fn = staticmethod(ps_roi_pool)
