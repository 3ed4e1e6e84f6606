"""``torch.distributions.negative_binomial`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``NegativeBinomial``)."""

from fiamma.distributions import NegativeBinomial  # noqa: F401

__all__ = ["NegativeBinomial"]
