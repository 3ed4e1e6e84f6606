"""``torch.optim.radam``: PyTorch"s module path of :class:`RAdam` (defined in
``fiamma.optim.adam``), for programs that import it from there
(``from torch.optim.radam import RAdam``)."""

from fiamma.optim.adam import RAdam

__all__ = ["RAdam"]
