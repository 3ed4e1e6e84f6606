"""Array-module primitives of the random family (contract.Backend documents each): the
counter-based Philox4x32-10 stream of csrc/random.c computed in xp integer arithmetic
(fiamma._backend.xp.philox), so the same (seed, offset) gives the CPU backend's values on every
device. Value i of a contiguous output uses block offset + i // 4 (one 32-bit word: float16/
bfloat16/float32 uniforms and normals) or offset + i // 2 (one 64-bit draw: everything else).

randperm is the C's Fisher-Yates (draw d swaps position n-1-d with a partner in [0, n-1-d]),
executed with deterministic reservations (Shun et al., SODA 2015): every round, each pending
swap reserves its two positions by priority (earlier swaps win, a scatter-max); the swaps
holding both reservations commit together (they touch disjoint positions, and every earlier
swap touching theirs is done), so the result is the sequential one after O(log n) rounds.
multinomial is the C's inverse-CDF search (with replacement, vectorised bisection) and its
Efraimidis-Spirakis keys (without, a stable sort).
"""

import math

import numpy as np

from fiamma import _dtype as D
from fiamma._backend import codes as C
from fiamma._backend.xp import philox as P
from fiamma._backend.xp.base import BF16

__all__ = ["RandomMixin"]

_FLOAT_CODES = (D.float16.code, D.bfloat16.code, D.float32.code)
_BITS = {D.float32.code: 24, D.float16.code: 11, D.bfloat16.code: 8}
_NEEDS_FLOAT = (C.RAND_UNIFORM, C.RAND_NORMAL, C.RAND_LOGNORMAL, C.RAND_EXPONENTIAL,
                C.RAND_CAUCHY)
_PIECE = 1 << 20  # blocks generated at once (bounds the temporaries: ~100 MiB)
_I64_MAX = 9223372036854775807.0  # 2**63 as a double
_I64_SAFE = 9223372036854774784.0  # the largest double below it


def _bf16_bits(x):
    u = int(np.float32(x).view(np.uint32))
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def _from_bits16(bits, code):
    if code == D.float16.code:
        return float(np.uint16(bits).view(np.float16))
    return float(np.uint32(bits << 16).view(np.float32))


def _round_to(code, x):
    """The value the double x becomes in float dtype ``code`` (random.c's round_to)."""
    if code == D.float16.code:
        return float(np.float16(np.float32(x)))
    if code == BF16:
        return _from_bits16(_bf16_bits(x), BF16)
    if code == D.float32.code:
        return float(np.float32(x))
    return float(x)


def _below(code, x):
    """The largest value of float dtype ``code`` below x (x representable in it)."""
    if code == D.float64.code:
        return float(np.nextafter(x, -np.inf))
    if code == D.float32.code:
        return float(np.nextafter(np.float32(x), np.float32(-np.inf)))
    bits = int(np.float16(x).view(np.uint16)) if code == D.float16.code else _bf16_bits(x)
    if bits & 0x7FFF == 0:
        bits = 0x8001
    elif bits & 0x8000:
        bits += 1
    else:
        bits -= 1
    return _from_bits16(bits, code)


class RandomMixin:
    # ---- helpers -----------------------------------------------------------------------------
    def _philox_words(self, seed, first, nblocks):
        """philox.philox_words over this module (the cuda backend has a kernel of its own)."""
        return P.philox_words(self.xp, seed, first, nblocks)

    def _rnd_draws64(self, seed, first, lo, hi):
        """64-bit draws lo .. hi-1 of the stream (seed, first) as uint64 (lo even)."""
        nb = (hi - lo + 1) // 2
        w = self._philox_words(seed, first + lo // 2, nb)
        return P.u64_values(self.xp, w)[:hi - lo]

    def _rnd_store_f64(self, out, flat, lo, v):
        """flat[lo:lo + len(v)] = float64 values v with the C's STF casts (float -> integer:
        truncation through int64, NaN 0, saturating at the int64 range, then wrapping)."""
        xp = self.xp
        code = out._dtype.code
        seg = flat[lo:lo + v.shape[0]]
        if out._dtype is D.bool:
            seg[...] = v != 0
        elif out._dtype._kind == 1:
            i = xp.where(v != v, 0.0, xp.clip(v, -_I64_SAFE, _I64_SAFE))
            i = xp.where(v >= _I64_MAX, np.int64(2 ** 63 - 1), xp.trunc(i).astype(np.int64))
            i = xp.where(v <= -_I64_MAX, np.int64(-2 ** 63), i)
            seg[...] = i.astype(seg.dtype)
        elif code == BF16:
            seg[...] = self.f32_to_bf16(v.astype(np.float32))
        else:
            seg[...] = v.astype(seg.dtype)

    def _rnd_store_i64(self, out, flat, lo, v):
        """flat[lo:...] = int64 values v with the C's STI casts (wrapping; float16 and
        bfloat16 through float32)."""
        seg = flat[lo:lo + v.shape[0]]
        code = out._dtype.code
        if out._dtype is D.bool:
            seg[...] = v != 0
        elif code == BF16:
            seg[...] = self.f32_to_bf16(v.astype(np.float32))
        elif code == D.float16.code:
            seg[...] = v.astype(np.float32).astype(np.float16)
        else:
            seg[...] = v.astype(seg.dtype)

    def _rnd_flat(self, out):
        return self.raw(out).reshape(-1)

    def _rnd_scatter_max(self, a, idx, vals):
        """a[idx] = max(a[idx], vals) with repeated indices (NumPy's ufunc.at, CuPy's
        cupyx.scatter_max)."""
        if self.is_numpy:
            np.maximum.at(a, idx, vals)
        else:
            import cupyx

            cupyx.scatter_max(a, idx, vals)

    def _rnd_stable_argsort(self, a):
        if self.is_numpy:
            return np.argsort(a, axis=1, kind="stable")
        return self.xp.argsort(a, axis=1)  # CuPy's sort is a stable radix sort

    # ---- rand_fill ------------------------------------------------------------------------------
    def rand_fill(self, dist, out, seed, offset, a, b):
        code = out._dtype.code
        if not C.RAND_UNIFORM <= dist <= C.RAND_CAUCHY:
            return C.ERR_OP
        if dist in _NEEDS_FLOAT and out._dtype._kind != 2:
            return C.ERR_DTYPE
        n = out._numel
        if n == 0:
            return 0
        clamp = dist == C.RAND_UNIFORM and a < b
        hb = 0.0
        if clamp:
            rb = _round_to(code, b)
            hb = _below(code, rb) if rb >= b else rb
        unit = dist == C.RAND_UNIFORM and a == 0.0 and b == 1.0
        flat = self._rnd_flat(out)
        if dist in (C.RAND_UNIFORM, C.RAND_NORMAL) and code in _FLOAT_CODES:
            step = 4 * _PIECE
            for lo in range(0, n, step):
                m = min(step, n - lo)
                w = self._philox_words(seed, offset + lo // 4, (m + 3) // 4)
                self._rnd_float_path(out, flat, lo, w, dist, code, a, b, clamp, hb, unit, m)
            return 0
        step = 2 * _PIECE
        for lo in range(0, n, step):
            m = min(step, n - lo)
            x = self._rnd_draws64(seed, offset, lo, lo + m + (m & 1))
            v = self._rnd_double_path(dist, x, a, b)[:m]
            if dist == C.RAND_UNIFORM and not unit:
                v = a + (b - a) * v
                if clamp:
                    v = self.xp.where(v >= b, hb, v)
            self._rnd_store_f64(out, flat, lo, v)
        return 0

    def _rnd_float_path(self, out, flat, lo, w, dist, code, a, b, clamp, hb, unit, m):
        xp = self.xp
        if dist == C.RAND_NORMAL:
            v = P.normal_f(xp, w, a, b)[:m]
        else:
            v = P.unit_f(xp, w, _BITS[code])[:m]
            if not unit and code == D.float32.code:
                x = (a + (b - a) * v.astype(np.float64)).astype(np.float32)
                v = xp.where(x.astype(np.float64) >= b, np.float32(hb), x) if clamp else x
            elif not unit:
                x = a + (b - a) * v.astype(np.float64)
                x = x.astype(np.float32)
                if code == D.float16.code:
                    x = x.astype(np.float16).astype(np.float32)
                else:
                    x = self.bf16_to_f32(self.f32_to_bf16(x))
                v = xp.where(x.astype(np.float64) >= b, np.float32(hb), x) if clamp else x
        seg = flat[lo:lo + m]
        if code == BF16:
            seg[...] = self.f32_to_bf16(v)
        else:
            seg[...] = v.astype(seg.dtype)

    def _rnd_double_path(self, dist, x, a, b):
        xp = self.xp
        if dist == C.RAND_UNIFORM:
            return P.u53(xp, x)
        if dist == C.RAND_NORMAL:
            return P.normal_d(xp, x, a, b)
        if dist == C.RAND_LOGNORMAL:
            return xp.exp(P.normal_d(xp, x, a, b))
        if dist == C.RAND_BERNOULLI:
            thr = np.uint64(math.ceil(a * 2.0 ** 53))  # u53 < p as an integer compare
            return ((x >> np.uint64(11)) < thr).astype(np.float64)
        if dist == C.RAND_EXPONENTIAL:
            return P.r_log(xp, P.u53_oc(xp, x)) * (-1.0 / a)
        if dist == C.RAND_GEOMETRIC:
            return xp.ceil(P.r_log(xp, P.u53_open(xp, x)) * (1.0 / math.log1p(-a)))
        # Cauchy
        return a + b * xp.tan(3.141592653589793 * (P.u53_open(xp, x) - 0.5))

    # ---- integers ------------------------------------------------------------------------------
    def rand_int(self, out, seed, offset, low, rng):
        n = out._numel
        flat = self._rnd_flat(out)
        lowu = np.uint64(low & 0xFFFFFFFFFFFFFFFF)
        step = 2 * _PIECE
        for lo in range(0, n, step):
            m = min(step, n - lo)
            x = self._rnd_draws64(seed, offset, lo, lo + m)
            v = (P.mulhi64(self.xp, x, rng) if rng else x) + lowu
            self._rnd_store_i64(out, flat, lo, v.view(np.int64))
        return 0

    def rand_bernoulli_p(self, out, p, seed, offset, bad):
        xp = self.xp
        n = out._numel
        pp = self.raw(p).reshape(-1)
        wrong = ~((pp >= 0.0) & (pp <= 1.0))
        if n and bool(wrong.any()):
            if bad is not None:
                bad[:] = [int(xp.argmax(wrong))]
            return C.ERR_VALUE
        flat = self._rnd_flat(out)
        step = 2 * _PIECE
        for lo in range(0, n, step):
            m = min(step, n - lo)
            x = self._rnd_draws64(seed, offset, lo, lo + m)
            self._rnd_store_i64(out, flat, lo, (P.u53(xp, x) < pp[lo:lo + m]).astype(np.int64))
        return 0

    def randperm(self, out, seed, offset):
        xp = self.xp
        n = out._numel
        a = xp.arange(n, dtype=np.int64)
        if n > 1:
            d = n - 1
            x = self._rnd_draws64(seed, offset, 0, d)
            pos = xp.arange(n - 1, 0, -1, dtype=np.int64)  # position n-1-d of draw d
            part = P.mulhi64(xp, x, (pos + 1).astype(np.uint64)).astype(np.int64)
            res = xp.full(n, -1, dtype=np.int64)
            while pos.shape[0]:
                # reserve both positions (priority: larger position = earlier draw)
                self._rnd_scatter_max(res, pos, pos)
                self._rnd_scatter_max(res, part, pos)
                go = (res[pos] == pos) & (res[part] == pos)
                i, j = pos[go], part[go]
                ai, aj = a[i], a[j]
                a[i] = aj
                a[j] = ai
                res[pos] = -1
                res[part] = -1
                keep = ~go
                pos, part = pos[keep], part[keep]
        self.raw(out).reshape(-1)[...] = a
        return 0

    # ---- multinomial ---------------------------------------------------------------------------
    def multinomial(self, probs, nsamp, replacement, out, seed, offset, info):
        xp = self.xp
        rows, ncat = probs._shape
        if rows < 0 or ncat <= 0 or nsamp < 0 or (not replacement and nsamp > ncat):
            return C.ERR_ARG
        p = self.raw(probs)
        if rows:
            bad1 = (~((p >= 0.0) & (p < np.inf))).any(axis=1)
            pos = p > 0.0
            bad2 = ~pos.any(axis=1)
            bad3 = (pos.sum(axis=1) < nsamp) if not replacement else xp.zeros(rows, bool)
            why = xp.where(bad1, 1, xp.where(bad2, 2, xp.where(bad3, 3, 0)))
            if bool((why != 0).any()):
                r = int(xp.argmax(why != 0))
                if info is not None:
                    info[:] = [r, int(why[r])]
                return C.ERR_VALUE
        if rows == 0 or nsamp == 0:
            return 0
        dst = self.raw(out).reshape(rows, nsamp)
        if replacement:
            x = self._rnd_draws64(seed, offset, 0, rows * nsamp).reshape(rows, nsamp)
            cdf = xp.cumsum(p, axis=1)
            target = P.u53(xp, x) * cdf[:, -1:]
            # first c with cdf[c] > target (ncat - 1 if none), as the C's bisection
            lo = self._rnd_bisect(ncat, lambda mid: xp.take_along_axis(cdf, mid, axis=1) > target,
                              (rows, nsamp))
            # never a zero-probability category: back to the last positive one at or before
            cnt = xp.cumsum(pos, axis=1)
            need = xp.take_along_axis(cnt, lo, axis=1)
            lo = self._rnd_bisect(ncat, lambda mid: xp.take_along_axis(cnt, mid, axis=1) >= need,
                              (rows, nsamp))
            dst[...] = lo
            return 0
        x = self._rnd_draws64(seed, offset, 0, rows * ncat).reshape(rows, ncat)
        # Efraimidis-Spirakis: the nsamp largest keys log(u) / p, larger first, ties to the
        # smaller index; zero-probability categories (NaN here) sort after every key
        key = xp.where(pos, -(xp.log(P.u53_oc(xp, x)) / xp.where(pos, p, 1.0)), np.nan)
        dst[...] = self._rnd_stable_argsort(key)[:, :nsamp]
        return 0

    def _rnd_bisect(self, ncat, above, shape):
        """Per element: the first c in [0, ncat - 1] with above(c) (ncat - 1 if none);
        ``above`` is monotone in c."""
        xp = self.xp
        lo = xp.zeros(shape, np.int64)
        hi = xp.full(shape, ncat - 1, np.int64)
        for _ in range(max(1, (ncat - 1).bit_length()) + 1):
            mid = lo + (hi - lo) // 2
            up = above(mid)
            act = lo < hi
            hi = xp.where(act & up, mid, hi)
            lo = xp.where(act & ~up, mid + 1, lo)
        return lo
