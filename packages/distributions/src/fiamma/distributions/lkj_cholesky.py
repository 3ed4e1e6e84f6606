"""``torch.distributions.lkj_cholesky`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``LKJCholesky``)."""

from fiamma.distributions import LKJCholesky  # noqa: F401

__all__ = ["LKJCholesky"]
