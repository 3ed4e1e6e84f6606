"""``functorch.experimental.control_flow``: ``cond`` (:func:`fiamma.cond`, PyTorch's
``torch.cond``)."""

from fiamma import cond

__all__ = ["cond"]
