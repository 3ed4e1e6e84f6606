"""Augmentation and effect transforms as modules (torchaudio.transforms): AddNoise, Convolve,
FFTConvolve, Speed, SpeedPerturbation, Loudness, SlidingWindowCmn, Vad."""

import fiamma
from fiamma.audio.functional import _alignment, _effects as E
from fiamma.nn import Module

__all__ = ["AddNoise", "Convolve", "FFTConvolve", "Speed", "SpeedPerturbation", "Loudness",
           "SlidingWindowCmn", "Vad", "RNNTLoss"]


class AddNoise(Module):
    """``forward(waveform, noise, snr, lengths=None)``: ``functional.add_noise``."""

    def forward(self, waveform, noise, snr, lengths=None):
        return E.add_noise(waveform, noise, snr, lengths)


class Convolve(Module):
    """``forward(x, y)``: direct ``functional.convolve`` with ``mode`` full/valid/same."""

    def __init__(self, mode="full"):
        super().__init__()
        if mode not in E._MODES:
            raise ValueError(f"Convolve: mode must be one of {E._MODES}, got {mode!r}")
        self.mode = mode

    def forward(self, x, y):
        return E.convolve(x, y, mode=self.mode)


class FFTConvolve(Convolve):
    """``forward(x, y)``: ``functional.fftconvolve`` with ``mode`` full/valid/same."""

    def forward(self, x, y):
        return E.fftconvolve(x, y, mode=self.mode)


class Speed(Module):
    """Change speed by ``factor``; ``forward(waveform, lengths=None) -> (waveform, lengths)``."""

    def __init__(self, orig_freq, factor):
        super().__init__()
        self.orig_freq, self.factor = orig_freq, factor

    def forward(self, waveform, lengths=None):
        return E.speed(waveform, self.orig_freq, self.factor, lengths)


class SpeedPerturbation(Module):
    """Speed change by a factor drawn uniformly from ``factors`` at each call (fiamma's global
    RNG); ``forward(waveform, lengths=None) -> (waveform, lengths)``."""

    def __init__(self, orig_freq, factors):
        super().__init__()
        self.orig_freq = orig_freq
        self.factors = list(factors)
        if not self.factors:
            raise ValueError("SpeedPerturbation: factors must not be empty")

    def forward(self, waveform, lengths=None):
        i = int(fiamma.randint(0, len(self.factors), (1,)).item())
        return E.speed(waveform, self.orig_freq, self.factors[i], lengths)


class Loudness(Module):
    """Integrated loudness (LKFS) of (..., channel, time) per ITU-R BS.1770-4."""

    def __init__(self, sample_rate):
        super().__init__()
        self.sample_rate = sample_rate

    def forward(self, wavefrom):
        return E.loudness(wavefrom, self.sample_rate)


class SlidingWindowCmn(Module):
    """Sliding-window cepstral mean (and variance) normalisation of (..., time, freq)."""

    def __init__(self, cmn_window=600, min_cmn_window=100, center=False, norm_vars=False):
        super().__init__()
        self.cmn_window, self.min_cmn_window = cmn_window, min_cmn_window
        self.center, self.norm_vars = center, norm_vars

    def forward(self, specgram):
        return E.sliding_window_cmn(specgram, self.cmn_window, self.min_cmn_window, self.center,
                                    self.norm_vars)


class Vad(Module):
    """SoX's voice activity detector (``functional.vad``): trims leading silence."""

    def __init__(self, sample_rate, trigger_level=7.0, trigger_time=0.25, search_time=1.0,
                 allowed_gap=0.25, pre_trigger_time=0.0, boot_time=0.35, noise_up_time=0.1,
                 noise_down_time=0.01, noise_reduction_amount=1.35, measure_freq=20.0,
                 measure_duration=None, measure_smooth_time=0.4, hp_filter_freq=50.0,
                 lp_filter_freq=6000.0, hp_lifter_freq=150.0, lp_lifter_freq=2000.0):
        super().__init__()
        self.sample_rate = sample_rate
        self.kwargs = dict(
            trigger_level=trigger_level, trigger_time=trigger_time, search_time=search_time,
            allowed_gap=allowed_gap, pre_trigger_time=pre_trigger_time, boot_time=boot_time,
            noise_up_time=noise_up_time, noise_down_time=noise_down_time,
            noise_reduction_amount=noise_reduction_amount, measure_freq=measure_freq,
            measure_duration=measure_duration, measure_smooth_time=measure_smooth_time,
            hp_filter_freq=hp_filter_freq, lp_filter_freq=lp_filter_freq,
            hp_lifter_freq=hp_lifter_freq, lp_lifter_freq=lp_lifter_freq)

    def forward(self, waveform):
        return E.vad(waveform, self.sample_rate, **self.kwargs)


class RNNTLoss(Module):
    """RNN-Transducer loss module: ``forward(logits, targets, logit_lengths, target_lengths)``
    (see ``functional.rnnt_loss``)."""

    def __init__(self, blank=-1, clamp=-1.0, reduction="mean", fused_log_softmax=True):
        super().__init__()
        self.blank, self.clamp, self.reduction = blank, clamp, reduction
        self.fused_log_softmax = fused_log_softmax

    def forward(self, logits, targets, logit_lengths, target_lengths):
        return _alignment.rnnt_loss(logits, targets, logit_lengths, target_lengths, self.blank,
                                    self.clamp, self.reduction, self.fused_log_softmax)
