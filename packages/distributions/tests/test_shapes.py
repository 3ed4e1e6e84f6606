"""Shape semantics on every distribution: samples are sample_shape + batch_shape +
event_shape, log_prob drops the event dims and broadcasts values against the batch, expand
changes only the batch shape, and samples lie in the support."""

import pytest
from cases import CASES

import fiamma
import fiamma.distributions as D


def _shape(x):
    return tuple(x.shape) if isinstance(x, fiamma.Tensor) else tuple(x)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("sample_shape", [(), (2,), (2, 3)])
def test_sample_and_log_prob_shapes(name, sample_shape):
    fiamma.manual_seed(0)
    d = CASES[name]()
    assert _shape(d.batch_shape) == (3,)
    batch, event = tuple(d.batch_shape), tuple(d.event_shape)
    x = d.sample(sample_shape)
    assert _shape(x) == sample_shape + batch + event
    assert not x.requires_grad
    assert bool(d.support.check(x).all()), name
    lp = d.log_prob(x)
    assert _shape(lp) == sample_shape + batch
    assert bool(fiamma.isfinite(lp).all()), name
    if d.has_rsample:
        assert _shape(d.rsample(sample_shape)) == sample_shape + batch + event


@pytest.mark.parametrize("name", sorted(CASES))
def test_log_prob_broadcasts_value_against_batch(name):
    if name in ("Uniform", "Pareto", "GeneralizedPareto"):
        pytest.skip("the support depends on the batch entry")
    fiamma.manual_seed(1)
    d = CASES[name]()
    one = d.sample()[0]                     # an event-shaped value, no batch dims
    assert _shape(d.log_prob(one)) == (3,)
    several = d.sample((4,)).unsqueeze(1)   # (4, 1, 3) + event
    assert _shape(d.log_prob(several)) == (4, 1, 3)


@pytest.mark.parametrize("name", sorted(CASES))
def test_expand(name):
    fiamma.manual_seed(2)
    d = CASES[name]()
    e = d.expand((4, 3))
    assert type(e) is type(d)
    assert _shape(e.batch_shape) == (4, 3) and e.event_shape == d.event_shape
    x = d.sample()
    lp, elp = d.log_prob(x), e.log_prob(x)
    assert _shape(elp) == (4, 3)
    assert fiamma.allclose(elp, lp.expand(4, 3))
    assert _shape(e.sample((2,))) == (2, 4, 3) + tuple(d.event_shape)
    with pytest.raises((ValueError, RuntimeError)):
        d.expand((4, 5))


@pytest.mark.parametrize("name", sorted(CASES))
def test_moment_and_entropy_shapes(name):
    d = CASES[name]()
    full = (3,) + tuple(d.event_shape)
    for attr in ("mean", "variance", "stddev", "mode"):
        try:
            value = getattr(d, attr)
        except NotImplementedError:
            continue
        assert _shape(value) == full, (name, attr)
    try:
        assert _shape(d.entropy()) == (3,)
    except NotImplementedError:
        pass


def test_sample_n_warns_and_matches_sample():
    d = D.Normal(fiamma.zeros(3), 1.0)
    with pytest.warns(UserWarning, match="sample_n"):
        assert _shape(d.sample_n(4)) == (4, 3)


def test_scalar_parameters_give_empty_batch():
    assert _shape(D.Normal(0.0, 1.0).batch_shape) == ()
    assert _shape(D.Normal(0.0, 1.0).sample((5,))) == (5,)
    assert _shape(D.Gamma(2.0, 1.0).sample()) == ()
    assert _shape(D.Bernoulli(0.3).sample((2, 2))) == (2, 2)
    assert _shape(D.Uniform(0.0, 1.0).rsample()) == ()


def test_enumerate_support():
    c = D.Categorical(probs=fiamma.ones(2, 3) / 3)
    assert c.enumerate_support().tolist() == [[0, 0], [1, 1], [2, 2]]
    assert _shape(c.enumerate_support(expand=False)) == (3, 1)
    b = D.Bernoulli(probs=fiamma.tensor([0.3, 0.6]))
    assert b.enumerate_support().tolist() == [[0.0, 0.0], [1.0, 1.0]]
    oh = D.OneHotCategorical(probs=fiamma.ones(2, 3) / 3)
    assert _shape(oh.enumerate_support()) == (3, 2, 3)
    bi = D.Binomial(3, probs=fiamma.tensor([0.3, 0.6]))
    assert _shape(bi.enumerate_support()) == (4, 2)
    with pytest.raises(NotImplementedError, match="inhomogeneous"):
        D.Binomial(fiamma.tensor([2.0, 3.0]), probs=fiamma.tensor([0.3, 0.6])).entropy()
