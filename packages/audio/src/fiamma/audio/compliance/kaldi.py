"""Kaldi's feature extraction (``compute-fbank-feats``, ``compute-mfcc-feats``,
``compute-spectrogram-feats``) as ``torchaudio.compliance.kaldi`` offers it: the same
arguments, defaults and results.

Every function takes a waveform of shape ``(channels, time)`` (one channel is used, ``channel``)
and returns features of shape ``(frames, bins)``. Frames follow Kaldi's framing: with
``snip_edges=True`` only whole frames (``1 + (n - size) // shift``); otherwise
``(n + shift // 2) // shift`` frames centred on the shifts, the signal mirrored at its ends.
Each frame then goes through dither, DC removal, the raw log energy, pre-emphasis, the window
(``povey``, ``hanning``, ``hamming``, ``rectangular``, ``blackman``) and zero padding to a power
of two. Gradients flow back to the waveform (with ``dither=0``).

>>> import fiamma
>>> from fiamma.audio.compliance import kaldi
>>> wav = fiamma.sin(fiamma.arange(16000.0) * 0.2).unsqueeze(0)
>>> kaldi.fbank(wav, num_mel_bins=40).shape
fiamma.Size([98, 40])
>>> kaldi.mfcc(wav).shape
fiamma.Size([98, 13])
"""

import math

import fiamma

__all__ = ["get_mel_banks", "inverse_mel_scale", "inverse_mel_scale_scalar", "mel_scale",
           "mel_scale_scalar", "spectrogram", "fbank", "mfcc", "vtln_warp_freq",
           "vtln_warp_mel_freq"]

Tensor = fiamma.Tensor  # torchaudio's module exposes it; annotations in ported code use it

# Kaldi's floor before a log: float32's machine epsilon (std::numeric_limits<float>::epsilon())
EPSILON = float.fromhex("0x1p-23")
MILLISECONDS_TO_SECONDS = 0.001

HAMMING = "hamming"
HANNING = "hanning"
POVEY = "povey"
RECTANGULAR = "rectangular"
BLACKMAN = "blackman"
WINDOWS = [HAMMING, HANNING, POVEY, RECTANGULAR, BLACKMAN]


# ---- mel scale and VTLN --------------------------------------------------------------------

def mel_scale_scalar(freq):
    """Kaldi's mel scale of one frequency in Hz: ``1127 ln(1 + f / 700)``."""
    return 1127.0 * math.log(1.0 + freq / 700.0)


def mel_scale(freq):
    """:func:`mel_scale_scalar` of every element of a tensor."""
    return 1127.0 * fiamma.log1p(freq / 700.0)


def inverse_mel_scale_scalar(mel_freq):
    """The frequency in Hz of one mel value (the inverse of :func:`mel_scale_scalar`)."""
    return 700.0 * (math.exp(mel_freq / 1127.0) - 1.0)


def inverse_mel_scale(mel_freq):
    """:func:`inverse_mel_scale_scalar` of every element of a tensor."""
    return 700.0 * (fiamma.exp(mel_freq / 1127.0) - 1.0)


def vtln_warp_freq(vtln_low_cutoff, vtln_high_cutoff, low_freq, high_freq, vtln_warp_factor,
                   freq):
    """Kaldi's piecewise-linear VTLN warp of frequencies ``freq`` (Hz).

    Frequencies outside ``[low_freq, high_freq]`` are unchanged; inside, the warp is linear
    with slope ``1 / vtln_warp_factor`` between two inflection points
    ``l = vtln_low_cutoff * max(1, factor)`` and ``h = vtln_high_cutoff * min(1, factor)``,
    and joins ``low_freq`` and ``high_freq`` to them linearly, so both ends stay fixed.
    """
    if not vtln_low_cutoff > low_freq:
        raise ValueError(f"vtln_warp_freq: vtln_low_cutoff must be larger than low_freq, got "
                         f"{vtln_low_cutoff} and {low_freq}")
    if not vtln_high_cutoff < high_freq:
        raise ValueError(f"vtln_warp_freq: vtln_high_cutoff must be smaller than high_freq, got "
                         f"{vtln_high_cutoff} and {high_freq}")
    lo = vtln_low_cutoff * max(1.0, vtln_warp_factor)
    hi = vtln_high_cutoff * min(1.0, vtln_warp_factor)
    scale = 1.0 / vtln_warp_factor
    f_lo, f_hi = scale * lo, scale * hi
    scale_left = (f_lo - low_freq) / (lo - low_freq)
    scale_right = (high_freq - f_hi) / (high_freq - hi)
    left = low_freq + scale_left * (freq - low_freq)
    middle = scale * freq
    right = high_freq + scale_right * (freq - high_freq)
    out = fiamma.where(freq < lo, left, fiamma.where(freq < hi, middle, right))
    outside = (freq < low_freq) | (freq > high_freq)
    return fiamma.where(outside, freq, out)


def vtln_warp_mel_freq(vtln_low_cutoff, vtln_high_cutoff, low_freq, high_freq,
                       vtln_warp_factor, mel_freq):
    """:func:`vtln_warp_freq` applied to mel values (converted to Hz and back)."""
    hz = inverse_mel_scale(mel_freq)
    return mel_scale(vtln_warp_freq(vtln_low_cutoff, vtln_high_cutoff, low_freq, high_freq,
                                    vtln_warp_factor, hz))


def get_mel_banks(num_bins, window_length_padded, sample_freq, low_freq, high_freq, vtln_low,
                  vtln_high, vtln_warp_factor):
    """Kaldi's triangular mel filters: ``(bins, window_length_padded // 2)`` float32 weights
    over the FFT bins (the Nyquist bin excluded, as Kaldi) and the ``(bins,)`` centre
    frequencies in Hz.

    ``high_freq <= 0`` counts from the Nyquist frequency, as does ``vtln_high < 0``.
    """
    bins, centers = _mel_banks(num_bins, window_length_padded, sample_freq, low_freq,
                               high_freq, vtln_low, vtln_high, vtln_warp_factor)
    return bins.float(), centers.float()


def _mel_banks(num_bins, window_length_padded, sample_freq, low_freq, high_freq, vtln_low,
               vtln_high, vtln_warp_factor):
    # in float64; fbank casts them to the waveform's dtype
    if num_bins <= 3:
        raise ValueError(f"get_mel_banks: num_bins must be greater than 3, got {num_bins}")
    if window_length_padded % 2:
        raise ValueError(f"get_mel_banks: window_length_padded must be even, got "
                         f"{window_length_padded}")
    num_fft_bins = window_length_padded // 2
    nyquist = 0.5 * sample_freq
    if high_freq <= 0.0:
        high_freq += nyquist
    if not (0.0 <= low_freq < nyquist and 0.0 < high_freq <= nyquist and low_freq < high_freq):
        raise ValueError(f"get_mel_banks: bad values in options: low-freq {low_freq} and "
                         f"high-freq {high_freq} vs. nyquist {nyquist}")
    fft_bin_width = sample_freq / window_length_padded
    mel_low, mel_high = mel_scale_scalar(low_freq), mel_scale_scalar(high_freq)
    delta = (mel_high - mel_low) / (num_bins + 1)
    if vtln_high < 0.0:
        vtln_high += nyquist
    if vtln_warp_factor != 1.0 and not (low_freq < vtln_low < high_freq and
                                        0.0 < vtln_high < high_freq and vtln_low < vtln_high):
        raise ValueError(f"get_mel_banks: bad values in options: vtln-low {vtln_low} and "
                         f"vtln-high {vtln_high}, versus low-freq {low_freq} and high-freq "
                         f"{high_freq}")
    b = fiamma.arange(num_bins, dtype=fiamma.float64).unsqueeze(1)
    left = mel_low + b * delta
    center = mel_low + (b + 1.0) * delta
    right = mel_low + (b + 2.0) * delta
    if vtln_warp_factor != 1.0:
        warp = (vtln_low, vtln_high, low_freq, high_freq, vtln_warp_factor)
        left = vtln_warp_mel_freq(*warp, left)
        center = vtln_warp_mel_freq(*warp, center)
        right = vtln_warp_mel_freq(*warp, right)
    center_freqs = inverse_mel_scale(center).squeeze(1)
    mel = mel_scale(fft_bin_width * fiamma.arange(num_fft_bins, dtype=fiamma.float64))
    mel = mel.unsqueeze(0)
    up = (mel - left) / (center - left)
    down = (right - mel) / (right - center)
    if vtln_warp_factor == 1.0:
        bins = fiamma.clamp(fiamma.minimum(up, down), min=0.0)
    else:
        zero = fiamma.zeros_like(up)
        rising = (mel > left) & (mel <= center)
        falling = (mel > center) & (mel < right)
        bins = fiamma.where(rising, up, fiamma.where(falling, down, zero))
    return bins, center_freqs


# ---- framing ---------------------------------------------------------------------------------

def _next_power_of_2(x):
    return 1 if x == 0 else 2 ** (x - 1).bit_length()


def _properties(waveform, channel, sample_frequency, frame_shift, frame_length,
                round_to_power_of_two, preemphasis_coefficient, op):
    if not isinstance(waveform, fiamma.Tensor):
        raise TypeError(f"{op}: waveform must be a tensor, got {type(waveform).__name__}")
    if waveform.dim() != 2:
        raise ValueError(f"{op}: waveform must have shape (channels, time), got "
                         f"{tuple(waveform.shape)}")
    if not waveform.is_floating_point():
        raise TypeError(f"{op}: waveform must be floating point, got {waveform.dtype}")
    channels = waveform.shape[0]
    channel = max(channel, 0)
    if channel >= channels:
        raise ValueError(f"{op}: invalid channel {channel} for a waveform with {channels} "
                         "channel(s)")
    shift = int(sample_frequency * frame_shift * MILLISECONDS_TO_SECONDS)
    size = int(sample_frequency * frame_length * MILLISECONDS_TO_SECONDS)
    padded = _next_power_of_2(size) if round_to_power_of_two else size
    if not 2 <= size <= waveform.shape[1]:
        raise ValueError(f"{op}: choose a window size {size} that is [2, "
                         f"{waveform.shape[1]}] (the number of samples)")
    if shift <= 0:
        raise ValueError(f"{op}: window shift must be positive, got {shift} samples")
    if padded % 2:
        raise ValueError(f"{op}: the padded window size must be divisible by 2, got {padded} "
                         "(use round_to_power_of_two or an even frame_length)")
    if not 0.0 <= preemphasis_coefficient <= 1.0:
        raise ValueError(f"{op}: preemphasis_coefficient must be in [0, 1], got "
                         f"{preemphasis_coefficient}")
    if sample_frequency <= 0:
        raise ValueError(f"{op}: sample_frequency must be positive, got {sample_frequency}")
    return waveform[channel], shift, size, padded


def _frames(x, size, shift, snip_edges):
    n = x.shape[0]
    if snip_edges:
        if n < size:
            return x.new_zeros((0, size))
        return x.unfold(0, size, shift)
    count = (n + shift // 2) // shift
    pad = size // 2 - shift // 2
    rev = fiamma.flip(x, [0])
    if pad > 0:
        x = fiamma.cat([rev[n - pad:], x, rev])
    else:
        x = fiamma.cat([x[-pad:], rev])
    return x.unfold(0, size, shift)[:count]


def _window(window_type, size, blackman_coeff, dtype, device):
    if window_type == HANNING:
        return fiamma.hann_window(size, periodic=False, dtype=dtype, device=device)
    if window_type == HAMMING:
        return fiamma.hamming_window(size, periodic=False, alpha=0.54, beta=0.46, dtype=dtype,
                                     device=device)
    if window_type == POVEY:
        return fiamma.hann_window(size, periodic=False, dtype=dtype, device=device) ** 0.85
    if window_type == RECTANGULAR:
        return fiamma.ones(size, dtype=dtype, device=device)
    if window_type == BLACKMAN:
        a = 2.0 * math.pi / (size - 1)
        n = fiamma.arange(size, dtype=dtype, device=device)
        return (blackman_coeff - 0.5 * fiamma.cos(a * n)
                + (0.5 - blackman_coeff) * fiamma.cos(2.0 * a * n))
    raise ValueError(f"kaldi: invalid window type {window_type!r}; expected one of {WINDOWS}")


def _log_energy(frames, energy_floor):
    eps = fiamma.tensor(EPSILON, dtype=frames.dtype, device=frames.device)
    energy = fiamma.log(fiamma.maximum(frames.pow(2).sum(1), eps))
    if energy_floor == 0.0:
        return energy
    floor = fiamma.tensor(math.log(energy_floor), dtype=frames.dtype, device=frames.device)
    return fiamma.maximum(energy, floor)


def _windowed_frames(waveform, padded, size, shift, window_type, blackman_coeff, snip_edges,
                     raw_energy, energy_floor, dither, remove_dc_offset,
                     preemphasis_coefficient):
    frames = _frames(waveform, size, shift, snip_edges)
    if dither != 0.0:
        frames = frames + dither * fiamma.randn(frames.shape, dtype=frames.dtype,
                                                device=frames.device)
    if remove_dc_offset:
        frames = frames - frames.mean(1, keepdim=True)
    if raw_energy:
        energy = _log_energy(frames, energy_floor)
    if preemphasis_coefficient != 0.0:
        previous = fiamma.cat([frames[:, :1], frames[:, :-1]], 1)
        frames = frames - preemphasis_coefficient * previous
    frames = frames * _window(window_type, size, blackman_coeff, frames.dtype, frames.device)
    if padded != size:
        frames = fiamma.cat([frames, frames.new_zeros((frames.shape[0], padded - size))], 1)
    if not raw_energy:
        energy = _log_energy(frames, energy_floor)
    return frames, energy


def _power_spectrum(frames):
    spec = fiamma.fft.rfft(frames)
    if spec.is_complex():
        return spec.real.pow(2) + spec.imag.pow(2)
    return spec.pow(2).sum(-1)  # the (real, imag) pair layout


def _subtract_mean(features, subtract_mean):
    return features - features.mean(0, keepdim=True) if subtract_mean else features


def _min_duration_empty(waveform, min_duration, sample_frequency):
    return waveform.shape[1] < min_duration * sample_frequency


def _check_common(op, energy_floor, dither):
    if energy_floor < 0:
        raise ValueError(f"{op}: energy_floor must be >= 0, got {energy_floor}")
    if dither < 0:
        raise ValueError(f"{op}: dither must be >= 0, got {dither}")


# ---- features --------------------------------------------------------------------------------

def spectrogram(waveform, blackman_coeff=0.42, channel=-1, dither=0.0, energy_floor=1.0,
                frame_length=25.0, frame_shift=10.0, min_duration=0.0,
                preemphasis_coefficient=0.97, raw_energy=True, remove_dc_offset=True,
                round_to_power_of_two=True, sample_frequency=16000.0, snip_edges=True,
                subtract_mean=False, window_type=POVEY):
    """Kaldi's ``compute-spectrogram-feats``: the log power spectrum of each frame,
    ``(frames, padded // 2 + 1)``, whose first bin holds the frame's log energy.

    >>> import fiamma
    >>> wav = fiamma.randn(1, 8000)
    >>> spectrogram(wav).shape
    fiamma.Size([48, 257])
    """
    _check_common("spectrogram", energy_floor, dither)
    x, shift, size, padded = _properties(waveform, channel, sample_frequency, frame_shift,
                                         frame_length, round_to_power_of_two,
                                         preemphasis_coefficient, "spectrogram")
    if _min_duration_empty(waveform, min_duration, sample_frequency):
        return waveform.new_zeros((0, padded // 2 + 1))
    frames, energy = _windowed_frames(x, padded, size, shift, window_type, blackman_coeff,
                                      snip_edges, raw_energy, energy_floor, dither,
                                      remove_dc_offset, preemphasis_coefficient)
    power = _power_spectrum(frames)
    eps = fiamma.tensor(EPSILON, dtype=power.dtype, device=power.device)
    logp = fiamma.log(fiamma.maximum(power, eps))
    logp = fiamma.cat([energy.unsqueeze(1), logp[:, 1:]], 1)
    return _subtract_mean(logp, subtract_mean)


def fbank(waveform, blackman_coeff=0.42, channel=-1, dither=0.0, energy_floor=1.0,
          frame_length=25.0, frame_shift=10.0, high_freq=0.0, htk_compat=False, low_freq=20.0,
          min_duration=0.0, num_mel_bins=23, preemphasis_coefficient=0.97, raw_energy=True,
          remove_dc_offset=True, round_to_power_of_two=True, sample_frequency=16000.0,
          snip_edges=True, subtract_mean=False, use_energy=False, use_log_fbank=True,
          use_power=True, vtln_high=-500.0, vtln_low=100.0, vtln_warp=1.0,
          window_type=POVEY, *, _op=None):
    """Kaldi's ``compute-fbank-feats``: mel filterbank energies of each frame,
    ``(frames, num_mel_bins)`` (one more column, the log energy, with ``use_energy``: first,
    or last with ``htk_compat``).

    >>> import fiamma
    >>> fbank(fiamma.randn(1, 16000), num_mel_bins=80).shape
    fiamma.Size([98, 80])
    """
    op = "fbank" if _op is None else _op
    _check_common(op, energy_floor, dither)
    x, shift, size, padded = _properties(waveform, channel, sample_frequency, frame_shift,
                                         frame_length, round_to_power_of_two,
                                         preemphasis_coefficient, op)
    width = num_mel_bins + (1 if use_energy else 0)
    if _min_duration_empty(waveform, min_duration, sample_frequency):
        return waveform.new_zeros((0, width))
    frames, energy = _windowed_frames(x, padded, size, shift, window_type, blackman_coeff,
                                      snip_edges, raw_energy, energy_floor, dither,
                                      remove_dc_offset, preemphasis_coefficient)
    spectrum = _power_spectrum(frames)
    if not use_power:
        spectrum = spectrum.pow(0.5)
    banks, _ = _mel_banks(num_mel_bins, padded, sample_frequency, low_freq, high_freq,
                          vtln_low, vtln_high, vtln_warp)
    banks = banks.to(dtype=spectrum.dtype, device=spectrum.device)
    # the banks leave out the Nyquist bin
    mel = spectrum[:, :padded // 2] @ banks.t()
    if use_log_fbank:
        eps = fiamma.tensor(EPSILON, dtype=mel.dtype, device=mel.device)
        mel = fiamma.log(fiamma.maximum(mel, eps))
    if use_energy:
        e = energy.unsqueeze(1)
        mel = fiamma.cat([mel, e] if htk_compat else [e, mel], 1)
    return _subtract_mean(mel, subtract_mean)


def _dct_matrix(num_ceps, num_mel_bins, dtype, device):
    # DCT-II, orthonormal, with Kaldi's first row (sqrt(1 / n) for every bin)
    n = fiamma.arange(num_mel_bins, dtype=fiamma.float64)
    k = fiamma.arange(num_ceps, dtype=fiamma.float64).unsqueeze(1)
    dct = fiamma.cos(math.pi / num_mel_bins * (n + 0.5) * k) * math.sqrt(2.0 / num_mel_bins)
    dct[0] = math.sqrt(1.0 / num_mel_bins)
    return dct.t().to(dtype=dtype, device=device)


def mfcc(waveform, blackman_coeff=0.42, cepstral_lifter=22.0, channel=-1, dither=0.0,
         energy_floor=1.0, frame_length=25.0, frame_shift=10.0, high_freq=0.0,
         htk_compat=False, low_freq=20.0, num_ceps=13, min_duration=0.0, num_mel_bins=23,
         preemphasis_coefficient=0.97, raw_energy=True, remove_dc_offset=True,
         round_to_power_of_two=True, sample_frequency=16000.0, snip_edges=True,
         subtract_mean=False, use_energy=False, vtln_high=-500.0, vtln_low=100.0,
         vtln_warp=1.0, window_type=POVEY):
    """Kaldi's ``compute-mfcc-feats``: ``(frames, num_ceps)`` cepstra of the log mel
    energies, liftered; with ``use_energy`` the first coefficient is the log energy (moved to
    the end with ``htk_compat``, where C0 otherwise carries HTK's sqrt(2) scale).

    >>> import fiamma
    >>> mfcc(fiamma.randn(1, 16000), num_ceps=20, num_mel_bins=40).shape
    fiamma.Size([98, 20])
    """
    if not 0 < num_ceps <= num_mel_bins:
        raise ValueError(f"mfcc: num_ceps must be in [1, num_mel_bins={num_mel_bins}], got "
                         f"{num_ceps}")
    feats = fbank(waveform, blackman_coeff=blackman_coeff, channel=channel, dither=dither,
                  energy_floor=energy_floor, frame_length=frame_length,
                  frame_shift=frame_shift, high_freq=high_freq, htk_compat=False,
                  low_freq=low_freq, min_duration=min_duration, num_mel_bins=num_mel_bins,
                  preemphasis_coefficient=preemphasis_coefficient, raw_energy=raw_energy,
                  remove_dc_offset=remove_dc_offset,
                  round_to_power_of_two=round_to_power_of_two,
                  sample_frequency=sample_frequency, snip_edges=snip_edges,
                  subtract_mean=False, use_energy=use_energy, use_log_fbank=True,
                  use_power=True, vtln_high=vtln_high, vtln_low=vtln_low, vtln_warp=vtln_warp,
                  window_type=window_type, _op="mfcc")
    if feats.shape[0] == 0:
        return feats.new_zeros((0, num_ceps))
    if use_energy:
        energy, feats = feats[:, 0], feats[:, 1:]
    out = feats @ _dct_matrix(num_ceps, num_mel_bins, feats.dtype, feats.device)
    if cepstral_lifter != 0.0:
        i = fiamma.arange(num_ceps, dtype=fiamma.float64)
        lifter = 1.0 + 0.5 * cepstral_lifter * fiamma.sin(math.pi * i / cepstral_lifter)
        out = out * lifter.to(dtype=out.dtype, device=out.device)
    if use_energy:
        out = fiamma.cat([energy.unsqueeze(1), out[:, 1:]], 1)
    if htk_compat:
        c0 = out[:, :1]
        if not use_energy:
            c0 = c0 * math.sqrt(2.0)
        out = fiamma.cat([out[:, 1:], c0], 1)
    return _subtract_mean(out, subtract_mean)
