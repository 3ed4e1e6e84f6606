"""Spectral functions of fiamma.audio.functional (torchaudio's names, arguments and semantics).

A complex spectrogram is a complex tensor ``(..., freq, time)`` (complex64 for float32
signals), as in torchaudio; the functions that take one also accept the older layout, a real
``(..., freq, time, 2)`` tensor of (real, imag) pairs (``fiamma.view_as_real``'s), and then
return that layout. Everything that torchaudio computes with differentiable torch ops is
written with fiamma ops, so gradients flow through it.
"""

import math
import warnings

import numpy as np

import fiamma

__all__ = ["spectrogram", "inverse_spectrogram", "griffinlim", "melscale_fbanks",
           "linear_fbanks", "create_dct", "compute_deltas", "detect_pitch_frequency",
           "phase_vocoder", "mask_along_axis", "mask_along_axis_iid", "spectral_centroid",
           "pitch_shift"]


# ---- complex (..., 2) helpers ----------------------------------------------------------------

def _mark(t):
    from fiamma.fft import as_complex_layout

    return as_complex_layout(t)


def _cabs2(z):
    re, im = z[..., 0], z[..., 1]
    return re * re + im * im


def _cabs(z):
    return _cabs2(z).sqrt()


def _angle(z):
    return fiamma.atan2(z[..., 1], z[..., 0])


def _polar(mag, phase):
    return _mark(fiamma.stack([mag * phase.cos(), mag * phase.sin()], -1))


def _check_complex(x, op):
    """Validate a complex spectrogram; True for a complex tensor, False for (real, imag)
    pairs."""
    if isinstance(x, fiamma.Tensor) and x.is_complex():
        if x.dim() < 2:
            raise ValueError(f"{op}: expected a complex spectrogram (..., freq, time), got "
                             f"shape {list(x.shape)}")
        return True
    if not isinstance(x, fiamma.Tensor) or x.dim() < 3 or x.shape[-1] != 2:
        raise ValueError(f"{op}: expected a complex spectrogram (..., freq, time) or "
                         "(..., freq, time, 2) (real, imag) pairs, got "
                         f"{getattr(x, 'dtype', type(x).__name__)} of shape "
                         f"{list(getattr(x, 'shape', ()))}")
    return False


def _get_spec_norms(normalized):
    if isinstance(normalized, str):
        if normalized not in ("frame_length", "window"):
            raise ValueError(f"normalized must be 'frame_length', 'window' or a bool, got "
                             f"{normalized!r}")
        return normalized == "frame_length", normalized == "window"
    if isinstance(normalized, bool):
        return False, normalized
    raise TypeError(f"normalized must be a str or a bool, got {type(normalized).__name__}")


# ---- spectrogram -----------------------------------------------------------------------------

def spectrogram(waveform, pad, window, n_fft, hop_length, win_length, power, normalized,
                center=True, pad_mode="reflect", onesided=True, return_complex=None):
    """The (power) spectrogram of ``waveform`` (..., time) -> (..., freq, frames).

    ``power=None`` returns the complex spectrogram (..., freq, frames), a complex tensor, as
    torchaudio (``return_complex`` is accepted and ignored, as torchaudio deprecates it).
    ``normalized``: True or "window" divides by the window's L2 norm, "frame_length" by
    sqrt(n_fft).

    >>> import fiamma
    >>> from fiamma.audio import functional as F
    >>> F.spectrogram(fiamma.randn(2, 800), 0, fiamma.hann_window(400), 400, 200, 400, 2.0,
    ...               False).shape
    fiamma.Size([2, 201, 5])
    """
    if pad > 0:
        import fiamma.nn.functional as NF

        waveform = NF.pad(waveform, (pad, pad), "constant")
    frame_norm, window_norm = _get_spec_norms(normalized)
    shape = tuple(waveform.shape)
    x = waveform.reshape(-1, shape[-1])
    if power is not None:
        # |X|^2 straight from core's fused kernel (no complex intermediate); same gradients
        pw = fiamma.stft_power(x, n_fft=n_fft, hop_length=hop_length, win_length=win_length,
                               window=window, center=center, pad_mode=pad_mode,
                               normalized=frame_norm, onesided=onesided)
        pw = pw.reshape(shape[:-1] + tuple(pw.shape[-2:]))
        if window_norm:
            pw = pw / window.pow(2.0).sum()
        if power == 2.0:
            return pw
        if power == 1.0:
            return pw.sqrt()
        return pw.pow(power / 2.0)
    spec = fiamma.stft(x, n_fft=n_fft, hop_length=hop_length, win_length=win_length,
                       window=window, center=center, pad_mode=pad_mode,
                       normalized=frame_norm, onesided=onesided)
    spec = spec.reshape(shape[:-1] + tuple(spec.shape[-3:]))
    if window_norm:
        spec = spec / window.pow(2.0).sum().sqrt()
    return fiamma.view_as_complex(spec)


def inverse_spectrogram(spectrogram, length, pad, window, n_fft, hop_length, win_length,
                        normalized, center=True, pad_mode="reflect", onesided=True):
    """The waveform (..., time) of a complex spectrogram (..., freq, frames) (istft)."""
    cx = _check_complex(spectrogram, "inverse_spectrogram")
    frame_norm, window_norm = _get_spec_norms(normalized)
    if window_norm:
        spectrogram = spectrogram * window.pow(2.0).sum().sqrt()
    shape = tuple(spectrogram.shape)
    if cx:
        shape = shape + (2,)  # the shape bookkeeping below counts the pair dim
        spec = spectrogram.reshape((-1,) + shape[-3:-1])
    else:
        spec = spectrogram.reshape((-1,) + shape[-3:])
    wav = fiamma.istft(spec, n_fft=n_fft, hop_length=hop_length, win_length=win_length,
                       window=window, center=center, normalized=frame_norm,
                       onesided=onesided,
                       length=length + 2 * pad if length is not None else None)
    if length is not None and pad > 0:
        wav = wav[:, pad:-pad]
    return wav.reshape(shape[:-3] + (wav.shape[-1],))


def griffinlim(specgram, window, n_fft, hop_length, win_length, power, n_iter, momentum,
               length, rand_init):
    """Waveform from a magnitude/power spectrogram (..., freq, frames) by Griffin-Lim with
    the fast (momentum) update."""
    if not 0 <= momentum < 1:
        raise ValueError(f"momentum must be in [0, 1), got {momentum}")
    shape = tuple(specgram.shape)
    spec = specgram.reshape((-1,) + shape[-2:]).pow(1 / power)
    if rand_init:
        angles = fiamma.rand(tuple(spec.shape) + (2,), dtype=spec.dtype)
    else:
        angles = fiamma.zeros(tuple(spec.shape) + (2,), dtype=spec.dtype)
        angles[..., 0] = 1.0
    mag = spec.unsqueeze(-1)
    tprev = None
    for _ in range(n_iter):
        inverse = fiamma.istft(mag * angles, n_fft=n_fft, hop_length=hop_length,
                               win_length=win_length, window=window, length=length)
        rebuilt = fiamma.stft(inverse, n_fft=n_fft, hop_length=hop_length,
                              win_length=win_length, window=window, center=True,
                              pad_mode="reflect", normalized=False, onesided=True)
        angles = rebuilt
        if momentum and tprev is not None:
            angles = angles - tprev * (momentum / (1 + momentum))
        angles = angles / (_cabs(angles) + 1e-16).unsqueeze(-1)
        tprev = rebuilt
    wav = fiamma.istft(mag * angles, n_fft=n_fft, hop_length=hop_length,
                       win_length=win_length, window=window, length=length)
    return wav.reshape(shape[:-2] + (wav.shape[-1],))


# ---- filter banks and DCT --------------------------------------------------------------------

def _hz_to_mel(freq, mel_scale="htk"):
    if mel_scale not in ("slaney", "htk"):
        raise ValueError('mel_scale should be one of "htk" or "slaney".')
    if mel_scale == "htk":
        return 2595.0 * math.log10(1.0 + freq / 700.0)
    f_sp = 200.0 / 3
    mels = freq / f_sp
    min_log_hz, min_log_mel, logstep = 1000.0, 1000.0 / f_sp, math.log(6.4) / 27.0
    if freq >= min_log_hz:
        mels = min_log_mel + math.log(freq / min_log_hz) / logstep
    return mels


def _mel_to_hz(mels, mel_scale="htk"):
    if mel_scale not in ("slaney", "htk"):
        raise ValueError('mel_scale should be one of "htk" or "slaney".')
    if mel_scale == "htk":
        return 700.0 * (10.0 ** (mels / 2595.0) - 1.0)
    f_sp = 200.0 / 3
    freqs = f_sp * mels
    min_log_hz, min_log_mel, logstep = 1000.0, 1000.0 / f_sp, math.log(6.4) / 27.0
    log_t = mels >= min_log_mel
    freqs[log_t] = min_log_hz * np.exp(logstep * (mels[log_t] - min_log_mel))
    return freqs


def _triangular(all_freqs, f_pts):
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts[None, :] - all_freqs[:, None]
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    return np.maximum(0.0, np.minimum(down, up))


def _to_tensor(a, dtype=None):
    return fiamma.from_numpy(np.ascontiguousarray(a, dtype=np.float32 if dtype is None
                                                  else dtype))


def melscale_fbanks(n_freqs, f_min, f_max, n_mels, sample_rate, norm=None, mel_scale="htk"):
    """Triangular mel filter bank of shape (n_freqs, n_mels).

    ``mel_scale``: "htk" (2595 log10(1 + f / 700)) or "slaney" (linear below 1 kHz, log above);
    ``norm="slaney"`` scales each triangle to unit area.

    >>> from fiamma.audio import functional as F
    >>> F.melscale_fbanks(201, 0.0, 8000.0, 80, 16000).shape
    fiamma.Size([201, 80])
    """
    if norm is not None and norm != "slaney":
        raise ValueError('norm must be one of None or "slaney"')
    all_freqs = np.linspace(0, sample_rate // 2, n_freqs)
    m_min, m_max = _hz_to_mel(f_min, mel_scale), _hz_to_mel(f_max, mel_scale)
    f_pts = _mel_to_hz(np.linspace(m_min, m_max, n_mels + 2), mel_scale)
    fb = _triangular(all_freqs, f_pts)
    if norm == "slaney":
        fb = fb * (2.0 / (f_pts[2:n_mels + 2] - f_pts[:n_mels]))[None, :]
    if (fb.max(axis=0) == 0.0).any():
        warnings.warn("At least one mel filterbank has all zero values. The value for `n_mels` "
                      f"({n_mels}) may be set too high. Or, the value for `n_freqs` ({n_freqs}) "
                      "may be set too low.")
    return _to_tensor(fb)


def linear_fbanks(n_freqs, f_min, f_max, n_filter, sample_rate):
    """Triangular filter bank with linearly spaced centres, shape (n_freqs, n_filter)."""
    all_freqs = np.linspace(0, sample_rate // 2, n_freqs)
    f_pts = np.linspace(f_min, f_max, n_filter + 2)
    return _to_tensor(_triangular(all_freqs, f_pts))


def create_dct(n_mfcc, n_mels, norm):
    """DCT-II matrix of shape (n_mels, n_mfcc) (``norm="ortho"``: orthonormal columns,
    None: scaled by 2). ``x @ create_dct(...)`` is the DCT of the rows of ``x``."""
    if norm is not None and norm != "ortho":
        raise ValueError('norm must be either "ortho" or None')
    n = np.arange(n_mels, dtype=np.float64)
    k = np.arange(n_mfcc, dtype=np.float64)[:, None]
    dct = np.cos(math.pi / n_mels * (n + 0.5) * k)
    if norm is None:
        dct *= 2.0
    else:
        dct[0] *= 1.0 / math.sqrt(2.0)
        dct *= math.sqrt(2.0 / n_mels)
    return _to_tensor(dct.T)


# ---- deltas, pitch, centroid -----------------------------------------------------------------

def compute_deltas(specgram, win_length=5, mode="replicate"):
    """Delta coefficients along the last dimension:
    d_t = sum_{k=1}^{N} k (c_{t+k} - c_{t-k}) / (2 sum_{k=1}^{N} k^2), N = (win_length - 1) // 2,
    with the ends padded by ``mode``."""
    if win_length < 3:
        raise ValueError(f"Window length should be greater than or equal to 3, got {win_length}")
    import fiamma.nn.functional as NF

    shape = tuple(specgram.shape)
    x = specgram.reshape(1, -1, shape[-1])
    n = (win_length - 1) // 2
    denom = n * (n + 1) * (2 * n + 1) / 3
    xp = NF.pad(x, (n, n), mode=mode)
    T = shape[-1]
    out = None
    for k in range(1, n + 1):
        term = (xp[..., n + k:n + k + T] - xp[..., n - k:n - k + T]) * float(k)
        out = term if out is None else out + term
    return (out / denom).reshape(shape)


def detect_pitch_frequency(waveform, sample_rate, frame_time=10 ** (-2), win_length=30,
                           freq_low=85, freq_high=3400):
    """Pitch (Hz) per frame of ``waveform`` (..., time) by normalized cross-correlation and
    median smoothing (torchaudio's algorithm); returns (..., frames) float32."""
    eps = 1e-9
    shape = tuple(waveform.shape)
    w = waveform.detach().to(fiamma.float64).reshape(-1, shape[-1]).numpy()
    lags = int(math.ceil(sample_rate / freq_low))
    fsz = int(math.ceil(sample_rate * frame_time))
    L = w.shape[-1]
    nfr = int(math.ceil(L / fsz))
    w = np.pad(w, ((0, 0), (0, lags + nfr * fsz - L)))
    s1 = w[:, :nfr * fsz].reshape(w.shape[0], nfr, fsz)
    n1 = (eps + np.sqrt((s1 * s1).sum(-1))) ** 2
    nccf = np.empty((w.shape[0], nfr, lags))
    for lag in range(1, lags + 1):
        s2 = w[:, lag:lag + nfr * fsz].reshape(w.shape[0], nfr, fsz)
        nccf[..., lag - 1] = (s1 * s2).sum(-1) / n1 / (eps + np.sqrt((s2 * s2).sum(-1))) ** 2
    nccf = nccf.astype(np.float32)
    lag_min = int(math.ceil(sample_rate / freq_high))
    best_v = nccf[..., lag_min:].max(-1)
    best_i = nccf[..., lag_min:].argmax(-1)
    half = nccf.shape[-1] // 2
    half_v = nccf[..., lag_min:half].max(-1)
    half_i = nccf[..., lag_min:half].argmax(-1)
    mask = half_v > 0.99 * best_v
    idx = np.where(mask, half_i, best_i) + lag_min + 1
    p = (win_length - 1) // 2
    idx = np.concatenate([np.repeat(idx[:, :1], p, axis=1), idx], axis=1)
    roll = np.lib.stride_tricks.sliding_window_view(idx, win_length, axis=-1)
    med = np.sort(roll, axis=-1)[..., (win_length - 1) // 2]
    freq = (sample_rate / (eps + med.astype(np.float32))).astype(np.float32)
    return _to_tensor(freq.reshape(shape[:-1] + (freq.shape[-1],)))


def spectral_centroid(waveform, sample_rate, pad, window, n_fft, hop_length, win_length):
    """Spectral centroid (Hz) per frame of ``waveform`` (..., time) -> (..., frames)."""
    spec = spectrogram(waveform, pad=pad, window=window, n_fft=n_fft, hop_length=hop_length,
                       win_length=win_length, power=1.0, normalized=False)
    freqs = fiamma.linspace(0, sample_rate // 2, steps=1 + n_fft // 2,
                            dtype=spec.dtype).reshape(-1, 1)
    return (freqs * spec).sum(dim=-2) / spec.sum(dim=-2)


# ---- phase vocoder, pitch shift ---------------------------------------------------------------

def phase_vocoder(complex_specgrams, rate, phase_advance):
    """Time-stretch a complex spectrogram (..., freq, time) by ``rate`` (> 1 faster)
    without changing pitch. ``phase_advance``: (freq, 1), the expected phase advance per hop.
    Returns (..., freq, ceil(time / rate)) ((real, imag) pairs in: pairs out)."""
    if rate == 1.0:
        return complex_specgrams
    if _check_complex(complex_specgrams, "phase_vocoder"):
        out = phase_vocoder(fiamma.view_as_real(complex_specgrams), rate, phase_advance)
        return fiamma.complex(out[..., 0], out[..., 1])
    shape = tuple(complex_specgrams.shape)
    z = complex_specgrams.reshape((-1,) + shape[-3:])
    dt = z.dtype
    T = shape[-2]
    steps = np.arange(0, T, rate, dtype=np.float64 if dt == fiamma.float64 else np.float32)
    alphas = fiamma.from_numpy(np.ascontiguousarray(steps % 1.0))
    phase_0 = _angle(z[..., :1, :])
    import fiamma.nn.functional as NF

    zp = NF.pad(z, (0, 0, 0, 2))
    i0 = fiamma.from_numpy(steps.astype(np.int64))
    z0 = zp.index_select(-2, i0)
    z1 = zp.index_select(-2, i0 + 1)
    pa = phase_advance.to(dt)
    phase = _angle(z1) - _angle(z0) - pa
    phase = phase - 2 * math.pi * fiamma.round(phase / (2 * math.pi))
    phase = phase + pa
    phase = fiamma.cat([phase_0, phase[..., :-1]], dim=-1)
    acc = fiamma.cumsum(phase, -1)
    mag = alphas * _cabs(z1) + (1 - alphas) * _cabs(z0)
    out = _polar(mag, acc)
    return _mark(out.reshape(shape[:-3] + tuple(out.shape[1:])))


def pitch_shift(waveform, sample_rate, n_steps, bins_per_octave=12, n_fft=512,
                hop_length=None, win_length=None, window=None):
    """Shift the pitch of ``waveform`` (..., time) by ``n_steps`` steps of 1/bins_per_octave
    octave: phase-vocoder stretch, then resampling back to the original duration."""
    from fiamma.audio.functional import resample

    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    if window is None:
        window = fiamma.hann_window(win_length, dtype=waveform.dtype)
    shape = tuple(waveform.shape)
    x = waveform.reshape(-1, shape[-1])
    rate = 2.0 ** (-float(n_steps) / bins_per_octave)
    spec = fiamma.stft(x, n_fft=n_fft, hop_length=hop_length, win_length=win_length,
                       window=window, center=True, pad_mode="reflect", normalized=False,
                       onesided=True)
    adv = fiamma.linspace(0, math.pi * hop_length, spec.shape[-3],
                          dtype=spec.dtype).reshape(-1, 1)
    stretched = phase_vocoder(spec, rate, adv)
    y = fiamma.istft(stretched, n_fft=n_fft, hop_length=hop_length, win_length=win_length,
                     window=window, length=int(round(shape[-1] / rate)))
    y = resample(y, int(sample_rate / rate), sample_rate)
    if y.shape[-1] > shape[-1]:
        y = y[..., :shape[-1]]
    elif y.shape[-1] < shape[-1]:
        import fiamma.nn.functional as NF

        y = NF.pad(y, (0, shape[-1] - y.shape[-1]))
    return y.reshape(shape[:-1] + (y.shape[-1],))


# ---- masking ---------------------------------------------------------------------------------

def _get_mask_param(mask_param, p, axis_length):
    if p == 1.0:
        return mask_param
    return min(mask_param, int(axis_length * p))


def mask_along_axis(specgram, mask_param, mask_value, axis, p=1.0):
    """Mask one band [v0, v0 + v) of ``axis`` (one of the last two dims), shared by all
    batch entries: v ~ U(0, mask_param), v0 ~ U(0, size - v) (fiamma's generator).

    A complex spectrogram is masked like any tensor (masked entries become ``mask_value``);
    (real, imag) pairs marked by ``fiamma.fft.as_complex_layout`` are masked as the complex
    tensor they stand for: ``axis`` counts its complex dims and masked entries become
    ``mask_value + 0j``."""
    cx, dim, axis = _mask_args(specgram, axis, p, 2, "two")
    size = specgram.shape[axis]
    mask_param = _get_mask_param(mask_param, p, size)
    if mask_param < 1:
        return specgram
    value = fiamma.rand(1).item() * mask_param
    min_value = fiamma.rand(1).item() * (size - value)
    start = int(min_value)
    end = int(min_value) + int(value)
    idx = fiamma.arange(size)
    mask = (idx >= start) & (idx < end)
    if axis == dim - 2:
        mask = mask.unsqueeze(-1)
    return _fill(specgram, mask, mask_value, cx)


def _mask_args(spec, axis, p, min_dims, words):
    """Validate a masking call: (complex layout or not, dims of the (complex) spectrogram,
    axis made non-negative)."""
    cx = _is_cx(spec)
    dim = spec.dim() - cx
    if dim < min_dims:
        raise ValueError(f"Spectrogram must have at least {words} dimensions ({dim} given).")
    if axis < 0:
        axis += dim
    if axis not in (dim - 2, dim - 1):
        raise ValueError(f"Only Frequency and Time masking are supported (axis {dim - 2} and "
                         f"axis {dim - 1} supported; {axis} given).")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"The value of p must be between 0.0 and 1.0 ({p} given).")
    return cx, dim, axis


def _is_cx(t):
    """A complex spectrogram as (real, imag) pairs (marked by fiamma.fft.as_complex_layout, as
    stft's return_complex=False result is): its frequency and time dims are -3 and -2."""
    from fiamma.fft import is_complex_layout

    return int(is_complex_layout(t))


def _fill(spec, mask, value, cx):
    """spec where mask else value; on the complex layout the value is the complex number
    value + 0j (as masked_fill on a complex tensor), and the result stays marked complex."""
    tensor_value = isinstance(value, fiamma.Tensor) and value.dim() > 0
    if not cx:
        return fiamma.where(mask, value, spec) if tensor_value else spec.masked_fill(mask, value)
    mask = mask.unsqueeze(-1)
    if tensor_value:
        value = fiamma.stack([value, fiamma.zeros_like(value)], -1)
    elif isinstance(value, tuple):  # a complex value as (real, imag)
        value = fiamma.tensor([float(value[0]), float(value[1])], dtype=spec.dtype)
    else:
        value = fiamma.tensor([float(value), 0.0], dtype=spec.dtype)
    return _mark(fiamma.where(mask, value.to(spec.dtype), spec))


def mask_along_axis_iid(specgrams, mask_param, mask_value, axis, p=1.0):
    """Like :func:`mask_along_axis` with an independent band per entry of the leading
    dims (``specgrams`` (..., freq, time), at least 3-D)."""
    cx, dim, axis = _mask_args(specgrams, axis, p, 3, "three")
    size = specgrams.shape[axis]
    mask_param = _get_mask_param(mask_param, p, size)
    if mask_param < 1:
        return specgrams
    lead = tuple(specgrams.shape[:dim - 2])
    value = fiamma.rand(lead, dtype=fiamma.float64) * mask_param
    min_value = fiamma.rand(lead, dtype=fiamma.float64) * (size - value)
    start = min_value.long()[..., None, None]
    end = (min_value.long() + value.long())[..., None, None]
    idx = fiamma.arange(size)
    mask = (idx >= start) & (idx < end)
    if axis == dim - 2:
        mask = mask.transpose(-1, -2)
    return _fill(specgrams, mask, mask_value, cx)


# ---- dB (private copy; the public one is fiamma.audio.functional.amplitude_to_DB) ------------

def _amplitude_to_db(x, multiplier, amin, db_multiplier, top_db=None):
    x_db = multiplier * fiamma.log10(fiamma.clamp(x, min=amin))
    x_db = x_db - multiplier * db_multiplier
    if top_db is not None:
        shape = tuple(x_db.shape)
        packed = shape[-3] if x_db.dim() > 2 else 1
        x4 = x_db.reshape(-1, packed, shape[-2], shape[-1])
        floor = (x4.amax(dim=(-3, -2, -1)) - top_db).reshape(-1, 1, 1, 1)
        x_db = fiamma.maximum(x4, floor).reshape(shape)
    return x_db
