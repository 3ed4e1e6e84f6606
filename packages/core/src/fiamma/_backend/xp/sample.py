"""Array-module resampling (contract.Backend.upsample, upsample_backward, grid_sample,
grid_sample_backward) with csrc/sample_impl.h's conventions: coordinates and weights in the
tensor's own float type, tap tables (index, weight) per output position; out-of-range grid taps
read element 0 with weight 0 (so a NaN there propagates, as on the CPU).

interpolate is separable: the tables are per spatial dim (computed on the host, they are
small) and applied one dim at a time, a gather per tap forward and a scatter-add per tap
backward. grid_sample's taps are computed per point on the device and gathered over all
channels at once."""

import numpy as np

from fiamma import _dtype as D
from fiamma._backend import codes as C

__all__ = ["SampleMixin"]

_A = -0.75  # the bicubic convolution constant


def _cubic(t, one):
    """The four cubic convolution weights of fraction t (an array of t's dtype)."""
    A = t.dtype.type(_A)
    x1, x2, x3 = t + one, one - t, one + one - t
    return [((A * x1 - 5 * A) * x1 + 8 * A) * x1 - 4 * A,
            ((A + 2) * t - (A + 3)) * t * t + one,
            ((A + 2) * x2 - (A + 3)) * x2 * x2 + one,
            ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A]


def _cubic_d(t, one):
    A = t.dtype.type(_A)
    x1, x2, x3 = t + one, one - t, one + one - t
    return [(3 * A * x1 - 10 * A) * x1 + 8 * A,
            (3 * (A + 2) * t - 2 * (A + 3)) * t,
            -((3 * (A + 2) * x2 - 2 * (A + 3)) * x2),
            -((3 * A * x3 - 10 * A) * x3 + 8 * A)]


def _up_table(mode, ac, n_in, n_out, sc, dt):
    """(indices (n_out, taps) int64, weights (n_out, taps) of dt) along one dim."""
    t = dt.type
    o = np.arange(n_out)
    if mode in (C.SAMPLE_NEAREST, C.SAMPLE_NEAREST_EXACT):
        scale = t(1.0 / sc) if sc > 0 else t(n_in) / t(n_out)
        if mode == C.SAMPLE_NEAREST:
            v = (o.astype(dt) * scale).astype(np.float32)
        else:
            v = ((o + 0.5) * np.float64(scale)).astype(np.float32)
        i = np.clip(np.floor(v).astype(np.int64), 0, n_in - 1)
        return i[:, None], np.ones((n_out, 1), dt)
    if ac:
        scale = t(n_in - 1) / t(n_out - 1) if n_out > 1 else t(0)
    else:
        scale = t(1.0 / sc) if sc > 0 else t(n_in) / t(n_out)
    of = o.astype(dt)
    r = scale * of if ac else scale * (of + t(0.5)) - t(0.5)
    cubic = mode == C.SAMPLE_CUBIC
    if not cubic:
        if n_in == n_out:
            return np.stack([o, o], 1), np.stack([np.ones(n_out, dt), np.zeros(n_out, dt)], 1)
        if not ac:
            r = np.where(r < 0, t(0), r)
    i = np.minimum(np.floor(r.astype(np.float32)).astype(np.int64), n_in - 1)
    f = np.clip(r - i.astype(dt), t(0), t(1))
    if not cubic:
        hi = np.where(i < n_in - 1, i + 1, i)
        return np.stack([i, hi], 1), np.stack([t(1) - f, f], 1)
    w = np.stack(_cubic(f, t(1)), 1)
    idx = np.stack([np.clip(i - 1 + kk, 0, n_in - 1) for kk in range(4)], 1)
    return idx, w


class SampleMixin:
    def _up_tables(self, mode, ac, nsp, isize, osize, scales, dt):
        return [_up_table(mode, ac, isize[d], osize[d], scales[d], dt) for d in range(nsp)]

    def upsample(self, mode, align_corners, nsp, n, c, isize, osize, scales, x, xs, y):
        xp = self.xp
        rc = self._sample_check(x, nsp, n, c, isize, osize)
        if rc or mode < C.SAMPLE_NEAREST or mode > C.SAMPLE_CUBIC:
            return rc or C.ERR_OP
        isize, osize = tuple(isize), tuple(osize)
        if n * c == 0 or 0 in osize:
            return 0
        v = self.raw(x, (n, c) + isize, xs)
        for d, (idx, w) in enumerate(self._up_tables(mode, align_corners, nsp, isize, osize,
                                                     scales, v.dtype)):
            ax = 2 + d
            shape = [1] * v.ndim
            shape[ax] = -1
            acc = None
            for tp in range(idx.shape[1]):
                part = xp.take(v, xp.asarray(idx[:, tp]), axis=ax)
                if mode not in (C.SAMPLE_NEAREST, C.SAMPLE_NEAREST_EXACT):
                    part = part * xp.asarray(w[:, tp].reshape(shape))
                acc = part if acc is None else acc + part
            v = acc
        self.cview(y, (n, c) + osize)[...] = v
        return 0

    def upsample_backward(self, mode, align_corners, nsp, n, c, isize, osize, scales, gy, gx):
        xp = self.xp
        rc = self._sample_check(gy, nsp, n, c, isize, osize)
        if rc or mode < C.SAMPLE_NEAREST or mode > C.SAMPLE_CUBIC:
            return rc or C.ERR_OP
        isize, osize = tuple(isize), tuple(osize)
        if n * c == 0:
            return 0
        if 0 in osize:
            self.put(gx, 0)
            return 0
        g = self.cview(gy, (n, c) + osize)
        tables = self._up_tables(mode, align_corners, nsp, isize, osize, scales, g.dtype)
        for d in range(nsp - 1, -1, -1):
            idx, w = tables[d]
            ax = 2 + d
            gm = xp.moveaxis(g, ax, -1)
            lead = gm.shape[:-1]
            gm = gm.reshape(-1, osize[d])
            res = xp.zeros((gm.shape[0], isize[d]), g.dtype)
            rows = xp.arange(gm.shape[0])[:, None]
            for tp in range(idx.shape[1]):
                self.scatter_add(res, (rows, xp.asarray(idx[:, tp])[None]),
                                 gm * xp.asarray(w[:, tp])[None])
            g = xp.moveaxis(res.reshape(lead + (isize[d],)), -1, ax)
        self.cview(gx, (n, c) + isize)[...] = g
        return 0

    def _sample_check(self, x, nsp, n, c, isize, osize):
        if x._dtype is not D.float32 and x._dtype is not D.float64:
            return C.ERR_DTYPE
        if nsp < 1 or nsp > 3 or n < 0 or c < 0:
            return C.ERR_ARG
        if any(isize[d] < 1 or osize[d] < 0 for d in range(nsp)):
            return C.ERR_ARG
        return 0

    # ---- grid_sample ----------------------------------------------------------------------
    def _grid_check(self, x, nsp, mode, padding, n, c, isize, osize):
        if nsp not in (2, 3):
            return C.ERR_ARG
        if mode not in (C.SAMPLE_NEAREST, C.SAMPLE_LINEAR, C.SAMPLE_CUBIC):
            return C.ERR_OP
        if mode == C.SAMPLE_CUBIC and nsp != 2:
            return C.ERR_OP
        if padding < C.PAD_ZEROS or padding > C.PAD_REFLECTION:
            return C.ERR_OP
        return self._sample_check(x, nsp, n, c, isize, osize)

    def _reflect(self, v, twice_low, twice_high):
        xp = self.xp
        t = v.dtype.type
        if twice_low == twice_high:
            return xp.zeros_like(v), xp.zeros_like(v)
        lo, span = t(twice_low / 2), t((twice_high - twice_low) / 2)
        v = v - lo
        s = xp.where(v < 0, t(-1), t(1))
        v = xp.abs(v)
        extra = xp.fmod(v, span)
        flips = xp.floor(v / span)
        even = xp.fmod(flips, t(2)) == 0
        return xp.where(even, extra + lo, span - extra + lo), xp.where(even, s, -s)

    def _clip(self, v, size):
        xp = self.xp
        t = v.dtype.type
        m = t(size - 1)
        g = xp.where((v <= 0) | (v >= m), t(0), t(1))
        return xp.where(v <= 0, t(0), xp.where(v >= m, m, v)), g

    def _grid_pad(self, v, size, padding, ac):
        """Padding applied to unnormalized coordinates: (coordinate, d coordinate / d v)."""
        xp = self.xp
        t = v.dtype.type
        g = xp.ones_like(v)
        if padding == C.PAD_BORDER:
            v, g = self._clip(v, size)
        elif padding == C.PAD_REFLECTION:
            if ac:
                v, g1 = self._reflect(v, 0, 2 * (size - 1))
            else:
                v, g1 = self._reflect(v, -1, 2 * size - 1)
            v, g2 = self._clip(v, size)
            g = g1 * g2
        v = xp.where((v > t(-1e15)) & (v < t(1e15)), v, t(-100))
        return v, g

    def _unnorm(self, v, size, ac):
        t = v.dtype.type
        if ac:
            return (v + t(1)) / t(2) * t(size - 1), t((size - 1) / 2)
        return ((v + t(1)) * t(size) - t(1)) / t(2), t(size / 2)

    def _grid_taps(self, nsp, mode, padding, ac, isz, gc, want_d):
        """Taps of every point: a list of (flat in-plane index, weight, [d weight / d grid
        coordinate per axis] or None); gc (n, P, nsp) grid coordinates (x, y[, z])."""
        xp = self.xp
        sz = [isz[nsp - 1 - a] for a in range(nsp)]  # per grid axis (0 = x = last dim)
        mult = [1] * nsp
        for a in range(1, nsp):
            mult[a] = mult[a - 1] * sz[a - 1]
        t = gc.dtype.type
        taps = []
        if mode == C.SAMPLE_CUBIC:
            cf, dcf, base, gm = [], [], [], []
            for a in range(2):
                v, g = self._unnorm(gc[..., a], sz[a], ac)
                v = xp.where(xp.isnan(v), t(-100), xp.clip(v, t(-1e15), t(1e15)))
                f = xp.floor(v)
                base.append(f.astype(np.int64))
                cf.append(_cubic(v - f, t(1)))
                dcf.append(_cubic_d(v - f, t(1)))
                gm.append(g)
            for i in range(4):
                for j in range(4):
                    ix, _ = self._grid_pad((base[0] - 1 + j).astype(gc.dtype), sz[0], padding,
                                           ac)
                    iy, _ = self._grid_pad((base[1] - 1 + i).astype(gc.dtype), sz[1], padding,
                                           ac)
                    ix, iy = ix.astype(np.int64), iy.astype(np.int64)
                    ok = (ix >= 0) & (ix < sz[0]) & (iy >= 0) & (iy < sz[1])
                    off = xp.where(ok, ix * mult[0] + iy * mult[1], 0)
                    w = xp.where(ok, cf[1][i] * cf[0][j], t(0))
                    dw = None
                    if want_d:
                        dw = [xp.where(ok, cf[1][i] * dcf[0][j] * gm[0], t(0)),
                              xp.where(ok, dcf[1][i] * cf[0][j] * gm[1], t(0))]
                    taps.append((off, w, dw))
            return taps
        v, gm = [], []
        for a in range(nsp):
            u, g1 = self._unnorm(gc[..., a], sz[a], ac)
            p, g2 = self._grid_pad(u, sz[a], padding, ac)
            v.append(p)
            gm.append(g1 * g2)
        if mode == C.SAMPLE_NEAREST:
            ok, off = True, 0
            for a in range(nsp):
                i = xp.rint(v[a]).astype(np.int64)
                ok = ok & (i >= 0) & (i < sz[a])
                off = off + i * mult[a]
            zero = [xp.zeros_like(v[0])] * nsp if want_d else None
            return [(xp.where(ok, off, 0), xp.where(ok, t(1), t(0)), zero)]
        i0, fr = [], []
        for a in range(nsp):
            f = xp.floor(v[a])
            i0.append(f.astype(np.int64))
            fr.append(v[a] - f)
        for k in range(1 << nsp):
            ok, off, wk, wa = True, 0, t(1), []
            for a in range(nsp):
                up = (k >> a) & 1
                i = i0[a] + up
                ok = ok & (i >= 0) & (i < sz[a])
                off = off + i * mult[a]
                wa.append(fr[a] if up else t(1) - fr[a])
                wk = wk * wa[a]
            dw = None
            if want_d:
                dw = []
                for a in range(nsp):
                    d = xp.where(ok, gm[a] * t(1 if (k >> a) & 1 else -1), t(0))
                    for b in range(nsp):
                        if b != a:
                            d = d * wa[b]
                    dw.append(d)
            taps.append((xp.where(ok, off, 0), xp.where(ok, wk, t(0)), dw))
        return taps

    def _grid_inputs(self, nsp, n, c, isize, osize, x, xs, grid):
        isize, osize = tuple(isize), tuple(osize)
        npts = int(np.prod(osize))
        nin = int(np.prod(isize))
        xv = self.raw(x, (n, c) + isize, xs).reshape(n, c, nin)
        gc = self.cview(grid, (n, npts, nsp))
        return isize, osize, npts, nin, xv, gc

    def grid_sample(self, nsp, mode, padding, align_corners, n, c, isize, osize, x, xs, grid,
                    y):
        xp = self.xp
        rc = self._grid_check(x, nsp, mode, padding, n, c, isize, osize)
        if rc:
            return rc
        isize, osize, npts, nin, xv, gc = self._grid_inputs(nsp, n, c, isize, osize, x, xs,
                                                            grid)
        if n * c * npts == 0:
            return 0
        b = xp.arange(n)[:, None, None]
        ch = xp.arange(c)[None, :, None]
        acc = None
        for off, w, _ in self._grid_taps(nsp, mode, padding, align_corners, isize, gc, False):
            part = w[:, None, :] * xv[b, ch, off[:, None, :]]
            acc = part if acc is None else acc + part
        self.cview(y, (n, c, npts))[...] = acc
        return 0

    def grid_sample_backward(self, nsp, mode, padding, align_corners, n, c, isize, osize, gy,
                             x, xs, grid, gx, ggrid):
        xp = self.xp
        rc = self._grid_check(x, nsp, mode, padding, n, c, isize, osize)
        if rc:
            return rc
        isize, osize, npts, nin, xv, gc = self._grid_inputs(nsp, n, c, isize, osize, x, xs,
                                                            grid)
        need_d = ggrid is not None and mode != C.SAMPLE_NEAREST
        if ggrid is not None and not need_d:
            self.put(ggrid, 0)
        if gx is None and not need_d:
            return 0
        g = self.cview(gy, (n, c, npts))
        dt = g.dtype
        res = xp.zeros((n, c, nin), dt) if gx is not None else None
        dacc = xp.zeros((n, npts, nsp), dt) if need_d else None
        if n * c * npts:
            b = xp.arange(n)[:, None, None]
            ch = xp.arange(c)[None, :, None]
            for off, w, dw in self._grid_taps(nsp, mode, padding, align_corners, isize, gc,
                                              need_d):
                o3 = off[:, None, :]
                if res is not None:
                    self.scatter_add(res, (b, ch, o3), w[:, None, :] * g)
                if need_d:
                    s = xp.sum(xv[b, ch, o3] * g, axis=1)  # (n, npts)
                    for a in range(nsp):
                        dacc[..., a] += dw[a] * s
        if res is not None:
            self.cview(gx, (n, c, nin))[...] = res
        if need_d:
            self.cview(ggrid, (n, npts, nsp))[...] = dacc
        return 0
