"""``torch.distributions.uniform`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``Uniform``)."""

from fiamma.distributions import Uniform  # noqa: F401

__all__ = ["Uniform"]
