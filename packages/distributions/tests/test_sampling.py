"""Samplers against the distributions they claim, on large seeded float64 samples: a
Kolmogorov-Smirnov bound against the CDF obtained by quadrature of exp(log_prob) (so the
sampler and the density are checked against each other, independently of any cdf method),
frequencies against the pmf for the discrete ones, and sample moments within statistical
bounds (5 standard errors) for the multivariate ones."""

import math

import numpy as np
import pytest
from test_densities import CONTINUOUS, _density, _grid

import fiamma
import fiamma.distributions as D

F64 = fiamma.float64
N = 8000
KS_BOUND = 1.95 / math.sqrt(N)   # the 0.1% quantile of the KS statistic


def T(v):
    return fiamma.tensor(v, dtype=F64)


def _ks(samples, cdf_x, cdf_p):
    s = np.sort(samples)
    model = np.interp(s, cdf_x, cdf_p)
    n = len(s)
    upper = np.arange(1, n + 1) / n - model
    lower = model - np.arange(0, n) / n
    return max(upper.max(), lower.max())


def _quadrature_cdf(d, support):
    x, w = _grid(support)
    order = np.argsort(x)
    x, pw = x[order], (w * _density(d, x))[order]
    running = np.cumsum(pw) - 0.5 * pw
    return x, running / running[-1]


EXTRA = {
    "Gamma_large": (lambda: D.Gamma(T(100.0), T(1.0)), ("positive",)),
    "VonMises_tiny": (lambda: D.VonMises(T(-2.5), T(1e-6)), ("interval", -math.pi, math.pi)),
    "VonMises_large": (lambda: D.VonMises(T(3.0), T(50.0)), ("interval", -math.pi, math.pi)),
    "Beta_small": (lambda: D.Beta(T(1.5), T(1.2)), ("unit",)),
}
UNIVARIATE = {k: (v[0], v[1]) for k, v in CONTINUOUS.items()}
UNIVARIATE.update(EXTRA)


@pytest.mark.parametrize("name", sorted(UNIVARIATE))
def test_univariate_samples_follow_the_density(name):
    make, support = UNIVARIATE[name]
    d = make()
    fiamma.manual_seed(11)
    x = d.sample((N,)).numpy()
    assert np.all(np.isfinite(x))
    cdf_x, cdf_p = _quadrature_cdf(d, support)
    assert _ks(x, cdf_x, cdf_p) < KS_BOUND
    if d.has_rsample:
        fiamma.manual_seed(12)
        assert _ks(d.rsample((N,)).detach().numpy(), cdf_x, cdf_p) < KS_BOUND


def test_gamma_below_one_against_its_cdf():
    # alpha < 1 (the boosted path): the density is singular at 0, so use gammainc directly
    for alpha in (0.1, 0.6):
        d = D.Gamma(T(alpha), T(2.0))
        fiamma.manual_seed(13)
        s = np.sort(d.sample((N,)).numpy())
        assert s.min() > 0
        model = d.cdf(T(s)).numpy()
        n = len(s)
        ks = max((np.arange(1, n + 1) / n - model).max(), (model - np.arange(n) / n).max())
        assert ks < KS_BOUND


DISCRETE = {
    "Bernoulli": lambda: D.Bernoulli(T(0.3)),
    "Binomial_inversion": lambda: D.Binomial(T(12.0), T(0.3)),
    "Binomial_btrs": lambda: D.Binomial(T(1000.0), T(0.3)),
    "Binomial_flipped": lambda: D.Binomial(T(200.0), T(0.85)),
    "Geometric": lambda: D.Geometric(T(0.3)),
    "Poisson_small": lambda: D.Poisson(T(0.5)),
    "Poisson_mid": lambda: D.Poisson(T(7.5)),
    "Poisson_ptrs": lambda: D.Poisson(T(60.0)),
    "Poisson_huge": lambda: D.Poisson(T(5000.0)),
    "NegativeBinomial": lambda: D.NegativeBinomial(T(3.0), T(0.4)),
    "Categorical": lambda: D.Categorical(probs=T([0.1, 0.2, 0.3, 0.4])),
}


@pytest.mark.parametrize("name", sorted(DISCRETE))
def test_discrete_frequencies_match_the_pmf(name):
    d = DISCRETE[name]()
    fiamma.manual_seed(21)
    x = d.sample((N,)).numpy().astype(np.int64)
    assert x.min() >= 0
    values = np.arange(x.max() + 1)
    k = T(values.astype(np.float64))
    if name == "Categorical":
        k = k.long()
    p = np.exp(d.log_prob(k).numpy())
    freq = np.bincount(x, minlength=len(values)) / N
    se = np.sqrt(p * (1 - p) / N)
    assert np.all(np.abs(freq - p) <= 5 * se + 1.0 / N)
    # and the cdf of the pmf against the empirical one (discrete KS)
    assert np.max(np.abs(np.cumsum(freq) - np.cumsum(p))) < KS_BOUND


def test_binomial_and_poisson_edges():
    fiamma.manual_seed(0)
    assert D.Binomial(T(0.0), T(0.3)).sample((5,)).tolist() == [0.0] * 5
    assert D.Binomial(T(7.0), T(0.0)).sample((3,)).tolist() == [0.0] * 3
    assert D.Binomial(T(7.0), T(1.0)).sample((3,)).tolist() == [7.0] * 3
    assert D.Poisson(T(0.0)).sample((4,)).tolist() == [0.0] * 4
    mixed = D.Binomial(T([5.0, 500.0]), T([0.5, 0.02])).sample((2000,))
    assert float(mixed[:, 0].max()) <= 5 and float(mixed[:, 1].max()) <= 500


def _moments_ok(samples, mean, cov_or_var):
    n = samples.shape[0]
    m = samples.mean(0)
    var = samples.var(0)
    assert np.all(np.abs(m - mean) <= 5 * np.sqrt(var / n) + 1e-12)
    if cov_or_var is not None:
        flat = samples.reshape(n, -1)
        emp = np.cov(flat, rowvar=False)
        ref = np.asarray(cov_or_var).reshape(emp.shape)
        scale = np.sqrt(np.outer(np.diag(emp), np.diag(emp)))
        assert np.all(np.abs(emp - ref) <= 0.08 * scale + 1e-12)


def _cov(d):
    return d.covariance_matrix.numpy()


@pytest.mark.parametrize("make,cov", [
    (lambda: D.MultivariateNormal(T([1.0, -1.0, 0.5]), covariance_matrix=T(
        [[2.0, 0.5, 0.3], [0.5, 1.0, -0.2], [0.3, -0.2, 0.7]])), _cov),
    (lambda: D.MultivariateNormal(T([1.0, -1.0]), precision_matrix=T([[2.0, 0.5], [0.5, 1.0]])),
     _cov),
    (lambda: D.LowRankMultivariateNormal(T([0.0, 1.0, 2.0]), T([[1.0, 0.2], [0.5, -1.0],
                                                                 [0.3, 0.3]]),
                                         T([0.5, 1.0, 0.2])), _cov),
    (lambda: D.Dirichlet(T([0.5, 2.0, 3.5])), None),
    (lambda: D.Multinomial(7, probs=T([0.2, 0.3, 0.5])), None),
    (lambda: D.OneHotCategorical(probs=T([0.2, 0.3, 0.5])), None),
    (lambda: D.RelaxedOneHotCategorical(T(5.0), probs=T([0.2, 0.3, 0.5])), None),
    (lambda: D.Independent(D.Laplace(T([0.0, 3.0]), T([1.0, 0.5])), 1), None),
])
def test_multivariate_sample_moments(make, cov):
    d = make()
    fiamma.manual_seed(31)
    x = d.sample((20000,)).numpy()
    try:
        mean = d.mean.numpy()
    except NotImplementedError:
        mean = None
    if mean is not None:
        _moments_ok(x, mean, cov(d) if cov else None)
        try:
            np.testing.assert_allclose(x.var(0), d.variance.numpy(), rtol=0.08)
        except NotImplementedError:
            pass
    if isinstance(d, D.RelaxedOneHotCategorical):
        np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-12)


def test_wishart_and_lkj_samples():
    V = T([[2.0, 0.3], [0.3, 1.0]])
    w = D.Wishart(T(5.0), covariance_matrix=V)
    fiamma.manual_seed(41)
    x = w.sample((20000,)).numpy()
    mean, var = w.mean.numpy(), w.variance.numpy()
    assert np.all(np.abs(x.mean(0) - mean) <= 5 * np.sqrt(var / 20000))
    np.testing.assert_allclose(x.var(0), var, rtol=0.08)
    assert np.all(np.linalg.eigvalsh(x) > 0)
    for eta in (0.5, 2.0):
        L = D.LKJCholesky(2, T(eta)).sample((20000,)).numpy()
        r = (L @ np.swapaxes(L, -1, -2))[:, 1, 0]
        # for dim 2 the correlation r has (r + 1) / 2 ~ Beta(eta, eta): var 1 / (2 eta + 1)
        assert abs(r.mean()) < 5 * math.sqrt(1 / (2 * eta + 1) / 20000)
        assert r.var() == pytest.approx(1 / (2 * eta + 1), rel=0.05)
    L3 = D.LKJCholesky(4, T(1.5)).sample((200,))
    C = L3 @ L3.mT
    assert fiamma.allclose(C.diagonal(dim1=-2, dim2=-1), fiamma.ones(200, 4, dtype=F64))


def test_mixture_same_family_sample_and_mean_variance():
    mix = D.MixtureSameFamily(D.Categorical(probs=T([0.3, 0.7])),
                              D.Normal(T([-1.0, 2.0]), T([0.5, 1.5])))
    fiamma.manual_seed(51)
    x = mix.sample((20000,)).numpy()
    assert abs(x.mean() - mix.mean.item()) < 5 * math.sqrt(mix.variance.item() / 20000)
    assert x.var() == pytest.approx(mix.variance.item(), rel=0.05)


def test_sampling_follows_the_global_seed():
    d = D.Gamma(T([0.3, 4.0]), T(1.0))
    fiamma.manual_seed(5)
    a = d.sample((10,))
    fiamma.manual_seed(5)
    assert fiamma.equal(a, d.sample((10,)))
