"""``torch.optim.rmsprop``: PyTorch"s module path of :class:`RMSprop` (defined in
``fiamma.optim.adaptive``), for programs that import it from there
(``from torch.optim.rmsprop import RMSprop``)."""

from fiamma.optim.adaptive import RMSprop

__all__ = ["RMSprop"]
