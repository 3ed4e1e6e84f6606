"""The gamma family: ``Gamma``, ``Chi2``, ``Exponential``, ``InverseGamma``, ``Beta``,
``Dirichlet``.

Gamma, Beta and Dirichlet samples are reparameterised through the implicit gradient of the
gamma sampler (see ``_samplers``); Beta is the first coordinate of a 2-dim Dirichlet, a
Dirichlet is normalised independent gammas, so their gradients are pathwise too.

>>> import fiamma
>>> from fiamma.distributions import Gamma
>>> round(Gamma(2.0, 1.0).log_prob(fiamma.tensor(1.0)).item(), 5)  # log(e^-1)
-1.0
"""

import math
from numbers import Number

import fiamma
import fiamma.special
from fiamma.distributions import constraints
from fiamma.distributions._samplers import standard_gamma
from fiamma.distributions.exp_family import ExponentialFamily
from fiamma.distributions.transformed_distribution import TransformedDistribution
from fiamma.distributions.transforms import PowerTransform
from fiamma.distributions.utils import _batch_shape_of, broadcast_all

__all__ = ["Beta", "Chi2", "Dirichlet", "Exponential", "Gamma", "InverseGamma"]


def _expand(new, self, names, batch_shape, event_shape=None):
    batch_shape = fiamma.Size(tuple(batch_shape))
    for n in names:
        v = getattr(self, n)
        shape = tuple(batch_shape) + (tuple(v.shape[-1:]) if event_shape == "last" else ())
        setattr(new, n, v.expand(shape))
    return batch_shape


class Gamma(ExponentialFamily):
    """Gamma(concentration, rate): density rate^a x^(a-1) e^(-rate x) / Gamma(a).

    >>> import fiamma
    >>> from fiamma.distributions import Gamma
    >>> a = fiamma.tensor([2.0], requires_grad=True)
    >>> Gamma(a, 1.0).rsample((100,)).mean().backward()   # implicit reparameterisation
    >>> a.grad.shape
    fiamma.Size([1])
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        batch_shape = _batch_shape_of((concentration, rate), self.concentration)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = _expand(new, self, ("concentration", "rate"), batch_shape)
        super(Gamma, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        value = standard_gamma(self.concentration.expand(tuple(shape))) / \
            self.rate.expand(tuple(shape))
        return value.clamp(min=fiamma.finfo(value.dtype).tiny)

    def log_prob(self, value):
        value = fiamma.as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        return (fiamma.xlogy(self.concentration, self.rate)
                + fiamma.xlogy(self.concentration - 1, value)
                - self.rate * value - fiamma.lgamma(self.concentration))

    def entropy(self):
        return (self.concentration - self.rate.log() + fiamma.lgamma(self.concentration)
                + (1.0 - self.concentration) * fiamma.digamma(self.concentration))

    @property
    def _natural_params(self):
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x, y):
        return fiamma.lgamma(x + 1) + (x + 1) * (-y.reciprocal()).log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return fiamma.special.gammainc(self.concentration, self.rate * value)


class Chi2(Gamma):
    """Chi-squared with ``df`` degrees of freedom: Gamma(df / 2, 1 / 2).

    >>> import fiamma
    >>> from fiamma.distributions import Chi2
    >>> Chi2(fiamma.tensor(4.0)).mean.item()
    4.0
    """

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        df = df if isinstance(df, fiamma.Tensor) else fiamma.tensor(float(df))
        super().__init__(0.5 * df, fiamma.full_like(df, 0.5), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self):
        return self.concentration * 2


class Exponential(ExponentialFamily):
    """Exponential(rate): density rate e^(-rate x) on x >= 0.

    >>> import fiamma
    >>> from fiamma.distributions import Exponential
    >>> round(Exponential(fiamma.tensor(2.0)).cdf(fiamma.tensor(1.0)).item(), 5)
    0.86466
    """

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return fiamma.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = fiamma.Size() if isinstance(rate, Number) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Exponential, _instance)
        batch_shape = _expand(new, self, ("rate",), batch_shape)
        super(Exponential, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = fiamma.rand(tuple(shape), dtype=self.rate.dtype, device=self.rate.device)
        # -log1p(-u) is exact near u = 0 and finite for u in [0, 1)
        return -(-u).log1p() / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value):
        return -(-value).log1p() / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()

    @property
    def _natural_params(self):
        return (-self.rate,)

    def _log_normalizer(self, x):
        return -(-x).log()


class InverseGamma(TransformedDistribution):
    """1 / X for X ~ Gamma(concentration, rate).

    >>> import fiamma
    >>> from fiamma.distributions import InverseGamma
    >>> InverseGamma(fiamma.tensor(3.0), fiamma.tensor(4.0)).mean.item()
    2.0
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        base_dist = Gamma(concentration, rate, validate_args=validate_args)
        neg_one = -fiamma.ones((), dtype=base_dist.rate.dtype, device=base_dist.rate.device)
        super().__init__(base_dist, PowerTransform(neg_one), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(InverseGamma, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def concentration(self):
        return self.base_dist.concentration

    @property
    def rate(self):
        return self.base_dist.rate

    @property
    def mean(self):
        result = self.rate / (self.concentration - 1)
        return fiamma.where(self.concentration > 1, result, math.inf)

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        result = self.rate.square() / ((self.concentration - 1).square()
                                       * (self.concentration - 2))
        return fiamma.where(self.concentration > 2, result, math.inf)

    def entropy(self):
        return (self.concentration + self.rate.log() + fiamma.lgamma(self.concentration)
                - (1 + self.concentration) * fiamma.digamma(self.concentration))


class Dirichlet(ExponentialFamily):
    """Dirichlet(concentration) over the simplex of the last dimension.

    >>> import fiamma
    >>> from fiamma.distributions import Dirichlet
    >>> Dirichlet(fiamma.tensor([1.0, 3.0])).mean.tolist()
    [0.25, 0.75]
    """

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("Dirichlet: `concentration` parameter must be at least "
                             "one-dimensional.")
        self.concentration = concentration
        batch_shape, event_shape = concentration.shape[:-1], concentration.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = _expand(new, self, ("concentration",), batch_shape, "last")
        super(Dirichlet, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        g = standard_gamma(self.concentration.expand(tuple(shape)))
        x = g / g.sum(-1, keepdim=True)
        finfo = fiamma.finfo(x.dtype)
        return x.clamp(min=finfo.tiny, max=1 - finfo.eps)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (fiamma.xlogy(self.concentration - 1.0, value).sum(-1)
                + fiamma.lgamma(self.concentration.sum(-1))
                - fiamma.lgamma(self.concentration).sum(-1))

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        concentrationm1 = (self.concentration - 1).clamp(min=0.0)
        mode = concentrationm1 / concentrationm1.sum(-1, keepdim=True)
        mask = (self.concentration < 1).all(dim=-1)
        # every concentration < 1: every vertex is a mode; the first, as PyTorch (whose argmax
        # of the all-NaN ratio picks index 0; Beta's mode is then 1)
        k = self.concentration.shape[-1]
        onehot = (fiamma.arange(k, device=mode.device) == 0).to(mode.dtype).expand(mode.shape)
        return fiamma.where(mask.unsqueeze(-1), onehot, mode)

    @property
    def variance(self):
        con0 = self.concentration.sum(-1, keepdim=True)
        return (self.concentration * (con0 - self.concentration)
                / (con0.pow(2) * (con0 + 1)))

    def entropy(self):
        k = self.concentration.size(-1)
        a0 = self.concentration.sum(-1)
        return (fiamma.lgamma(self.concentration).sum(-1) - fiamma.lgamma(a0)
                - (k - a0) * fiamma.digamma(a0)
                - ((self.concentration - 1.0) * fiamma.digamma(self.concentration)).sum(-1))

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return fiamma.lgamma(x).sum(-1) - fiamma.lgamma(x.sum(-1))


class Beta(ExponentialFamily):
    """Beta(concentration1, concentration0) on [0, 1].

    >>> import fiamma
    >>> from fiamma.distributions import Beta
    >>> Beta(fiamma.tensor(1.0), fiamma.tensor(3.0)).mean.item()
    0.25
    """

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        if isinstance(concentration1, Number) and isinstance(concentration0, Number):
            concentration1_concentration0 = fiamma.tensor(
                [float(concentration1), float(concentration0)])
        else:
            concentration1, concentration0 = broadcast_all(concentration1, concentration0)
            concentration1_concentration0 = fiamma.stack([concentration1, concentration0], -1)
        # Beta validates its own arguments, so an error names concentration1/concentration0
        self._dirichlet = Dirichlet(concentration1_concentration0, validate_args=False)
        super().__init__(self._dirichlet._batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Beta, _instance)
        batch_shape = fiamma.Size(tuple(batch_shape))
        new._dirichlet = self._dirichlet.expand(batch_shape)
        super(Beta, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        heads_tails = fiamma.stack([value, 1.0 - value], -1)
        return self._dirichlet.log_prob(heads_tails)

    def entropy(self):
        return self._dirichlet.entropy()

    @property
    def concentration1(self):
        result = self._dirichlet.concentration[..., 0]
        return result

    @property
    def concentration0(self):
        return self._dirichlet.concentration[..., 1]

    @property
    def _natural_params(self):
        return (self.concentration1, self.concentration0)

    def _log_normalizer(self, x, y):
        return fiamma.lgamma(x) + fiamma.lgamma(y) - fiamma.lgamma(x + y)
