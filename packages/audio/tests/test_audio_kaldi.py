"""fiamma.audio.compliance.kaldi: Kaldi's fbank / mfcc / spectrogram features, checked against a
float64 NumPy computation of Kaldi's recipe, by their properties, for gradients and bad input;
parity with torchaudio.compliance.kaldi (marked parity)."""

import math

import numpy as np
import pytest

import fiamma
from fiamma.audio.compliance import kaldi

RNG = np.random.default_rng(0)
WAV = (RNG.standard_normal((2, 6000)) * 0.1).astype(np.float64)


def np_frames(x, size, shift, snip_edges):
    n = len(x)
    if snip_edges:
        count = 1 + (n - size) // shift
        return np.stack([x[i * shift:i * shift + size] for i in range(count)])
    count = (n + shift // 2) // shift
    pad = size // 2 - shift // 2
    ext = np.concatenate([x[:pad][::-1], x, x[::-1]])  # mirrored at both ends
    return np.stack([ext[i * shift:i * shift + size] for i in range(count)])


def np_fbank(x, *, num_bins=23, sr=16000.0, snip_edges=True, use_energy=False,
             low=20.0, high=0.0):
    """Kaldi's recipe, written out in float64 (default options: povey window, pre-emphasis 0.97,
    DC removal, raw energy, power spectrum, log)."""
    size, shift = int(sr * 0.025), int(sr * 0.010)
    padded = 1 << (size - 1).bit_length()
    f = np_frames(x, size, shift, snip_edges)
    f = f - f.mean(1, keepdims=True)
    energy = np.log(np.maximum((f ** 2).sum(1), 2.0 ** -23))
    f = f - 0.97 * np.concatenate([f[:, :1], f[:, :-1]], 1)
    n = np.arange(size)
    f = f * (0.5 - 0.5 * np.cos(2 * np.pi * n / (size - 1))) ** 0.85
    f = np.concatenate([f, np.zeros((len(f), padded - size))], 1)
    power = np.abs(np.fft.rfft(f)) ** 2
    high = high if high > 0 else sr / 2 + high
    mel = lambda hz: 1127.0 * np.log(1 + hz / 700.0)  # noqa: E731
    lo_m, hi_m = mel(low), mel(high)
    d = (hi_m - lo_m) / (num_bins + 1)
    bin_mel = mel(sr / padded * np.arange(padded // 2))
    banks = np.zeros((num_bins, padded // 2))
    for b in range(num_bins):
        left, center, right = lo_m + b * d, lo_m + (b + 1) * d, lo_m + (b + 2) * d
        up = (bin_mel - left) / (center - left)
        down = (right - bin_mel) / (right - center)
        banks[b] = np.maximum(0.0, np.minimum(up, down))
    out = np.log(np.maximum(power[:, :padded // 2] @ banks.T, 2.0 ** -23))
    if use_energy:
        out = np.concatenate([np.maximum(energy, 0.0)[:, None], out], 1)  # floor log(1) = 0
    return out, energy, power


@pytest.mark.parametrize("snip_edges", [True, False])
def test_fbank_matches_the_recipe_in_float64(snip_edges):
    got = kaldi.fbank(fiamma.tensor(WAV), snip_edges=snip_edges, channel=0).numpy()
    want, _, _ = np_fbank(WAV[0], snip_edges=snip_edges)
    assert got.shape == want.shape == ((1 + (6000 - 400) // 160) if snip_edges else
                                       (6000 + 80) // 160, 23)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_fbank_energy_column_and_htk_order():
    want, _, _ = np_fbank(WAV[1], use_energy=True, num_bins=30, low=50.0, high=-200.0)
    got = kaldi.fbank(fiamma.tensor(WAV), use_energy=True, num_mel_bins=30, low_freq=50.0,
                      high_freq=-200.0).numpy()  # channel=-1 reads as channel 0 ... see below
    got1 = kaldi.fbank(fiamma.tensor(WAV[1:]), use_energy=True, num_mel_bins=30,
                       low_freq=50.0, high_freq=-200.0).numpy()
    np.testing.assert_allclose(got1, want, rtol=1e-9, atol=1e-9)
    assert not np.allclose(got, got1)  # channel -1 is the first channel, not the last
    htk = kaldi.fbank(fiamma.tensor(WAV[1:]), use_energy=True, htk_compat=True,
                      num_mel_bins=30, low_freq=50.0, high_freq=-200.0).numpy()
    np.testing.assert_allclose(htk, np.concatenate([want[:, 1:], want[:, :1]], 1), rtol=1e-9)


def test_spectrogram_and_mfcc_follow_from_the_same_recipe():
    x = fiamma.tensor(WAV[:1])
    _, energy, power = np_fbank(WAV[0])
    spec = kaldi.spectrogram(x).numpy()
    np.testing.assert_allclose(spec[:, 1:], np.log(np.maximum(power[:, 1:], 2.0 ** -23)),
                               rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(spec[:, 0], np.maximum(energy, 0.0), rtol=1e-9, atol=1e-12)
    fb = kaldi.fbank(x).numpy()
    m = 23
    dct = np.cos(np.pi / m * (np.arange(m) + 0.5)[None, :] * np.arange(13)[:, None])
    dct *= math.sqrt(2.0 / m)
    dct[0] = math.sqrt(1.0 / m)
    lifter = 1 + 11.0 * np.sin(np.pi * np.arange(13) / 22.0)
    np.testing.assert_allclose(kaldi.mfcc(x).numpy(), (fb @ dct.T) * lifter, rtol=1e-9,
                               atol=1e-9)


def test_a_tone_lights_up_the_mel_bin_around_its_frequency():
    t = np.arange(16000) / 16000.0
    tone = fiamma.tensor(np.sin(2 * np.pi * 1000.0 * t)[None])
    fb = kaldi.fbank(tone, num_mel_bins=40).numpy()
    _, centers = kaldi.get_mel_banks(40, 512, 16000.0, 20.0, 0.0, 100.0, -500.0, 1.0)
    peak = fb.mean(0).argmax()
    assert abs(centers.numpy()[peak] - 1000.0) < 80.0


def test_mel_banks_are_unit_peaked_triangles_and_vtln_keeps_the_ends():
    banks, centers = kaldi.get_mel_banks(23, 512, 16000.0, 20.0, 0.0, 100.0, -500.0, 1.0)
    b = banks.numpy()
    assert b.shape == (23, 256) and (b >= 0).all() and (b.max(1) > 0.8).all()
    assert np.all(np.diff(centers.numpy()) > 0)
    f = fiamma.tensor([20.0, 50.0, 1000.0, 7000.0, 8000.0], dtype=fiamma.float64)
    w = kaldi.vtln_warp_freq(100.0, 7500.0, 20.0, 8000.0, 0.9, f).numpy()
    assert w[0] == 20.0 and w[-1] == 8000.0
    assert w[2] == pytest.approx(1000.0 / 0.9)
    warped, _ = kaldi.get_mel_banks(23, 512, 16000.0, 20.0, 0.0, 100.0, -500.0, 0.9)
    assert warped.shape == banks.shape and not np.allclose(warped.numpy(), b)
    assert kaldi.inverse_mel_scale_scalar(kaldi.mel_scale_scalar(440.0)) == pytest.approx(440.0)


def test_gradients_flow_to_the_waveform():
    pytest.importorskip("fiamma.autograd")
    x = fiamma.tensor(WAV[:1, :1200], requires_grad=True)
    y = kaldi.mfcc(x, use_energy=True)
    y.sum().backward()
    g = x.grad.numpy()
    assert g.shape == (1, 1200) and np.isfinite(g).all() and np.abs(g).sum() > 0
    from fiamma.autograd import gradcheck
    small = fiamma.tensor(WAV[:1, :500], requires_grad=True)
    assert gradcheck(lambda w: kaldi.fbank(w, num_mel_bins=8, frame_length=10.0,
                                           frame_shift=10.0), (small,), eps=1e-6, atol=1e-4)


def test_bad_input_names_the_op():
    with pytest.raises(ValueError, match=r"fbank: waveform must have shape \(channels, time\)"):
        kaldi.fbank(fiamma.zeros(100))
    with pytest.raises(ValueError, match="mfcc.*window size 400"):
        kaldi.mfcc(fiamma.zeros(1, 100))
    with pytest.raises(ValueError, match="spectrogram: invalid channel 3"):
        kaldi.spectrogram(fiamma.zeros(2, 1000), channel=3)
    with pytest.raises(ValueError, match="invalid window type 'box'"):
        kaldi.fbank(fiamma.zeros(1, 1000), window_type="box")
    with pytest.raises(ValueError, match="num_bins must be greater than 3"):
        kaldi.fbank(fiamma.zeros(1, 1000), num_mel_bins=3)
    with pytest.raises(ValueError, match="num_ceps"):
        kaldi.mfcc(fiamma.zeros(1, 1000), num_ceps=30)
    with pytest.raises(TypeError, match="floating point"):
        kaldi.fbank(fiamma.zeros(1, 1000, dtype=fiamma.int16))
    assert kaldi.fbank(fiamma.zeros(1, 1000), min_duration=1.0).shape == (0, 23)


@pytest.mark.parity
@pytest.mark.parametrize("fn", ["fbank", "mfcc", "spectrogram"])
@pytest.mark.parametrize("opts", [
    {}, {"snip_edges": False}, {"window_type": "hamming", "raw_energy": False},
    {"window_type": "blackman", "round_to_power_of_two": False, "frame_length": 20.0},
    {"window_type": "rectangular", "preemphasis_coefficient": 0.0, "remove_dc_offset": False,
     "energy_floor": 0.0},
    {"subtract_mean": True, "channel": 1},
    {"use_energy": True, "htk_compat": True, "vtln_warp": 0.9, "num_mel_bins": 40},
])
def test_parity_torchaudio(fn, opts):
    torch = pytest.importorskip("torch")
    try:
        import torchaudio.compliance.kaldi as tk
    except Exception as e:  # noqa: BLE001 - also a torchaudio whose C library does not load
        pytest.skip(f"torchaudio.compliance.kaldi does not import: {e}")
    if fn == "spectrogram":
        opts = {k: v for k, v in opts.items()
                if k not in ("use_energy", "htk_compat", "vtln_warp", "num_mel_bins")}
    w = WAV.astype(np.float32)
    want = getattr(tk, fn)(torch.tensor(w), **opts).numpy()
    got = getattr(kaldi, fn)(fiamma.tensor(w), **opts).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-4 * np.abs(want).max())
