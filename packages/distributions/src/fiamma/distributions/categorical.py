"""Finite discrete distributions: ``Bernoulli``, ``Categorical``, ``OneHotCategorical`` and
``OneHotCategoricalStraightThrough``.

>>> import fiamma
>>> from fiamma.distributions import Categorical
>>> d = Categorical(probs=fiamma.tensor([0.25, 0.75]))
>>> round(d.log_prob(fiamma.tensor(1)).exp().item(), 4)
0.75
"""

import math

import fiamma
from fiamma.distributions import constraints
from fiamma.distributions.distribution import Distribution
from fiamma.distributions.exp_family import ExponentialFamily
from fiamma.distributions.utils import (
    broadcast_all,
    lazy_property,
    logits_to_probs,
    one_hot,
    probs_to_logits,
    softplus,
)

__all__ = ["Bernoulli", "Categorical", "OneHotCategorical", "OneHotCategoricalStraightThrough"]


def _one_of(cls, probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError(f"{cls}: either `probs` or `logits` must be specified, but not both.")


def _bce_with_logits(logits, target):
    """-(target log sigmoid(l) + (1 - target) log sigmoid(-l)) = (1 - target) l + log(1 +
    e^-l), stable, and differentiable at l = 0 (sigmoid(l) - target; the max(l, 0) +
    log1p(e^-|l|) form gave 1 - target there, the kinks of its two terms not cancelling)."""
    return (1 - target) * logits + fiamma.logaddexp(fiamma.zeros_like(logits), -logits)


def _expand_probs_logits(new, old, shape):
    """Gives ``new`` whichever of ``probs``/``logits`` ``old`` holds, expanded to ``shape``
    (also as ``_param``)."""
    for name in ("probs", "logits"):
        if name in old.__dict__:
            new._param = getattr(old, name).expand(shape)
            setattr(new, name, new._param)


class _BinaryProbsLogits:
    """``probs`` and ``logits`` of a two-outcome parameter: the one given is stored (and is
    ``_param``), the other is derived on first use."""

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.size()


class Bernoulli(_BinaryProbsLogits, ExponentialFamily):
    """1 with probability ``probs`` (or ``sigmoid(logits)``), else 0.

    >>> import fiamma
    >>> from fiamma.distributions import Bernoulli
    >>> round(Bernoulli(probs=fiamma.tensor(0.3)).entropy().item(), 4)
    0.6109
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of("Bernoulli", probs, logits)
        is_scalar = not isinstance(probs if probs is not None else logits, fiamma.Tensor)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = fiamma.Size() if is_scalar else self._param.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Bernoulli, _instance)
        batch_shape = fiamma.Size(tuple(batch_shape))
        _expand_probs_logits(new, self, batch_shape)
        super(Bernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return fiamma.where(self.probs == 0.5, math.nan, mode)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with fiamma.no_grad():
            return fiamma.bernoulli(self.probs.detach().expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = fiamma.broadcast_tensors(self.logits, value)
        return -_bce_with_logits(logits, value.to(logits.dtype))

    def entropy(self):
        return _bce_with_logits(self.logits, self.probs)

    def enumerate_support(self, expand=True):
        values = fiamma.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        return softplus(x)


class Categorical(Distribution):
    """One of K categories (integers 0..K-1), from ``probs`` (normalised over the last dim) or
    ``logits`` (unnormalised log-probabilities).

    >>> import fiamma
    >>> from fiamma.distributions import Categorical
    >>> _ = fiamma.manual_seed(0)
    >>> d = Categorical(logits=fiamma.zeros(4, 3))
    >>> tuple(d.sample((2,)).shape), tuple(d.log_prob(fiamma.tensor([0, 1, 2, 0])).shape)
    ((2, 4), (4,))
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(
        constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of("Categorical", probs, logits)
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("Categorical: `probs` parameter must be at least "
                                 "one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("Categorical: `logits` parameter must be at least "
                                 "one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.size()[-1]
        batch_shape = self._param.size()[:-1] if self._param.dim() > 1 else fiamma.Size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = fiamma.Size(tuple(batch_shape))
        param_shape = tuple(batch_shape) + (self._num_events,)
        _expand_probs_logits(new, self, param_shape)
        new._num_events = self._num_events
        super(Categorical, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        return self._param.size()

    @property
    def mean(self):
        return fiamma.full(tuple(self._extended_shape()), math.nan, dtype=self.probs.dtype,
                           device=self.probs.device)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return fiamma.full(tuple(self._extended_shape()), math.nan, dtype=self.probs.dtype,
                           device=self.probs.device)

    def sample(self, sample_shape=()):
        sample_shape = fiamma.Size(tuple(sample_shape))
        with fiamma.no_grad():
            probs_2d = self.probs.detach().reshape(-1, self._num_events)
            n = max(sample_shape.numel(), 1)
            samples_2d = fiamma.multinomial(probs_2d, n, True).T
            if sample_shape.numel() == 0:
                samples_2d = samples_2d[:0]
            return samples_2d.reshape(tuple(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = fiamma.broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self):
        min_real = fiamma.finfo(self.logits.dtype).min
        logits = self.logits.clamp(min=min_real)
        p_log_p = logits * self.probs
        return -p_log_p.sum(-1)

    def enumerate_support(self, expand=True):
        values = fiamma.arange(self._num_events, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values


class _CategoricalParams:
    """``probs``, ``logits`` and ``param_shape`` of a distribution built on a ``Categorical``
    (held as ``_categorical``)."""

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def param_shape(self):
        return self._categorical.param_shape


class OneHotCategorical(_CategoricalParams, Distribution):
    """A ``Categorical`` whose samples are one-hot vectors of length K (event_shape (K,)).

    >>> import fiamma
    >>> from fiamma.distributions import OneHotCategorical
    >>> d = OneHotCategorical(probs=fiamma.tensor([0.0, 1.0, 0.0]))
    >>> d.sample().tolist()
    [0.0, 1.0, 0.0]
    """

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(OneHotCategorical, _instance)
        batch_shape = fiamma.Size(tuple(batch_shape))
        new._categorical = self._categorical.expand(batch_shape)
        super(OneHotCategorical, new).__init__(batch_shape, self.event_shape,
                                               validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def _param(self):
        return self._categorical._param

    @property
    def mean(self):
        return self._categorical.probs

    @property
    def mode(self):
        probs = self._categorical.probs
        return one_hot(probs.argmax(-1), probs.shape[-1], probs.dtype)

    @property
    def variance(self):
        return self._categorical.probs * (1 - self._categorical.probs)

    def sample(self, sample_shape=()):
        probs = self._categorical.probs
        indices = self._categorical.sample(sample_shape)
        return one_hot(indices, probs.shape[-1], probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        indices = value.max(-1)[1]
        return self._categorical.log_prob(indices)

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self.event_shape[0]
        values = fiamma.eye(n, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((n,) + (1,) * len(self.batch_shape) + (n,))
        if expand:
            values = values.expand((n,) + tuple(self.batch_shape) + (n,))
        return values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """``OneHotCategorical`` with the straight-through gradient estimator: ``rsample`` returns
    the one-hot sample in the forward pass and passes gradients to ``probs`` (Bengio et al.)."""

    has_rsample = True

    def rsample(self, sample_shape=()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
