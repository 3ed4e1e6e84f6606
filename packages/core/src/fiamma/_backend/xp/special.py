"""Array-module primitives of the special functions (special_unary / special_binary, see
contract.Backend): computed in float64 and rounded once to the operand's dtype, like
csrc/special.c, whose semantics (edge values, NaN rules) they follow.

The transcendental ones come from the array module's SciPy: scipy.special under NumPy,
cupyx.scipy.special under CuPy (``ElementwiseMixin._special_fn``); the C's edge rules are then
applied with ``xp.where``. logit, sinc, entr, multigammaln's constant, xlogy, xlog1py and
logaddexp(2) are written here in xp arithmetic (no SciPy needed). Without the special module
a function that needs it raises RuntimeError naming it.
"""

import math

import numpy as np

from fiamma._backend import codes as C
from fiamma._backend.xp.philox import fma_d

__all__ = ["SpecialMixin"]

# op code -> (the special module's function, the public name for errors)
_UNARY_SP = {
    C.SP_LGAMMA: ("gammaln", "lgamma"), C.SP_DIGAMMA: ("psi", "digamma"),
    C.SP_ERFINV: ("erfinv", "erfinv"), C.SP_ERFCX: ("erfcx", "special.erfcx"),
    C.SP_I0: ("i0", "i0"), C.SP_I0E: ("i0e", "special.i0e"), C.SP_I1: ("i1", "special.i1"),
    C.SP_I1E: ("i1e", "special.i1e"), C.SP_NDTR: ("ndtr", "special.ndtr"),
    C.SP_NDTRI: ("ndtri", "special.ndtri"), C.SP_LOG_NDTR: ("log_ndtr", "special.log_ndtr"),
    C.SP_ERFCINV: ("erfcinv", "special.erfcinv"),
}
_BINARY_SP = {
    C.SP_ZETA: ("zeta", "special.zeta"), C.SP_GAMMAINC: ("gammainc", "special.gammainc"),
    C.SP_GAMMAINCC: ("gammaincc", "special.gammaincc"),
}
_LN2 = 0.69314718055994530942
_SQRT1_2 = 0.70710678118654752440


class SpecialMixin:
    def _sp_fn(self, fname, public):
        fn = self._special_fn(fname)
        if fn is None:
            mod = "scipy.special (SciPy)" if self.is_numpy else "cupyx.scipy.special (CuPy)"
            raise RuntimeError(f"{public}: on device '{self.name}' this special function is "
                               f"computed by {mod}.{fname}, which is not available: install "
                               f"SciPy" + ("" if self.is_numpy else " support for CuPy"))
        return fn

    # ---- unary ------------------------------------------------------------------------------
    def special_unary(self, op, out, x, p0):
        if x._dtype.kind != 2:
            return C.ERR_DTYPE
        if not 0 <= op < C.SP_NUNARY:
            return C.ERR_OP
        v = self.get(x).astype(np.float64)
        self.put(out, self._sp_unary64(op, v, p0))
        return 0

    def _sp_unary64(self, op, v, p0):
        xp = self.xp
        nan = np.float64(np.nan)
        inf = np.float64(np.inf)
        if op == C.SP_LOGIT:
            return self._sp_logit(v, p0)
        if op == C.SP_SINC:
            return self._sp_sinc(v)
        if op == C.SP_ENTR:
            safe = xp.where(v > 0, v, 1.0)
            return xp.where(v > 0, -v * xp.log(safe), xp.where(v == 0, 0.0,
                                                             xp.where(v < 0, -inf, v)))
        if op == C.SP_MULTIGAMMALN:
            p = int(p0)
            r = xp.full(v.shape, 0.25 * p0 * (p0 - 1.0) * math.log(math.pi))
            for j in range(1, p + 1):
                r = r + self._sp_unary64(C.SP_LGAMMA, v + 0.5 * (1 - j), 0.0)
            return r
        if op == C.SP_POLYGAMMA:
            n = int(p0)
            if n == 0:
                return self._sp_unary64(C.SP_DIGAMMA, v, 0.0)
            z = self._sp_fn("zeta", "polygamma")(np.float64(n + 1), v)
            sign = 1.0 if n % 2 == 1 else -1.0
            return sign * math.gamma(n + 1.0) * z
        if op == C.SP_NDTR:
            return self._sp_ndtr(v)
        if op == C.SP_LOG_NDTR:
            return self._sp_log_ndtr(v)
        if op == C.SP_ERFCX:
            return self._sp_erfcx(v)
        fname, public = _UNARY_SP[op]
        if self._special_fn(fname) is None:  # computed from a function the module has
            if op == C.SP_DIGAMMA and self._special_fn("digamma") is not None:
                fname = "digamma"
            elif op == C.SP_ERFCINV and self._special_fn("ndtri") is not None:
                return xp.where(v == 0, np.inf, -self._special_fn("ndtri")(0.5 * v) * _SQRT1_2)
            elif op == C.SP_NDTRI and self._special_fn("erfcinv") is not None:
                return -math.sqrt(2.0) * self._special_fn("erfcinv")(2.0 * v)
        r = self._sp_fn(fname, public)(v)
        if op == C.SP_DIGAMMA:
            # reflection with the exact sin/cos(pi x) for x < 0: psi(x) = psi(1 - x) - pi cot(pi x)
            neg = v < 0
            s, c = self._sp_sincospi(xp.where(neg, v, 0.5))
            r = xp.where(neg, -math.pi * c / xp.where(s == 0, 1.0, s)
                         + self._sp_fn(fname, public)(xp.where(neg, 1.0 - v, 1.0)), r)
            # psi(+-0) = -+inf, NaN at -inf and the negative integers (the C's rules)
            neg0 = xp.signbit(v)
            r = xp.where(v == 0, xp.where(neg0, inf, -inf), r)
            r = xp.where((v < 0) & (v == xp.floor(v)), nan, r)
        elif op == C.SP_LGAMMA:
            r = xp.where(xp.isinf(v), inf, r)
        elif op in (C.SP_I0, C.SP_I1):
            r = xp.where(xp.isinf(v), inf if op == C.SP_I0 else v, r)
        return r

    def _sp_logit(self, v, eps):
        xp = self.xp
        if eps >= 0:
            v = xp.where(v < eps, eps, xp.where(v > 1.0 - eps, 1.0 - eps, v))
        mid = (v > 0.25) & (v < 0.75)
        one = 1.0 - v
        near = xp.log1p((2.0 * v - 1.0) / xp.where(mid, one, 1.0))
        return xp.where(mid, near, xp.log(v / one))

    def _sp_sincospi(self, x):
        """(sin(pi x), cos(pi x)) with the C's exact argument reduction (sincospi)."""
        xp = self.xp
        ax = xp.abs(x)
        big = ax >= 4503599627370496.0  # 2**52: x is an integer, sin(pi x) = +-0
        xs = xp.where(big | ~xp.isfinite(x), 0.0, x)
        n = xp.rint(2.0 * xs)
        r = xs - 0.5 * n
        s0 = xp.sin(math.pi * r)
        c0 = xp.cos(math.pi * r)
        q = xp.fmod(xp.fmod(n, 4.0) + 4.0, 4.0).astype(np.int64)
        s = xp.where(q == 0, s0, xp.where(q == 1, c0, xp.where(q == 2, -s0, -c0)))
        c = xp.where(q == 0, c0, xp.where(q == 1, -s0, xp.where(q == 2, -c0, s0)))
        s = xp.where(big, xp.copysign(0.0, x), s)
        c = xp.where(big, xp.where(xp.fmod(ax, 2.0) == 0, 1.0, -1.0), c)
        fin = xp.isfinite(x)
        return xp.where(fin, s, np.nan), xp.where(fin, c, np.nan)

    def _sp_sinc(self, x):
        """sin(pi x) / (pi x), 1 at 0."""
        xp = self.xp
        s, _ = self._sp_sincospi(x)
        res = s / (math.pi * xp.where(x == 0, 1.0, x))
        return xp.where(x == 0, 1.0, res)

    def _sp_sq(self, x):
        """(hi, lo): hi + lo = x * x exactly (hi = 0, lo = 0 where x * x overflows)."""
        xp = self.xp
        hi = x * x
        ok = xp.isfinite(hi)
        xs = xp.where(ok, x, 0.0)
        return hi, xp.where(ok, fma_d(xp, xs, xs, -xp.where(ok, hi, 0.0)), 0.0)

    def _sp_exp_mhalf_sq(self, x):
        """exp(-x^2 / 2) with x^2 split exactly."""
        xp = self.xp
        hi, lo = self._sp_sq(x)
        return xp.where(xp.isfinite(hi), xp.exp(-0.5 * hi) * (1.0 - 0.5 * lo), 0.0)

    def _sp_erfcx(self, v):
        """erfcx; for x < 0 through 2 exp(x^2) - erfcx(-x) with x^2 split exactly."""
        xp = self.xp
        f = self._sp_fn("erfcx", "special.erfcx")
        neg = v < 0
        hi, lo = self._sp_sq(xp.where(neg, v, 0.0))
        r = xp.where(neg, 2.0 * (xp.exp(hi) * (1.0 + lo)) - f(xp.where(neg, -v, 0.0)), f(v))
        return xp.where(v < -26.7, np.inf, r)

    def _sp_ndtr(self, v):
        """The normal CDF: in the lower tail through erfcx and an exactly split exp(-x^2/2)."""
        xp = self.xp
        erfc = self._sp_fn("erfc", "special.ndtr")
        low = (v < -1.0) & (v > -np.inf)
        t = xp.where(low, self._sp_erfcx(-v * _SQRT1_2) * self._sp_exp_mhalf_sq(v), 0.0)
        return xp.where(low, 0.5 * t, 0.5 * erfc(-v * _SQRT1_2))

    def _sp_log_ndtr(self, v):
        """log of the normal CDF, accurate in both tails (the C's four regions)."""
        xp = self.xp
        erfc = self._sp_fn("erfc", "special.log_ndtr")
        ex = self._sp_erfcx
        up = v > 1.0
        hi_t = xp.log1p(-0.5 * ex(xp.where(up, v, 2.0) * _SQRT1_2)
                        * self._sp_exp_mhalf_sq(xp.where(up, v, 2.0)))
        mid_hi = xp.log1p(-0.5 * erfc(v * _SQRT1_2))
        mid_lo = xp.log(0.5 * erfc(-v * _SQRT1_2))
        lowv = xp.where(v <= -1.0, v, -2.0)
        hi, lo = self._sp_sq(lowv)
        low_t = xp.log(0.5 * ex(-lowv * _SQRT1_2)) - 0.5 * hi - 0.5 * lo
        r = xp.where(up, hi_t, xp.where(v > 0, mid_hi, xp.where(v > -1.0, mid_lo, low_t)))
        r = xp.where(v == -np.inf, -np.inf, r)
        return xp.where(v != v, v, r)

    # ---- binary -----------------------------------------------------------------------------
    def special_binary(self, op, shape, out, a, sa, b, sb):
        if a._dtype.kind != 2:
            return C.ERR_DTYPE
        if not 0 <= op < C.SP_NBINARY:
            return C.ERR_OP
        xp = self.xp
        x = self.get(a, shape, sa).astype(np.float64)
        y = self.get(b, shape, sb).astype(np.float64)
        nan = np.float64(np.nan)
        if op in (C.SP_XLOGY, C.SP_XLOG1PY):
            f = xp.log if op == C.SP_XLOGY else xp.log1p
            r = xp.where(y != y, y, xp.where(x == 0, 0.0, x * f(y)))
        elif op in (C.SP_LOGADDEXP, C.SP_LOGADDEXP2):
            m = xp.where(x > y, x, y)
            d = -xp.abs(x - y)
            if op == C.SP_LOGADDEXP:
                r = m + xp.log1p(xp.exp(d))
            else:
                r = m + xp.log1p(xp.exp2(d)) / _LN2
            r = xp.where(xp.isinf(x) & (x == y), x, r)
            r = xp.where((x != x) | (y != y), nan, r)
        else:
            fname, public = _BINARY_SP[op]
            r = self._sp_fn(fname, public)(x, y)
            if op == C.SP_ZETA:
                r = xp.where(x == 1.0, np.inf, r)
                r = xp.where((x < 1.0) | (x != x) | (y != y), nan, r)
            else:
                upper = op == C.SP_GAMMAINCC
                bad = (x != x) | (y != y) | (x < 0) | (y < 0)
                r = xp.where((x == 0) & (y > 0), 0.0 if upper else 1.0, r)
                r = xp.where((x > 0) & (y == 0), 1.0 if upper else 0.0, r)
                r = xp.where(xp.isinf(x) & (y > 0), xp.where(xp.isinf(y), nan,
                                                             1.0 if upper else 0.0), r)
                r = xp.where(xp.isinf(y) & (x > 0) & ~xp.isinf(x), 0.0 if upper else 1.0, r)
                r = xp.where(bad | ((x == 0) & (y == 0)), nan, r)
        self.put(out, r, shape, out._stride)
        return 0
