"""``torch.distributions.one_hot_categorical`` at PyTorch's module path: the same classes as
``fiamma.distributions`` (``OneHotCategorical``, ``OneHotCategoricalStraightThrough``)."""

from fiamma.distributions import OneHotCategorical, OneHotCategoricalStraightThrough  # noqa: F401

__all__ = ["OneHotCategorical", "OneHotCategoricalStraightThrough"]
