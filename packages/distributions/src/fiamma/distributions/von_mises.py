"""``torch.distributions.von_mises`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``VonMises``)."""

from fiamma.distributions import VonMises  # noqa: F401

__all__ = ["VonMises"]
