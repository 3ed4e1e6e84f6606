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
