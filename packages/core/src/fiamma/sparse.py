"""``fiamma.sparse``: operations on sparse COO tensors (PyTorch's ``torch.sparse``).

Sparse tensors come from ``fiamma.sparse_coo_tensor`` or ``Tensor.to_sparse()``; see
docs/porting.md ("Sparse tensors") for what they support.

>>> import fiamma
>>> s = fiamma.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2))
>>> fiamma.sparse.mm(s, fiamma.ones(2, 2)).tolist()
[[2.0, 2.0], [3.0, 3.0]]
>>> fiamma.sparse.sum(s).item()
5.0
"""

from fiamma._sparse_coo import SparseCOO as _SparseCOO
from fiamma._sparse_ops import (
    addmm as _addmm,
    log_softmax as _log_softmax,
    mm as _mm,
    softmax as _softmax,
    sparse_sum as _sparse_sum,
)

__all__ = ["mm", "addmm", "sum", "softmax", "log_softmax"]


def _sparse_arg(op, t, name):
    if not isinstance(t, _SparseCOO):
        raise TypeError(f"fiamma.sparse.{op}: {name} must be a sparse COO tensor, got "
                        f"{type(t).__name__} with layout {getattr(t, 'layout', None)}")


def mm(mat1, mat2, reduce="sum"):
    """``mat1 @ mat2`` with a sparse ``mat1`` (dense or sparse ``mat2``); the gradient of a
    sparse ``mat1`` is sparse with its pattern."""
    _sparse_arg("mm", mat1, "mat1")
    if reduce != "sum":
        raise NotImplementedError(f"fiamma.sparse.mm: reduce={reduce!r} is not supported "
                                  "(only 'sum')")
    return _mm(mat1, mat2)


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """``beta * mat + alpha * (mat1 @ mat2)`` with a sparse ``mat1`` (a dense result)."""
    _sparse_arg("addmm", mat1, "mat1")
    return _addmm(mat, mat1, mat2, beta=beta, alpha=alpha)


def sum(input, dim=None, dtype=None):
    """Sum of a sparse tensor: a 0-d dense tensor without ``dim``; over ``dim`` a sparse tensor
    while sparse dims remain, else dense."""
    _sparse_arg("sum", input, "input")
    return _sparse_sum(input, dim, dtype=dtype)


def softmax(input, dim, *, dtype=None):
    """Softmax along ``dim`` over the specified entries (unspecified ones count as -inf)."""
    _sparse_arg("softmax", input, "input")
    return _softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    """Log-softmax along ``dim`` over the specified entries."""
    _sparse_arg("log_softmax", input, "input")
    return _log_softmax(input, dim, dtype=dtype)
