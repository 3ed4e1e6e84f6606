"""``torch.distributions.half_normal`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``HalfNormal``)."""

from fiamma.distributions import HalfNormal  # noqa: F401

__all__ = ["HalfNormal"]
