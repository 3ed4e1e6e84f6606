"""Beamforming modules (torchaudio.transforms): PSD, MVDR, SoudenMVDR, RTFMVDR."""

import warnings

import fiamma
from fiamma.audio.functional import _beamforming as BF
from fiamma.nn import Module

__all__ = ["PSD", "MVDR", "SoudenMVDR", "RTFMVDR"]


class PSD(Module):
    """``forward(specgram, mask=None)``: PSD matrices (..., freq, channel, channel) of a complex
    STFT (..., channel, freq, time). With ``multi_mask`` the mask is (..., channel, freq, time)
    and averaged over channels first."""

    def __init__(self, multi_mask=False, normalize=True, eps=1e-15):
        super().__init__()
        self.multi_mask, self.normalize, self.eps = multi_mask, normalize, eps

    def forward(self, specgram, mask=None):
        if mask is not None and self.multi_mask:
            mask = mask.mean(dim=-3)
        return BF.psd(specgram, mask, self.normalize, self.eps)


_SOLUTIONS = ("ref_channel", "stv_evd", "stv_power")


class MVDR(Module):
    """Mask-based MVDR beamformer: ``forward(specgram, mask_s, mask_n=None)`` estimates speech
    and noise PSDs from the time-frequency masks (``mask_n`` defaults to ``1 - mask_s``, with a
    warning), computes the weights by ``solution`` ("ref_channel": Souden's; "stv_evd" /
    "stv_power": from the RTF by eigendecomposition / power iteration) for channel
    ``ref_channel`` and returns the enhanced STFT (..., freq, time) in the input's dtype
    (computed in complex128). ``online=True`` keeps mask-weighted running PSDs across calls."""

    def __init__(self, ref_channel=0, solution="ref_channel", multi_mask=False, diag_loading=True,
                 diag_eps=1e-7, online=False):
        super().__init__()
        if solution not in _SOLUTIONS:
            raise ValueError(f"MVDR: solution must be one of {_SOLUTIONS}, got {solution!r}")
        self.ref_channel, self.solution, self.multi_mask = ref_channel, solution, multi_mask
        self.diag_loading, self.diag_eps, self.online = diag_loading, diag_eps, online
        self.psd = PSD(multi_mask)
        self._state = None  # (psd_s, psd_n, mask_sum_s, mask_sum_n) when online

    def _weights(self, psd_s, psd_n, u):
        if self.solution == "ref_channel":
            return BF.mvdr_weights_souden(psd_s, psd_n, u, self.diag_loading, self.diag_eps, 1e-8)
        if self.solution == "stv_evd":
            stv = BF.rtf_evd(psd_s)
        else:
            stv = BF.rtf_power(psd_s, psd_n, u, diagonal_loading=self.diag_loading,
                               diag_eps=self.diag_eps)
        return BF.mvdr_weights_rtf(stv, psd_n, u, self.diag_loading, self.diag_eps, 1e-8)

    def forward(self, specgram, mask_s, mask_n=None):
        if not isinstance(specgram, fiamma.Tensor) or not specgram.is_complex() \
                or specgram.dim() < 3:
            raise ValueError("MVDR: specgram must be a complex tensor (..., channel, freq, time), "
                             f"got {getattr(specgram, 'dtype', type(specgram).__name__)} "
                             f"{tuple(getattr(specgram, 'shape', ()))}")
        dtype = specgram.dtype
        x = specgram.to(fiamma.complex128)
        if mask_n is None:
            warnings.warn("MVDR: mask_n is not given; using 1 - mask_s", stacklevel=3)
            mask_n = 1 - mask_s
        mask_s = mask_s.to(fiamma.float64)
        mask_n = mask_n.to(fiamma.float64)
        psd_s = self.psd(x, mask_s)
        psd_n = self.psd(x, mask_n)
        C = x.shape[-3]
        u = fiamma.zeros(tuple(x.shape[:-3]) + (C,), dtype=fiamma.complex128)
        u[..., self.ref_channel] = 1
        if self.online:
            ms = (mask_s.mean(-3) if self.multi_mask else mask_s).sum(-1)
            mn = (mask_n.mean(-3) if self.multi_mask else mask_n).sum(-1)
            if self._state is not None:
                ps0, pn0, s0, n0 = self._state
                psd_s = (ps0 * s0[..., None, None] + psd_s * ms[..., None, None]) \
                    / (s0 + ms)[..., None, None]
                psd_n = (pn0 * n0[..., None, None] + psd_n * mn[..., None, None]) \
                    / (n0 + mn)[..., None, None]
                ms, mn = s0 + ms, n0 + mn
            self._state = (psd_s, psd_n, ms, mn)
        w = self._weights(psd_s, psd_n, u)
        return BF.apply_beamforming(w, x).to(dtype)


class SoudenMVDR(Module):
    """``forward(specgram, psd_s, psd_n, reference_channel, diagonal_loading=True,
    diag_eps=1e-7, eps=1e-8)``: Souden's MVDR weights applied to ``specgram``."""

    def forward(self, specgram, psd_s, psd_n, reference_channel, diagonal_loading=True,
                diag_eps=1e-7, eps=1e-8):
        w = BF.mvdr_weights_souden(psd_s, psd_n, reference_channel, diagonal_loading, diag_eps,
                                   eps)
        return BF.apply_beamforming(w, specgram)


class RTFMVDR(Module):
    """``forward(specgram, rtf, psd_n, reference_channel, diagonal_loading=True,
    diag_eps=1e-7, eps=1e-8)``: MVDR weights from an RTF applied to ``specgram``."""

    def forward(self, specgram, rtf, psd_n, reference_channel, diagonal_loading=True,
                diag_eps=1e-7, eps=1e-8):
        w = BF.mvdr_weights_rtf(rtf, psd_n, reference_channel, diagonal_loading, diag_eps, eps)
        return BF.apply_beamforming(w, specgram)
