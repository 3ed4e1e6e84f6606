"""``HistogramObserver``: PyTorch's default activation observer for the x86/fbgemm and qnnpack
engines. It keeps a 2048-bin histogram of everything observed (re-binned when the range grows)
and picks the min/max that minimise the L2 quantization error (the caffe2 norm-minimisation
search), computed in float32 as PyTorch does."""
import numpy as np

import fiamma
from fiamma.ao.quantization.observer import (
    _F32,
    _F32_EPS,
    UniformQuantizationObserverBase,
    _np,
    _t,
)
from fiamma.nn import _qtensor as Q

__all__ = ["HistogramObserver"]


def _histc(x, bins, lo, hi):
    """``torch.histc`` in float32: ``bin = trunc((x - lo) * bins / (hi - lo))``, the top
    edge in the last bin, values outside ``[lo, hi]`` dropped."""
    lo, hi = _F32(lo), _F32(hi)
    if lo == hi:
        lo, hi = lo - _F32(1), hi + _F32(1)
    x = x[(x >= lo) & (x <= hi)]
    pos = (((x - lo) * _F32(bins)) / (hi - lo)).astype(np.int64)
    pos[pos == bins] = bins - 1
    return np.bincount(pos, minlength=bins).astype(_F32)


def _linspace(start, end, steps):
    """``torch.linspace`` in float32 (the first half counted from ``start``, the second from
    ``end``)."""
    start, end = _F32(start), _F32(end)
    step = (end - start) / _F32(steps - 1)
    i = np.arange(steps)
    half = steps // 2
    out = np.empty(steps, dtype=_F32)
    out[:half] = start + step * i[:half].astype(_F32)
    out[half:] = end - step * (steps - 1 - i[half:]).astype(_F32)
    return out


class HistogramObserver(UniformQuantizationObserverBase):
    """A running histogram of the values (``bins`` bins between the running min and max);
    ``calculate_qparams`` searches it for the min/max that minimise the L2 quantization
    error, then computes scale and zero point as :class:`MinMaxObserver` does.

    >>> import fiamma
    >>> from fiamma.ao.quantization import HistogramObserver
    >>> obs = HistogramObserver()
    >>> _ = obs(fiamma.linspace(-1.0, 1.0, 1000))
    >>> int(obs.calculate_qparams()[1])
    128
    """

    def __init__(self, bins=2048, dtype=Q.quint8, qscheme=Q.per_tensor_affine,
                 reduce_range=False, quant_min=None, quant_max=None, factory_kwargs=None,
                 eps=_F32_EPS, is_dynamic=False, **kwargs):
        if qscheme not in (Q.per_tensor_affine, Q.per_tensor_symmetric):
            raise NotImplementedError("HistogramObserver's qscheme only supports "
                                      "per_tensor_symmetric and per_tensor_affine")
        if is_dynamic:
            raise NotImplementedError("HistogramObserver doesn't support dynamic quantization")
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs,
                         eps, is_dynamic, **kwargs)
        self.bins = bins
        self.register_buffer("histogram", fiamma.zeros(bins))
        self.register_buffer("min_val", fiamma.tensor(float("inf")))
        self.register_buffer("max_val", fiamma.tensor(float("-inf")))
        self.dst_nbins = 2 ** dtype.bits
        self.upsample_rate = 16

    # ---- recording -----------------------------------------------------------------------
    def _upscale_histogram(self, hist, orig_min, orig_max, new_min, new_max):
        r = self.upsample_rate
        hist = np.repeat(hist, r) / _F32(r)
        bin_size = (orig_max - orig_min) / _F32(self.bins * r)
        mids = _linspace(orig_min, orig_max, self.bins * r + 1)[:-1] + _F32(0.5) * bin_size
        edges = _linspace(new_min, new_max, self.bins + 1)
        idx = np.searchsorted(edges, mids, side="right") - 1
        idx = np.clip(idx, 0, self.bins - 1)
        return np.bincount(idx, weights=hist.astype(np.float64), minlength=self.bins)

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        x = np.asarray(_np(x_orig), dtype=_F32).reshape(-1)
        if np.isinf(x).any():
            x = x[~np.isinf(x)]
            if x.size == 0:
                return x_orig
        x_min, x_max = x.min(), x.max()
        cur_min, cur_max = _F32(_np(self.min_val)), _F32(_np(self.max_val))
        if cur_min == np.inf or cur_max == -np.inf:
            hist = _histc(x, self.bins, x_min, x_max)
            new_min, new_max = x_min, x_max
        else:
            new_min, new_max = min(cur_min, x_min), max(cur_max, x_max)
            update = _histc(x, self.bins, new_min, new_max)
            orig = _np(self.histogram).astype(_F32)
            if new_min == cur_min and new_max == cur_max:
                hist = orig + update
            elif cur_min == cur_max:
                hist = _histc(np.array([cur_min], dtype=_F32), self.bins, new_min,
                              new_max) * orig.sum() + update
            else:
                hist = (update.astype(np.float64)
                        + self._upscale_histogram(orig, cur_min, cur_max, new_min, new_max))
        self.histogram = _t(hist)
        self.min_val, self.max_val = _t(new_min), _t(new_max)
        return x_orig

    # ---- the search ----------------------------------------------------------------------
    @staticmethod
    def _get_norm(delta_begin, delta_end, density):
        return density * ((delta_end * delta_end * delta_end
                           - delta_begin * delta_begin * delta_begin) / _F32(3))

    def _quantization_error(self, hist, bin_width, start, end):
        dst_w = bin_width * (end - start + 1) / self.dst_nbins
        if dst_w == 0.0:
            return 0.0
        src = np.arange(self.bins)
        begin = ((src - start).astype(_F32) * _F32(bin_width)).astype(_F32)
        end_ = begin + _F32(bin_width)
        dw = _F32(dst_w)
        top = _F32(self.dst_nbins - 1)
        dst_begin = np.clip(np.floor(begin / dw), _F32(0), top).astype(_F32)
        dst_begin_center = (dst_begin + _F32(0.5)) * dw
        dst_end = np.clip(np.floor(end_ / dw), _F32(0), top).astype(_F32)
        density = (hist / _F32(bin_width)).astype(_F32)
        half = _F32(dst_w / 2)
        norm = np.zeros(self.bins, dtype=_F32)
        norm += self._get_norm(begin - dst_begin_center, np.full(self.bins, half, _F32), density)
        norm += (dst_end - dst_begin - _F32(1)) * self._get_norm(-half, half, density)
        dst_end_center = dst_end * dw + half
        norm += self._get_norm(-half, end_ - dst_end_center, density)
        return float(norm.sum(dtype=_F32))

    def _non_linear_param_search(self):
        hist = _np(self.histogram).astype(_F32)
        lo, hi = _F32(_np(self.min_val)), _F32(_np(self.max_val))
        bin_width32 = (hi - lo) / _F32(self.bins)
        bin_width = (float(hi) - float(lo)) / self.bins
        total = float(hist.sum(dtype=_F32))
        csum = np.cumsum(hist, dtype=_F32)
        step, alpha, beta = 1e-5, 0.0, 1.0
        start, end = 0, self.bins - 1
        norm_min = float("inf")
        while alpha < beta:
            next_alpha, next_beta = alpha + step, beta - step
            lo_thr, hi_thr = _F32(next_alpha * total), _F32(next_beta * total)
            left = min(max(int(np.searchsorted(csum, lo_thr, side="left")), start), end)
            right = min(max(int(np.searchsorted(csum, hi_thr, side="right")) - 1, start), end)
            next_start, next_end = start, end
            if left - start > end - right:
                next_start, alpha = left, next_alpha
            else:
                next_end, beta = right, next_beta
            if next_start == start and next_end == end:
                continue
            norm = self._quantization_error(hist, bin_width, next_start, next_end)
            if norm > norm_min:
                break
            norm_min, start, end = norm, next_start, next_end
        return lo + bin_width32 * _F32(start), lo + bin_width32 * _F32(end + 1)

    def calculate_qparams(self):
        """``(scale, zero_point)`` from the searched min/max (1-element tensors)."""
        if _F32(_np(self.min_val)) == np.inf and _F32(_np(self.max_val)) == -np.inf:
            return self._calculate_qparams(_np(self.min_val), _np(self.max_val))
        new_min, new_max = self._non_linear_param_search()
        return self._calculate_qparams(new_min, new_max)
