"""The array-module attention (contract ``attn_fwd`` / ``attn_bwd``; csrc/attn.c is the CPU's):
batched matmuls over (B, H) with the whole (L, S) score matrix, key/value heads repeated for
grouped-query attention and the group's gradients summed back; and the LSTM cell arithmetic
(``lstm_cell_fwd`` / ``lstm_cell_bwd``; csrc/lstm.c) as whole-array expressions."""

import numpy as np

from fiamma import _dtype as D
from fiamma._backend import codes as K


def _float(*ts):
    dt = ts[0]._dtype
    return (dt is D.float32 or dt is D.float64) and all(t is None or t._dtype is dt for t in ts)


class AttnMixin:
    def _attn_scores(self, B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs, mkind, mask, ms):
        """(Q, K, V (heads repeated to H), masked scores (B, H, L, S))."""
        xp = self.xp
        Q = self.raw(q, (B, H, L, E), tuple(qs) + (1,))
        Kt = self.raw(k, (B, Hk, S, E), tuple(ks) + (1,))
        V = self.raw(v, (B, Hk, S, Ev), tuple(vs) + (1,))
        if H != Hk:
            Kt = xp.repeat(Kt, H // Hk, axis=1)
            V = xp.repeat(V, H // Hk, axis=1)
        sc = xp.matmul(Q, xp.swapaxes(Kt, -1, -2))
        if E:  # no embedding: empty sums (0), whatever the scale (inf by default)
            sc = sc * Q.dtype.type(scale)
        ninf = Q.dtype.type(-np.inf)
        if mkind == K.ATTN_CAUSAL:
            keep = xp.arange(S)[None, :] <= xp.arange(L)[:, None]
            sc = xp.where(keep, sc, ninf)
        elif mkind == K.ATTN_ADD:
            sc = sc + self.raw(mask, (B, H, L, S), tuple(ms))
        elif mkind == K.ATTN_BOOL:
            sc = xp.where(self.raw(mask, (B, H, L, S), tuple(ms)) != 0, sc, ninf)
        return Q, Kt, V, sc

    def _attn_check(self, H, Hk, mkind, *ts):
        if not _float(*ts):
            return K.ERR_DTYPE
        if Hk < 1 or H % Hk or mkind not in (K.ATTN_NONE, K.ATTN_CAUSAL, K.ATTN_ADD,
                                               K.ATTN_BOOL):
            return K.ERR_ARG
        return 0

    def attn_fwd(self, B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs, mkind, mask, ms,
                 drop, out, os, lse):
        xp = self.xp
        rc = self._attn_check(H, Hk, mkind, q, k, v, drop, out, lse)
        if rc or B * H * L == 0:
            return rc
        O = self.raw(out, (B, H, L, Ev), tuple(os) + (1,))
        LS = self.cview(lse, (B, H, L))
        if S == 0:
            O[...] = 0
            LS[...] = -np.inf
            return 0
        _, _, V, sc = self._attn_scores(B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs,
                                        mkind, mask, ms)
        m = xp.max(sc, axis=-1, keepdims=True)
        dead = m == -np.inf
        m = xp.where(dead, xp.zeros_like(m), m)
        e = xp.exp(sc - m)
        s = xp.sum(e, axis=-1, keepdims=True)
        p = e / xp.where(dead, xp.ones_like(s), s)
        if drop is not None:
            p = p * self.cview(drop, (B, H, L, S))
        O[...] = xp.matmul(p, V)
        LS[...] = xp.where(dead, m.dtype.type(-np.inf), m + xp.log(xp.where(dead, 1, s)))[..., 0]
        return 0

    def attn_bwd(self, B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs, mkind, mask, ms,
                 drop, g, gs, lse, gq, gk, gv):
        xp = self.xp
        rc = self._attn_check(H, Hk, mkind, q, k, v, drop, g, lse, gq, gk, gv)
        if rc:
            return rc
        rep = H // Hk
        if B * H * L == 0 or S == 0:
            for t, shp in ((gq, (B, H, L, E)), (gk, (B, Hk, S, E)), (gv, (B, Hk, S, Ev))):
                if t is not None:
                    self.cview(t, shp)[...] = 0
            return 0
        Q, Kr, V, sc = self._attn_scores(B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs,
                                         mkind, mask, ms)
        G = self.raw(g, (B, H, L, Ev), tuple(gs) + (1,))
        ls = self.cview(lse, (B, H, L))[..., None]
        dead = ls == -np.inf
        p = xp.where(dead, sc.dtype.type(0), xp.exp(sc - xp.where(dead, 0, ls)))
        d = None if drop is None else self.cview(drop, (B, H, L, S))
        if gv is not None:
            pd = p if d is None else p * d
            r = xp.matmul(xp.swapaxes(pd, -1, -2), G)
            self.cview(gv, (B, Hk, S, Ev))[...] = r.reshape(B, Hk, rep, S, Ev).sum(axis=2)
        if gq is None and gk is None:
            return 0
        dp = xp.matmul(G, xp.swapaxes(V, -1, -2))
        if d is not None:
            dp = dp * d
        ds = p * (dp - xp.sum(p * dp, axis=-1, keepdims=True))
        one = sc.dtype.type(scale)
        if gq is not None:
            self.cview(gq, (B, H, L, E))[...] = xp.matmul(ds, Kr) * one
        if gk is not None:
            r = xp.matmul(xp.swapaxes(ds, -1, -2), Q) * one
            self.cview(gk, (B, Hk, S, E))[...] = r.reshape(B, Hk, rep, S, E).sum(axis=2)
        return 0


class LstmMixin:
    """The array-module LSTM cell arithmetic (contract ``lstm_cell_fwd`` / ``lstm_cell_bwd``;
    csrc/lstm.c is the CPU's)."""

    def lstm_cell_fwd(self, B, H, gates, sg, cx, hy, cy, ws):
        xp = self.xp
        if not _float(gates, cx, hy, cy, ws):
            return K.ERR_DTYPE
        if B * H == 0:
            return 0
        gr = self.raw(gates, (B, 4 * H), (sg, 1))
        one = gr.dtype.type(1)
        sig = one / (one + xp.exp(-gr))
        i, f, o = sig[:, :H], sig[:, H:2 * H], sig[:, 3 * H:]
        g = xp.tanh(gr[:, 2 * H:3 * H])
        c2 = f * self.cview(cx, (B, H)) + i * g
        w = self.cview(ws, (B, 4 * H))
        w[:, :2 * H] = sig[:, :2 * H]
        w[:, 2 * H:3 * H] = g
        w[:, 3 * H:] = o
        self.cview(cy, (B, H))[...] = c2
        self.cview(hy, (B, H))[...] = o * xp.tanh(c2)
        return 0

    def lstm_cell_bwd(self, B, H, ghy, gcy, cx, cy, ws, ggates, gcx):
        xp = self.xp
        if not _float(cx, ghy, gcy, cy, ws, ggates, gcx):
            return K.ERR_DTYPE
        if B * H == 0:
            return 0
        w = self.cview(ws, (B, 4 * H))
        i, f, g, o = w[:, :H], w[:, H:2 * H], w[:, 2 * H:3 * H], w[:, 3 * H:]
        c = self.cview(cx, (B, H))
        tc = xp.tanh(self.cview(cy, (B, H)))
        zero = xp.zeros((B, H), w.dtype)
        dh = zero if ghy is None else self.cview(ghy, (B, H))
        dc = zero if gcy is None else self.cview(gcy, (B, H))
        dcs = dc + dh * o * (1 - tc * tc)
        d = self.cview(ggates, (B, 4 * H))
        d[:, :H] = dcs * g * i * (1 - i)
        d[:, H:2 * H] = dcs * c * f * (1 - f)
        d[:, 2 * H:3 * H] = dcs * i * (1 - g * g)
        d[:, 3 * H:] = dh * tc * o * (1 - o)
        if gcx is not None:
            self.cview(gcx, (B, H))[...] = dcs * f
        return 0
