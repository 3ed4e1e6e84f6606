"""Array-module primitives of the fused family (contract.Backend documents each): convolution
(xp/conv.py), pooling (xp/pool.py), resampling (xp/sample.py), and here batch/row
normalisation, the Adam and SGD steps, GELU and non-maximum suppression. The semantics are the
CPU backend's (csrc/norm.c, optim.c, activations.c, detection.c): float32 and float64 only (the
op layer computes 16-bit floats in float32), statistics accumulated in float64, optimizer
arithmetic in the parameter's dtype in the C kernel's order.

The two scatters (an accumulating one, and a last-write-wins assignment) are ``scatter_add`` and
``scatter_last`` below: ``add.at``/``maximum.at`` where the module has them (NumPy, CuPy >= 13),
cupyx's scatters on older CuPy."""

import math

import numpy as np

from fiamma import _dtype as D
from fiamma._backend import codes as K
from fiamma._backend.xp.conv import ConvMixin
from fiamma._backend.xp.pool import PoolMixin
from fiamma._backend.xp.sample import SampleMixin

__all__ = ["FusedMixin"]

_INV_SQRT2 = 0.70710678118654752440
_INV_SQRT_2PI = 0.39894228040143267794
_TANH_K = 0.79788456080286535588
_TANH_C = 0.044715


def _floating(*ts):
    dt = ts[0]._dtype
    return (dt is D.float32 or dt is D.float64) and all(t is None or t._dtype is dt for t in ts)


_CSTRIDES = {}  # contiguous element strides by shape (cview)


class FusedMixin(ConvMixin, PoolMixin, SampleMixin):
    # row_norm_bwd writes gw and gb whole (the contract lets them accumulate): the op layer
    # need not zero them first (two fills per layer norm backward)
    row_norm_wb_writes = True

    def cview(self, t, shape):
        """The contiguous tensor t (or its first prod(shape) elements) viewed as ``shape``."""
        shape = tuple(shape)
        st = _CSTRIDES.get(shape)
        if st is None:
            strides, acc = [], 1
            for s in reversed(shape):
                strides.append(acc)
                acc *= max(int(s), 1)
            st = tuple(reversed(strides))
            if len(_CSTRIDES) < 4096:
                _CSTRIDES[shape] = st
        return self.raw(t, shape, st)

    # ---- scatters ----------------------------------------------------------------------------
    def scatter_add(self, dst, index, values):
        """dst[index] += values with repeated indices accumulating (an unbuffered add):
        ``add.at`` (NumPy, CuPy >= 13), else cupyx.scatter_add (older CuPy)."""
        at = getattr(self.xp.add, "at", None)
        if at is not None:
            at(dst, index, values)
        else:
            import cupyx

            cupyx.scatter_add(dst, index, values)

    def scatter_last(self, dst, flat, values):
        """dst[flat] = values (1-d dst and flat) where a repeated index takes the value of its
        last occurrence, on every device (a plain fancy assignment leaves that open on GPU)."""
        xp = self.xp
        pos = xp.arange(flat.shape[0], dtype=np.int64)
        last = xp.full(dst.shape, -1, np.int64)
        at = getattr(xp.maximum, "at", None)
        if at is not None:
            at(last, flat, pos)
        else:
            import cupyx

            cupyx.scatter_max(last, flat, pos)
        win = last[flat] == pos
        dst[flat[win]] = values[win]

    # ---- batch norm --------------------------------------------------------------------------
    def batch_norm_fwd(self, N, C, S, x, xs, y, w, b, mean, invstd, rmean, srm, rvar, srv,
                       training, momentum, eps):
        xp = self.xp
        if N < 0 or C < 0 or S < 0 or (not training and (rmean is None or rvar is None)):
            return K.ERR_ARG
        if not _floating(x):
            return K.ERR_DTYPE
        if C == 0:
            return 0
        v = self.raw(x, (N, C, S), xs)
        t = v.dtype.type
        rm = self.raw(rmean, (C,), (srm,)) if rmean is not None else None
        rv = self.raw(rvar, (C,), (srv,)) if rvar is not None else None
        if training:
            m = N * S
            if m > 0:
                mu = xp.sum(v, axis=(0, 2), dtype=np.float64) / m
                d = v - mu.astype(v.dtype)[None, :, None]
                dm = xp.sum(d, axis=(0, 2), dtype=np.float64) / m
                var = xp.maximum(xp.sum(d * d, axis=(0, 2), dtype=np.float64) / m - dm * dm, 0)
                mu = mu + dm
            else:
                mu = xp.zeros(C, np.float64)
                var = xp.full(C, np.nan)
            inv = 1.0 / xp.sqrt(var + eps)
            if rm is not None:
                rm[...] = ((1 - momentum) * rm.astype(np.float64) + momentum * mu).astype(t)
            if rv is not None:
                ub = var * (m / (m - 1)) if m > 1 else xp.full(C, np.inf)
                rv[...] = ((1 - momentum) * rv.astype(np.float64) + momentum * ub).astype(t)
        else:
            mu = rm.astype(np.float64)
            inv = 1.0 / xp.sqrt(rv.astype(np.float64) + eps)
        self.cview(mean, (C,))[...] = mu
        self.cview(invstd, (C,))[...] = inv
        a = inv * (self.cview(w, (C,)).astype(np.float64) if w is not None else 1.0)
        sh = (self.cview(b, (C,)).astype(np.float64) if b is not None else 0.0) - mu * a
        ta, tb = a.astype(t)[None, :, None], sh.astype(t)[None, :, None]
        self.cview(y, (N, C, S))[...] = v * ta + tb
        return 0

    def batch_norm_bwd(self, N, C, S, g, gs, x, xs, w, mean, invstd, training, gx, gw, gb):
        xp = self.xp
        if N < 0 or C < 0 or S < 0:
            return K.ERR_ARG
        if not _floating(x):
            return K.ERR_DTYPE
        if C == 0:
            return 0
        gv = self.raw(g, (N, C, S), gs)
        v = self.raw(x, (N, C, S), xs)
        t = v.dtype.type
        mu = self.cview(mean, (C,)).astype(np.float64)
        inv = self.cview(invstd, (C,)).astype(np.float64)
        wd = self.cview(w, (C,)).astype(np.float64) if w is not None else 1.0
        m = N * S
        d = v - self.cview(mean, (C,))[None, :, None]
        if training or gw is not None or gb is not None:
            sg = xp.sum(gv, axis=(0, 2), dtype=np.float64)
            sgx = xp.sum(gv.astype(np.float64) * (v.astype(np.float64) - mu[None, :, None]),
                         axis=(0, 2))
        else:
            sg = sgx = xp.zeros(C, np.float64)
        if gb is not None:
            self.cview(gb, (C,))[...] = sg
        if gw is not None:
            self.cview(gw, (C,))[...] = sgx * inv
        if gx is None:
            return 0
        k1 = (wd * inv) * xp.ones(C)
        if training and m > 0:
            k2 = -wd * inv * inv * inv * sgx / m
            k0 = -wd * inv * sg / m
        else:
            k2 = k0 = xp.zeros(C)

        def col(a):
            return a.astype(t)[None, :, None]

        self.cview(gx, (N, C, S))[...] = gv * col(k1) + d * col(k2) + col(k0)
        return 0

    # ---- layer / group / RMS norm --------------------------------------------------------------
    def _row_weight(self, w, M, G, P, Sp):
        """The (M, K) weight (or None) of every row: row r uses group r % G's P channels, each
        repeated over Sp positions ((1, K) when every row has the same: it broadcasts)."""
        xp = self.xp
        if w is None:
            return None
        wv = self.cview(w, (G, P))
        if G == 1:  # layer norm: one weight row for all
            rows = wv
        else:
            rows = wv[xp.arange(M) % G] if M % G else xp.tile(wv, (M // G, 1))
        return xp.repeat(rows, Sp, axis=1) if Sp > 1 else rows

    def row_norm_fwd(self, rms, M, K, x, sx, y, w, b, G, P, Sp, mean, rstd, eps):
        xp = self.xp
        if M < 0 or K < 0 or P < 0 or G < 1 or Sp < 1 or P * Sp != K or rstd is None or \
                (not rms and mean is None):
            return K.ERR_ARG
        if not _floating(x):
            return K.ERR_DTYPE
        if M == 0:
            return 0
        v = self.raw(x, (M, K), (sx, 1))
        t = v.dtype.type
        if rms:
            mu = xp.zeros(M, np.float64)
            var = xp.sum(v.astype(np.float64) ** 2, axis=1) / K if K else xp.full(M, np.nan)
        elif K:
            # sums about a shift (the mean rounded to the dtype), as norm.c's about x[0]
            sh = (xp.sum(v, axis=1, dtype=np.float64) / K).astype(v.dtype)
            d = v - sh[:, None]
            dm = xp.sum(d, axis=1, dtype=np.float64) / K
            var = xp.maximum(xp.sum(d * d, axis=1, dtype=np.float64) / K - dm * dm, 0)
            mu = sh.astype(np.float64) + dm
        else:
            mu, var = xp.zeros(M, np.float64), xp.full(M, np.nan)
        inv = 1.0 / xp.sqrt(var + eps)
        if not rms:
            self.cview(mean, (M,))[...] = mu
        self.cview(rstd, (M,))[...] = inv
        tm = mu.astype(v.dtype)
        tl = (mu - tm.astype(np.float64)).astype(v.dtype)
        r = (v - tm[:, None] - tl[:, None]) * inv.astype(v.dtype)[:, None]
        wr = self._row_weight(w, M, G, P, Sp)
        br = self._row_weight(b, M, G, P, Sp)
        if wr is not None:
            r = r * wr
        if br is not None:
            r = r + br
        self.cview(y, (M, K))[...] = r
        _ = t
        return 0

    def row_norm_bwd(self, rms, M, K, g, sg, x, sx, w, G, P, Sp, mean, rstd, gx, gw, gb):
        xp = self.xp
        if M < 0 or K < 0 or P < 0 or G < 1 or Sp < 1 or P * Sp != K or rstd is None or \
                (not rms and mean is None):
            return K.ERR_ARG
        if not _floating(x):
            return K.ERR_DTYPE
        gv = self.raw(g, (M, K), (sg, 1))
        v = self.raw(x, (M, K), (sx, 1))
        dt = v.dtype
        mu = xp.zeros(M, np.float64) if rms else self.cview(mean, (M,)).astype(np.float64)
        inv = self.cview(rstd, (M,)).astype(np.float64)
        xc = v.astype(np.float64) - mu[:, None]  # x - mean, in float64
        g64 = gv.astype(np.float64)
        if gw is not None or gb is not None:
            xg = g64 * xc * inv[:, None]  # g * xhat
            if M % G == 0:
                sw = xg.reshape(M // G, G, P, Sp).sum(axis=(0, 3))
                sb = g64.reshape(M // G, G, P, Sp).sum(axis=(0, 3))
            else:
                rows = xp.arange(M) % G
                sw, sb = xp.zeros((G, P)), xp.zeros((G, P))
                self.scatter_add(sw, rows, xg.reshape(M, P, Sp).sum(axis=2))
                self.scatter_add(sb, rows, g64.reshape(M, P, Sp).sum(axis=2))
            if gw is not None:
                self.cview(gw, (G, P))[...] = sw
            if gb is not None:
                self.cview(gb, (G, P))[...] = sb
        if gx is None or M == 0:
            return 0
        wr = self._row_weight(w, M, G, P, Sp)
        gh = g64 * wr.astype(np.float64) if wr is not None else g64
        A = gh.sum(axis=1)
        Bs = (gh * xc).sum(axis=1) * inv
        ka = xp.zeros(M) if rms else -inv * A / K
        kb = -inv * inv * Bs / K
        k1 = gv * wr if wr is not None else gv
        r = (k1 * inv.astype(dt)[:, None] + ka.astype(dt)[:, None] +
             (v - mu.astype(dt)[:, None]) * kb.astype(dt)[:, None])
        self.cview(gx, (M, K))[...] = r
        return 0

    # ---- optimizer steps ---------------------------------------------------------------------
    def _opt_check(self, params, grads):
        if not params:
            return 0
        dt = params[0]._dtype
        if dt is not D.float32 and dt is not D.float64:
            return K.ERR_DTYPE
        if len(grads) != len(params):
            return K.ERR_ARG
        return 0

    def adam_step(self, params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps, lr, beta1, beta2,
                  eps, weight_decay, flags):
        xp = self.xp
        rc = self._opt_check(params, grads)
        if rc:
            return rc
        ams = flags & K.OPT_AMSGRAD
        if ams and max_sqs is None:
            return K.ERR_ARG
        for i, p in enumerate(params):
            if p._numel and not steps[i] >= 1:
                return K.ERR_ARG
        for i, p in enumerate(params):
            if not p._numel:
                continue
            pv, m, v = self.raw(p), self.raw(exp_avgs[i]), self.raw(exp_avg_sqs[i])
            t = pv.dtype.type
            st = steps[i]
            w1, b2, w2 = t(1.0 - beta1), t(beta2), t(1.0 - beta2)
            eps_t, wd = t(eps), t(weight_decay)
            step_size = t(-(lr / (1.0 - beta1 ** st)))
            bc2s = t(math.sqrt(1.0 - beta2 ** st))
            gi = self.raw(grads[i])
            if flags & K.OPT_MAXIMIZE:
                gi = -gi
            pi = pv
            if weight_decay != 0:
                if flags & K.OPT_DECOUPLED:
                    pi = pv * t(1.0 - lr * weight_decay)
                else:
                    gi = gi + wd * pv
            mi = m + w1 * (gi - m)
            vi = v * b2 + w2 * (gi * gi)
            m[...] = mi
            v[...] = vi
            if ams:
                vm = self.raw(max_sqs[i])
                vi = xp.where(vm > vi, vm, vi)
                vm[...] = vi
            denom = xp.sqrt(vi) / bc2s + eps_t
            pv[...] = pi + step_size * (mi / denom)
        return 0

    def sgd_step(self, params, grads, bufs, lr, momentum, dampening, weight_decay, flags):
        rc = self._opt_check(params, grads)
        if rc:
            return rc
        if momentum != 0 and (bufs is None or any(b is None for b, p in zip(bufs, params)
                                                  if p._numel)):
            return K.ERR_ARG
        for i, p in enumerate(params):
            if not p._numel:
                continue
            pv = self.raw(p)
            t = pv.dtype.type
            gi = self.raw(grads[i])
            if flags & K.OPT_MAXIMIZE:
                gi = -gi
            if weight_decay != 0:
                gi = gi + t(weight_decay) * pv
            if momentum != 0:
                bv = self.raw(bufs[i])
                mom = t(momentum)
                bi = gi if flags & K.OPT_FIRST else bv * mom + t(1.0 - dampening) * gi
                bv[...] = bi
                gi = gi + mom * bi if flags & K.OPT_NESTEROV else bi
            pv[...] = pv + t(-lr) * gi
        return 0

    # ---- ReLU backward ------------------------------------------------------------------------
    def relu_bwd(self, g, y, out):
        """out = where(y <= 0, 0, g) (a NaN y passes g) for contiguous float tensors of one
        dtype and shape (core's relu_backward; the cuda backend's is one kernel)."""
        if not (g._dtype is y._dtype is out._dtype and y._dtype._kind == 2):
            return K.ERR_DTYPE
        if y._numel == 0:
            return 0
        n = (y._numel,)
        r = self.raw(out, n, (1,))
        r[...] = self.xp.where(self.get(y, n, (1,)) <= 0, r.dtype.type(0), self.raw(g, n, (1,)))
        return 0

    # ---- GELU --------------------------------------------------------------------------------
    def _gelu_parts(self, approximate, v):
        """(Phi-like factor p with gelu = 0.5 x p, d gelu / dx) for the float array v."""
        xp = self.xp
        vd = v.astype(np.float64)
        if approximate == K.GELU_TANH:
            u = _TANH_K * vd * (1.0 + _TANH_C * vd * vd)
            m = -2.0 * xp.abs(u)
            # activations.c floors exp's argument for float32 only (float64 keeps its tail)
            e = xp.exp(m if v.dtype == np.float64 else xp.maximum(m, -110.0))
            s = 1.0 / (1.0 + e)
            sech2 = 4.0 * e * s * s
            p = xp.where(u >= 0, 2.0 * s, 2.0 * e * s)
            d = 0.5 * p + 0.5 * vd * sech2 * _TANH_K * (1.0 + 3.0 * _TANH_C * vd * vd)
            return p.astype(v.dtype), d.astype(v.dtype)
        # in float64 for every dtype: x / sqrt(2) rounded to float32 would cost ~x^2 ulps of
        # erfc's tail (activations.c splits x^2 exactly for the same reason)
        p = self._erfc(-vd * _INV_SQRT2)
        d = 0.5 * p + vd * xp.exp(-0.5 * vd * vd) * _INV_SQRT_2PI
        return p.astype(v.dtype), d.astype(v.dtype)

    def _gelu_limits(self, approximate, dt, bwd):
        """(above which gelu is x / its slope 1, below which -0 / slope 0): activations.c's."""
        if dt is D.float32:
            lim = 12.0 if approximate == K.GELU_TANH else 16.0
            return lim, -lim
        if approximate == K.GELU_TANH:
            return (24.0 if bwd else 12.0), -30.0
        return 40.0, -40.0

    def gelu_fwd(self, approximate, x, y):
        xp = self.xp
        if not _floating(x, y):
            return K.ERR_DTYPE
        if x._numel == 0:
            return 0
        v = self.raw(x, (x._numel,), (1,))
        t = v.dtype.type
        p, _ = self._gelu_parts(approximate, v)
        hi, lo = self._gelu_limits(approximate, x._dtype, False)
        r = xp.where(v > t(hi), v, xp.where(v < t(lo), t(-0.0), t(0.5) * v * p))
        self.raw(y, (x._numel,), (1,))[...] = r
        return 0

    def gelu_bwd(self, approximate, g, x, out):
        xp = self.xp
        if not _floating(x, g, out):
            return K.ERR_DTYPE
        if x._numel == 0:
            return 0
        n = (x._numel,)
        v = self.raw(x, n, (1,))
        t = v.dtype.type
        _, d = self._gelu_parts(approximate, v)
        hi, lo = self._gelu_limits(approximate, x._dtype, True)
        d = xp.where(v > t(hi), t(1), xp.where(v < t(lo), t(0), d))
        self.raw(out, n, (1,))[...] = self.raw(g, n, (1,)) * d
        return 0

    # ---- detection ---------------------------------------------------------------------------
    def nms(self, boxes, scores, iou_threshold, keep, count):
        """The IoU test of every pair runs on the device; the greedy pass over it (sequential
        by nature) on the host, one vectorised row per kept box."""
        xp = self.xp
        if not _floating(boxes, scores):
            return K.ERR_DTYPE
        n = boxes._shape[0]
        if n == 0:
            self.put(count, 0)
            return 0
        bx = self.cview(boxes, (n, 4))
        sc = self.cview(scores, (n,))
        t = bx.dtype.type
        order = xp.argsort(-sc.astype(np.float64), kind="stable") if self.is_numpy else \
            xp.argsort(-sc.astype(np.float64))
        b = bx[order]
        x1, y1, x2, y2 = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
        ar = (x2 - x1) * (y2 - y1)
        w = xp.minimum(x2[:, None], x2[None, :]) - xp.maximum(x1[:, None], x1[None, :])
        h = xp.minimum(y2[:, None], y2[None, :]) - xp.maximum(y1[:, None], y1[None, :])
        inter = w * h
        iou = inter / (ar[:, None] + ar[None, :] - inter)
        sup = (w > 0) & (h > 0) & (iou > t(iou_threshold))
        sup = xp.triu(sup, 1)
        sup_h = self.to_numpy(sup)
        dead = np.zeros(n, bool)
        kept = []
        for i in range(n):
            if not dead[i]:
                kept.append(i)
                dead |= sup_h[i]
        order_h = self.to_numpy(order)
        k = len(kept)
        self.put(keep, self.asarray(order_h[np.asarray(kept, np.int64)]), (k,), (1,))
        self.put(count, k)
        return 0
