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
# lgamma(1 + e) = sum_k _LG1[k-1] e^k (-euler, then (-1)^k zeta(k) / k) and lgamma(2 + e) =
# sum_k _LG2[k-1] e^k (1 - euler, then (-1)^k (zeta(k) - 1) / k), k = 1..60 (computed to 50
# digits with mpmath): within 2 ulps on [0.5, 3], where lgamma's zeros at 1 and 2 make
# log(gamma(x)) and SciPy's gammaln lose their relative accuracy
_LG1 = (
    -0.5772156649015329, 0.8224670334241132, -0.40068563438653143, 0.27058080842778454,
    -0.20738555102867398, 0.1695571769974082, -0.1440498967688461, 0.12550966952474304,
    -0.11133426586956469, 0.1000994575127818, -0.09095401714582904, 0.083353840546109,
    -0.0769325164113522, 0.07143294629536133, -0.06666870588242046, 0.06250095514121304,
    -0.058823978658684585, 0.055555767627403614, -0.05263167937961666, 0.05000004769810169,
    -0.047619070330142226, 0.04545455629320467, -0.04347826605304026, 0.04166666915034121,
    -0.04000000119214014, 0.03846153903467518, -0.037037037312989324, 0.035714285847333355,
    -0.034482758684919304, 0.03333333336437758, -0.03225806453115042, 0.03125000000727597,
    -0.030303030306558044, 0.029411764707594344, -0.02857142857226011, 0.027777777778181998,
    -0.027027027027223673, 0.02631578947377995, -0.025641025641072283, 0.025000000000022737,
    -0.024390243902450117, 0.023809523809529224, -0.023255813953491015, 0.02272727272727402,
    -0.022222222222222855, 0.021739130434782917, -0.021276595744681003, 0.02083333333333341,
    -0.02040816326530616, 0.020000000000000018, -0.019607843137254912, 0.019230769230769235,
    -0.01886792452830189, 0.01851851851851852, -0.01818181818181818, 0.017857142857142856,
    -0.017543859649122806, 0.017241379310344827, -0.01694915254237288, 0.016666666666666666,
)
_LG2 = (
    0.42278433509846713, 0.3224670334241132, -0.0673523010531981, 0.020580808427784546,
    -0.007385551028673986, 0.0028905103307415234, -0.001192753911703261, 0.0005096695247430425,
    -0.00022315475845357939, 9.945751278180853e-05, -4.492623673813314e-05, 2.050721277567069e-05,
    -9.439488275268397e-06, 4.374866789907488e-06, -2.039215753801366e-06, 9.55141213040742e-07,
    -4.492469198764566e-07, 2.1207184805554665e-07, -1.0043224823968099e-07,
    4.7698101693639804e-08, -2.2711094608943164e-08, 1.0838659214896955e-08,
    -5.183475041970047e-09, 2.4836745438024785e-09, -1.1921401405860912e-09,
    5.731367241678862e-10, -2.7595228851242334e-10, 1.330476437424449e-10, -6.4229645638381e-11,
    3.1044247747322276e-11, -1.5021384080754142e-11, 7.275974480239079e-12,
    -3.527742476575915e-12, 1.711991790559618e-12, -8.315385841420285e-13, 4.04220052528944e-13,
    -1.9664756310966165e-13, 9.573630387838556e-14, -4.6640760264283744e-14,
    2.2737369600659724e-14, -1.1091399470834522e-14, 5.413659156725363e-15,
    -2.643880017860995e-15, 1.2918959062789966e-15, -6.315935504198448e-16, 3.089316266963393e-16,
    -1.5117930628108198e-16, 7.40148685695232e-17, -3.625218048120654e-17, 1.7763568421861633e-17,
    -8.70763157479179e-18, 4.270088559227004e-18, -2.0947604247944643e-18, 1.0279842823787928e-18,
    -5.046468294792953e-19, 2.4781763945937917e-19, -1.2173498078147637e-19,
    5.981805089941246e-20, -2.9402092814365703e-20, 1.4456028966866556e-20,
)


class SpecialMixin:
    def _sp_fn(self, fname, public):
        fn = self._special_fn(fname)
        if fn is None:
            mod, pkg = ("scipy.special", "SciPy") if self.is_numpy else \
                ("cupyx.scipy.special", "a CuPy with cupyx.scipy.special")
            raise RuntimeError(f"{public}: on device '{self.name}' this special function needs "
                               f"{mod}.{fname}, which is not available (install {pkg})")
        return fn

    # ---- unary ------------------------------------------------------------------------------
    def special_unary(self, op, out, x, p0):
        if x._dtype._kind != 2:
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
            return xp.where(v == -inf, nan, sign * math.gamma(n + 1.0) * z)  # as the C kernel
        if op == C.SP_NDTR:
            return self._sp_ndtr(v)
        if op == C.SP_LOG_NDTR:
            return self._sp_log_ndtr(v)
        if op == C.SP_ERFCX:
            return self._sp_erfcx(v)
        if op == C.SP_LGAMMA:
            return self._sp_lgamma(v)
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
        elif op in (C.SP_I0, C.SP_I1):
            r = xp.where(xp.isinf(v), inf if op == C.SP_I0 else v, r)
        elif op in (C.SP_I0E, C.SP_I1E):
            # e^-|x| I(x) -> 0 at +-inf (cupyx gives NaN there): i0e 0, i1e a zero of x's sign
            zero = xp.zeros_like(v) if op == C.SP_I0E else xp.copysign(xp.zeros_like(v), v)
            r = xp.where(xp.isinf(v), zero, r)
            # cupyx forms exp(-|x|) * I(x), NaN (0 * inf) once I(x) overflows (|x| > ~713):
            # there the asymptotic series, converged to double precision from |x| = 700
            big = xp.isfinite(v) & (xp.abs(v) >= 700.0)
            r = xp.where(big, self._sp_ie_asymptotic(op == C.SP_I1E, v), r)
        return r

    def _sp_ie_asymptotic(self, one, v):
        """e^-|x| I_nu(|x|) (nu = 1 if one else 0) times sign(x) for nu = 1, for |x| >= 700:
        1 / sqrt(2 pi |x|) sum_k (-1)^k prod_{j<=k} (4 nu^2 - (2j - 1)^2) / (k! (8 |x|)^k)."""
        xp = self.xp
        a = xp.maximum(xp.abs(v), 700.0)
        mu = 4.0 if one else 0.0
        term = xp.ones_like(a)
        total = xp.ones_like(a)
        for k in range(1, 9):
            term = term * (-(mu - (2 * k - 1) ** 2) / (k * 8.0)) / a
            total = total + term
        r = total / xp.sqrt(2.0 * math.pi * a)
        return xp.copysign(r, v) if one else r

    def _sp_series(self, c, e):
        """sum_k c[k-1] e^k by Horner."""
        r = self.xp.full(e.shape, c[-1])
        for ck in reversed(c[:-1]):
            r = r * e + ck
        return r * e

    def _sp_lgamma(self, v):
        """log|Gamma(x)| to a few ulps: the series about 1 and 2 on (0, 3), log(gamma(x)) on
        [3, 171), SciPy's gammaln (Stirling) above; x < 0 by the reflection
        log(pi / |x sin(pi x)|) - lgamma(-x) with the exact sin(pi x)."""
        xp = self.xp
        y = xp.abs(v)
        y = xp.where((y > 0) & xp.isfinite(y), y, 1.0)
        small = self._sp_series(_LG1, xp.where(y < 0.5, y, 0.25)) - xp.log(xp.where(y < 0.5, y,
                                                                                     0.25))
        near1 = self._sp_series(_LG1, xp.where((y >= 0.5) & (y < 1.5), y - 1.0, 0.0))
        near2 = self._sp_series(_LG2, xp.where((y >= 1.5) & (y < 3.0), y - 2.0, 0.0))
        gamma = self._sp_fn("gamma", "lgamma")
        gammaln = self._sp_fn("gammaln", "lgamma")
        mid = xp.log(gamma(xp.where((y >= 3.0) & (y < 171.0), y, 4.0)))
        big = gammaln(xp.where(y >= 171.0, y, 200.0))
        pos = xp.where(y < 0.5, small, xp.where(y < 1.5, near1, xp.where(
            y < 3.0, near2, xp.where(y < 171.0, mid, big))))
        s, _ = self._sp_sincospi(xp.where(v < 0, v, 0.5))
        refl = (xp.log(math.pi / xp.abs(xp.where(s == 0, 1.0, s)))
                - xp.log(xp.abs(xp.where(v < 0, v, 1.0))) - pos)
        r = xp.where(v < 0, refl, pos)
        r = xp.where((v == 0) | xp.isinf(v) | ((v < 0) & (s == 0)), np.inf, r)
        return xp.where(v != v, v, r)

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
        if a._dtype._kind != 2:
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
                # s = inf: the terms (q + k)^-s are 0 but one with q + k < 1 (inf) or = 1 (1)
                r = xp.where(x == np.inf, xp.where(y < 1.0, np.inf, xp.where(y == 1.0, 1.0, 0.0)),
                             r)
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
