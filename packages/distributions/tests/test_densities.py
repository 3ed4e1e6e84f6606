"""log_prob, cdf/icdf, entropy and moments against float64 references: numerical quadrature of
exp(log_prob) for every univariate continuous distribution (it integrates to 1, its moments and
entropy match the closed forms, its running integral matches cdf), exact sums for the discrete
ones, and explicit formulas (math.lgamma, NumPy linear algebra) for the multivariate ones."""

import math

import numpy as np
import pytest

import fiamma
import fiamma.distributions as D

F64 = fiamma.float64
NODES, WEIGHTS = np.polynomial.legendre.leggauss(1000)


def T(v):
    return fiamma.tensor(v, dtype=F64)


def _grid(support):
    """Quadrature nodes x and weights w for an integral over ``support``."""
    t, w = NODES, WEIGHTS
    kind = support[0]
    if kind == "real":
        return t / (1 - t * t), w * (1 + t * t) / (1 - t * t) ** 2
    u, wu = (t + 1) / 2, w / 2                                   # (0, 1)
    if kind == "unit":
        return u, wu
    if kind == "interval":
        a, b = support[1], support[2]
        return a + (b - a) * u, wu * (b - a)
    lo = support[1] if kind == "greater" else 0.0               # (lo, inf)
    return lo + u / (1 - u), wu / (1 - u) ** 2


def _density(d, x):
    lp = d.log_prob(T(x)).numpy()
    return np.exp(lp)


# name -> (factory, support, has finite mean, has finite variance)
CONTINUOUS = {
    "Normal": (lambda: D.Normal(T(0.5), T(1.5)), ("real",), True, True),
    "Cauchy": (lambda: D.Cauchy(T(0.5), T(1.5)), ("real",), False, False),
    "Laplace": (lambda: D.Laplace(T(0.5), T(1.5)), ("real",), True, True),
    "Gumbel": (lambda: D.Gumbel(T(0.5), T(1.5)), ("real",), True, True),
    "StudentT": (lambda: D.StudentT(T(5.0), T(0.5), T(1.5)), ("real",), True, True),
    "LogNormal": (lambda: D.LogNormal(T(0.2), T(0.5)), ("positive",), True, True),
    "HalfNormal": (lambda: D.HalfNormal(T(1.5)), ("positive",), True, True),
    "HalfCauchy": (lambda: D.HalfCauchy(T(1.5)), ("positive",), False, False),
    "Exponential": (lambda: D.Exponential(T(1.5)), ("positive",), True, True),
    "Gamma": (lambda: D.Gamma(T(2.5), T(1.5)), ("positive",), True, True),
    "Gamma_small": (lambda: D.Gamma(T(1.5), T(0.5)), ("positive",), True, True),
    "Chi2": (lambda: D.Chi2(T(4.0)), ("positive",), True, True),
    "InverseGamma": (lambda: D.InverseGamma(T(5.0), T(2.0)), ("positive",), True, True),
    "Weibull": (lambda: D.Weibull(T(1.5), T(2.0)), ("positive",), True, True),
    "Pareto": (lambda: D.Pareto(T(1.5), T(4.5)), ("greater", 1.5), True, True),
    "FisherSnedecor": (lambda: D.FisherSnedecor(T(5.0), T(12.0)), ("positive",), True, True),
    "Beta": (lambda: D.Beta(T(2.0), T(3.0)), ("unit",), True, True),
    "GeneralizedPareto": (lambda: D.GeneralizedPareto(T(0.5), T(1.5), T(0.2)),
                          ("greater", 0.5), True, True),
    "GeneralizedPareto_zero": (lambda: D.GeneralizedPareto(T(0.5), T(1.5), T(0.0)),
                               ("greater", 0.5), True, True),
    "GeneralizedPareto_bounded": (lambda: D.GeneralizedPareto(T(0.5), T(1.5), T(-0.5)),
                                  ("interval", 0.5, 3.5), True, True),
    "Kumaraswamy": (lambda: D.Kumaraswamy(T(2.0), T(3.0)), ("unit",), True, True),
    "ContinuousBernoulli": (lambda: D.ContinuousBernoulli(T(0.3)), ("unit",), True, True),
    "ContinuousBernoulli_taylor": (lambda: D.ContinuousBernoulli(T(0.5005)), ("unit",), True,
                                   True),
    "Uniform": (lambda: D.Uniform(T(0.5), T(2.0)), ("interval", 0.5, 2.0), True, True),
    "VonMises": (lambda: D.VonMises(T(0.5), T(2.0)), ("interval", -math.pi, math.pi), False,
                 False),
    "RelaxedBernoulli": (lambda: D.RelaxedBernoulli(T(2.0), probs=T(0.3)), ("unit",), False,
                         False),
    "LogitRelaxedBernoulli": (lambda: D.LogitRelaxedBernoulli(T(0.7), probs=T(0.3)),
                              ("real",), False, False),
    "MixtureSameFamily": (lambda: D.MixtureSameFamily(
        D.Categorical(probs=T([0.3, 0.7])), D.Normal(T([-1.0, 2.0]), T([0.5, 1.5]))),
        ("real",), True, True),
}


@pytest.mark.parametrize("name", sorted(CONTINUOUS))
def test_continuous_density_moments_entropy(name):
    make, support, has_mean, has_var = CONTINUOUS[name]
    d = make()
    x, w = _grid(support)
    p = _density(d, x)
    assert np.sum(w * p) == pytest.approx(1.0, abs=2e-6)
    if has_mean:
        mean = np.sum(w * p * x)
        assert d.mean.item() == pytest.approx(mean, rel=1e-5, abs=1e-6)
        if has_var:
            var = np.sum(w * p * (x - mean) ** 2)
            assert d.variance.item() == pytest.approx(var, rel=1e-4, abs=1e-6)
            assert d.stddev.item() == pytest.approx(math.sqrt(var), rel=1e-4)
    try:
        entropy = d.entropy().item()
    except NotImplementedError:
        return
    logp = np.where(p > 0, np.log(np.where(p > 0, p, 1.0)), 0.0)
    assert entropy == pytest.approx(-np.sum(w * p * logp), rel=1e-5, abs=1e-6)


def _has(d, method):
    try:
        getattr(d, method)(d.sample() if method == "cdf" else T(0.5))
        return True
    except NotImplementedError:
        return False


@pytest.mark.parametrize("name", sorted(CONTINUOUS))
def test_cdf_is_the_integral_of_the_density_and_icdf_inverts_it(name):
    make, support, _, _ = CONTINUOUS[name]
    d = make()
    if name == "VonMises" or not _has(d, "cdf"):
        pytest.skip(f"{name} has no cdf")
    x, w = _grid(support)
    p = _density(d, x)
    order = np.argsort(x)
    x, running = x[order], np.cumsum((w * p)[order])
    for q in (0.1, 0.5, 0.9):
        i = int(np.searchsorted(running, q))
        xi = float(x[i])
        # the quadrature's running sum brackets the cdf at a node
        assert running[i - 1] - 1e-7 <= d.cdf(T(xi)).item() <= running[i] + 1e-7
        if _has(d, "icdf"):
            assert d.icdf(d.cdf(T(xi))).item() == pytest.approx(xi, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("value,ref", [
    # Normal(0.5, 1.5) at 2: closed form
    (lambda: D.Normal(T(0.5), T(1.5)).log_prob(T(2.0)),
     -0.5 * (1.5 / 1.5) ** 2 - math.log(1.5) - 0.5 * math.log(2 * math.pi)),
    (lambda: D.Gamma(T(2.5), T(1.5)).log_prob(T(0.7)),
     2.5 * math.log(1.5) + 1.5 * math.log(0.7) - 1.5 * 0.7 - math.lgamma(2.5)),
    (lambda: D.Beta(T(2.0), T(3.0)).log_prob(T(0.4)),
     math.log(0.4) + 2 * math.log(0.6) - (math.lgamma(2) + math.lgamma(3) - math.lgamma(5))),
    (lambda: D.StudentT(T(5.0), T(0.5), T(1.5)).log_prob(T(1.0)),
     math.lgamma(3) - math.lgamma(2.5) - 0.5 * math.log(5 * math.pi) - math.log(1.5)
     - 3 * math.log1p((0.5 / 1.5) ** 2 / 5)),
    (lambda: D.Poisson(T(3.5)).log_prob(T(4.0)),
     4 * math.log(3.5) - 3.5 - math.lgamma(5)),
    (lambda: D.Binomial(T(10.0), T(0.3)).log_prob(T(4.0)),
     math.log(math.comb(10, 4)) + 4 * math.log(0.3) + 6 * math.log(0.7)),
    (lambda: D.NegativeBinomial(T(3.0), T(0.4)).log_prob(T(2.0)),
     math.log(math.comb(4, 2)) + 2 * math.log(0.4) + 3 * math.log(0.6)),
    (lambda: D.Geometric(T(0.3)).log_prob(T(3.0)), 3 * math.log(0.7) + math.log(0.3)),
    (lambda: D.Laplace(T(0.5), T(1.5)).log_prob(T(-1.0)), -math.log(3.0) - 1.0),
    (lambda: D.Cauchy(T(0.5), T(1.5)).log_prob(T(2.0)),
     -math.log(math.pi * 1.5 * 2.0)),
    (lambda: D.VonMises(T(0.5), T(2.0)).log_prob(T(1.0)),
     2.0 * math.cos(0.5) - math.log(2 * math.pi * 2.2795853023360673)),
    (lambda: D.Dirichlet(T([1.5, 2.0, 0.7])).log_prob(T([0.2, 0.5, 0.3])),
     0.5 * math.log(0.2) + 1.0 * math.log(0.5) - 0.3 * math.log(0.3) + math.lgamma(4.2)
     - math.lgamma(1.5) - math.lgamma(2.0) - math.lgamma(0.7)),
    (lambda: D.Multinomial(5, probs=T([0.2, 0.3, 0.5])).log_prob(T([1.0, 2.0, 2.0])),
     math.log(30) + math.log(0.2) + 2 * math.log(0.3) + 2 * math.log(0.5)),
    (lambda: D.Gamma(T(2.5), T(1.5)).cdf(T(1.0)),   # P(a + 1, x) = P(a, x) - x^a e^-x / G(a + 1)
     math.erf(math.sqrt(1.5)) - math.exp(-1.5) * (1.5 ** 0.5 / math.gamma(1.5)
                                                  + 1.5 ** 1.5 / math.gamma(2.5))),
    (lambda: D.Chi2(T(4.0)).cdf(T(3.0)), 1 - math.exp(-1.5) * (1 + 1.5)),
])
def test_closed_form_values(value, ref):
    assert value().item() == pytest.approx(ref, rel=1e-10, abs=1e-12)


# name -> (factory, largest k to sum to, has entropy)
DISCRETE = {
    "Bernoulli": (lambda: D.Bernoulli(T(0.3)), 1, True),
    "Binomial": (lambda: D.Binomial(T(10.0), T(0.3)), 10, True),
    "Binomial_logits": (lambda: D.Binomial(T(10.0), logits=T(-0.4)), 10, True),
    "Geometric": (lambda: D.Geometric(T(0.3)), 200, True),
    "Poisson": (lambda: D.Poisson(T(3.5)), 100, False),
    "NegativeBinomial": (lambda: D.NegativeBinomial(T(3.0), T(0.4)), 200, False),
    "Categorical": (lambda: D.Categorical(probs=T([0.1, 0.2, 0.3, 0.4])), 3, True),
}


@pytest.mark.parametrize("name", sorted(DISCRETE))
def test_discrete_pmf_sums_moments_entropy(name):
    make, kmax, has_entropy = DISCRETE[name]
    d = make()
    k = fiamma.arange(kmax + 1, dtype=F64)
    if name == "Categorical":
        k = k.long()
    p = d.log_prob(k).exp().numpy()
    kk = np.arange(kmax + 1, dtype=np.float64)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    if name != "Categorical":
        mean = (p * kk).sum()
        assert d.mean.item() == pytest.approx(mean, rel=1e-10)
        assert d.variance.item() == pytest.approx((p * (kk - mean) ** 2).sum(), rel=1e-9)
        assert d.mode.item() == float(np.argmax(p))
    if has_entropy:
        ent = -(p[p > 0] * np.log(p[p > 0])).sum()
        assert d.entropy().item() == pytest.approx(ent, rel=1e-10)


def _np(x):
    return x.numpy()


def _mvn_logpdf(x, mu, cov):
    n = len(mu)
    diff = x - mu
    sign, logdet = np.linalg.slogdet(cov)
    return -0.5 * (n * math.log(2 * math.pi) + logdet + diff @ np.linalg.solve(cov, diff))


@pytest.mark.parametrize("param", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_multivariate_normal_log_prob_entropy(param):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((4, 4))
    cov = A @ A.T + 4 * np.eye(4)
    mu = rng.standard_normal(4)
    x = rng.standard_normal((5, 4))
    arg = {"covariance_matrix": cov, "precision_matrix": np.linalg.inv(cov),
           "scale_tril": np.linalg.cholesky(cov)}[param]
    d = D.MultivariateNormal(T(mu), **{param: T(arg)})
    got = _np(d.log_prob(T(x)))
    ref = [_mvn_logpdf(xi, mu, cov) for xi in x]
    np.testing.assert_allclose(got, ref, rtol=1e-10)
    ent = 0.5 * (4 * (1 + math.log(2 * math.pi)) + np.linalg.slogdet(cov)[1])
    assert d.entropy().item() == pytest.approx(ent, rel=1e-12)
    np.testing.assert_allclose(_np(d.covariance_matrix), cov, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(d.precision_matrix), np.linalg.inv(cov), rtol=1e-9,
                               atol=1e-12)
    np.testing.assert_allclose(_np(d.variance), np.diag(cov), rtol=1e-10)


def test_low_rank_multivariate_normal_matches_full():
    rng = np.random.default_rng(1)
    W = rng.standard_normal((2, 5, 2))
    Dg = rng.uniform(0.5, 1.5, (2, 5))
    mu = rng.standard_normal((2, 5))
    lr = D.LowRankMultivariateNormal(T(mu), T(W), T(Dg))
    cov = W @ np.swapaxes(W, -1, -2) + np.stack([np.diag(v) for v in Dg])
    full = D.MultivariateNormal(T(mu), covariance_matrix=T(cov))
    x = T(rng.standard_normal((3, 2, 5)))
    np.testing.assert_allclose(_np(lr.log_prob(x)), _np(full.log_prob(x)), rtol=1e-10)
    np.testing.assert_allclose(_np(lr.entropy()), _np(full.entropy()), rtol=1e-12)
    np.testing.assert_allclose(_np(lr.covariance_matrix), cov, rtol=1e-12)
    np.testing.assert_allclose(_np(lr.precision_matrix), np.linalg.inv(cov), rtol=1e-9,
                               atol=1e-12)
    np.testing.assert_allclose(_np(lr.scale_tril), np.linalg.cholesky(cov), rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(_np(lr.variance), np.diagonal(cov, 0, -2, -1), rtol=1e-12)


def test_wishart_log_prob_entropy():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((3, 3))
    V = A @ A.T + 3 * np.eye(3)
    B = rng.standard_normal((3, 3))
    X = B @ B.T + np.eye(3)
    nu, p = 6.5, 3
    d = D.Wishart(T(nu), covariance_matrix=T(V))
    mvlg = 0.25 * p * (p - 1) * math.log(math.pi) + sum(math.lgamma(nu / 2 - j / 2)
                                                       for j in range(p))
    ref = (0.5 * (nu - p - 1) * np.linalg.slogdet(X)[1]
           - 0.5 * np.trace(np.linalg.solve(V, X)) - 0.5 * nu * p * math.log(2)
           - 0.5 * nu * np.linalg.slogdet(V)[1] - mvlg)
    assert d.log_prob(T(X)).item() == pytest.approx(ref, rel=1e-10)
    np.testing.assert_allclose(_np(d.mean), nu * V, rtol=1e-12)
    dv = np.diag(V)
    np.testing.assert_allclose(_np(d.variance), nu * (V ** 2 + np.outer(dv, dv)), rtol=1e-12)
    # entropy against Monte Carlo -E[log p]
    fiamma.manual_seed(0)
    lp = _np(d.log_prob(d.sample((20000,))))
    assert d.entropy().item() == pytest.approx(-lp.mean(), abs=5 * lp.std() / math.sqrt(2e4))


@pytest.mark.parametrize("eta", [0.5, 1.0, 2.5])
def test_lkj_cholesky_2d_density_integrates_to_one(eta):
    # for dim 2, L = [[1, 0], [r, sqrt(1 - r^2)]] and the density is over r in (-1, 1)
    theta, w = _grid(("interval", -math.pi / 2, math.pi / 2))
    r, w = np.sin(theta), w * np.cos(theta)      # r = sin(theta) removes the endpoint singularity
    L = np.zeros((len(r), 2, 2))
    L[:, 0, 0] = 1.0
    L[:, 1, 0] = r
    L[:, 1, 1] = np.sqrt(1 - r * r)
    p = np.exp(_np(D.LKJCholesky(2, T(eta)).log_prob(T(L))))
    assert np.sum(w * p) == pytest.approx(1.0, abs=1e-8)


@pytest.mark.parametrize("make", [
    lambda: D.Dirichlet(T([1.5, 2.0, 0.7])),
    lambda: D.Multinomial(6, probs=T([0.2, 0.3, 0.5])),
    lambda: D.OneHotCategorical(probs=T([0.2, 0.3, 0.5])),
    lambda: D.Independent(D.Gamma(T([1.5, 2.0]), T([1.0, 3.0])), 1),
    lambda: D.LowRankMultivariateNormal(T([0.0, 1.0]), T([[1.0], [0.5]]), T([0.5, 2.0])),
    lambda: D.VonMises(T(0.3), T(0.7)),
    lambda: D.Kumaraswamy(T(0.7), T(1.3)),
])
def test_entropy_against_monte_carlo(make):
    d = make()
    fiamma.manual_seed(3)
    lp = _np(d.log_prob(d.sample((40000,))))
    se = lp.std() / math.sqrt(len(lp))
    assert d.entropy().item() == pytest.approx(-lp.mean(), abs=5 * se + 1e-9)


def test_dirichlet_and_beta_mode_with_every_concentration_below_one():
    """Every vertex is a mode; the first one, as PyTorch (Beta's mode is then 1)."""
    c = fiamma.tensor([[0.5, 0.9, 0.2], [2.0, 3.0, 1.0]], dtype=fiamma.float64)
    np.testing.assert_allclose(D.Dirichlet(c).mode.numpy(),
                               [[1.0, 0.0, 0.0], [1 / 3, 2 / 3, 0.0]])
    b = D.Beta(fiamma.tensor([0.5, 0.2, 2.0]), fiamma.tensor([0.3, 0.9, 3.0]))
    np.testing.assert_allclose(b.mode.numpy(), [1.0, 1.0, 1 / 3], rtol=1e-6)
