"""``torch.distributions.chi2`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``Chi2``)."""

from fiamma.distributions import Chi2  # noqa: F401

__all__ = ["Chi2"]
