"""Observers (``torch.ao.quantization.observer``): modules that watch the float values passing
through them during calibration and compute the quantization parameters for them.

The arithmetic follows PyTorch's in float32 (min/max, moving averages, the histogram and its
L2 search), so the same calibration data gives the same scales and zero points.

    >>> import fiamma
    >>> from fiamma.ao.quantization import MinMaxObserver
    >>> obs = MinMaxObserver()
    >>> _ = obs(fiamma.tensor([-1.0, 0.0, 3.0]))
    >>> scale, zero_point = obs.calculate_qparams()
    >>> round(float(scale), 6), int(zero_point)
    (0.015686, 64)
"""
import functools
import warnings

import numpy as np

import fiamma
from fiamma import nn
from fiamma.nn import _qtensor as Q

__all__ = ["ObserverBase", "UniformQuantizationObserverBase", "MinMaxObserver",
           "MovingAverageMinMaxObserver", "PerChannelMinMaxObserver",
           "MovingAveragePerChannelMinMaxObserver", "HistogramObserver", "PlaceholderObserver",
           "NoopObserver", "FixedQParamsObserver", "default_observer", "default_weight_observer",
           "default_per_channel_weight_observer", "default_histogram_observer",
           "default_placeholder_observer", "default_debug_observer", "get_observer_state_dict",
           "default_fixed_qparams_range_0to1_observer",
           "default_fixed_qparams_range_neg1to1_observer", "default_affine_fixed_qparams_observer",
           "default_symmetric_fixed_qparams_observer", "default_float_qparams_observer",
           "default_float_qparams_observer_4bit", "default_dynamic_quant_observer"]

_F32_EPS = float(np.finfo(np.float32).eps)
_F32 = np.float32


class _PartialWrapper:
    """``Observer.with_args(...)``: a factory remembering keyword arguments (PyTorch's
    ``_PartialWrapper``); calling it makes the observer."""

    def __init__(self, p):
        self.p = p

    def __call__(self, *args, **kwargs):
        return self.p(*args, **kwargs)

    def with_args(self, **kwargs):
        return _PartialWrapper(functools.partial(self.p, **kwargs))

    def __repr__(self):
        return repr(self.p)


def _with_args(cls_or_self, **kwargs):
    return _PartialWrapper(functools.partial(cls_or_self, **kwargs))


def _np(t):
    return t.detach().cpu().numpy()


def _t(a):
    return fiamma.from_numpy(np.array(a, dtype=np.float32))


class ObserverBase(nn.Module):
    """Base of the observers: ``forward`` records and returns its input unchanged;
    ``calculate_qparams`` returns ``(scale, zero_point)``."""

    with_args = classmethod(_with_args)

    def __init__(self, dtype, is_dynamic=False):
        super().__init__()
        self.dtype = dtype
        self.is_dynamic = is_dynamic

    def calculate_qparams(self):
        raise NotImplementedError(f"{type(self).__name__} computes no qparams")


class UniformQuantizationObserverBase(ObserverBase):
    """Observers computing affine or symmetric qparams from a min and max."""

    def __init__(self, dtype=Q.quint8, qscheme=Q.per_tensor_affine, reduce_range=False,
                 quant_min=None, quant_max=None, factory_kwargs=None, eps=_F32_EPS,
                 is_dynamic=False, **kwargs):
        super().__init__(dtype, is_dynamic)
        if dtype not in (Q.quint8, Q.qint8, Q.qint32, Q.quint4x2):
            raise ValueError(f"{type(self).__name__}: dtype must be fiamma.quint8, qint8, "
                             f"qint32 or quint4x2, got {dtype!r}")
        if qscheme not in (Q.per_tensor_affine, Q.per_tensor_symmetric, Q.per_channel_affine,
                           Q.per_channel_symmetric, Q.per_channel_affine_float_qparams):
            raise ValueError(f"{type(self).__name__}: unknown qscheme {qscheme!r}")
        self.qscheme = qscheme
        self.reduce_range = reduce_range
        if reduce_range:
            warnings.warn("Please use quant_min and quant_max to specify the range for "
                          "observers. reduce_range will be deprecated in a future release "
                          "of PyTorch.", UserWarning, stacklevel=3)
        self.register_buffer("eps", fiamma.tensor([eps], dtype=fiamma.float32))
        self.has_customized_qrange = quant_min is not None and quant_max is not None
        if self.has_customized_qrange:
            if not quant_min <= 0 <= quant_max:
                raise ValueError(f"{type(self).__name__}: the quantization range "
                                 f"[{quant_min}, {quant_max}] must include 0")
            if quant_max - quant_min + 1 > 2 ** dtype.bits:
                raise ValueError(f"{type(self).__name__}: the quantization range "
                                 f"[{quant_min}, {quant_max}] does not fit {dtype!r}")
        self.quant_min, self.quant_max = self._qrange(quant_min, quant_max)

    def _qrange(self, quant_min, quant_max):
        if self.has_customized_qrange:
            if self.reduce_range:
                return quant_min // 2, quant_max // 2
            return quant_min, quant_max
        lo, hi = self.dtype.qmin, self.dtype.qmax
        if self.reduce_range and self.dtype is not Q.qint32:
            return lo // 2, hi // 2
        return lo, hi

    def _symmetric(self):
        return self.qscheme in (Q.per_tensor_symmetric, Q.per_channel_symmetric)

    def _calculate_qparams(self, min_val, max_val):
        """PyTorch's qparams from float32 ``min_val``/``max_val`` arrays (0-d or per
        channel): float32 scale (a 1-element tensor when per tensor), int64 zero point."""
        min_val = np.asarray(min_val, dtype=_F32)
        max_val = np.asarray(max_val, dtype=_F32)
        per_tensor = min_val.ndim == 0
        if per_tensor and min_val == np.inf and max_val == -np.inf:
            warnings.warn("must run observer before calling calculate_qparams. Returning "
                          "default values.", UserWarning, stacklevel=3)
            return fiamma.tensor([1.0]), fiamma.tensor([0])
        if (min_val > max_val).any():
            raise AssertionError(f"min {min_val} should be less than max {max_val}")
        qmin, qmax = self.quant_min, self.quant_max
        min_neg = np.minimum(min_val, _F32(0))
        max_pos = np.maximum(max_val, _F32(0))
        eps = _F32(_np(self.eps)[0])
        zero_point = np.zeros(min_neg.shape, dtype=np.int64)
        if self._symmetric():
            max_pos = np.maximum(-min_neg, max_pos)
            scale = (max_pos / _F32((qmax - qmin) / 2)).astype(_F32)
            scale = np.maximum(scale, eps)
            if self.dtype is Q.quint8:
                zero_point[...] = (qmin + qmax) // 2 if self.has_customized_qrange else 128
        elif self.qscheme is Q.per_channel_affine_float_qparams:
            scale = ((max_val - min_val) / _F32(qmax - qmin)).astype(_F32)
            scale = np.where(scale > eps, scale, _F32(1.0)).astype(_F32)
            zero_point = (-min_val / scale).astype(_F32)
            return _t(scale), fiamma.from_numpy(np.array(zero_point))
        else:
            scale = ((max_pos - min_neg) / _F32(qmax - qmin)).astype(_F32)
            scale = np.maximum(scale, eps)
            zero_point = qmin - np.rint((min_neg / scale).astype(_F32)).astype(np.int64)
            zero_point = np.clip(zero_point, qmin, qmax)
        scale = np.asarray(scale, dtype=_F32).reshape(-1 if not per_tensor else 1)
        zero_point = np.asarray(zero_point, dtype=np.int64).reshape(scale.shape)
        return _t(scale), fiamma.from_numpy(np.array(zero_point))

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"


class MinMaxObserver(UniformQuantizationObserverBase):
    """Running minimum and maximum of everything observed.

    >>> import fiamma
    >>> from fiamma.ao.quantization import MinMaxObserver
    >>> obs = MinMaxObserver(dtype=fiamma.qint8, qscheme=fiamma.per_tensor_symmetric)
    >>> _ = obs(fiamma.tensor([-2.0, 1.0]))
    >>> round(float(obs.calculate_qparams()[0]), 6)
    0.015686
    """

    def __init__(self, dtype=Q.quint8, qscheme=Q.per_tensor_affine, reduce_range=False,
                 quant_min=None, quant_max=None, factory_kwargs=None, eps=_F32_EPS,
                 is_dynamic=False, **kwargs):
        if qscheme in (Q.per_channel_affine, Q.per_channel_symmetric):
            raise NotImplementedError(f"{type(self).__name__} is per tensor; use "
                                      "PerChannelMinMaxObserver for per-channel qschemes")
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs,
                         eps, is_dynamic, **kwargs)
        self.register_buffer("min_val", fiamma.tensor(float("inf")))
        self.register_buffer("max_val", fiamma.tensor(float("-inf")))

    def _minmax(self, x_orig):
        x = np.asarray(_np(x_orig), dtype=_F32)
        return x.min(), x.max()

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        lo, hi = self._minmax(x_orig)
        self.min_val = _t(min(lo, _F32(_np(self.min_val))))
        self.max_val = _t(max(hi, _F32(_np(self.max_val))))
        return x_orig

    def calculate_qparams(self):
        """``(scale, zero_point)`` as 1-element tensors."""
        return self._calculate_qparams(_np(self.min_val), _np(self.max_val))

    def reset_min_max_vals(self):
        self.min_val = fiamma.tensor(float("inf"))
        self.max_val = fiamma.tensor(float("-inf"))


class MovingAverageMinMaxObserver(MinMaxObserver):
    """Moving averages of each batch's min and max:
    ``min += averaging_constant * (batch_min - min)`` (the first batch sets them)."""

    def __init__(self, averaging_constant=0.01, dtype=Q.quint8, qscheme=Q.per_tensor_affine,
                 reduce_range=False, quant_min=None, quant_max=None, eps=_F32_EPS,
                 is_dynamic=False, **kwargs):
        self.averaging_constant = averaging_constant
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range,
                         quant_min=quant_min, quant_max=quant_max, eps=eps,
                         is_dynamic=is_dynamic, **kwargs)

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        lo, hi = self._minmax(x_orig)
        cur_lo, cur_hi = _F32(_np(self.min_val)), _F32(_np(self.max_val))
        if cur_lo == np.inf and cur_hi == -np.inf:
            new_lo, new_hi = lo, hi
        else:
            c = _F32(self.averaging_constant)
            new_lo = cur_lo + c * (lo - cur_lo)
            new_hi = cur_hi + c * (hi - cur_hi)
        self.min_val, self.max_val = _t(new_lo), _t(new_hi)
        return x_orig


class PerChannelMinMaxObserver(UniformQuantizationObserverBase):
    """Running min and max per index of ``ch_axis`` (weights: one scale per output channel).

    >>> import fiamma
    >>> from fiamma.ao.quantization import PerChannelMinMaxObserver
    >>> obs = PerChannelMinMaxObserver(dtype=fiamma.qint8, qscheme=fiamma.per_channel_symmetric)
    >>> _ = obs(fiamma.tensor([[1.0, -2.0], [0.5, 0.25]]))
    >>> obs.calculate_qparams()[1]
    tensor([0, 0])
    """

    def __init__(self, ch_axis=0, dtype=Q.quint8, qscheme=Q.per_channel_affine,
                 reduce_range=False, quant_min=None, quant_max=None, factory_kwargs=None,
                 eps=_F32_EPS, is_dynamic=False, **kwargs):
        if qscheme not in (Q.per_channel_affine, Q.per_channel_symmetric,
                           Q.per_channel_affine_float_qparams):
            raise NotImplementedError(f"{type(self).__name__} needs a per-channel qscheme, "
                                      f"got {qscheme!r}")
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs,
                         eps, is_dynamic, **kwargs)
        self.ch_axis = ch_axis
        self.register_buffer("min_val", fiamma.tensor([]))
        self.register_buffer("max_val", fiamma.tensor([]))

    def _per_channel_minmax(self, x_orig):
        x = np.asarray(_np(x_orig), dtype=_F32)
        x = np.moveaxis(x, self.ch_axis, 0).reshape(x.shape[self.ch_axis], -1)
        return x.min(axis=1), x.max(axis=1)

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        lo, hi = self._per_channel_minmax(x_orig)
        if self.min_val.numel() and self.max_val.numel():
            lo = np.minimum(lo, _np(self.min_val))
            hi = np.maximum(hi, _np(self.max_val))
        self.min_val, self.max_val = _t(lo), _t(hi)
        return x_orig

    def calculate_qparams(self):
        if not self.min_val.numel():
            warnings.warn("must run observer before calling calculate_qparams. Returning "
                          "default values.", UserWarning, stacklevel=2)
            return fiamma.tensor([1.0]), fiamma.tensor([0])
        return self._calculate_qparams(_np(self.min_val), _np(self.max_val))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name in ("min_val", "max_val"):  # the per-channel buffers take the saved shape
            if prefix + name in state_dict:
                setattr(self, name, state_dict[prefix + name].clone())
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


class MovingAveragePerChannelMinMaxObserver(PerChannelMinMaxObserver):
    """Per-channel moving averages of min and max."""

    def __init__(self, averaging_constant=0.01, ch_axis=0, dtype=Q.quint8,
                 qscheme=Q.per_channel_affine, reduce_range=False, quant_min=None,
                 quant_max=None, eps=_F32_EPS, is_dynamic=False, **kwargs):
        super().__init__(ch_axis=ch_axis, dtype=dtype, qscheme=qscheme,
                         reduce_range=reduce_range, quant_min=quant_min, quant_max=quant_max,
                         eps=eps, is_dynamic=is_dynamic, **kwargs)
        self.averaging_constant = averaging_constant

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        lo, hi = self._per_channel_minmax(x_orig)
        if self.min_val.numel():
            c = _F32(self.averaging_constant)
            cur_lo, cur_hi = _np(self.min_val), _np(self.max_val)
            lo = cur_lo + c * (lo - cur_lo)
            hi = cur_hi + c * (hi - cur_hi)
        self.min_val, self.max_val = _t(lo), _t(hi)
        return x_orig


from fiamma.ao.quantization._histogram import HistogramObserver  # noqa: E402


class PlaceholderObserver(ObserverBase):
    """Records nothing; carries the ``dtype`` (and ``custom_op_name``) for conversion."""

    def __init__(self, dtype=fiamma.float32, custom_op_name="", compute_dtype=None,
                 quant_min=None, quant_max=None, qscheme=None, eps=None, is_dynamic=False):
        super().__init__(dtype, is_dynamic)
        self.qscheme = qscheme if qscheme is not None else Q.per_tensor_affine
        self.quant_min, self.quant_max, self.eps = quant_min, quant_max, eps
        self.custom_op = custom_op_name

    def forward(self, x):
        return x

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for PlaceholderObserver")


class NoopObserver(PlaceholderObserver):
    """Does nothing (``dtype`` float16 by default, as PyTorch's)."""

    def __init__(self, dtype=fiamma.float16, custom_op_name=""):
        super().__init__(dtype=dtype, custom_op_name=custom_op_name)


class FixedQParamsObserver(ObserverBase):
    """Observes nothing; its qparams are the fixed ``scale``/``zero_point`` given (buffers,
    float32 and int32), for ops whose output range is known (sigmoid: [0, 1]).

    >>> from fiamma.ao.quantization import FixedQParamsObserver
    >>> FixedQParamsObserver(1.0 / 256, 0).calculate_qparams()
    (tensor([0.0039]), tensor([0], dtype=fiamma.int32))
    """

    def __init__(self, scale, zero_point, dtype=Q.quint8, qscheme=Q.per_tensor_affine,
                 quant_min=0, quant_max=255, is_dynamic=False, **kwargs):
        if is_dynamic:
            raise NotImplementedError("FixedQParamsObserver: dynamic quantization "
                                      "(is_dynamic=True) is not supported")
        super().__init__(dtype, is_dynamic)
        self.quant_min, self.quant_max, self.qscheme = quant_min, quant_max, qscheme
        self.register_buffer("scale", fiamma.tensor([float(scale)], dtype=fiamma.float32))
        self.register_buffer("zero_point", fiamma.tensor([int(zero_point)],
                                                         dtype=fiamma.int32))

    def forward(self, X):
        return X

    def calculate_qparams(self):
        return self.scale, self.zero_point


def get_observer_state_dict(mod):
    """The observers' entries of ``mod.state_dict()`` (keys containing ``activation_post_process``
    or ending in an observer buffer)."""
    from collections import OrderedDict
    return OrderedDict((k, v) for k, v in mod.state_dict().items()
                       if "activation_post_process" in k or "observer" in k)


default_observer = MinMaxObserver.with_args(quant_min=0, quant_max=127)
default_placeholder_observer = PlaceholderObserver
# dynamic quantization: the activation's qparams come from each batch at run time
default_dynamic_quant_observer = PlaceholderObserver.with_args(
    dtype=Q.quint8, quant_min=0, quant_max=255, is_dynamic=True)
default_debug_observer = MinMaxObserver
default_weight_observer = MinMaxObserver.with_args(dtype=Q.qint8,
                                                   qscheme=Q.per_tensor_symmetric)
default_histogram_observer = HistogramObserver.with_args(quant_min=0, quant_max=127)
default_per_channel_weight_observer = PerChannelMinMaxObserver.with_args(
    dtype=Q.qint8, qscheme=Q.per_channel_symmetric)
default_fixed_qparams_range_neg1to1_observer = FixedQParamsObserver.with_args(
    scale=2.0 / 256.0, zero_point=128, dtype=Q.quint8, quant_min=0, quant_max=255)
default_fixed_qparams_range_0to1_observer = FixedQParamsObserver.with_args(
    scale=1.0 / 256.0, zero_point=0, dtype=Q.quint8, quant_min=0, quant_max=255)
default_symmetric_fixed_qparams_observer = default_fixed_qparams_range_neg1to1_observer
default_affine_fixed_qparams_observer = default_fixed_qparams_range_0to1_observer
# embedding weights: per-row float scale and zero point (weight-only quantization)
default_float_qparams_observer = PerChannelMinMaxObserver.with_args(
    dtype=Q.quint8, qscheme=Q.per_channel_affine_float_qparams, ch_axis=0)
default_float_qparams_observer_4bit = PerChannelMinMaxObserver.with_args(
    dtype=Q.quint4x2, qscheme=Q.per_channel_affine_float_qparams, ch_axis=0)
