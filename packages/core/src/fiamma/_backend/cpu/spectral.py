"""CPU primitives of the spectral family: the short-time Fourier transform kernel, and fft
(NumPy's pocketfft over host memory; fiamma.fft calls NumPy directly for CPU tensors, this
primitive is the contract's form of the same)."""

import numpy as np

from fiamma import _tensor_factory as TF
from fiamma._lib import lib

__all__ = ["fft_largest_factor", "stft", "fft"]

fft_largest_factor = lib.fm_fft_largest_factor


def stft(power, x, n_fft, hop, frames, pad, pad_mode, window, onesided, scale, out):
    """Frames of the contiguous (B?, L) signal x (reflect/constant/... padded by ``pad``, codes
    STFT_PAD_*), windowed by ``window`` (a contiguous NumPy array of x's dtype, n_fft long),
    transformed: out is (B?, n_freq, frames, 2) (re, im) pairs, or |X|^2 (B?, n_freq, frames)
    with ``power``."""
    batch = 1 if len(x._shape) == 1 else x._shape[0]
    return lib.fm_stft(x._dtype.code, power, batch, x._shape[-1], x._ptr, n_fft, hop, frames,
                       pad, pad_mode, window.ctypes.data, onesided, scale, out._ptr)


_FFT_NAMES = frozenset(["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fftn", "ifftn",
                        "rfftn", "irfftn"])


def fft(name, x, cin, conj, kwargs):
    """numpy.fft.<name> of x (see contract.Backend.fft): (status, a fresh CPU tensor)."""
    from fiamma import _dtype as D
    from fiamma._backend import codes

    if name not in _FFT_NAMES or x._dtype not in (D.float32, D.float64):
        return codes.ERR_ARG, None
    a = x.numpy()
    if cin:
        a = np.ascontiguousarray(a).view(
            np.complex64 if a.dtype == np.float32 else np.complex128)[..., 0]
    if conj == 1:
        a = np.conj(a)
    r = getattr(np.fft, name)(a, **kwargs)
    if conj == 2:
        r = np.conj(r)
    if r.dtype.kind == "c":
        res = TF.new_empty(r.shape + (2,), D.float32 if r.dtype == np.complex64 else D.float64)
        if res._numel:
            res.numpy().view(r.dtype)[..., 0] = r
    else:
        res = TF.new_empty(r.shape, D.float32 if r.dtype == np.float32 else D.float64)
        if res._numel:
            res.numpy()[...] = r
    return 0, res
