"""``torch.distributions.pareto`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``Pareto``)."""

from fiamma.distributions import Pareto  # noqa: F401

__all__ = ["Pareto"]
