"""``torch.export.dynamic_shapes``: :class:`Dim`, its hints and :class:`ShapesCollection`."""

from ._dims import Dim, Range, ShapesCollection, dims

__all__ = ["Dim", "Range", "ShapesCollection", "dims"]
