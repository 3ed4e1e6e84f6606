"""``torch.optim.sparse_adam``: PyTorch"s module path of :class:`SparseAdam` (defined in
``fiamma.optim.adam``), for programs that import it from there
(``from torch.optim.sparse_adam import SparseAdam``)."""

from fiamma.optim.adam import SparseAdam

__all__ = ["SparseAdam"]
