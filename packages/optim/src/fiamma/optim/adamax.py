"""``torch.optim.adamax``: PyTorch"s module path of :class:`Adamax` (defined in
``fiamma.optim.adam``), for programs that import it from there
(``from torch.optim.adamax import Adamax``)."""

from fiamma.optim.adam import Adamax

__all__ = ["Adamax"]
