"""``torch.optim.adadelta``: PyTorch"s module path of :class:`Adadelta` (defined in
``fiamma.optim.adaptive``), for programs that import it from there
(``from torch.optim.adadelta import Adadelta``)."""

from fiamma.optim.adaptive import Adadelta

__all__ = ["Adadelta"]
