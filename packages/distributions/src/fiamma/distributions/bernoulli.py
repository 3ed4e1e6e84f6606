"""``torch.distributions.bernoulli`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``Bernoulli``)."""

from fiamma.distributions import Bernoulli  # noqa: F401

__all__ = ["Bernoulli"]
