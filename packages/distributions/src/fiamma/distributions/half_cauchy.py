"""``torch.distributions.half_cauchy`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``HalfCauchy``)."""

from fiamma.distributions import HalfCauchy  # noqa: F401

__all__ = ["HalfCauchy"]
