"""``torch.distributions.wishart`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``Wishart``)."""

from fiamma.distributions import Wishart  # noqa: F401

__all__ = ["Wishart"]
