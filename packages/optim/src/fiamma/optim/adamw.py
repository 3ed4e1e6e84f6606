"""``torch.optim.adamw``: PyTorch"s module path of :class:`AdamW` (defined in
``fiamma.optim.adam``), for programs that import it from there
(``from torch.optim.adamw import AdamW``)."""

from fiamma.optim.adam import AdamW

__all__ = ["AdamW"]
