"""Array-module primitives of the spectral family (contract.Backend documents each): the
short-time Fourier transform and the numpy.fft-style transforms through the array module's FFT
(``xp.fft``: NumPy's pocketfft, CuPy's cuFFT)."""

import numpy as np

from fiamma import _dtype as D, _tensor_factory as TF
from fiamma._backend import codes as C

__all__ = ["SpectralMixin"]

_FFT_NAMES = frozenset(["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fftn", "ifftn",
                        "rfftn", "irfftn"])


class SpectralMixin:
    def stft(self, power, x, n_fft, hop, frames, pad, pad_mode, window, onesided, scale, out):
        xp = self.xp
        if x._dtype not in (D.float32, D.float64):
            return C.ERR_DTYPE
        if not C.STFT_PAD_CONSTANT <= pad_mode <= C.STFT_PAD_CIRCULAR:
            return C.ERR_ARG
        B = 1 if len(x._shape) == 1 else x._shape[0]
        L = x._shape[-1]
        if B < 0 or n_fft < 1 or hop < 1 or frames < 0 or pad < 0:
            return C.ERR_ARG
        if B == 0 or frames == 0:
            return 0
        if L < 1 or (pad_mode == C.STFT_PAD_REFLECT and pad >= L):
            return C.ERR_ARG
        if L + 2 * pad < n_fft or (frames - 1) > (L + 2 * pad - n_fft) // hop:
            return C.ERR_INDEX
        sig = self.get(x).reshape(B, L)
        # padded sample i of frame t is signal sample j = t * hop + i - pad, mapped by pad_mode
        j = (xp.arange(frames, dtype=np.int64)[:, None] * hop
             + xp.arange(n_fft, dtype=np.int64)[None, :] - pad)
        inside = (j >= 0) & (j < L)
        if pad_mode == C.STFT_PAD_REFLECT:
            src = xp.where(j < 0, -j, xp.where(j >= L, 2 * (L - 1) - j, j))
        elif pad_mode == C.STFT_PAD_REPLICATE:
            src = xp.clip(j, 0, L - 1)
        elif pad_mode == C.STFT_PAD_CIRCULAR:
            src = j % L
        else:
            src = xp.where(inside, j, 0)
        fr = sig[:, src]  # (B, frames, n_fft)
        if pad_mode == C.STFT_PAD_CONSTANT:
            fr = xp.where(inside, fr, fr.dtype.type(0))
        w = self.asarray(np.asarray(window, dtype=sig.dtype))
        fr = fr * w
        spec = xp.fft.rfft(fr, axis=-1) if onesided else xp.fft.fft(fr, axis=-1)
        spec = xp.swapaxes(spec, 1, 2)  # (B, n_freq, frames)
        rdt = sig.dtype.type
        if power:
            res = (spec.real * spec.real + spec.imag * spec.imag) * rdt(scale * scale)
        else:
            res = xp.stack([spec.real * rdt(scale), spec.imag * rdt(scale)], axis=-1)
        self.raw(out)[...] = res.astype(sig.dtype).reshape(out._shape)
        return 0

    def fft(self, name, x, cin, conj, kwargs):
        xp = self.xp
        if name not in _FFT_NAMES or x._dtype not in (D.float32, D.float64):
            return C.ERR_ARG, None
        a = self.get(x)
        if cin:
            a = xp.ascontiguousarray(a).view(
                np.complex64 if a.dtype == np.float32 else np.complex128)[..., 0]
        if conj == 1:
            a = xp.conj(a)
        r = getattr(xp.fft, name)(a, **kwargs)
        if conj == 2:
            r = xp.conj(r)
        dev = x._storage.device
        if r.dtype.kind == "c":
            fdt = D.float32 if r.dtype == np.complex64 else D.float64
            res = TF.new_empty(tuple(r.shape) + (2,), fdt, dev)
            if res._numel:
                self.raw(res).view(r.dtype)[..., 0] = r
        else:
            res = TF.new_empty(tuple(r.shape), D.float32 if r.dtype == np.float32 else D.float64,
                               dev)
            if res._numel:
                self.raw(res)[...] = r
        return 0, res
