"""Count distributions: ``Binomial``, ``Multinomial``, ``Poisson``, ``Geometric``,
``NegativeBinomial``.

>>> import fiamma
>>> from fiamma.distributions import Poisson
>>> round(Poisson(fiamma.tensor(2.0)).log_prob(fiamma.tensor(0.0)).item(), 4)
-2.0
"""

from numbers import Number

import fiamma
from fiamma.distributions import _samplers, constraints
from fiamma.distributions.categorical import (
    Categorical,
    _bce_with_logits,
    _BinaryProbsLogits,
    _CategoricalParams,
    _expand_probs_logits,
    _one_of,
)
from fiamma.distributions.distribution import Distribution
from fiamma.distributions.exp_family import ExponentialFamily
from fiamma.distributions.gamma import Gamma
from fiamma.distributions.utils import (
    broadcast_all,
    lazy_property,
    logits_to_probs,
    logsigmoid,
    probs_to_logits,
)

__all__ = ["Binomial", "Geometric", "Multinomial", "NegativeBinomial", "Poisson"]


def _clamp_by_zero(x):
    # max(x, 0) with gradient 1/2 at 0 (as PyTorch)
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


def _expand_params(new, self, batch_shape, names):
    for n in names:
        if n in self.__dict__:
            setattr(new, n, getattr(self, n).expand(tuple(batch_shape)))



def _init_count_params(self, name, total_count, probs, logits):
    """total_count broadcast with probs or logits (exactly one given), in their dtype; the
    Binomial family's shared constructor step."""
    _one_of(name, probs, logits)
    if probs is not None:
        self.total_count, self.probs = broadcast_all(total_count, probs)
        self.total_count = self.total_count.to(self.probs.dtype)
    else:
        self.total_count, self.logits = broadcast_all(total_count, logits)
        self.total_count = self.total_count.to(self.logits.dtype)
    self._param = self.probs if probs is not None else self.logits


def _expand_count_params(new, old, batch_shape):
    """Expand total_count and probs/logits of ``old`` into ``new``; returns the batch shape."""
    batch_shape = fiamma.Size(tuple(batch_shape))
    new.total_count = old.total_count.expand(batch_shape)
    _expand_probs_logits(new, old, batch_shape)
    return batch_shape

class Binomial(_BinaryProbsLogits, Distribution):
    """Number of successes in ``total_count`` Bernoulli(probs) trials.

    >>> import fiamma
    >>> from fiamma.distributions import Binomial
    >>> d = Binomial(10, probs=fiamma.tensor(0.5))
    >>> round(d.log_prob(fiamma.tensor(5.0)).exp().item(), 5)
    0.24609
    """

    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        _init_count_params(self, "Binomial", total_count, probs, logits)
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Binomial, _instance)
        batch_shape = _expand_count_params(new, self, batch_shape)
        super(Binomial, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with fiamma.no_grad():
            return _samplers.binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_factorial_n = fiamma.lgamma(self.total_count + 1)
        log_factorial_k = fiamma.lgamma(value + 1)
        log_factorial_nmk = fiamma.lgamma(self.total_count - value + 1)
        normalize_term = (self.total_count * _clamp_by_zero(self.logits)
                          + self.total_count * (-self.logits.abs()).exp().log1p()
                          - log_factorial_n)
        return value * self.logits - normalize_term - log_factorial_k - log_factorial_nmk

    def entropy(self):
        total_count = int(self.total_count.max().item())
        if not bool((self.total_count == total_count).all()):
            raise NotImplementedError("Binomial.entropy: inhomogeneous total_count is not "
                                      "supported")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        total_count = int(self.total_count.max().item())
        if not bool((self.total_count == total_count).all()):
            raise NotImplementedError("Binomial.enumerate_support: inhomogeneous total_count "
                                      "is not supported")
        values = fiamma.arange(1 + total_count, dtype=self._param.dtype,
                               device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values


class Multinomial(_CategoricalParams, Distribution):
    """Counts of ``total_count`` draws from a ``Categorical(probs)`` (event_shape (K,)).

    >>> import fiamma
    >>> from fiamma.distributions import Multinomial
    >>> d = Multinomial(4, probs=fiamma.tensor([0.5, 0.5]))
    >>> d.sample().sum().item()
    4.0
    """

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("Multinomial: inhomogeneous total_count is not "
                                      f"supported (expected an int, got {type(total_count)})")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = fiamma.Size(tuple(batch_shape))
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = Binomial(total_count=self.total_count, probs=new._categorical.probs,
                                 validate_args=False)
        super(Multinomial, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    def sample(self, sample_shape=()):
        sample_shape = fiamma.Size(tuple(sample_shape))
        samples = self._categorical.sample(fiamma.Size((self.total_count,))
                                           + sample_shape)
        # (total_count, sample..., batch...) -> (sample..., batch..., total_count)
        dims = list(range(1, samples.dim())) + [0]
        samples = samples.permute(*dims)
        counts = fiamma.zeros(tuple(self._extended_shape(sample_shape)),
                              dtype=self.probs.dtype, device=self.probs.device)
        return counts.scatter_add(-1, samples, fiamma.ones_like(samples, dtype=counts.dtype))

    def entropy(self):
        n = fiamma.tensor(float(self.total_count))
        cat_entropy = self._categorical.entropy()
        term1 = n * cat_entropy - fiamma.lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = self._binomial.log_prob(support).exp()
        weights = fiamma.lgamma(support + 1)
        term2 = (binomial_probs * weights).sum(0).sum(-1)
        return term1 + term2

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_factorial_n = fiamma.lgamma(value.sum(-1) + 1)
        log_factorial_xs = fiamma.lgamma(value + 1).sum(-1)
        logits = fiamma.where((value == 0) & (logits == -float("inf")), 0.0, logits)
        log_powers = (logits * value).sum(-1)
        return log_factorial_n - log_factorial_xs + log_powers


class Poisson(ExponentialFamily):
    """Poisson(rate): P(k) = rate^k e^-rate / k!.

    >>> import fiamma
    >>> from fiamma.distributions import Poisson
    >>> Poisson(fiamma.tensor([3.0])).sample((2,)).shape
    fiamma.Size([2, 1])
    """

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = fiamma.Size() if isinstance(rate, Number) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Poisson, _instance)
        batch_shape = fiamma.Size(tuple(batch_shape))
        new.rate = self.rate.expand(batch_shape)
        super(Poisson, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with fiamma.no_grad():
            return _samplers.poisson(self.rate.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return fiamma.xlogy(value, rate) - rate - fiamma.lgamma(value + 1)

    @property
    def _natural_params(self):
        return (self.rate.log(),)

    def _log_normalizer(self, x):
        return x.exp()


class Geometric(Distribution):
    """Number of failures before the first success in Bernoulli(probs) trials.

    >>> import fiamma
    >>> from fiamma.distributions import Geometric
    >>> Geometric(fiamma.tensor(0.25)).mean.item()
    3.0
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of("Geometric", probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        probs_or_logits = probs if probs is not None else logits
        batch_shape = fiamma.Size() if isinstance(probs_or_logits, Number) else \
            (self.probs if probs is not None else self.logits).size()
        super().__init__(batch_shape, validate_args=validate_args)
        if self._validate_args and probs is not None:
            value = self.probs
            if not bool((value > 0).all()):
                raise ValueError("Expected parameter probs (Tensor of shape "
                                 f"{tuple(value.shape)}) of distribution {self!r} to be "
                                 f"positive but found invalid values:\n{value}")

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Geometric, _instance)
        batch_shape = fiamma.Size(tuple(batch_shape))
        _expand_params(new, self, batch_shape, ("probs", "logits"))
        super(Geometric, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return fiamma.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        tiny = fiamma.finfo(self.probs.dtype).tiny
        with fiamma.no_grad():
            u = fiamma.rand(shape, dtype=self.probs.dtype, device=self.probs.device)
            u = u.clamp(min=tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        probs = fiamma.where((probs == 1) & (value == 0), 0.0, probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        return _bce_with_logits(self.logits, self.probs) / self.probs


class NegativeBinomial(_BinaryProbsLogits, Distribution):
    """Number of successes before ``total_count`` failures, success probability ``probs``.

    >>> import fiamma
    >>> from fiamma.distributions import NegativeBinomial
    >>> NegativeBinomial(fiamma.tensor(3.0), probs=fiamma.tensor(0.5)).mean.item()
    3.0
    """

    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        _init_count_params(self, "NegativeBinomial", total_count, probs, logits)
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(NegativeBinomial, _instance)
        batch_shape = _expand_count_params(new, self, batch_shape)
        super(NegativeBinomial, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.total_count * self.logits.exp()

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / fiamma.sigmoid(-self.logits)

    @lazy_property
    def _gamma(self):
        return Gamma(concentration=self.total_count, rate=(-self.logits).exp(),
                     validate_args=False)

    def sample(self, sample_shape=()):
        with fiamma.no_grad():
            rate = self._gamma.sample(sample_shape)
            return _samplers.poisson(rate)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_unnormalized_prob = (self.total_count * logsigmoid(-self.logits)
                                 + value * logsigmoid(self.logits))
        log_normalization = (-fiamma.lgamma(self.total_count + value)
                             + fiamma.lgamma(1.0 + value) + fiamma.lgamma(self.total_count))
        log_normalization = fiamma.where(self.total_count + value == 0.0, 0.0,
                                         log_normalization)
        return log_unnormalized_prob - log_normalization
