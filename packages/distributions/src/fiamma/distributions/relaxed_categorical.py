"""``torch.distributions.relaxed_categorical`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``ExpRelaxedCategorical``, ``RelaxedOneHotCategorical``)."""

from fiamma.distributions import ExpRelaxedCategorical, RelaxedOneHotCategorical  # noqa: F401

__all__ = ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"]
