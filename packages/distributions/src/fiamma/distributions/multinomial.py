"""``torch.distributions.multinomial`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``Multinomial``)."""

from fiamma.distributions import Multinomial  # noqa: F401

__all__ = ["Multinomial"]
