"""``torch.distributions.geometric`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``Geometric``)."""

from fiamma.distributions import Geometric  # noqa: F401

__all__ = ["Geometric"]
