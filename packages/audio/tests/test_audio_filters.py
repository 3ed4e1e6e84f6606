"""fiamma.audio.functional / transforms against float64 NumPy references written here."""

import math

import numpy as np
import pytest

import fiamma
import fiamma.audio.functional as AF
import fiamma.audio.transforms as AT
from fiamma.autograd import gradcheck, gradgradcheck

rng = np.random.default_rng(1)


def direct_form(x, a, b):
    """Reference lfilter: the difference equation sample by sample (x 1-D, float64)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64) / a[0]
    a = a / a[0]
    y = np.zeros(len(x))
    for n in range(len(x)):
        acc = 0.0
        for k in range(len(b)):
            if n - k >= 0:
                acc += b[k] * x[n - k]
        for k in range(1, len(a)):
            if n - k >= 0:
                acc -= a[k] * y[n - k]
        y[n] = acc
    return y


def stable_a(p):
    """Random monic-ish denominators with poles inside the unit circle."""
    poles = 0.9 * rng.uniform(0, 1, p) * np.exp(1j * rng.uniform(0, np.pi, p))
    poles = np.concatenate([poles[: p // 2], np.conj(poles[: p // 2]), poles.real[p // 2 * 2:]])
    return np.atleast_1d(np.real(np.poly(poles))) * rng.uniform(0.5, 2)


T = fiamma.tensor


@pytest.mark.parametrize("p", [0, 1, 2, 3, 6])
@pytest.mark.parametrize("n", [1, 5, 127, 128, 129, 1000])
def test_lfilter_matches_direct_form(p, n):
    a, b = stable_a(p), rng.standard_normal(p + 1)
    x = rng.standard_normal((2, n))
    y = AF.lfilter(T(x), T(a), T(b), clamp=False)
    ref = np.stack([direct_form(r, a, b) for r in x])
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-9, atol=1e-10 * max(1.0, np.abs(ref).max()))
    y32 = AF.lfilter(T(x).float(), T(a).float(), T(b).float(), clamp=False)
    assert y32.dtype == fiamma.float32
    # the float32 filter is the one of the float32-rounded coefficients (near the unit circle
    # that rounding alone moves the response by a few percent); it runs in float64 inside
    f32 = [v.astype(np.float32).astype(np.float64) for v in (x, a, b)]
    ref32 = np.stack([direct_form(r, f32[1], f32[2]) for r in f32[0]])
    # float32 output: errors relative to the signal's peak (a 6-pole filter's output reaches
    # tens while passing near zero)
    np.testing.assert_allclose(y32.numpy(), ref32, rtol=1e-4,
                               atol=5e-4 * np.abs(ref32).max() + 1e-6)


def test_lfilter_clamp_noncontiguous_and_batch_dims():
    a, b = stable_a(2), rng.standard_normal(3) * 3
    x = rng.standard_normal((3, 2, 400))
    xt = T(x.transpose(1, 0, 2).copy()).transpose(0, 1)  # non-contiguous view
    y = AF.lfilter(xt, T(a), T(b))
    ref = np.clip(np.stack([[direct_form(r, a, b) for r in c] for c in x]), -1, 1)
    assert tuple(y.shape) == (3, 2, 400)
    np.testing.assert_allclose(y.numpy(), ref, atol=1e-10)
    assert y.numpy().max() <= 1 and y.numpy().min() >= -1


def test_lfilter_multiple_filters():
    A = np.stack([stable_a(2) for _ in range(3)])
    B = rng.standard_normal((3, 3))
    x = rng.standard_normal((2, 3, 300))
    y = AF.lfilter(T(x), T(A), T(B), clamp=False, batching=True)
    ref = np.stack([[direct_form(x[i, f], A[f], B[f]) for f in range(3)] for i in range(2)])
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-9, atol=1e-10)
    x1 = rng.standard_normal((2, 300))
    y = AF.lfilter(T(x1), T(A), T(B), clamp=False, batching=False)
    assert tuple(y.shape) == (2, 3, 300)
    ref = np.stack([[direct_form(x1[i], A[f], B[f]) for f in range(3)] for i in range(2)])
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-9, atol=1e-10)


def test_lfilter_errors():
    x = fiamma.zeros(2, 10)
    with pytest.raises(ValueError, match="same"):
        AF.lfilter(x, T([1.0, 0.5]), T([1.0, 0.5, 0.1]))
    with pytest.raises(ValueError, match="batching"):
        AF.lfilter(x, T([[1.0, 0.5]] * 3), T([[1.0, 0.5]] * 3))
    with pytest.raises(TypeError, match="float32 or float64"):
        AF.lfilter(fiamma.zeros(2, 10, dtype=fiamma.int32), T([1.0]), T([1.0]))


def test_filtfilt_reference():
    a, b = stable_a(2), rng.standard_normal(3)
    x = rng.standard_normal(300)
    y = AF.filtfilt(T(x), T(a), T(b), clamp=False)
    ref = direct_form(direct_form(x, a, b)[::-1], a, b)[::-1]
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-9, atol=1e-10)


def rbj(kind, sr, f0, Q):
    w0 = 2 * math.pi * f0 / sr
    al, c = math.sin(w0) / 2 / Q, math.cos(w0)
    a = [1 + al, -2 * c, 1 - al]
    b = {"lowpass": [(1 - c) / 2, 1 - c, (1 - c) / 2],
         "highpass": [(1 + c) / 2, -(1 + c), (1 + c) / 2],
         "bandpass": [al, 0, -al],
         "bandreject": [1, -2 * c, 1],
         "allpass": [1 - al, -2 * c, 1 + al]}[kind]
    return a, b


@pytest.mark.parametrize("kind", ["lowpass", "highpass", "bandpass", "bandreject", "allpass"])
def test_biquads(kind):
    sr, f0, Q = 16000, 1500.0, 0.9
    x = rng.standard_normal((2, 500)) * 0.3
    fn = getattr(AF, f"{kind}_biquad")
    y = fn(T(x), sr, f0, Q)
    a, b = rbj(kind, sr, f0, Q)
    ref = np.clip(np.stack([direct_form(r, a, b) for r in x]), -1, 1)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-9, atol=1e-10)
    ya = AF.biquad(T(x), b[0], b[1], b[2], a[0], a[1], a[2])
    np.testing.assert_allclose(ya.numpy(), ref, rtol=1e-9, atol=1e-10)


def test_biquad_frequency_behaviour():
    sr = 16000
    t = np.arange(sr) / sr
    lo, hi = 0.4 * np.sin(2 * np.pi * 200 * t), 0.4 * np.sin(2 * np.pi * 6000 * t)
    amp = lambda y: np.sqrt(2) * y.numpy()[4000:].std()  # noqa: E731  (tone amplitude)
    assert amp(AF.lowpass_biquad(T(lo), sr, 1000.0)) > 0.38
    assert amp(AF.lowpass_biquad(T(hi), sr, 1000.0)) < 0.02
    assert amp(AF.highpass_biquad(T(hi), sr, 1000.0)) > 0.38
    assert amp(AF.highpass_biquad(T(lo), sr, 1000.0)) < 0.02
    assert abs(amp(AF.allpass_biquad(T(hi), sr, 1000.0)) - 0.4) < 0.01
    bp = AF.bandpass_biquad(T(0.4 * np.sin(2 * np.pi * 1000 * t)), sr, 1000.0)
    assert abs(amp(bp) - 0.4) < 0.01
    assert amp(AF.bandreject_biquad(T(0.4 * np.sin(2 * np.pi * 1000 * t)), sr, 1000.0)) < 0.01


def bessel_i0(z):
    """Modified Bessel function I0 by its power series sum_k ((z/2)^k / k!)^2."""
    term = np.ones_like(z, dtype=np.float64)
    total = term.copy()
    for k in range(1, 80):
        term = term * (z / 2) ** 2 / k ** 2
        total = total + term
    return total


def reference_resample(x, orig, new, lw=6, rolloff=0.99, method="sinc_interp_hann", beta=None):
    """Per-output-sample windowed sinc: y[m] = sum_n x[n] k(base (n/orig - m/new)) base/orig over
    the window of n torchaudio's polyphase frames cover (orig/new reduced by their gcd)."""
    g = math.gcd(orig, new)
    orig, new = orig // g, new // g
    base = min(orig, new) * rolloff
    width = math.ceil(lw * orig / base)
    L = len(x)
    out = np.zeros(math.ceil(new * L / orig))
    beta = 14.769656459379492 if beta is None else beta
    for m in range(len(out)):
        f = m // new
        n = np.arange(f * orig - width, f * orig + width + orig)
        t = np.clip(base * (n / orig - m / new), -lw, lw)
        if method == "sinc_interp_hann":
            w = np.cos(t * np.pi / lw / 2) ** 2
        else:
            w = bessel_i0(beta * np.sqrt(1 - (t / lw) ** 2)) / bessel_i0(np.array([beta]))
        with np.errstate(invalid="ignore", divide="ignore"):
            s = np.where(t == 0, 1.0, np.sin(np.pi * t) / (np.pi * t))
        ok = (n >= 0) & (n < L)
        out[m] = np.sum(x[n[ok]] * (s * w)[ok]) * base / orig
    return out


@pytest.mark.parametrize("orig,new", [(16000, 8000), (8000, 16000), (44100, 16000),
                                      (16000, 44100), (3, 2), (5, 7)])
@pytest.mark.parametrize("method", ["sinc_interp_hann", "sinc_interp_kaiser"])
def test_resample_matches_reference(orig, new, method):
    x = rng.standard_normal(301)
    y = AF.resample(T(x), orig, new, resampling_method=method)
    ref = reference_resample(x, orig, new, method=method)
    assert tuple(y.shape) == ref.shape
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-9, atol=1e-10)
    y2 = AF.resample(T(x), orig, new, lowpass_filter_width=3, rolloff=0.8,
                     resampling_method=method, beta=8.0)
    np.testing.assert_allclose(y2.numpy(), reference_resample(x, orig, new, 3, 0.8, method, 8.0),
                               rtol=1e-9, atol=1e-10)


def _tone(y, sr):
    """(frequency, amplitude) of the dominant sinusoid in the central part of y."""
    y = y[len(y) // 8: -len(y) // 8]
    win = np.hanning(len(y))
    spec = np.abs(np.fft.rfft(y * win))
    k = int(np.argmax(spec))
    # parabolic interpolation of the peak on the log spectrum
    a, b, c = np.log(spec[k - 1: k + 2])
    d = 0.5 * (a - c) / (a - 2 * b + c)
    return (k + d) * sr / len(y), np.abs(y).max()


def test_resample_keeps_tones():
    sr = 16000
    x = np.sin(2 * np.pi * 440 * np.arange(2 * sr) / sr).astype(np.float32)
    y, cur = T(x), sr
    for new in (8000, 22050, 16000, 44100, 8000):
        y = AF.resample(y, cur, new)
        cur = new
        f, amp = _tone(y.numpy().astype(np.float64), cur)
        assert abs(f - 440) < 0.5, (new, f)
        assert abs(amp - 1) < 0.01, (new, amp)
    assert y.dtype == fiamma.float32
    # a tone above the new Nyquist is removed
    hi = np.sin(2 * np.pi * 6000 * np.arange(sr) / sr)
    assert np.abs(AF.resample(T(hi), sr, 8000).numpy()[1000:-1000]).max() < 0.01


def test_resample_identity_batch_and_transform():
    x = T(rng.standard_normal((2, 3, 100)))
    assert AF.resample(x, 8000, 8000) is x
    y = AF.resample(x, 8000, 12000)
    assert tuple(y.shape) == (2, 3, 150)
    np.testing.assert_allclose(y.numpy()[1, 2], AF.resample(x[1, 2], 8000, 12000).numpy(),
                               atol=1e-12)
    r = AT.Resample(8000, 12000)
    np.testing.assert_allclose(r(x.float()).numpy(), y.numpy(), atol=1e-5)
    np.testing.assert_allclose(r(x).numpy(), y.numpy(), atol=1e-12)
    with pytest.raises(ValueError, match="resampling_method"):
        AF.resample(x, 8000, 12000, resampling_method="linear")


def test_gradients():
    d = fiamma.float64
    x = fiamma.tensor(rng.standard_normal((2, 3, 9)) * 0.1, dtype=d, requires_grad=True)
    A = fiamma.tensor(np.stack([stable_a(2) for _ in range(3)]), dtype=d, requires_grad=True)
    B = fiamma.tensor(rng.standard_normal((3, 3)), dtype=d, requires_grad=True)
    assert gradcheck(lambda x, a, b: AF.lfilter(x, a, b, clamp=False), (x, A, B))
    assert gradcheck(lambda x, a, b: AF.lfilter(x, a, b, clamp=False, batching=False),
                     (x, A, B))
    assert gradcheck(lambda x, a, b: AF.filtfilt(x, a[0], b[0], clamp=False), (x, A, B))
    small = (x[:1, :, :6].detach().requires_grad_(), A, B)
    assert gradgradcheck(lambda x, a, b: AF.lfilter(x, a, b, clamp=False), small)
    assert gradcheck(lambda x: AF.resample(x, 3, 2), (x,))
    assert gradcheck(lambda x: AF.resample(x, 2, 5, resampling_method="sinc_interp_kaiser"),
                     (x,))
    f0 = fiamma.tensor(1000.0, dtype=d, requires_grad=True)
    q = fiamma.tensor(0.8, dtype=d, requires_grad=True)
    assert gradcheck(lambda x, f, q: AF.lowpass_biquad(x, 8000, f, q), (x, f0, q))
    assert gradcheck(lambda x: AF.preemphasis(x, 0.9), (x,))
    assert gradcheck(lambda x: AF.deemphasis(x, 0.9), (x,))


def test_mu_law():
    x = np.linspace(-1, 1, 1001)
    enc = AF.mu_law_encoding(T(x), 256)
    mu = 255.0
    ref = ((np.sign(x) * np.log1p(mu * np.abs(x)) / np.log1p(mu) + 1) / 2 * mu + 0.5)
    np.testing.assert_array_equal(enc.numpy(), ref.astype(np.int64))
    assert enc.dtype == fiamma.int64 and enc.numpy().min() == 0 and enc.numpy().max() == 255
    dec = AF.mu_law_decoding(enc, 256)
    assert np.abs(dec.numpy() - x).max() < 0.04  # companding error of 8-bit mu-law
    np.testing.assert_array_equal(AT.MuLawEncoding(256)(T(x)).numpy(), enc.numpy())
    np.testing.assert_allclose(AT.MuLawDecoding(256)(enc).numpy(), dec.numpy())


def test_emphasis_gain_db():
    x = rng.standard_normal((2, 50)) * 0.2
    pre = AF.preemphasis(T(x), 0.9).numpy()
    ref = x.copy()
    ref[:, 1:] -= 0.9 * x[:, :-1]
    np.testing.assert_allclose(pre, ref, atol=1e-12)
    np.testing.assert_allclose(AF.deemphasis(T(pre), 0.9).numpy(), x, atol=1e-12)
    np.testing.assert_allclose(AT.Deemphasis(0.9)(AT.Preemphasis(0.9)(T(x))).numpy(), x,
                               atol=1e-12)
    np.testing.assert_allclose(AF.gain(T(x), 6.0).numpy(), x * 10 ** 0.3, atol=1e-12)
    s = np.abs(rng.standard_normal((3, 4, 5))) + 1e-12
    db = AF.amplitude_to_DB(T(s), 10.0, 1e-10, 0.0)
    np.testing.assert_allclose(db.numpy(), 10 * np.log10(np.maximum(s, 1e-10)), atol=1e-9)
    np.testing.assert_allclose(AF.DB_to_amplitude(db, 1.0, 1.0).numpy(), s, rtol=1e-9)
    top = AF.amplitude_to_DB(T(s), 10.0, 1e-10, 0.0, top_db=5.0).numpy()
    np.testing.assert_allclose(top, np.maximum(db.numpy(), db.numpy().max() - 5.0), atol=1e-9)


def test_vol_and_fade():
    x = rng.uniform(-0.6, 0.6, (2, 100))
    np.testing.assert_allclose(AT.Vol(2.0)(T(x)).numpy(), np.clip(2 * x, -1, 1))
    np.testing.assert_allclose(AT.Vol(6.0, "db")(T(x)).numpy(), np.clip(x * 10 ** 0.3, -1, 1))
    np.testing.assert_allclose(AT.Vol(4.0, "power")(T(x)).numpy(), np.clip(2 * x, -1, 1))
    with pytest.raises(ValueError):
        AT.Vol(-1.0)
    n, fi, fo = 100, 10, 20
    shapes = {
        "linear": (lambda f: f, lambda f: 1 - f),
        "exponential": (lambda f: 2 ** (f - 1) * f, lambda f: 2 ** -f * (1 - f)),
        "logarithmic": (lambda f: np.log10(0.1 + f) + 1, lambda f: np.log10(1.1 - f) + 1),
        "quarter_sine": (lambda f: np.sin(f * np.pi / 2),
                         lambda f: np.sin(f * np.pi / 2 + np.pi / 2)),
        "half_sine": (lambda f: np.sin(f * np.pi - np.pi / 2) / 2 + 0.5,
                      lambda f: np.sin(f * np.pi + np.pi / 2) / 2 + 0.5),
    }
    for shape, (fin, fout) in shapes.items():
        y = AT.Fade(fi, fo, shape)(T(x)).numpy()
        env = np.clip(np.concatenate([fin(np.linspace(0, 1, fi)), np.ones(n - fi)]), 0, 1)
        env = env * np.clip(np.concatenate([np.ones(n - fo), fout(np.linspace(0, 1, fo))]), 0, 1)
        np.testing.assert_allclose(y, x * env, atol=1e-12, err_msg=shape)
    with pytest.raises(ValueError, match="fade_shape"):
        AT.Fade(1, 1, "cubic")


@pytest.mark.parity
def test_lfilter_gradients_match_torch_autograd():
    """torchaudio does not import with this torch, so the reference is torch autograd through a
    direct-form loop written with torch ops (tiny sizes)."""
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 40)) * 0.2
    a, b = stable_a(3), rng.standard_normal(4)
    g = rng.standard_normal((2, 40))
    tx, ta, tb = (torch.tensor(v, requires_grad=True) for v in (x, a, b))
    an, bn = ta / ta[0], tb / ta[0]
    rows = []
    for r in range(2):
        ys = []
        for n in range(40):
            acc = sum(bn[k] * tx[r, n - k] for k in range(4) if n - k >= 0)
            acc = acc - sum(an[k] * ys[n - k] for k in range(1, 4) if n - k >= 0)
            ys.append(acc)
        rows.append(torch.stack(ys))
    ty = torch.stack(rows)
    (ty * torch.tensor(g)).sum().backward()
    fx, fa, fb = (fiamma.tensor(v, requires_grad=True) for v in (x, a, b))
    fy = AF.lfilter(fx, fa, fb, clamp=False)
    (fy * fiamma.tensor(g)).sum().backward()
    np.testing.assert_allclose(fy.detach().numpy(), ty.detach().numpy(), rtol=1e-9, atol=1e-12)
    for f, t in ((fx, tx), (fa, ta), (fb, tb)):
        np.testing.assert_allclose(f.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_long_fir_and_empty_inputs():
    x = rng.standard_normal((3, 500))
    b = rng.standard_normal(151) * 0.05
    a = np.zeros(151)
    a[0] = 1.0
    y = AF.lfilter(T(x), T(a), T(b), clamp=False)
    ref = np.stack([np.convolve(r, b)[:500] for r in x])
    np.testing.assert_allclose(y.numpy(), ref, atol=1e-12)
    a[5] = 0.1  # a long denominator too: blocks grow with the order
    y = AF.lfilter(T(x), T(a), T(b), clamp=False)
    np.testing.assert_allclose(y.numpy(), np.stack([direct_form(r, a, b) for r in x]),
                               atol=1e-10)
    e = fiamma.zeros(2, 0)
    assert tuple(AF.lfilter(e, T([1.0, -0.5]), T([1.0, 0.0])).shape) == (2, 0)
    assert tuple(AF.resample(e, 16000, 8000).shape) == (2, 0)
    assert tuple(AF.resample(fiamma.zeros(0, 5), 16000, 8000).shape) == (0, 3)
    assert tuple(AF.preemphasis(e).shape) == (2, 0)
