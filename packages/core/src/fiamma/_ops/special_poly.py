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
