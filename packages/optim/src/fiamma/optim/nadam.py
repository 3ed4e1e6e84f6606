"""``torch.optim.nadam``: PyTorch"s module path of :class:`NAdam` (defined in
``fiamma.optim.adam``), for programs that import it from there
(``from torch.optim.nadam import NAdam``)."""

from fiamma.optim.adam import NAdam

__all__ = ["NAdam"]
