"""``torch.distributions.logistic_normal`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``LogisticNormal``)."""

from fiamma.distributions import LogisticNormal  # noqa: F401

__all__ = ["LogisticNormal"]
