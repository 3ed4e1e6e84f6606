"""``torch.distributions.exponential`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``Exponential``)."""

from fiamma.distributions import Exponential  # noqa: F401

__all__ = ["Exponential"]
