"""``torch.distributions.dirichlet`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``Dirichlet``)."""

from fiamma.distributions import Dirichlet  # noqa: F401

__all__ = ["Dirichlet"]
