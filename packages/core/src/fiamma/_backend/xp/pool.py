"""Array-module pooling (contract.Backend.pool_max, pool_avg, pool_avg_backward,
pool_scatter), with csrc/pool.c's window conventions: per spatial dim and output position the
first in-bounds tap, the number of in-bounds taps and an average pool's divisor factor, computed
on the host (a few small tables) and applied as one gather per kernel tap over all planes. A max
window keeps its first maximum (a NaN wins, the last one in window order); a window with no tap
inside reports its clamped start. Planes are contiguous; sizes are padded to 3 dims."""

import itertools

import numpy as np

from fiamma import _dtype as D
from fiamma._backend import codes as C

__all__ = ["PoolMixin"]

_ONE3 = (1, 1, 1)


def _windows(adaptive, avg, cip, isz, osz, k, s, p, d):
    """Per dim (start, count, divisor factor, step) arrays as in csrc/pool.c, or None for bad
    arguments."""
    out = []
    for a in range(3):
        n, m = osz[a], isz[a]
        if m < 0 or n < 0:
            return None
        if not adaptive and (k[a] < 1 or s[a] < 1 or p[a] < 0 or (d is not None and d[a] < 1)):
            return None
        o = np.arange(n, dtype=np.int64)
        if adaptive:
            st = (o * m) // n
            en = ((o + 1) * m + n - 1) // n
            cnt = en - st
            fac = cnt
            step = 1
        elif avg:
            b = o * s[a] - p[a]
            e = np.minimum(b + k[a], m + p[a])
            pool = e - b
            b = np.maximum(b, 0)
            e = np.minimum(e, m)
            st = b
            cnt = np.maximum(e - b, 0)
            fac = pool if cip else cnt
            step = 1
        else:
            dl = d[a]
            b = o * s[a] - p[a]
            j0 = np.where(b < 0, (-b + dl - 1) // dl, 0)
            j1 = np.full(n, k[a] - 1, np.int64)
            over = b + j1 * dl > m - 1
            j1 = np.where(over, np.where(m - 1 - b >= 0, (m - 1 - b) // dl, -1), j1)
            cnt = np.maximum(j1 - j0 + 1, 0)
            st = np.clip(b + j0 * dl, 0, max(m - 1, 0))
            fac = cnt
            step = dl
        out.append((st, cnt, fac, step))
    return out


class PoolMixin:
    def _pool_taps(self, win, isz):
        """For every tap of the largest window: (flat in-plane index (D, H, W) array, valid
        mask) as arrays of this module; invalid taps read the window's start."""
        xp = self.xp
        H, W = isz[1], isz[2]
        mults = (H * W, W, 1)
        maxc = [int(w[1].max()) if w[1].size else 0 for w in win]
        for tap in itertools.product(*(range(c) for c in maxc)):
            idx, ok = 0, True
            for a in range(3):
                st, cnt, _, step = win[a]
                shape = [1, 1, 1]
                shape[a] = -1
                valid = (tap[a] < cnt).reshape(shape)
                pos = np.where(valid, st.reshape(shape) + tap[a] * step, st.reshape(shape))
                idx = idx + pos * mults[a]
                ok = ok & valid
            yield xp.asarray(idx), xp.asarray(ok)

    def _plane_start(self, win, isz):
        H, W = isz[1], isz[2]
        st = [w[0] for w in win]
        return (st[0][:, None, None] * (H * W) + st[1][None, :, None] * W +
                st[2][None, None, :])

    def _tap_views(self, planes, isz, osz, k, s, p, d, fill):
        """A fixed-window pool's taps as strided views of the planes padded with ``fill``:
        per tap (kernel row-major) the slices of the padded planes giving its (nplanes, *osz)
        view, and the offset of its flat in-plane index from the window's (see _tap_base)."""
        xp = self.xp
        need = [(osz[a] - 1) * s[a] + d[a] * (k[a] - 1) + 1 for a in range(3)]
        widths = [(0, 0)] + [(p[a], max(need[a] - isz[a] - p[a], 0)) for a in range(3)]
        padded = xp.pad(planes, widths, constant_values=fill) \
            if any(a or b for a, b in widths) else planes
        mults = (isz[1] * isz[2], isz[2], 1)
        for tap in itertools.product(*(range(v) for v in k)):
            sl = (slice(None),) + tuple(slice(tap[a] * d[a], tap[a] * d[a] + s[a] * (osz[a] - 1)
                                              + 1, s[a]) for a in range(3))
            yield sl, padded, sum(tap[a] * d[a] * mults[a] for a in range(3))

    def _tap_base(self, isz, osz, s, p):
        """The flat in-plane index of every fixed window's first (padded) tap, an (osz)
        array (outside the plane where the window starts in the padding)."""
        xp = self.xp
        mults = (isz[1] * isz[2], isz[2], 1)
        base = 0
        for a in range(3):
            shape = [1, 1, 1]
            shape[a] = -1
            pos = xp.arange(osz[a], dtype=np.int64) * (s[a] * mults[a]) - p[a] * mults[a]
            base = base + pos.reshape(shape)
        return base

    def _tiled(self, planes, isz, osz):
        """Adaptive windows that tile each dim evenly (in % out == 0: non-overlapping, one
        size): the planes as (nplanes, *osz, window elements), else None."""
        if any(isz[a] % osz[a] for a in range(3)):
            return None
        w = [isz[a] // osz[a] for a in range(3)]
        v = planes.reshape((planes.shape[0], osz[0], w[0], osz[1], w[1], osz[2], w[2]))
        return v.transpose(0, 1, 3, 5, 2, 4, 6).reshape(
            (planes.shape[0],) + tuple(osz) + (w[0] * w[1] * w[2],)), w

    def pool_max(self, adaptive, nplanes, isz, osz, k, s, p, d, x, out, idx):
        xp = self.xp
        if x._dtype is not D.float32 and x._dtype is not D.float64:
            return C.ERR_DTYPE
        if nplanes < 0:
            return C.ERR_ARG
        win = _windows(adaptive, False, False, isz, osz, k, s, p, d)
        if win is None:
            return C.ERR_ARG
        isz, osz = tuple(isz), tuple(osz)
        if nplanes == 0 or 0 in osz:
            return 0
        plane = self.cview(x, (nplanes, int(np.prod(isz))))
        t = plane.dtype.type
        best = xp.full((nplanes,) + osz, t(-np.inf), plane.dtype)
        bi = xp.broadcast_to(xp.asarray(self._plane_start(win, isz)), best.shape)
        tiled = self._tiled(plane.reshape((nplanes,) + isz), isz, osz) if adaptive else None
        if tiled is not None:
            self._max_tiled(tiled, isz, osz, out, idx)
            return 0
        if adaptive:
            for tap, ok in self._pool_taps(win, isz):
                v = plane[:, tap]
                upd = ok & ((v > best) | xp.isnan(v))
                best = xp.where(upd, v, best)
                bi = xp.where(upd, tap, bi)
        else:  # -inf padding never wins: a tap outside the plane needs no mask
            base = self._tap_base(isz, osz, s, p)
            for sl, padded, off in self._tap_views(plane.reshape((nplanes,) + isz), isz, osz,
                                                   k, s, p, d, t(-np.inf)):
                v = padded[sl]
                upd = (v > best) | (v != v)
                best = xp.where(upd, v, best)
                bi = xp.where(upd, base + off, bi)
        self.cview(out, (nplanes,) + osz)[...] = best
        if idx is not None:
            self.cview(idx, (nplanes,) + osz)[...] = bi
        return 0

    def _max_tiled(self, tiled, isz, osz, out, idx):
        """Max over evenly tiling windows: one reduction; the first maximum, or the last NaN,
        of each window, as the window loop picks them."""
        xp = self.xp
        vals, w = tiled
        nplanes, kk = vals.shape[0], vals.shape[-1]
        am = xp.argmax(vals, axis=-1)
        nan = vals != vals
        last_nan = (kk - 1) - xp.argmax(nan[..., ::-1], axis=-1)
        am = xp.where(nan.any(axis=-1), last_nan, am)
        self.cview(out, (nplanes,) + osz)[...] = xp.take_along_axis(vals, am[..., None],
                                                                    axis=-1)[..., 0]
        if idx is None:
            return
        kd, rem = am // (w[1] * w[2]), am % (w[1] * w[2])
        kh, kw = rem // w[2], rem % w[2]
        o = [xp.arange(osz[a], dtype=np.int64).reshape([-1 if b == a else 1 for b in range(3)])
             for a in range(3)]
        flat = ((o[0] * w[0] + kd) * isz[1] + (o[1] * w[1] + kh)) * isz[2] + (o[2] * w[2] + kw)
        self.cview(idx, (nplanes,) + osz)[...] = flat

    def _avg_divisor(self, win, divo, dtype):
        if divo > 0:
            return dtype.type(divo)
        f = [w[2] for w in win]
        dv = f[0][:, None, None] * f[1][None, :, None] * f[2][None, None, :]
        return self.xp.asarray(dv.astype(dtype))

    def pool_avg(self, adaptive, nplanes, isz, osz, k, s, p, count_include_pad,
                 divisor_override, x, out):
        xp = self.xp
        if x._dtype is not D.float32 and x._dtype is not D.float64:
            return C.ERR_DTYPE
        win = _windows(adaptive, True, count_include_pad, isz, osz, k, s, p, None)
        if win is None or nplanes < 0:
            return C.ERR_ARG
        isz, osz = tuple(isz), tuple(osz)
        if nplanes == 0 or 0 in osz:
            return 0
        n_in = int(np.prod(isz))
        plane = self.cview(x, (nplanes, n_in))
        if adaptive and osz == (1, 1, 1):  # a global pool: one mean per plane
            r = xp.sum(plane, axis=1) / plane.dtype.type(n_in)
            self.cview(out, (nplanes,))[...] = r
            return 0
        tiled = self._tiled(plane.reshape((nplanes,) + isz), isz, osz) if adaptive else None
        if tiled is not None:  # one mean per window (the divisor is the window's size)
            vals, w = tiled
            self.cview(out, (nplanes,) + osz)[...] = xp.sum(vals, axis=-1) / \
                plane.dtype.type(w[0] * w[1] * w[2])
            return 0
        acc = xp.zeros((nplanes,) + osz, plane.dtype)
        zero = plane.dtype.type(0)
        if adaptive:
            for tap, ok in self._pool_taps(win, isz):
                acc += xp.where(ok, plane[:, tap], zero)
        else:  # zero padding adds nothing
            for sl, padded, _ in self._tap_views(plane.reshape((nplanes,) + isz), isz, osz, k,
                                                 s, p, _ONE3, zero):
                acc += padded[sl]
        self.cview(out, (nplanes,) + osz)[...] = acc / self._avg_divisor(win, divisor_override,
                                                                         plane.dtype)
        return 0

    def pool_avg_backward(self, adaptive, nplanes, isz, osz, k, s, p, count_include_pad,
                          divisor_override, gout, gin):
        xp = self.xp
        if gout._dtype is not D.float32 and gout._dtype is not D.float64:
            return C.ERR_DTYPE
        win = _windows(adaptive, True, count_include_pad, isz, osz, k, s, p, None)
        if win is None or nplanes < 0:
            return C.ERR_ARG
        isz, osz = tuple(isz), tuple(osz)
        n_in = int(np.prod(isz))
        if nplanes == 0 or n_in == 0:
            return 0
        res = xp.zeros((nplanes, n_in), self.cdt(gout._dtype))
        if 0 not in osz:
            g = self.cview(gout, (nplanes,) + osz) / self._avg_divisor(win, divisor_override,
                                                                      res.dtype)
            kk = tuple(isz[a] // osz[a] for a in range(3))
            if all(isz[a] == osz[a] * kk[a] for a in range(3)) and (
                    adaptive or (tuple(k) == kk and tuple(s) == kk and not any(p))):
                # windows that tile the input exactly (a global average pool, adaptive pools of
                # a divisible size, kernel == stride without padding): every input element
                # gets its one window's gradient, one broadcast write
                g7 = g.reshape((nplanes, osz[0], 1, osz[1], 1, osz[2], 1))
                self.cview(gin, (nplanes, osz[0], kk[0], osz[1], kk[1], osz[2], kk[2]))[...] = g7
                return 0
            if adaptive:  # windows of one tap may share an element: a scatter
                rows = xp.arange(nplanes).reshape((nplanes, 1, 1, 1))
                zero = res.dtype.type(0)
                for tap, ok in self._pool_taps(win, isz):
                    self.scatter_add(res, (rows, tap[None]), xp.where(ok, g, zero))
            else:  # one tap's elements are distinct: a strided add per tap, then the crop
                pz = xp.zeros((nplanes,) + isz, res.dtype)
                padded = None
                for sl, padded, _ in self._tap_views(pz, isz, osz, k, s, p, _ONE3, 0):
                    padded[sl] += g
                crop = (slice(None),) + tuple(slice(p[a], p[a] + isz[a]) for a in range(3))
                res = padded[crop].reshape(nplanes, n_in)
        self.cview(gin, (nplanes, n_in))[...] = res
        return 0

    def pool_scatter(self, accumulate, nplanes, ssize, dsize, src, idx, dst, bad):
        xp = self.xp
        if src._dtype is not D.float32 and src._dtype is not D.float64:
            return C.ERR_DTYPE
        if nplanes < 0 or ssize < 0 or dsize < 0:
            return C.ERR_ARG
        res = xp.zeros((nplanes, dsize), self.cdt(src._dtype))
        if nplanes and ssize:
            ix = self.cview(idx, (nplanes, ssize))
            out = (ix < 0) | (ix >= dsize)
            if bool(out.any()):  # every index is checked before anything is written
                if bad is not None:
                    bad[:] = [int(ix.reshape(-1)[int(xp.argmax(out.reshape(-1)))])]
                return C.ERR_INDEX
            v = self.cview(src, (nplanes, ssize))
            flat = (xp.arange(nplanes, dtype=np.int64)[:, None] * dsize + ix).reshape(-1)
            if accumulate:
                self.scatter_add(res.reshape(-1), flat, v.reshape(-1))
            else:
                self.scatter_last(res.reshape(-1), flat, v.reshape(-1))
        self.cview(dst, (nplanes, dsize))[...] = res
        return 0
