"""``torch.distributions.laplace`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``Laplace``)."""

from fiamma.distributions import Laplace  # noqa: F401

__all__ = ["Laplace"]
