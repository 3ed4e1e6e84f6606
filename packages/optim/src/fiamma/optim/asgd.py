"""``torch.optim.asgd``: PyTorch"s module path of :class:`ASGD` (defined in
``fiamma.optim.classic``), for programs that import it from there
(``from torch.optim.asgd import ASGD``)."""

from fiamma.optim.classic import ASGD

__all__ = ["ASGD"]
