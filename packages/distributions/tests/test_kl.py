"""kl_divergence: every registered pair against a Monte Carlo estimate E_p[log p - log q]
(infinite pairs: p puts mass outside q's support), the exponential-family fallback against
the closed forms, and register_kl's dispatch (most specific pair, ambiguity warning, memo)."""

import math
import warnings

import numpy as np
import pytest

import fiamma
import fiamma.distributions as D
from fiamma.distributions import kl as K

F64 = fiamma.float64


def T(*v):
    return fiamma.tensor(list(v), dtype=F64)


def _spd(seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((2, 3, 3))
    return fiamma.tensor(A @ np.swapaxes(A, -1, -2) + 3 * np.eye(3), dtype=F64)


# type -> (instance used as p, instance used as q); batch shape (2,)
INSTANCES = {
    D.Bernoulli: (lambda: D.Bernoulli(T(0.3, 0.6)), lambda: D.Bernoulli(T(0.5, 0.2))),
    D.Beta: (lambda: D.Beta(T(1.5, 2.0), T(2.0, 0.8)), lambda: D.Beta(T(0.7, 3.0), T(1.2, 1.5))),
    D.Binomial: (lambda: D.Binomial(T(10.0, 10.0), T(0.3, 0.6)),
                 lambda: D.Binomial(T(10.0, 10.0), T(0.5, 0.4))),
    D.Categorical: (lambda: D.Categorical(T(0.2, 0.3, 0.5).expand(2, 3)),
                    lambda: D.Categorical(T(0.6, 0.1, 0.3).expand(2, 3))),
    D.Cauchy: (lambda: D.Cauchy(T(0.3, -1.0), T(1.2, 0.7)),
               lambda: D.Cauchy(T(1.0, 0.0), T(0.5, 2.0))),
    D.ContinuousBernoulli: (lambda: D.ContinuousBernoulli(T(0.3, 0.7)),
                            lambda: D.ContinuousBernoulli(T(0.6, 0.2))),
    D.Dirichlet: (lambda: D.Dirichlet(T(1.5, 2.0, 0.7).expand(2, 3)),
                  lambda: D.Dirichlet(T(0.8, 1.0, 3.0).expand(2, 3))),
    D.Exponential: (lambda: D.Exponential(T(1.5, 0.7)), lambda: D.Exponential(T(0.5, 2.0))),
    D.Gamma: (lambda: D.Gamma(T(2.0, 0.8), T(1.5, 0.7)), lambda: D.Gamma(T(1.2, 3.0),
                                                                        T(0.5, 2.0))),
    D.Geometric: (lambda: D.Geometric(T(0.3, 0.6)), lambda: D.Geometric(T(0.5, 0.2))),
    D.Gumbel: (lambda: D.Gumbel(T(0.3, -1.0), T(1.2, 0.7)),
               lambda: D.Gumbel(T(1.0, 0.0), T(0.5, 2.0))),
    D.HalfNormal: (lambda: D.HalfNormal(T(1.2, 0.7)), lambda: D.HalfNormal(T(0.5, 2.0))),
    D.Independent: (lambda: D.Independent(D.Normal(T(0.3, -1.0).expand(2, 2), T(1.2, 0.7)), 1),
                    lambda: D.Independent(D.Normal(T(1.0, 0.0).expand(2, 2), T(0.5, 2.0)), 1)),
    D.Laplace: (lambda: D.Laplace(T(0.3, -1.0), T(1.2, 0.7)),
                lambda: D.Laplace(T(1.0, 0.0), T(0.5, 2.0))),
    D.LowRankMultivariateNormal: (
        lambda: D.LowRankMultivariateNormal(T(0.3, -1.0, 0.5).expand(2, 3),
                                            fiamma.tensor([[1.0], [0.5], [-0.3]], dtype=F64),
                                            T(0.5, 1.0, 0.8)),
        lambda: D.LowRankMultivariateNormal(T(1.0, 0.0, 0.0).expand(2, 3),
                                            fiamma.tensor([[0.2, 0.1], [-0.5, 0.3], [0.4, 0.9]],
                                                          dtype=F64),
                                            T(1.5, 0.7, 1.0))),
    D.MultivariateNormal: (
        lambda: D.MultivariateNormal(T(0.3, -1.0, 0.5).expand(2, 3), covariance_matrix=_spd(0)),
        lambda: D.MultivariateNormal(T(1.0, 0.0, 0.0), covariance_matrix=_spd(1))),
    D.Normal: (lambda: D.Normal(T(0.3, -1.0), T(1.2, 0.7)),
               lambda: D.Normal(T(1.0, 0.0), T(0.5, 2.0))),
    D.OneHotCategorical: (lambda: D.OneHotCategorical(T(0.2, 0.3, 0.5).expand(2, 3)),
                          lambda: D.OneHotCategorical(T(0.6, 0.1, 0.3).expand(2, 3))),
    D.Pareto: (lambda: D.Pareto(T(1.0, 1.5), T(3.5, 2.5)), lambda: D.Pareto(T(0.8, 1.2),
                                                                          T(2.0, 3.0))),
    D.Poisson: (lambda: D.Poisson(T(2.0, 4.5)), lambda: D.Poisson(T(3.0, 1.0))),
    D.TransformedDistribution: (lambda: D.LogNormal(T(0.3, -1.0), T(1.2, 0.7)),
                                lambda: D.LogNormal(T(1.0, 0.0), T(0.5, 2.0))),
    D.Uniform: (lambda: D.Uniform(T(0.2, 0.1), T(0.9, 0.7)),
                lambda: D.Uniform(T(-0.5, 0.0), T(1.0, 2.0))),
}
# pairs whose finite case needs other instances
OVERRIDES = {
    (D.Uniform, D.Pareto): (lambda: D.Uniform(T(2.0, 1.6), T(3.0, 2.5)), None),
    (D.Poisson, D.Binomial): (None, lambda: D.Binomial(T(3.0, 3.0), T(0.5, 0.4))),
}

PAIRS = sorted((p.__name__, q.__name__) for p, q in K._KL_REGISTRY
               if p is not D.ExponentialFamily)
TYPES = {t.__name__: t for t in INSTANCES}


@pytest.mark.parametrize("pair", PAIRS, ids=["-".join(p) for p in PAIRS])
def test_kl_pair_against_monte_carlo(pair):
    tp, tq = TYPES[pair[0]], TYPES[pair[1]]
    make_p, make_q = INSTANCES[tp][0], INSTANCES[tq][1]
    over = OVERRIDES.get((tp, tq), (None, None))
    p = (over[0] or make_p)()
    q = (over[1] or make_q)()
    kl = D.kl_divergence(p, q)
    assert tuple(kl.shape) == (2,)
    fiamma.manual_seed(0)
    x = p.sample((20000,))
    inside = q.support.check(x)
    kl_np = kl.numpy()
    for b in range(2):
        if math.isinf(kl_np[b]):
            assert kl_np[b] > 0
            assert not bool(inside[:, b].all()), f"{pair}: KL is inf but samples lie in support"
            continue
        assert bool(inside[:, b].all()), f"{pair}: finite KL but samples outside q's support"
    if all(math.isinf(v) for v in kl_np):
        return
    D.Distribution.set_default_validate_args(False)   # q.log_prob outside an infinite row
    try:
        ratio = (p.log_prob(x) - q.log_prob(x)).numpy()
    finally:
        D.Distribution.set_default_validate_args(True)
    for b in range(2):
        if math.isinf(kl_np[b]):
            continue
        r = ratio[:, b]
        se = r.std() / math.sqrt(len(r))
        assert kl_np[b] == pytest.approx(r.mean(), abs=5 * se + 1e-9), (pair, b)


@pytest.mark.parametrize("t", [D.Normal, D.Gamma, D.Beta, D.Dirichlet, D.Poisson,
                               D.Exponential, D.Bernoulli, D.Categorical, D.ContinuousBernoulli,
                               D.Geometric, D.Binomial])
def test_exponential_family_fallback_matches_closed_form(t):
    p, q = INSTANCES[t][0](), INSTANCES[t][1]()
    if not isinstance(p, D.ExponentialFamily):
        pytest.skip(f"{t.__name__} is not an exponential family here")
    np.testing.assert_allclose(K._kl_expfamily_expfamily(p, q).detach().numpy(),
                               D.kl_divergence(p, q).numpy(), rtol=1e-9)


def test_multivariate_normal_kl_closed_form():
    rng = np.random.default_rng(3)
    A, B = rng.standard_normal((2, 3, 3))
    S1, S2 = A @ A.T + np.eye(3), B @ B.T + np.eye(3)
    m1, m2 = rng.standard_normal((2, 3))
    ref = 0.5 * (np.trace(np.linalg.solve(S2, S1)) + (m2 - m1) @ np.linalg.solve(S2, m2 - m1)
                 - 3 + np.linalg.slogdet(S2)[1] - np.linalg.slogdet(S1)[1])
    t = lambda a: fiamma.tensor(a, dtype=F64)  # noqa: E731
    p = D.MultivariateNormal(t(m1), covariance_matrix=t(S1))
    q = D.MultivariateNormal(t(m2), covariance_matrix=t(S2))
    assert D.kl_divergence(p, q).item() == pytest.approx(ref, rel=1e-10)
    W, d = rng.standard_normal((3, 2)), rng.uniform(0.5, 1.5, 3)
    lq = D.LowRankMultivariateNormal(t(m2), t(W), t(d))
    full = D.MultivariateNormal(t(m2), covariance_matrix=t(W @ W.T + np.diag(d)))
    assert D.kl_divergence(p, lq).item() == pytest.approx(D.kl_divergence(p, full).item(),
                                                          rel=1e-10)
    lp = D.LowRankMultivariateNormal(t(m1), t(W[:, :1]), t(d[::-1].copy()))
    fullp = D.MultivariateNormal(t(m1), covariance_matrix=lp.covariance_matrix)
    assert D.kl_divergence(lp, q).item() == pytest.approx(D.kl_divergence(fullp, q).item(),
                                                          rel=1e-10)
    assert D.kl_divergence(lp, lq).item() == pytest.approx(D.kl_divergence(fullp, full).item(),
                                                           rel=1e-10)
    assert D.kl_divergence(p, p).item() == pytest.approx(0.0, abs=1e-12)


def test_dispatch_uses_the_most_specific_pair_and_warns_on_ambiguity():
    class A(D.Normal):
        pass

    class B(A):
        pass

    saved = dict(K._KL_REGISTRY)
    try:
        @D.register_kl(A, D.Normal)
        def _kl_a_normal(p, q):
            return "a-normal"

        @D.register_kl(B, D.Normal)
        def _kl_b_normal(p, q):
            return "b-normal"

        pb, qn = B(0.0, 1.0), D.Normal(0.0, 1.0)
        assert D.kl_divergence(pb, qn) == "b-normal"
        assert D.kl_divergence(A(0.0, 1.0), qn) == "a-normal"

        @D.register_kl(D.Normal, B)
        def _kl_normal_b(p, q):
            return "normal-b"

        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert D.kl_divergence(pb, B(0.0, 1.0)) == "b-normal"
        assert any("Ambiguous kl_divergence(B, B)" in str(x.message) for x in w)
    finally:
        K._KL_REGISTRY.clear()
        K._KL_REGISTRY.update(saved)
        K._KL_MEMOIZE.clear()


def test_missing_pair_and_bad_registration():
    with pytest.raises(NotImplementedError, match="p type VonMises and q type Normal"):
        D.kl_divergence(D.VonMises(0.0, 1.0), D.Normal(0.0, 1.0))
    with pytest.raises(TypeError, match="type_p"):
        D.register_kl(3, D.Normal)     # any class is accepted (PyTorch; Pyro's mixin bases)
    with pytest.raises(NotImplementedError, match="total_count"):
        D.kl_divergence(D.Binomial(T(3.0), T(0.5)), D.Binomial(T(5.0), T(0.5)))
    assert math.isinf(D.kl_divergence(D.Binomial(T(5.0), T(0.5)),
                                      D.Binomial(T(3.0), T(0.5))).item())
    with pytest.raises(NotImplementedError, match="different exponential families"):
        K._kl_expfamily_expfamily(D.Normal(0.0, 1.0), D.Gamma(1.0, 1.0))
