"""``fiamma.sparse``: operations on sparse tensors (PyTorch's ``torch.sparse``).

Sparse tensors come from ``fiamma.sparse_coo_tensor`` or ``Tensor.to_sparse()`` (COO) and
``fiamma.sparse_csr_tensor`` / ``Tensor.to_sparse_csr()`` and their CSC, BSR, BSC siblings; see
docs/porting.md ("Sparse tensors") for what they support.

>>> import fiamma
>>> s = fiamma.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2))
>>> fiamma.sparse.mm(s, fiamma.ones(2, 2)).tolist()
[[2.0, 2.0], [3.0, 3.0]]
>>> fiamma.sparse.sum(s).item()
5.0
"""

import importlib as _importlib

from fiamma import _dtype as _D, _sparse_compressed as _compressed_mod
from fiamma._sparse_coo import SparseCOO as _SparseCOO, sparse_coo_tensor as _coo
from fiamma._sparse_ops import (
    addmm as _addmm,
    log_softmax as _log_softmax,
    mm as _mm,
    softmax as _softmax,
    sparse_sum as _sparse_sum,
)

__all__ = ["mm", "addmm", "sum", "softmax", "log_softmax", "sampled_addmm",
           "check_sparse_tensor_invariants"]


def _compressed():
    return _importlib.import_module("fiamma._sparse_compressed_ops")


def _sparse_arg(op, t, name):
    if not isinstance(t, _SparseCOO) and not getattr(t, "_compressed", False):
        raise TypeError(f"fiamma.sparse.{op}: {name} must be a sparse tensor, got "
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
    if not isinstance(input, _SparseCOO):
        if dim is not None:
            raise RuntimeError(f"fiamma.sparse.sum: reduction over dims of a {input.layout.name} "
                               "tensor is not supported (PyTorch: coalesce expected sparse "
                               "coordinate tensor layout)")
        return _compressed().sparse_sum(input, None, dtype=dtype)
    return _sparse_sum(input, dim, dtype=dtype)


def softmax(input, dim, *, dtype=None):
    """Softmax along ``dim`` over the specified entries (unspecified ones count as -inf)."""
    _sparse_arg("softmax", input, "input")
    return _softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    """Log-softmax along ``dim`` over the specified entries."""
    _sparse_arg("log_softmax", input, "input")
    return _log_softmax(input, dim, dtype=dtype)


def sampled_addmm(input, mat1, mat2, *, beta=1.0, alpha=1.0, out=None):
    """``beta * input + alpha * (mat1 @ mat2)`` evaluated only at the pattern of the sparse CSR
    ``input``: a CSR tensor with ``input``'s pattern (``torch.sparse.sampled_addmm``).

    >>> import fiamma
    >>> s = fiamma.sparse_csr_tensor([0, 1, 2], [1, 0], [1.0, 1.0])
    >>> fiamma.sparse.sampled_addmm(s, fiamma.ones(2, 3), fiamma.ones(3, 2)).values().tolist()
    [4.0, 4.0]
    """
    return _compressed().sampled_addmm(input, mat1, mat2, beta=beta, alpha=alpha, out=out)


_CHECK = _compressed_mod._CHECK  # one state, read by the constructors


class check_sparse_tensor_invariants:
    """Turn the full invariant checks of the sparse constructors on or off (PyTorch's
    ``torch.sparse.check_sparse_tensor_invariants``): a context manager and decorator, with
    the static ``enable()``, ``disable()`` and ``is_enabled()``. fiamma always checks what
    guards memory (offsets and indices against the size); this adds the ordering checks
    (sorted, distinct indices in each compressed slice, as ``check_invariants=True``)."""

    def __init__(self, enable=True):
        self.state = bool(enable)
        self.saved = None

    @staticmethod
    def is_enabled():
        return _CHECK[0]

    @staticmethod
    def enable():
        _CHECK[0] = True

    @staticmethod
    def disable():
        _CHECK[0] = False

    def __enter__(self):
        self.saved = _CHECK[0]
        _CHECK[0] = self.state
        return self

    def __exit__(self, *exc):
        _CHECK[0] = self.saved
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with check_sparse_tensor_invariants(self.state):
                return fn(*args, **kwargs)

        return wrapped


class _SparseLegacyType(type):
    """PyTorch's legacy sparse type names (``torch.sparse.FloatTensor`` and friends): CPU
    sparse COO tensors of one dtype for ``isinstance``, and constructors: ``(indices, values[,
    size])`` (as ``sparse_coo_tensor``; the values keep their dtype, as in PyTorch), ``(size)``
    or ``(*sizes)`` (no stored entries), ``()`` (shape ``(0,)``). Indices are checked against
    the size, as ``sparse_coo_tensor`` always does."""

    def __instancecheck__(cls, obj):
        return (isinstance(obj, _SparseCOO) and obj.dtype is cls.dtype
                and obj.device.type == "cpu")

    def __subclasscheck__(cls, sub):
        return sub is cls

    def __call__(cls, *args, device=None):
        tensor = _importlib.import_module("fiamma._tensor")
        name = f"{_D.NAMESPACE}sparse.{cls.__name__}"
        if device is not None and str(device) != "cpu":
            raise RuntimeError(f"{name}: legacy constructors make CPU tensors, got "
                               f"device={device}")
        if args and isinstance(args[0], tensor.Tensor):
            if len(args) not in (2, 3) or not isinstance(args[1], tensor.Tensor):
                raise TypeError(f"{name}: expected (indices, values) or (indices, values, size), "
                                f"got {len(args)} arguments")
            if args[0].dtype is not _D.int64:
                raise RuntimeError(f"{name}: indices must be an int64 tensor, got "
                                   f"{args[0].dtype}")
            return _coo(*args)
        if len(args) == 1 and isinstance(args[0], (tuple, list)):
            args = tuple(args[0])
        sizes = args if args else (0,)
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in sizes):
            raise TypeError(f"{name}: expected (indices, values[, size]) or integer sizes, got "
                            f"{args!r}")
        zeros = _importlib.import_module("fiamma._creation").zeros
        return _coo(zeros(len(sizes), 0, dtype=_D.int64), zeros(0, dtype=cls.dtype), sizes)

    def __repr__(cls):
        return f"<class '{_D.NAMESPACE}sparse.{cls.__name__}'>"


def _legacy(name, dt):
    return _SparseLegacyType(name, (), {"dtype": dt, "__module__": "fiamma.sparse",
                                        "__doc__": f"Legacy name: CPU sparse COO tensors of {dt}."})


FloatTensor = _legacy("FloatTensor", _D.float32)
DoubleTensor = _legacy("DoubleTensor", _D.float64)
HalfTensor = _legacy("HalfTensor", _D.float16)
BFloat16Tensor = _legacy("BFloat16Tensor", _D.bfloat16)
LongTensor = _legacy("LongTensor", _D.int64)
IntTensor = _legacy("IntTensor", _D.int32)
ShortTensor = _legacy("ShortTensor", _D.int16)
CharTensor = _legacy("CharTensor", _D.int8)
ByteTensor = _legacy("ByteTensor", _D.uint8)
