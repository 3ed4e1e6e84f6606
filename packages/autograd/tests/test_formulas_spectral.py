"""First and second derivatives of stft (w.r.t. the signal) and istft (w.r.t. the spectrum)
against finite differences (float64). Skipped where core has no stft."""

import numpy as np
import pytest
from _formula_check import check, rand

import fiamma

pytestmark = pytest.mark.skipif(not hasattr(fiamma, "stft"),
                                reason="core's stft / istft are not available")


@pytest.mark.parametrize("kw", [
    dict(n_fft=8, hop_length=2),
    dict(n_fft=8, hop_length=3, win_length=6, pad_mode="constant", normalized=True),
    dict(n_fft=6, hop_length=2, center=False, onesided=False),
    dict(n_fft=8, hop_length=4, pad_mode="replicate"),
])
def test_stft(kw):
    rng = np.random.default_rng(0)
    w = fiamma.tensor(np.hanning(kw.get("win_length", kw["n_fft"]) + 2)[1:-1],
                      dtype=fiamma.float64)
    check(lambda t: fiamma.stft(t, window=w, return_complex=False, **kw), rand(20, rng=rng))
    check(lambda t: fiamma.stft(t, return_complex=False, **kw), rand(2, 16, rng=rng))


@pytest.mark.parametrize("kw", [
    dict(n_fft=8, hop_length=2),
    dict(n_fft=9, hop_length=3, win_length=6, pad_mode="constant", normalized=True),
    dict(n_fft=6, hop_length=2, center=False, onesided=False),
    dict(n_fft=10, hop_length=4, pad_mode="circular"),
])
def test_stft_power(kw):
    rng = np.random.default_rng(2)
    w = fiamma.tensor(np.hanning(kw.get("win_length", kw["n_fft"]) + 2)[1:-1],
                      dtype=fiamma.float64)
    check(lambda t: fiamma.stft_power(t, window=w, **kw), rand(20, rng=rng))
    check(lambda t: fiamma.stft_power(t, **kw), rand(2, 16, rng=rng))


def test_stft_power_matches_stft_graph():
    """The fused op's gradient equals the one through stft -> square -> sum."""
    rng = np.random.default_rng(3)
    x = rand(2, 50, rng=rng)
    w = fiamma.hann_window(16, dtype=fiamma.float64)
    g = rand(2, 9, 11, rng=rng)
    a = x.detach().requires_grad_()
    fiamma.stft_power(a, 16, 5, window=w).backward(g)
    b = x.detach().requires_grad_()
    fiamma.stft(b, 16, 5, window=w).pow(2).sum(-1).backward(g)
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kw", [
    dict(n_fft=8, hop_length=2),
    dict(n_fft=8, hop_length=2, normalized=True, length=11),
    dict(n_fft=6, hop_length=2, center=False, onesided=False),
])
def test_istft(kw):
    rng = np.random.default_rng(1)
    n = kw["n_fft"]
    w = fiamma.tensor(np.hanning(n + 2)[1:-1], dtype=fiamma.float64)
    nfreq = n if kw.get("onesided") is False else n // 2 + 1
    check(lambda s: fiamma.istft(s, window=w, **kw), rand(nfreq, 7, 2, rng=rng))
    check(lambda s: fiamma.istft(s, window=w, **kw), rand(2, nfreq, 5, 2, rng=rng))
