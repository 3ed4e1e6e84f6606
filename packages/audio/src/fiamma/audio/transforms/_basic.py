"""Waveform transforms as modules: Resample, Vol, Fade, MuLawEncoding/Decoding, Pre/Deemphasis."""

import math

import fiamma
from fiamma.audio import functional as AF
from fiamma.audio.functional._filtering import _apply_kernel, _sinc_resample_kernel
from fiamma.nn import Module

__all__ = ["Resample", "Vol", "Fade", "MuLawEncoding", "MuLawDecoding", "Preemphasis",
           "Deemphasis"]


class Resample(Module):
    """Resample (..., time) from ``orig_freq`` to ``new_freq``; the kernel is computed once.

    >>> r = Resample(16000, 8000)
    >>> tuple(r(fiamma.zeros(2, 1000)).shape)
    (2, 500)
    """

    def __init__(self, orig_freq=16000, new_freq=16000, resampling_method="sinc_interp_hann",
                 lowpass_filter_width=6, rolloff=0.99, beta=None, *, dtype=None):
        super().__init__()
        self.orig_freq, self.new_freq = orig_freq, new_freq
        self.gcd = math.gcd(int(orig_freq), int(new_freq))
        self.resampling_method = resampling_method
        self.lowpass_filter_width, self.rolloff, self.beta = lowpass_filter_width, rolloff, beta
        if orig_freq != new_freq:
            k, self.width = _sinc_resample_kernel(orig_freq, new_freq, self.gcd,
                                                  lowpass_filter_width, rolloff,
                                                  resampling_method, beta)
            self._kernel64 = k  # float64 NumPy, for waveforms of another dtype than the buffer
            self.register_buffer("kernel", fiamma.tensor(k).to(dtype or fiamma.get_default_dtype()),
                                 persistent=False)

    def forward(self, waveform):
        if self.orig_freq == self.new_freq:
            return waveform
        AF._filtering._check_float("fiamma.audio.transforms.Resample", waveform)
        k = self.kernel
        if k.dtype != waveform.dtype:
            k = fiamma.tensor(self._kernel64).to(waveform.dtype)
        return _apply_kernel(waveform, int(self.orig_freq) // self.gcd,
                             int(self.new_freq) // self.gcd, k, self.width)

    def extra_repr(self):
        return f"orig_freq={self.orig_freq}, new_freq={self.new_freq}"


class Vol(Module):
    """Scale the volume: ``gain_type`` "amplitude" (a ratio), "power" (a power ratio) or "db";
    the result is clamped to [-1, 1]."""

    def __init__(self, gain, gain_type="amplitude"):
        super().__init__()
        if gain_type not in ("amplitude", "power", "db"):
            raise ValueError(f"Vol: gain_type must be 'amplitude', 'power' or 'db', got "
                             f"{gain_type!r}")
        if gain_type in ("amplitude", "power") and gain < 0:
            raise ValueError(f"Vol: if gain_type is amplitude or power, gain must be >= 0, got "
                             f"{gain}")
        self.gain, self.gain_type = gain, gain_type

    def forward(self, waveform):
        if self.gain_type == "amplitude":
            waveform = waveform * self.gain
        elif self.gain_type == "db":
            waveform = AF.gain(waveform, self.gain)
        else:
            waveform = AF.gain(waveform, 10 * math.log10(self.gain))
        return fiamma.clamp(waveform, -1, 1)


_SHAPES = ("quarter_sine", "half_sine", "linear", "logarithmic", "exponential")


class Fade(Module):
    """Fade in over the first ``fade_in_len`` samples and out over the last ``fade_out_len``,
    with ``fade_shape`` one of quarter_sine, half_sine, linear, logarithmic, exponential."""

    def __init__(self, fade_in_len=0, fade_out_len=0, fade_shape="linear"):
        super().__init__()
        if fade_shape not in _SHAPES:
            raise ValueError(f"Fade: fade_shape must be one of {_SHAPES}, got {fade_shape!r}")
        self.fade_in_len, self.fade_out_len, self.fade_shape = fade_in_len, fade_out_len, fade_shape

    def _fade_in(self, n, dtype):
        f = fiamma.linspace(0, 1, self.fade_in_len, dtype=dtype)
        s = self.fade_shape
        if s == "exponential":
            f = fiamma.pow(2.0, f - 1) * f
        elif s == "logarithmic":
            f = fiamma.log10(0.1 + f) + 1
        elif s == "quarter_sine":
            f = fiamma.sin(f * math.pi / 2)
        elif s == "half_sine":
            f = fiamma.sin(f * math.pi - math.pi / 2) / 2 + 0.5
        ones = fiamma.ones(n - self.fade_in_len, dtype=dtype)
        return fiamma.cat([f, ones]).clamp(0, 1)

    def _fade_out(self, n, dtype):
        f = fiamma.linspace(0, 1, self.fade_out_len, dtype=dtype)
        s = self.fade_shape
        if s == "linear":
            f = -f + 1
        elif s == "exponential":
            f = fiamma.pow(2.0, -f) * (1 - f)
        elif s == "logarithmic":
            f = fiamma.log10(1.1 - f) + 1
        elif s == "quarter_sine":
            f = fiamma.sin(f * math.pi / 2 + math.pi / 2)
        else:
            f = fiamma.sin(f * math.pi + math.pi / 2) / 2 + 0.5
        ones = fiamma.ones(n - self.fade_out_len, dtype=dtype)
        return fiamma.cat([ones, f]).clamp(0, 1)

    def forward(self, waveform):
        n = waveform.shape[-1]
        if self.fade_in_len > n or self.fade_out_len > n:
            raise ValueError(f"Fade: fade lengths ({self.fade_in_len}, {self.fade_out_len}) "
                             f"exceed the waveform length {n}")
        dt = waveform.dtype if waveform.is_floating_point() else fiamma.get_default_dtype()
        return self._fade_in(n, dt) * self._fade_out(n, dt) * waveform


class MuLawEncoding(Module):
    """Mu-law encode a signal in [-1, 1] into ``quantization_channels`` integer levels."""

    def __init__(self, quantization_channels=256):
        super().__init__()
        self.quantization_channels = quantization_channels

    def forward(self, x):
        return AF.mu_law_encoding(x, self.quantization_channels)


class MuLawDecoding(Module):
    """Decode mu-law integer levels back to a float signal in [-1, 1]."""

    def __init__(self, quantization_channels=256):
        super().__init__()
        self.quantization_channels = quantization_channels

    def forward(self, x_mu):
        return AF.mu_law_decoding(x_mu, self.quantization_channels)


class Preemphasis(Module):
    """``y[n] = x[n] - coeff * x[n-1]``."""

    def __init__(self, coeff=0.97):
        super().__init__()
        self.coeff = coeff

    def forward(self, waveform):
        return AF.preemphasis(waveform, self.coeff)


class Deemphasis(Module):
    """``y[n] = x[n] + coeff * y[n-1]`` (inverse of Preemphasis)."""

    def __init__(self, coeff=0.97):
        super().__init__()
        self.coeff = coeff

    def forward(self, waveform):
        return AF.deemphasis(waveform, self.coeff)
