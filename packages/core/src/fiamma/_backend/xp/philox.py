"""Philox4x32-10 and the distributions' transforms in array-module (``xp``) arithmetic: the
same integer and floating operations as csrc/random.c, one array operation at a time, so the
same (seed, offset) gives the same values on NumPy, on CuPy and in the C library.

Only NumPy is imported here (no fiamma module), so the arithmetic can be checked on a GPU
machine by itself. Every function takes the array module ``xp`` first.

Bit-exactness: Philox, the integer maps (randint, randperm, Bernoulli thresholds) and the
uniform floats are exact. The C transforms use fused multiply-adds (fmaf/fma); float32 ones are
computed here in float64 (the product is exact there, the sum rounds twice: different from fmaf
only when the float64 sum lies exactly on a float32 rounding midpoint), float64 ones by an
error-free product and sum (Dekker/Knuth), faithful to fma's result. Normals, exponentials and
geometrics go through the C's own polynomial log/sincos (ported here), so they agree to the last
bit in practice; lognormal (exp), Cauchy (tan) and multinomial's keys (log) use the array
module's functions where the C uses libm's: within an ulp.
"""

import numpy as np

__all__ = ["philox_words", "u64_values", "mulhi64", "unit_f", "normal_f", "u53", "u53_oc",
           "u53_open", "r_log", "normal_d", "fma_d"]

M32 = np.uint64(0xFFFFFFFF)
_M0 = np.uint64(0xD2511F53)
_M1 = np.uint64(0xCD9E8D57)
_W0 = 0x9E3779B9
_W1 = 0xBB67AE85
_S32 = np.uint64(32)
_U32 = np.uint32


def philox_words(xp, seed, first, nblocks):
    """The 4 * nblocks 32-bit words (uint32, block b's word j at 4b + j) of Philox4x32-10
    blocks first .. first + nblocks - 1 (counter (block low, block high, 0, 0), wrapping at
    2**64) under key (seed low, seed high)."""
    k0 = seed & 0xFFFFFFFF
    k1 = (seed >> 32) & 0xFFFFFFFF
    ctr = xp.arange(nblocks, dtype=np.uint64) + np.uint64(first & 0xFFFFFFFFFFFFFFFF)
    x0 = (ctr & M32).astype(np.uint32)
    x1 = (ctr >> _S32).astype(np.uint32)
    x2 = xp.zeros(nblocks, np.uint32)
    x3 = xp.zeros(nblocks, np.uint32)
    for _ in range(10):
        p0 = x0.astype(np.uint64) * _M0
        p1 = x2.astype(np.uint64) * _M1
        y0 = (p1 >> _S32).astype(np.uint32) ^ x1 ^ _U32(k0)
        y2 = (p0 >> _S32).astype(np.uint32) ^ x3 ^ _U32(k1)
        x1 = p1.astype(np.uint32)
        x3 = p0.astype(np.uint32)
        x0, x2 = y0, y2
        k0 = (k0 + _W0) & 0xFFFFFFFF
        k1 = (k1 + _W1) & 0xFFFFFFFF
    return xp.stack([x0, x1, x2, x3], axis=1).reshape(-1)


def u64_values(xp, words):
    """The 64-bit draws of a word array: value k = word 2k << 32 | word 2k + 1."""
    w = words.reshape(-1, 2).astype(np.uint64)
    return (w[:, 0] << _S32) | w[:, 1]


def mulhi64(xp, x, r):
    """The high 64 bits of the 128-bit products of uint64 array x and r (an int < 2**64 or a
    uint64 array)."""
    if isinstance(r, int):
        rl, rh = np.uint64(r & 0xFFFFFFFF), np.uint64(r >> 32)
    else:
        rl, rh = r & M32, r >> _S32
    xl = x & M32
    xh = x >> _S32
    ll = xl * rl
    hl = xh * rl
    lh = xl * rh
    cross = (ll >> _S32) + (hl & M32) + lh  # < 2**64: no carry lost
    return xh * rh + (hl >> _S32) + (cross >> _S32)


# ---- float32 path (one 32-bit word per value) --------------------------------------------------

def _fmaf3(xp, a, b, c):
    """fmaf with arrays or float32 scalars anywhere."""
    a64 = a.astype(np.float64) if hasattr(a, "astype") else np.float64(a)
    b64 = b.astype(np.float64) if hasattr(b, "astype") else np.float64(b)
    c64 = c.astype(np.float64) if hasattr(c, "astype") else np.float64(c)
    r = a64 * b64 + c64
    return r.astype(np.float32) if hasattr(r, "astype") else np.float32(r)


_F = np.float32


def unit_f(xp, words, bits):
    """Uniform [0, 1) float32 values from the top ``bits`` bits of each word (exact)."""
    return (words >> _U32(32 - bits)).astype(np.float32) * _F(1.0 / (1 << bits))


def r_logf(xp, x):
    """csrc/random.c's r_logf: log on (0, 1] by 2 atanh(s), in float32."""
    ix = x.view(np.uint32) + _U32(0x3F800000 - 0x3F3504F3)
    e = (ix >> _U32(23)).astype(np.int32) - np.int32(127)
    ix = (ix & _U32(0x007FFFFF)) + _U32(0x3F3504F3)
    m = ix.view(np.float32)
    s = (m - _F(1.0)) / (m + _F(1.0))
    z = s * s
    p = _F(2.0) / _F(9.0)
    for c in (_F(2.0) / _F(7.0), _F(2.0) / _F(5.0), _F(2.0) / _F(3.0), _F(2.0)):
        p = _fmaf3(xp, p, z, c)
    return _fmaf3(xp, e.astype(np.float32), _F(0.693147180559945), s * p)


def _quadrant(xp, s, c, qi):
    odd = (qi & 1) != 0
    ss = xp.where(odd, c, s)
    cc = xp.where(odd, s, c)
    return xp.where((qi & 2) != 0, -ss, ss), xp.where(((qi + 1) & 2) != 0, -cc, cc)


def r_sincos2pi(xp, u):
    """csrc/random.c's r_sincos2pi: (sin, cos) of 2 pi u in float32, u in [0, 1)."""
    t = u - xp.rint(u)
    q = xp.rint(_F(4.0) * t)
    x = (t - _F(0.25) * q) * _F(6.28318530717958648)
    z = x * x
    s = _fmaf3(xp, z, _F(2.7557319e-6), _F(-1.9841270e-4))
    s = _fmaf3(xp, s, z, _F(8.3333333e-3))
    s = _fmaf3(xp, s, z, _F(-1.6666667e-1))
    s = _fmaf3(xp, s * z, x, x)
    c = _fmaf3(xp, z, _F(-2.7557319e-7), _F(2.4801587e-5))
    for k in (_F(-1.3888889e-3), _F(4.1666667e-2), _F(-0.5), _F(1.0)):
        c = _fmaf3(xp, c, z, k)
    return _quadrant(xp, s, c, q.astype(np.int32) & 3)


def normal_f(xp, words, mean, std):
    """Box-Muller on word pairs (2k, 2k + 1) -> values 2k (cos) and 2k + 1 (sin), float32."""
    w = words.reshape(-1, 2)
    u1 = ((w[:, 0] >> _U32(8)) + _U32(1)).astype(np.float32) * _F(2.0 ** -24)
    u2 = (w[:, 1] >> _U32(8)).astype(np.float32) * _F(2.0 ** -24)
    r = xp.sqrt(_F(-2.0) * r_logf(xp, u1))
    sn, cs = r_sincos2pi(xp, u2)
    m, sd = _F(mean), _F(std)
    return xp.stack([_fmaf3(xp, sd, r * cs, m), _fmaf3(xp, sd, r * sn, m)], axis=1).reshape(-1)


# ---- float64 path (one 64-bit draw per value) ---------------------------------------------------

def u53(xp, x):
    """[0, 1) doubles from the top 53 bits of 64-bit draws (exact)."""
    return (x >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def u53_oc(xp, x):
    """(0, 1] doubles."""
    return ((x >> np.uint64(11)) + np.uint64(1)).astype(np.float64) * 2.0 ** -53


def u53_open(xp, x):
    """(0, 1) doubles: the odd 54-bit integer rounded to double (to nearest even), / 2**54."""
    return (((x >> np.uint64(11)) << np.uint64(1)) + np.uint64(1)).astype(np.float64) \
        * 2.0 ** -54


_SPLIT = 134217729.0  # 2**27 + 1 (Veltkamp)


def fma_d(xp, a, b, c):
    """a * b + c in float64 with one rounding of the exact product (Dekker's two-product) and
    an error-free sum (Knuth's two-sum): fma's result but in cases of a tie after the final
    addition of the two error terms."""
    p = a * b
    ta = _SPLIT * a
    ah = ta - (ta - a)
    al = a - ah
    tb = _SPLIT * b
    bh = tb - (tb - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    s = p + c
    bb = s - p
    t = (p - (s - bb)) + (c - bb)
    return s + (t + e)


def r_log(xp, x):
    """csrc/random.c's r_log: log on (0, 1] by 2 atanh(s), series to s^19, in float64."""
    ix = x.view(np.uint64) + np.uint64(0x3FF0000000000000 - 0x3FE6A09E667F3BCD)
    e = (ix >> np.uint64(52)).astype(np.int64) - np.int64(1023)
    ix = (ix & np.uint64(0x000FFFFFFFFFFFFF)) + np.uint64(0x3FE6A09E667F3BCD)
    m = ix.view(np.float64)
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    p = xp.full(z.shape, 2.0 / 19.0)
    for k in (17, 15, 13, 11, 9, 7, 5, 3):
        p = fma_d(xp, p, z, 2.0 / k)
    de = e.astype(np.float64)
    inner = fma_d(xp, s * z, p, 2.0 * s) + de * 1.90821492927058770002e-10
    return fma_d(xp, de, xp.full(de.shape, 6.93147180369123816490e-01), inner)


_INV_FACT = [1.0 / f for f in (355687428096000.0, 1307674368000.0, 6227020800.0, 39916800.0,
                               362880.0, 5040.0, 120.0, 6.0)]
_INV_FACT_C = [1.0 / f for f in (20922789888000.0, 87178291200.0, 479001600.0, 3628800.0,
                                 40320.0, 720.0, 24.0, 2.0, 1.0)]


def r_sincos2pi_d(xp, u):
    """csrc/random.c's r_sincos2pi_d: (sin, cos) of 2 pi u in float64, u in [0, 1)."""
    t = u - xp.rint(u)
    q = xp.rint(4.0 * t)
    x = (t - 0.25 * q) * 6.283185307179586477
    z = x * x
    s = xp.full(z.shape, _INV_FACT[0])
    for k, f in enumerate(_INV_FACT[1:]):
        s = fma_d(xp, s, z, f if k % 2 == 1 else -f)
    s = fma_d(xp, s * z, x, x)
    c = xp.full(z.shape, _INV_FACT_C[0])
    for k, f in enumerate(_INV_FACT_C[1:]):
        c = fma_d(xp, c, z, -f if k % 2 == 0 else f)
    return _quadrant(xp, s, c, q.astype(np.int64) & 3)


def normal_d(xp, x, mean, std):
    """Box-Muller on 64-bit draw pairs (2k, 2k + 1) -> values 2k (cos), 2k + 1 (sin)."""
    pair = x.reshape(-1, 2)
    r = xp.sqrt(-2.0 * r_log(xp, u53_oc(xp, pair[:, 0])))
    sn, cs = r_sincos2pi_d(xp, u53(xp, pair[:, 1]))
    sd = xp.full(r.shape, float(std))
    m = float(mean)
    return xp.stack([fma_d(xp, sd, r * cs, m), fma_d(xp, sd, r * sn, m)], axis=1).reshape(-1)
