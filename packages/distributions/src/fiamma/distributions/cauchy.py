"""``torch.distributions.cauchy`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``Cauchy``)."""

from fiamma.distributions import Cauchy  # noqa: F401

__all__ = ["Cauchy"]
