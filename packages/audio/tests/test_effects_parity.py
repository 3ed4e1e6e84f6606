"""Effects, convolutions, loudness, CMN, vad and beamforming against torchaudio.functional in
float64 (marked parity; skipped where torch or a loadable torchaudio is missing)."""

import math

import numpy as np
import pytest

import fiamma
import fiamma.audio.functional as AF

pytestmark = pytest.mark.parity
rng = np.random.default_rng(5)


def _torchaudio():
    torch = pytest.importorskip("torch")
    try:
        import torchaudio.functional as TAF
    except Exception as e:  # noqa: BLE001 - a torchaudio whose C library does not load
        pytest.skip(f"torchaudio.functional does not import: {e}")
    return torch, TAF


def close(got, want, tol=1e-10):
    got = got.numpy()
    want = want.detach().numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * max(1.0, np.abs(want).max()))


SR = 16000
EFFECTS = {
    "band_biquad": lambda m, w: m.band_biquad(w, SR, 1000.0, 2.0),
    "band_biquad_noise": lambda m, w: m.band_biquad(w, SR, 1000.0, 2.0, True),
    "bass_biquad": lambda m, w: m.bass_biquad(w, SR, 6.0, 150.0),
    "treble_biquad": lambda m, w: m.treble_biquad(w, SR, -4.0, 2500.0, 0.5),
    "equalizer_biquad": lambda m, w: m.equalizer_biquad(w, SR, 1200.0, 5.0, 1.3),
    "deemph_biquad": lambda m, w: m.deemph_biquad(w, 44100),
    "riaa_biquad": lambda m, w: m.riaa_biquad(w, 48000),
    "contrast": lambda m, w: m.contrast(w, 60.0),
    "dcshift": lambda m, w: m.dcshift(w * 2, 0.6, 0.05),
    "dcshift_neg": lambda m, w: m.dcshift(w * 2, -0.6, 0.05),
    "overdrive": lambda m, w: m.overdrive(w, 15, 30),
    "phaser": lambda m, w: m.phaser(w, SR),
    "phaser_triangle": lambda m, w: m.phaser(w, SR, 0.5, 0.8, 2.0, 0.6, 1.5, False),
    "flanger": lambda m, w: m.flanger(w, SR, 1.0, 3.0, 30.0, 50.0, 2.0, 20.0),
    "flanger_quadratic": lambda m, w: m.flanger(w, SR, 1.0, 3.0, 0.0, 50.0, 2.0, 20.0,
                                                "triangular", "quadratic"),
}


@pytest.mark.parametrize("name", sorted(EFFECTS))
def test_effects(name):
    torch, TAF = _torchaudio()
    x = rng.uniform(-0.5, 0.5, (2, 3, 4000))
    close(EFFECTS[name](AF, fiamma.tensor(x)), EFFECTS[name](TAF, torch.tensor(x)))


@pytest.mark.parametrize("mode", ["full", "valid", "same"])
def test_convolutions(mode):
    torch, TAF = _torchaudio()
    x, y = rng.standard_normal((3, 1, 300)), rng.standard_normal((1, 2, 41))
    for fn in ("convolve", "fftconvolve"):
        close(getattr(AF, fn)(fiamma.tensor(x), fiamma.tensor(y), mode),
              getattr(TAF, fn)(torch.tensor(x), torch.tensor(y), mode))


def test_add_noise_speed_loudness_cmn():
    torch, TAF = _torchaudio()
    w, n = rng.standard_normal((3, 500)), rng.standard_normal((3, 500))
    snr, lengths = [1.0, 2.0, 3.0], [500, 200, 10]
    close(AF.add_noise(fiamma.tensor(w), fiamma.tensor(n), fiamma.tensor(snr),
                       fiamma.tensor(lengths)),
          TAF.add_noise(torch.tensor(w), torch.tensor(n), torch.tensor(snr, dtype=torch.float64),
                        torch.tensor(lengths)))
    x = rng.uniform(-0.5, 0.5, (2, 8000))
    for factor in (0.9, 1.1):
        a, al = AF.speed(fiamma.tensor(x), SR, factor, fiamma.tensor([8000, 5000]))
        b, bl = TAF.speed(torch.tensor(x), SR, factor, torch.tensor([8000, 5000]))
        close(a, b)
        assert al.tolist() == bl.tolist()
    s = 0.1 * np.sin(2 * math.pi * 997 * np.arange(2 * 44100) / 44100)
    st = np.stack([s, rng.standard_normal(2 * 44100) * 0.05])[None]
    close(AF.loudness(fiamma.tensor(st), 44100), TAF.loudness(torch.tensor(st), 44100))
    spec = rng.standard_normal((2, 120, 13))
    for center in (False, True):
        for norm_vars in (False, True):
            close(AF.sliding_window_cmn(fiamma.tensor(spec), 40, 15, center, norm_vars),
                  TAF.sliding_window_cmn(torch.tensor(spec), 40, 15, center, norm_vars))


def test_vad():
    torch, TAF = _torchaudio()
    t = np.arange(SR) / SR
    ph = 2 * math.pi * np.cumsum(140 + 20 * np.sin(2 * math.pi * 3 * t)) / SR
    voice = sum(np.sin(k * ph) / k for k in range(1, 15)) * 0.2
    x = np.concatenate([rng.standard_normal(int(1.5 * SR)) * 1e-3, voice])
    close(AF.vad(fiamma.tensor(x), SR), TAF.vad(torch.tensor(x), SR))


def test_beamforming():
    torch, TAF = _torchaudio()
    X = rng.standard_normal((2, 4, 9, 30)) + 1j * rng.standard_normal((2, 4, 9, 30))
    m = rng.uniform(0, 1, (2, 9, 30))
    ps, pst = AF.psd(fiamma.tensor(X), fiamma.tensor(m)), TAF.psd(torch.tensor(X), torch.tensor(m))
    pn = AF.psd(fiamma.tensor(X), fiamma.tensor(1 - m))
    pnt = TAF.psd(torch.tensor(X), torch.tensor(1 - m))
    close(ps, pst)
    close(AF.mvdr_weights_souden(ps, pn, 1), TAF.mvdr_weights_souden(pst, pnt, 1))
    for n_iter in (1, 3):
        close(AF.rtf_power(ps, pn, 2, n_iter), TAF.rtf_power(pst, pnt, 2, n_iter))
    rtf, rtft = AF.rtf_power(ps, pn, 0), TAF.rtf_power(pst, pnt, 0)
    w, wt = AF.mvdr_weights_rtf(rtf, pn, 0), TAF.mvdr_weights_rtf(rtft, pnt, 0)
    close(w, wt)
    close(AF.apply_beamforming(w, fiamma.tensor(X)), TAF.apply_beamforming(wt, torch.tensor(X)))
    close(AF.rtf_evd(ps).abs(), TAF.rtf_evd(pst).abs())
    a, b = rng.standard_normal((5, 9)), rng.standard_normal((5, 9))
    args = (rng.standard_normal(5), a @ a.T, rng.standard_normal(5), b @ b.T)
    close(AF.frechet_distance(*map(fiamma.tensor, args)),
          TAF.frechet_distance(*map(torch.tensor, args)))
