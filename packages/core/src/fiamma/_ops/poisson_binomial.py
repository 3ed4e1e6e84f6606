"""torch.poisson and torch.binomial drawn from fiamma's counter-based (Philox) generators.

Uniforms come from the generator's stream (``_random._fill`` of float64 tensors), so a seed
gives the same samples; the samplers run vectorised in NumPy: inversion by sequential search
for small means (rate < 10, or count * min(p, 1 - p) < 10) and Hormann's transformed rejection
(PTRS / BTRS) above, drawing further uniforms only for the elements still rejected.

Autograd: as PyTorch, ``poisson``'s gradient w.r.t. the rates is zero; ``binomial``'s result
requires grad when an argument does, and its backward raises (it is recorded as op
``binomial``, declared here, whose formula in fiamma-autograd raises).

>>> import fiamma
>>> fiamma.poisson(fiamma.zeros(3)).tolist()
[0.0, 0.0, 0.0]
>>> fiamma.binomial(fiamma.tensor([4.0, 0.0]), fiamma.tensor([1.0, 0.5])).tolist()
[4.0, 0.0]
"""

import importlib

import numpy as np

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import declare_op, ops
from fiamma._tensor import Tensor

__all__ = ["poisson", "binomial"]

declare_op("binomial")   # recorded by binomial (its formula, in fiamma-autograd, raises)


def _F():
    return importlib.import_module("fiamma")


def _uniforms(n, generator, op):
    R = importlib.import_module("fiamma._random")
    t = R.new_empty((n,), D.float64)
    R._fill(t, R._UNIFORM, 0.0, 1.0, generator, op)
    return t.numpy().copy()


def _lgamma(a):
    F = _F()
    return F.lgamma(F.tensor(a, dtype=D.float64)).numpy()


def _poisson_np(lam, generator, op):
    out = np.zeros(lam.shape, dtype=np.float64)
    small = (lam > 0) & (lam < 10)
    if small.any():
        lm = lam[small]
        u = _uniforms(lm.size, generator, op)
        p = np.exp(-lm)
        cdf = p.copy()
        k = np.zeros_like(lm)
        active = u > cdf
        j = 0
        while active.any():
            j += 1
            p = p * lm / j
            cdf = cdf + p
            k = np.where(active, j, k)
            active = active & (u > cdf) & (p > 0)
        out[small] = k
    big = np.isfinite(lam) & (lam >= 10)
    if big.any():
        out[big] = _ptrs(lam[big], generator, op)
    out[np.isinf(lam)] = np.inf
    return out


def _ptrs(lam, generator, op):
    slam = np.sqrt(lam)
    loglam = np.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    invalpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2)
    res = np.full(lam.shape, np.nan)
    todo = np.arange(lam.size)
    while todo.size:
        uv = _uniforms(2 * todo.size, generator, op).reshape(2, -1)
        u, v = uv[0] - 0.5, uv[1]
        aa, bb, lm = a[todo], b[todo], lam[todo]
        us = 0.5 - np.abs(u)
        with np.errstate(all="ignore"):
            k = np.floor((2 * aa / us + bb) * u + lm + 0.43)
            fast = (us >= 0.07) & (v <= vr[todo])
            reject = (k < 0) | ((us < 0.013) & (v > us))
            lhs = np.log(v) + np.log(invalpha[todo]) - np.log(aa / (us * us) + bb)
            rhs = -lm + k * loglam[todo] - _lgamma(np.maximum(k, 0) + 1)
        ok = fast | (~reject & (lhs <= rhs))
        res[todo[ok]] = k[ok]
        todo = todo[~ok]
    return res


def _binomial_np(n, p, generator, op):
    n_raw = np.maximum(n, 0)
    n = np.floor(n_raw)
    p = np.clip(p, 0, 1)
    out = np.where(np.isnan(p) | np.isnan(n), np.nan, 0.0)
    flip = p > 0.5
    q = np.where(flip, 1 - p, p)
    valid = ~np.isnan(out) & (n > 0) & (q > 0)
    small = valid & (n * q < 10)
    big = valid & (n * q >= 10)
    k = np.zeros(n.shape)
    if small.any():
        nn, qq = n[small], q[small]
        u = _uniforms(nn.size, generator, op)
        pk = np.exp(nn * np.log1p(-qq))          # P(X = 0)
        cdf = pk.copy()
        kk = np.zeros_like(nn)
        r = qq / (1 - qq)
        active = u > cdf
        j = 0
        while active.any():
            j += 1
            pk = pk * r * (nn - j + 1) / j
            cdf = cdf + pk
            kk = np.where(active, j, kk)
            active = active & (u > cdf) & (j < nn) & (pk > 0)
        k[small] = kk
    if big.any():
        k[big] = _btrs(n[big], q[big], generator, op)
    k = np.where(flip, n_raw - k, k)              # (PyTorch: count - k, count unfloored)
    return np.where(np.isnan(out), np.nan, np.where(valid | flip, k, 0.0))


def _btrs(n, p, generator, op):
    q = 1 - p
    spq = np.sqrt(n * p * q)
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    vr = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spq
    lpq = np.log(p / q)
    m = np.floor((n + 1) * p)
    h = _lgamma(m + 1) + _lgamma(n - m + 1)
    res = np.full(n.shape, np.nan)
    todo = np.arange(n.size)
    while todo.size:
        uv = _uniforms(2 * todo.size, generator, op).reshape(2, -1)
        u, v = uv[0] - 0.5, uv[1]
        aa, bb, nn = a[todo], b[todo], n[todo]
        us = 0.5 - np.abs(u)
        with np.errstate(all="ignore"):
            k = np.floor((2 * aa / us + bb) * u + c[todo])
            inside = (k >= 0) & (k <= nn)
            fast = inside & (us >= 0.07) & (v <= vr[todo])
            kc = np.clip(k, 0, nn)
            lv = np.log(v * alpha[todo] / (aa / (us * us) + bb))
            rhs = h[todo] - _lgamma(kc + 1) - _lgamma(nn - kc + 1) + (kc - m[todo]) * lpq[todo]
        ok = fast | (inside & (lv <= rhs))
        res[todo[ok]] = k[ok]
        todo = todo[~ok]
    return res


def _check_generator(generator, op):
    if generator is not None:
        R = importlib.import_module("fiamma._random")
        if not isinstance(generator, R.Generator):
            raise TypeError(f"{op}(): argument 'generator' must be a fiamma.Generator, not "
                            f"{type(generator).__name__}")


def _host(t):
    t = t.detach()
    return (t.cpu() if t.device.type != "cpu" else t).numpy().astype(np.float64)


def poisson(input, generator=None):
    """Samples of Poisson(rate) for each rate in ``input`` (floating, rates >= 0), in the
    dtype of ``input``. Zero gradient w.r.t. the rates, as PyTorch.

    >>> import fiamma
    >>> g = fiamma.Generator().manual_seed(0)
    >>> fiamma.poisson(fiamma.full((2,), 3.0), generator=g).dtype
    fiamma.float32
    """
    op = "poisson"
    _check_generator(generator, op)
    if not isinstance(input, Tensor):
        raise TypeError(f"poisson(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    if input._dtype._kind != 2:
        raise NotImplementedError(f'"poisson_cpu" not implemented for '
                                  f"'{_label(input._dtype)}'")
    lam = _host(input)
    if (lam < 0).any() or np.isnan(lam).any():
        raise RuntimeError("poisson: invalid Poisson rate, expected rate to be non-negative "
                           f"(got {lam[(lam < 0) | np.isnan(lam)].flat[0]})")
    F = _F()
    res = F.tensor(_poisson_np(lam, generator, op), dtype=input._dtype)
    if input.device.type != "cpu":
        res = res.to(input.device)
    if input.requires_grad:
        # zero gradient w.r.t. the rates (PyTorch's PoissonBackward)
        res = F.where(F.zeros(res.shape, dtype=D.bool, device=res.device), input, res)
    return res


def _label(dt):
    return {D.int64: "Long", D.int32: "Int", D.int16: "Short", D.int8: "Char",
            D.uint8: "Byte", D.bool: "Bool"}.get(dt, str(dt))


def binomial(count, prob, generator=None):
    """Samples of Binomial(count, prob), ``count`` and ``prob`` floating tensors of one dtype
    broadcast together (as PyTorch: negative counts give 0, prob is clamped to [0, 1], NaN
    prob gives NaN; a fractional count is floored, except where prob > 1/2, where the result
    is count - Binomial(floor(count), 1 - prob)). No gradient.

    >>> import fiamma
    >>> fiamma.binomial(fiamma.tensor([10.0]), fiamma.tensor([0.0])).tolist()
    [0.0]
    """
    op = "binomial"
    _check_generator(generator, op)
    for t, name in ((count, "count"), (prob, "prob")):
        if not isinstance(t, Tensor):
            raise TypeError(f"binomial(): argument '{name}' must be Tensor, not "
                            f"{type(t).__name__}")
        if t._dtype._kind != 2:
            raise ValueError(f"binomial only supports floating-point dtypes for {name}, got: "
                             f"{_label(t._dtype)}")
    if count._dtype is not prob._dtype:
        raise RuntimeError(f"binomial: Found dtype {prob._dtype} but expected {count._dtype}")
    n, p = np.broadcast_arrays(_host(count), _host(prob))
    F = _F()
    res = F.tensor(_binomial_np(np.array(n), np.array(p), generator, op), dtype=count._dtype)
    if count.device.type != "cpu":
        res = res.to(count.device)
    if count.requires_grad or prob.requires_grad:
        G.record(ops.binomial, res, (count, prob), {})
    return res
