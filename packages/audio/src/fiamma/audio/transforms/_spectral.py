"""Spectral transforms of fiamma.audio.transforms (torchaudio's modules, names, defaults and
buffers: ``state_dict`` keys match torchaudio's).

Complex spectrograms are complex tensors (..., freq, time), as in torchaudio; (real, imag)
pairs (..., freq, time, 2) are still accepted (see :mod:`fiamma.audio.functional._spectral`).
"""

import math

import fiamma
import fiamma.audio.functional._spectral as F
from fiamma import nn

__all__ = ["Spectrogram", "InverseSpectrogram", "GriffinLim", "AmplitudeToDB", "MelScale",
           "InverseMelScale", "MelSpectrogram", "MFCC", "LFCC", "FrequencyMasking",
           "TimeMasking", "SpecAugment", "TimeStretch", "PitchShift", "ComputeDeltas",
           "SpectralCentroid"]


def _apply_fbank(spec, fb):
    """(..., n_freq, time) x fb (n_freq, n_filter) -> (..., n_filter, time).

    Triangular filter banks are sparse (each bin lies in at most two filters), so for long
    inputs each filter is applied to the rows of its own band only (about n_filter / 2 times
    fewer multiply-adds than the dense product; same values). Short inputs use one matmul."""
    if fb.dtype != spec.dtype:
        fb = fb.to(spec.dtype)
    n_freq, n_filt = fb.shape
    if spec.numel() >= (1 << 16) and n_filt >= 8:
        nz = fb.detach().numpy() != 0
        cols = nz.any(0)
        lo = nz.argmax(0)
        hi = n_freq - nz[::-1].argmax(0)
        if cols.all() and int((hi - lo).sum()) * 4 <= n_freq * n_filt:
            rows = [fiamma.matmul(fb[int(lo[m]):int(hi[m]), m].reshape(1, -1),
                                  spec[..., int(lo[m]):int(hi[m]), :]) for m in range(n_filt)]
            return fiamma.cat(rows, -2)
    return fiamma.matmul(spec.transpose(-1, -2), fb).transpose(-1, -2)


def _stft_window(mod, n_fft, win_length, hop_length, window_fn, wkwargs, hop_divisor=2):
    """The STFT geometry of transform ``mod``: ``n_fft``, ``win_length`` (default ``n_fft``),
    ``hop_length`` (default ``win_length // hop_divisor``) and the ``window`` buffer
    (``window_fn(win_length, **wkwargs)``)."""
    mod.n_fft = n_fft
    mod.win_length = win_length if win_length is not None else n_fft
    mod.hop_length = hop_length if hop_length is not None else mod.win_length // hop_divisor
    mod.register_buffer("window", window_fn(mod.win_length) if wkwargs is None
                        else window_fn(mod.win_length, **wkwargs))


class Spectrogram(nn.Module):
    """Spectrogram of a waveform (..., time) -> (..., n_fft // 2 + 1, frames).

    ``power=None`` gives the complex spectrogram (..., freq, frames), a complex tensor.

    >>> import fiamma
    >>> from fiamma.audio import transforms as T
    >>> T.Spectrogram(n_fft=400)(fiamma.randn(1, 16000)).shape
    fiamma.Size([1, 201, 81])
    """

    def __init__(self, n_fft=400, win_length=None, hop_length=None, pad=0,
                 window_fn=fiamma.hann_window, power=2.0, normalized=False, wkwargs=None,
                 center=True, pad_mode="reflect", onesided=True, return_complex=None):
        super().__init__()
        _stft_window(self, n_fft, win_length, hop_length, window_fn, wkwargs)
        self.pad = pad
        self.power = power
        self.normalized = normalized
        self.center = center
        self.pad_mode = pad_mode
        self.onesided = onesided

    def forward(self, waveform):
        return F.spectrogram(waveform, self.pad, self.window, self.n_fft, self.hop_length,
                             self.win_length, self.power, self.normalized, self.center,
                             self.pad_mode, self.onesided)


class InverseSpectrogram(nn.Module):
    """Waveform from a complex spectrogram (..., freq, frames) (inverse STFT; (real, imag)
    pairs (..., freq, frames, 2) are accepted too)."""

    def __init__(self, n_fft=400, win_length=None, hop_length=None, pad=0,
                 window_fn=fiamma.hann_window, normalized=False, wkwargs=None, center=True,
                 pad_mode="reflect", onesided=True):
        super().__init__()
        _stft_window(self, n_fft, win_length, hop_length, window_fn, wkwargs)
        self.pad = pad
        self.normalized = normalized
        self.center = center
        self.pad_mode = pad_mode
        self.onesided = onesided

    def forward(self, spectrogram, length=None):
        return F.inverse_spectrogram(spectrogram, length, self.pad, self.window, self.n_fft,
                                     self.hop_length, self.win_length, self.normalized,
                                     self.center, self.pad_mode, self.onesided)


class GriffinLim(nn.Module):
    """Waveform from a magnitude/power spectrogram by (fast) Griffin-Lim."""

    def __init__(self, n_fft=400, n_iter=32, win_length=None, hop_length=None,
                 window_fn=fiamma.hann_window, power=2.0, wkwargs=None, momentum=0.99,
                 length=None, rand_init=True):
        super().__init__()
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum must be in the range [0, 1). Found: {momentum}")
        self.n_iter = n_iter
        _stft_window(self, n_fft, win_length, hop_length, window_fn, wkwargs)
        self.length = length
        self.power = power
        self.momentum = momentum
        self.rand_init = rand_init

    def forward(self, specgram):
        return F.griffinlim(specgram, self.window, self.n_fft, self.hop_length,
                            self.win_length, self.power, self.n_iter, self.momentum,
                            self.length, self.rand_init)


class AmplitudeToDB(nn.Module):
    """Power/amplitude to decibels: 10 (power) or 20 (magnitude) log10(max(x, 1e-10)),
    clipped to ``top_db`` below the maximum when given."""

    def __init__(self, stype="power", top_db=None):
        super().__init__()
        self.stype = stype
        if top_db is not None and top_db < 0:
            raise ValueError("top_db must be positive value")
        self.top_db = top_db
        self.multiplier = 10.0 if stype == "power" else 20.0
        self.amin = 1e-10
        self.ref_value = 1.0
        self.db_multiplier = math.log10(max(self.amin, self.ref_value))

    def forward(self, x):
        return F._amplitude_to_db(x, self.multiplier, self.amin, self.db_multiplier,
                                  self.top_db)


class MelScale(nn.Module):
    """Spectrogram (..., n_stft, time) -> mel spectrogram (..., n_mels, time) (buffer ``fb``
    of shape (n_stft, n_mels))."""

    def __init__(self, n_mels=128, sample_rate=16000, f_min=0.0, f_max=None, n_stft=201,
                 norm=None, mel_scale="htk"):
        super().__init__()
        self.n_mels = n_mels
        self.sample_rate = sample_rate
        self.f_max = f_max if f_max is not None else float(sample_rate // 2)
        self.f_min = f_min
        self.norm = norm
        self.mel_scale = mel_scale
        if f_min > self.f_max:
            raise ValueError(f"Require f_min: {f_min} <= f_max: {self.f_max}")
        self.register_buffer("fb", F.melscale_fbanks(n_stft, self.f_min, self.f_max,
                                                     self.n_mels, self.sample_rate,
                                                     self.norm, self.mel_scale))

    def forward(self, specgram):
        return _apply_fbank(specgram, self.fb)


class InverseMelScale(nn.Module):
    """Mel spectrogram (..., n_mels, time) -> linear spectrogram (..., n_stft, time): the
    minimum-norm least-squares solution of fb^T X = melspec, clamped at 0. torchaudio solves
    it with ``torch.linalg.lstsq(driver=...)``; every driver gives this same solution when fb
    has full column rank (the usual case), and here it is computed through the pseudo-inverse
    of fb^T (float64, cached until fb changes), which is also the minimum-norm solution when
    some filters are empty, and is differentiable w.r.t. melspec. ``driver`` is validated and
    kept for compatibility."""

    def __init__(self, n_stft, n_mels=128, sample_rate=16000, f_min=0.0, f_max=None,
                 norm=None, mel_scale="htk", driver="gels"):
        super().__init__()
        self.n_mels = n_mels
        self.sample_rate = sample_rate
        self.f_max = f_max or float(sample_rate // 2)
        self.f_min = f_min
        self.driver = driver
        if f_min > self.f_max:
            raise ValueError(f"Require f_min: {f_min} <= f_max: {self.f_max}")
        if driver not in ("gels", "gelsy", "gelsd", "gelss"):
            raise ValueError(f'driver must be one of ["gels", "gelsy", "gelsd", "gelss"]. '
                             f"Found {driver}.")
        self.register_buffer("fb", F.melscale_fbanks(n_stft, self.f_min, self.f_max,
                                                     self.n_mels, self.sample_rate, norm,
                                                     mel_scale))
        self._pinv = None

    def forward(self, melspec):
        import numpy as np

        shape = tuple(melspec.shape)
        if shape[-2] != self.n_mels:
            raise ValueError(f"Expected an input with {self.n_mels} mel bins. "
                             f"Found: {shape[-2]}")
        # the buffer's identity, storage and version: a load_state_dict or any in-place
        # change of fb invalidates the cached pseudo-inverse
        key = (id(self.fb), self.fb.data_ptr(), self.fb._version, melspec.dtype)
        if self._pinv is None or self._pinv[0] != key:
            fbt = self.fb.detach().to(fiamma.float64).numpy().T
            pinv = np.linalg.pinv(fbt)
            self._pinv = (key, fiamma.from_numpy(np.ascontiguousarray(pinv)).to(melspec.dtype))
        spec = fiamma.matmul(self._pinv[1], melspec.reshape((-1,) + shape[-2:]))
        spec = fiamma.relu(spec)
        return spec.reshape(shape[:-2] + tuple(spec.shape[-2:]))


class MelSpectrogram(nn.Module):
    """Mel spectrogram of a waveform (..., time) -> (..., n_mels, frames): Spectrogram then
    MelScale (submodules ``spectrogram`` and ``mel_scale``, as in torchaudio).

    >>> import fiamma
    >>> from fiamma.audio import transforms as T
    >>> T.MelSpectrogram(16000, n_fft=400, hop_length=160, n_mels=80)(
    ...     fiamma.randn(16000)).shape
    fiamma.Size([80, 101])
    """

    def __init__(self, sample_rate=16000, n_fft=400, win_length=None, hop_length=None,
                 f_min=0.0, f_max=None, pad=0, n_mels=128, window_fn=fiamma.hann_window,
                 power=2.0, normalized=False, wkwargs=None, center=True, pad_mode="reflect",
                 onesided=None, norm=None, mel_scale="htk"):
        super().__init__()
        self.sample_rate = sample_rate
        self.n_fft = n_fft
        self.win_length = win_length if win_length is not None else n_fft
        self.hop_length = hop_length if hop_length is not None else self.win_length // 2
        self.pad = pad
        self.power = power
        self.normalized = normalized
        self.n_mels = n_mels
        self.f_max = f_max
        self.f_min = f_min
        self.spectrogram = Spectrogram(n_fft=self.n_fft, win_length=self.win_length,
                                       hop_length=self.hop_length, pad=self.pad,
                                       window_fn=window_fn, power=self.power,
                                       normalized=self.normalized, wkwargs=wkwargs,
                                       center=center, pad_mode=pad_mode, onesided=True)
        self.mel_scale = MelScale(self.n_mels, self.sample_rate, self.f_min, self.f_max,
                                  self.n_fft // 2 + 1, norm, mel_scale)

    def forward(self, waveform):
        return self.mel_scale(self.spectrogram(waveform))


class MFCC(nn.Module):
    """Mel-frequency cepstral coefficients (..., n_mfcc, frames): MelSpectrogram (``melkwargs``),
    dB (top_db 80) or log(x + 1e-6) when ``log_mels``, then the DCT-II (buffer ``dct_mat``)."""

    def __init__(self, sample_rate=16000, n_mfcc=40, dct_type=2, norm="ortho",
                 log_mels=False, melkwargs=None):
        super().__init__()
        if dct_type not in (2,):
            raise ValueError(f"DCT type not supported: {dct_type}")
        self.sample_rate = sample_rate
        self.n_mfcc = n_mfcc
        self.dct_type = dct_type
        self.norm = norm
        self.top_db = 80.0
        self.amplitude_to_DB = AmplitudeToDB("power", self.top_db)
        self.MelSpectrogram = MelSpectrogram(sample_rate=self.sample_rate,
                                             **(melkwargs or {}))
        if self.n_mfcc > self.MelSpectrogram.n_mels:
            raise ValueError("Cannot select more MFCC coefficients than # mel bins")
        self.register_buffer("dct_mat", F.create_dct(self.n_mfcc, self.MelSpectrogram.n_mels,
                                                     self.norm))
        self.log_mels = log_mels

    def forward(self, waveform):
        mel = self.MelSpectrogram(waveform)
        mel = fiamma.log(mel + 1e-6) if self.log_mels else self.amplitude_to_DB(mel)
        dct = self.dct_mat if self.dct_mat.dtype == mel.dtype else self.dct_mat.to(mel.dtype)
        return fiamma.matmul(mel.transpose(-1, -2), dct).transpose(-1, -2)


class LFCC(nn.Module):
    """Linear-frequency cepstral coefficients (..., n_lfcc, frames): Spectrogram
    (``speckwargs``), linear triangular filters (buffer ``filter_mat``), dB or log, DCT-II
    (buffer ``dct_mat``)."""

    def __init__(self, sample_rate=16000, n_filter=128, f_min=0.0, f_max=None, n_lfcc=40,
                 dct_type=2, norm="ortho", log_lf=False, speckwargs=None):
        super().__init__()
        if dct_type not in (2,):
            raise ValueError(f"DCT type not supported: {dct_type}")
        self.sample_rate = sample_rate
        self.f_min = f_min
        self.f_max = f_max if f_max is not None else float(sample_rate // 2)
        self.n_filter = n_filter
        self.n_lfcc = n_lfcc
        self.dct_type = dct_type
        self.norm = norm
        self.log_lf = log_lf
        self.top_db = 80.0
        self.amplitude_to_DB = AmplitudeToDB("power", self.top_db)
        self.Spectrogram = Spectrogram(**(speckwargs or {}))
        if self.n_lfcc > self.Spectrogram.n_fft:
            raise ValueError("Cannot select more LFCC coefficients than # fft bins")
        self.register_buffer("filter_mat", F.linear_fbanks(self.Spectrogram.n_fft // 2 + 1,
                                                           self.f_min, self.f_max,
                                                           self.n_filter, self.sample_rate))
        self.register_buffer("dct_mat", F.create_dct(self.n_lfcc, self.n_filter, self.norm))

    def forward(self, waveform):
        spec = self.Spectrogram(waveform)
        spec = _apply_fbank(spec, self.filter_mat)
        spec = fiamma.log(spec + 1e-6) if self.log_lf else self.amplitude_to_DB(spec)
        return fiamma.matmul(spec.transpose(-1, -2),
                             self.dct_mat.to(spec.dtype)).transpose(-1, -2)


class _AxisMasking(nn.Module):
    def __init__(self, mask_param, axis, iid_masks, p=1.0):
        super().__init__()
        self.mask_param = mask_param
        self.axis = axis
        self.iid_masks = iid_masks
        self.p = p

    def forward(self, specgram, mask_value=0.0):
        axis = self.axis + specgram.dim() - F._is_cx(specgram) - 3
        if self.iid_masks:
            return F.mask_along_axis_iid(specgram, self.mask_param, mask_value, axis, p=self.p)
        return F.mask_along_axis(specgram, self.mask_param, mask_value, axis, p=self.p)


class FrequencyMasking(_AxisMasking):
    """Mask a random band of at most ``freq_mask_param`` frequency bins (SpecAugment);
    ``iid_masks``: a different band per example of a (..., freq, time) batch."""

    def __init__(self, freq_mask_param, iid_masks=False):
        super().__init__(freq_mask_param, 1, iid_masks)


class TimeMasking(_AxisMasking):
    """Mask a random band of at most ``time_mask_param`` frames (and at most p * frames)."""

    def __init__(self, time_mask_param, iid_masks=False, p=1.0):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"The value of p must be between 0.0 and 1.0 ({p} given).")
        super().__init__(time_mask_param, 2, iid_masks, p=p)


class SpecAugment(nn.Module):
    """SpecAugment: ``n_time_masks`` time masks then ``n_freq_masks`` frequency masks, filled
    with the spectrogram's mean (or 0 with ``zero_masking``)."""

    def __init__(self, n_time_masks, time_mask_param, n_freq_masks, freq_mask_param,
                 iid_masks=True, p=1.0, zero_masking=False):
        super().__init__()
        self.n_time_masks = n_time_masks
        self.time_mask_param = time_mask_param
        self.n_freq_masks = n_freq_masks
        self.freq_mask_param = freq_mask_param
        self.iid_masks = iid_masks
        self.p = p
        self.zero_masking = zero_masking

    def forward(self, specgram):
        cx = F._is_cx(specgram)
        if self.zero_masking:
            mask_value = 0.0
        elif cx:  # the complex mean
            mask_value = (specgram[..., 0].mean().item(), specgram[..., 1].mean().item())
        else:
            mask_value = specgram.mean().item()
        time_dim = specgram.dim() - cx - 1
        freq_dim = time_dim - 1
        fn = F.mask_along_axis_iid if (specgram.dim() - cx > 2 and self.iid_masks) \
            else F.mask_along_axis
        for _ in range(self.n_time_masks):
            specgram = fn(specgram, self.time_mask_param, mask_value, time_dim, p=self.p)
        for _ in range(self.n_freq_masks):
            specgram = fn(specgram, self.freq_mask_param, mask_value, freq_dim, p=self.p)
        return specgram


class TimeStretch(nn.Module):
    """Stretch a complex spectrogram (..., freq, time) in time by ``rate`` (phase vocoder;
    buffer ``phase_advance`` (n_freq, 1))."""

    def __init__(self, hop_length=None, n_freq=201, fixed_rate=None):
        super().__init__()
        self.fixed_rate = fixed_rate
        n_fft = (n_freq - 1) * 2
        hop_length = hop_length if hop_length is not None else n_fft // 2
        self.register_buffer("phase_advance",
                             fiamma.linspace(0, math.pi * hop_length, n_freq).reshape(-1, 1))

    def forward(self, complex_specgrams, overriding_rate=None):
        if overriding_rate is None:
            if self.fixed_rate is None:
                raise ValueError("If no fixed_rate is specified, must pass a valid rate to "
                                 "the forward method.")
            rate = self.fixed_rate
        else:
            rate = overriding_rate
        return F.phase_vocoder(complex_specgrams, rate, self.phase_advance)


class PitchShift(nn.Module):
    """Shift the pitch of a waveform (..., time) by ``n_steps`` (of 1/bins_per_octave
    octave)."""

    def __init__(self, sample_rate, n_steps, bins_per_octave=12, n_fft=512, win_length=None,
                 hop_length=None, window_fn=fiamma.hann_window, wkwargs=None):
        super().__init__()
        self.n_steps = n_steps
        self.bins_per_octave = bins_per_octave
        self.sample_rate = sample_rate
        _stft_window(self, n_fft, win_length, hop_length, window_fn, wkwargs, hop_divisor=4)

    def forward(self, waveform):
        return F.pitch_shift(waveform, self.sample_rate, self.n_steps, self.bins_per_octave,
                             self.n_fft, self.hop_length, self.win_length,
                             self.window.to(waveform.dtype))


class ComputeDeltas(nn.Module):
    """Delta coefficients of a (..., freq, time) tensor along time."""

    def __init__(self, win_length=5, mode="replicate"):
        super().__init__()
        self.win_length = win_length
        self.mode = mode

    def forward(self, specgram):
        return F.compute_deltas(specgram, win_length=self.win_length, mode=self.mode)


class SpectralCentroid(nn.Module):
    """Spectral centroid (Hz) per frame of a waveform (..., time) -> (..., frames)."""

    def __init__(self, sample_rate, n_fft=400, win_length=None, hop_length=None, pad=0,
                 window_fn=fiamma.hann_window, wkwargs=None):
        super().__init__()
        self.sample_rate = sample_rate
        _stft_window(self, n_fft, win_length, hop_length, window_fn, wkwargs)
        self.pad = pad

    def forward(self, waveform):
        return F.spectral_centroid(waveform, self.sample_rate, self.pad, self.window,
                                   self.n_fft, self.hop_length, self.win_length)
