"""Derivatives of ``fiamma.stft`` and ``fiamma.stft_power`` (w.r.t. the signal) and
``fiamma.istft`` (w.r.t. the spectrum), on fiamma's complex layout (a trailing (real, imag)
pair).

stft is pad -> frames (overlapping windows times the window) -> DFT of each frame; its adjoint
runs the DFT's adjoint, multiplies by the window, overlap-adds the frames and undoes the
padding. istft is the reverse chain (inverse DFT, window, overlap-add, crop, divide by the
window envelope). The window itself gets no gradient (it is not recorded as an input).
"""

import math

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd._formulas.fft import _F, _adj_c2r, _adj_r2c
from fiamma.autograd_hook import ops


def _window(kw, n_fft, dtype, device):
    """The window zero-padded to n_fft, centred (as stft / istft use it)."""
    win = kw["win_length"]
    w = kw.get("window")
    w = fiamma.ones((win,), dtype=dtype, device=device) if w is None else w.detach().to(dtype)
    left = (n_fft - win) // 2
    right = n_fft - win - left
    parts = ([fiamma.zeros((left,), dtype=dtype, device=device)] if left else []) + [w] + \
        ([fiamma.zeros((right,), dtype=dtype, device=device)] if right else [])
    return fiamma.cat(parts) if len(parts) > 1 else w


def _frame_index(frames, n_fft, hop, device):
    """(frames, n_fft) int64: the signal position of each frame element."""
    return ((fiamma.arange(frames, device=device) * hop).unsqueeze(1)
            + fiamma.arange(n_fft, device=device).unsqueeze(0))


@derivative(ops.stft, save="none")
def _stft(ctx, grad):
    return (_stft_adjoint(ctx.kwargs, tuple(ctx.input_shapes[0]), grad),)


@derivative(ops.stft_power, save="inputs")
def _stft_power(ctx, grad):
    # P = |S|^2 summed over the (real, imag) pair: dP = 2 S . dS, so the signal's gradient is
    # stft's adjoint applied to 2 S g (S recomputed from the saved signal, differentiably)
    x = ctx.inputs[0]
    kw = ctx.kwargs
    s = fiamma.stft(x, kw["n_fft"], kw["hop_length"], kw["win_length"], kw.get("window"),
                    kw.get("center", True), kw.get("pad_mode", "reflect"),
                    kw.get("normalized", False), kw.get("onesided", True))
    return (_stft_adjoint(kw, tuple(x.shape), s * (2.0 * grad).unsqueeze(-1)),)


def _stft_adjoint(kw, shape, grad):
    """stft's adjoint: from a gradient (B?, n_freq, frames, 2) (real, imag) to the signal's
    (B?, L)."""
    n_fft, hop = kw["n_fft"], kw["hop_length"]
    g = grad if len(shape) == 2 else grad.unsqueeze(0)   # (B, k, T, 2)
    g = fiamma.complex(g[..., 0], g[..., 1]).transpose(1, 2)   # (B, T, k) complex
    if kw.get("normalized"):
        g = g * (1.0 / math.sqrt(n_fft))
    frames = g.shape[1]
    if kw.get("onesided", True):
        gf = _adj_r2c(g, (g.shape[0], frames, n_fft), [2], n_fft, None)
    else:
        gf = _F().ifft(g, dim=2, norm="forward").real
    gf = gf * _window(kw, n_fft, gf.dtype, gf.device)                # (B, T, n_fft)
    batch = gf.shape[0]
    length = shape[-1]
    padded = length + 2 * (n_fft // 2) if kw.get("center", True) else length
    idx = _frame_index(frames, n_fft, hop, gf.device)
    rows = fiamma.arange(batch, device=gf.device).reshape(batch, 1, 1)
    ga = fiamma.zeros((batch, padded), dtype=gf.dtype, device=gf.device).index_put(
        (rows, idx.unsqueeze(0)), gf, accumulate=True)
    if kw.get("center", True):
        from fiamma.autograd._formulas.shapeops import pad_backward

        p = n_fft // 2
        ga = pad_backward(ga, (batch, length), (p, p), kw.get("pad_mode", "reflect"))
    return ga if len(shape) == 2 else ga[0]


@derivative(ops.istft, save="none")
def _istft(ctx, grad):
    kw = ctx.kwargs
    n_fft, hop = kw["n_fft"], kw["hop_length"]
    shape = tuple(ctx.input_shapes[0])        # (B?, k, T) complex or (B?, k, T, 2) pairs
    pairs = not ctx.input_dtypes[0].is_complex
    if pairs:
        shape = shape[:-1]
    batched = len(shape) == 3
    frames = shape[-1]
    g = grad if batched else grad.unsqueeze(0)            # (B, len)
    batch = g.shape[0]
    total = n_fft + hop * (frames - 1)
    center = kw.get("center", True)
    start = n_fft // 2 if center else 0
    length = kw.get("length")
    end = total - n_fft // 2 if (center and length is None) else total
    if length is not None:
        end = start + length
    end = min(end, total)
    g = g[:, :end - start]                                # padding beyond the signal: no grad
    w = _window(kw, n_fft, g.dtype, g.device)
    idx = _frame_index(frames, n_fft, hop, g.device)
    env = fiamma.zeros((total,), dtype=g.dtype, device=g.device).index_put(
        (idx.reshape(-1),), (w * w).expand(frames, n_fft).reshape(-1), accumulate=True)
    g = g / env[start:end]
    parts = ([fiamma.zeros((batch, start), dtype=g.dtype, device=g.device)] if start else []) \
        + [g] + ([fiamma.zeros((batch, total - end), dtype=g.dtype, device=g.device)]
                 if total > end else [])
    gy = fiamma.cat(parts, 1) if len(parts) > 1 else g   # (B, total)
    gf = gy[:, idx] * w                                   # (B, T, n_fft)
    if kw.get("normalized"):
        gf = gf * math.sqrt(n_fft)
    nfreq = shape[-2]
    if kw.get("onesided", True):
        gs = _adj_c2r(gf, (batch, frames, nfreq), [2], None)
    else:
        # adjoint of real(ifft(., norm="backward"))
        gs = _F().fft(gf, dim=2, norm="forward")
    gs = gs.transpose(1, 2)                               # (B, k, T) complex
    gs = gs if batched else gs[0]
    return (fiamma.view_as_real(gs) if pairs else gs,)
