"""``torch.distributions.binomial`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``Binomial``)."""

from fiamma.distributions import Binomial  # noqa: F401

__all__ = ["Binomial"]
