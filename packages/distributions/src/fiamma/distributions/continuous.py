"""Univariate continuous distributions with closed-form inverse CDFs: ``Uniform``, ``Cauchy``,
``HalfCauchy``, ``Laplace``, ``Gumbel``, ``Pareto``, ``Weibull``, ``Kumaraswamy``. Each is
reparameterised (the sample is a differentiable function of a uniform or of a simpler sample).

>>> import fiamma
>>> from fiamma.distributions import Uniform
>>> Uniform(0.0, 4.0).log_prob(fiamma.tensor(1.0)).exp().item()
0.25
"""

import math

import fiamma
from fiamma.distributions import constraints
from fiamma.distributions.distribution import Distribution
from fiamma.distributions.gamma import Exponential
from fiamma.distributions.normal import _HalfDistribution
from fiamma.distributions.transformed_distribution import TransformedDistribution
from fiamma.distributions.transforms import (
    AffineTransform,
    ExpTransform,
    PowerTransform,
)
from fiamma.distributions.utils import _batch_shape_of, broadcast_all, euler_constant

__all__ = ["Cauchy", "Gumbel", "HalfCauchy", "Kumaraswamy", "Laplace", "Pareto", "Uniform",
           "Weibull"]


def _uniform(shape, like):
    return fiamma.rand(tuple(shape), dtype=like.dtype, device=like.device)


def _init_expand(new, self, cls, batch_shape, names):
    batch_shape = fiamma.Size(tuple(batch_shape))
    for n in names:
        setattr(new, n, getattr(self, n).expand(batch_shape))
    Distribution.__init__(new, batch_shape, validate_args=False)
    new._validate_args = self._validate_args
    return new


class Uniform(Distribution):
    """Uniform on the half-open interval [low, high).

    >>> import fiamma
    >>> from fiamma.distributions import Uniform
    >>> Uniform(fiamma.tensor([0.0]), fiamma.tensor([2.0])).mean.tolist()
    [1.0]
    """

    arg_constraints = {"low": constraints.dependent(is_discrete=False, event_dim=0),
                       "high": constraints.dependent(is_discrete=False, event_dim=0)}
    has_rsample = True

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return fiamma.full_like(self.high, math.nan)

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(_batch_shape_of((low, high), self.low), validate_args=validate_args)
        if self._validate_args and not bool(fiamma.lt(self.low, self.high).all()):
            raise ValueError("Uniform is not defined when low >= high: expected parameter low "
                             f"< high, got low={self.low}, high={self.high}")

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Uniform, _instance)
        return _init_expand(new, self, Uniform, batch_shape, ("low", "high"))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        rand = _uniform(shape, self.low)
        return self.low + rand * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        lb = self.low.le(value).to(self.low.dtype)
        ub = self.high.gt(value).to(self.low.dtype)
        return (lb * ub).log() - (self.high - self.low).log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        result = (value - self.low) / (self.high - self.low)
        return result.clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return (self.high - self.low).log()


class Cauchy(Distribution):
    """Cauchy(loc, scale): density 1 / (pi scale (1 + ((x - loc) / scale)^2)).

    >>> import fiamma
    >>> from fiamma.distributions import Cauchy
    >>> Cauchy(0.0, 1.0).cdf(fiamma.tensor(0.0)).item()
    0.5
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(_batch_shape_of((loc, scale), self.loc), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Cauchy, _instance)
        return _init_expand(new, self, Cauchy, batch_shape, ("loc", "scale"))

    @property
    def mean(self):
        return fiamma.full(tuple(self._extended_shape()), math.nan, dtype=self.loc.dtype)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return fiamma.full(tuple(self._extended_shape()), math.inf, dtype=self.loc.dtype)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = _uniform(shape, self.loc)
        return self.loc + self.scale * (math.pi * (u - 0.5)).tan()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        return -math.log(math.pi) - self.scale.log() - (z * z).log1p()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value):
        return (math.pi * (value - 0.5)).tan() * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


class HalfCauchy(_HalfDistribution):
    """|X| for X ~ Cauchy(0, scale).

    >>> import fiamma
    >>> from fiamma.distributions import HalfCauchy
    >>> round(HalfCauchy(1.0).cdf(fiamma.tensor(1.0)).item(), 4)
    0.5
    """

    _base = Cauchy

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(HalfCauchy, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return fiamma.full(tuple(self._extended_shape()), math.inf, dtype=self.scale.dtype)

    @property
    def variance(self):
        return self.base_dist.variance

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = fiamma.as_tensor(value, dtype=self.base_dist.scale.dtype)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return fiamma.where(value >= 0, log_prob, -math.inf)


class Laplace(Distribution):
    """Laplace(loc, scale): density exp(-|x - loc| / scale) / (2 scale).

    >>> import fiamma
    >>> from fiamma.distributions import Laplace
    >>> round(Laplace(0.0, 1.0).log_prob(fiamma.tensor(0.0)).item(), 5)
    -0.69315
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return (2 ** 0.5) * self.scale

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(_batch_shape_of((loc, scale), self.loc), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Laplace, _instance)
        return _init_expand(new, self, Laplace, batch_shape, ("loc", "scale"))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        finfo = fiamma.finfo(self.loc.dtype)
        u = _uniform(shape, self.loc) * 2 - 1
        u = u.clamp(min=finfo.eps - 1, max=1)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = value - self.loc
        return 0.5 - 0.5 * z.sign() * (-z.abs() / self.scale).expm1()

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self):
        return 1 + (2 * self.scale).log()


class Gumbel(TransformedDistribution):
    """Gumbel(loc, scale): loc - scale log(-log U) for U uniform.

    >>> import fiamma
    >>> from fiamma.distributions import Gumbel
    >>> round(Gumbel(0.0, 1.0).mean.item(), 5)   # Euler's constant
    0.57722
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        finfo = fiamma.finfo(self.loc.dtype)
        base_dist = Uniform(fiamma.full_like(self.loc, finfo.tiny),
                            fiamma.full_like(self.loc, 1 - finfo.eps), validate_args=False)
        transforms = [ExpTransform().inv, AffineTransform(loc=0, scale=-fiamma.ones_like(
            self.scale)), ExpTransform().inv, AffineTransform(loc=self.loc, scale=-self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gumbel, _instance)
        new.loc = self.loc.expand(tuple(batch_shape))
        new.scale = self.scale.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    @property
    def mean(self):
        return self.loc + self.scale * euler_constant

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def entropy(self):
        return self.scale.log() + (1 + euler_constant)


class Pareto(TransformedDistribution):
    """Pareto(scale, alpha): scale * exp(Exponential(alpha)); support x >= scale.

    >>> import fiamma
    >>> from fiamma.distributions import Pareto
    >>> Pareto(fiamma.tensor(1.0), fiamma.tensor(3.0)).mean.item()
    1.5
    """

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = broadcast_all(scale, alpha)
        base_dist = Exponential(self.alpha, validate_args=validate_args)
        transforms = [ExpTransform(), AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Pareto, _instance)
        new.scale = self.scale.expand(tuple(batch_shape))
        new.alpha = self.alpha.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        # inf for alpha <= 1 by the division by 0 itself (as PyTorch: the gradient w.r.t. scale
        # is then inf, where a masked branch gave 0 * inf = NaN)
        a = self.alpha.clamp(min=1)
        return a * self.scale / (a - 1)

    @property
    def mode(self):
        return self.scale

    @property
    def variance(self):
        a = self.alpha.clamp(min=2)  # inf for alpha <= 2 (a - 2 = 0), as the mean
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.greater_than_eq(self.scale)

    def entropy(self):
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())


class Weibull(TransformedDistribution):
    """Weibull(scale, concentration): scale * Exponential(1)^(1 / concentration).

    >>> import fiamma
    >>> from fiamma.distributions import Weibull
    >>> Weibull(fiamma.tensor(2.0), fiamma.tensor(1.0)).mean.item()
    2.0
    """

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base_dist = Exponential(fiamma.ones_like(self.scale), validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration_reciprocal),
                      AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Weibull, _instance)
        new.scale = self.scale.expand(tuple(batch_shape))
        new.concentration = self.concentration.expand(tuple(batch_shape))
        new.concentration_reciprocal = new.concentration.reciprocal()
        base_dist = self.base_dist.expand(tuple(batch_shape))
        transforms = [PowerTransform(exponent=new.concentration_reciprocal),
                      AffineTransform(loc=0, scale=new.scale)]
        TransformedDistribution.__init__(new, base_dist, transforms, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.scale * fiamma.lgamma(1 + self.concentration_reciprocal).exp()

    @property
    def mode(self):
        return self.scale * ((self.concentration - 1) / self.concentration).pow(
            self.concentration.reciprocal())

    @property
    def variance(self):
        return self.scale.pow(2) * (
            fiamma.lgamma(1 + 2 * self.concentration_reciprocal).exp()
            - fiamma.lgamma(1 + self.concentration_reciprocal).exp().pow(2))

    def entropy(self):
        return (euler_constant * (1 - self.concentration_reciprocal)
                + (self.scale * self.concentration_reciprocal).log() + 1)


class Kumaraswamy(TransformedDistribution):
    """Kumaraswamy(concentration1 a, concentration0 b) on (0, 1): density a b x^(a-1)
    (1 - x^a)^(b-1); sampled as (1 - U^(1/b))^(1/a).

    >>> import fiamma
    >>> from fiamma.distributions import Kumaraswamy
    >>> Kumaraswamy(fiamma.tensor(1.0), fiamma.tensor(1.0)).mean.item()
    0.5
    """

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base_dist = Uniform(fiamma.zeros_like(self.concentration0),
                            fiamma.ones_like(self.concentration0), validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()),
                      AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(tuple(batch_shape))
        new.concentration0 = self.concentration0.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        log_mode = (self.concentration0.reciprocal() * (-self.concentration0).log1p()
                    - (-self.concentration0 * self.concentration1).log1p())
        log_mode = fiamma.where((self.concentration0 < 1) | (self.concentration1 < 1),
                                math.nan, log_mode)
        return log_mode.exp()

    @property
    def variance(self):
        return (_moments(self.concentration1, self.concentration0, 2)
                - _moments(self.concentration1, self.concentration0, 1).pow(2))

    def entropy(self):
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        h0 = fiamma.digamma(self.concentration0 + 1) + euler_constant
        return t0 + t1 * h0 - self.concentration1.log() - self.concentration0.log()


def _moments(a, b, n):
    """E[X^n] = b B(1 + n / a, b) for the Kumaraswamy distribution."""
    arg1 = 1 + n / a
    log_value = fiamma.lgamma(arg1) + fiamma.lgamma(b) - fiamma.lgamma(arg1 + b)
    return b * log_value.exp()
