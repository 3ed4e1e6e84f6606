"""``torch.distributions.fishersnedecor`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``FisherSnedecor``)."""

from fiamma.distributions import FisherSnedecor  # noqa: F401

__all__ = ["FisherSnedecor"]
