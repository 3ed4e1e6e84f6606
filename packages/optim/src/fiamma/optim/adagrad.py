"""``torch.optim.adagrad``: PyTorch"s module path of :class:`Adagrad` (defined in
``fiamma.optim.adaptive``), for programs that import it from there
(``from torch.optim.adagrad import Adagrad``)."""

from fiamma.optim.adaptive import Adagrad

__all__ = ["Adagrad"]
