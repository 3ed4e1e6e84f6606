"""First and second derivatives of fiamma.fft's transforms (complex layout: trailing (real,
imag) pairs) against finite differences (float64). Skipped where core has no fiamma.fft."""

import numpy as np
import pytest
from _formula_check import check, rand

import fiamma

try:
    import fiamma.fft as FFT
except (ImportError, AttributeError):
    FFT = None

pytestmark = pytest.mark.skipif(FFT is None or not hasattr(FFT, "rfft"),
                                reason="fiamma.fft is not available")

NORMS = [None, "ortho", "forward"]


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("op", ["fft", "ifft"])
def test_c2c_1d(op, norm):
    fn = getattr(FFT, op)
    rng = np.random.default_rng(0)
    check(lambda t: fn(t, norm=norm), rand(2, 5, rng=rng))                      # real input
    check(lambda t: fn(t, dim=0, norm=norm, complex_input=True), rand(4, 3, 2, rng=rng))
    check(lambda t: fn(t, n=7, norm=norm), rand(5, rng=rng))                    # zero-padded
    check(lambda t: fn(t, n=3, norm=norm, complex_input=True), rand(5, 2, rng=rng))  # cut


@pytest.mark.parametrize("op", ["fft2", "ifft2", "fftn", "ifftn"])
def test_c2c_nd(op):
    fn = getattr(FFT, op)
    rng = np.random.default_rng(1)
    check(lambda t: fn(t), rand(3, 4, rng=rng))
    check(lambda t: fn(t, norm="ortho", complex_input=True), rand(2, 3, 2, rng=rng))
    check(lambda t: fn(t, s=(2, 5)), rand(3, 4, rng=rng))


@pytest.mark.parametrize("norm", NORMS)
def test_rfft_irfft(norm):
    rng = np.random.default_rng(2)
    check(lambda t: FFT.rfft(t, norm=norm), rand(3, 6, rng=rng))
    check(lambda t: FFT.rfft(t, n=5, dim=0, norm=norm), rand(4, 2, rng=rng))
    # irfft reads a half spectrum; the imaginary parts of the DC (and even-n Nyquist) bins are
    # ignored, so their gradient is 0
    check(lambda t: FFT.irfft(t, norm=norm), rand(4, 2, rng=rng))              # n = 6
    check(lambda t: FFT.irfft(t, n=7, norm=norm), rand(4, 2, rng=rng))
    check(lambda t: FFT.irfft(t, n=4, dim=0, norm=norm), rand(5, 3, 2, rng=rng))


def test_roundtrip_gradient():
    x = rand(8, seed=3)
    (g,) = fiamma.autograd.grad(FFT.irfft(FFT.rfft(x), n=8).sum(), x)
    np.testing.assert_allclose(g.numpy(), np.ones(8), atol=1e-12)


@pytest.mark.parametrize("norm", NORMS)
def test_real_nd_and_hermitian(norm):
    rng = np.random.default_rng(4)
    check(lambda t: FFT.rfft2(t, norm=norm), rand(3, 4, rng=rng))
    check(lambda t: FFT.rfftn(t, s=(2, 5), norm=norm), rand(3, 4, rng=rng))
    check(lambda t: FFT.irfft2(t, norm=norm), rand(3, 3, 2, rng=rng))
    check(lambda t: FFT.irfftn(t, s=(3, 5), norm=norm), rand(2, 3, 2, rng=rng))
    check(lambda t: FFT.hfft(t, norm=norm), rand(4, 2, rng=rng))
    check(lambda t: FFT.hfft(t, n=5, norm=norm), rand(2, 4, 2, rng=rng))
    check(lambda t: FFT.ihfft(t, norm=norm), rand(6, rng=rng))
    check(lambda t: FFT.hfft2(t, norm=norm), rand(3, 3, 2, rng=rng))
    check(lambda t: FFT.ihfftn(t, norm=norm), rand(3, 4, rng=rng))


def test_fftshift():
    rng = np.random.default_rng(5)
    check(lambda t: FFT.fftshift(t), rand(3, 4, rng=rng))
    check(lambda t: FFT.ifftshift(t, dim=1), rand(3, 5, rng=rng))
    check(lambda t: FFT.fftshift(FFT.fft(t)), rand(5, rng=rng))  # complex: the pair stays


def test_minus_one_in_s_gradients():
    """-1 in ``s`` (the input's size; 2 * (size - 1) on a c2r transform's last dim) is resolved
    before recording: the backward narrowed by -1 and failed."""
    rng = np.random.default_rng(1)
    check(lambda t: FFT.rfft2(t, s=(1, -1), norm="forward"), rand(2, 3, 5, rng=rng))
    check(lambda t: FFT.ihfftn(t, s=(2, -1)), rand(3, 4, rng=rng))
    check(lambda t: FFT.fftn(t, s=(-1, 3)), rand(3, 4, rng=rng))
