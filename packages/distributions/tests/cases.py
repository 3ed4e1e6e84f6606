"""Shared test cases: one float64 instance of every distribution, with a batch shape (3,)."""

import fiamma
import fiamma.distributions as D

F64 = fiamma.float64


def t(*v):
    return fiamma.tensor(list(v) if len(v) > 1 else v[0], dtype=F64)


def spd(n, batch=(3,), seed=0):
    g = fiamma.Generator().manual_seed(seed)
    A = fiamma.randn(batch + (n, n), dtype=F64, generator=g)
    return A @ A.mT + n * fiamma.eye(n, dtype=F64)


def rand(*shape, low=0.0, high=1.0, seed=0):
    g = fiamma.Generator().manual_seed(seed)
    return low + (high - low) * fiamma.rand(shape, dtype=F64, generator=g)


# name -> factory; every instance has batch_shape (3,)
CASES = {
    "Bernoulli": lambda: D.Bernoulli(probs=t(0.2, 0.5, 0.9)),
    "Bernoulli_logits": lambda: D.Bernoulli(logits=t(0.2, -0.5, 0.9)),
    "Beta": lambda: D.Beta(t(0.5, 1.0, 2.0), t(2.0, 1.0, 0.7)),
    "Binomial": lambda: D.Binomial(t(10.0, 10.0, 10.0), t(0.2, 0.5, 0.9)),
    "Categorical": lambda: D.Categorical(probs=rand(3, 4, low=0.1)),
    "Categorical_logits": lambda: D.Categorical(logits=rand(3, 4, low=-2, high=2)),
    "Cauchy": lambda: D.Cauchy(t(0.0, 1.0, 2.0), t(1.0, 2.0, 3.0)),
    "Chi2": lambda: D.Chi2(t(1.0, 2.0, 5.0)),
    "ContinuousBernoulli": lambda: D.ContinuousBernoulli(probs=t(0.2, 0.5, 0.9)),
    "Dirichlet": lambda: D.Dirichlet(rand(3, 4, low=0.5, high=2.0)),
    "Exponential": lambda: D.Exponential(t(0.5, 1.0, 2.0)),
    "FisherSnedecor": lambda: D.FisherSnedecor(t(3.0, 5.0, 7.0), t(5.0, 6.0, 9.0)),
    "Gamma": lambda: D.Gamma(t(0.5, 1.0, 3.0), t(1.0, 2.0, 0.5)),
    "GeneralizedPareto": lambda: D.GeneralizedPareto(t(0.0, 1.0, -1.0), t(1.0, 2.0, 0.5),
                                                     t(0.3, 0.0, -0.2)),
    "Geometric": lambda: D.Geometric(t(0.2, 0.5, 0.9)),
    "Gumbel": lambda: D.Gumbel(t(0.0, 1.0, 2.0), t(1.0, 2.0, 3.0)),
    "HalfCauchy": lambda: D.HalfCauchy(t(1.0, 2.0, 3.0)),
    "HalfNormal": lambda: D.HalfNormal(t(1.0, 2.0, 3.0)),
    "Independent": lambda: D.Independent(D.Normal(rand(3, 2), rand(3, 2, low=0.5)), 1),
    "InverseGamma": lambda: D.InverseGamma(t(3.0, 4.0, 5.0), t(1.0, 2.0, 3.0)),
    "Kumaraswamy": lambda: D.Kumaraswamy(t(2.0, 1.0, 3.0), t(2.0, 4.0, 1.5)),
    "Laplace": lambda: D.Laplace(t(0.0, 1.0, 2.0), t(1.0, 2.0, 3.0)),
    "LKJCholesky": lambda: D.LKJCholesky(3, t(0.5, 1.0, 2.0)),
    "LogNormal": lambda: D.LogNormal(t(0.0, 1.0, 2.0), t(1.0, 0.5, 0.3)),
    "LogisticNormal": lambda: D.LogisticNormal(rand(3, 2), rand(3, 2, low=0.5)),
    "LowRankMultivariateNormal": lambda: D.LowRankMultivariateNormal(
        rand(3, 4), rand(3, 4, 2, low=-1), rand(3, 4, low=0.5, high=1.5)),
    "MixtureSameFamily": lambda: D.MixtureSameFamily(
        D.Categorical(probs=rand(3, 2, low=0.2)),
        D.Normal(rand(3, 2, low=-2, high=2), rand(3, 2, low=0.5, high=1.5))),
    "Multinomial": lambda: D.Multinomial(5, probs=rand(3, 4, low=0.1)),
    "MultivariateNormal": lambda: D.MultivariateNormal(rand(3, 4), covariance_matrix=spd(4)),
    "MultivariateNormal_precision": lambda: D.MultivariateNormal(
        rand(3, 4), precision_matrix=spd(4, seed=1)),
    "MultivariateNormal_scale_tril": lambda: D.MultivariateNormal(
        rand(3, 4), scale_tril=fiamma.linalg.cholesky(spd(4, seed=2))),
    "NegativeBinomial": lambda: D.NegativeBinomial(t(3.0, 4.0, 5.0), probs=t(0.2, 0.5, 0.7)),
    "Normal": lambda: D.Normal(t(0.0, 1.0, 2.0), t(1.0, 2.0, 3.0)),
    "OneHotCategorical": lambda: D.OneHotCategorical(probs=rand(3, 4, low=0.1)),
    "OneHotCategoricalStraightThrough": lambda: D.OneHotCategoricalStraightThrough(
        probs=rand(3, 4, low=0.1)),
    "Pareto": lambda: D.Pareto(t(1.0, 2.0, 3.0), t(3.0, 4.0, 5.0)),
    "Poisson": lambda: D.Poisson(t(0.5, 4.0, 30.0)),
    "RelaxedBernoulli": lambda: D.RelaxedBernoulli(t(0.5), probs=t(0.2, 0.5, 0.9)),
    "RelaxedOneHotCategorical": lambda: D.RelaxedOneHotCategorical(
        t(0.5), probs=rand(3, 4, low=0.1)),
    "StudentT": lambda: D.StudentT(t(3.0, 4.0, 5.0), t(0.0, 1.0, 2.0), t(1.0, 2.0, 3.0)),
    "TransformedDistribution": lambda: D.TransformedDistribution(
        D.Normal(t(0.0, 1.0, 2.0), t(1.0, 0.5, 0.3)),
        [D.transforms.AffineTransform(1.0, 2.0), D.transforms.ExpTransform()]),
    "Uniform": lambda: D.Uniform(t(0.0, 1.0, 2.0), t(1.0, 3.0, 5.0)),
    "VonMises": lambda: D.VonMises(t(0.0, 1.0, 2.0), t(0.5, 2.0, 10.0)),
    "Weibull": lambda: D.Weibull(t(1.0, 2.0, 3.0), t(0.5, 1.0, 2.0)),
    "Wishart": lambda: D.Wishart(t(5.0, 6.0, 7.0), covariance_matrix=spd(3)),
}
