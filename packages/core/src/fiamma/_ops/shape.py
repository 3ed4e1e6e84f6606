"""Shape utilities with PyTorch's names and semantics, the copying ones: flip / fliplr /
flipud, roll, rot90, repeat (Tensor method), tile, repeat_interleave, tril / triu (and tril_ /
triu_), diag, diag_embed, diagflat. This module also gathers the public names of the other
shape modules (one import line in fiamma/__init__): views in ``shape_views`` (diagonal,
broadcast_*, meshgrid, movedim, swapaxes, atleast_nd, trace), builders in ``shape_build``
(tril/triu_indices, one_hot, block_diag, cartesian_prod, combinations, vander), ``pad`` and
the contractions in ``einsum`` (einsum, tensordot, kron, cross, cdist).

Each copy here is one strided ``fm_copy`` (negative strides are fine inside the C copy, so
flip and rot90 cost one pass) and records its own op name for autograd (see ``_rec``).
"""

import builtins
import itertools
import operator

import numpy as np

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend.codes import MAX_DIMS
from fiamma._ops import _common as C, einsum as _E, pad as _P, shape_build as _B, shape_views as _V
from fiamma._ops.einsum import cross, kron
from fiamma._ops.shape_views import (
    _copy_raw,
    _diag_dims,
    _diag_layout,
    _dims_list,
    _from_np,
    _int_tuple,
    _rec,
    _t,
    _take,
    diagonal,
    movedim,
    trace,
)
from fiamma._tensor import Tensor, _keyword_args, _shape_arg, new_empty, wrap_dim

__all__ = ["flip", "fliplr", "flipud", "roll", "rot90", "repeat_interleave", "tile", "tril",
           "triu", "diag", "diag_embed", "diagflat"]

_index = operator.index


# ---- flip / roll / rot90 ---------------------------------------------------------------------

def _flipped_layout(x, dims):
    """(element offset, strides) reading ``x`` reversed along ``dims``."""
    off = 0
    st = list(x._stride)
    for d in dims:
        n = x._shape[d]
        if n > 1:
            off += (n - 1) * st[d]
            st[d] = -st[d]
    return off, st


def flip(input, dims):
    """Reverse the order of elements along ``dims`` (a copy, like PyTorch).

    >>> import fiamma
    >>> fiamma.flip(fiamma.arange(4).reshape(2, 2), [0, 1]).tolist()
    [[3, 2], [1, 0]]
    """
    x = _t(input, "flip")
    nd = len(x._shape)
    ds = _dims_list(dims, nd, "flip")
    if nd == 0:
        ds = ()
    out = new_empty(x._shape, x._dtype, x._storage.device)
    off, st = _flipped_layout(x, ds)
    _copy_raw("flip", x._shape, out, 0, out._stride, x, off, st)
    return _rec(ops.flip, out, (input,), {"dims": ds})


def _flip_method(self, *ds, dims=None):
    dims = ds if dims is None else _keyword_args(ds, dims, "dims", "flip")
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    return flip(self, dims)


def fliplr(input):
    """Flip left-right: reverse dim 1 (input at least 2-D)."""
    if len(_t(input, "fliplr")._shape) < 2:
        raise RuntimeError(f"fliplr: Input must be >= 2-d, got {input.ndim}-d")
    return flip(input, (1,))


def flipud(input):
    """Flip up-down: reverse dim 0 (input at least 1-D)."""
    if len(_t(input, "flipud")._shape) < 1:
        raise RuntimeError("flipud: Input must be >= 1-d, got 0-d")
    return flip(input, (0,))


def roll(input, shifts, dims=None):
    """Roll elements along ``dims`` by ``shifts`` (wrapping around); without ``dims`` the
    tensor is rolled as if flattened, then restored to its shape.

    >>> import fiamma
    >>> fiamma.roll(fiamma.arange(5), 2).tolist()
    [3, 4, 0, 1, 2]
    """
    x = _t(input, "roll")
    sh = _int_tuple(shifts, "roll", "shifts")
    nd = len(x._shape)
    if dims is None:
        if len(sh) != 1:
            raise RuntimeError(f"roll: shifts and dimensions must align. shifts: {len(sh)}, "
                               "dims: 0")
        flat = x.detach().reshape(-1)
        out = _roll(flat, sh, (0,)).view(x._shape)
        return _rec(ops.roll, out, (input,), {"shifts": sh, "dims": None})
    ds = _int_tuple(dims, "roll", "dims")
    if len(sh) != len(ds):
        raise RuntimeError(f"roll: shifts and dimensions must align. shifts: {len(sh)}, "
                           f"dims: {len(ds)}")
    if not ds:
        raise RuntimeError("roll: dims must not be empty")
    ds = tuple(wrap_dim(d, nd, "roll") for d in ds)
    if nd == 0:
        out = x.detach().clone()
    else:
        out = _roll(x, sh, ds)
    return _rec(ops.roll, out, (input,), {"shifts": sh, "dims": ds})


def _roll(x, shifts, dims):
    shape = x._shape
    total = {}
    for s, d in zip(shifts, dims):
        total[d] = total.get(d, 0) + s
    out = new_empty(shape, x._dtype, x._storage.device)
    if out._numel == 0:
        return out
    # each rolled dim splits into two blocks: out[s:] = x[:n-s], out[:s] = x[n-s:]
    per_dim = []
    for d in range(len(shape)):
        n = shape[d]
        s = total.get(d, 0) % n if n else 0
        if s == 0:
            per_dim.append(((0, 0, n),))
        else:
            per_dim.append(((s, 0, n - s), (0, n - s, s)))
    for blocks in itertools.product(*per_dim):
        ooff, ioff, bshape = 0, 0, []
        for d, (o0, i0, ln) in enumerate(blocks):
            ooff += o0 * out._stride[d]
            ioff += i0 * x._stride[d]
            bshape.append(ln)
        _copy_raw("roll", bshape, out, ooff, out._stride, x, ioff, x._stride)
    return out


def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane of ``dims`` (from the first towards the
    second dim).

    >>> import fiamma
    >>> fiamma.rot90(fiamma.tensor([[1, 2], [3, 4]])).tolist()
    [[2, 4], [1, 3]]
    """
    x = _t(input, "rot90")
    dims = tuple(dims)
    nd = len(x._shape)
    if len(dims) != 2:
        raise RuntimeError(f"rot90: expected total rotation dims == 2, but got dims = "
                           f"{len(dims)}")
    if nd < 2:
        raise RuntimeError(f"rot90: expected total dims >= 2, but got total dims = {nd}")
    d0, d1 = wrap_dim(dims[0], nd, "rot90"), wrap_dim(dims[1], nd, "rot90")
    if d0 == d1:
        raise RuntimeError(f"rot90: expected rotation dims to be different, but got dim0 = "
                           f"{d0} and dim1 = {d1}")
    k = _index(k) % 4
    flips = {0: (), 1: (d1,), 2: (d0, d1), 3: (d0,)}[k]
    off, st = _flipped_layout(x, flips)
    shape = list(x._shape)
    if k % 2:  # rotated by an odd multiple: the two dims swap
        shape[d0], shape[d1] = shape[d1], shape[d0]
        st[d0], st[d1] = st[d1], st[d0]
    out = new_empty(tuple(shape), x._dtype, x._storage.device)
    _copy_raw("rot90", out._shape, out, 0, out._stride, x, off, st)
    return _rec(ops.rot90, out, (input,), {"k": k, "dims": (d0, d1)})


# ---- repeat / repeat_interleave / tile -------------------------------------------------------

def _repeat_copy(x, reps, op):
    """``x`` (ndim == len(reps)) tiled ``reps`` times per dim: one copy from a zero-stride
    view (dims with a single repeat are not split)."""
    shape, ost, ist = [], [], []
    final = tuple(r * s for r, s in zip(reps, x._shape))
    out = new_empty(final, x._dtype, x._storage.device)
    if out._numel == 0:
        return out
    for r, s, st, so in zip(reps, x._shape, x._stride, out._stride):
        if r != 1:
            shape.append(r)
            ost.append(so * s)
            ist.append(0)
        shape.append(s)
        ost.append(so)
        ist.append(st)
    if len(shape) > MAX_DIMS:  # too many split dims for one call: two passes
        h = len(reps) // 2
        x2 = _repeat_copy(x, reps[:h] + (1,) * (len(reps) - h), op)
        return _repeat_copy(x2, (1,) * h + reps[h:], op)
    _copy_raw(op, shape, out, 0, ost, x, 0, ist)
    return out


def _repeat(self, *sizes, repeats=None):
    """Tile the tensor ``sizes`` times along each dim (``sizes`` may have more dims than the
    tensor: leading ones are added). Always a copy.

    >>> import fiamma
    >>> fiamma.tensor([1, 2]).repeat(2, 2).tolist()
    [[1, 2, 1, 2], [1, 2, 1, 2]]
    """
    x = _t(self, "repeat")
    reps = _shape_arg(sizes if repeats is None else _keyword_args(sizes, repeats, "repeats",
                                                                  "repeat"))
    nd = len(x._shape)
    if len(reps) < nd:
        raise RuntimeError(f"repeat: Number of dimensions of repeat dims can not be smaller than "
                           f"number of dimensions of tensor (got {len(reps)} repeat dims for a "
                           f"{nd}-D tensor)")
    for r in reps:
        if r < 0:
            raise RuntimeError(f"repeat: Trying to create tensor with negative dimension {r}: "
                               f"{list(reps)}")
    xv = x.detach()
    lead = len(reps) - nd
    if lead:
        xv = xv._view((1,) * lead + x._shape, (0,) * lead + x._stride)
    out = _repeat_copy(xv, reps, "repeat")
    return _rec(ops.repeat, out, (self,), {"repeats": reps})


def tile(input, dims):
    """Repeat ``input`` ``dims`` times per dim; ``dims`` shorter than ``input.ndim`` is padded
    with leading ones (NumPy's tile). Records as ``repeat`` for autograd."""
    x = _t(input, "tile")
    reps = _int_tuple(dims, "tile", "dims")
    nd = len(x._shape)
    if len(reps) < nd:
        reps = (1,) * (nd - len(reps)) + reps
    return _repeat(x, reps)


def _tile_method(self, *ds, dims=None):
    dims = ds if dims is None else _keyword_args(ds, dims, "dims", "tile")
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    return tile(self, dims)


def _repeats_counts(repeats, n, op):
    """The repeat count of each of ``n`` slices as a NumPy int64 array (validated)."""
    if repeats._dtype not in (D.int64, D.int32, D.int16, D.int8, D.uint8):
        raise RuntimeError(f"{op}: repeats has to be Long or Int tensor, got {repeats._dtype}")
    if len(repeats._shape) > 1:
        raise RuntimeError(f"{op}: repeats must be 0-dim or 1-dim tensor, got shape "
                           f"{list(repeats._shape)}")
    r = repeats.cpu().to(D.int64).numpy().reshape(-1)
    if r.size == 1 and n != 1:
        r = np.full(n, r[0], dtype=np.int64)
    if r.size != n:
        raise RuntimeError(f"{op}: repeats must have the same size as input along dim, but got "
                           f"repeats.size(0) = {r.size} and input.size(dim) = {n}")
    if r.size and r.min() < 0:
        raise RuntimeError(f"{op}: repeats can not be negative, got {int(r.min())}")
    return r


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Repeat each element (each slice along ``dim``) ``repeats`` times in place; ``repeats``
    is an int or a tensor with one count per slice. Without ``dim`` the input is flattened.
    ``repeat_interleave(counts)`` alone repeats ``arange(len(counts))``.

    >>> import fiamma
    >>> fiamma.repeat_interleave(fiamma.tensor([1, 2]), 2).tolist()
    [1, 1, 2, 2]
    """
    op = ops.repeat_interleave
    if repeats is None:
        counts = _t(input, op, "repeats")
        if len(counts._shape) != 1:
            raise RuntimeError(f"{op}: repeats must be a 1-dim tensor, got shape "
                               f"{list(counts._shape)}")
        r = _repeats_counts(counts, counts._shape[0], op)
        out = _from_np(np.repeat(np.arange(r.size, dtype=np.int64), r), counts._storage.device)
        _check_output_size(out._numel, output_size, op)
        return out if counts._dtype is out._dtype else out.to(counts._dtype)  # the counts' dtype
    x = _t(input, op)
    xv = x.detach()
    if dim is None:
        xv = xv.reshape(-1)
        d = 0
    else:
        d = wrap_dim(dim, len(x._shape), op)
        if not x._shape:
            xv = xv.reshape(1)
    n = xv._shape[d]
    if isinstance(repeats, Tensor) and repeats._numel == 1 and len(repeats._shape) <= 1 \
            and repeats._dtype._kind == 1:
        repeats = repeats.item()
    if isinstance(repeats, Tensor):
        r = _repeats_counts(repeats, n, op)
        _check_output_size(int(r.sum()), output_size, op)
        idx = _from_np(np.repeat(np.arange(n, dtype=np.int64), r), x._storage.device)
        out = _take(xv, d, idx, op)
    else:
        rep = _index(repeats)
        if rep < 0:
            raise RuntimeError(f"{op}: repeats can not be negative, got {rep}")
        _check_output_size(n * rep, output_size, op)
        s = xv._shape
        v = xv._view(s[:d + 1] + (rep,) + s[d + 1:],
                     xv._stride[:d + 1] + (0,) + xv._stride[d + 1:])
        out = new_empty(v._shape, x._dtype, x._storage.device)
        _copy_raw(op, v._shape, out, 0, out._stride, v, 0, v._stride)
        out = out.view(s[:d] + (n * rep,) + s[d + 1:])
    return _rec(op, out, (input,), {"repeats": repeats, "dim": dim, "output_size": output_size})


def _check_output_size(total, output_size, op):
    if output_size is not None and _index(output_size) != total:
        raise RuntimeError(f"{op}: allocated output_size {output_size} does not match the "
                           f"required size {total}")


# ---- tril / triu -----------------------------------------------------------------------------

def _tri(op, input, diagonal, out, upper):
    x = _t(input, op)
    if len(x._shape) < 2:
        raise RuntimeError(f"{op}: input tensor must have at least 2 dimensions, got "
                           f"{len(x._shape)}")
    k = _index(diagonal)
    m, n = x._shape[-2:]
    keep = _tri_mask(m, n, k, upper, x._storage.device)
    from fiamma._ops.elementwise import where

    zero = new_empty((), x._dtype, x._storage.device, zero=True)
    res = where(keep, x.detach(), zero)
    if out is not None:
        C.check_out(out, res._shape, res._dtype, op)
        out.copy_(res)
        return out
    return _rec(op, res, (input,), {"diagonal": k})


_MASKS = {}  # small triangle masks, reused (internal, never written)


def _tri_mask(m, n, k, upper, dev):
    key = (m, n, k, upper, dev)
    mask = _MASKS.get(key)
    if mask is None:
        # np.tri builds the boolean mask directly (no int intermediate)
        keep = ~np.tri(m, n, k - 1, dtype=bool) if upper else np.tri(m, n, k, dtype=bool)
        mask = _from_np(keep, dev)
        if m * n <= 65536:
            if len(_MASKS) >= 64:
                _MASKS.clear()
            _MASKS[key] = mask
    return mask


def tril(input, diagonal=0, *, out=None):
    """The lower triangle of the last two dims (elements on and below ``diagonal``); the rest
    are zero.

    >>> import fiamma
    >>> fiamma.tril(fiamma.ones(2, 2)).tolist()
    [[1.0, 0.0], [1.0, 1.0]]
    """
    return _tri(ops.tril, input, diagonal, out, False)


def triu(input, diagonal=0, *, out=None):
    """The upper triangle of the last two dims (elements on and above ``diagonal``)."""
    return _tri(ops.triu, input, diagonal, out, True)


def _tri_inplace(op, base, upper):
    def method(self, diagonal=0):
        if self.requires_grad:
            G.check_inplace(self, op)
        if builtins.any(st == 0 and n > 1 for n, st in zip(self._shape, self._stride)) and \
                self._numel:  # an expanded view: the writes would collide
            raise RuntimeError(f"{op}: unsupported operation: more than one element of the "
                               "written-to tensor refers to a single memory location. Please "
                               "clone() the tensor before performing the operation.")
        res = _tri(base, self.detach(), diagonal, None, upper)
        from fiamma._tensor import _copy_into

        _copy_into(self, res)
        self._bump()
        if self.requires_grad:
            G.record_inplace(op, self, (self,), {"diagonal": _index(diagonal)})
        return self
    method.__name__ = op
    return method


def diag(input, diagonal=0, *, out=None):
    """1-D input: a square matrix with ``input`` on the ``diagonal``-th diagonal. 2-D input:
    a copy of that diagonal as a 1-D tensor.

    >>> import fiamma
    >>> fiamma.diag(fiamma.tensor([1, 2])).tolist()
    [[1, 0], [0, 2]]
    """
    x = _t(input, "diag")
    k = _index(diagonal)
    nd = len(x._shape)
    if nd == 1:
        res = _embed(x.detach(), k, 0, 1)
    elif nd == 2:
        v = _V.diagonal(x.detach(), k)
        res = new_empty(v._shape, x._dtype, x._storage.device)
        _copy_raw("diag", v._shape, res, 0, res._stride, v, 0, v._stride)
    else:
        raise RuntimeError(f"diag: Supports 1D or 2D tensors. Got {nd}D")
    if out is not None:
        C.check_out(out, res._shape, res._dtype, "diag")
        out.copy_(res)
        return out
    return _rec(ops.diag, res, (input,), {"diagonal": k})


def _embed(x, offset, d1, d2):
    """Zeros with the last dim of ``x`` written along the (d1, d2) diagonal of a new tensor."""
    n = x._shape[-1] if x._shape else 1
    m = n + builtins.abs(offset)
    rest = list(x._shape[:-1])
    nd = len(rest) + 2
    shape = [0] * nd
    it = iter(rest)
    for i in range(nd):
        shape[i] = m if i in (d1, d2) else next(it)
    out = new_empty(tuple(shape), x._dtype, x._storage.device, zero=True)
    vs, vst, voff = _diag_layout(out._shape, out._stride, offset, d1, d2, 0)
    _copy_raw("diag_embed", vs, out, voff, vst, x, 0, x._stride if x._shape else (1,))
    return out


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """A tensor whose (dim1, dim2) diagonals (at ``offset``) hold the last dim of ``input``;
    everything else is zero.

    >>> import fiamma
    >>> fiamma.diag_embed(fiamma.tensor([[1, 2]])).shape
    fiamma.Size([1, 2, 2])
    """
    x = _t(input, "diag_embed")
    if not x._shape:
        raise RuntimeError("diag_embed: expected input with at least 1 dimension, got 0")
    nd = len(x._shape) + 1
    d1, d2 = _diag_dims(nd, dim1, dim2, "diag_embed")
    res = _embed(x.detach(), _index(offset), d1, d2)
    return _rec(ops.diag_embed, res, (input,), {"offset": _index(offset), "dim1": d1, "dim2": d2})


def diagflat(input, offset=0):
    """A 2-D tensor with the flattened ``input`` on the ``offset``-th diagonal."""
    x = _t(input, "diagflat")
    k = _index(offset)
    res = _embed(x.detach().reshape(-1), k, 0, 1)
    return _rec(ops.diagflat, res, (input,), {"offset": k})


# ---- Tensor methods --------------------------------------------------------------------------

# Tensor methods of this module: attached by fiamma._methods (the one place that does)
METHODS = {
    "flip": _flip_method, "fliplr": fliplr, "flipud": flipud, "roll": roll, "rot90": rot90,
    "repeat": _repeat, "repeat_interleave": repeat_interleave, "tile": _tile_method,
    "tril": tril, "triu": triu, "tril_": _tri_inplace(ops.tril_, ops.tril, False),
    "triu_": _tri_inplace(ops.triu_, ops.triu, True), "diag": diag, "diagonal": diagonal,
    "diag_embed": diag_embed, "diagflat": diagflat, "trace": trace, "movedim": movedim,
    "moveaxis": movedim, "kron": kron, "cross": cross,
}

# re-export the other shape modules' public names
for _m in (_V, _B, _P, _E):
    globals().update({n: getattr(_m, n) for n in _m.__all__})
    __all__ += _m.__all__
del _m
