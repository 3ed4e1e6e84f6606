"""``torch.nn.modules.flatten``: PyTorch's module path of :class:`Flatten` and
:class:`Unflatten` (defined in ``fiamma.nn.modules.linear``)."""

from fiamma.nn.modules.linear import Flatten, Unflatten

__all__ = ["Flatten", "Unflatten"]
