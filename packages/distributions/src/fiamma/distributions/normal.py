"""The normal family: ``Normal``, ``LogNormal``, ``HalfNormal``.

>>> import fiamma
>>> from fiamma.distributions import Normal
>>> d = Normal(fiamma.tensor([0.0]), fiamma.tensor([1.0]))
>>> round(d.log_prob(fiamma.tensor([0.0])).item(), 5)
-0.91894
>>> round(d.cdf(fiamma.tensor([0.0])).item(), 3)
0.5
"""

import math
from numbers import Real

import fiamma
from fiamma.distributions import constraints
from fiamma.distributions.exp_family import ExponentialFamily
from fiamma.distributions.transformed_distribution import TransformedDistribution
from fiamma.distributions.transforms import AbsTransform, ExpTransform
from fiamma.distributions.utils import _batch_shape_of, _standard_normal, broadcast_all

__all__ = ["HalfNormal", "LogNormal", "Normal"]

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class Normal(ExponentialFamily):
    """The normal (Gaussian) distribution N(loc, scale^2).

    >>> import fiamma
    >>> from fiamma.distributions import Normal
    >>> mu = fiamma.zeros(2, requires_grad=True)
    >>> Normal(mu, 1.0).rsample((4,)).sum().backward()
    >>> mu.grad.tolist()
    [4.0, 4.0]
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        batch_shape = _batch_shape_of((loc, scale), self.loc)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Normal, _instance)
        batch_shape = fiamma.Size(tuple(batch_shape))
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        super(Normal, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=()):
        with fiamma.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        if isinstance(self.scale, Real):
            log_scale = math.log(self.scale)
        else:
            log_scale = self.scale.log()
        z = (value - self.loc) / self.scale
        return (z * z) * -0.5 - (log_scale + _HALF_LOG_2PI)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + fiamma.erf((value - self.loc) * self.scale.reciprocal()
                                     / math.sqrt(2)))

    def icdf(self, value):
        return self.loc + self.scale * fiamma.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()

    @property
    def _natural_params(self):
        return (self.loc / self.scale.pow(2), -0.5 * self.scale.pow(2).reciprocal())

    def _log_normalizer(self, x, y):
        return -0.25 * x.pow(2) / y + 0.5 * (-math.pi / y).log()


class LogNormal(TransformedDistribution):
    """exp(X) for X ~ Normal(loc, scale).

    >>> import fiamma
    >>> from fiamma.distributions import LogNormal
    >>> round(LogNormal(0.0, 1.0).mean.item(), 4)
    1.6487
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base_dist = Normal(loc, scale, validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self):
        return self.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mean(self):
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self):
        return (self.loc - self.scale.square()).exp()

    @property
    def variance(self):
        scale_sq = self.scale.pow(2)
        return scale_sq.expm1() * (2 * self.loc + scale_sq).exp()

    def entropy(self):
        return self.base_dist.entropy() + self.loc


class _HalfDistribution(TransformedDistribution):
    """|X| for X ~ ``_base(0, scale)``, a distribution symmetric about 0 (``HalfNormal``,
    ``HalfCauchy``): density, cdf and entropy follow from the base's by folding."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _base = None

    def __init__(self, scale, validate_args=None):
        base_dist = self._base(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mode(self):
        return fiamma.zeros_like(self.scale)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return fiamma.where(value >= 0, log_prob, -math.inf)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class HalfNormal(_HalfDistribution):
    """|X| for X ~ Normal(0, scale).

    >>> import fiamma
    >>> from fiamma.distributions import HalfNormal
    >>> round(HalfNormal(1.0).mean.item(), 4)
    0.7979
    """

    _base = Normal

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(HalfNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)
