"""Continuous relaxations of discrete variables: ``ContinuousBernoulli``,
``LogitRelaxedBernoulli`` / ``RelaxedBernoulli`` (binary Concrete) and
``ExpRelaxedCategorical`` / ``RelaxedOneHotCategorical`` (Gumbel-softmax). All are
reparameterised.

>>> import fiamma
>>> from fiamma.distributions import RelaxedOneHotCategorical
>>> d = RelaxedOneHotCategorical(fiamma.tensor(0.5), logits=fiamma.zeros(3))
>>> round(d.rsample().sum().item(), 5)
1.0
"""

import math
from numbers import Number

import fiamma
from fiamma.distributions import constraints
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
from fiamma.distributions.transformed_distribution import TransformedDistribution
from fiamma.distributions.transforms import ExpTransform, SigmoidTransform
from fiamma.distributions.utils import (
    broadcast_all,
    clamp_probs,
    lazy_property,
    logits_to_probs,
)

__all__ = ["ContinuousBernoulli", "ExpRelaxedCategorical", "LogitRelaxedBernoulli",
           "RelaxedBernoulli", "RelaxedOneHotCategorical"]


class ContinuousBernoulli(_BinaryProbsLogits, ExponentialFamily):
    """The continuous Bernoulli on [0, 1] (Loaiza-Ganem and Cunningham 2019): density
    C(p) p^x (1 - p)^(1 - x). Near p = 1/2 (inside ``lims``) the normaliser and moments use
    their Taylor expansions, where the closed forms cancel.

    >>> import fiamma
    >>> from fiamma.distributions import ContinuousBernoulli
    >>> round(ContinuousBernoulli(probs=fiamma.tensor(0.5)).mean.item(), 5)
    0.5
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        _one_of("ContinuousBernoulli", probs, logits)
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
            # probs are clamped away from 0 and 1 below, so check them before that
            validate = Distribution._validate_args if validate_args is None else validate_args
            if validate and not bool(self.arg_constraints["probs"].check(self.probs).all()):
                raise ValueError(f"Expected parameter probs (Tensor of shape "
                                 f"{tuple(self.probs.shape)}) of distribution "
                                 "ContinuousBernoulli to satisfy the constraint "
                                 f"{self.arg_constraints['probs']!r}, but found invalid "
                                 f"values:\n{self.probs}")
            self.probs = clamp_probs(self.probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = fiamma.Size() if is_scalar else self._param.size()
        self._lims = lims
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        new._lims = self._lims
        batch_shape = fiamma.Size(tuple(batch_shape))
        _expand_probs_logits(new, self, batch_shape)
        super(ContinuousBernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        return fiamma.where(self._outside_unstable_region(), self.probs, self._lims[0])

    def _cont_bern_log_norm(self):
        """log C(p), C(p) = 2 atanh(1 - 2p) / (1 - 2p), with its Taylor series near 1/2."""
        cut = self._cut_probs()
        below = fiamma.where(cut <= 0.5, cut, 0.0)
        above = fiamma.where(cut >= 0.5, cut, 1.0)
        log_norm = ((-cut).log1p() - cut.log()).abs().log() - fiamma.where(
            cut <= 0.5, (-2.0 * below).log1p(), (2.0 * above - 1.0).log())
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return fiamma.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / ((-cut).log1p() - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return fiamma.where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self):
        return self.variance.sqrt()

    @property
    def variance(self):
        cut = self._cut_probs()
        vars_ = (cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2)
                 + 1.0 / ((-cut).log1p() - cut.log()).pow(2))
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return fiamma.where(self._outside_unstable_region(), vars_, taylor)

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    def sample(self, sample_shape=()):
        with fiamma.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = fiamma.rand(tuple(shape), dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -_bce_with_logits(logits, value) + self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = fiamma.where(self._outside_unstable_region(), cdfs, value)
        return fiamma.where(value <= 0.0, 0.0, fiamma.where(value >= 1.0, 1.0, unbounded))

    def icdf(self, value):
        cut = self._cut_probs()
        return fiamma.where(
            self._outside_unstable_region(),
            ((-cut + value * (2.0 * cut - 1.0)).log1p() - (-cut).log1p())
            / (cut.log() - (-cut).log1p()),
            value)

    def entropy(self):
        log_probs0 = (-self.probs).log1p()
        log_probs1 = self.probs.log()
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        out = (x <= self._lims[0] - 0.5) | (x > self._lims[1] - 0.5)
        cut = fiamma.where(out, x, self._lims[0] - 0.5)
        log_norm = (cut.exp() - 1.0).abs().log() - cut.abs().log()
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return fiamma.where(out, log_norm, taylor)


class LogitRelaxedBernoulli(_BinaryProbsLogits, Distribution):
    """The logit of a ``RelaxedBernoulli`` sample (binary Concrete in logit space).

    >>> import fiamma
    >>> from fiamma.distributions import LogitRelaxedBernoulli
    >>> LogitRelaxedBernoulli(fiamma.tensor(0.5), probs=fiamma.tensor([0.3])).rsample().shape
    fiamma.Size([1])
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        _one_of("LogitRelaxedBernoulli", probs, logits)
        self.temperature = temperature if isinstance(temperature, fiamma.Tensor) else \
            fiamma.tensor(float(temperature))
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = fiamma.Size() if is_scalar else self._param.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogitRelaxedBernoulli, _instance)
        batch_shape = fiamma.Size(tuple(batch_shape))
        new.temperature = self.temperature
        _expand_probs_logits(new, self, batch_shape)
        super(LogitRelaxedBernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    has_rsample = True

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(tuple(shape)))
        u = clamp_probs(fiamma.rand(tuple(shape), dtype=probs.dtype, device=probs.device))
        return (u.log() - (-u).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value * self.temperature
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class _RelaxedParams:
    """``temperature``, ``logits`` and ``probs`` of a relaxed distribution, read from the
    log-space ``base_dist`` it transforms."""

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs


class RelaxedBernoulli(_RelaxedParams, TransformedDistribution):
    """The binary Concrete distribution on (0, 1): sigmoid of a ``LogitRelaxedBernoulli``;
    ``temperature`` -> 0 approaches ``Bernoulli(probs)``.

    >>> import fiamma
    >>> from fiamma.distributions import RelaxedBernoulli
    >>> x = RelaxedBernoulli(fiamma.tensor(0.1), probs=fiamma.tensor([0.5])).rsample()
    >>> bool((x > 0).all() and (x < 1).all())
    True
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base_dist = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base_dist, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedBernoulli, _instance)
        return super().expand(batch_shape, _instance=new)


class ExpRelaxedCategorical(_CategoricalParams, Distribution):
    """The log of a ``RelaxedOneHotCategorical`` sample (Gumbel-softmax in log space).

    >>> import fiamma
    >>> from fiamma.distributions import ExpRelaxedCategorical
    >>> d = ExpRelaxedCategorical(fiamma.tensor(1.0), probs=fiamma.tensor([0.2, 0.8]))
    >>> round(d.rsample().exp().sum().item(), 5)
    1.0
    """

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature if isinstance(temperature, fiamma.Tensor) else \
            fiamma.tensor(float(temperature))
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ExpRelaxedCategorical, _instance)
        batch_shape = fiamma.Size(tuple(batch_shape))
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        super(ExpRelaxedCategorical, new).__init__(batch_shape, self.event_shape,
                                                   validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = clamp_probs(fiamma.rand(tuple(shape), dtype=self.logits.dtype,
                                    device=self.logits.device))
        gumbels = -((-(u.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(-1, keepdim=True)

    def log_prob(self, value):
        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_scale = (fiamma.full_like(self.temperature, float(k)).lgamma()
                     - self.temperature.log() * -(k - 1))
        score = logits - value * self.temperature
        score = (score - score.logsumexp(-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(_RelaxedParams, TransformedDistribution):
    """The Concrete / Gumbel-softmax distribution on the simplex; ``temperature`` -> 0
    approaches ``OneHotCategorical(probs)``.

    >>> import fiamma
    >>> from fiamma.distributions import RelaxedOneHotCategorical
    >>> d = RelaxedOneHotCategorical(fiamma.tensor(2.0), probs=fiamma.tensor([0.1, 0.9]))
    >>> tuple(d.rsample((4,)).shape)
    (4, 2)
    """

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base_dist = ExpRelaxedCategorical(temperature, probs, logits,
                                          validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedOneHotCategorical, _instance)
        return super().expand(batch_shape, _instance=new)
