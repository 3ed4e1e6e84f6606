"""The array-module cross entropy (contract ``xent_fwd`` / ``xent_bwd``; csrc/xent.c is the
CPU's): whole-array log-sum-exp over the rows, the target column by take_along_axis, one host
sync only for the target range check (an error must be raised before anything is written), and
none when the targets' range is known (an upload from the host: base.note_range)."""

import numpy as np

from fiamma import _dtype as D
from fiamma._backend import codes as K


def _float(*ts):
    dt = ts[0]._dtype
    return (dt is D.float32 or dt is D.float64) and all(t is None or t._dtype is dt for t in ts)


class XentMixin:
    def _xent_rows(self, n, c, x, target, weight, ignore_index):
        """(rows (n, c), lse (n, 1), targets (n,) clipped into range, kept (n,) bool, w or None)
        or None when a target is out of range."""
        xp = self.xp
        v = self.cview(x, (n, c))
        tg = self.cview(target, (n,))
        kept = tg != np.int64(ignore_index)
        if not self.known_in(target, 0, c) and bool(xp.any(kept & ((tg < 0) | (tg >= c)))):
            return None
        m = xp.max(v, axis=1, keepdims=True)
        m = xp.where(xp.isfinite(m), m, xp.zeros_like(m))  # all -inf rows: lse -inf, not NaN
        lse = m + xp.log(xp.sum(xp.exp(v - m), axis=1, keepdims=True))
        t = xp.where(kept, tg, np.int64(0))
        w = None if weight is None else self.cview(weight, (c,))
        return v, lse, t, kept, w

    def _xent_start(self, n, c, x, target, weight, ignore_index, *outs):
        """What xent_fwd and xent_bwd start with: ``(code, None)`` when they return at once
        (a dtype that is not float, c < 1, no rows: 0, a target out of range), else
        ``(0, _xent_rows' tuple)``."""
        if not _float(x, weight, *outs) or c < 1:
            return (K.ERR_DTYPE if c >= 1 else K.ERR_ARG), None
        if n == 0:
            return 0, None
        r = self._xent_rows(n, c, x, target, weight, ignore_index)
        return (K.ERR_INDEX, None) if r is None else (0, r)

    def xent_fwd(self, n, c, x, target, weight, ignore_index, smoothing, loss, wt):
        xp = self.xp
        rc, r = self._xent_start(n, c, x, target, weight, ignore_index, loss, wt)
        if r is None:
            return rc
        v, lse, t, kept, w = r
        one = v.dtype.type
        xt = v[xp.arange(n), t]
        lse = lse[:, 0]
        if w is None:  # every weight 1: the products by 1 are left out (exact)
            wti = None
            out = lse - xt
            if smoothing != 0:
                out = one(1.0 - smoothing) * out
        else:
            wti = w[t]
            out = one(1.0 - smoothing) * wti * (lse - xt)
        if smoothing != 0:
            wsum = v.sum(axis=1) if w is None else v @ w
            big_w = one(c) if w is None else xp.sum(w)
            out = out + one(smoothing / c) * (big_w * lse - wsum)
        self.cview(loss, (n,))[...] = xp.where(kept, out, one(0))
        self.cview(wt, (n,))[...] = kept if wti is None else xp.where(kept, wti, one(0))
        return 0

    def xent_bwd(self, n, c, x, target, weight, ignore_index, smoothing, g, gs, scale, gx):
        xp = self.xp
        rc, r = self._xent_start(n, c, x, target, weight, ignore_index, g, gx)
        if r is None:
            return rc
        v, lse, t, kept, w = r
        one = v.dtype.type
        gv = self.raw(g, (n,), (gs,)).astype(np.float64) * scale
        a = xp.where(kept, gv, 0.0).astype(v.dtype)[:, None]
        wti = (xp.ones((n,), v.dtype) if w is None else w[t])[:, None]
        big_w = one(c) if w is None else xp.sum(w)
        k = a * (one(1.0 - smoothing) * wti + one(smoothing / c) * big_w)
        wrow = one(1.0) if w is None else w[None, :]
        out = k * xp.exp(v - lse) - a * one(smoothing / c) * wrow
        cols = xp.arange(c)[None, :] == t[:, None]
        out = out - xp.where(cols, a * one(1.0 - smoothing) * wti, one(0))
        self.cview(gx, (n, c))[...] = out
        return 0
