"""``torch.distributions.lowrank_multivariate_normal`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``LowRankMultivariateNormal``)."""

from fiamma.distributions import LowRankMultivariateNormal  # noqa: F401

__all__ = ["LowRankMultivariateNormal"]
