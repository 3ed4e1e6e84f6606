"""The spectral family on every device besides the CPU: stft / stft_power (the backend's stft
primitive, the device's FFT) and fiamma.fft (the backend's fft primitive) against the CPU's
results; istft through the host; the stft primitive's status codes."""

import numpy as np
import pytest
from conftest import assert_same

import fiamma
from fiamma._backend import codes as C
from fiamma._tensor import new_empty


@pytest.mark.parametrize("pad_mode", ["reflect", "constant", "replicate", "circular"])
@pytest.mark.parametrize("n_fft", [16, 17, 254, 101])
@pytest.mark.parametrize("dt", [fiamma.float64, fiamma.float32])
def test_stft(device, pad_mode, n_fft, dt):
    x = fiamma.randn(2, 300, dtype=dt, generator=fiamma.Generator().manual_seed(n_fft))
    w = fiamma.hann_window(n_fft - 3, dtype=dt)
    tol = dict(rtol=1e-10, atol=1e-10) if dt is fiamma.float64 else dict(rtol=1e-4, atol=2e-4)
    for kw in [dict(window=w, win_length=n_fft - 3), dict(normalized=True, onesided=False),
               dict(center=False, hop_length=7)]:
        got = fiamma.stft(x.to(device), n_fft, pad_mode=pad_mode, **kw)
        want = fiamma.stft(x, n_fft, pad_mode=pad_mode, **kw)
        assert_same(got, want, **tol)
        assert fiamma.fft.is_complex_layout(got)
        got = fiamma.stft_power(x[0].to(device), n_fft, pad_mode=pad_mode, **kw)
        want = fiamma.stft_power(x[0], n_fft, pad_mode=pad_mode, **kw)
        assert_same(got, want, rtol=tol["rtol"], atol=tol["atol"] * 10)


def test_stft_integer_signal_and_errors(device):
    x = fiamma.arange(64)
    assert_same(fiamma.stft(x.to(device), 8), fiamma.stft(x, 8), rtol=1e-6, atol=1e-5)
    with pytest.raises(RuntimeError, match="reflect padding"):
        fiamma.stft(fiamma.ones(4, device=device), 16)
    with pytest.raises(RuntimeError, match="Unsupported dtype"):
        fiamma.stft(fiamma.ones(64, dtype=fiamma.float16, device=device), 8)


def test_stft_primitive_status(device):
    be = fiamma.empty(1, device=device)._storage.backend
    dev = fiamma.device(device)
    x = fiamma.ones(10, device=device)
    out = new_empty((5, 3, 2), fiamma.float32, dev)
    w = np.ones(8, np.float32)
    assert be.stft(0, x, 8, 1, 3, 0, C.STFT_PAD_CONSTANT, w, 1, 1.0, out) == 0
    assert be.stft(0, x, 8, 1, 9, 0, C.STFT_PAD_CONSTANT, w, 1, 1.0, out) == C.ERR_INDEX
    assert be.stft(0, x, 8, 1, 3, 10, C.STFT_PAD_REFLECT, w, 1, 1.0, out) == C.ERR_ARG
    xi = fiamma.ones(10, dtype=fiamma.int32, device=device)
    assert be.stft(0, xi, 8, 1, 3, 0, C.STFT_PAD_CONSTANT, w, 1, 1.0, out) == C.ERR_DTYPE


FFTS = [
    ("fft", lambda t: fiamma.fft.fft(t)), ("fft_n", lambda t: fiamma.fft.fft(t, n=9, dim=0)),
    ("ifft", lambda t: fiamma.fft.ifft(t, norm="ortho")), ("rfft", lambda t: fiamma.fft.rfft(t)),
    ("irfft", lambda t: fiamma.fft.irfft(fiamma.fft.rfft(t), n=6)),
    ("hfft", lambda t: fiamma.fft.hfft(fiamma.fft.rfft(t))),
    ("ihfft", lambda t: fiamma.fft.ihfft(t)),
    ("fft2", lambda t: fiamma.fft.fft2(t)), ("ifftn", lambda t: fiamma.fft.ifftn(t, s=(3, 5))),
    ("rfft2", lambda t: fiamma.fft.rfft2(t, norm="forward")),
    ("irfftn", lambda t: fiamma.fft.irfftn(fiamma.fft.rfftn(t))),
    ("hfft2", lambda t: fiamma.fft.hfft2(fiamma.fft.rfft2(t))),
    ("ihfft2", lambda t: fiamma.fft.ihfft2(t)), ("ihfftn", lambda t: fiamma.fft.ihfftn(t)),
    ("hfftn", lambda t: fiamma.fft.hfftn(fiamma.fft.ihfftn(t))),
    ("complex_in", lambda t: fiamma.fft.fft(t[:, :2], complex_input=True)),
    ("fftshift", lambda t: fiamma.fft.fftshift(fiamma.fft.fft2(t))),
    ("ifftshift", lambda t: fiamma.fft.ifftshift(t, dim=1)),
    ("strided", lambda t: fiamma.fft.rfft(t.t())),
]


@pytest.mark.parametrize("name,fn", FFTS, ids=[f[0] for f in FFTS])
@pytest.mark.parametrize("dt", [fiamma.float64, fiamma.float32])
def test_fft(device, name, fn, dt):
    y = fiamma.randn(4, 6, dtype=dt, generator=fiamma.Generator().manual_seed(3))
    got, want = fn(y.to(device)), fn(y)
    assert got.device.type == device
    tol = dict(rtol=1e-12, atol=1e-12) if dt is fiamma.float64 else dict(rtol=1e-5, atol=1e-5)
    assert_same(got, want, **tol)
    assert fiamma.fft.is_complex_layout(got) == fiamma.fft.is_complex_layout(want)


def test_fft_out_errors_and_freqs(device):
    y = fiamma.randn(8, device=device)
    out = fiamma.empty(0, dtype=fiamma.complex64, device=device)
    r = fiamma.fft.rfft(y, out=out)
    assert r is out and out.shape == (5,) and out.dtype is fiamma.complex64
    with pytest.raises(RuntimeError, match="fft.irfft"):
        fiamma.fft.irfft(fiamma.zeros(2, 1, device=device))
    assert_same(fiamma.fft.fftfreq(7, 0.5, device=device), fiamma.fft.fftfreq(7, 0.5))
    assert fiamma.fft.rfftfreq(6, device=device).device.type == device


def test_istft_round_trip(device):
    x = fiamma.randn(2, 200, dtype=fiamma.float64)
    w = fiamma.hann_window(32, dtype=fiamma.float64)
    s = fiamma.stft(x.to(device), 32, 8, window=w.to(device))
    y = fiamma.istft(s, 32, 8, window=w.to(device), length=200)
    assert y.device.type == device
    assert_same(y, fiamma.istft(fiamma.stft(x, 32, 8, window=w), 32, 8, window=w, length=200),
                rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(y.cpu().numpy(), x.numpy(), atol=1e-10)


def test_fft_gradient_on_device(device):
    pytest.importorskip("fiamma.autograd")
    x = fiamma.randn(4, 6, dtype=fiamma.float64)
    xd = x.to(device).requires_grad_(True)
    fiamma.fft.rfft(xd).abs().pow(2).sum().backward()
    xc = x.clone().requires_grad_(True)
    fiamma.fft.rfft(xc).abs().pow(2).sum().backward()
    assert_same(xd.grad, xc.grad, rtol=1e-10, atol=1e-10)
