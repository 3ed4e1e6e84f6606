"""``torch.distributions.log_normal`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``LogNormal``)."""

from fiamma.distributions import LogNormal  # noqa: F401

__all__ = ["LogNormal"]
