"""The ``Distribution`` base class (PyTorch's ``torch.distributions.Distribution``).

Shapes: a sample has shape ``sample_shape + batch_shape + event_shape``; ``log_prob`` returns
``sample_shape + batch_shape``. Argument validation is on by default: a parameter outside its
``arg_constraints`` or a value outside ``support`` raises ``ValueError`` naming it;
``Distribution.set_default_validate_args(False)`` or ``validate_args=False`` turns it off.

>>> import fiamma
>>> from fiamma.distributions import Normal
>>> d = Normal(fiamma.zeros(3), 1.0)
>>> tuple(d.sample((5,)).shape), tuple(d.batch_shape), tuple(d.event_shape)
((5, 3), (3,), ())
"""

import warnings

import fiamma
from fiamma.distributions import constraints
from fiamma.distributions.utils import lazy_property

__all__ = ["Distribution"]


def _size(shape, op="Distribution"):
    if isinstance(shape, fiamma.Size):
        return shape
    if isinstance(shape, int):
        return fiamma.Size((shape,))
    try:
        return fiamma.Size(tuple(int(s) for s in shape))
    except TypeError:
        raise TypeError(f"{op}: expected a shape (tuple of ints), got {shape!r}") from None


class Distribution:
    """Abstract base class of probability distributions."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__   # on unless python -O (as PyTorch)
    arg_constraints = {}
    support = None

    @staticmethod
    def set_default_validate_args(value):
        """Set whether validation is on by default (as ``python -O`` would turn it off)."""
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args: expected True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = _size(batch_shape)
        self._event_shape = _size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(f"{self.__class__} does not define `arg_constraints`. Please set "
                              "`arg_constraints = {}` or initialize the distribution with "
                              "`validate_args=False` to turn off validation.", stacklevel=2)
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(
                        getattr(type(self), param, None), lazy_property):
                    continue  # skip checking lazily-constructed args
                value = getattr(self, param)
                valid = constraint.check(value)
                if not bool(valid.all()):
                    raise ValueError(
                        f"Expected parameter {param} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint!r}, but found invalid values:\n{value}")
        super().__init__()

    def expand(self, batch_shape, _instance=None):
        """A new distribution of the same family with ``batch_shape`` (parameters expanded,
        no copy)."""
        raise NotImplementedError(f"{type(self).__name__}.expand is not defined")

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def mean(self):
        raise NotImplementedError(f"{self.__class__} does not implement mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{self.__class__} does not implement variance")

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        """A sample of shape ``sample_shape + batch_shape + event_shape`` (no gradient)."""
        with fiamma.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        """A reparameterised sample: gradients flow to the parameters."""
        raise NotImplementedError(f"{type(self).__name__} has no reparameterised sampler "
                                  "(has_rsample is False); use sample()")

    def sample_n(self, n):
        """``sample((n,))`` (deprecated in PyTorch)."""
        warnings.warn("sample_n will be deprecated. Use .sample((n,)) instead", UserWarning,
                      stacklevel=2)
        return self.sample(fiamma.Size((n,)))

    def log_prob(self, value):
        raise NotImplementedError(f"{type(self).__name__}.log_prob is not defined")

    def cdf(self, value):
        raise NotImplementedError(f"{type(self).__name__}.cdf is not defined")

    def icdf(self, value):
        raise NotImplementedError(f"{type(self).__name__}.icdf is not defined")

    def enumerate_support(self, expand=True):
        raise NotImplementedError(f"{type(self).__name__}.enumerate_support is not defined")

    def entropy(self):
        raise NotImplementedError(f"{type(self).__name__}.entropy is not defined")

    def perplexity(self):
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=()):
        return fiamma.Size(tuple(_size(sample_shape)) + tuple(self._batch_shape)
                           + tuple(self._event_shape))

    def _validate_sample(self, value):
        if not isinstance(value, fiamma.Tensor):
            raise ValueError(f"{type(self).__name__}: the value argument to log_prob must be a "
                             f"Tensor, got {type(value).__name__}")
        event_dim_start = len(value.shape) - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(f"{type(self).__name__}: the right-most size of value must match "
                             f"event_shape: {tuple(value.shape)} vs {tuple(self._event_shape)}.")
        actual_shape = value.shape
        expected_shape = tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"{type(self).__name__}: value argument of shape "
                                 f"{tuple(actual_shape)} is not broadcastable with "
                                 f"batch_shape+event_shape: {tuple(expected_shape)}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{self.__class__} does not define `support` to enable sample "
                          "validation. Please initialize the distribution with "
                          "`validate_args=False` to turn off validation.", stacklevel=2)
            return
        assert support is not None
        valid = support.check(value)
        if not bool(valid.all()):
            raise ValueError("Expected value argument "
                             f"({type(value).__name__} of shape {tuple(value.shape)}) to be "
                             f"within the support ({support!r}) of the distribution {self!r}, "
                             f"but found invalid values:\n{value}")

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom "
                "__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(
            f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
            for p in names)
        return self.__class__.__name__ + "(" + args + ")"
