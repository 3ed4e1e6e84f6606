"""Parity with torch.distributions (marked ``parity``; skipped without torch): the same
distributions built in both libraries from the same float64 parameters give the same shapes,
log_prob, cdf/icdf, entropy, moments and KL divergences."""

import math

import numpy as np
import pytest

import fiamma
import fiamma.distributions as FD

torch = pytest.importorskip("torch")
TD = torch.distributions
pytestmark = pytest.mark.parity


def _ft(v):
    return fiamma.tensor(v, dtype=fiamma.float64)


def _tt(v):
    return torch.tensor(v, dtype=torch.float64)


def _tril(D, t):
    return t([[1.5, 0.0, 0.0], [0.3, 0.8, 0.0], [-0.4, 0.2, 1.1]])


def _spd(D, t):
    return t([[2.0, 0.3, -0.2], [0.3, 1.0, 0.1], [-0.2, 0.1, 1.5]])


# name -> builder(D, t): the same code builds the fiamma and the torch distribution
BUILDERS = {
    "Bernoulli": lambda D, t: D.Bernoulli(probs=t([0.2, 0.5, 0.9])),
    "Bernoulli_logits": lambda D, t: D.Bernoulli(logits=t([0.2, -0.5, 3.0])),
    "Beta": lambda D, t: D.Beta(t([0.5, 1.0, 2.0]), t([2.0, 1.0, 0.7])),
    "Binomial": lambda D, t: D.Binomial(t([10.0, 10.0, 10.0]), t([0.2, 0.5, 0.9])),
    "Binomial_logits": lambda D, t: D.Binomial(8, logits=t([0.2, -0.5, 1.5])),
    "Categorical": lambda D, t: D.Categorical(probs=t([[0.1, 0.2, 0.7], [0.3, 0.3, 0.4]])),
    "Categorical_logits": lambda D, t: D.Categorical(logits=t([[0.1, -2.0, 0.7],
                                                                [1.3, 0.3, 0.4]])),
    "Cauchy": lambda D, t: D.Cauchy(t([0.0, 1.0, 2.0]), t([1.0, 2.0, 3.0])),
    "Chi2": lambda D, t: D.Chi2(t([1.0, 2.0, 5.0])),
    "ContinuousBernoulli": lambda D, t: D.ContinuousBernoulli(probs=t([0.2, 0.5, 0.9])),
    "Dirichlet": lambda D, t: D.Dirichlet(t([[0.5, 1.0, 2.0], [3.0, 0.7, 1.1]])),
    "Exponential": lambda D, t: D.Exponential(t([0.5, 1.0, 2.0])),
    "FisherSnedecor": lambda D, t: D.FisherSnedecor(t([3.0, 5.0, 7.0]), t([5.0, 6.0, 9.0])),
    "Gamma": lambda D, t: D.Gamma(t([0.5, 1.0, 3.0]), t([1.0, 2.0, 0.5])),
    # float32: PyTorch 2.13's GeneralizedPareto fails on float64 parameters (isclose against a
    # float32 zero)
    "GeneralizedPareto": lambda D, t: D.GeneralizedPareto(
        t([0.0, 1.0, -1.0]).float(), t([1.0, 2.0, 0.5]).float(), t([0.3, 0.0, -0.2]).float()),
    "Geometric": lambda D, t: D.Geometric(t([0.2, 0.5, 0.9])),
    "Gumbel": lambda D, t: D.Gumbel(t([0.0, 1.0, 2.0]), t([1.0, 2.0, 3.0])),
    "HalfCauchy": lambda D, t: D.HalfCauchy(t([1.0, 2.0, 3.0])),
    "HalfNormal": lambda D, t: D.HalfNormal(t([1.0, 2.0, 3.0])),
    "Independent": lambda D, t: D.Independent(D.Normal(t([[0.0, 1.0], [2.0, 3.0]]),
                                                       t([[1.0, 2.0], [0.5, 0.7]])), 1),
    "InverseGamma": lambda D, t: D.InverseGamma(t([3.0, 4.0, 5.0]), t([1.0, 2.0, 3.0])),
    "Kumaraswamy": lambda D, t: D.Kumaraswamy(t([2.0, 1.0, 3.0]), t([2.0, 4.0, 1.5])),
    "Laplace": lambda D, t: D.Laplace(t([0.0, 1.0, 2.0]), t([1.0, 2.0, 3.0])),
    "LKJCholesky": lambda D, t: D.LKJCholesky(3, t([0.5, 1.0, 2.0])),
    "LogNormal": lambda D, t: D.LogNormal(t([0.0, 1.0, 2.0]), t([1.0, 0.5, 0.3])),
    "LogisticNormal": lambda D, t: D.LogisticNormal(t([0.0, 1.0]), t([1.0, 0.5])),
    "LowRankMultivariateNormal": lambda D, t: D.LowRankMultivariateNormal(
        t([0.0, 1.0, 2.0]), t([[1.0, 0.2], [0.5, -1.0], [0.3, 0.3]]), t([0.5, 1.0, 0.2])),
    "MixtureSameFamily": lambda D, t: D.MixtureSameFamily(
        D.Categorical(probs=t([0.3, 0.7])), D.Normal(t([-1.0, 2.0]), t([0.5, 1.5]))),
    "MixtureSameFamily_events": lambda D, t: D.MixtureSameFamily(
        D.Categorical(probs=t([[0.3, 0.7], [0.5, 0.5]])),
        D.Independent(D.Normal(t([[[0.0, 1.0], [2.0, 3.0]], [[1.0, 1.0], [-1.0, 0.0]]]),
                               t([[[1.0, 0.5], [0.7, 1.2]], [[1.0, 1.0], [0.5, 0.5]]])), 1)),
    "Multinomial": lambda D, t: D.Multinomial(5, probs=t([0.2, 0.3, 0.5])),
    "MultivariateNormal": lambda D, t: D.MultivariateNormal(t([0.0, 1.0, 2.0]),
                                                            covariance_matrix=_spd(D, t)),
    "MultivariateNormal_precision": lambda D, t: D.MultivariateNormal(
        t([0.0, 1.0, 2.0]), precision_matrix=_spd(D, t)),
    "MultivariateNormal_scale_tril": lambda D, t: D.MultivariateNormal(
        t([0.0, 1.0, 2.0]), scale_tril=_tril(D, t)),
    "NegativeBinomial": lambda D, t: D.NegativeBinomial(t([3.0, 4.0, 5.0]),
                                                        probs=t([0.2, 0.5, 0.7])),
    "Normal": lambda D, t: D.Normal(t([0.0, 1.0, 2.0]), t([1.0, 2.0, 3.0])),
    "OneHotCategorical": lambda D, t: D.OneHotCategorical(probs=t([0.1, 0.2, 0.7])),
    "Pareto": lambda D, t: D.Pareto(t([1.0, 2.0, 3.0]), t([3.0, 4.0, 5.0])),
    "Poisson": lambda D, t: D.Poisson(t([0.5, 4.0, 30.0])),
    "RelaxedBernoulli": lambda D, t: D.RelaxedBernoulli(t(0.5), probs=t([0.2, 0.5, 0.9])),
    "RelaxedOneHotCategorical": lambda D, t: D.RelaxedOneHotCategorical(
        t(0.5), probs=t([0.1, 0.2, 0.7])),
    "StudentT": lambda D, t: D.StudentT(t([3.0, 4.0, 5.0]), t([0.0, 1.0, 2.0]),
                                        t([1.0, 2.0, 3.0])),
    "TransformedDistribution": lambda D, t: D.TransformedDistribution(
        D.Normal(t([0.0, 1.0]), t([1.0, 0.5])),
        [D.transforms.AffineTransform(1.0, 2.0), D.transforms.SigmoidTransform()]),
    "Uniform": lambda D, t: D.Uniform(t([0.0, 1.0, 2.0]), t([1.0, 3.0, 5.0])),
    "VonMises": lambda D, t: D.VonMises(t([0.0, 1.0, 2.0]), t([0.5, 2.0, 10.0])),
    "Weibull": lambda D, t: D.Weibull(t([1.0, 2.0, 3.0]), t([0.5, 1.0, 2.0])),
    "Wishart": lambda D, t: D.Wishart(t([5.0, 6.0]), covariance_matrix=_spd(D, t)),
}


# PyTorch evaluates log I0 for VonMises by a polynomial approximation good to about 1e-8;
# fiamma uses special.i0e (float64-accurate, checked against mpmath in core's tests)
TOLERANCE = {"VonMises": 3e-7, "GeneralizedPareto": 1e-5}


def _np(x):
    if isinstance(x, fiamma.Tensor):
        return x.detach().numpy()
    return x.detach().numpy()


def _both(name):
    return BUILDERS[name](FD, _ft), BUILDERS[name](TD, _tt)


def _close(a, b, rtol=1e-9, atol=1e-11):
    np.testing.assert_allclose(_np(a), _np(b), rtol=rtol, atol=atol, equal_nan=True)


def _try(fn):
    try:
        return fn()
    except NotImplementedError:
        return NotImplemented


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_parity_shapes_log_prob_moments(name):
    fd, td = _both(name)
    rtol = TOLERANCE.get(name, 1e-9)
    assert tuple(fd.batch_shape) == tuple(td.batch_shape)
    assert tuple(fd.event_shape) == tuple(td.event_shape)
    assert fd.has_rsample == td.has_rsample
    assert fd.has_enumerate_support == td.has_enumerate_support
    torch.manual_seed(0)
    x = td.sample((4,))
    fx = fiamma.tensor(x.numpy())
    _close(fd.log_prob(fx), td.log_prob(x), rtol=rtol)
    for attr in ("mean", "variance", "stddev", "mode"):
        tv = _try(lambda: getattr(td, attr))
        if tv is NotImplemented:
            continue
        _close(getattr(fd, attr), tv, rtol=rtol)
    te = _try(td.entropy)
    if te is not NotImplemented:
        _close(fd.entropy(), te, rtol=rtol)
    tc = _try(lambda: td.cdf(x))
    if tc is not NotImplemented:
        _close(fd.cdf(fx), tc, rtol=rtol)
        ti = _try(lambda: td.icdf(tc))
        if ti is not NotImplemented:
            _close(fd.icdf(fd.cdf(fx)), ti, rtol=max(rtol, 1e-7))
    if td.has_enumerate_support:
        _close(fd.enumerate_support(), td.enumerate_support())


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_parity_expand(name):
    fd, td = _both(name)
    shape = (2,) + tuple(td.batch_shape)
    fe, te = fd.expand(shape), td.expand(shape)
    assert tuple(fe.batch_shape) == tuple(te.batch_shape)
    torch.manual_seed(1)
    x = te.sample()
    _close(fe.log_prob(fiamma.tensor(x.numpy())), te.log_prob(x), rtol=TOLERANCE.get(name, 1e-9))


# one (p, q) builder pair per family for the KL table
KL_BUILDERS = {
    "Bernoulli": (lambda D, t: D.Bernoulli(t([0.3, 0.6])), lambda D, t: D.Bernoulli(t([0.5, 0.2]))),
    "Beta": (lambda D, t: D.Beta(t([1.5, 2.0]), t([2.0, 0.8])),
             lambda D, t: D.Beta(t([0.7, 3.0]), t([1.2, 1.5]))),
    "Binomial": (lambda D, t: D.Binomial(t([10.0, 10.0]), t([0.3, 0.6])),
                 lambda D, t: D.Binomial(t([10.0, 10.0]), t([0.5, 0.4]))),
    "Categorical": (lambda D, t: D.Categorical(t([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])),
                    lambda D, t: D.Categorical(t([[0.6, 0.1, 0.3], [0.3, 0.3, 0.4]]))),
    "Cauchy": (lambda D, t: D.Cauchy(t([0.3, -1.0]), t([1.2, 0.7])),
               lambda D, t: D.Cauchy(t([1.0, 0.0]), t([0.5, 2.0]))),
    "ContinuousBernoulli": (lambda D, t: D.ContinuousBernoulli(t([0.3, 0.7])),
                            lambda D, t: D.ContinuousBernoulli(t([0.6, 0.2]))),
    "Dirichlet": (lambda D, t: D.Dirichlet(t([[1.5, 2.0, 0.7], [1.0, 1.0, 1.0]])),
                  lambda D, t: D.Dirichlet(t([[0.8, 1.0, 3.0], [2.0, 0.5, 1.0]]))),
    "Exponential": (lambda D, t: D.Exponential(t([1.5, 0.7])),
                    lambda D, t: D.Exponential(t([0.5, 2.0]))),
    "Gamma": (lambda D, t: D.Gamma(t([2.0, 0.8]), t([1.5, 0.7])),
              lambda D, t: D.Gamma(t([1.2, 3.0]), t([0.5, 2.0]))),
    "Geometric": (lambda D, t: D.Geometric(t([0.3, 0.6])),
                  lambda D, t: D.Geometric(t([0.5, 0.2]))),
    "Gumbel": (lambda D, t: D.Gumbel(t([0.3, -1.0]), t([1.2, 0.7])),
               lambda D, t: D.Gumbel(t([1.0, 0.0]), t([0.5, 2.0]))),
    "HalfNormal": (lambda D, t: D.HalfNormal(t([1.2, 0.7])),
                   lambda D, t: D.HalfNormal(t([0.5, 2.0]))),
    "Independent": (lambda D, t: D.Independent(D.Normal(t([[0.3, -1.0]]), t([[1.2, 0.7]])), 1),
                    lambda D, t: D.Independent(D.Normal(t([[1.0, 0.0]]), t([[0.5, 2.0]])), 1)),
    "Laplace": (lambda D, t: D.Laplace(t([0.3, -1.0]), t([1.2, 0.7])),
                lambda D, t: D.Laplace(t([1.0, 0.0]), t([0.5, 2.0]))),
    "LowRankMultivariateNormal": (BUILDERS["LowRankMultivariateNormal"],
                                  lambda D, t: D.LowRankMultivariateNormal(
                                      t([1.0, 0.0, 0.0]), t([[0.2], [-0.5], [0.4]]),
                                      t([1.5, 0.7, 1.0]))),
    "MultivariateNormal": (BUILDERS["MultivariateNormal"],
                           BUILDERS["MultivariateNormal_scale_tril"]),
    "Normal": (lambda D, t: D.Normal(t([0.3, -1.0]), t([1.2, 0.7])),
               lambda D, t: D.Normal(t([1.0, 0.0]), t([0.5, 2.0]))),
    "OneHotCategorical": (lambda D, t: D.OneHotCategorical(t([0.2, 0.3, 0.5])),
                          lambda D, t: D.OneHotCategorical(t([0.6, 0.1, 0.3]))),
    "Pareto": (lambda D, t: D.Pareto(t([1.0, 1.5]), t([3.5, 2.5])),
               lambda D, t: D.Pareto(t([0.8, 1.2]), t([2.0, 3.0]))),
    "Poisson": (lambda D, t: D.Poisson(t([2.0, 4.5])), lambda D, t: D.Poisson(t([3.0, 1.0]))),
    "TransformedDistribution": (lambda D, t: D.LogNormal(t([0.3, -1.0]), t([1.2, 0.7])),
                                lambda D, t: D.LogNormal(t([1.0, 0.0]), t([0.5, 2.0]))),
    "Uniform": (lambda D, t: D.Uniform(t([0.2, 0.1]), t([0.9, 0.7])),
                lambda D, t: D.Uniform(t([-0.5, 0.0]), t([1.0, 2.0]))),
}
# PyTorch returns inf for KL(ContinuousBernoulli || Uniform(0, ...)) although [0, 1] lies
# inside the uniform's support; fiamma returns the finite value (checked against Monte Carlo
# in test_kl.py)
KNOWN_DIFFERENCES = {("ContinuousBernoulli", "Uniform")}
TORCH_PAIRS = sorted((p.__name__, q.__name__) for p, q in TD.kl._KL_REGISTRY
                     if p.__name__ in KL_BUILDERS and q.__name__ in KL_BUILDERS)


@pytest.mark.parametrize("pair", TORCH_PAIRS, ids=["-".join(p) for p in TORCH_PAIRS])
def test_parity_kl(pair):
    if pair in KNOWN_DIFFERENCES:
        pytest.skip("a known PyTorch difference, see the comment")
    bp, bq = KL_BUILDERS[pair[0]][0], KL_BUILDERS[pair[1]][1]
    fk = FD.kl_divergence(bp(FD, _ft), bq(FD, _ft))
    tk = TD.kl_divergence(bp(TD, _tt), bq(TD, _tt))
    _close(fk, tk, rtol=1e-8)


def test_parity_transforms_and_registry():
    x = np.array([[-0.5, 0.3, 1.2], [0.1, -2.0, 0.4]])
    for name in ("ExpTransform", "SigmoidTransform", "TanhTransform", "SoftplusTransform",
                 "StickBreakingTransform", "CorrCholeskyTransform", "SoftmaxTransform"):
        ft, tt = getattr(FD.transforms, name)(), getattr(TD.transforms, name)()
        fy, ty = ft(_ft(x)), tt(_tt(x))
        _close(fy, ty)
        _close(ft.inv(fy), tt.inv(ty), rtol=1e-8)
        tl = _try(lambda: tt.log_abs_det_jacobian(_tt(x), ty))
        if tl is not NotImplemented:
            _close(ft.log_abs_det_jacobian(_ft(x), fy), tl)
    for c in ("positive", "unit_interval", "simplex", "corr_cholesky", "real"):
        for reg in ("biject_to", "transform_to"):
            fy = getattr(FD, reg)(getattr(FD.constraints, c))(_ft(x))
            ty = getattr(TD, reg)(getattr(TD.constraints, c))(_tt(x))
            _close(fy, ty)


def test_parity_validation_messages_name_the_parameter():
    for build in (lambda D, t: D.Normal(t(0.0), t(-1.0)),
                  lambda D, t: D.Gamma(t(-1.0), t(1.0))):
        with pytest.raises(ValueError) as fe:
            build(FD, _ft)
        with pytest.raises(ValueError) as te:
            build(TD, _tt)
        assert str(fe.value).split(" (")[0] == str(te.value).split(" (")[0]
    assert math.isinf(FD.kl_divergence(FD.Normal(0.0, 1.0), FD.Exponential(_ft(1.0))).item())
