"""Argument validation (on by default, as PyTorch): bad parameters and out-of-support values
raise ValueError naming the argument; validate_args=False and set_default_validate_args turn
it off; bad constructor calls raise clear errors."""

import math

import pytest

import fiamma
import fiamma.distributions as D
from fiamma.distributions import constraints

T = fiamma.tensor


@pytest.mark.parametrize("make,param", [
    (lambda: D.Normal(0.0, -1.0), "scale"),
    (lambda: D.Normal(T([0.0, math.nan]), 1.0), "loc"),
    (lambda: D.Bernoulli(probs=T(1.5)), "probs"),
    (lambda: D.Categorical(probs=T([-0.1, 1.0])), "probs"),
    (lambda: D.Gamma(T(-1.0), T(1.0)), "concentration"),
    (lambda: D.Exponential(T(0.0)), "rate"),
    (lambda: D.Beta(T(1.0), T(0.0)), "concentration0"),
    (lambda: D.Dirichlet(T([1.0, -1.0])), "concentration"),
    (lambda: D.Poisson(T(-1.0)), "rate"),
    (lambda: D.Binomial(T(2.5), T(0.5)), "total_count"),
    (lambda: D.StudentT(T(-1.0)), "df"),
    (lambda: D.MultivariateNormal(fiamma.zeros(2),
                                  covariance_matrix=T([[1.0, 2.0], [2.0, 1.0]])),
     "covariance_matrix"),
    (lambda: D.MultivariateNormal(fiamma.zeros(2), scale_tril=T([[1.0, 1.0], [0.0, 1.0]])),
     "scale_tril"),
    (lambda: D.LowRankMultivariateNormal(fiamma.zeros(2), fiamma.ones(2, 1), -fiamma.ones(2)),
     "cov_diag"),
    (lambda: D.VonMises(T(0.0), T(-1.0)), "concentration"),
    (lambda: D.ContinuousBernoulli(probs=T(1.5)), "probs"),
])
def test_bad_parameter_names_it(make, param):
    with pytest.raises(ValueError, match=f"Expected parameter {param}"):
        make()


def test_uniform_low_not_below_high():
    with pytest.raises(ValueError, match="low < high"):
        D.Uniform(T(1.0), T(1.0))


@pytest.mark.parametrize("make,value", [
    (lambda: D.Exponential(T(1.0)), T(-1.0)),
    (lambda: D.Bernoulli(probs=T(0.3)), T(0.5)),
    (lambda: D.Categorical(probs=T([0.5, 0.5])), T(2)),
    (lambda: D.Beta(T(2.0), T(2.0)), T(1.5)),
    (lambda: D.Poisson(T(2.0)), T(1.5)),
    (lambda: D.Dirichlet(T([1.0, 1.0])), T([0.7, 0.7])),
    (lambda: D.Uniform(T(0.0), T(1.0)), T(2.0)),
    (lambda: D.OneHotCategorical(probs=T([0.5, 0.5])), T([1.0, 1.0])),
])
def test_value_outside_support(make, value):
    with pytest.raises(ValueError, match="support"):
        make().log_prob(value)


def test_value_shape_must_match_event_shape():
    d = D.MultivariateNormal(fiamma.zeros(3), covariance_matrix=fiamma.eye(3))
    with pytest.raises(ValueError, match="event_shape"):
        d.log_prob(fiamma.zeros(2))
    with pytest.raises(ValueError, match="not broadcastable"):
        D.Normal(fiamma.zeros(3), 1.0).log_prob(fiamma.zeros(4))


def test_validation_off():
    d = D.Normal(0.0, -1.0, validate_args=False)     # no error
    assert math.isnan(d.log_prob(T(0.0)).item())
    D.Exponential(T(1.0), validate_args=False).log_prob(T(-1.0))
    D.Distribution.set_default_validate_args(False)
    try:
        D.Normal(0.0, -1.0)
        D.Exponential(T(1.0)).log_prob(T(-1.0))
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError, match="True or False"):
        D.Distribution.set_default_validate_args(1.5)


def test_constructor_errors():
    with pytest.raises(ValueError, match="either `probs` or `logits`"):
        D.Categorical()
    with pytest.raises(ValueError, match="either `probs` or `logits`"):
        D.Bernoulli(probs=T(0.5), logits=T(0.0))
    with pytest.raises(ValueError, match="exactly one of"):
        D.MultivariateNormal(fiamma.zeros(2))
    with pytest.raises(ValueError, match="one-dimensional"):
        D.Categorical(probs=T(0.5))
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims"):
        D.Independent(D.Normal(fiamma.zeros(3), 1.0), 2)
    with pytest.raises(ValueError, match="Categorical"):
        D.MixtureSameFamily(D.Normal(0.0, 1.0), D.Normal(fiamma.zeros(2), 1.0))
    with pytest.raises(ValueError, match="dim"):
        D.LKJCholesky(1)
    with pytest.raises(ValueError, match="df"):
        D.Wishart(T(0.5), covariance_matrix=fiamma.eye(3))
    with pytest.raises(NotImplementedError, match="no reparameterised sampler"):
        D.Categorical(probs=T([0.5, 0.5])).rsample()
    with pytest.raises(ValueError, match="Tensors or Numbers"):
        D.Normal("a", 1.0)


def test_constraint_checks():
    assert constraints.positive.check(T([1.0, 0.0])).tolist() == [True, False]
    assert constraints.nonnegative.check(T([1.0, 0.0])).tolist() == [True, True]
    assert constraints.unit_interval.check(T([0.0, 1.0, 1.1])).tolist() == [True, True, False]
    assert constraints.integer_interval(0, 3).check(T([0.0, 3.0, 1.5])).tolist() == \
        [True, True, False]
    assert constraints.real_vector.check(fiamma.zeros(2, 3)).tolist() == [True, True]
    assert constraints.lower_cholesky.check(fiamma.eye(2)).item()
    assert not constraints.lower_cholesky.check(T([[1.0, 1.0], [0.0, 1.0]])).item()
    assert constraints.positive_definite.check(fiamma.eye(2)).item()
    assert not constraints.positive_definite.check(-fiamma.eye(2)).item()
    assert constraints.corr_cholesky.check(fiamma.eye(3)).item()
    assert constraints.one_hot.check(T([[0.0, 1.0], [1.0, 1.0]])).tolist() == [True, False]
    c = constraints.cat([constraints.positive, constraints.real], 0, [1, 1])
    assert c.check(T([-1.0, -1.0])).tolist() == [False, True]
    s = constraints.stack([constraints.positive, constraints.real], 0)
    assert s.check(T([-1.0, -1.0])).tolist() == [False, True]
    assert constraints.is_dependent(constraints.dependent)
    with pytest.raises(ValueError, match="dependent"):
        constraints.dependent.check(T(1.0))
    assert repr(constraints.positive) == "GreaterThan(lower_bound=0.0)"
