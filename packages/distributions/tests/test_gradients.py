"""Gradients w.r.t. the parameters: gradcheck (float64 finite differences) of log_prob,
entropy, cdf and of rsample at a fixed seed for the reparameterised samplers; the implicit
reparameterisation of Gamma/Beta/Dirichlet against the derivative of the quantile function
and against d/dparam E[x]; the straight-through estimator."""

import math

import numpy as np
import pytest

import fiamma
import fiamma.distributions as D
import fiamma.special
from fiamma.autograd import gradcheck
from fiamma.distributions._samplers import _gamma_grad

F64 = fiamma.float64


def P(*v):
    return fiamma.tensor(list(v), dtype=F64, requires_grad=True)


def T(v):
    return fiamma.tensor(v, dtype=F64)


def _spd_from(a):
    """A differentiable 2 x 2 SPD matrix from 3 free numbers."""
    L = fiamma.stack([fiamma.stack([a[0].exp(), a[0] * 0]),
                      fiamma.stack([a[1], a[2].exp()])])
    return L @ L.mT


# name -> (factory over parameter tensors, parameters, a value in the support)
LOG_PROB = {
    "Normal": (lambda m, s: D.Normal(m, s), (P(0.3, -1.0), P(1.2, 0.7)), T([0.5, -0.2])),
    "LogNormal": (lambda m, s: D.LogNormal(m, s), (P(0.3, -1.0), P(1.2, 0.7)), T([0.5, 2.0])),
    "HalfNormal": (lambda s: D.HalfNormal(s), (P(1.2, 0.7),), T([0.5, 2.0])),
    "Cauchy": (lambda m, s: D.Cauchy(m, s), (P(0.3, -1.0), P(1.2, 0.7)), T([0.5, -0.2])),
    "HalfCauchy": (lambda s: D.HalfCauchy(s), (P(1.2, 0.7),), T([0.5, 2.0])),
    "Laplace": (lambda m, s: D.Laplace(m, s), (P(0.3, -1.0), P(1.2, 0.7)), T([0.5, -0.2])),
    "Gumbel": (lambda m, s: D.Gumbel(m, s), (P(0.3, -1.0), P(1.2, 0.7)), T([0.5, -0.2])),
    "StudentT": (lambda df, m, s: D.StudentT(df, m, s), (P(3.0, 5.5), P(0.3, -1.0),
                                                          P(1.2, 0.7)), T([0.5, -0.2])),
    "Exponential": (lambda r: D.Exponential(r), (P(1.2, 0.7),), T([0.5, 2.0])),
    "Gamma": (lambda a, b: D.Gamma(a, b), (P(1.5, 3.0), P(1.2, 0.7)), T([0.5, 2.0])),
    "Chi2": (lambda k: D.Chi2(k), (P(1.5, 3.0),), T([0.5, 2.0])),
    "InverseGamma": (lambda a, b: D.InverseGamma(a, b), (P(1.5, 3.0), P(1.2, 0.7)),
                     T([0.5, 2.0])),
    "Beta": (lambda a, b: D.Beta(a, b), (P(1.5, 3.0), P(1.2, 0.7)), T([0.3, 0.8])),
    "Kumaraswamy": (lambda a, b: D.Kumaraswamy(a, b), (P(1.5, 3.0), P(1.2, 0.7)),
                    T([0.3, 0.8])),
    "Weibull": (lambda s, k: D.Weibull(s, k), (P(1.5, 3.0), P(1.2, 0.7)), T([0.3, 1.8])),
    "Pareto": (lambda s, a: D.Pareto(s, a), (P(0.5, 1.0), P(1.2, 2.7)), T([0.8, 1.8])),
    "FisherSnedecor": (lambda a, b: D.FisherSnedecor(a, b), (P(3.0, 5.0), P(4.0, 7.0)),
                       T([0.8, 1.8])),
    "Dirichlet": (lambda a: D.Dirichlet(a), (P(1.5, 3.0, 0.7),), T([0.2, 0.5, 0.3])),
    "GeneralizedPareto": (lambda m, s, c: D.GeneralizedPareto(m, s, c),
                          (P(0.3, -1.0), P(1.2, 0.7), P(0.3, -0.2)), T([0.5, -0.2])),
    "VonMises": (lambda m, k: D.VonMises(m, k), (P(0.3, -1.0), P(1.2, 0.7)), T([0.5, -0.2])),
    "Bernoulli": (lambda p: D.Bernoulli(probs=p), (P(0.3, 0.6),), T([1.0, 0.0])),
    "Bernoulli_logits": (lambda lg: D.Bernoulli(logits=lg), (P(0.3, -0.6),), T([1.0, 0.0])),
    "Categorical": (lambda lg: D.Categorical(logits=lg), (P(0.3, -0.6, 1.0),), T(2).long()),
    "Categorical_probs": (lambda p: D.Categorical(probs=p), (P(0.3, 0.6, 1.0),),
                          T(2).long()),
    "Binomial": (lambda p: D.Binomial(10, probs=p), (P(0.3, 0.6),), T([3.0, 7.0])),
    "Geometric": (lambda p: D.Geometric(probs=p), (P(0.3, 0.6),), T([3.0, 7.0])),
    "Poisson": (lambda r: D.Poisson(r), (P(0.3, 6.0),), T([3.0, 7.0])),
    "NegativeBinomial": (lambda n, p: D.NegativeBinomial(n, p), (P(2.5, 4.0), P(0.3, 0.6)),
                         T([3.0, 7.0])),
    "Multinomial": (lambda lg: D.Multinomial(6, logits=lg), (P(0.3, -0.6, 1.0),),
                    T([1.0, 2.0, 3.0])),
    "ContinuousBernoulli": (lambda p: D.ContinuousBernoulli(probs=p), (P(0.3, 0.7),),
                            T([0.2, 0.9])),
    "RelaxedBernoulli": (lambda lg: D.RelaxedBernoulli(T(0.7), logits=lg), (P(0.3, -0.6),),
                         T([0.2, 0.9])),
    "RelaxedOneHotCategorical": (lambda lg: D.RelaxedOneHotCategorical(T(0.7), logits=lg),
                                 (P(0.3, -0.6, 1.0),), T([0.2, 0.5, 0.3])),
    "LogisticNormal": (lambda m, s: D.LogisticNormal(m, s), (P(0.3, -1.0), P(1.2, 0.7)),
                       T([0.2, 0.5, 0.3])),
    "MultivariateNormal": (lambda m, a: D.MultivariateNormal(m, covariance_matrix=_spd_from(a)),
                           (P(0.3, -1.0), P(0.1, 0.5, -0.2)), T([0.5, -0.2])),
    "MultivariateNormal_precision": (
        lambda m, a: D.MultivariateNormal(m, precision_matrix=_spd_from(a)),
        (P(0.3, -1.0), P(0.1, 0.5, -0.2)), T([0.5, -0.2])),
    "LowRankMultivariateNormal": (
        lambda m, w, d: D.LowRankMultivariateNormal(m, w.reshape(2, 1), d),
        (P(0.3, -1.0), P(0.4, -0.8), P(0.5, 1.5)), T([0.5, -0.2])),
    "Wishart": (lambda df, a: D.Wishart(df, covariance_matrix=_spd_from(a)),
                (P(4.5), P(0.1, 0.5, -0.2)), T([[2.0, 0.3], [0.3, 1.0]])),
    "LKJCholesky": (lambda c: D.LKJCholesky(2, c), (P(1.5),),
                    T([[1.0, 0.0], [0.6, 0.8]])),
    "MixtureSameFamily": (lambda lg, m: D.MixtureSameFamily(D.Categorical(logits=lg),
                                                           D.Normal(m, T([1.0, 0.5]))),
                          (P(0.3, -0.6), P(0.5, -1.0)), T([0.2, 0.9])),
}


@pytest.mark.parametrize("name", sorted(LOG_PROB))
def test_log_prob_gradcheck(name):
    make, params, value = LOG_PROB[name]
    assert gradcheck(lambda *ps: make(*ps).log_prob(value), params)


@pytest.mark.parametrize("name", sorted(LOG_PROB))
def test_entropy_gradcheck(name):
    make, params, _ = LOG_PROB[name]
    try:
        make(*params).entropy()
    except NotImplementedError:
        pytest.skip(f"{name} has no entropy")
    assert gradcheck(lambda *ps: make(*ps).entropy(), params)


@pytest.mark.parametrize("name", ["Normal", "Cauchy", "Laplace", "Exponential", "LogNormal",
                                  "HalfNormal", "Gumbel", "Weibull", "ContinuousBernoulli"])
def test_cdf_gradcheck(name):
    make, params, value = LOG_PROB[name]
    assert gradcheck(lambda *ps: make(*ps).cdf(value), params)


def test_gamma_cdf_gradient_in_rate():
    a = T([1.5, 3.0])
    assert gradcheck(lambda b: D.Gamma(a, b).cdf(T([0.5, 2.0])), (P(1.2, 0.7),))


def _seeded_rsample(make):
    def fn(*ps):
        fiamma.manual_seed(7)
        return make(*ps).rsample((3,))
    return fn


RSAMPLE = ["Normal", "LogNormal", "HalfNormal", "Cauchy", "HalfCauchy", "Laplace", "Gumbel",
           "Exponential", "GeneralizedPareto", "Kumaraswamy", "Weibull", "Pareto",
           "ContinuousBernoulli",
           "RelaxedBernoulli", "RelaxedOneHotCategorical", "LogisticNormal",
           "MultivariateNormal", "MultivariateNormal_precision", "LowRankMultivariateNormal"]


@pytest.mark.parametrize("name", RSAMPLE)
def test_rsample_gradcheck_at_fixed_noise(name):
    make, params, _ = LOG_PROB[name]
    assert make(*params).has_rsample
    assert gradcheck(_seeded_rsample(make), params)


def test_uniform_rsample_gradcheck():
    assert gradcheck(_seeded_rsample(lambda lo, hi: D.Uniform(lo, hi)),
                     (P(0.3, -1.0), P(1.2, 0.7)))


def _gamma_quantile(a, u):
    """The u-quantile of Gamma(a, 1) by bisection on gammainc (float64)."""
    lo, hi = 0.0, max(10.0, 10 * a)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        p = fiamma.special.gammainc(T(a), T(mid)).item()
        lo, hi = (mid, hi) if p < u else (lo, mid)
    return 0.5 * (lo + hi)


@pytest.mark.parametrize("a,u", [(0.3, 0.2), (0.3, 0.9), (1.0, 0.5), (2.5, 0.05), (2.5, 0.97),
                                 (20.0, 0.4), (150.0, 0.7)])
def test_implicit_gamma_gradient_is_the_quantile_derivative(a, u):
    # at fixed u, x(a) = F^-1(u; a); the implicit gradient must equal dx/da
    h = 1e-5 * max(1.0, a)
    fd = (_gamma_quantile(a + h, u) - _gamma_quantile(a - h, u)) / (2 * h)
    x = _gamma_quantile(a, u)
    got = _gamma_grad(T([x]), T([a])).item()
    assert got == pytest.approx(fd, rel=1e-5, abs=1e-9)


def test_rsample_gradients_match_derivatives_of_the_mean():
    fiamma.manual_seed(3)
    n = 20000
    a = P(0.6, 2.5)
    b = T([1.5, 0.8])
    D.Gamma(a, b).rsample((n,)).mean(0).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 1 / b.numpy(), rtol=0.03)   # dE/da = 1/rate
    c1, c0 = P(0.7, 3.0), P(2.0, 1.2)
    D.Beta(c1, c0).rsample((n,)).mean(0).sum().backward()
    s = (c1 + c0).detach().numpy()
    np.testing.assert_allclose(c1.grad.numpy(), c0.detach().numpy() / s ** 2, rtol=0.05)
    np.testing.assert_allclose(c0.grad.numpy(), -c1.detach().numpy() / s ** 2, rtol=0.05)
    alpha = P(0.5, 1.0, 2.0)
    x = D.Dirichlet(alpha).rsample((n,)).mean(0)
    x[0].backward()
    s = 3.5
    ref = np.array([1 / s - 0.5 / s ** 2, -0.5 / s ** 2, -0.5 / s ** 2])
    np.testing.assert_allclose(alpha.grad.numpy(), ref, rtol=0.05, atol=2e-3)
    k = P(3.0)
    D.Chi2(k).rsample((n,)).mean().backward()       # E = k
    assert k.grad.item() == pytest.approx(1.0, rel=0.03)
    df = P(6.0)
    x = D.StudentT(df, T(0.0), T(1.0)).rsample((n,))
    (x * x).mean().backward()                        # E[x^2] = df / (df - 2)
    assert df.grad.item() == pytest.approx(-2 / 16, rel=0.15)


def test_wishart_rsample_gradient_of_the_mean():
    fiamma.manual_seed(4)
    df = P(5.0)
    w = D.Wishart(df, covariance_matrix=T([[2.0, 0.3], [0.3, 1.0]]))
    w.rsample((20000,)).mean(0)[0, 0, 0].backward()    # E[X00] = df V00
    assert df.grad.item() == pytest.approx(2.0, rel=0.05)


def test_straight_through_passes_gradients_to_probs():
    p = P(0.2, 0.3, 0.5)
    d = D.OneHotCategoricalStraightThrough(probs=p)
    fiamma.manual_seed(0)
    s = d.rsample()
    assert sorted(s.detach().tolist()) == [0.0, 0.0, 1.0]
    (s * T([1.0, 2.0, 3.0])).sum().backward()
    # probs are normalised by their sum (1): d/dp of p_i / sum(p) against weights
    w = np.array([1.0, 2.0, 3.0])
    pv = np.array([0.2, 0.3, 0.5])
    np.testing.assert_allclose(p.grad.numpy(), w - (w * pv).sum(), rtol=1e-10)


def test_kl_gradients_flow():
    m, s = P(0.3, -1.0), P(1.2, 0.7)
    assert gradcheck(lambda m, s: D.kl_divergence(D.Normal(m, s), D.Normal(T(0.0), T(1.0))),
                     (m, s))
    a = P(1.5, 3.0)
    assert gradcheck(lambda a: D.kl_divergence(D.Dirichlet(a), D.Dirichlet(T([1.0, 1.0]))),
                     (a,))
    # the exponential-family fallback (Bregman divergence by autograd) differentiates too
    r = P(2.0, 3.0)
    assert gradcheck(lambda r: D.kl_divergence(D.Poisson(r), D.Poisson(T([1.0, 4.0]))), (r,))


def test_sample_does_not_track_gradients():
    m = P(0.0, 1.0)
    assert not D.Normal(m, 1.0).sample().requires_grad
    assert D.Normal(m, 1.0).rsample().requires_grad
    assert not math.isnan(D.Gamma(P(0.5), 1.0).rsample().sum().item())


@pytest.mark.parametrize("x", [0.0, 0.2, 1.0])
def test_binary_log_prob_gradient_at_even_odds(x):
    """d/dlogit log p(x) = x - sigmoid(logit), also at logit 0 (probs 1/2), where the
    max(l, 0) + log1p(e^-|l|) form gave x - 1 (its two kinks do not cancel)."""
    v = float(x == 1.0)  # a Bernoulli value
    for logit in (0.0, 1e-12, -0.7):
        lt = fiamma.tensor(logit, dtype=fiamma.float64, requires_grad=True)
        (g,) = fiamma.autograd.grad(D.Bernoulli(logits=lt).log_prob(
            fiamma.tensor(v, dtype=fiamma.float64)), lt)
        assert g.item() == pytest.approx(v - 1.0 / (1.0 + math.exp(-logit)), abs=1e-12)
        p = fiamma.tensor(0.5, dtype=fiamma.float64, requires_grad=True)
        (g,) = fiamma.autograd.grad(D.ContinuousBernoulli(probs=p).log_prob(
            fiamma.tensor(x, dtype=fiamma.float64)), p)
        # at p = 1/2 the normaliser is flat: d/dp (x log p + (1 - x) log(1 - p)) = 4x - 2
        assert g.item() == pytest.approx(4 * x - 2, abs=1e-12)


def test_pareto_infinite_moments_have_infinite_not_nan_gradients():
    """mean (alpha <= 1) and variance (alpha <= 2) are inf; their gradient w.r.t. scale is inf
    as PyTorch's (a masked-out branch gave 0 * inf = NaN)."""
    s = fiamma.tensor([1.0, 2.0, 3.0], dtype=fiamma.float64, requires_grad=True)
    a = fiamma.tensor([0.5, 1.5, 3.0], dtype=fiamma.float64, requires_grad=True)
    d = D.Pareto(s, a)
    assert d.mean.tolist() == [math.inf, 6.0, 4.5]
    assert d.variance.tolist() == [math.inf, math.inf, 6.75]
    gs, ga = fiamma.autograd.grad(d.mean.sum() + d.variance.sum(), (s, a))
    assert gs.tolist() == [math.inf, math.inf, 6.0]
    assert ga.tolist() == [0.0, -8.0, -12.0]
