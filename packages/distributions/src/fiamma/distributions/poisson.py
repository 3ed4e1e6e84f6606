"""``torch.distributions.poisson`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``Poisson``)."""

from fiamma.distributions import Poisson  # noqa: F401

__all__ = ["Poisson"]
