"""``torch.optim.rprop``: PyTorch"s module path of :class:`Rprop` (defined in
``fiamma.optim.classic``), for programs that import it from there
(``from torch.optim.rprop import Rprop``)."""

from fiamma.optim.classic import Rprop

__all__ = ["Rprop"]
