"""Filters and resampling on fiamma tensors shaped (..., time) (torchaudio.functional's API)."""

import math

import numpy as np

import fiamma

__all__ = ["lfilter", "filtfilt", "biquad", "lowpass_biquad", "highpass_biquad",
           "bandpass_biquad", "bandreject_biquad", "allpass_biquad", "resample",
           "mu_law_encoding", "mu_law_decoding", "preemphasis", "deemphasis", "gain",
           "DB_to_amplitude", "amplitude_to_DB"]


def _check_float(op, x):
    if not isinstance(x, fiamma.Tensor):
        raise TypeError(f"{op}: expected a fiamma.Tensor waveform, got {type(x).__name__}")
    if x.dtype not in (fiamma.float32, fiamma.float64):
        raise TypeError(f"{op}: expected a float32 or float64 waveform, got {x.dtype}")
    if x.dim() < 1:
        raise ValueError(f"{op}: expected a waveform of shape (..., time), got a 0-d tensor")


def _coeffs(c, dtype):
    if isinstance(c, fiamma.Tensor):
        return c.to(dtype)
    return fiamma.tensor(np.asarray(c, dtype=np.float64)).to(dtype)


def lfilter(waveform, a_coeffs, b_coeffs, clamp=True, batching=True):
    """Filter ``waveform`` (..., time) with the difference equation
    ``a[0] y[n] = sum_k b[k] x[n-k] - sum_{k>=1} a[k] y[n-k]`` (zero initial state).

    ``a_coeffs``/``b_coeffs`` are 1-D (order+1,) or 2-D (num_filters, order+1). With 2-D
    coefficients and ``batching=True`` filter i is applied to ``waveform[..., i, :]``; with
    ``batching=False`` every filter is applied to every channel, giving (..., num_filters, time).
    ``clamp`` clips the output to [-1, 1]. Differentiable in the waveform and both coefficient
    tensors.

    >>> x = fiamma.tensor([1.0, 0.0, 0.0, 0.0])
    >>> lfilter(x, fiamma.tensor([1.0, -0.5]), fiamma.tensor([1.0, 0.0])).tolist()
    [1.0, 0.5, 0.25, 0.125]
    """
    from fiamma.audio.functional._lfilter import lfilter_core
    op = "fiamma.audio.functional.lfilter"
    _check_float(op, waveform)
    a = _coeffs(a_coeffs, waveform.dtype)
    b = _coeffs(b_coeffs, waveform.dtype)
    if tuple(a.shape) != tuple(b.shape) or a.dim() not in (1, 2) or a.shape[-1] < 1:
        raise ValueError(f"{op}: a_coeffs and b_coeffs must have the same 1-D or 2-D shape, got "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    shape = tuple(waveform.shape)
    T = shape[-1]
    if a.dim() == 2:
        F = a.shape[0]
        if batching:
            if waveform.dim() < 2 or shape[-2] != F:
                raise ValueError(f"{op}: with batching=True and {F} filters the waveform must be "
                                 f"(..., {F}, time), got {shape}")
            x = waveform.reshape(math.prod(shape[:-2]), F, T)
            out_shape = shape
        else:
            x = waveform.reshape(math.prod(shape[:-1]), 1, T).expand(-1, F, T)
            out_shape = shape[:-1] + (F, T)
    else:
        a, b = a.reshape(1, -1), b.reshape(1, -1)
        x = waveform.reshape(math.prod(shape[:-1]), 1, T)
        out_shape = shape
    a0 = a[:, :1]
    y = lfilter_core(x, a / a0, b / a0)
    if clamp:
        y = y.clamp(-1.0, 1.0)
    return y.reshape(out_shape)


def filtfilt(waveform, a_coeffs, b_coeffs, clamp=True):
    """Zero-phase filtering: ``lfilter`` forwards, then backwards in time (torchaudio's filtfilt,
    without the edge padding of SciPy's)."""
    fwd = lfilter(waveform, a_coeffs, b_coeffs, clamp=False, batching=True)
    return lfilter(fwd.flip(-1), a_coeffs, b_coeffs, clamp=clamp, batching=True).flip(-1)


def _scalar(v, dtype):
    return v.to(dtype) if isinstance(v, fiamma.Tensor) else fiamma.tensor(float(v), dtype=dtype)


def biquad(waveform, b0, b1, b2, a0, a1, a2):
    """Second-order IIR filter with the given coefficients (floats or 0-d tensors); output
    clamped to [-1, 1] like torchaudio's."""
    dt = waveform.dtype
    a = fiamma.stack([_scalar(a0, dt), _scalar(a1, dt), _scalar(a2, dt)])
    b = fiamma.stack([_scalar(b0, dt), _scalar(b1, dt), _scalar(b2, dt)])
    return lfilter(waveform, a, b)


def _w0_alpha(waveform, sample_rate, freq, Q):
    dt = waveform.dtype
    w0 = 2 * math.pi * _scalar(freq, dt) / sample_rate
    return w0, fiamma.sin(w0) / 2 / _scalar(Q, dt)


def lowpass_biquad(waveform, sample_rate, cutoff_freq, Q=0.707):
    """Biquad low-pass filter (RBJ cookbook), cutoff in Hz."""
    w0, alpha = _w0_alpha(waveform, sample_rate, cutoff_freq, Q)
    c = fiamma.cos(w0)
    b0 = (1 - c) / 2
    return biquad(waveform, b0, 1 - c, b0, 1 + alpha, -2 * c, 1 - alpha)


def highpass_biquad(waveform, sample_rate, cutoff_freq, Q=0.707):
    """Biquad high-pass filter (RBJ cookbook), cutoff in Hz."""
    w0, alpha = _w0_alpha(waveform, sample_rate, cutoff_freq, Q)
    c = fiamma.cos(w0)
    b0 = (1 + c) / 2
    return biquad(waveform, b0, -1 - c, b0, 1 + alpha, -2 * c, 1 - alpha)


def bandpass_biquad(waveform, sample_rate, central_freq, Q=0.707, const_skirt_gain=False):
    """Biquad band-pass filter; ``const_skirt_gain`` gives peak gain Q instead of 0 dB."""
    w0, alpha = _w0_alpha(waveform, sample_rate, central_freq, Q)
    c = fiamma.cos(w0)
    temp = fiamma.sin(w0) / 2 if const_skirt_gain else alpha
    return biquad(waveform, temp, 0.0, -temp, 1 + alpha, -2 * c, 1 - alpha)


def bandreject_biquad(waveform, sample_rate, central_freq, Q=0.707):
    """Biquad band-reject (notch) filter."""
    w0, alpha = _w0_alpha(waveform, sample_rate, central_freq, Q)
    c = fiamma.cos(w0)
    return biquad(waveform, 1.0, -2 * c, 1.0, 1 + alpha, -2 * c, 1 - alpha)


def allpass_biquad(waveform, sample_rate, central_freq, Q=0.707):
    """Biquad all-pass filter (unit gain, phase shift around ``central_freq``)."""
    w0, alpha = _w0_alpha(waveform, sample_rate, central_freq, Q)
    c = fiamma.cos(w0)
    return biquad(waveform, 1 - alpha, -2 * c, 1 + alpha, 1 + alpha, -2 * c, 1 - alpha)


# ---------------------------------------------------------------------------------- resampling

def _sinc_resample_kernel(orig_freq, new_freq, gcd, lowpass_filter_width=6, rolloff=0.99,
                          resampling_method="sinc_interp_hann", beta=None, dtype=None):
    """Windowed-sinc polyphase kernel (new, 2 * width + orig) as float64 NumPy, and the width."""
    if not (int(orig_freq) == orig_freq and int(new_freq) == new_freq):
        raise ValueError("fiamma.audio.functional.resample: orig_freq and new_freq must be "
                         f"integers, got {orig_freq} and {new_freq}")
    if resampling_method not in ("sinc_interp_hann", "sinc_interp_kaiser"):
        raise ValueError("fiamma.audio.functional.resample: resampling_method must be "
                         f"'sinc_interp_hann' or 'sinc_interp_kaiser', got {resampling_method!r}")
    if lowpass_filter_width <= 0:
        raise ValueError("fiamma.audio.functional.resample: lowpass_filter_width must be > 0, "
                         f"got {lowpass_filter_width}")
    orig, new = int(orig_freq) // gcd, int(new_freq) // gcd
    base = min(orig, new) * rolloff
    width = math.ceil(lowpass_filter_width * orig / base)
    idx = np.arange(-width, width + orig, dtype=np.float64)[None, :] / orig
    t = (np.arange(0, -new, -1, dtype=np.float64)[:, None] / new + idx) * base
    t = np.clip(t, -lowpass_filter_width, lowpass_filter_width)
    if resampling_method == "sinc_interp_hann":
        window = np.cos(t * math.pi / lowpass_filter_width / 2) ** 2
    else:
        beta = 14.769656459379492 if beta is None else float(beta)
        window = np.i0(beta * np.sqrt(1 - (t / lowpass_filter_width) ** 2)) / np.i0(beta)
    t = t * math.pi
    with np.errstate(invalid="ignore", divide="ignore"):
        k = np.where(t == 0, 1.0, np.sin(t) / np.where(t == 0, 1.0, t))
    return k * window * (base / orig), width


def _apply_kernel(waveform, orig, new, kernel, width):
    """Polyphase filtering: frames of (2 width + orig) samples every ``orig`` samples, each frame
    times the (new, K) kernel gives ``new`` output samples."""
    shape = tuple(waveform.shape)
    T = shape[-1]
    x = waveform.reshape(math.prod(shape[:-1]), T)
    x = fiamma.nn.functional.pad(x, (width, width + orig))
    frames = x.unfold(-1, kernel.shape[1], orig)  # (N, nframes, K), a strided view
    y = fiamma.matmul(frames, kernel.T)  # (N, nframes, new)
    target = -(-new * T // orig)
    y = y.reshape(x.shape[0], y.shape[1] * y.shape[2])[:, :target]
    return y.reshape(shape[:-1] + (target,))


def resample(waveform, orig_freq, new_freq, lowpass_filter_width=6, rolloff=0.99,
             resampling_method="sinc_interp_hann", beta=None):
    """Resample (..., time) from ``orig_freq`` to ``new_freq`` with a band-limited windowed-sinc
    interpolation (torchaudio's kernel: frequencies reduced by their gcd, one polyphase filter per
    output phase). Differentiable in the waveform. Output length ``ceil(new * T / orig)``.

    >>> x = fiamma.sin(fiamma.arange(16000) * (2 * 3.14159265 * 440 / 16000))
    >>> tuple(resample(x, 16000, 8000).shape)
    (8000,)
    """
    _check_float("fiamma.audio.functional.resample", waveform)
    if orig_freq <= 0 or new_freq <= 0:
        raise ValueError("fiamma.audio.functional.resample: frequencies must be positive, got "
                         f"{orig_freq} and {new_freq}")
    if orig_freq == new_freq:
        return waveform
    gcd = math.gcd(int(orig_freq), int(new_freq))
    k, width = _sinc_resample_kernel(orig_freq, new_freq, gcd, lowpass_filter_width, rolloff,
                                     resampling_method, beta)
    kernel = fiamma.from_numpy(k).to(waveform.dtype)
    return _apply_kernel(waveform, int(orig_freq) // gcd, int(new_freq) // gcd, kernel, width)


# ---------------------------------------------------------------------------------- simple maps

def mu_law_encoding(x, quantization_channels):
    """Mu-law companding of a signal in [-1, 1] into integers 0..quantization_channels-1 (int64)."""
    mu = quantization_channels - 1.0
    if not x.is_floating_point():
        x = x.to(fiamma.float32)
    mu_t = fiamma.tensor(mu, dtype=x.dtype)
    x_mu = fiamma.sign(x) * fiamma.log1p(mu_t * x.abs()) / fiamma.log1p(mu_t)
    return ((x_mu + 1) / 2 * mu + 0.5).to(fiamma.int64)


def mu_law_decoding(x_mu, quantization_channels):
    """Inverse of ``mu_law_encoding``: integers back to a float signal in [-1, 1]."""
    mu = quantization_channels - 1.0
    if not x_mu.is_floating_point():
        x_mu = x_mu.to(fiamma.float32)
    mu_t = fiamma.tensor(mu, dtype=x_mu.dtype)
    x = (x_mu / mu) * 2 - 1.0
    return fiamma.sign(x) * (fiamma.exp(x.abs() * fiamma.log1p(mu_t)) - 1.0) / mu


def preemphasis(waveform, coeff=0.97):
    """``y[n] = x[n] - coeff * x[n-1]`` along the last dim (first sample kept)."""
    if waveform.shape[-1] == 0:
        return waveform.clone()
    rest = waveform[..., 1:] - coeff * waveform[..., :-1]
    return fiamma.cat([waveform[..., :1], rest], dim=-1)


def deemphasis(waveform, coeff=0.97):
    """Inverse of ``preemphasis``: ``y[n] = x[n] + coeff * y[n-1]`` (lfilter, output clamped)."""
    dt = waveform.dtype
    return lfilter(waveform, fiamma.tensor([1.0, -coeff], dtype=dt),
                   fiamma.tensor([1.0, 0.0], dtype=dt))


def gain(waveform, gain_db=1.0):
    """Scale by ``gain_db`` decibels (amplitude ratio 10 ** (gain_db / 20))."""
    if gain_db == 0:
        return waveform
    return waveform * (10 ** (gain_db / 20))


def DB_to_amplitude(x, ref, power):
    """Decibels back to power/amplitude: ``ref * (10 ** (0.1 x)) ** power``."""
    return ref * fiamma.pow(fiamma.pow(10.0, 0.1 * x), power)


def amplitude_to_DB(x, multiplier, amin, db_multiplier, top_db=None):
    """Power/amplitude spectrogram to decibels: ``multiplier * log10(max(x, amin))`` minus
    ``multiplier * db_multiplier``; ``top_db`` floors each (packed) spectrogram at its max minus
    ``top_db``."""
    x_db = multiplier * fiamma.log10(fiamma.clamp(x, min=amin))
    x_db = x_db - multiplier * db_multiplier
    if top_db is not None:
        shape = tuple(x_db.shape)
        packed = shape[-3] if x_db.dim() > 2 else 1
        x_db = x_db.reshape(-1, packed, shape[-2], shape[-1])
        floor = (x_db.amax(dim=(-3, -2, -1)) - top_db).reshape(-1, 1, 1, 1)
        x_db = fiamma.maximum(x_db, floor).reshape(shape)
    return x_db
