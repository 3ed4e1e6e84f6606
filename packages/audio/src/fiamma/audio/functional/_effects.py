"""Effects and augmentation on (..., time) waveforms (torchaudio.functional's names, arguments,
defaults and formulas; the SoX-derived effects follow SoX's equations)."""

import math

import numpy as np

import fiamma
from fiamma.audio.functional._filtering import (
    _check_float,
    _scalar,
    biquad,
    highpass_biquad,
    lfilter,
    resample,
)
from fiamma.autograd import Function

__all__ = ["add_noise", "convolve", "fftconvolve", "speed", "dither", "band_biquad",
           "bass_biquad", "treble_biquad", "equalizer_biquad", "deemph_biquad", "riaa_biquad",
           "contrast", "dcshift", "overdrive", "phaser", "flanger", "loudness",
           "sliding_window_cmn", "vad"]


# ------------------------------------------------------------------------------- noise, convolve

def add_noise(waveform, noise, snr, lengths=None):
    """Scale ``noise`` and add it to ``waveform`` so that the result has signal-to-noise ratio
    ``snr`` (dB). ``waveform``/``noise`` are (..., L), ``snr`` and ``lengths`` (valid samples per
    waveform, optional) are (...), all with the same number of leading dims, which broadcast
    (one clean waveform with several SNRs gives several noisy copies). Differentiable in the
    three tensors.

    >>> x = fiamma.ones(1, 4)
    >>> y = add_noise(x, fiamma.ones(1, 4), fiamma.tensor([0.0, 20.0]))
    >>> [[round(v, 4) for v in row] for row in y.tolist()]
    [[2.0, 2.0, 2.0, 2.0], [1.1, 1.1, 1.1, 1.1]]
    """
    op = "fiamma.audio.functional.add_noise"
    _check_float(op, waveform)
    _check_float(op, noise)
    if waveform.shape[-1] != noise.shape[-1]:
        raise ValueError(f"{op}: waveform and noise must have the same length, got "
                         f"{waveform.shape[-1]} and {noise.shape[-1]}")
    if not isinstance(snr, fiamma.Tensor):
        snr = fiamma.tensor(snr, dtype=waveform.dtype)
    nd = waveform.dim() - 1
    if noise.dim() - 1 != nd or snr.dim() != nd or (lengths is not None and lengths.dim() != nd):
        raise ValueError(f"{op}: waveform (..., L), noise (..., L), snr (...) and lengths (...) "
                         f"need the same number of leading dims, got {tuple(waveform.shape)}, "
                         f"{tuple(noise.shape)}, {tuple(snr.shape)}"
                         + ("" if lengths is None else f" and {tuple(lengths.shape)}"))
    try:
        lead = tuple(fiamma.broadcast_shapes(tuple(waveform.shape[:-1]), tuple(noise.shape[:-1]),
                                             tuple(snr.shape),
                                             () if lengths is None else tuple(lengths.shape)))
    except (RuntimeError, ValueError) as e:
        raise ValueError(f"{op}: leading dims do not broadcast: waveform {tuple(waveform.shape)}, "
                         f"noise {tuple(noise.shape)}, snr {tuple(snr.shape)}") from e
    L = waveform.shape[-1]
    if lengths is not None:
        mask = (fiamma.arange(L) < lengths.unsqueeze(-1)).to(waveform.dtype)
        e_sig = (waveform * waveform * mask).sum(-1)
        e_noise = (noise * noise * mask).sum(-1)
    else:
        e_sig = (waveform * waveform).sum(-1)
        e_noise = (noise * noise).sum(-1)
    orig_snr = 10 * (fiamma.log10(e_sig) - fiamma.log10(e_noise))
    scale = 10 ** ((orig_snr - snr.to(waveform.dtype)) / 20.0)
    out = waveform + scale.unsqueeze(-1) * noise
    return out.expand(lead + (L,)) if tuple(out.shape[:-1]) != lead else out


_MODES = ("full", "valid", "same")


def _conv_prepare(op, x, y, mode):
    _check_float(op, x)
    _check_float(op, y)
    if mode not in _MODES:
        raise ValueError(f"{op}: mode must be one of {_MODES}, got {mode!r}")
    if x.dtype != y.dtype:
        raise TypeError(f"{op}: x and y must have the same dtype, got {x.dtype} and {y.dtype}")
    try:
        lead = tuple(fiamma.broadcast_shapes(tuple(x.shape[:-1]), tuple(y.shape[:-1])))
    except (RuntimeError, ValueError) as e:
        raise ValueError(f"{op}: leading dimensions of x {tuple(x.shape)} and y {tuple(y.shape)} "
                         "do not broadcast") from e
    N, M = x.shape[-1], y.shape[-1]
    if N == 0 or M == 0:
        raise ValueError(f"{op}: x and y must be non-empty along the last dim, got {N} and {M}")
    return lead, N, M


def _apply_mode(full, N, M, mode):
    if mode == "full":
        return full
    target = max(N, M) - min(N, M) + 1 if mode == "valid" else N
    start = (full.shape[-1] - target) // 2
    return full[..., start:start + target]


def convolve(x, y, mode="full"):
    """Direct convolution of ``x`` (..., N) with ``y`` (..., M) along the last dim; leading dims
    broadcast. ``mode``: ``"full"`` (N+M-1), ``"valid"`` (max-min+1), ``"same"`` (N, centred as
    SciPy's). Differentiable in both.

    >>> convolve(fiamma.tensor([1.0, 2.0, 3.0]), fiamma.tensor([0.0, 1.0, 0.5])).tolist()
    [0.0, 1.0, 2.5, 4.0, 1.5]
    """
    lead, N, M = _conv_prepare("fiamma.audio.functional.convolve", x, y, mode)
    B = math.prod(lead)
    xs = x.expand(lead + (N,)).reshape(1, B, N)
    ys = y.expand(lead + (M,)).reshape(B, 1, M).flip(-1)
    full = fiamma.nn.functional.conv1d(xs, ys, padding=M - 1, groups=B)
    return _apply_mode(full.reshape(lead + (N + M - 1,)), N, M, mode)


def fftconvolve(x, y, mode="full"):
    """Convolution of ``x`` (..., N) and ``y`` (..., M) through the real FFT (faster than
    ``convolve`` for long signals); same modes and broadcasting as ``convolve``. Differentiable.

    >>> y = fftconvolve(fiamma.tensor([1.0, 2.0]), fiamma.tensor([1.0, 1.0]))
    >>> [round(v, 4) for v in y.tolist()]
    [1.0, 3.0, 2.0]
    """
    lead, N, M = _conv_prepare("fiamma.audio.functional.fftconvolve", x, y, mode)
    n = N + M - 1
    X = fiamma.fft.rfft(x, n=n)
    Y = fiamma.fft.rfft(y, n=n)
    full = fiamma.fft.irfft(X * Y, n=n)
    return _apply_mode(full.expand(lead + (n,)), N, M, mode)


# ------------------------------------------------------------------------------- speed, dither

def speed(waveform, orig_freq, factor, lengths=None):
    """Change the speed by ``factor`` (> 1 faster/shorter): resample from
    ``int(factor * orig_freq)`` to ``orig_freq``. Returns ``(waveform, lengths)``, the lengths
    scaled to ``ceil(lengths * orig_freq / int(factor * orig_freq))`` (None if not given)."""
    op = "fiamma.audio.functional.speed"
    _check_float(op, waveform)
    if factor <= 0:
        raise ValueError(f"{op}: factor must be positive, got {factor}")
    source = int(factor * orig_freq)
    target = int(orig_freq)
    if source <= 0:
        raise ValueError(f"{op}: factor * orig_freq must be at least 1, got {factor * orig_freq}")
    g = math.gcd(source, target)
    source, target = source // g, target // g
    out = resample(waveform, source, target)
    if lengths is None:
        return out, None
    new_len = fiamma.ceil(lengths.to(fiamma.float64) * target / source).to(lengths.dtype)
    return out, new_len


def dither(waveform, density_function="TPDF", noise_shaping=False):
    """Dither and quantise to 16 bits: add random noise of one LSB (``"RPDF"``: rectangular,
    ``"TPDF"``: triangular, sum of two rectangular; ``"GPDF"``: Gaussian) to the signal scaled to
    16-bit integers, round, and scale back. ``noise_shaping`` feeds each sample's quantisation
    error into the next sample (first-order error feedback). Uses fiamma's global RNG."""
    op = "fiamma.audio.functional.dither"
    _check_float(op, waveform)
    if density_function not in ("TPDF", "RPDF", "GPDF"):
        raise ValueError(f"{op}: density_function must be 'TPDF', 'RPDF' or 'GPDF', got "
                         f"{density_function!r}")
    up = 2.0 ** 15 - 2
    down = 2.0 ** 15
    shape = tuple(waveform.shape)
    if density_function == "RPDF":
        noise = fiamma.rand(shape, dtype=waveform.dtype) - 0.5
    elif density_function == "TPDF":
        noise = fiamma.rand(shape, dtype=waveform.dtype) - fiamma.rand(shape, dtype=waveform.dtype)
    else:
        noise = fiamma.randn(shape, dtype=waveform.dtype) * 0.5
    dithered = fiamma.round(waveform * up + noise) / down
    if not noise_shaping:
        return dithered
    err = dithered - waveform
    prev = fiamma.nn.functional.pad(err[..., :-1], (1, 0))
    return dithered + prev


# ------------------------------------------------------------------------------- biquad effects

def _A(gain, dt):
    return fiamma.exp(_scalar(gain, dt) / 40 * math.log(10))


def band_biquad(waveform, sample_rate, central_freq, Q=0.707, noise=False):
    """SoX's two-pole band filter around ``central_freq`` (bandwidth central_freq / Q Hz);
    ``noise=True`` selects the mode for unpitched audio (noise), scaled to unit noise gain."""
    dt = waveform.dtype
    f = _scalar(central_freq, dt)
    w0 = 2 * math.pi * f / sample_rate
    bw = f / _scalar(Q, dt)
    a2 = fiamma.exp(-2 * math.pi * bw / sample_rate)
    a1 = -4 * a2 / (1 + a2) * fiamma.cos(w0)
    b0 = fiamma.sqrt(1 - a1 * a1 / (4 * a2)) * (1 - a2)
    if noise:
        b0 = fiamma.sqrt(((1 + a2) ** 2 - a1 * a1) * (1 - a2) / (1 + a2))
    return biquad(waveform, b0, 0.0, 0.0, 1.0, a1, a2)


def _shelf(waveform, sample_rate, gain, freq, Q=None, slope=None, treble=False):
    dt = waveform.dtype
    w0 = 2 * math.pi * _scalar(freq, dt) / sample_rate
    A = _A(gain, dt)
    if slope is None:
        alpha = fiamma.sin(w0) / 2 / _scalar(Q, dt)
    else:
        alpha = fiamma.sin(w0) / 2 * fiamma.sqrt((A + 1 / A) * (1 / slope - 1) + 2)
    t1 = 2 * fiamma.sqrt(A) * alpha
    t2 = (A - 1) * fiamma.cos(w0)
    t3 = (A + 1) * fiamma.cos(w0)
    if treble:
        return biquad(waveform, A * ((A + 1) + t2 + t1), -2 * A * ((A - 1) + t3),
                      A * ((A + 1) + t2 - t1), (A + 1) - t2 + t1, 2 * ((A - 1) - t3),
                      (A + 1) - t2 - t1)
    return biquad(waveform, A * ((A + 1) - t2 + t1), 2 * A * ((A - 1) - t3),
                  A * ((A + 1) - t2 - t1), (A + 1) + t2 + t1, -2 * ((A - 1) + t3),
                  (A + 1) + t2 - t1)


def bass_biquad(waveform, sample_rate, gain, central_freq=100, Q=0.707):
    """Low-shelf (bass tone control) biquad: ``gain`` dB below ``central_freq`` (RBJ/SoX)."""
    return _shelf(waveform, sample_rate, gain, central_freq, Q=Q)


def treble_biquad(waveform, sample_rate, gain, central_freq=3000, Q=0.707):
    """High-shelf (treble tone control) biquad: ``gain`` dB above ``central_freq`` (RBJ/SoX)."""
    return _shelf(waveform, sample_rate, gain, central_freq, Q=Q, treble=True)


def equalizer_biquad(waveform, sample_rate, center_freq, gain, Q=0.707):
    """Peaking equaliser biquad: ``gain`` dB at ``center_freq``, bandwidth set by ``Q``."""
    dt = waveform.dtype
    w0 = 2 * math.pi * _scalar(center_freq, dt) / sample_rate
    A = _A(gain, dt)
    alpha = fiamma.sin(w0) / 2 / _scalar(Q, dt)
    c = -2 * fiamma.cos(w0)
    return biquad(waveform, 1 + alpha * A, c, 1 - alpha * A, 1 + alpha / A, c, 1 - alpha / A)


_DEEMPH = {44100: (5283.0, 0.4845, -9.477), 48000: (5356.0, 0.479, -9.62)}


def deemph_biquad(waveform, sample_rate):
    """ISO 908 CD de-emphasis (50/15 us) as SoX's treble shelf; ``sample_rate`` 44100 or 48000."""
    if sample_rate not in _DEEMPH:
        raise ValueError("fiamma.audio.functional.deemph_biquad: sample_rate must be 44100 or "
                         f"48000, got {sample_rate}")
    f, slope, g = _DEEMPH[sample_rate]
    return _shelf(waveform, sample_rate, g, f, slope=slope, treble=True)


_RIAA = {44100: ((-0.2014898, 0.9233820), (0.7083149, 0.9924091)),
         48000: ((-0.1766069, 0.9321590), (0.7396325, 0.9931330)),
         88200: ((-0.1168735, 0.9648312), (0.8590646, 0.9964002)),
         96000: ((-0.1141486, 0.9676817), (0.8699137, 0.9966946))}


def riaa_biquad(waveform, sample_rate):
    """RIAA vinyl playback equalisation (SoX's zeros and poles), 0 dB at 1 kHz; ``sample_rate``
    44100, 48000, 88200 or 96000."""
    if sample_rate not in _RIAA:
        raise ValueError("fiamma.audio.functional.riaa_biquad: sample_rate must be 44100, 48000, "
                         f"88200 or 96000, got {sample_rate}")
    (z0, z1), (p0, p1) = _RIAA[sample_rate]
    b = np.array([1.0, -(z0 + z1), z0 * z1])
    a = np.array([1.0, -(p0 + p1), p0 * p1])
    e = np.exp(-1j * 2 * math.pi * 1000 / sample_rate * np.arange(3))
    b = b / abs((b * e).sum() / (a * e).sum())
    return biquad(waveform, *b.tolist(), *a.tolist())


# ------------------------------------------------------------------------------- distortions

def contrast(waveform, enhancement_amount=75.0):
    """SoX's contrast: ``sin(pi/2 x + amount/750 * sin(2 pi x))``, amount in [0, 100]."""
    if not 0 <= enhancement_amount <= 100:
        raise ValueError("fiamma.audio.functional.contrast: enhancement_amount must be in "
                         f"[0, 100], got {enhancement_amount}")
    t = waveform * (math.pi / 2)
    return fiamma.sin(t + enhancement_amount / 750.0 * fiamma.sin(4 * t))


def dcshift(waveform, shift, limiter_gain=None):
    """Add the DC offset ``shift`` (in [-2, 2]), output clipped to [-1, 1]; with
    ``limiter_gain`` (SoX's, e.g. 0.05) samples beyond ``1 - (|shift| - limiter_gain)`` in the
    direction of the shift are compressed instead of clipped."""
    if limiter_gain is None or shift == 0:
        return (waveform + shift).clamp(-1.0, 1.0)
    thr = 1.0 - (abs(shift) - limiter_gain)
    plain = (waveform + shift).clamp(-1.0, 1.0)
    if shift > 0:
        lim = ((waveform - thr) * limiter_gain / (1 - thr) + thr + shift).clamp(max=thr)
        return fiamma.where(waveform > thr, lim, plain)
    lim = ((waveform + thr) * limiter_gain / (1 - thr) - thr + shift).clamp(min=-thr)
    return fiamma.where(waveform < -thr, lim, plain)


def overdrive(waveform, gain=20, colour=20):
    """SoX's overdrive: soft clipping ``x - x^3/3`` (limits +-2/3) of ``x * 10^(gain/20) +
    colour/200``, a DC-blocking filter ``y[n] = t[n] - t[n-1] + 0.995 y[n-1]``, then
    ``0.5 x + 0.75 y`` clipped to [-1, 1]. ``gain`` and ``colour`` are clipped to [0, 100]."""
    _check_float("fiamma.audio.functional.overdrive", waveform)
    g = math.exp(min(max(float(gain), 0.0), 100.0) * math.log(10) / 20)
    c = min(max(float(colour), 0.0), 100.0) / 200
    t = waveform * g + c
    t = fiamma.where(t < -1, fiamma.full_like(t, -2.0 / 3),
                     fiamma.where(t > 1, fiamma.full_like(t, 2.0 / 3), t - t * t * t / 3))
    dt = waveform.dtype
    y = lfilter(t, fiamma.tensor([1.0, -0.995], dtype=dt), fiamma.tensor([1.0, -1.0], dtype=dt),
                clamp=False)
    return (waveform * 0.5 + y * 0.75).clamp(-1.0, 1.0)


def _wave_table(kind, integer, size, lo, hi, phase):
    """SoX's LFO table: sine or triangle of ``size`` points between lo and hi, starting at
    ``phase`` radians; rounded half away from zero when ``integer``."""
    offset = int(phase / math.pi / 2 * size + 0.5)
    p = (np.arange(size) + offset) % size
    if kind == "sine":
        d = (np.sin(p / size * 2 * math.pi) + 1) / 2
    else:
        d = p * 2.0 / size
        q = 4 * p // size
        d = np.select([q == 0, q == 1, q == 2, q == 3], [d + 0.5, 1.5 - d, 1.5 - d, d - 1.5])
    d = d * (hi - lo) + lo
    if integer:
        d = np.trunc(d + np.where(d < 0, -0.5, 0.5))
    return d


def _phaser_fwd(x, lag, decay):
    """y[i] = x[i] + decay y[i - lag[i]] (zero before the start); x (T, N) float64."""
    y = np.empty_like(x)
    for i in range(x.shape[0]):
        j = i - lag[i]
        y[i] = x[i] + decay * y[j] if j >= 0 else x[i]
    return y


def _phaser_adj(g, lag, decay):
    """Adjoint of ``_phaser_fwd``: each output's sensitivity flows back to the sample it
    read, latest first."""
    v = g.copy()
    for i in range(g.shape[0] - 1, -1, -1):
        j = i - lag[i]
        if j >= 0:
            v[j] += decay * v[i]
    return v


class _DelayRecursion(Function):
    """A linear time-varying delay recursion (phaser's or flanger's) of x (T, N) float64, run
    in NumPy; the backward pass runs its adjoint (so not twice differentiable)."""

    @staticmethod
    def forward(ctx, x, fwd, adj):
        ctx.adj = adj
        return fiamma.from_numpy(fwd(x.detach().numpy().astype(np.float64))).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        gx = ctx.adj(g.detach().numpy().astype(np.float64))
        return fiamma.from_numpy(np.ascontiguousarray(gx)).to(g.dtype), None, None


def phaser(waveform, sample_rate, gain_in=0.4, gain_out=0.74, delay_ms=3.0, decay=0.4,
           mod_speed=0.5, sinusoidal=True):
    """SoX's phaser: ``y[n] = gain_in x[n] + decay y[n - d[n]]`` with the delay ``d[n]``
    modulated by a sine (or triangle) LFO at ``mod_speed`` Hz between 1 sample and
    ``delay_ms``; output ``gain_out * y`` clipped to [-1, 1]. Differentiable in the waveform
    (the recursion runs sample by sample in NumPy, its adjoint likewise)."""
    _check_float("fiamma.audio.functional.phaser", waveform)
    shape = tuple(waveform.shape)
    T = shape[-1]
    L = int(delay_ms * 0.001 * sample_rate + 0.5)
    if L < 1:
        raise ValueError("fiamma.audio.functional.phaser: delay_ms * sample_rate must be at least "
                         f"half a sample, got delay_ms={delay_ms}")
    P = int(sample_rate / mod_speed + 0.5)
    mod = _wave_table("sine" if sinusoidal else "triangle", True, P, 1.0, float(L), math.pi / 2)
    # ring buffer of L slots: step i reads slot (i + mod[i]) % L, then writes slot (i + 1) % L,
    # so it reads the value written L + 1 - mod[i] steps earlier (mod in 1..L)
    lag = (L + 1 - mod[np.arange(T) % P].astype(np.int64)).tolist()
    x = (waveform * gain_in).reshape(-1, T).transpose(0, 1).contiguous()  # (T, N)
    y = _DelayRecursion.apply(x, lambda a: _phaser_fwd(a, lag, decay),
                              lambda g: _phaser_adj(g, lag, decay))
    return (y.transpose(0, 1) * gain_out).clamp(-1.0, 1.0).reshape(shape)


def _flanger_plan(T, C, sample_rate, delay, depth, speed, phase, modulation, interpolation):
    """Per step and channel: the delays (in steps, 0 = this step's write) of the 2 or 3 delay-line
    taps and their interpolation weights, each (T, C, taps)."""
    dmin = delay / 1000
    buf_len = int((dmin + depth / 1000) * sample_rate + 0.5) + 2
    lfo_len = int(sample_rate / speed)
    lfo = _wave_table("sine" if modulation == "sinusoidal" else "triangle", False, lfo_len,
                      float(math.floor(dmin * sample_rate + 0.5)), buf_len - 2.0, 3 * math.pi / 2)
    lfo = lfo.astype(np.float32).astype(np.float64)
    ch_off = (np.arange(C) * lfo_len * (phase / 100) + 0.5).astype(np.int64)
    d = lfo[(np.arange(T)[:, None] % lfo_len + ch_off[None]) % lfo_len]  # (T, C)
    f = d - np.floor(d)
    k = np.floor(d).astype(np.int64)
    if interpolation == "linear":
        taps = np.stack([k, k + 1], -1)
        w = np.stack([1 - f, f], -1)
    else:  # SoX's quadratic through the three taps
        taps = np.stack([k, k + 1, k + 2], -1)
        w = np.stack([1 - 1.5 * f + 0.5 * f * f, 2 * f - f * f, 0.5 * f * f - 0.5 * f], -1)
    # the write position moves back one slot per step, so slot pos + k holds step i - (k % L)
    return taps % buf_len, w


def _flanger_fwd(x, lags, w, fb):
    """x (T, N, C) -> delayed signal dl (T, N, C): s[i] = x[i] + fb dl[i-1] is written to the
    line, dl[i] = sum_m w[i, :, m] s[i - lags[i, :, m]]."""
    T, N, C = x.shape
    ch = np.arange(C)
    if fb == 0:  # no feedback: every tap reads the input directly, all steps at once
        src = np.arange(T)[:, None, None] - lags  # (T, C, taps)
        vals = x[np.maximum(src, 0), :, ch[None, :, None]]  # (T, C, taps, N)
        return np.einsum("tcmn,tcm->tnc", vals, w * (src >= 0))
    s = np.zeros_like(x)
    dl = np.zeros_like(x)
    prev = np.zeros((N, C))
    for i in range(T):
        s[i] = x[i] + fb * prev
        src = i - lags[i]  # (C, taps)
        ok = src >= 0
        vals = s[np.maximum(src, 0), :, ch[:, None]]  # (C, taps, N)
        prev = ((vals * (w[i] * ok)[..., None]).sum(1)).T  # (N, C)
        dl[i] = prev
    return dl


def _flanger_adj(g_dl, lags, w, fb):
    """Adjoint of ``_flanger_fwd``: d(loss)/dx from d(loss)/d(dl)."""
    T, N, C = g_dl.shape
    g_s = np.zeros_like(g_dl)
    ch = np.arange(C)
    if fb == 0:
        src = np.arange(T)[:, None, None] - lags
        contrib = np.einsum("tnc,tcm->tcmn", g_dl, w * (src >= 0))
        np.add.at(g_s, (np.maximum(src, 0), slice(None), ch[None, :, None]), contrib)
        return g_s
    carry = np.zeros((N, C))  # fb * g_s[i + 1], the feedback path into dl[i]
    for i in range(T - 1, -1, -1):
        gd = g_dl[i] + carry  # (N, C)
        src = i - lags[i]
        ok = src >= 0
        contrib = (w[i] * ok)[..., None] * gd.T[:, None, :]  # (C, taps, N)
        np.add.at(g_s, (np.maximum(src, 0), slice(None), ch[:, None]), contrib)
        carry = fb * g_s[i]
    return g_s


def flanger(waveform, sample_rate, delay=0.0, depth=2.0, regen=0.0, width=71.0, speed=0.5,
            phase=25.0, modulation="sinusoidal", interpolation="linear"):
    """SoX's flanger on (..., channel, time) with at most 4 channels: a delay line of
    ``delay``..``delay + depth`` ms swept by an LFO at ``speed`` Hz (channel i's LFO shifted by
    ``i * phase`` percent), feedback ``regen`` %, wet mix ``width`` %, linear or quadratic
    interpolation of the fractional delay. Differentiable in the waveform (the recursion and
    its adjoint run sample by sample in NumPy)."""
    op = "fiamma.audio.functional.flanger"
    _check_float(op, waveform)
    if modulation not in ("sinusoidal", "triangular"):
        raise ValueError(f"{op}: modulation must be 'sinusoidal' or 'triangular', got "
                         f"{modulation!r}")
    if interpolation not in ("linear", "quadratic"):
        raise ValueError(f"{op}: interpolation must be 'linear' or 'quadratic', got "
                         f"{interpolation!r}")
    shape = tuple(waveform.shape)
    if waveform.dim() < 2 or shape[-2] > 4:
        raise ValueError(f"{op}: expected (..., channel, time) with at most 4 channels, got "
                         f"{shape}")
    C, T = shape[-2], shape[-1]
    fb = regen / 100
    wet = width / 100
    in_gain = 1.0 / (1 + wet)
    wet = wet / (1 + wet) * (1 - abs(fb))
    lags, w = _flanger_plan(T, C, sample_rate, delay, depth, speed, phase, modulation,
                            interpolation)
    x = waveform.reshape(-1, C, T).permute(2, 0, 1).contiguous()  # (T, N, C)
    dl = _DelayRecursion.apply(x, lambda a: _flanger_fwd(a, lags, w, fb),
                               lambda g: _flanger_adj(g, lags, w, fb))
    out = x * in_gain + dl * wet
    return out.permute(1, 2, 0).clamp(-1.0, 1.0).reshape(shape)


# ------------------------------------------------------------------------------- loudness

def loudness(waveform, sample_rate):
    """Integrated loudness (LKFS/LUFS) of (..., channel, time) per ITU-R BS.1770-4: K-weighting
    (high shelf +4 dB at 1500 Hz, high-pass at 38 Hz), 400 ms blocks with 75 % overlap, channel
    weights 1, 1, 1, 1.41, 1.41 (at most 5 channels), absolute gate at -70 LKFS and relative gate
    10 LU below the absolutely gated loudness. Returns (...,). Differentiable.
    """
    op = "fiamma.audio.functional.loudness"
    _check_float(op, waveform)
    if waveform.dim() < 2 or waveform.shape[-2] > 5:
        raise ValueError(f"{op}: expected (..., channel, time) with at most 5 channels, got "
                         f"{tuple(waveform.shape)}")
    kernel = round(0.4 * sample_rate)
    stride = round(kernel * 0.25)
    if waveform.shape[-1] < kernel:
        raise ValueError(f"{op}: need at least one 400 ms block ({kernel} samples), got "
                         f"{waveform.shape[-1]}")
    y = treble_biquad(waveform, sample_rate, 4.0, 1500.0, 1 / math.sqrt(2))
    y = highpass_biquad(y, sample_rate, 38.0, 0.5)
    energy = (y * y).unfold(-1, kernel, stride).mean(-1)  # (..., C, blocks)
    C = energy.shape[-2]
    g = fiamma.tensor([1.0, 1.0, 1.0, 1.41, 1.41][:C], dtype=energy.dtype).unsqueeze(-1)
    block_l = -0.691 + 10 * fiamma.log10((g * energy).sum(-2))  # (..., blocks)
    gate = (block_l > -70.0).to(energy.dtype).unsqueeze(-2)
    e_abs = (gate * energy).sum(-1) / gate.sum(-1)
    gamma_rel = -0.691 + 10 * fiamma.log10((g.squeeze(-1) * e_abs).sum(-1)) - 10
    gate = gate * (block_l > gamma_rel.unsqueeze(-1)).to(energy.dtype).unsqueeze(-2)
    e_rel = (gate * energy).sum(-1) / gate.sum(-1)
    return -0.691 + 10 * fiamma.log10((g.squeeze(-1) * e_rel).sum(-1))


# ------------------------------------------------------------------------------- CMN

def _cmn_windows(T, cmn_window, min_cmn_window, center):
    t = np.arange(T)
    if center:
        start = t - cmn_window // 2
        end = start + cmn_window
    else:
        start = t - cmn_window
        end = t + 1
    neg = start < 0
    end = np.where(neg, end - start, end)
    start = np.where(neg, 0, start)
    if not center:
        end = np.where(end > t, np.maximum(t + 1, min_cmn_window), end)
    over = end > T
    start = np.where(over, np.maximum(start - (end - T), 0), start)
    end = np.where(over, T, end)
    return start, end


def sliding_window_cmn(specgram, cmn_window=600, min_cmn_window=100, center=False,
                       norm_vars=False):
    """Kaldi's sliding-window cepstral mean (and variance) normalisation of (..., time, freq):
    each frame minus the mean over its window (``cmn_window`` frames, before the frame or centred
    on it; at least ``min_cmn_window`` frames at the start when not centred), divided by the
    window's standard deviation with ``norm_vars``."""
    op = "fiamma.audio.functional.sliding_window_cmn"
    _check_float(op, specgram)
    if specgram.dim() < 2:
        raise ValueError(f"{op}: expected (..., time, freq), got {tuple(specgram.shape)}")
    T = specgram.shape[-2]
    start, end = _cmn_windows(T, cmn_window, min_cmn_window, center)
    n = fiamma.tensor((end - start).astype(np.float64), dtype=specgram.dtype).unsqueeze(-1)
    zero = fiamma.zeros_like(specgram[..., :1, :])
    cs = fiamma.cat([zero, specgram.cumsum(-2)], dim=-2)
    si = fiamma.tensor(start, dtype=fiamma.int64)
    ei = fiamma.tensor(end, dtype=fiamma.int64)
    mean = (cs.index_select(-2, ei) - cs.index_select(-2, si)) / n
    out = specgram - mean
    if norm_vars:
        cs2 = fiamma.cat([zero, (specgram * specgram).cumsum(-2)], dim=-2)
        var = (cs2.index_select(-2, ei) - cs2.index_select(-2, si)) / n - mean * mean
        one = fiamma.tensor(end - start == 1).unsqueeze(-1)
        out = fiamma.where(one, fiamma.zeros_like(out), out / fiamma.sqrt(var))
    return out


# ------------------------------------------------------------------------------- vad

def _vad_measure(samples, spectrum, noise_spectrum, s):
    """One SoX vad measurement of a channel (float64 NumPy; updates the spectra in place)."""
    buf = np.zeros(s["dft_len"])
    buf[:s["mlen"]] = samples * s["swin"]
    mag = np.abs(np.fft.rfft(buf))
    a, b = s["sp_start"], s["sp_end"]
    bc = s["boot_count"]
    mult = bc / (1.0 + bc) if bc >= 0 else s["smooth_mult"]
    spectrum[a:b] = spectrum[a:b] * mult + mag[a:b] * (1 - mult)
    d = spectrum[a:b] ** 2
    if bc >= 0:
        m = np.zeros_like(d)
    else:
        m = np.where(d > noise_spectrum[a:b], s["up_mult"], s["down_mult"])
    noise_spectrum[a:b] = noise_spectrum[a:b] * m + d * (1 - m)
    d = np.sqrt(np.maximum(0.0, d - s["nr"] * noise_spectrum[a:b]))
    cep = np.zeros(s["dft_len"] >> 1)
    cep[a:b] = d * s["cwin"]
    c = np.abs(np.fft.rfft(cep))[s["cep_start"]:s["cep_end"]] ** 2
    r = c.sum()
    r = math.log(r / (s["cep_end"] - s["cep_start"])) if r > 0 else -math.inf
    return max(0.0, 21 + r)


def _hann(n):
    return 0.5 - 0.5 * np.cos(2 * math.pi * np.arange(n) / n)


def vad(waveform, sample_rate, trigger_level=7.0, trigger_time=0.25, search_time=1.0,
        allowed_gap=0.25, pre_trigger_time=0.0, boot_time=0.35, noise_up_time=0.1,
        noise_down_time=0.01, noise_reduction_amount=1.35, measure_freq=20.0,
        measure_duration=None, measure_smooth_time=0.4, hp_filter_freq=50.0,
        lp_filter_freq=6000.0, hp_lifter_freq=150.0, lp_lifter_freq=2000.0):
    """SoX's voice activity detector: trims the silence (or noise) before the first speech of
    (channel, time) or (time,) audio. Measures a cepstral power every 1/``measure_freq`` s on a
    noise-reduced spectrum; triggers when its smoothed value reaches ``trigger_level``, then
    searches back up to ``search_time`` s (bridging gaps of ``allowed_gap`` s) for the start and
    keeps ``pre_trigger_time`` s more. Returns the audio from there on (empty if no trigger).
    To trim the end too, flip, apply, flip back (as with SoX)."""
    op = "fiamma.audio.functional.vad"
    _check_float(op, waveform)
    shape = tuple(waveform.shape)
    x = waveform.detach().reshape(-1, shape[-1]).double().numpy()
    C, n_in = x.shape
    mdur = 2.0 / measure_freq if measure_duration is None else measure_duration
    mlen = int(sample_rate * mdur + 0.5)
    dft_len = 16
    while dft_len < mlen:
        dft_len *= 2
    period = int(sample_rate / measure_freq + 0.5)
    meas_len = math.ceil(search_time * measure_freq)
    search_pre = meas_len * period
    gap_len = int(allowed_gap * measure_freq + 0.5)
    fixed_pre = int(pre_trigger_time * sample_rate + 0.5)
    samples_len = fixed_pre + search_pre + mlen
    sp_start = max(int(hp_filter_freq / sample_rate * dft_len + 0.5), 1)
    sp_end = min(int(lp_filter_freq / sample_rate * dft_len + 0.5), dft_len // 2)
    cep_start = math.ceil(sample_rate * 0.5 / lp_lifter_freq)
    cep_end = min(math.floor(sample_rate * 0.5 / hp_lifter_freq), dft_len // 4)
    if cep_end <= cep_start or sp_end <= sp_start:
        raise ValueError(f"{op}: the filter/lifter frequencies leave no band to measure "
                         f"(spectrum bins {sp_start}..{sp_end}, cepstrum {cep_start}..{cep_end})")
    s = {"dft_len": dft_len, "mlen": mlen, "sp_start": sp_start, "sp_end": sp_end,
         "cep_start": cep_start, "cep_end": cep_end, "nr": noise_reduction_amount,
         "swin": 2.0 / math.sqrt(mlen) * _hann(mlen),
         "cwin": 2.0 / math.sqrt(sp_end - sp_start) * _hann(sp_end - sp_start),
         "up_mult": math.exp(-1.0 / (noise_up_time * measure_freq)),
         "down_mult": math.exp(-1.0 / (noise_down_time * measure_freq)),
         "smooth_mult": math.exp(-1.0 / (measure_smooth_time * measure_freq)),
         "boot_count": 0}
    trig_mult = math.exp(-1.0 / (trigger_time * measure_freq))
    boot_max = int(boot_time * measure_freq - 0.5)
    mean_meas = np.zeros(C)
    spectrum = np.zeros((C, dft_len))
    noise = np.zeros((C, dft_len))
    measures = np.zeros((C, meas_len))
    idx = 0
    triggered = False
    flush = 0
    pos = 0
    for pos in range(mlen, n_in, period):
        for c in range(C):
            m = _vad_measure(x[c, pos - mlen:pos], spectrum[c], noise[c], s)
            measures[c, idx] = m
            mean_meas[c] = mean_meas[c] * trig_mult + m * (1.0 - trig_mult)
            triggered = triggered or mean_meas[c] >= trigger_level
            if triggered:
                k = idx
                j_trig = j_zero = meas_len
                for j in range(meas_len):
                    if measures[c, k] >= trigger_level and j <= j_trig + gap_len:
                        j_zero = j_trig = j
                    elif measures[c, k] == 0 and j_trig >= j_zero:
                        j_zero = j
                    k = (k + meas_len - 1) % meas_len
                flush = min(max(flush, min(meas_len - 1, j_zero)), meas_len)
        idx = (idx + 1) % meas_len
        if s["boot_count"] >= 0:
            s["boot_count"] = -1 if s["boot_count"] == boot_max else s["boot_count"] + 1
        if triggered:
            break
    if not triggered:
        return waveform[..., :0]
    start = max(pos - samples_len + (meas_len - flush) * period, 0)
    return waveform[..., start:]
