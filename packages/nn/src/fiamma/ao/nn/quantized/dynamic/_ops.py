"""Dynamic-quantization kernels with fbgemm's (x86) arithmetic.

A dynamically quantized linear layer keeps an int8 weight and quantizes each input batch on
the fly: the batch's float32 min and max (widened to include 0) give a quint8 scale and zero
point as PyTorch's ``ChooseQuantizationParams`` computes them (in double, over ``[0, 127]``
when ``reduce_range``), the input is quantized as ``rint(fma(x, 1 / scale, zero_point))``,
multiplied by the weight with an exact integer sum (zero points accounted for), and the int32
accumulator goes back to float32 as ``fma(float(acc), x_scale * w_scale, bias)``.

The integer sum comes from fiamma-core's int8 GEMM (``fused.qgemm_u8s8``, csrc/qgemm.c:
AVX-512 VNNI / AVX2 / C) when the product is big enough to pay for the call, or else from
float32 matrix products of the centred integer operands: those products are at most
``127 * 255`` in magnitude, so a product over up to ``2**24 / (max|x| * max|w|)`` columns is
exact in float32; longer reductions are split into such chunks and summed in float64. Both
routes give the same exact sums (a core build without the int8 GEMM uses the second).

    >>> import numpy as np
    >>> from fiamma.ao.nn.quantized.dynamic._ops import choose_qparams
    >>> choose_qparams(np.float32(-1.0), np.float32(3.0), reduce_range=True)
    (0.031496062874794006, 32)
"""
import warnings

import numpy as np

_F32 = np.float32
_SMALL_SCALE = np.float32(6.1e-5)
_SMALL_SCALE_D = float(_SMALL_SCALE)
_F32_EXACT = 2 ** 24
_SMALL_WEIGHT = 1 << 16  # weights up to this many values also keep the float32 route
_SMALL_WORK = 1 << 17  # products below this many multiply-adds take it
_F16_MAX = float(np.finfo(np.float16).max)


def choose_qparams(x_min, x_max, qmin=0, qmax=255, reduce_range=False, _double=False):
    """PyTorch's ``quant_utils::ChooseQuantizationParams`` (no sparsity preservation, no
    power-of-two scale) for float32 ``x_min``/``x_max``: returns ``(scale, zero_point)``
    with ``scale`` a float32 value (the double one with ``_double``, as
    ``quantize_per_tensor_dynamic`` keeps it). Plain Python floats (doubles) on the common
    path: it runs once per dynamic product, on every step of a recurrent layer."""
    mn = min(float(x_min), 0.0)
    mx = max(float(x_max), 0.0)
    if reduce_range:
        qmin, qmax = int(qmin / 2), int(qmax / 2)
    scale = (mx - mn) / (qmax - qmin)
    s32 = float(_F32(scale))
    if s32 == 0.0:
        scale = 0.1
    elif s32 < 1e-37:  # is 1 / scale infinite in float32?
        with np.errstate(divide="ignore", over="ignore"):
            if np.isinf(_F32(1.0) / _F32(s32)):
                scale = 0.1
    if scale < _SMALL_SCALE_D:
        org = _F32(scale)
        scale = _SMALL_SCALE_D
        if mn == 0.0:
            mx = float(_SMALL_SCALE * _F32(qmax - qmin))
        elif mx == 0.0:
            mn = float(-_SMALL_SCALE * _F32(qmax - qmin))
        else:
            amp = _F32(_SMALL_SCALE / org)
            mn, mx = float(_F32(mn) * amp), float(_F32(mx) * amp)
    zp_min = qmin - mn / scale
    zp_max = qmax - mx / scale
    err_min = abs(qmin) - abs(mn / scale)
    err_max = abs(qmax) - abs(mx / scale)
    zp0 = zp_min if err_min < err_max else zp_max
    if zp0 < qmin:
        zp = qmin
    elif zp0 > qmax:
        zp = qmax
    else:
        zp = int(round(zp0))  # half to even, as nearbyint
    return (float(scale) if _double else float(_F32(scale))), zp


def quantize_input(x, reduce_range):
    """float32 array -> (the quantized values as float32 integers in [0, 255], scale,
    zero_point), as fbgemm's dynamic path: the qparams of the whole array's range, then
    ``rint(fma(x, 1/scale, zp))`` clamped to [0, 255]."""
    if x.size:
        scale, zp = choose_qparams(x.min(), x.max(), 0, 255, reduce_range)
    else:
        scale, zp = choose_qparams(0.0, 0.0, 0, 255, reduce_range)
    inv = float(_F32(1.0) / _F32(scale))
    # float32 x times float32 inv is exact in float64; adding the integer zero point and
    # rounding once to float32 is the fused multiply-add fbgemm uses
    t64 = np.multiply(x, inv, dtype=np.float64)
    t = np.empty(x.shape, dtype=_F32)
    np.add(t64, zp, out=t, casting="same_kind")  # one rounding to float32
    np.rint(t, out=t)
    np.clip(t, 0, 255, out=t)
    return t, scale, zp


def _core_qgemm():
    """fiamma-core's public int8 GEMM (:mod:`fiamma.fused`), or None when this core build has
    none (the float32 route below is used then)."""
    try:
        from fiamma import fused
    except ImportError:  # pragma: no cover - a core older than the int8 GEMM
        return None
    avail = getattr(fused, "int8_matmul_available", None)
    return fused if avail is not None and avail() else None


_QGEMM = _core_qgemm()


class PackedLinear:
    """A linear layer's weight prepared for the dynamic kernel: ``weight`` a qint8
    :class:`~fiamma.ao.QTensor` (per tensor or per output channel) or, for ``float16``, a
    float tensor (its values rounded to float16); ``bias`` float or None."""

    def __init__(self, weight, bias):
        from fiamma.nn import _qtensor as Q
        self.weight, self.bias = weight, bias
        self.b = None if bias is None else np.asarray(bias.detach().numpy(), dtype=_F32)
        if isinstance(weight, Q.QTensor):
            if weight._dtype is not Q.qint8:
                raise TypeError(f"dynamic quantized linear: expected a qint8 weight, got "
                                f"{weight._dtype!r}")
            if weight.ndim != 2:
                raise ValueError(f"dynamic quantized linear: expected a 2-d weight, got "
                                 f"{weight.ndim}-d")
            n_out = weight.shape[0]
            wi = np.asarray(weight._int.numpy(), dtype=np.int64)
            if weight._axis is None:
                ws = np.full(n_out, weight._scale, dtype=_F32)
                wz = np.full(n_out, int(weight._zero_point), dtype=np.int64)
            else:
                if weight._axis != 0:
                    raise RuntimeError("dynamic quantized linear: expected per-channel axis "
                                       f"0, got {weight._axis}")
                ws = np.asarray(weight._scale.numpy(), dtype=_F32)
                wz = np.asarray(weight._zero_point.numpy(), dtype=np.int64)
            wc = wi - wz[:, None]
            self.int8 = True
            self.w_scale = ws
            self.w_zp = wz
            self.w_bound = int(np.abs(wc).max()) if wc.size else 0
            self.bp = None
            if _QGEMM is not None:  # the weight packed for core's int8 GEMM
                n, k = wi.shape
                if n > 0 and k > 0:
                    self.bp = _QGEMM.Int8PackedWeight(np.ascontiguousarray(wi.astype(np.int8)))
                    self.w_rowsum = wi.sum(axis=1)  # int64, for the zero-point terms
                    self.w_rowsum32 = self.w_rowsum.astype(np.int32)
                    # int32 sums stay exact below this many columns (|acc| < 2**31)
                    self.int32_ok = k < 32768
                    self.in_features, self.out_features = k, n
            # the float32 route: the centred weight, (in, out); kept beside the packed one
            # for small weights, whose products (a recurrent layer's steps) cost less in
            # NumPy than a call into core (the two routes give the same exact sums)
            self.wT = None
            if self.bp is None or wc.size <= _SMALL_WEIGHT:
                self.wT = np.ascontiguousarray(wc.T.astype(_F32))
                self.in_features, self.out_features = self.wT.shape
        else:
            w = np.asarray(weight.detach().numpy(), dtype=_F32)
            if w.ndim != 2:
                raise ValueError(f"dynamic quantized linear: expected a 2-d weight, got "
                                 f"{w.ndim}-d")
            if np.abs(w).max(initial=0) > _F16_MAX:
                warnings.warn("dynamic quantized linear (float16): weight values beyond the "
                              "float16 range are saturated to +-65504", UserWarning,
                              stacklevel=3)
            w16 = np.clip(w, -_F16_MAX, _F16_MAX).astype(np.float16).astype(_F32)
            self.int8 = False
            self.wT = np.ascontiguousarray(w16.T)
            self.in_features, self.out_features = self.wT.shape

    def __call__(self, x, reduce_range=True, op="dynamic quantized linear"):
        """``x`` a float32 array ``(..., in_features)`` -> float32 ``(..., out_features)``."""
        if x.shape[-1] != self.in_features:
            raise RuntimeError(f"{op}: input's last dimension {x.shape[-1]} does not match "
                               f"in_features {self.in_features}")
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.in_features)
        if not self.int8:
            y = x2 @ self.wT
            if self.b is not None:
                y = y + self.b
            return y.astype(_F32, copy=False).reshape(lead + (self.out_features,))
        q, scale, zp = quantize_input(x2, reduce_range)
        if self.bp is not None and (self.wT is None or q.shape[0] * self.wT.size > _SMALL_WORK):
            acc = self._int8_acc(q, zp)
        else:
            acc = self._float_acc(q - _F32(zp), zp)
        mult = _F32(scale) * self.w_scale  # float32
        acc = acc.astype(_F32, copy=False)  # the int32 accumulator as float32
        if self.b is None:
            y = acc * mult
        else:  # fbgemm's fused multiply-add: float32 products are exact in float64
            y64 = np.multiply(acc, mult, dtype=np.float64)
            y = np.empty(y64.shape, dtype=_F32)
            np.add(y64, self.b, out=y, casting="same_kind")
        return y.reshape(lead + (self.out_features,))

    def _int8_acc(self, q, zp):
        """The int32 accumulator from core's int8 GEMM of the uint8 input and the int8 weight,
        with the zero-point terms: ``sum (x - zx)(w - zw) = x.w - zx sum w - zw sum x +
        k zx zw``."""
        k = q.shape[1]
        a = q.astype(np.uint8)
        c = _QGEMM.int8_matmul(a, self.bp)
        if self.int32_ok and not self.w_zp.any():  # symmetric weights: one correction
            c -= np.int32(zp) * self.w_rowsum32
            return c
        acc = c.astype(np.int64)
        acc -= zp * self.w_rowsum
        if self.w_zp.any():
            acc -= self.w_zp * a.sum(axis=1, dtype=np.int64)[:, None]
            acc += k * zp * self.w_zp
        return acc

    def _float_acc(self, xc, zp):
        """The accumulator as float32 GEMMs of the centred integer operands, exact while a
        product's partial sums stay below 2**24 (longer reductions in exact chunks)."""
        x_bound = max(zp, 255 - zp)
        k = self.in_features
        bound = max(1, x_bound * self.w_bound)
        chunk = max(1, _F32_EXACT // bound)
        if chunk >= k:
            return xc @ self.wT
        acc = np.zeros((xc.shape[0], self.out_features), dtype=np.float64)
        for s in range(0, k, chunk):
            acc += xc[:, s:s + chunk] @ self.wT[s:s + chunk]
        return acc
