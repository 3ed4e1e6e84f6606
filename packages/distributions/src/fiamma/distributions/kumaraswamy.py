"""``torch.distributions.kumaraswamy`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``Kumaraswamy``)."""

from fiamma.distributions import Kumaraswamy  # noqa: F401

__all__ = ["Kumaraswamy"]
