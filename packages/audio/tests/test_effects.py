"""Effects and augmentation (fiamma.audio.functional._effects) against NumPy references written
here, analytic cases (frequency responses, SNR, BS.1770 loudness of a sine) and gradients."""

import math

import numpy as np
import pytest

import fiamma
import fiamma.audio
import fiamma.audio.functional as AF
import fiamma.audio.transforms as AT
from fiamma.autograd import gradcheck

rng = np.random.default_rng(7)


def t64(a):
    return fiamma.tensor(np.asarray(a, dtype=np.float64))


def response_db(fn, sr, freqs, n=1 << 15):
    """|H(f)| in dB of a (linear, time-invariant) effect, from its impulse response."""
    x = np.zeros(n)
    x[0] = 0.01  # small enough that the [-1, 1] clamp never acts
    h = fn(t64(x[None])).numpy()[0] / 0.01
    H = np.fft.rfft(h)
    k = np.round(np.asarray(freqs) / sr * n).astype(int)
    return 20 * np.log10(np.abs(H[k]))


# ----------------------------------------------------------------------------- convolutions

@pytest.mark.parametrize("mode", ["full", "valid", "same"])
@pytest.mark.parametrize("fn", [AF.convolve, AF.fftconvolve])
def test_convolve_modes_broadcast(fn, mode):
    x = rng.standard_normal((2, 1, 37))
    y = rng.standard_normal((3, 11))
    out = fn(t64(x), t64(y), mode).numpy()
    full = np.stack([[np.convolve(x[i, 0], y[j]) for j in range(3)] for i in range(2)])
    N, M = 37, 11
    if mode == "full":
        ref = full
    elif mode == "valid":
        ref = full[..., M - 1:N]
    else:
        s = (M - 1) // 2
        ref = full[..., s:s + N]
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, atol=1e-12)


@pytest.mark.parametrize("mode", ["full", "valid", "same"])
def test_convolve_shorter_x(mode):
    x, y = rng.standard_normal(5), rng.standard_normal(12)
    a = AF.convolve(t64(x), t64(y), mode).numpy()
    b = AF.fftconvolve(t64(x), t64(y), mode).numpy()
    np.testing.assert_allclose(a, b, atol=1e-12)
    assert a.shape[-1] == {"full": 16, "valid": 8, "same": 5}[mode]


def test_convolve_scipy():
    signal = pytest.importorskip("scipy.signal")
    x, y = rng.standard_normal((4, 3000)), rng.standard_normal((4, 301))
    for mode in ("full", "valid", "same"):
        ref = signal.oaconvolve(x, y, mode=mode, axes=-1)
        np.testing.assert_allclose(AF.fftconvolve(t64(x), t64(y), mode).numpy(), ref, atol=1e-10)
        np.testing.assert_allclose(AF.convolve(t64(x), t64(y), mode).numpy(), ref, atol=1e-10)


def test_convolve_grad_and_errors():
    x = t64(rng.standard_normal((2, 9))).requires_grad_()
    y = t64(rng.standard_normal((1, 4))).requires_grad_()
    for fn in (AF.convolve, AF.fftconvolve):
        for mode in ("full", "valid", "same"):
            assert gradcheck(lambda a, b, fn=fn, mode=mode: fn(a, b, mode), (x, y))
    with pytest.raises(ValueError, match="convolve.*mode"):
        AF.convolve(x, y, "circular")
    with pytest.raises(ValueError, match="fftconvolve.*broadcast"):
        AF.fftconvolve(fiamma.zeros(2, 5), fiamma.zeros(3, 5))
    assert AT.Convolve("same")(fiamma.ones(3, 8), fiamma.ones(3, 3)).shape == (3, 8)
    assert AT.FFTConvolve("valid")(fiamma.ones(3, 8), fiamma.ones(3, 3)).shape == (3, 6)


# ----------------------------------------------------------------------------- add_noise

def test_add_noise_snr():
    x = rng.standard_normal((3, 1000))
    n = rng.standard_normal((3, 1000)) * 3
    snr = np.array([10.0, 0.0, -5.0])
    out = AF.add_noise(t64(x), t64(n), t64(snr)).numpy()
    added = out - x
    got = 10 * np.log10((x ** 2).sum(-1) / (added ** 2).sum(-1))
    np.testing.assert_allclose(got, snr, atol=1e-10)
    # with lengths only the first samples count
    lengths = fiamma.tensor([1000, 500, 10])
    out = AF.add_noise(t64(x), t64(n), t64(snr), lengths).numpy()
    for i, L in enumerate([1000, 500, 10]):
        added = out[i] - x[i]
        got = 10 * np.log10((x[i, :L] ** 2).sum() / (added[:L] ** 2).sum())
        assert abs(got - snr[i]) < 1e-9


def test_add_noise_grad_and_module():
    x = t64(rng.standard_normal((2, 6))).requires_grad_()
    n = t64(rng.standard_normal((2, 6))).requires_grad_()
    s = t64([3.0, -1.0]).requires_grad_()
    assert gradcheck(AF.add_noise, (x, n, s))
    assert AT.AddNoise()(x, n, s).shape == (2, 6)
    with pytest.raises(ValueError, match="add_noise"):
        AF.add_noise(fiamma.zeros(2, 5), fiamma.zeros(2, 4), fiamma.zeros(2))
    with pytest.raises(ValueError, match="add_noise.*leading dims"):
        AF.add_noise(fiamma.zeros(2, 5), fiamma.zeros(2, 5), fiamma.zeros(1, 2))
    with pytest.raises(ValueError, match="add_noise.*broadcast"):
        AF.add_noise(fiamma.zeros(2, 5), fiamma.zeros(3, 5), fiamma.zeros(2))


def test_add_noise_broadcasts():
    # the augmentation tutorial's use: one clean clip, one noise clip, several SNRs
    x = rng.standard_normal((1, 800))
    n = rng.standard_normal((1, 800))
    snr = np.array([20.0, 10.0, 3.0])
    out = AF.add_noise(t64(x), t64(n), t64(snr)).numpy()
    assert out.shape == (3, 800)
    got = 10 * np.log10((x ** 2).sum() / ((out - x) ** 2).sum(-1))
    np.testing.assert_allclose(got, snr, atol=1e-10)


# ----------------------------------------------------------------------------- speed

def test_speed_frequency_and_lengths():
    sr = 8000
    t = np.arange(sr) / sr
    x = t64(np.sin(2 * math.pi * 500 * t)[None])
    y, lens = AF.speed(x, sr, 2.0, fiamma.tensor([8000]))
    assert y.shape == (1, 4000) and lens.tolist() == [4000]
    spec = np.abs(np.fft.rfft(y.numpy()[0]))
    assert abs(np.argmax(spec) * sr / 4000 - 1000) <= 2
    y, lens = AF.speed(x, sr, 0.9, fiamma.tensor([8000, 100]))
    assert lens.tolist() == [math.ceil(8000 * 10 / 9), math.ceil(100 * 10 / 9)]
    assert y.shape[-1] == lens.tolist()[0]
    y, lens = AF.speed(x, sr, 1.0)
    assert lens is None and np.array_equal(y.numpy(), x.numpy())


def test_speed_modules():
    x = fiamma.randn(2, 1600)
    y, lens = AT.Speed(16000, 1.1)(x, fiamma.tensor([1600, 800]))
    assert y.shape == (2, 1455) and lens.tolist() == [1455, 728]
    sp = AT.SpeedPerturbation(16000, [0.9, 1.0, 1.1])
    seen = {sp(x)[0].shape[-1] for _ in range(30)}
    assert seen <= {1778, 1600, 1455} and len(seen) >= 2


# ----------------------------------------------------------------------------- dither

@pytest.mark.parametrize("pdf", ["TPDF", "RPDF", "GPDF"])
def test_dither_quantises(pdf):
    fiamma.manual_seed(0)
    x = t64(rng.uniform(-0.5, 0.5, (2, 4000)))
    y = AF.dither(x, pdf).numpy()
    q = y * 32768
    np.testing.assert_allclose(q, np.round(q), atol=1e-9)  # on the 16-bit grid
    err = y - x.numpy() * (32766 / 32768)
    assert np.abs(err).max() < 4 / 32768
    assert 0.2 / 32768 < err.std() < 1.5 / 32768  # noise of about one LSB
    if pdf != "GPDF":
        assert np.abs(err).max() <= (1.5 if pdf == "TPDF" else 1.0) / 32768 + 1e-12


def test_dither_noise_shaping_and_errors():
    fiamma.manual_seed(1)
    x = t64(rng.uniform(-0.5, 0.5, (1, 1000)))
    fiamma.manual_seed(2)
    d = AF.dither(x, "RPDF").numpy()
    fiamma.manual_seed(2)
    s = AF.dither(x, "RPDF", noise_shaping=True).numpy()
    e = d - x.numpy()
    np.testing.assert_allclose(s[:, 1:], d[:, 1:] + e[:, :-1], atol=1e-15)
    np.testing.assert_allclose(s[:, 0], d[:, 0])
    with pytest.raises(ValueError, match="dither.*density_function"):
        AF.dither(x, "XPDF")


# ----------------------------------------------------------------------------- biquads

def test_equalizer_bass_treble_responses():
    sr = 16000
    eq = response_db(lambda x: AF.equalizer_biquad(x, sr, 1000.0, 6.0, 2.0), sr, [1000, 20, 7000])
    np.testing.assert_allclose(eq, [6.0, 0.0, 0.0], atol=0.05)
    bass = response_db(lambda x: AF.bass_biquad(x, sr, -8.0, 200.0), sr, [1, 7999])
    np.testing.assert_allclose(bass, [-8.0, 0.0], atol=0.02)
    treb = response_db(lambda x: AF.treble_biquad(x, sr, 5.0, 2000.0), sr, [1, 7999])
    np.testing.assert_allclose(treb, [0.0, 5.0], atol=0.02)


def test_band_biquad():
    sr = 16000
    r = response_db(lambda x: AF.band_biquad(x, sr, 2000.0, 4.0), sr, [2000, 1000, 4000])
    assert abs(r[0]) < 0.3 and r[1] < -6 and r[2] < -6
    # noise mode: unit noise (power) gain, sum of the squared impulse response = 1
    x = np.zeros(1 << 14)
    x[0] = 0.01
    h = AF.band_biquad(t64(x), sr, 2000.0, 4.0, noise=True).numpy() / 0.01
    assert abs((h ** 2).sum() - 1) < 1e-6


def test_deemph_riaa():
    r = response_db(lambda x: AF.riaa_biquad(x, 44100), 44100, [1000, 20, 20000])
    assert abs(r[0]) < 0.01
    assert 17 < r[1] < 21 and -21 < r[2] < -15  # RIAA: about +19.3 dB at 20 Hz, -19.6 at 20 kHz
    for sr in (44100, 48000):
        d = response_db(lambda x, sr=sr: AF.deemph_biquad(x, sr), sr, [100, 1000, 16000])
        assert abs(d[0]) < 0.1 and -1.0 < d[1] < 0 and -9.7 < d[2] < -8.5
    with pytest.raises(ValueError, match="riaa_biquad.*sample_rate"):
        AF.riaa_biquad(fiamma.zeros(10), 16000)
    with pytest.raises(ValueError, match="deemph_biquad"):
        AF.deemph_biquad(fiamma.zeros(10), 16000)


def test_biquads_differentiable():
    x = t64(rng.standard_normal((1, 20)) * 0.1).requires_grad_()
    assert gradcheck(lambda v: AF.equalizer_biquad(v, 8000, 1000.0, 3.0), (x,))
    assert gradcheck(lambda v: AF.band_biquad(v, 8000, 1000.0), (x,))


# ----------------------------------------------------------------------------- distortions

def test_contrast_dcshift():
    x = rng.uniform(-1, 1, 500)
    np.testing.assert_allclose(AF.contrast(t64(x), 0.0).numpy(), np.sin(math.pi / 2 * x),
                               atol=1e-14)
    np.testing.assert_allclose(AF.contrast(t64(x), 75.0).numpy(),
                               np.sin(math.pi / 2 * x + 0.1 * np.sin(2 * math.pi * x)), atol=1e-14)
    with pytest.raises(ValueError, match="contrast"):
        AF.contrast(t64(x), 101.0)
    np.testing.assert_allclose(AF.dcshift(t64(x), 0.3).numpy(), np.clip(x + 0.3, -1, 1))
    y = AF.dcshift(t64(x), 0.3, 0.05).numpy()
    thr = 1 - (0.3 - 0.05)
    below = x <= thr
    np.testing.assert_allclose(y[below], np.clip(x[below] + 0.3, -1, 1))
    assert np.all(y[~below] <= thr + 1e-12)  # limited, not clipped at 1
    yn = AF.dcshift(t64(x), -0.3, 0.05).numpy()
    np.testing.assert_allclose(yn[x >= -thr], np.clip(x[x >= -thr] - 0.3, -1, 1))


def test_overdrive_reference():
    x = rng.uniform(-0.5, 0.5, (2, 300))
    gain, colour = 10, 30
    g, c = 10 ** (gain / 20), colour / 200
    ref = np.zeros_like(x)
    for ch in range(2):
        last_in = last_out = 0.0
        for n in range(300):
            t = x[ch, n] * g + c
            t = -2 / 3 if t < -1 else 2 / 3 if t > 1 else t - t ** 3 / 3
            last_out = t - last_in + 0.995 * last_out
            last_in = t
            ref[ch, n] = min(max(x[ch, n] * 0.5 + last_out * 0.75, -1), 1)
    np.testing.assert_allclose(AF.overdrive(t64(x), gain, colour).numpy(), ref, atol=1e-12)


def _phaser_ref(x, sr, gain_in, gain_out, delay_ms, decay, mod_speed, sinusoidal):
    """SoX's phaser written as its ring buffers, one sample at a time."""
    L = int(delay_ms * 0.001 * sr + 0.5)
    P = int(sr / mod_speed + 0.5)
    off = int(math.pi / 2 / math.pi / 2 * P + 0.5)
    table = []
    for i in range(P):
        p = (i + off) % P
        if sinusoidal:
            d = (math.sin(p / P * 2 * math.pi) + 1) / 2
        else:
            d = p * 2 / P
            q = 4 * p // P
            d = [d + 0.5, 1.5 - d, 1.5 - d, d - 1.5][q]
        d = d * (L - 1) + 1
        table.append(int(d + 0.5))
    out = np.zeros_like(x)
    for ch in range(x.shape[0]):
        buf = [0.0] * L
        dpos = mpos = 0
        for i in range(x.shape[1]):
            read = (dpos + table[mpos]) % L
            mpos = (mpos + 1) % P
            dpos = (dpos + 1) % L
            v = x[ch, i] * gain_in + buf[read]
            buf[dpos] = v * decay
            out[ch, i] = min(max(v * gain_out, -1), 1)
    return out


@pytest.mark.parametrize("sinusoidal", [True, False])
def test_phaser_reference(sinusoidal):
    sr = 8000
    x = rng.uniform(-0.8, 0.8, (2, 3000))
    ref = _phaser_ref(x, sr, 0.6, 0.9, 2.0, 0.7, 4.0, sinusoidal)
    out = AF.phaser(t64(x), sr, 0.6, 0.9, 2.0, 0.7, 4.0, sinusoidal).numpy()
    np.testing.assert_allclose(out, ref, atol=1e-12)


def _flanger_ref(x, sr, delay, depth, regen, width, speed, phase, triangular, quadratic):
    """SoX's flanger one sample and one channel at a time (x (channels, time))."""
    C, T = x.shape
    fb, wet = regen / 100, width / 100
    in_gain = 1 / (1 + wet)
    wet = wet / (1 + wet) * (1 - abs(fb))
    buf_len = int((delay + depth) / 1000 * sr + 0.5) + 2
    lfo_len = int(sr / speed)
    lo, hi = math.floor(delay / 1000 * sr + 0.5), buf_len - 2.0
    off = int(3 * math.pi / 2 / math.pi / 2 * lfo_len + 0.5)
    lfo = []
    for i in range(lfo_len):
        p = (i + off) % lfo_len
        if triangular:
            d = p * 2 / lfo_len
            d = [d + 0.5, 1.5 - d, 1.5 - d, d - 1.5][4 * p // lfo_len]
        else:
            d = (math.sin(p / lfo_len * 2 * math.pi) + 1) / 2
        lfo.append(float(np.float32(d * (hi - lo) + lo)))
    out = np.zeros_like(x)
    for c in range(C):
        buf = [0.0] * buf_len
        last, pos = 0.0, 0
        shift = int(c * lfo_len * phase / 100 + 0.5)
        for i in range(T):
            pos = (pos + buf_len - 1) % buf_len
            d = lfo[(i % lfo_len + shift) % lfo_len]
            frac, k = d - math.floor(d), int(math.floor(d))
            buf[pos] = x[c, i] + last * fb
            d0 = buf[(pos + k) % buf_len]
            d1 = buf[(pos + k + 1) % buf_len]
            if quadratic:
                d2 = buf[(pos + k + 2) % buf_len] - d0
                d1 -= d0
                dl = d0 + ((d2 * 0.5 - d1) * frac + (d1 * 2 - d2 * 0.5)) * frac
            else:
                dl = d0 + (d1 - d0) * frac
            last = dl
            out[c, i] = min(max(x[c, i] * in_gain + dl * wet, -1), 1)
    return out


@pytest.mark.parametrize("regen", [-40.0, 0.0])
@pytest.mark.parametrize("triangular", [False, True])
@pytest.mark.parametrize("quadratic", [False, True])
def test_flanger_reference(triangular, quadratic, regen):
    x = rng.uniform(-0.6, 0.6, (3, 1500))
    args = (8000, 1.5, 3.0, regen, 60.0, 3.0, 30.0)
    ref = _flanger_ref(x, *args, triangular, quadratic)
    out = AF.flanger(t64(x), *args, modulation="triangular" if triangular else "sinusoidal",
                     interpolation="quadratic" if quadratic else "linear").numpy()
    np.testing.assert_allclose(out, ref, atol=1e-12)


@pytest.mark.parametrize("interp", ["linear", "quadratic"])
def test_phaser_flanger_gradcheck(interp):
    x = t64(rng.uniform(-0.2, 0.2, (1, 2, 60))).requires_grad_()
    assert gradcheck(lambda v: AF.phaser(v, 1000, 0.6, 0.9, 5.0, 0.7, 40.0), (x,))
    for regen in (-50.0, 0.0):
        assert gradcheck(lambda v, r=regen: AF.flanger(v, 1000, delay=0.0, depth=8.0, regen=r,
                                                       speed=20.0, interpolation=interp), (x,))


def test_flanger():
    x = t64(rng.uniform(-0.5, 0.5, (1, 2, 2000)))
    np.testing.assert_allclose(AF.flanger(x, 8000, width=0.0).numpy(), x.numpy(), atol=1e-15)
    for interp in ("linear", "quadratic"):
        for mod in ("sinusoidal", "triangular"):
            y = AF.flanger(x, 8000, delay=1.0, regen=20.0, modulation=mod, interpolation=interp)
            assert y.shape == x.shape and np.abs(y.numpy()).max() <= 1.0
    # constant input, no feedback: the delayed copy equals the input once the line is full
    one = fiamma.full((1, 1, 400), 0.5, dtype=fiamma.float64)
    y = AF.flanger(one, 8000, depth=2.0).numpy()
    np.testing.assert_allclose(y[..., 100:], 0.5, atol=1e-7)
    with pytest.raises(ValueError, match="flanger.*4 channels"):
        AF.flanger(fiamma.zeros(5, 10), 8000)


# ----------------------------------------------------------------------------- loudness

@pytest.mark.parametrize("sr", [44100, 48000])
def test_loudness_sine(sr):
    # BS.1770: a 997 Hz sine at 0 dBFS in one channel reads -3.01 LKFS
    t = np.arange(3 * sr) / sr
    x = 0.1 * np.sin(2 * math.pi * 997 * t)[None]
    val = AF.loudness(t64(x), sr).item()
    assert abs(val - (-23.01)) < 0.1
    assert abs(AF.loudness(t64(2 * x), sr).item() - val - 20 * math.log10(2)) < 1e-3
    assert abs(AF.loudness(t64(np.concatenate([x, x])), sr).item() - val - 10 * math.log10(2)) \
        < 1e-3
    # gating: the silent blocks of 1 s of silence either side are dropped (ungated, the mean
    # energy would be 10 log10(5/3) = 2.2 dB lower); only the blocks straddling an edge count
    pad = np.concatenate([np.zeros((1, sr)), x, np.zeros((1, sr))], -1)
    assert val - 0.5 < AF.loudness(t64(pad), sr).item() < val - 0.3
    assert abs(AT.Loudness(sr)(t64(x).float()).item() - val) < 0.01


def test_loudness_gradient_and_errors():
    sr = 8000
    x = t64(rng.standard_normal((2, 1, 4000)) * 0.1).requires_grad_()
    out = AF.loudness(x, sr)
    assert out.shape == (2,)
    out.sum().backward()
    g = x.grad.numpy()
    v = rng.standard_normal(x.shape)
    eps = 1e-6
    with fiamma.no_grad():
        fp = AF.loudness(t64(x.detach().numpy() + eps * v), sr).sum().item()
        fm = AF.loudness(t64(x.detach().numpy() - eps * v), sr).sum().item()
    assert abs((fp - fm) / (2 * eps) - (g * v).sum()) < 1e-5 * max(1.0, abs((g * v).sum()))
    with pytest.raises(ValueError, match="loudness.*5 channels"):
        AF.loudness(fiamma.zeros(6, 8000), sr)


# ----------------------------------------------------------------------------- CMN

def _cmn_ref(x, win, min_win, center, norm_vars):
    T = x.shape[0]
    out = np.zeros_like(x)
    for t in range(T):
        if center:
            s = t - win // 2
            e = s + win
        else:
            s, e = t - win, t + 1
        if s < 0:
            e -= s
            s = 0
        if not center and e > t:
            e = max(t + 1, min_win)
        if e > T:
            s -= e - T
            e = T
            s = max(s, 0)
        seg = x[s:e]
        out[t] = x[t] - seg.mean(0)
        if norm_vars:
            out[t] = 0 if e - s == 1 else out[t] / seg.std(0)
    return out


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("norm_vars", [False, True])
def test_sliding_window_cmn(center, norm_vars):
    x = rng.standard_normal((2, 130, 5))
    out = AF.sliding_window_cmn(t64(x), 40, 15, center, norm_vars).numpy()
    for b in range(2):
        np.testing.assert_allclose(out[b], _cmn_ref(x[b], 40, 15, center, norm_vars), atol=1e-10)
    m = AT.SlidingWindowCmn(40, 15, center, norm_vars)(t64(x)).numpy()
    np.testing.assert_allclose(m, out)


# ----------------------------------------------------------------------------- vad

def _voice(sr, seconds):
    t = np.arange(int(sr * seconds)) / sr
    f0 = 140 + 20 * np.sin(2 * math.pi * 3 * t)
    ph = 2 * math.pi * np.cumsum(f0) / sr
    return sum(np.sin(k * ph) / k for k in range(1, 15)) * 0.2


def test_vad_trims_leading_silence():
    sr = 16000
    noise = rng.standard_normal(int(1.5 * sr)) * 1e-3
    x = np.concatenate([noise, _voice(sr, 1.0) + rng.standard_normal(sr) * 1e-3])
    out = AF.vad(t64(x), sr).numpy()
    removed = (len(x) - len(out)) / sr
    assert 1.0 < removed <= 1.5  # trimmed up to (at most search_time before) the voice onset
    np.testing.assert_array_equal(out, x[len(x) - len(out):])
    two = AT.Vad(sr)(t64(np.stack([x, x])))
    assert two.shape == (2, len(out))
    assert AF.vad(t64(noise), sr).shape == (0,)
    kept = AF.vad(t64(x), sr, pre_trigger_time=0.2).shape[-1]
    assert kept == len(out) + int(0.2 * sr + 0.5) or kept == len(x)


def test_vad_early_speech():
    # the first boot_time (0.35 s) learns the noise; the voice starts at 0.4 s
    sr = 16000
    x = np.concatenate([rng.standard_normal(int(0.4 * sr)) * 1e-3, _voice(sr, 1.0)])
    cut = len(x) - AF.vad(t64(x[None]), sr).shape[-1]
    assert 0.25 * sr <= cut <= 0.4 * sr
    # a pre-trigger time reaching before the first sample keeps everything
    assert AF.vad(t64(x[None]), sr, pre_trigger_time=0.5).shape == (1, len(x))


def test_list_audio_backends():
    assert fiamma.audio.list_audio_backends() == ["soundfile"]


def test_torchaudio_submodule_names():
    # programs import torchaudio.functional.filtering / .functional directly
    import fiamma.audio.functional.filtering as filtering
    import fiamma.audio.functional.functional as functional
    assert filtering.vad is AF.vad and filtering.lfilter is AF.lfilter
    assert functional.rnnt_loss is AF.rnnt_loss and set(functional.__all__) == set(AF.__all__)
    assert AF.filtering is filtering and AF.functional is functional
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        AF.nope  # noqa: B018
