"""fiamma.signal.windows against NumPy's windows and closed forms, periodic = the first M
points of the M + 1 symmetric window, errors, and PyTorch parity."""

import math

import numpy as np
import pytest

import fiamma
from fiamma.signal import windows as W

NUMPY = {"hann": np.hanning, "hamming": np.hamming, "blackman": np.blackman,
         "bartlett": np.bartlett}


@pytest.mark.parametrize("name", sorted(NUMPY))
@pytest.mark.parametrize("M", [2, 3, 8, 33])
def test_against_numpy(name, M):
    got = getattr(W, name)(M, dtype=fiamma.float64).numpy()
    np.testing.assert_allclose(got, NUMPY[name](M), atol=1e-15)
    periodic = getattr(W, name)(M, sym=False, dtype=fiamma.float64).numpy()
    np.testing.assert_allclose(periodic, NUMPY[name](M + 1)[:M], atol=1e-15)


def test_closed_forms():
    n = np.arange(7)
    np.testing.assert_allclose(W.kaiser(7, beta=4.0, dtype=fiamma.float64).numpy(),
                               np.kaiser(7, 4.0), rtol=1e-12)
    np.testing.assert_allclose(W.gaussian(7, std=1.5, dtype=fiamma.float64).numpy(),
                               np.exp(-((n - 3) ** 2) / (2 * 1.5 ** 2)), rtol=1e-14)
    np.testing.assert_allclose(W.cosine(7, dtype=fiamma.float64).numpy(),
                               np.sin(math.pi * (n + 0.5) / 7), rtol=1e-14)
    np.testing.assert_allclose(W.exponential(7, tau=2.0, dtype=fiamma.float64).numpy(),
                               np.exp(-np.abs(n - 3) / 2.0), rtol=1e-14)
    # periodic exponential: centred on M / 2 unless a center is given
    np.testing.assert_allclose(W.exponential(6, sym=False, dtype=fiamma.float64).numpy(),
                               np.exp(-np.abs(np.arange(6) - 3.0)), rtol=1e-14)
    np.testing.assert_allclose(
        W.exponential(6, center=1.0, sym=False, dtype=fiamma.float64).numpy(),
        np.exp(-np.abs(np.arange(6) - 1.0)), rtol=1e-14)
    a = [0.3635819, 0.4891775, 0.1365995, 0.0106411]
    x = 2 * math.pi * n / 6
    want = a[0] - a[1] * np.cos(x) + a[2] * np.cos(2 * x) - a[3] * np.cos(3 * x)
    np.testing.assert_allclose(W.nuttall(7, dtype=fiamma.float64).numpy(), want, atol=1e-15)
    np.testing.assert_allclose(W.general_hamming(7, alpha=0.6, dtype=fiamma.float64).numpy(),
                               0.6 - 0.4 * np.cos(x), atol=1e-15)


def test_sizes_dtypes_and_errors():
    assert W.hann(0).shape == (0,) and W.hann(1).tolist() == [1.0]
    assert W.hann(4).dtype is fiamma.get_default_dtype()
    assert W.kaiser(5, dtype=fiamma.float64).dtype is fiamma.float64
    pytest.importorskip("fiamma.autograd")
    assert W.hann(4, requires_grad=True).requires_grad


def test_errors():
    with pytest.raises(ValueError, match="non-negative window length"):
        W.hann(-1)
    with pytest.raises(ValueError, match="expects float32 or float64"):
        W.hann(3, dtype=fiamma.int64)
    with pytest.raises(ValueError, match="Center must be None for symmetric windows"):
        W.exponential(3, center=1.0)
    with pytest.raises(ValueError, match="standard deviation must be positive"):
        W.gaussian(3, std=0.0)
    with pytest.raises(TypeError, match="M must be an int"):
        W.hann(3.0)


@pytest.mark.parity
def test_parity_with_pytorch():
    torch = pytest.importorskip("torch")
    cases = [("bartlett", {}), ("blackman", {}), ("cosine", {}), ("gaussian", {"std": 2.5}),
             ("hamming", {}), ("hann", {}), ("kaiser", {"beta": 5.0}), ("nuttall", {}),
             ("exponential", {"tau": 2.0}), ("general_hamming", {"alpha": 0.6}),
             ("general_cosine", {"a": [0.46, 0.23, 0.31]})]
    for name, kw in cases:
        for M in (0, 1, 2, 5, 8, 17):
            for sym in (True, False):
                t = getattr(torch.signal.windows, name)(M, sym=sym, dtype=torch.float64, **kw)
                f = getattr(W, name)(M, sym=sym, dtype=fiamma.float64, **kw)
                np.testing.assert_allclose(f.numpy(), t.numpy(), rtol=1e-12, atol=1e-15,
                                           err_msg=f"{name} M={M} sym={sym}")
