"""Samplers that need rejection (gamma, Poisson, binomial) and the implicit reparameterisation
gradient of the gamma sampler. Written over fiamma's public ops and its RNG (``fiamma.rand`` /
``fiamma.randn``), vectorised: each round draws for every still-rejected element, so the number
of rounds is small (the acceptance rates are above 0.85).

Algorithms: Marsaglia-Tsang for gamma (with the alpha + 1 boost below 1); inversion for small
Poisson rates and Hoermann's PTRS above; inversion for binomials with small n min(p, 1-p) and
Hoermann's BTRS above. The gamma gradient is the implicit one (Figurnov et al. 2018), as
PyTorch's: dx/dalpha = -(dP(alpha, x)/dalpha) / p(x; alpha), with P the regularised incomplete
gamma function; the alpha derivative of P is a central difference of ``fiamma.special.gammainc``
/ ``gammaincc`` in float64 (the one of P and Q that is smaller, so it keeps relative accuracy).
"""

import math

import fiamma
import fiamma.special

_MAX_ROUNDS = 1000


def _rejection_loop(n, draw, op):
    """Fill a float64 result of ``n`` values; ``draw(idx)`` returns (values, accepted) for the
    pending flat indices ``idx``."""
    out = fiamma.empty(n, dtype=fiamma.float64)
    pending = fiamma.arange(n)
    for _ in range(_MAX_ROUNDS):
        if pending.numel() == 0:
            return out
        values, ok = draw(pending)
        out[pending[ok]] = values[ok]
        pending = pending[~ok]
    raise RuntimeError(f"{op}: rejection sampler did not converge (parameters out of range?)")


def _gamma_flat(alpha):
    """Standard-gamma samples for a flat float64 tensor ``alpha`` (> 0), float64."""
    boost = alpha < 1
    a = fiamma.where(boost, alpha + 1, alpha)
    d = a - 1.0 / 3.0
    c = 1.0 / (9.0 * d).sqrt()

    def draw(idx):
        di, ci = d[idx], c[idx]
        x = fiamma.randn(idx.numel(), dtype=fiamma.float64)
        v = 1 + ci * x
        v = v * v * v
        u = fiamma.rand(idx.numel(), dtype=fiamma.float64)
        ok = v > 0
        logv = fiamma.where(ok, v, 1.0).log()
        ok = ok & (u.log() < 0.5 * x * x + di - di * v + di * logv)
        return di * v, ok

    g = _rejection_loop(alpha.numel(), draw, "Gamma.sample")
    if bool(boost.any()):
        u = fiamma.rand(alpha.numel(), dtype=fiamma.float64)
        logg = g.log() + u.log() / alpha
        g = fiamma.where(boost, logg.exp(), g)
    return g


def _p_or_q(a, x, lower):
    return fiamma.where(lower, fiamma.special.gammainc(a, x), fiamma.special.gammaincc(a, x))


def _gamma_grad(x, alpha):
    """dx/dalpha of a standard-gamma sample x (implicit reparameterisation), float64."""
    x = x.double()
    a = alpha.double()
    h = 1e-5 * a.clamp(min=1.0)
    lower = x < a
    p_hi = _p_or_q(a + h, x, lower)
    p_lo = _p_or_q(a - h, x, lower)
    dp = (p_hi - p_lo) / (2 * h)
    dp = fiamma.where(lower, dp, -dp)
    log_pdf = (a - 1) * x.log() - x - fiamma.lgamma(a)
    grad = -dp / log_pdf.exp()
    return fiamma.nan_to_num(grad, nan=0.0, posinf=0.0, neginf=0.0)


class _StandardGamma(fiamma.autograd.Function):
    @staticmethod
    def forward(ctx, alpha):
        with fiamma.no_grad():
            tiny = fiamma.finfo(alpha.dtype).tiny
            flat = alpha.detach().reshape(-1).double()
            x = _gamma_flat(flat).reshape(tuple(alpha.shape)).to(alpha.dtype).clamp(min=tiny)
        ctx.save_for_backward(x, alpha)
        return x

    @staticmethod
    def backward(ctx, grad):
        x, alpha = ctx.saved_tensors
        with fiamma.no_grad():
            return grad * _gamma_grad(x, alpha).to(grad.dtype)


def standard_gamma(alpha):
    """Gamma(alpha, 1) samples of alpha's shape; differentiable in alpha (implicit
    reparameterisation)."""
    if alpha.requires_grad and fiamma.is_grad_enabled():
        return _StandardGamma.apply(alpha)
    with fiamma.no_grad():
        tiny = fiamma.finfo(alpha.dtype).tiny
        flat = alpha.reshape(-1).double()
        return _gamma_flat(flat).reshape(tuple(alpha.shape)).to(alpha.dtype).clamp(min=tiny)


def _poisson_small(lam, op):
    """Inversion: count how many cumulative pmf terms a uniform exceeds (rates below 10).
    Each round works only on the values still counting, so the cost follows the mean count,
    not the largest."""
    n = lam.numel()
    u = fiamma.rand(n, dtype=fiamma.float64)
    k = fiamma.zeros(n, dtype=fiamma.float64)
    p = (-lam).exp()
    active = u > p
    idx = fiamma.arange(n)[active]
    la, ua, pa, ca = lam[active], u[active], p[active], p[active]
    i = 0
    while idx.numel():
        i += 1
        if i > 10000:
            raise RuntimeError(f"{op}: inversion did not terminate")
        k[idx] = float(i)
        pa = pa * la / i
        ca = ca + pa
        keep = (ua > ca) & (pa > 0)
        idx, la, ua, pa, ca = idx[keep], la[keep], ua[keep], pa[keep], ca[keep]
    return k


def _poisson_ptrs(lam, op):
    slam = lam.sqrt()
    loglam = lam.log()
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2)

    def draw(idx):
        li, ai, bi = lam[idx], a[idx], b[idx]
        u = fiamma.rand(idx.numel(), dtype=fiamma.float64) - 0.5
        v = fiamma.rand(idx.numel(), dtype=fiamma.float64)
        us = 0.5 - u.abs()
        k = ((2 * ai / us + bi) * u + li + 0.43).floor()
        quick = (us >= 0.07) & (v <= vr[idx])
        bad = (k < 0) | ((us < 0.013) & (v > us))
        kk = k.clamp(min=0)
        lhs = v.log() + inv_alpha[idx].log() - (ai / (us * us) + bi).log()
        rhs = -li + kk * loglam[idx] - fiamma.lgamma(kk + 1)
        return k, quick | (~bad & (lhs <= rhs))

    return _rejection_loop(lam.numel(), draw, op)


def poisson(rate):
    """Poisson samples with ``rate`` (a float tensor >= 0), same shape and dtype."""
    with fiamma.no_grad():
        lam = rate.detach().reshape(-1).double()
        out = fiamma.zeros(lam.numel(), dtype=fiamma.float64)
        small = lam < 10
        if bool(small.any()):
            out[small] = _poisson_small(lam[small], "Poisson.sample")
        if not bool(small.all()):
            out[~small] = _poisson_ptrs(lam[~small], "Poisson.sample")
        return out.reshape(tuple(rate.shape)).to(rate.dtype)


def _binomial_inversion(n, p, op):
    """Inversion by the pmf recurrence, on the values still counting (as _poisson_small)."""
    q = 1 - p
    s_ = p / q
    a = (n + 1) * s_
    r = q.pow(n)
    u = fiamma.rand(n.numel(), dtype=fiamma.float64)
    k = fiamma.zeros(n.numel(), dtype=fiamma.float64)
    active = (u > r) & (n > 0)
    idx = fiamma.arange(n.numel())[active]
    ua, ra, aa, sa, na = u[active], r[active], a[active], s_[active], n[active]
    i = 0
    while idx.numel():
        i += 1
        if i > 100000:
            raise RuntimeError(f"{op}: inversion did not terminate")
        ua = ua - ra
        k[idx] = float(i)
        ra = ra * (aa / i - sa)
        keep = (ua > ra) & (na > i)
        idx, ua, ra, aa, sa, na = idx[keep], ua[keep], ra[keep], aa[keep], sa[keep], na[keep]
    return k


def _binomial_btrs(n, p, op):
    q = 1 - p
    spq = (n * p * q).sqrt()
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    vr = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spq
    lpq = (p / q).log()
    m = ((n + 1) * p).floor()
    h = fiamma.lgamma(m + 1) + fiamma.lgamma(n - m + 1)

    def draw(idx):
        ni, ai, bi = n[idx], a[idx], b[idx]
        u = fiamma.rand(idx.numel(), dtype=fiamma.float64) - 0.5
        v = fiamma.rand(idx.numel(), dtype=fiamma.float64)
        us = 0.5 - u.abs()
        k = ((2 * ai / us + bi) * u + c[idx]).floor()
        inside = (k >= 0) & (k <= ni)
        quick = inside & (us >= 0.07) & (v <= vr[idx])
        kk = k.clamp(min=0)
        kk = fiamma.minimum(kk, ni)
        lv = (v * alpha[idx] / (ai / (us * us) + bi)).log()
        rhs = h[idx] - fiamma.lgamma(kk + 1) - fiamma.lgamma(ni - kk + 1) + (kk - m[idx]) * lpq[idx]
        return k, quick | (inside & (lv <= rhs))

    return _rejection_loop(n.numel(), draw, op)


def binomial(total_count, probs):
    """Binomial samples (float, of the broadcast shape) for float tensors ``total_count`` and
    ``probs``."""
    with fiamma.no_grad():
        total_count, probs = fiamma.broadcast_tensors(total_count.detach(), probs.detach())
        n = total_count.reshape(-1).double()
        p = probs.reshape(-1).double()
        flip = p > 0.5
        pp = fiamma.where(flip, 1 - p, p)
        out = fiamma.zeros(n.numel(), dtype=fiamma.float64)
        small = (n * pp < 10) & (pp > 0)
        big = ~small & (pp > 0)
        if bool(small.any()):
            out[small] = _binomial_inversion(n[small], pp[small], "Binomial.sample")
        if bool(big.any()):
            out[big] = _binomial_btrs(n[big], pp[big], "Binomial.sample")
        out = fiamma.where(flip, n - out, out)
        return out.reshape(tuple(probs.shape)).to(probs.dtype)


def log_binomial_coefficient(n, k):
    """log C(n, k) through lgamma."""
    return fiamma.lgamma(n + 1) - fiamma.lgamma(k + 1) - fiamma.lgamma(n - k + 1)


LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
