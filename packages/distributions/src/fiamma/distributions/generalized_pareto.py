"""``GeneralizedPareto``: the peaks-over-threshold law of extreme-value theory.

>>> import fiamma
>>> from fiamma.distributions import GeneralizedPareto
>>> d = GeneralizedPareto(0.0, 1.0, 0.0)          # concentration 0: Exponential(1)
>>> round(d.cdf(fiamma.tensor(1.0)).item(), 6)
0.632121
"""

import math
from numbers import Number

import fiamma
from fiamma.distributions import constraints
from fiamma.distributions.distribution import Distribution
from fiamma.distributions.utils import broadcast_all

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    """GeneralizedPareto(loc, scale, concentration): survival function
    (1 + concentration z)^(-1 / concentration) with z = (x - loc) / scale (exp(-z) at
    concentration 0). Support [loc, inf) for concentration >= 0, [loc, loc - scale /
    concentration] below 0. Reparameterised through the inverse CDF.

    >>> import fiamma
    >>> from fiamma.distributions import GeneralizedPareto
    >>> GeneralizedPareto(1.0, 2.0, 0.5).mean.item()
    5.0
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive,
                       "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        if all(isinstance(v, Number) for v in (loc, scale, concentration)):
            batch_shape = fiamma.Size()
        else:
            batch_shape = self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(GeneralizedPareto, _instance)
        batch_shape = fiamma.Size(tuple(batch_shape))
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        super(GeneralizedPareto, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _z(self, x):
        return (x - self.loc) / self.scale

    def _safe_concentration(self):
        eq_zero = self.concentration.abs() <= 1e-8
        return eq_zero, fiamma.where(eq_zero, 1.0, self.concentration)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = fiamma.rand(tuple(shape), dtype=self.loc.dtype, device=self.loc.device)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, c = self._safe_concentration()
        y = 1 / c + 1
        nonzero = fiamma.where(y == 0, y, y * (c * z).log1p())
        return -self.scale.log() - fiamma.where(eq_zero, z, nonzero)

    def log_survival_function(self, value):
        """log P(X > value)."""
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, c = self._safe_concentration()
        return fiamma.where(eq_zero, -z, -(c * z).log1p() / c)

    def log_cdf(self, value):
        """log P(X <= value)."""
        return (-self.log_survival_function(value).exp()).log1p()

    def cdf(self, value):
        return self.log_cdf(value).exp()

    def icdf(self, value):
        eq_zero, c = self._safe_concentration()
        logu = (-value).log1p()
        nonzero = self.loc + self.scale / c * (-c * logu).expm1()
        return fiamma.where(eq_zero, self.loc - self.scale * logu, nonzero)

    @property
    def mean(self):
        valid = self.concentration < 1
        c = fiamma.where(valid, self.concentration, 0.5)
        return fiamma.where(valid, self.loc + self.scale / (1 - c), math.nan)

    @property
    def variance(self):
        valid = self.concentration < 0.5
        c = fiamma.where(valid, self.concentration, 0.25)
        return fiamma.where(valid, self.scale.pow(2) / ((1 - c).pow(2) * (1 - 2 * c)), math.nan)

    @property
    def mode(self):
        return self.loc

    def entropy(self):
        return (self.scale.log() + self.concentration + 1).expand(tuple(self._batch_shape))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        lower = self.loc
        upper = fiamma.where(self.concentration < 0, lower - self.scale / self.concentration,
                             math.inf)
        return constraints.interval(lower, upper)
