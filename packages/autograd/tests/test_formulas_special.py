"""First and second derivatives of the special functions against finite differences (float64).
Skipped where core does not have them yet."""

import math

import numpy as np
import pytest
from _formula_check import check, noncontig, rand

import fiamma

pytestmark = pytest.mark.skipif(not hasattr(fiamma, "lgamma"),
                                reason="core's special functions are not available")


def _S():
    import fiamma.special as S

    return S


# name -> (function, low, high)
UNARY = {
    "lgamma": (lambda t: fiamma.lgamma(t), 0.5, 3.0),
    "lgamma_neg": (lambda t: fiamma.lgamma(t), -0.9, -0.1),
    "digamma": (lambda t: fiamma.digamma(t), 0.5, 3.0),
    "polygamma1": (lambda t: fiamma.polygamma(1, t), 0.5, 3.0),
    "polygamma2": (lambda t: fiamma.polygamma(2, t), 0.5, 3.0),
    "erfinv": (lambda t: fiamma.erfinv(t), -0.8, 0.8),
    "sinc": (lambda t: fiamma.sinc(t), -2.0, 2.0),
    "i0": (lambda t: fiamma.i0(t), -2.0, 2.0),
    "logit": (lambda t: fiamma.logit(t), 0.1, 0.9),
    "logit_eps": (lambda t: fiamma.logit(t, 0.2), 0.25, 0.75),
    "mvlgamma": (lambda t: fiamma.mvlgamma(t, 3), 1.5, 3.0),
    "i0e": (lambda t: _S().i0e(t), -2.0, 2.0),
    "i1": (lambda t: _S().i1(t), -2.0, 2.0),
    "i1e": (lambda t: _S().i1e(t), -2.0, 2.0),
    "ndtr": (lambda t: _S().ndtr(t), -2.0, 2.0),
    "ndtri": (lambda t: _S().ndtri(t), 0.1, 0.9),
    "log_ndtr": (lambda t: _S().log_ndtr(t), -3.0, 3.0),
    "erfcx": (lambda t: _S().erfcx(t), -1.0, 2.0),
    "entr": (lambda t: _S().entr(t), 0.2, 2.0),
    "expit": (lambda t: _S().expit(t), -2.0, 2.0),
    "psi": (lambda t: _S().psi(t), 0.5, 3.0),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    fn, lo, hi = UNARY[name]
    rng = np.random.default_rng(0)
    check(fn, rand(2, 3, rng=rng, low=lo, high=hi), atol=1e-5, rtol=1e-3)
    check(fn, noncontig(3, 2, rng=rng, low=lo, high=hi), atol=1e-5, rtol=1e-3)


def test_special_points():
    x = fiamma.tensor([0.0, 1.0], dtype=fiamma.float64, requires_grad=True)
    (g,) = fiamma.autograd.grad(fiamma.sinc(x).sum(), x)
    assert g[0].item() == 0.0 and abs(g[1].item() + 1.0) < 1e-12  # d sinc at 1 = -1
    (g,) = fiamma.autograd.grad(_S().i1(x).sum(), x)
    assert g[0].item() == 0.5
    a = fiamma.tensor([0.0, 2.0], dtype=fiamma.float64, requires_grad=True)
    b = fiamma.tensor([0.0, 3.0], dtype=fiamma.float64, requires_grad=True)
    ga, _ = fiamma.autograd.grad(fiamma.xlogy(a, b).sum(), (a, b))
    assert ga[0].item() == 0.0  # no -inf from log(0) where x is 0
    # but log(y) where x is 0 and y > 0 (PyTorch: masked only where x == 0 and y <= 0)
    a = fiamma.tensor([0.0, 0.0, 0.0], dtype=fiamma.float64, requires_grad=True)
    b = fiamma.tensor([0.5, -1.0, -0.5], dtype=fiamma.float64)
    (ga,) = fiamma.autograd.grad(fiamma.xlogy(a, b).sum(), a)
    assert ga.tolist() == [math.log(0.5), 0.0, 0.0]
    (ga,) = fiamma.autograd.grad(_S().xlog1py(a, b).sum(), a)
    assert ga.tolist()[0] == pytest.approx(math.log1p(0.5)) and ga.tolist()[1] == 0.0
    assert ga.tolist()[2] == pytest.approx(math.log(0.5))
    p = fiamma.tensor([0.1, 0.5], dtype=fiamma.float64, requires_grad=True)
    (g,) = fiamma.autograd.grad(fiamma.logit(p, 0.2).sum(), p)
    assert g[0].item() == 0.0 and abs(g[1].item() - 4.0) < 1e-12


BINARY = {
    "xlogy": (lambda a, b: fiamma.xlogy(a, b), (-1.0, 1.0), (0.5, 2.0)),
    "xlog1py": (lambda a, b: _S().xlog1py(a, b), (-1.0, 1.0), (0.5, 2.0)),
    "logaddexp": (lambda a, b: fiamma.logaddexp(a, b), (-2.0, 2.0), (-2.0, 2.0)),
    "logaddexp2": (lambda a, b: fiamma.logaddexp2(a, b), (-2.0, 2.0), (-2.0, 2.0)),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name):
    fn, (alo, ahi), (blo, bhi) = BINARY[name]
    rng = np.random.default_rng(1)
    check(fn, rand(2, 3, rng=rng, low=alo, high=ahi), rand(3, rng=rng, low=blo, high=bhi))
    check(fn, noncontig(3, 2, rng=rng, low=alo, high=ahi), rand(3, 2, rng=rng, low=blo,
                                                                  high=bhi))


def test_zeta_second_argument():
    rng = np.random.default_rng(2)
    s = fiamma.tensor([2.5, 3.0], dtype=fiamma.float64)
    check(lambda q: _S().zeta(s, q), rand(2, rng=rng, low=1.0, high=2.0))


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_gammainc_second_argument(name):
    rng = np.random.default_rng(3)
    a = fiamma.tensor([0.7, 2.5], dtype=fiamma.float64)
    check(lambda x: getattr(_S(), name)(a, x), rand(2, rng=rng, low=0.5, high=3.0))


def test_gammainc_first_argument_has_no_gradient():
    a = fiamma.tensor([1.5], dtype=fiamma.float64, requires_grad=True)
    y = _S().gammainc(a, fiamma.tensor([1.0], dtype=fiamma.float64))
    with pytest.raises(RuntimeError, match="gammainc: the derivative w.r.t. the first"):
        y.sum().backward()


@pytest.mark.parity
def test_xlogy_xlog1py_gradients_match_torch():
    torch = pytest.importorskip("torch")
    x = [0.0, 0.0, 0.0, 0.0, 1.5, -2.0]
    y = [0.5, 0.0, -1.0, -0.5, 2.0, 0.3]
    for name in ("xlogy", "xlog1py"):
        got = []
        for lib in (fiamma, torch):
            a = lib.tensor(x, dtype=lib.float64, requires_grad=True)
            b = lib.tensor(y, dtype=lib.float64, requires_grad=True)
            ga, gb = lib.autograd.grad(getattr(lib.special, name)(a, b).sum(), (a, b))
            got.append((ga.detach().numpy(), gb.detach().numpy()))
        for u, v in zip(*got):
            np.testing.assert_allclose(u, v, equal_nan=True)


def test_sinc_and_log_ndtr_gradients_at_extremes():
    """sinc' near 0 by its series (was 0/0 = NaN once pi x^2 underflowed; cancelling below
    0.01); log_ndtr' in the lower tail through erfcx (the x^2/2 terms cancelled: ~1e-7 relative
    error at x = -1e5). References: -pi^2 x / 3 near 0; Mills' ratio from mpmath."""
    x = fiamma.tensor([1e-300, -1e-300, 0.0, 1e-8, 0.005], dtype=fiamma.float64,
                      requires_grad=True)
    (g,) = fiamma.autograd.grad(fiamma.sinc(x).sum(), x)
    want = [-math.pi ** 2 / 3 * v for v in (1e-300, -1e-300, 0.0, 1e-8)]
    assert g.tolist()[:4] == pytest.approx(want, rel=1e-14)
    assert g.tolist()[4] == pytest.approx(-0.016448934800846204, rel=1e-14)
    x = fiamma.tensor([-1e5, -40.0, -5.0, 0.0], dtype=fiamma.float64, requires_grad=True)
    (g,) = fiamma.autograd.grad(_S().log_ndtr(x).sum(), x)
    want = [100000.00001, 40.02496884720726, 5.186503967125842, 0.7978845608028654]
    assert g.tolist() == pytest.approx(want, rel=1e-14)
    check(lambda t: fiamma.sinc(t), rand(5, seed=1, low=-0.02, high=0.02))
    check(lambda t: _S().log_ndtr(t), rand(5, seed=2, low=-8.0, high=2.0))
