"""Array-module convolution (contract.Backend.conv): im2col as one strided view per kernel tap
of the zero-padded input, one batched matmul over the groups, and col2im as one strided ``+=``
per tap (the positions one tap touches are distinct, so no scatter is needed). float32 and
float64, 1-3 spatial dims, groups, stride, padding and dilation; the semantics are
csrc/conv.c's (FWD adds the bias per output channel, BWD_DATA per channel of the big side).
float16/bfloat16 (which only a backend answering ``conv_native`` receives, when its own path
declines one) compute in float32 and are rounded once on the way out, as the CPU does."""

import itertools

import numpy as np

from fiamma import _dtype as D
from fiamma._backend import codes as C

__all__ = ["ConvMixin"]


def _tap_slices(nd, k, st, dl, small):
    """Per kernel tap (row-major over the kernel), the slices of the padded big side that the
    tap reads for every output position."""
    out = []
    for tap in itertools.product(*(range(v) for v in k)):
        out.append(tuple(slice(t * dl[i], t * dl[i] + st[i] * (small[i] - 1) + 1, st[i])
                         for i, t in enumerate(tap)))
    return out


def _pointwise(k, stride, pad, big, small):
    return (all(v == 1 for v in tuple(k) + tuple(stride)) and not any(pad)
            and tuple(big) == tuple(small))


class ConvMixin:
    def _conv_geometry(self, mode, nd, n, cb, cs, groups, big, small, k, stride, pad, dil):
        if mode < C.CONV_FWD or mode > C.CONV_COL2IM:
            return C.ERR_ARG
        if nd < 1 or nd > 3:
            return C.ERR_NDIM
        if n < 0 or cb < 1 or cs < 1 or groups < 1 or cb % groups or cs % groups:
            return C.ERR_ARG
        for v in (big, small, k, stride, pad, dil):
            if len(v) != nd:
                return C.ERR_ARG
        if (any(v < 1 for v in tuple(big) + tuple(small) + tuple(k) + tuple(stride) +
                tuple(dil)) or any(v < 0 for v in pad)):
            return C.ERR_ARG
        return 0

    def _im2col(self, x, nd, k, stride, pad, dil, small):
        """x (n, c, *big) -> columns (n, c, prod(k), *small)."""
        xp = self.xp
        big = x.shape[2:]
        if _pointwise(k, stride, pad, big, small):  # the image already is the matrix
            return x.reshape(x.shape[:2] + (1,) + tuple(small))
        need = [(small[i] - 1) * stride[i] + dil[i] * (k[i] - 1) + 1 for i in range(nd)]
        widths = [(0, 0), (0, 0)] + [(pad[i], max(need[i] - big[i] - pad[i], 0))
                                     for i in range(nd)]
        xpd = xp.pad(x, widths) if any(a or b for a, b in widths) else x
        lead = (slice(None), slice(None))
        taps = [xpd[lead + s] for s in _tap_slices(nd, k, stride, dil, small)]
        return xp.stack(taps, axis=2)

    def _col2im(self, cols, nd, c, big, k, stride, pad, dil, small):
        """The adjoint of _im2col: cols (n, c, prod(k), *small) summed into (n, c, *big)."""
        xp = self.xp
        n = cols.shape[0]
        if _pointwise(k, stride, pad, big, small):
            return cols.reshape((n, c) + tuple(big))
        need = [(small[i] - 1) * stride[i] + dil[i] * (k[i] - 1) + 1 for i in range(nd)]
        padded = tuple(max(big[i] + 2 * pad[i], pad[i] + need[i]) for i in range(nd))
        acc = xp.zeros((n, c) + padded, cols.dtype)
        lead = (slice(None), slice(None))
        for t, s in enumerate(_tap_slices(nd, k, stride, dil, small)):
            acc[lead + s] += cols[:, :, t]
        crop = tuple(slice(pad[i], pad[i] + big[i]) for i in range(nd))
        return acc[lead + crop]

    def _conv_in(self, t, shape, wide):
        v = self.cview(t, shape)
        if wide:
            v = self.bf16_to_f32(v) if t._dtype is D.bfloat16 else v.astype(np.float32)
        return v

    def _conv_out(self, t, shape, y, wide):
        v = self.cview(t, shape)
        if wide and t._dtype is D.bfloat16:
            v[...] = self.f32_to_bf16(y)
        else:
            v[...] = y

    def conv(self, mode, nd, n, cb, cs, groups, big, small, k, stride, pad, dil, a, b, bias,
             out):
        xp = self.xp
        wide = a._dtype is D.bfloat16 or a._dtype is D.float16
        if a._dtype is not D.float32 and a._dtype is not D.float64 and \
                not (wide and mode <= C.CONV_BWD_WEIGHT):
            return C.ERR_DTYPE
        if mode >= C.CONV_IM2COL:
            groups, cs = 1, cb
        rc = self._conv_geometry(mode, nd, n, cb, cs, groups, big, small, k, stride, pad, dil)
        if rc:
            return rc
        big, small, k = tuple(big), tuple(small), tuple(k)
        stride, pad, dil = tuple(stride), tuple(pad), tuple(dil)
        kp = int(np.prod(k))
        ls = int(np.prod(small))
        cbg, csg = cb // groups, cs // groups
        if n == 0:
            if mode == C.CONV_BWD_WEIGHT:
                self.put(out, 0)
            return 0
        geo = (nd, k, stride, pad, dil, small)
        if mode == C.CONV_FWD:
            cols = self._im2col(self._conv_in(a, (n, cb) + big, wide), *geo)
            cols = cols.reshape(n, groups, cbg * kp, ls)
            w = self._conv_in(b, (groups, csg, cbg * kp), wide)
            y = xp.matmul(w, cols)  # (n, groups, csg, ls)
            y = y.reshape((n, cs) + small)
            if bias is not None:
                y += self._conv_in(bias, (1, cs) + (1,) * nd, wide)
            self._conv_out(out, (n, cs) + small, y, wide)
        elif mode == C.CONV_BWD_DATA:
            g = self._conv_in(a, (n, groups, csg, ls), wide)
            w = self._conv_in(b, (groups, csg, cbg * kp), wide)
            cols = xp.matmul(w.transpose(0, 2, 1), g)  # (n, groups, cbg * kp, ls)
            cols = cols.reshape((n, cb, kp) + small)
            y = self._col2im(cols, nd, cb, big, k, stride, pad, dil, small)
            if bias is not None:
                y = y + self._conv_in(bias, (1, cb) + (1,) * nd, wide)
            self._conv_out(out, (n, cb) + big, y, wide)
        elif mode == C.CONV_BWD_WEIGHT:
            cols = self._im2col(self._conv_in(a, (n, cb) + big, wide), *geo)
            cols = cols.reshape(n, groups, cbg * kp, ls).transpose(1, 2, 0, 3)
            cols = cols.reshape(groups, cbg * kp, n * ls)
            g = self._conv_in(b, (n, groups, csg, ls), wide).transpose(1, 2, 0, 3)
            g = g.reshape(groups, csg, n * ls)
            gw = xp.matmul(g, cols.transpose(0, 2, 1))  # (groups, csg, cbg * kp)
            self._conv_out(out, (cs, cbg * kp), gw.reshape(cs, cbg * kp), wide)
        elif mode == C.CONV_IM2COL:
            cols = self._im2col(self.cview(a, (n, cb) + big), *geo)
            self.cview(out, (n, cb, kp) + small)[...] = cols
        else:  # COL2IM
            cols = self.cview(a, (n, cb, kp) + small)
            self.cview(out, (n, cb) + big)[...] = self._col2im(cols, nd, cb, big, k, stride, pad,
                                                             dil, small)
        return 0
