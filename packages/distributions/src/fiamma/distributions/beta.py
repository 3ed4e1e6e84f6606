"""``torch.distributions.beta`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``Beta``)."""

from fiamma.distributions import Beta  # noqa: F401

__all__ = ["Beta"]
