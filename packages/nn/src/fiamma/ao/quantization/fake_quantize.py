"""Fake-quantize modules (``torch.ao.quantization.fake_quantize``): observe, then round the float
values to the quantization grid and back (``(clamp(round(x/s) + z) - z) * s``), so a model can
be trained for quantization (QAT). The gradient passes where the value was not clipped and is
zero where it was (PyTorch's masked straight-through estimator).

:class:`FakeQuantize` observes with any observer and computes its qparams in Python;
:class:`FusedMovingAvgObsFakeQuantize` (the default of ``get_default_qat_qconfig``) is PyTorch's
fused kernel: moving-average min/max and the C++ ``ChooseQuantizationParams`` rule;
:class:`FixedQParamsFakeQuantize` has fixed qparams (sigmoid-like outputs in [0, 1] or [-1, 1]).

    >>> import fiamma
    >>> from fiamma.ao.quantization import FakeQuantize
    >>> fq = FakeQuantize()
    >>> fq(fiamma.tensor([0.0, 0.1, 1.0])).shape
    fiamma.Size([3])
"""

import numpy as np

import fiamma
from fiamma import nn
from fiamma.ao.quantization import _fq_ops
from fiamma.ao.quantization.observer import (
    FixedQParamsObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    _with_args,
    default_fixed_qparams_range_0to1_observer,
    default_fixed_qparams_range_neg1to1_observer,
)
from fiamma.nn import _qtensor as Q

__all__ = ["FakeQuantizeBase", "FakeQuantize", "FusedMovingAvgObsFakeQuantize",
           "FixedQParamsFakeQuantize", "default_fake_quant", "default_weight_fake_quant",
           "default_per_channel_weight_fake_quant", "default_fused_act_fake_quant",
           "default_fused_wt_fake_quant", "default_fused_per_channel_wt_fake_quant",
           "default_fixed_qparams_range_0to1_fake_quant",
           "default_fixed_qparams_range_neg1to1_fake_quant",
           "default_affine_fixed_qparams_fake_quant", "default_symmetric_fixed_qparams_fake_quant",
           "default_embedding_fake_quant", "default_embedding_fake_quant_4bit",
           "disable_fake_quant", "enable_fake_quant", "disable_observer", "enable_observer"]

_PER_CHANNEL = (Q.per_channel_affine, Q.per_channel_symmetric, Q.per_channel_affine_float_qparams)
_SYMMETRIC = (Q.per_tensor_symmetric, Q.per_channel_symmetric)


class FakeQuantizeBase(nn.Module):
    """Base of the fake-quantize modules: the observer / fake-quant switches."""

    with_args = classmethod(_with_args)

    def __init__(self):
        super().__init__()
        self.register_buffer("fake_quant_enabled", fiamma.tensor([1], dtype=fiamma.uint8))
        self.register_buffer("observer_enabled", fiamma.tensor([1], dtype=fiamma.uint8))

    def enable_fake_quant(self, enabled=True):
        self.fake_quant_enabled.fill_(1 if enabled else 0)

    def disable_fake_quant(self):
        self.enable_fake_quant(False)

    def enable_observer(self, enabled=True):
        self.observer_enabled.fill_(1 if enabled else 0)

    def disable_observer(self):
        self.enable_observer(False)


class FakeQuantize(FakeQuantizeBase):
    """Observes with ``observer(**observer_kwargs)`` and fake-quantizes with its qparams
    (buffers ``scale`` float32 and ``zero_point`` int32, per channel when the observer is)."""

    def __init__(self, observer=MovingAverageMinMaxObserver, quant_min=None, quant_max=None,
                 is_dynamic=False, **observer_kwargs):
        super().__init__()
        if quant_min is not None and quant_max is not None:
            if quant_min > quant_max:
                raise ValueError(f"{type(self).__name__}: quant_min ({quant_min}) must be <= "
                                 f"quant_max ({quant_max})")
            observer_kwargs.update(quant_min=quant_min, quant_max=quant_max)
        observer_kwargs["is_dynamic"] = is_dynamic
        self.activation_post_process = observer(**observer_kwargs)
        self.quant_min = self.activation_post_process.quant_min
        self.quant_max = self.activation_post_process.quant_max
        self.dtype = self.activation_post_process.dtype
        self.qscheme = self.activation_post_process.qscheme
        self.ch_axis = getattr(self.activation_post_process, "ch_axis", -1)
        self.is_per_channel = self.qscheme in _PER_CHANNEL
        self.is_dynamic = is_dynamic
        self.register_buffer("scale", fiamma.tensor([1.0]))
        self.register_buffer("zero_point", fiamma.tensor([0], dtype=self._zp_dtype()))

    def _zp_dtype(self):
        # embedding weights' float qparams keep a fractional zero point, as PyTorch's buffer
        float_zp = self.qscheme is Q.per_channel_affine_float_qparams
        return fiamma.float32 if float_zp else fiamma.int32

    def calculate_qparams(self):
        return self.activation_post_process.calculate_qparams()

    def _fake_quant(self, X):
        if self.is_per_channel:
            return _fq_ops.fake_quantize_per_channel_affine(
                X, self.scale, self.zero_point, self.ch_axis, self.quant_min, self.quant_max)
        return _fq_ops.fake_quantize_per_tensor_affine(X, self.scale, self.zero_point,
                                                       self.quant_min, self.quant_max)

    def forward(self, X):
        if int(self.observer_enabled[0]) == 1:
            self.activation_post_process(X.detach())
            scale, zp = self.calculate_qparams()
            self.scale = scale.to(fiamma.float32).reshape(-1).clone()
            self.zero_point = zp.to(self._zp_dtype()).reshape(-1).clone()
        if int(self.fake_quant_enabled[0]) == 1:
            X = self._fake_quant(X)
        return X

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name in ("scale", "zero_point"):  # per-channel qparams take the saved shape
            if prefix + name in state_dict:
                v = state_dict[prefix + name]
                setattr(self, name, fiamma.zeros(v.shape, dtype=getattr(self, name).dtype))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self):
        return (f"fake_quant_enabled={self.fake_quant_enabled}, observer_enabled="
                f"{self.observer_enabled}, quant_min={self.quant_min}, "
                f"quant_max={self.quant_max}, dtype={self.dtype}, qscheme={self.qscheme}, "
                f"ch_axis={self.ch_axis}, scale={self.scale}, zero_point={self.zero_point}")


class FusedMovingAvgObsFakeQuantize(FakeQuantize):
    """PyTorch's fused observer + fake-quantize (``torch.fused_moving_avg_obs_fake_quant``):
    when the observer is on, the moving-average min/max are updated; when fake quantization is
    on, ``scale``/``zero_point`` are recomputed from them with the C++
    ``ChooseQuantizationParams`` rule (symmetric qschemes keep 0 exact) and the input is
    fake-quantized (masked gradient). The switches
    are int64 buffers here, as in PyTorch. ``calculate_qparams`` (used by ``convert``) is the
    observer's own.

    >>> import fiamma
    >>> from fiamma.ao.quantization import default_fused_act_fake_quant
    >>> fq = default_fused_act_fake_quant()
    >>> fq(fiamma.tensor([0.0, 0.5, 1.0])).tolist()
    [0.0, 0.4980392158031464, 1.0]
    """

    def __init__(self, observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                 **observer_kwargs):
        super().__init__(observer, quant_min, quant_max, **observer_kwargs)
        if not isinstance(self.activation_post_process, (MovingAverageMinMaxObserver,
                                                         MovingAveragePerChannelMinMaxObserver)):
            raise AssertionError("Fused observer+fake_quant module only works with "
                                 "MovingAverageMinMaxObserver")
        self.register_buffer("fake_quant_enabled", fiamma.tensor([1], dtype=fiamma.int64))
        self.register_buffer("observer_enabled", fiamma.tensor([1], dtype=fiamma.int64))
        self.is_symmetric_quant = self.qscheme in _SYMMETRIC

    def forward(self, X):
        obs = self.activation_post_process
        if int(self.observer_enabled[0]) == 1:
            obs(X.detach())
        if int(self.fake_quant_enabled[0]) != 1:
            return X
        # as PyTorch's kernel: the qparams follow the running min/max whenever fake
        # quantization is on (also with the observer off), and only then
        lo, hi = _np(obs.min_val), _np(obs.max_val)
        if lo.size == 0:
            raise RuntimeError(f"{type(self).__name__}: the observer has seen no values yet "
                               "and is disabled, so there are no qparams to fake-quantize "
                               "with")
        scale, zp = _fq_ops.choose_qparams(lo, hi, self.quant_min, self.quant_max,
                                            self.is_symmetric_quant)
        if not self.is_per_channel:
            scale, zp = scale[:1], zp[:1]
        self.scale = fiamma.from_numpy(scale).to(X.device)
        self.zero_point = fiamma.from_numpy(zp.astype(np.int32)).to(X.device)
        return self._fake_quant(X)

    def extra_repr(self):
        return (f"fake_quant_enabled={self.fake_quant_enabled}, observer_enabled="
                f"{self.observer_enabled}, scale={self.scale}, zero_point={self.zero_point}, "
                f"dtype={self.dtype}, quant_min={self.quant_min}, quant_max={self.quant_max}, "
                f"qscheme={self.qscheme}, reduce_range="
                f"{self.activation_post_process.reduce_range}")


class FixedQParamsFakeQuantize(FakeQuantize):
    """Fake-quantizes with the fixed qparams of a :class:`FixedQParamsObserver` (what
    ``prepare_qat`` attaches to Hardsigmoid/Sigmoid/Softmax: scale 1/256, zero point 0; Tanh:
    2/256 and 128)."""

    def __init__(self, observer):
        FakeQuantizeBase.__init__(self)
        self.activation_post_process = observer()
        obs = self.activation_post_process
        if not isinstance(obs, FixedQParamsObserver):
            raise TypeError(f"{type(self).__name__}'s observer must be a FixedQParamsObserver, "
                            f"got {type(obs).__name__}")
        self.quant_min, self.quant_max = obs.quant_min, obs.quant_max
        self.dtype, self.qscheme, self.ch_axis = obs.dtype, obs.qscheme, -1
        self.is_per_channel, self.is_dynamic = False, False
        self.register_buffer("scale", obs.scale.clone())
        self.register_buffer("zero_point", obs.zero_point.clone())

    def calculate_qparams(self):
        return self.scale, self.zero_point

    def forward(self, X):
        if int(self.fake_quant_enabled[0]) == 1:
            X = self._fake_quant(X)
        return X

    def extra_repr(self):
        return (f"fake_quant_enabled={self.fake_quant_enabled}, observer_enabled="
                f"{self.observer_enabled}, scale={self.scale}, zero_point={self.zero_point}, "
                f"dtype={self.dtype}, quant_min={self.quant_min}, quant_max={self.quant_max}, "
                f"qscheme={self.qscheme}")


def _np(t):
    return t.detach().cpu().numpy()


default_fake_quant = FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=0,
                                            quant_max=255, dtype=Q.quint8,
                                            qscheme=Q.per_tensor_affine, reduce_range=True)
default_weight_fake_quant = FakeQuantize.with_args(observer=MovingAverageMinMaxObserver,
                                                   quant_min=-128, quant_max=127,
                                                   dtype=Q.qint8,
                                                   qscheme=Q.per_tensor_symmetric,
                                                   reduce_range=False)
default_per_channel_weight_fake_quant = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-128, quant_max=127,
    dtype=Q.qint8, qscheme=Q.per_channel_symmetric, reduce_range=False, ch_axis=0)

default_fused_act_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255, dtype=Q.quint8)
default_fused_wt_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=-128, quant_max=127, dtype=Q.qint8,
    qscheme=Q.per_tensor_symmetric)
default_fused_per_channel_wt_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-128, quant_max=127,
    dtype=Q.qint8, qscheme=Q.per_channel_symmetric)
default_fixed_qparams_range_0to1_fake_quant = FixedQParamsFakeQuantize.with_args(
    observer=default_fixed_qparams_range_0to1_observer)
default_fixed_qparams_range_neg1to1_fake_quant = FixedQParamsFakeQuantize.with_args(
    observer=default_fixed_qparams_range_neg1to1_observer)
default_affine_fixed_qparams_fake_quant = default_fixed_qparams_range_0to1_fake_quant
default_symmetric_fixed_qparams_fake_quant = default_fixed_qparams_range_neg1to1_fake_quant

default_embedding_fake_quant = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, qscheme=Q.per_channel_affine_float_qparams,
    dtype=Q.quint8, quant_min=0, quant_max=255, ch_axis=0, averaging_constant=1)
default_embedding_fake_quant_4bit = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, qscheme=Q.per_channel_affine_float_qparams,
    ch_axis=0, dtype=Q.quint4x2, averaging_constant=1)


def _apply(method):
    def fn(mod):
        if isinstance(mod, FakeQuantizeBase):
            getattr(mod, method)()
    fn.__name__ = method
    fn.__doc__ = f"``model.apply({method})``: calls ``{method}()`` on fake-quantize modules."
    return fn


disable_fake_quant = _apply("disable_fake_quant")
enable_fake_quant = _apply("enable_fake_quant")
disable_observer = _apply("disable_observer")
enable_observer = _apply("enable_observer")
