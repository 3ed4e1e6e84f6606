"""fiamma.fft, stft/istft and the windows against numpy.fft and closed forms: every transform,
n / s, dim, the three norms, batched and non-contiguous inputs, complex results (and the
(real, imag) pairs read with complex_input=True), round trips, float32 kept as float32 /
complex64; PyTorch parity for the transforms, stft and the windows when torch is installed."""

import math

import numpy as np
import pytest
from conftest import to_numpy
from hypothesis import given, settings, strategies as st

import fiamma
from fiamma import fft as F

SETTINGS = settings(max_examples=30, deadline=None)
NORMS = [None, "backward", "ortho", "forward"]
RTOL = {fiamma.float32: 1e-4, fiamma.float64: 1e-10}


def T(a, dtype=fiamma.float64, layout="contiguous", cplx=False):
    npdt = np.float32 if dtype is fiamma.float32 else np.float64
    if cplx:
        npdt = np.complex64 if dtype is fiamma.float32 else np.complex128
    a = np.asarray(a, npdt)
    if layout == "transposed" and a.ndim >= 2:
        return fiamma.from_numpy(np.ascontiguousarray(a.T)).permute(
            tuple(range(a.ndim - 1, -1, -1)))
    if layout == "strided" and a.ndim >= 1:
        big = np.zeros(tuple(2 * s for s in a.shape), npdt)
        sl = tuple(slice(None, None, 2) for _ in a.shape)
        big[sl] = a
        return fiamma.from_numpy(big)[sl]
    return fiamma.from_numpy(a.copy())


def pairs(c):
    """complex array -> (..., 2) real array"""
    return np.stack([c.real, c.imag], -1)


def cplx(t):
    a = to_numpy(t)
    return a[..., 0] + 1j * a[..., 1]


def check_c(t, want, dtype):
    """A complex result: complex64 for float32 work, complex128 for float64."""
    cdt = fiamma.complex64 if dtype is fiamma.float32 else fiamma.complex128
    assert t.dtype is cdt and tuple(t.shape) == want.shape
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(to_numpy(t), want, rtol=RTOL[dtype], atol=RTOL[dtype] * scale)


def check_pairs(t, want, dtype):
    """stft(return_complex=False): (real, imag) pairs."""
    assert t.dtype is dtype and tuple(t.shape) == want.shape + (2,)
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(cplx(t), want, rtol=RTOL[dtype], atol=RTOL[dtype] * scale)


def check_r(t, want, dtype):
    assert t.dtype is dtype and tuple(t.shape) == want.shape
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(to_numpy(t), want, rtol=RTOL[dtype], atol=RTOL[dtype] * scale)


sig = dict(shape=st.sampled_from([(8,), (5,), (3, 6), (2, 3, 4), (1, 7)]),
           dtype=st.sampled_from([fiamma.float32, fiamma.float64]),
           layout=st.sampled_from(["contiguous", "transposed", "strided"]),
           norm=st.sampled_from(NORMS), seed=st.integers(0, 2 ** 16))


@SETTINGS
@given(**sig, n=st.sampled_from([None, 3, 8, 11]), dim=st.sampled_from([-1, 0]))
def test_1d_transforms(shape, dtype, layout, norm, seed, n, dim):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    c = a + 1j * rng.standard_normal(shape)
    x = T(a, dtype, layout)
    xc = T(c, dtype, layout, cplx=True)
    check_c(F.fft(x, n, dim, norm), np.fft.fft(a, n, dim, norm), dtype)
    check_c(F.ifft(x, n, dim, norm), np.fft.ifft(a, n, dim, norm), dtype)
    check_c(F.fft(xc, n, dim, norm), np.fft.fft(c, n, dim, norm), dtype)
    check_c(F.ifft(xc, n, dim, norm), np.fft.ifft(c, n, dim, norm), dtype)
    check_c(F.rfft(x, n, dim, norm), np.fft.rfft(a, n, dim, norm), dtype)
    check_c(F.ihfft(x, n, dim, norm), np.fft.ihfft(a, n, dim, norm), dtype)
    if n is None and shape[dim] == 1:  # the default output length 2 * (1 - 1) is invalid
        with pytest.raises(RuntimeError, match="fft.irfft: Invalid number of data points"):
            F.irfft(xc, n, dim, norm)
        return
    check_r(F.irfft(xc, n, dim, norm), np.fft.irfft(c, n, dim, norm), dtype)
    check_r(F.hfft(xc, n, dim, norm), np.fft.hfft(c, n, dim, norm), dtype)


@SETTINGS
@given(**sig, s=st.sampled_from([None, (4, 5), (3,), (-1, 6)]),
       dim=st.sampled_from([None, (0, -1), (-1,), (-2, -1)]))
def test_nd_transforms(shape, dtype, layout, norm, seed, s, dim):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    c = a + 1j * rng.standard_normal(shape)
    nd = len(shape)
    if dim is not None and (len(dim) > nd or (s is not None and len(s) != len(dim))):
        return
    if s is not None and len(s) > nd:
        return
    axes = (list(range(nd - len(s), nd)) if s is not None else list(range(nd))) \
        if dim is None else [d % nd for d in dim]
    if len(set(axes)) != len(axes):
        return
    ss = None if s is None else [a.shape[ax] if v == -1 else v for v, ax in zip(s, axes)]
    x = T(a, dtype, layout)
    xc = T(c, dtype, cplx=True)
    check_c(F.fftn(x, s, dim, norm), np.fft.fftn(a, ss, axes, norm), dtype)
    check_c(F.ifftn(xc, s, dim, norm), np.fft.ifftn(c, ss, axes, norm), dtype)
    check_c(F.rfftn(x, s, dim, norm), np.fft.rfftn(a, ss, axes, norm), dtype)
    check_r(F.irfftn(xc, s, dim, norm), np.fft.irfftn(c, ss, axes, norm), dtype)
    if nd >= 2 and (dim is None or len(dim) == 2) and (s is None or len(s) == 2):
        d2 = (-2, -1) if dim is None else dim
        ax2 = [d % nd for d in d2]
        ss2 = None if s is None else [a.shape[ax] if v == -1 else v for v, ax in zip(s, ax2)]
        check_c(F.fft2(x, s, d2, norm), np.fft.fft2(a, ss2, ax2, norm), dtype)
        check_c(F.ifft2(xc, s, d2, norm), np.fft.ifft2(c, ss2, ax2, norm), dtype)
        check_c(F.rfft2(x, s, d2, norm), np.fft.rfft2(a, ss2, ax2, norm), dtype)
        check_r(F.irfft2(xc, s, d2, norm), np.fft.irfft2(c, ss2, ax2, norm), dtype)


def test_hfftn_ihfftn_are_inverse_and_match_1d():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 6))
    h = F.ihfft2(T(a))
    back = F.hfft2(h, s=(4, 6))
    np.testing.assert_allclose(to_numpy(back), a, atol=1e-12)
    # along one dim they are numpy's hfft / ihfft
    c = rng.standard_normal(5) + 1j * rng.standard_normal(5)
    np.testing.assert_allclose(to_numpy(F.hfftn(T(c, cplx=True), dim=(0,))), np.fft.hfft(c),
                               atol=1e-12)
    np.testing.assert_allclose(to_numpy(F.ihfftn(T(a[0]))), np.fft.ihfft(a[0]), atol=1e-12)


def test_round_trips_and_layout_rules():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 8))
    x = T(a)
    np.testing.assert_allclose(to_numpy(F.ifft(F.fft(x)).real), a, atol=1e-12)
    np.testing.assert_allclose(to_numpy(F.irfft(F.rfft(x), n=8)), a, atol=1e-12)
    np.testing.assert_allclose(to_numpy(F.ifftn(F.fftn(x)).real), a, atol=1e-12)
    # a real tensor is a real signal (PyTorch), whatever its last dim
    stereo = T(rng.standard_normal((16, 2)))
    got = F.fft(stereo, dim=0)
    assert got.shape == (16, 2) and got.dtype is fiamma.complex128
    np.testing.assert_allclose(to_numpy(got), np.fft.fft(to_numpy(stereo), axis=0),
                               atol=1e-12)
    # complex_input=True reads (real, imag) pairs (a fiamma extension)
    got = F.fft(stereo, complex_input=True)
    c = to_numpy(stereo) @ np.array([1, 1j])
    np.testing.assert_allclose(to_numpy(got), np.fft.fft(c), atol=1e-12)
    # results are ordinary complex tensors: arithmetic keeps them complex
    X = F.fft(x)
    np.testing.assert_allclose(to_numpy(F.ifft(X * 2).real), 2 * a, atol=1e-12)
    np.testing.assert_allclose(to_numpy(fiamma.view_as_real(X)), pairs(np.fft.fft(a)),
                               atol=1e-12)
    # a real spectrum has zero imaginary parts (PyTorch)
    r = rng.standard_normal((4, 3))
    np.testing.assert_allclose(to_numpy(F.irfft(T(r))), np.fft.irfft(r), atol=1e-12)
    np.testing.assert_allclose(to_numpy(F.hfft(T(r))), np.fft.hfft(r), atol=1e-12)
    with pytest.raises(RuntimeError, match="fft.rfft: expected a real input"):
        F.rfft(X)
    # non-contiguous pairs are read correctly
    c = rng.standard_normal((5, 4)) + 1j * rng.standard_normal((5, 4))
    xt = T(pairs(c).transpose(1, 0, 2).copy()).transpose(0, 1)
    np.testing.assert_allclose(to_numpy(F.fft(xt, complex_input=True)), np.fft.fft(c),
                               atol=1e-12)


def test_dtypes_and_errors():
    assert F.fft(fiamma.arange(4)).dtype is fiamma.complex64
    assert F.rfft(T(np.ones(4), fiamma.float32)).dtype is fiamma.complex64
    assert F.irfft(F.rfft(T(np.ones(4), fiamma.float32))).dtype is fiamma.float32
    with pytest.raises(RuntimeError, match="fft.fft: Unsupported dtype"):
        F.fft(fiamma.ones(4, dtype=fiamma.float16))
    with pytest.raises(ValueError, match="fft.fft: Invalid normalization mode"):
        F.fft(fiamma.ones(4), norm="bogus")
    with pytest.raises(IndexError, match="fft.fft: Dimension out of range"):
        F.fft(fiamma.ones(4), dim=1)
    with pytest.raises(RuntimeError, match="fft.fft: Invalid number of data points"):
        F.fft(fiamma.ones(4), n=0)
    with pytest.raises(RuntimeError, match="fft.fft"):
        F.fft(fiamma.ones(0))
    with pytest.raises(IndexError, match="fft.rfft"):
        F.rfft(fiamma.tensor(1.0))
    with pytest.raises(RuntimeError, match="fft.fftn: When given"):
        F.fftn(fiamma.ones(3, 3), s=(3,), dim=(0, 1))
    out = fiamma.empty(0, dtype=fiamma.complex64)
    r = F.rfft(fiamma.ones(4), out=out)
    assert r is out and out.shape == (3,) and out.tolist() == [4, 0, 0]
    # batch dims that are empty are fine
    assert F.fft(fiamma.ones(0, 4)).shape == (0, 4)


def test_freqs_and_shifts():
    np.testing.assert_allclose(to_numpy(F.fftfreq(7, 0.5)), np.fft.fftfreq(7, 0.5), rtol=1e-6)
    np.testing.assert_allclose(to_numpy(F.rfftfreq(8)), np.fft.rfftfreq(8))
    assert F.fftfreq(4, dtype=fiamma.float64).dtype is fiamma.float64
    a = np.arange(20.0).reshape(4, 5)
    np.testing.assert_array_equal(to_numpy(F.fftshift(T(a))), np.fft.fftshift(a))
    np.testing.assert_array_equal(to_numpy(F.ifftshift(T(a), dim=1)), np.fft.ifftshift(a, 1))
    np.testing.assert_array_equal(to_numpy(F.ifftshift(F.fftshift(T(a)))), a)
    # a complex result
    X = F.fft(T(np.arange(5.0)))
    np.testing.assert_allclose(to_numpy(F.fftshift(X)),
                               np.fft.fftshift(np.fft.fft(np.arange(5.0))))
    # (real, imag) pairs marked as such: the trailing pair is not shifted
    P = F.as_complex_layout(fiamma.view_as_real(X))
    np.testing.assert_allclose(cplx(F.fftshift(P)), np.fft.fftshift(np.fft.fft(np.arange(5.0))))
    assert F.is_complex_layout(F.fftshift(P))


# ---- windows, stft, istft ----------------------------------------------------------------------

def np_window(name, n, periodic, **kw):
    if n == 0:
        return np.zeros(0)
    if n == 1:
        return np.ones(1)
    N = n + 1 if periodic else n
    w = {"hann": np.hanning, "hamming": np.hamming, "blackman": np.blackman,
         "bartlett": np.bartlett}.get(name)
    w = w(N) if w else np.kaiser(N, kw.get("beta", 12.0))
    return w[:n]


@pytest.mark.parametrize("name", ["hann", "hamming", "blackman", "bartlett", "kaiser"])
@pytest.mark.parametrize("n", [0, 1, 2, 7, 16])
@pytest.mark.parametrize("periodic", [True, False])
def test_windows(name, n, periodic):
    fn = getattr(fiamma, name + "_window")
    w = fn(n, periodic)
    assert w.dtype is fiamma.float32 and w.shape == (n,)
    np.testing.assert_allclose(to_numpy(w), np_window(name, n, periodic), atol=1e-6)
    w64 = fn(n, periodic=periodic, dtype=fiamma.float64)
    np.testing.assert_allclose(to_numpy(w64), np_window(name, n, periodic), atol=1e-12)


def test_window_args():
    np.testing.assert_allclose(to_numpy(fiamma.kaiser_window(9, beta=5.0, dtype=fiamma.float64)),
                               np.kaiser(10, 5.0)[:9], atol=1e-12)
    np.testing.assert_allclose(
        to_numpy(fiamma.hamming_window(8, alpha=0.5, beta=0.5, dtype=fiamma.float64)),
        to_numpy(fiamma.hann_window(8, dtype=fiamma.float64)), atol=1e-15)
    with pytest.raises(RuntimeError, match="hann_window: expected a floating point dtype"):
        fiamma.hann_window(4, dtype=fiamma.int64)
    with pytest.raises(RuntimeError, match="hann_window"):
        fiamma.hann_window(-1)
    assert fiamma.hann_window(4, requires_grad=False).requires_grad is False


def np_stft(x, n_fft, hop, win, window, center, pad_mode, normalized, onesided):
    x2 = np.atleast_2d(x)
    if center:
        mode = {"reflect": "reflect", "constant": "constant", "replicate": "edge",
                "circular": "wrap"}[pad_mode]
        x2 = np.pad(x2, ((0, 0), (n_fft // 2, n_fft // 2)), mode=mode)
    w = np.ones(win) if window is None else window
    full = np.zeros(n_fft)
    left = (n_fft - win) // 2
    full[left:left + win] = w
    T_ = 1 + (x2.shape[1] - n_fft) // hop
    frames = np.stack([x2[:, t * hop:t * hop + n_fft] * full for t in range(T_)], 1)
    spec = np.fft.rfft(frames, axis=-1) if onesided else np.fft.fft(frames, axis=-1)
    if normalized:
        spec = spec / math.sqrt(n_fft)
    spec = np.swapaxes(spec, 1, 2)
    return spec[0] if x.ndim == 1 else spec


@SETTINGS
@given(batch=st.booleans(), L=st.integers(40, 90), n_fft=st.sampled_from([8, 16, 15]),
       hop=st.sampled_from([None, 3, 4]), win=st.sampled_from([None, 6, 8]),
       center=st.booleans(), pad_mode=st.sampled_from(["reflect", "constant", "replicate",
                                                       "circular"]),
       normalized=st.booleans(), onesided=st.sampled_from([None, True, False]),
       wname=st.sampled_from([None, "hann", "hamming"]), seed=st.integers(0, 2 ** 16))
def test_stft_istft(batch, L, n_fft, hop, win, center, pad_mode, normalized, onesided, wname,
                    seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, L) if batch else (L,))
    h = n_fft // 4 if hop is None else hop
    wl = n_fft if win is None else win
    window = None if wname is None else getattr(fiamma, wname + "_window")(
        wl, dtype=fiamma.float64)
    S = fiamma.stft(T(x), n_fft, hop, win, window, center, pad_mode, normalized, onesided,
                    return_complex=False)
    want = np_stft(x, n_fft, h, wl, None if window is None else to_numpy(window), center,
                   pad_mode, normalized, onesided is not False)
    check_pairs(S, want, fiamma.float64)
    # istft inverts it where the window overlap-add does not vanish
    if center:
        try:
            y = fiamma.istft(S, n_fft, hop, win, window, center, normalized, onesided,
                             length=L)
        except RuntimeError as e:
            assert "window overlap add min" in str(e)
            return
        np.testing.assert_allclose(to_numpy(y), x, atol=1e-9)


# sizes for the C kernel: every radix (2, 3, 4, 5, odd primes), odd lengths (complex FFT),
# even lengths (packed real FFT), and lengths with a large prime factor (NumPy's FFT instead)
C_SIZES = [1, 2, 3, 4, 5, 6, 7, 9, 10, 12, 14, 22, 25, 26, 30, 49, 64, 77, 98, 100, 121, 128,
           200, 243, 256, 400, 512, 1000, 2 * 131, 263]


@pytest.mark.parametrize("n_fft", C_SIZES)
@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
def test_stft_kernel_sizes(n_fft, dtype):
    """Long enough signals that blocks of frames are full (the tiled path) and one is partial;
    the padded edges use the per-sample path."""
    rng = np.random.default_rng(n_fft)
    hop = max(1, n_fft // 3)
    L = hop * 37 + n_fft + 3
    x = rng.standard_normal((2, L))
    w = rng.standard_normal(n_fft)
    for center, mode, onesided in ((True, "reflect", True), (False, "reflect", False),
                                   (True, "circular", False), (True, "replicate", True)):
        if center and mode == "reflect" and n_fft // 2 >= L:
            continue
        xt = T(x).to(dtype)
        wt = T(w).to(dtype)
        S = fiamma.stft(xt, n_fft, hop, window=wt, center=center, pad_mode=mode,
                        onesided=onesided)
        P = fiamma.stft_power(xt, n_fft, hop, window=wt, center=center, pad_mode=mode,
                              onesided=onesided)
        want = np_stft(to_numpy(xt).astype(np.float64), n_fft, hop, n_fft,
                       to_numpy(wt).astype(np.float64), center, mode, False, onesided)
        assert S.dtype is dtype and P.dtype is dtype
        assert S.shape == want.shape + (2,) and P.shape == want.shape
        got = to_numpy(S)
        scale = np.abs(want).max()
        tol = 2e-6 if dtype is fiamma.float32 else 1e-12
        assert np.abs(got[..., 0] + 1j * got[..., 1] - want).max() <= tol * scale
        assert np.abs(to_numpy(P) - np.abs(want) ** 2).max() <= 2 * tol * scale ** 2


def test_stft_power_forms():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 700))
    xt = T(x)[:, ::2]  # non-contiguous rows
    w = fiamma.hamming_window(50, dtype=fiamma.float64)
    P = fiamma.stft_power(xt, 64, 10, 50, w, normalized=True)
    want = np_stft(x[:, ::2], 64, 10, 50, to_numpy(w), True, "reflect", True, True)
    np.testing.assert_allclose(to_numpy(P), np.abs(want) ** 2, rtol=1e-10, atol=1e-12)
    # 1-D signal, no window, constant padding; int input is converted like stft's
    p1 = fiamma.stft_power(T(x[0]), 16, 4, pad_mode="constant")
    s1 = fiamma.stft(T(x[0]), 16, 4, pad_mode="constant")
    np.testing.assert_allclose(to_numpy(p1), to_numpy(s1.pow(2).sum(-1)), rtol=1e-10)
    pi = fiamma.stft_power(fiamma.arange(40), 8)
    assert pi.dtype is fiamma.get_default_dtype() and pi.shape == (5, 21)
    # empty batch, frames of an exactly fitting signal
    assert fiamma.stft_power(fiamma.zeros(0, 40), 8).shape == (0, 5, 21)
    assert fiamma.stft_power(fiamma.ones(8), 8, center=False).shape == (5, 1)
    with pytest.raises(RuntimeError, match="stft_power: reflect padding of 8 needs a signal"):
        fiamma.stft_power(fiamma.ones(8), 16)
    with pytest.raises(RuntimeError, match="stft_power: unsupported pad_mode"):
        fiamma.stft_power(fiamma.ones(80), 16, pad_mode="wrap")
    with pytest.raises(RuntimeError, match="stft_power: expected a 1D window"):
        fiamma.stft_power(fiamma.ones(80), 16, window=fiamma.ones(15))
    with pytest.raises(RuntimeError, match="stft_power: expected hop_length > 0"):
        fiamma.stft_power(fiamma.ones(80), 16, 0)


def test_stft_c_kernel_checks_its_arguments():
    """The C entry refuses what would read outside the signal, whatever Python passes."""
    from fiamma._lib import lib

    x = np.zeros(10, np.float32)
    out = np.zeros(1000, np.float32)
    w = np.ones(8, np.float32)
    call = lambda **k: lib.fm_stft(  # noqa: E731
        k.get("dt", 8), k.get("mode", 1), 1, k.get("L", 10), x.ctypes.data, k.get("n", 8),
        k.get("hop", 1), k.get("T", 3), k.get("pad", 0), k.get("pm", 0), w.ctypes.data, 1,
        1.0, out.ctypes.data)
    assert call() == 0
    assert call(T=4) == lib.FM_ERR_INDEX        # frame 3 would end at sample 11
    assert call(pad=10, pm=1, T=1) == lib.FM_ERR_ARG   # reflect pad must be < L
    assert call(dt=3) == lib.FM_ERR_DTYPE
    assert call(mode=5) == lib.FM_ERR_ARG
    assert call(pm=9) == lib.FM_ERR_ARG
    assert call(hop=0) == lib.FM_ERR_ARG
    assert call(n=0) == lib.FM_ERR_ARG
    assert call(L=0, T=1) == lib.FM_ERR_ARG
    assert lib.fm_fft_largest_factor(400) == 5 and lib.fm_fft_largest_factor(2 * 131) == 131
    assert lib.fm_fft_largest_factor(1) == 1 and lib.fm_fft_largest_factor(97) == 97


def test_stft_errors_and_float32():
    x = fiamma.randn(64)
    c = fiamma.stft(x, 16, return_complex=True)  # the pairs' memory as complex numbers
    assert c.dtype is fiamma.complex64 and c.shape == (9, 17)
    assert np.array_equal(fiamma.view_as_real(c).numpy(), fiamma.stft(x, 16).numpy())
    with pytest.raises(RuntimeError, match="stft: expected a 1D or 2D tensor"):
        fiamma.stft(fiamma.randn(2, 2, 64), 16)
    with pytest.raises(RuntimeError, match="stft: expected a 1D window"):
        fiamma.stft(x, 16, window=fiamma.hann_window(8))
    with pytest.raises(RuntimeError, match="stft: expected 0 < n_fft"):
        fiamma.stft(x, 128, center=False)
    with pytest.raises(RuntimeError, match="istft: window overlap add min"):
        fiamma.istft(fiamma.stft(x, 16, hop_length=16, window=fiamma.hann_window(16)), 16,
                     hop_length=16, window=fiamma.hann_window(16))
    S = fiamma.stft(x, 16, window=fiamma.hann_window(16))
    assert S.dtype is fiamma.float32 and S.shape == (9, 17, 2)
    y = fiamma.istft(S, 16, window=fiamma.hann_window(16))
    assert y.dtype is fiamma.float32 and y.shape == (64,)
    np.testing.assert_allclose(to_numpy(y), to_numpy(x), atol=1e-5)


def test_torch_parity_when_installed():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 100))
    for n in (5, 8):
        for per in (True, False):
            for name in ("hann", "hamming", "blackman", "bartlett", "kaiser"):
                np.testing.assert_allclose(
                    to_numpy(getattr(fiamma, name + "_window")(n, per, dtype=fiamma.float64)),
                    getattr(torch, name + "_window")(n, per, dtype=torch.float64).numpy(),
                    atol=1e-12)
    tw = torch.hann_window(20, dtype=torch.float64)
    ts = torch.stft(torch.from_numpy(x), 32, 8, 20, tw, return_complex=True)
    fs = fiamma.stft(T(x), 32, 8, 20, fiamma.hann_window(20, dtype=fiamma.float64))
    np.testing.assert_allclose(to_numpy(fs), torch.view_as_real(ts).numpy(), atol=1e-10)
    ty = torch.istft(ts, 32, 8, 20, tw, length=100)
    fy = fiamma.istft(fs, 32, 8, 20, fiamma.hann_window(20, dtype=fiamma.float64), length=100)
    np.testing.assert_allclose(to_numpy(fy), ty.numpy(), atol=1e-10)
    c = torch.fft.fft2(torch.from_numpy(x), norm="ortho")
    np.testing.assert_allclose(to_numpy(F.fft2(T(x), norm="ortho")), c.numpy(), atol=1e-10)


@pytest.mark.parity
@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "ihfft", "irfft", "hfft", "fft2",
                                  "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2", "fftn",
                                  "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn"])
@pytest.mark.parametrize("kind", ["float32", "float64", "complex64", "complex128"])
def test_transforms_match_torch(name, kind):
    """dtype, shape and values of every transform as torch.fft, real and complex inputs."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    a = rng.standard_normal((3, 6))
    if kind.startswith("complex"):
        a = a + 1j * rng.standard_normal((3, 6))
    a = a.astype(kind)
    tx = torch.from_numpy(a.copy())
    fx = fiamma.from_numpy(a.copy())
    kw = {"norm": "ortho"}
    try:
        want = getattr(torch.fft, name)(tx, **kw)
    except RuntimeError:  # torch refuses it (rfft of a complex input): fiamma raises too
        with pytest.raises(RuntimeError):
            getattr(F, name)(fx, **kw)
        return
    got = getattr(F, name)(fx, **kw)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert tuple(got.shape) == tuple(want.shape)
    tol = 1e-4 if kind in ("float32", "complex64") else 1e-10
    np.testing.assert_allclose(to_numpy(got), want.resolve_conj().numpy(), rtol=tol, atol=tol)


def test_c2r_minus_one_in_s_and_empty_freqs():
    """-1 in ``s`` is the input's size, except on a complex-to-real transform's last dim where
    it is the default output length 2 * (size - 1) (as PyTorch); fftfreq(0) is empty."""
    rng = np.random.default_rng(0)
    z = rng.standard_normal((4, 5)) + 1j * rng.standard_normal((4, 5))
    x = fiamma.tensor(z)
    for fn, npfn in [(F.irfftn, np.fft.irfftn), (F.irfft2, np.fft.irfftn)]:
        got = fn(x, s=(3, -1))
        assert tuple(got.shape) == (3, 8)
        np.testing.assert_allclose(got.numpy(), npfn(z, s=(3, 8), axes=(0, 1)), rtol=1e-10,
                                   atol=1e-12)
    assert tuple(F.hfftn(x, s=(-1, -1)).shape) == (4, 8)
    r = fiamma.tensor(rng.standard_normal((4, 6)))
    assert tuple(F.rfftn(r, s=(-1, 3)).shape) == (4, 2)
    for fn in (F.fftfreq, F.rfftfreq):
        assert fn(0).numel() == 0


@pytest.mark.parity
def test_minus_one_in_s_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    z = rng.standard_normal((3, 4, 5)) + 1j * rng.standard_normal((3, 4, 5))
    r = rng.standard_normal((3, 4, 5))
    for name, x in [("irfftn", z), ("irfft2", z), ("hfftn", z), ("hfft2", z), ("rfftn", r),
                    ("ihfftn", r), ("fftn", z), ("ifft2", z)]:
        for s in [(-1, -1), (2, -1), (-1, 6)]:
            want = getattr(torch.fft, name)(torch.tensor(x), s=s)
            got = getattr(F, name)(fiamma.tensor(x), s=s)
            assert tuple(got.shape) == tuple(want.shape), (name, s)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)
