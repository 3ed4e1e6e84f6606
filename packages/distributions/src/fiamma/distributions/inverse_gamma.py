"""``torch.distributions.inverse_gamma`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``InverseGamma``)."""

from fiamma.distributions import InverseGamma  # noqa: F401

__all__ = ["InverseGamma"]
