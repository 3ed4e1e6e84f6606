"""``torch.distributions.weibull`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``Weibull``)."""

from fiamma.distributions import Weibull  # noqa: F401

__all__ = ["Weibull"]
