"""CPU primitives of the spectral family: the short-time Fourier transform kernel (the rest of
fiamma.fft runs on NumPy's pocketfft over host memory)."""

from fiamma._lib import lib

__all__ = ["fft_largest_factor", "stft"]

fft_largest_factor = lib.fm_fft_largest_factor


def stft(power, x, n_fft, hop, frames, pad, pad_mode, window, onesided, scale, out):
    """Frames of the contiguous (B?, L) signal x (reflect/constant/... padded by ``pad``, codes
    STFT_PAD_*), windowed by ``window`` (a contiguous NumPy array of x's dtype, n_fft long),
    transformed: out is (B?, n_freq, frames, 2) (re, im) pairs, or |X|^2 (B?, n_freq, frames)
    with ``power``."""
    batch = 1 if len(x._shape) == 1 else x._shape[0]
    return lib.fm_stft(x._dtype.code, power, batch, x._shape[-1], x._ptr, n_fft, hop, frames,
                       pad, pad_mode, window.ctypes.data, onesided, scale, out._ptr)
