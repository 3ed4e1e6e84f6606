"""torch.special's orthogonal polynomials (Chebyshev T/U/V/W and their shifted forms, Hermite
H/He, Laguerre L, Legendre P) and Bessel-type functions (bessel_j0/j1/y0/y1,
modified_bessel_i0/i1/k0/k1, scaled_modified_bessel_k0/k1, spherical_bessel_j0, airy_ai).

Computed in float64 NumPy (vectorised) and rounded once to the result dtype: the promoted dtype
of the arguments, the default float dtype for integer / bool input; float16, bfloat16 and
complex raise as PyTorch does on the CPU. As in PyTorch, none of them records a gradient.

Polynomials: the degree ``n`` is truncated to an integer; a negative degree gives 0; |x| = 1
uses the closed forms; Chebyshev T/U/V/W of degree above 6 (T) or 8 (U, V, W) inside (-1, 1)
use their trigonometric forms, else the three-term recurrences. NaN in x gives NaN (PyTorch
sometimes returns a neighbouring element's value there).

>>> import fiamma
>>> fiamma.special.chebyshev_polynomial_t(fiamma.tensor([0.5]), 2).tolist()
[-0.5]
>>> fiamma.special.hermite_polynomial_h(fiamma.tensor([1.0]), 3).tolist()
[-4.0]
"""

import math

import numpy as np

from fiamma import _dtype as D
from fiamma._tensor import Tensor

__all__ = [
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
    "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
    "laguerre_polynomial_l", "legendre_polynomial_p",
]


def _F():
    import importlib

    return importlib.import_module("fiamma")


def _check_dtype(dt, name):
    if dt in (D.float16, D.bfloat16) or dt._kind == 3:
        label = {D.float16: "Half", D.bfloat16: "BFloat16", D.complex64: "ComplexFloat",
                 D.complex128: "ComplexDouble"}.get(dt, str(dt))
        raise NotImplementedError(f'"{name}_cpu" not implemented for \'{label}\'')


def _host(t):
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    return t.numpy()


def _finish(res, dt, device, out, name):
    F = _F()
    r = F.tensor(np.ascontiguousarray(res), dtype=dt)
    if device.type != "cpu":
        r = r.to(device)
    if out is not None:
        if not isinstance(out, Tensor):
            raise TypeError(f"{name}(): argument 'out' must be Tensor, not "
                            f"{type(out).__name__}")
        if tuple(out.shape) != tuple(r.shape):
            out.resize_(r.shape)
        out.copy_(r)
        return out
    return r


def unary(name, fn):
    """A torch.special unary function computed by ``fn`` on a float64 array."""
    def op(input, *, out=None):
        if not isinstance(input, Tensor):
            raise TypeError(f"special_{name}(): argument 'input' (position 1) must be Tensor, "
                            f"not {type(input).__name__}")
        dt = input._dtype
        _check_dtype(dt, name)
        if dt._kind < 2:
            dt = _F().get_default_dtype()
        x = _host(input).astype(np.float64)
        with np.errstate(all="ignore"):
            res = fn(x)
        return _finish(res, dt, input.device, out, name)

    op.__name__ = op.__qualname__ = name
    return op


def _poly(name, fn, doc):
    def op(input, n, *, out=None):
        x, nn = input, n
        if not isinstance(x, Tensor) and not isinstance(nn, Tensor):
            raise TypeError(f"special_{name}() received an invalid combination of arguments - "
                            f"got ({type(x).__name__}, {type(nn).__name__}): x or n must be "
                            f"a Tensor")
        F = _F()
        for v, label in ((x, "x"), (nn, "n")):
            if not isinstance(v, (Tensor, bool, int, float)):
                raise TypeError(f"special_{name}(): argument '{label}' must be Tensor or "
                                f"Number, not {type(v).__name__}")
        dt = F.result_type(x, nn)
        _check_dtype(dt, name)
        if dt._kind < 2:
            dt = F.get_default_dtype()
        dev = x.device if isinstance(x, Tensor) else nn.device
        xa = _host(x).astype(np.float64) if isinstance(x, Tensor) else np.float64(x)
        na = _host(nn).astype(np.float64) if isinstance(nn, Tensor) else np.float64(nn)
        xa, na = np.broadcast_arrays(xa, na)
        with np.errstate(all="ignore"):
            k = np.where(np.isnan(na), -1.0, np.trunc(na))
            res = fn(np.array(xa, dtype=np.float64), k)
            res = np.where(k < 0, 0.0, res)
            res = np.where(np.isnan(xa) & (k > 0), np.nan, res)
        return _finish(res, dt, dev, out, name)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc + " ``x`` and ``n`` are tensors or numbers (at least one a tensor), " \
        "broadcast together; ``n`` is truncated to an integer, n < 0 gives 0. No gradient."
    return op


def _recurrence(x, k, p0, p1, step):
    """p_k(x) from p_0, p_1 and p_{j+1} = step(j, x, p_j, p_{j-1}), elementwise degree k."""
    kmax = int(np.clip(k.max(initial=0), 0, 2 ** 31))
    res = np.where(k == 0, p0, p1) if kmax >= 1 else np.broadcast_to(p0, x.shape).copy()
    prev, cur = np.broadcast_to(p0, x.shape).astype(np.float64), p1.astype(np.float64)
    for j in range(1, kmax):
        prev, cur = cur, step(j, x, cur, prev)
        res = np.where(k == j + 1, cur, res)
    return np.asarray(res, dtype=np.float64)


def _cheb(x, k, p1, trig, threshold, at_one, at_minus_one):
    """Chebyshev-type: p_{j+1} = 2x p_j - p_{j-1} from p_0 = 1 and p_1; trig form inside
    (-1, 1) above ``threshold``; closed forms at x = +-1."""
    small = np.where((np.abs(x) < 1) & (k > threshold), 0.0, k)     # recurrence degrees only
    res = _recurrence(x, small, np.ones_like(x), p1,
                      lambda j, x, c, p: 2 * x * c - p)
    inside = (np.abs(x) < 1) & (k > threshold)
    if inside.any():
        res = np.where(inside, trig(np.arccos(np.clip(x, -1, 1)), k), res)
    res = np.where(x == 1, at_one(k), res)
    res = np.where(x == -1, at_minus_one(k), res)
    return res


def _even(k):
    return np.fmod(k, 2) == 0


def _cheb_t(x, k):
    return _cheb(x, k, x, lambda t, k: np.cos(k * t), 6,
                 lambda k: np.ones_like(k), lambda k: np.where(_even(k), 1.0, -1.0))


def _cheb_u(x, k):
    def trig(t, k):
        s = np.sin(t)
        return np.where(s != 0, np.sin((k + 1) * t) / np.where(s != 0, s, 1),
                        (k + 1) * np.cos((k + 1) * t) / np.where(x != 0, x, 1))
    return _cheb(x, k, 2 * x, trig, 8,
                 lambda k: k + 1, lambda k: np.where(_even(k), k + 1, -(k + 1)))


def _cheb_v(x, k):
    def trig(t, k):
        c = np.cos(t / 2)
        return np.cos((k + 0.5) * t) / np.where(c != 0, c, 1)
    return _cheb(x, k, 2 * x - 1, trig, 8,
                 lambda k: np.ones_like(k), lambda k: np.where(_even(k), 2 * k + 1, -(2 * k + 1)))


def _cheb_w(x, k):
    def trig(t, k):
        s = np.sin(t / 2)
        return np.where(s != 0, np.sin((k + 0.5) * t) / np.where(s != 0, s, 1), 2 * k + 1)
    return _cheb(x, k, 2 * x + 1, trig, 8,
                 lambda k: 2 * k + 1, lambda k: np.where(_even(k), 1.0, -1.0))


def _hermite_h(x, k):
    return _recurrence(x, k, np.ones_like(x), 2 * x, lambda j, x, c, p: 2 * x * c - 2 * j * p)


def _hermite_he(x, k):
    return _recurrence(x, k, np.ones_like(x), x, lambda j, x, c, p: x * c - j * p)


def _laguerre(x, k):
    res = _recurrence(x, k, np.ones_like(x), 1 - x,
                      lambda j, x, c, p: ((2 * j + 1 - x) * c - j * p) / (j + 1))
    return np.where(x == 0, 1.0, res)


def _legendre(x, k):
    res = _recurrence(x, k, np.ones_like(x), x,
                      lambda j, x, c, p: ((2 * j + 1) * x * c - j * p) / (j + 1))
    res = np.where(x == 1, 1.0, res)
    return np.where(x == -1, np.where(_even(k), 1.0, -1.0), res)


def _shift(fn):
    return lambda x, k: fn(2 * x - 1, k)


chebyshev_polynomial_t = _poly("chebyshev_polynomial_t", _cheb_t,
                               "The Chebyshev polynomial of the first kind T_n(x).")
chebyshev_polynomial_u = _poly("chebyshev_polynomial_u", _cheb_u,
                               "The Chebyshev polynomial of the second kind U_n(x).")
chebyshev_polynomial_v = _poly("chebyshev_polynomial_v", _cheb_v,
                               "The Chebyshev polynomial of the third kind V_n(x).")
chebyshev_polynomial_w = _poly("chebyshev_polynomial_w", _cheb_w,
                               "The Chebyshev polynomial of the fourth kind W_n(x).")
shifted_chebyshev_polynomial_t = _poly("shifted_chebyshev_polynomial_t", _shift(_cheb_t),
                                       "The shifted Chebyshev polynomial T*_n(x) = T_n(2x-1).")
shifted_chebyshev_polynomial_u = _poly("shifted_chebyshev_polynomial_u", _shift(_cheb_u),
                                       "The shifted Chebyshev polynomial U*_n(x) = U_n(2x-1).")
shifted_chebyshev_polynomial_v = _poly("shifted_chebyshev_polynomial_v", _shift(_cheb_v),
                                       "The shifted Chebyshev polynomial V*_n(x) = V_n(2x-1).")
shifted_chebyshev_polynomial_w = _poly("shifted_chebyshev_polynomial_w", _shift(_cheb_w),
                                       "The shifted Chebyshev polynomial W*_n(x) = W_n(2x-1).")
hermite_polynomial_h = _poly("hermite_polynomial_h", _hermite_h,
                             "The physicists' Hermite polynomial H_n(x).")
hermite_polynomial_he = _poly("hermite_polynomial_he", _hermite_he,
                              "The probabilists' Hermite polynomial He_n(x).")
laguerre_polynomial_l = _poly("laguerre_polynomial_l", _laguerre,
                              "The Laguerre polynomial L_n(x).")
legendre_polynomial_p = _poly("legendre_polynomial_p", _legendre,
                              "The Legendre polynomial P_n(x).")


# ---------------------------------------------------------------------------------------------
# Bessel-type functions (float64 NumPy, vectorised)

_EULER = 0.57721566490153286061
_TWO_OVER_PI = 0.63661977236758134308


def _miller_01(x):
    """(J0, J1, sum_k>=1 (-1)^k J_2k / k, sum_k>=1 (-1)^k (J_2k-1 - J_2k+1) / k) for
    0 < x <= 25 by Miller's backward recurrence normalised with J0 + 2 sum J_2k = 1."""
    m = int(2 * math.ceil((1.5 * float(x.max(initial=0.0)) + 40) / 2))
    nxt = np.zeros_like(x)                      # J_{k+1} (scaled)
    cur = np.full_like(x, 1e-30)                # J_k
    norm = np.zeros_like(x)                     # sum_{k>=1} J_2k (scaled)
    s_y0 = np.zeros_like(x)                     # sum (-1)^k J_2k / k
    s_y1 = np.zeros_like(x)                     # sum (-1)^k (J_2k-1 - J_2k+1) / k
    j_above = np.zeros_like(x)                  # J_{2k+1} carried for s_y1
    k = m
    while k > 0:
        prev = (2.0 * k / x) * cur - nxt          # J_{k-1}
        nxt, cur = cur, prev
        k -= 1
        # cur = J_k, nxt = J_{k+1}
        if k % 2 == 0 and k > 0:
            norm += cur
            s_y0 += (-1) ** (k // 2) * cur / (k // 2)
        if k % 2 == 1:
            # J_k with k = 2j - 1 pairs with J_{2j+1} (the previous odd index, j_above)
            j = (k + 1) // 2
            s_y1 += (-1) ** j * (cur - j_above) / j
            j_above = cur
        big = np.abs(cur) > 1e250
        if big.any():
            f = np.where(big, 1e-250, 1.0)
            cur, nxt, norm, s_y0, s_y1, j_above = (v * f for v in
                                                    (cur, nxt, norm, s_y0, s_y1, j_above))
    total = cur + 2 * norm                      # cur = J_0
    return cur / total, nxt / total, s_y0 / total, s_y1 / total


def _hankel(x, nu):
    """P, Q of Hankel's asymptotic expansion of order nu (x >= 25)."""
    mu = 4.0 * nu * nu
    p = np.ones_like(x)
    q = np.zeros_like(x)
    term = np.ones_like(x)
    for k in range(1, 60):
        term = term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * x)
        if k % 2:
            q += (-1) ** ((k - 1) // 2) * term
        else:
            p += (-1) ** (k // 2) * term
        if np.all(np.abs(term) < 1e-17):
            break
    return p, q


def _bessel_jy(x, which):
    ax = np.abs(x)
    res = np.full_like(x, np.nan)
    small = (ax > 0) & (ax <= 25)
    large = np.isfinite(ax) & (ax > 25)
    if small.any():
        xs = ax[small]
        j0, j1, s0, s1 = _miller_01(xs)
        lg = np.log(xs / 2) + _EULER
        if which == "j0":
            v = j0
        elif which == "j1":
            v = j1
        elif which == "y0":
            v = _TWO_OVER_PI * (lg * j0 - 2 * s0)
        else:
            v = _TWO_OVER_PI * (lg * j1 - j0 / xs + s1)
        res[small] = v
    if large.any():
        xl = ax[large]
        nu = 0.0 if which in ("j0", "y0") else 1.0
        p, q = _hankel(xl, nu)
        c, s = np.cos(xl), np.sin(xl)
        r2 = 1 / math.sqrt(2)
        if nu == 0:
            cw, sw = (c + s) * r2, (s - c) * r2
        else:
            cw, sw = (s - c) * r2, -(s + c) * r2
        amp = np.sqrt(_TWO_OVER_PI / xl)
        res[large] = amp * ((p * cw - q * sw) if which[0] == "j" else (p * sw + q * cw))
    if which == "j0":
        res = np.where(ax == 0, 1.0, res)
        res = np.where(np.isinf(ax), 0.0, res)
    elif which == "j1":
        res = np.where(ax == 0, 0.0, res)
        res = np.where(np.isinf(ax), 0.0, res)
        res = np.where(x < 0, -res, res)
    else:
        res = np.where(x == 0, -np.inf, res)
        res = np.where(x < 0, np.nan, res)
        res = np.where(x == np.inf, 0.0, res)
    return res


def _k_series(x, order):
    """K0 / K1 for 0 < x <= 1 by their power series (A&S 9.6.13 / 9.6.11)."""
    y = x * x / 4
    lg = np.log(x / 2)
    term = np.ones_like(x)
    i_sum = np.ones_like(x) if order == 0 else np.ones_like(x)
    h = 0.0
    if order == 0:
        rest = np.zeros_like(x)
        for k in range(1, 30):
            term = term * y / (k * k)
            h += 1.0 / k
            i_sum = i_sum + term
            rest = rest + h * term
        return -(lg + _EULER) * i_sum + rest
    # order 1: I1 = (x/2) sum y^k / (k! (k+1)!); psi(k+1) + psi(k+2) = 2 H_k + 1/(k+1) - 2 gamma
    term = np.ones_like(x)
    i1 = np.ones_like(x)
    ps = np.full_like(x, 1.0 - 2 * _EULER)
    for k in range(1, 30):
        term = term * y / (k * (k + 1))
        h += 1.0 / k
        i1 = i1 + term
        ps = ps + (2 * h + 1.0 / (k + 1) - 2 * _EULER) * term
    return 1 / x + lg * (x / 2) * i1 - (x / 4) * ps


def _k_scaled_integral(x, nu):
    """exp(x) K_nu(x) = int_0^inf exp(-x (cosh t - 1)) cosh(nu t) dt by the trapezoid rule
    (exponentially convergent; step 0.5/sqrt(x) at most 0.25), for x >= 0.5."""
    h = np.minimum(0.25, 0.5 / np.sqrt(x))
    top = np.arccosh(1 + 50.0 / x) + 1.0
    n = int(np.ceil((top / h).max(initial=1.0))) + 1
    t = np.arange(n)[None, :] * h[:, None]
    f = np.exp(-x[:, None] * (2 * np.sinh(t / 2) ** 2)) * np.cosh(nu * t)   # cosh t - 1
    f[:, 0] *= 0.5
    return h * f.sum(axis=1)


def _bessel_k(x, order, scaled):
    res = np.full_like(x, np.nan)
    small = (x > 0) & (x <= 1)
    mid = (x > 1) & np.isfinite(x)
    if small.any():
        v = _k_series(x[small], order)
        res[small] = v * np.exp(x[small]) if scaled else v
    if mid.any():
        xm = x[mid]
        v = np.concatenate([_k_scaled_integral(c, order) for c in np.array_split(xm, max(
            1, xm.size // 4096))]) if xm.size else xm
        res[mid] = v if scaled else v * np.exp(-xm)
    res = np.where(x == 0, np.inf, res)
    return np.where(x == np.inf, 0.0, res)


def _spherical_j0(x):
    ax = np.abs(x)
    with np.errstate(all="ignore"):
        v = np.sin(x) / np.where(x == 0, 1, x)
    # near 0: 1 - x^2/6 + x^4/120 - x^6/5040
    x2 = x * x
    series = 1 - x2 / 6 * (1 - x2 / 20 * (1 - x2 / 42 * (1 - x2 / 72)))
    v = np.where(ax < 0.05, series, v)
    return np.where(np.isinf(x), 0.0, v)


def _modified_i(x, order):
    """I0 / I1 by the power series (|x| <= 40) and the scaled asymptotic series (above)."""
    ax = np.abs(x)
    res = np.empty_like(x)
    small = ax <= 40
    if small.any():
        xs = ax[small]
        y = xs * xs / 4
        term = np.ones_like(xs)
        acc = np.ones_like(xs)
        for k in range(1, 200):
            term = term * y / (k * (k + order))
            acc = acc + term
            if np.all(term < 1e-17 * acc):
                break
        res[small] = acc if order == 0 else acc * xs / 2
    big = ~small
    if big.any():
        xl = ax[big]
        mu = 4.0 * order * order
        term = np.ones_like(xl)
        acc = np.ones_like(xl)
        for k in range(1, 60):
            term = term * -(mu - (2 * k - 1) ** 2) / (k * 8.0 * xl)
            acc = acc + term
            if np.all(np.abs(term) < 1e-17):
                break
        with np.errstate(over="ignore"):
            half = np.exp(xl / 2)
            res[big] = acc / np.sqrt(2 * math.pi * xl) * half * half
    res = np.where(np.isinf(x), np.inf, res)
    if order == 1:
        res = np.where(x < 0, -res, res)
    return np.where(np.isnan(x), np.nan, res)


# Airy Ai: Maclaurin series near 0, K_{1/3} for x > 1, and for x < 0 the series in extended
# decimal precision (|x| <= 9.5) or the asymptotic expansion (x < -9.5)
_AI0 = 0.35502805388781723926
_AIP0 = 0.25881940379280679840


def _airy_series(x):
    """Ai by its Maclaurin series in the dtype of x (float64, or long double on [-6.5, -2])."""
    f = np.ones_like(x)
    g = x.copy()
    tf = np.ones_like(x)
    tg = x.copy()
    x3 = x ** 3
    for k in range(1, 60):
        tf = tf * x3 / ((3 * k - 1) * (3 * k))
        tg = tg * x3 / ((3 * k) * (3 * k + 1))
        f = f + tf
        g = g + tg
        if np.all(np.abs(tf) + np.abs(tg) < 1e-18 * (np.abs(f) + np.abs(g))):
            break
    if x.dtype == np.longdouble:
        return _AI0_L * f - _AIP0_L * g
    return _AI0 * f - _AIP0 * g


# 80-bit long double (x86): ~1e-19, enough for the series' cancellation down to -6.5
_LONG_OK = np.finfo(np.longdouble).eps < 1e-18
_AI0_L = np.longdouble("0.355028053887817239260063186004183176")
_AIP0_L = np.longdouble("0.258819403792806798405183560189203963")


def _airy_series_decimal(x):
    import decimal

    ctx = decimal.Context(prec=50)
    a0 = ctx.create_decimal("0.355028053887817239260063186004183176397979174199")
    b0 = ctx.create_decimal("0.258819403792806798405183560189203963479091138354")
    out = np.empty_like(x)
    for i, v in enumerate(x.tolist()):
        d = ctx.create_decimal(repr(v))
        d3 = ctx.multiply(ctx.multiply(d, d), d)
        tf, tg = ctx.create_decimal(1), d
        f, g = tf, tg
        k = 1
        while True:
            tf = ctx.divide(ctx.multiply(tf, d3), (3 * k - 1) * (3 * k))
            tg = ctx.divide(ctx.multiply(tg, d3), (3 * k) * (3 * k + 1))
            f, g = ctx.add(f, tf), ctx.add(g, tg)
            if k > 5 and abs(tf) + abs(tg) < ctx.create_decimal("1e-40"):
                break
            k += 1
        out[i] = float(ctx.subtract(ctx.multiply(a0, f), ctx.multiply(b0, g)))
    return out


def _airy_negative_asymptotic(x):
    """Ai(-z) ~ (pi^-1/2 z^-1/4) [sin(zeta + pi/4) P - cos(zeta + pi/4) Q], z >= 9.5."""
    z = -x
    zeta = 2.0 / 3.0 * z * np.sqrt(z)
    u = 1.0
    p = np.ones_like(z)
    q = np.zeros_like(z)
    powz = np.ones_like(z)
    for k in range(1, 40):
        # u_k = (6k-5)(6k-3)(6k-1) / ((2k-1) 216 k) u_{k-1}
        u = u * (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / ((2 * k - 1) * 216 * k)
        powz = powz / zeta
        t = u * powz
        if k % 2:
            q += (-1) ** ((k - 1) // 2) * t
        else:
            p += (-1) ** (k // 2) * t
        if np.all(np.abs(t) < 1e-17):
            break
    c, s = np.cos(zeta), np.sin(zeta)
    r2 = 1 / math.sqrt(2)
    sw, cw = (s + c) * r2, (c - s) * r2            # sin / cos (zeta + pi/4)
    return (sw * p - cw * q) / (math.sqrt(math.pi) * np.sqrt(np.sqrt(z)))


def _airy_ai(x):
    res = np.full_like(x, np.nan)
    near = (x >= -2) & (x <= 1)
    pos = (x > 1) & np.isfinite(x)
    mid_neg = (x < -2) & (x >= -9.5)
    far_neg = (x < -9.5) & np.isfinite(x)
    if near.any():
        res[near] = _airy_series(x[near])
    if pos.any():
        xp = x[pos]
        zeta = 2.0 / 3.0 * xp * np.sqrt(xp)
        with np.errstate(under="ignore"):
            res[pos] = np.sqrt(xp / 3) / math.pi * _k_scaled_integral(zeta, 1.0 / 3.0) * \
                np.exp(-zeta)
    if mid_neg.any():
        xm = x[mid_neg]
        if _LONG_OK:
            part = xm >= -6.5
            v = np.empty_like(xm)
            v[part] = _airy_series(xm[part].astype(np.longdouble)).astype(np.float64)
            v[~part] = _airy_series_decimal(xm[~part])
            res[mid_neg] = v
        else:
            res[mid_neg] = _airy_series_decimal(xm)
    if far_neg.any():
        res[far_neg] = _airy_negative_asymptotic(x[far_neg])
    return np.where(x == np.inf, 0.0, res)


bessel_j0 = unary("bessel_j0", lambda x: _bessel_jy(x, "j0"))
bessel_j0.__doc__ = "The Bessel function of the first kind of order 0, J0(x). No gradient."
bessel_j1 = unary("bessel_j1", lambda x: _bessel_jy(x, "j1"))
bessel_j1.__doc__ = "The Bessel function of the first kind of order 1, J1(x). No gradient."
bessel_y0 = unary("bessel_y0", lambda x: _bessel_jy(x, "y0"))
bessel_y0.__doc__ = ("The Bessel function of the second kind of order 0, Y0(x) (-inf at 0, NaN "
                     "for x < 0). No gradient.")
bessel_y1 = unary("bessel_y1", lambda x: _bessel_jy(x, "y1"))
bessel_y1.__doc__ = ("The Bessel function of the second kind of order 1, Y1(x) (-inf at 0, NaN "
                     "for x < 0). No gradient.")
modified_bessel_i0 = unary("modified_bessel_i0", lambda x: _modified_i(x, 0))
modified_bessel_i0.__doc__ = "The modified Bessel function I0(x) (as ``i0``, no gradient)."
modified_bessel_i1 = unary("modified_bessel_i1", lambda x: _modified_i(x, 1))
modified_bessel_i1.__doc__ = "The modified Bessel function I1(x) (as ``i1``, no gradient)."
modified_bessel_k0 = unary("modified_bessel_k0", lambda x: _bessel_k(x, 0, False))
modified_bessel_k0.__doc__ = ("The modified Bessel function of the second kind K0(x) (inf at 0, "
                              "NaN for x < 0). No gradient.")
modified_bessel_k1 = unary("modified_bessel_k1", lambda x: _bessel_k(x, 1, False))
modified_bessel_k1.__doc__ = ("The modified Bessel function of the second kind K1(x) (inf at 0, "
                              "NaN for x < 0). No gradient.")
scaled_modified_bessel_k0 = unary("scaled_modified_bessel_k0", lambda x: _bessel_k(x, 0, True))
scaled_modified_bessel_k0.__doc__ = "exp(x) K0(x). No gradient."
scaled_modified_bessel_k1 = unary("scaled_modified_bessel_k1", lambda x: _bessel_k(x, 1, True))
scaled_modified_bessel_k1.__doc__ = "exp(x) K1(x). No gradient."
spherical_bessel_j0 = unary("spherical_bessel_j0", _spherical_j0)
spherical_bessel_j0.__doc__ = "The spherical Bessel function j0(x) = sin(x) / x. No gradient."
airy_ai = unary("airy_ai", _airy_ai)
airy_ai.__doc__ = "The Airy function Ai(x). No gradient."

__all__ += [
    "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
    "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
    "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0", "airy_ai",
]
