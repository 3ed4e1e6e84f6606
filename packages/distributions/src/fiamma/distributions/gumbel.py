"""``torch.distributions.gumbel`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``Gumbel``)."""

from fiamma.distributions import Gumbel  # noqa: F401

__all__ = ["Gumbel"]
