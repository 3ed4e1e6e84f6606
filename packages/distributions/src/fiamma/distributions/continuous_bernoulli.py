"""``torch.distributions.continuous_bernoulli`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``ContinuousBernoulli``)."""

from fiamma.distributions import ContinuousBernoulli  # noqa: F401

__all__ = ["ContinuousBernoulli"]
