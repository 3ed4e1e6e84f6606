"""IIR/FIR filtering (``lfilter``) with a block-parallel recursion and an exact adjoint.

The recursion ``y[n] = u[n] - sum_k a[k] y[n-k]`` (``u`` = FIR part) is sequential per sample, which
is slow in Python. Split time into blocks of L samples: inside a block the output is a linear map
of the block's input (lower-triangular Toeplitz matrix of the impulse response, one matmul for all
blocks at once) plus a linear map of the p outputs before the block (an L x p matrix). Only that
p-vector has to be carried from block to block: a constant-matrix linear recurrence over T/L
blocks, solved by a doubling scan in log2(T/L) vectorised steps. The result is the direct form's,
up to rounding (for a stable filter).
"""

import numpy as np

import fiamma
from fiamma.autograd import Function

_BLOCK = 64


def _fir(x, b):
    """u[..., f, n] = sum_k b[f, k] x[..., f, n - k] (zeros before the start)."""
    P = b.shape[-1]
    T = x.shape[-1]
    u = x * b[:, :1]
    for k in range(1, min(P, T + 1)):
        u[..., k:] += x[..., :T - k] * b[:, k:k + 1]
    return u


def _block_mats(a, L):
    """For monic a (F, p+1): T (F, L, L) with T[i, m] = h[i - m], Z (F, L, p) with Z[i, r] the
    response at i to y[-1-r] = 1 (zero input)."""
    F, p1 = a.shape
    p = p1 - 1
    # column 0: impulse response; columns 1..p: initial states. Rows p.. are time 0..L-1.
    y = np.zeros((F, p + L, p + 1))
    for r in range(p):
        y[:, p - 1 - r, 1 + r] = 1.0
    ar = -a[:, :0:-1]  # (F, p): -a[p], ..., -a[1] aligned with y[n-p .. n-1]
    for n in range(L):
        y[:, p + n] = np.einsum("fk,fkc->fc", ar, y[:, n:n + p])
        if n == 0:
            y[:, p, 0] += 1.0
    h = y[:, p:, 0]  # (F, L)
    idx = np.arange(L)[:, None] - np.arange(L)[None, :]
    Tm = np.where(idx >= 0, h[:, np.maximum(idx, 0)], 0.0)
    return Tm, y[:, p:, 1:]


def _allpole(u, a):
    """y[..., f, n] = u - sum_k a[f, k] y[n - k], a monic (F, p+1); u (B, F, T) float array."""
    p = a.shape[1] - 1
    if p == 0 or not np.any(a[:, 1:]):  # FIR only
        return u.copy()
    B, F, T = u.shape
    L = max(min(max(_BLOCK, 8 * p), T), p)
    nb = -(-T // L)
    Tm, Z = _block_mats(a.astype(np.float64), L)
    dt = u.dtype
    with np.errstate(all="ignore"):  # an unstable filter overflows to inf/nan, silently as in torch
        return _allpole_blocks(u, Tm.astype(dt), Z.astype(dt), L, nb, p)


def _matvec(M, v):
    """out[b, f, n, r] = sum_c M[f, r, c] v[b, f, n, c], as p broadcast products: BLAS calls with
    an inner size of a few elements are slow (and contend for the cores)."""
    out = v[..., :1] * M[None, :, None, :, 0]
    for c in range(1, M.shape[-1]):
        out += v[..., c:c + 1] * M[None, :, None, :, c]
    return out


def _allpole_blocks(u, Tm, Z, L, nb, p):
    B, F, T = u.shape
    dt = u.dtype
    up = np.zeros((B, F, nb * L), dt)
    up[..., :T] = u
    ub = up.reshape(B, F, nb, L)
    zs = np.matmul(ub, Tm.transpose(0, 2, 1)[None])  # zero-state response of every block
    # state after block j (its last p outputs, newest first): e_j = zt_j + M e_{j-1}, solved by
    # a doubling scan (log2(nb) vectorised steps) instead of a Python loop over blocks
    M = np.ascontiguousarray(Z[:, L - p:][:, ::-1])  # (F, p, p)
    e = np.ascontiguousarray(zs[..., L - p:][..., ::-1])  # (B, F, nb, p)
    k, Mk = 1, M
    while k < nb:
        e[:, :, k:] = e[:, :, k:] + _matvec(Mk, e[:, :, :-k])
        Mk = np.matmul(Mk, Mk)
        k *= 2
    S = np.zeros_like(e)
    S[:, :, 1:] = e[:, :, :-1]  # the state entering each block
    # y = zs + S Z^T, as p rank-1 updates (a matmul with inner size p is slow in BLAS)
    y = zs
    for c in range(p):
        y += S[..., c:c + 1] * Z[None, :, None, :, c]
    return np.ascontiguousarray(y.reshape(B, F, nb * L)[..., :T])


def lfilter_np(x, a, b):
    """Filter x (B, F, T) with monic a, b (F, P) as float arrays (no clamp)."""
    return _allpole(_fir(x, b.astype(x.dtype)), a)


class _LFilter(Function):
    """y = lfilter(x, a, b) for monic a (a[:, 0] is ignored and gets a zero gradient). The
    backward pass is written with this same Function and fiamma ops, so it is differentiable
    again (higher-order gradients)."""

    @staticmethod
    def forward(ctx, x, a, b):
        xn = x.detach().numpy()
        an = a.detach().numpy().astype(np.float64)
        bn = b.detach().numpy().astype(np.float64)
        # the recursion runs in float64 whatever the input dtype: the block matrices of a filter
        # with poles near the unit circle (a 38 Hz high-pass at 44.1 kHz: |p| = 0.9946) lose
        # several percent of the output to float32 rounding
        y = fiamma.from_numpy(lfilter_np(xn.astype(np.float64), an, bn).astype(xn.dtype))
        ctx.save_for_backward(x, a, b, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, a, b, y = ctx.saved_tensors
        unit = fiamma.zeros(tuple(a.shape), dtype=a.dtype)
        unit[:, 0] = 1.0
        # adjoint of the all-pole part: the same recursion run backwards in time
        v = _LFilter.apply(g.flip(-1).contiguous(), a, unit).flip(-1).contiguous()
        gx = gb = ga = None
        if ctx.needs_input_grad[0]:  # adjoint of the FIR part: FIR backwards in time
            gx = _LFilter.apply(v.flip(-1).contiguous(), unit, b).flip(-1)
        if ctx.needs_input_grad[2]:
            gb = _correlate_t(v, x, b.shape[1])
        if ctx.needs_input_grad[1]:
            ga = -_correlate_t(v, y, a.shape[1]) * (1.0 - unit)
        return gx, ga, gb


def _correlate_t(v, x, P):
    """g[f, k] = sum_{b, n} v[b, f, n] x[b, f, n - k] (k < P) with fiamma ops (differentiable)."""
    B, F, T = v.shape
    xp = fiamma.nn.functional.pad(x, (P - 1, 0))
    win = xp.unfold(-1, P, 1)  # (B, F, T, P): win[..., n, j] = x[n + j - (P - 1)]
    g = fiamma.matmul(v.reshape(B, F, 1, T), win).reshape(B, F, P).sum(0)
    return g.flip(-1)


def lfilter_core(x, a, b):
    """x (B, F, T) float tensor, a/b (F, P) monic tensors of x's dtype -> y (B, F, T)."""
    x = x.contiguous()
    return _LFilter.apply(x, a.contiguous(), b.contiguous())
