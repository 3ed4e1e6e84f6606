"""Shape utilities that build new tensors from indices or pieces: tril_indices /
triu_indices, one_hot, block_diag, cartesian_prod, combinations, vander. block_diag records its
own autograd node; cartesian_prod, combinations and vander are compositions of recorded ops;
the index builders and one_hot are not differentiable.
"""

import builtins
import itertools
import operator

import numpy as np

from fiamma import _dtype as D
from fiamma._autograd_api import ops
from fiamma._backend import check
from fiamma._ops.shape_views import _from_np, _rec, _t, _tensors_arg, meshgrid
from fiamma._storage import CPU
from fiamma._tensor import Tensor, new_empty

__all__ = ["tril_indices", "triu_indices", "one_hot", "block_diag", "cartesian_prod",
           "combinations", "vander"]

_index = operator.index


# ---- tril_indices / triu_indices --------------------------------------------------------------

def _tri_indices(op, row, col, offset, dtype, upper):
    row, col, offset = _index(row), _index(col), _index(offset)
    if row < 0 or col < 0:
        raise RuntimeError(f"{op}: row and col must be non-negative, got row={row}, col={col}")
    dt = D.int64 if dtype is None else D.to_dtype(dtype, op)
    if dt not in (D.int64, D.int32):
        raise RuntimeError(f"{op}: dtype must be int64 or int32, got {dt}")
    f = np.triu_indices if upper else np.tril_indices
    r, c = f(row, offset, col)
    return _from_np(np.stack([r, c]).astype(np.int64)).to(dt)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (2, N) coordinates of the lower triangle of a ``row`` x ``col`` matrix, row-major.

    >>> import fiamma
    >>> fiamma.tril_indices(2, 2).tolist()
    [[0, 1, 1], [0, 0, 1]]
    """
    return _to_device(_tri_indices("tril_indices", row, col, offset, dtype, False), device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (2, N) coordinates of the upper triangle of a ``row`` x ``col`` matrix, row-major."""
    return _to_device(_tri_indices("triu_indices", row, col, offset, dtype, True), device)


def _to_device(t, device):
    if device is None:
        from fiamma._storage import _DEFAULT_DEVICE

        device = _DEFAULT_DEVICE.dev
    return t if device is None else t.to(device)


# ---- one_hot, block_diag, cartesian_prod, combinations, vander --------------------------------

def one_hot(tensor, num_classes=-1):
    """int64 one-hot encoding: a trailing dim of ``num_classes`` (-1: max value + 1) holding 1 at
    each value's position. Input must be an int64 index tensor.

    >>> import fiamma
    >>> fiamma.one_hot(fiamma.tensor([0, 2]), 3).tolist()
    [[1, 0, 0], [0, 0, 1]]
    """
    op = "one_hot"
    x = _t(tensor, op, "tensor")
    if x._dtype is not D.int64:
        raise RuntimeError(f"{op}: one_hot is only applicable to index tensor of type int64, "
                           f"got {x._dtype}")
    nc = _index(num_classes)
    if x._numel:
        lo, hi = x.detach().aminmax()
        lo, hi = lo.item(), hi.item()
        if lo < 0:
            raise RuntimeError(f"{op}: Class values must be non-negative, got {lo}")
    if nc == -1:
        if x._numel == 0:
            raise RuntimeError(f"{op}: Can not infer total number of classes from empty tensor.")
        nc = hi + 1
    elif nc < 0:
        raise RuntimeError(f"{op}: num_classes should be -1 or non-negative, got {nc}")
    elif x._numel and hi >= nc:
        raise RuntimeError(f"{op}: Class values must be smaller than num_classes ({nc}), got "
                           f"{hi}")
    dev = x._storage.device
    out = new_empty(x._shape + (nc,), D.int64, dev, zero=True)
    if x._numel and nc:
        flat = x.reshape(-1)
        one = new_empty((), D.int64, dev)
        check(one._storage.backend.fill(one, 0.0, 1, 1), op)
        check(out._storage.backend.index_scatter((flat._numel,), out, 0, (nc,), one, (0,),
                                                 [flat], flat._stride, [nc], [1], 0, None), op)
    return out


def block_diag(*tensors):
    """A block-diagonal matrix from 0-d, 1-D and 2-D tensors (a 0-d tensor is a 1x1 block, a
    1-D tensor a 1xn row), promoted to a common dtype.

    >>> import fiamma
    >>> fiamma.block_diag(fiamma.tensor([[1]]), fiamma.tensor([2, 3])).tolist()
    [[1, 0, 0], [0, 2, 3]]
    """
    op = ops.block_diag
    ts = list(tensors)
    dev = ts[0]._storage.device if ts and isinstance(ts[0], Tensor) else CPU
    for i, t in enumerate(ts):
        if _t(t, op, f"tensor {i}")._storage.device != dev:
            raise RuntimeError(f"{op}: Expected all tensors to be on the same device, but found "
                               f"at least two devices, {dev} and {t._storage.device}!")
        if len(t._shape) > 2:
            raise RuntimeError(f"{op}: Input tensors must have 2 or fewer dimensions. Input {i} "
                               f"has {len(t._shape)} dimensions")
    mats = [t.detach().reshape(1, 1) if not t._shape else
            (t.detach().reshape(1, -1) if len(t._shape) == 1 else t.detach()) for t in ts]
    dt = D.result_type(*ts) if ts else D.get_default_dtype()
    rows = builtins.sum(m._shape[0] for m in mats)
    cols = builtins.sum(m._shape[1] for m in mats)
    out = new_empty((rows, cols), dt, dev, zero=True)
    r = c = 0
    for m in mats:
        h, w = m._shape
        if h and w:
            check(out._storage.backend.copy_region((h, w), out, r * cols + c, out._stride, m, 0,
                                                   m._stride), op)
        r += h
        c += w
    return _rec(op, out, tuple(ts), {})  # one input per position, for the engine


def cartesian_prod(*tensors):
    """The Cartesian product of 1-D tensors as an (N, k) tensor (the 1-D input itself for a
    single tensor), like ``itertools.product``."""
    ts = _tensors_arg(tensors, "cartesian_prod")
    for i, t in enumerate(ts):
        if len(t._shape) != 1:
            raise RuntimeError(f"cartesian_prod: Expect a 1D vector, but got shape "
                               f"{list(t._shape)} at position {i}")
    if len(ts) == 1:
        return ts[0]
    from fiamma._ops.join import stack

    grids = meshgrid(*ts, indexing="ij")
    return stack([g.reshape(-1) for g in grids], 1)


def combinations(input, r=2, with_replacement=False):
    """The length-``r`` combinations of the elements of a 1-D tensor, as rows of an (N, r)
    tensor (``itertools.combinations`` / ``combinations_with_replacement`` order)."""
    op = "combinations"
    x = _t(input, op)
    if len(x._shape) != 1:
        raise RuntimeError(f"{op}: Expect a 1D vector, but got shape {list(x._shape)}")
    r = _index(r)
    if r < 0:
        raise RuntimeError(f"{op}: Expect a non-negative number, but got {r}")
    if r == 0:
        return new_empty((0,), x._dtype, x._storage.device)
    n = x._shape[0]
    f = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    flat = np.fromiter(itertools.chain.from_iterable(f(range(n), r)), dtype=np.int64)
    idx = _from_np(flat.reshape(-1, r), x._storage.device)
    return x[idx]


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of a 1-D tensor: columns are powers ``x**(N-1) ... x**0``
    (``increasing=True``: ``x**0 ... x**(N-1)``). Integer and bool inputs give int64; floating
    and complex ones keep their dtype.

    >>> import fiamma
    >>> fiamma.vander(fiamma.tensor([2, 3]), 3).tolist()
    [[4, 2, 1], [9, 3, 1]]
    """
    op = "vander"
    x = _t(x, op, "x")
    if len(x._shape) != 1:
        raise RuntimeError(f"{op}: x must be a one-dimensional tensor, got shape "
                           f"{list(x._shape)}")
    n = x._shape[0]
    N = n if N is None else _index(N)
    if N < 0:
        raise RuntimeError(f"{op}: N must be non-negative, got {N}")
    dt = x._dtype if x._dtype._kind >= 2 else D.int64  # floating and complex keep theirs
    from fiamma._ops.join import cat

    ones = new_empty((n, builtins.min(N, 1)), dt, x._storage.device)
    if dt._kind == 3:
        ones = x.new_ones((n, builtins.min(N, 1)), dtype=dt)
    else:
        check(ones._storage.backend.fill(ones, 1.0, 1, 1), op)
    if N > 1:
        xs = x.to(dt).unsqueeze(1).expand(n, N - 1)
        res = cat([ones, xs.cumprod(1)], 1)
    else:
        res = ones
    return res if increasing else res.flip(1)
