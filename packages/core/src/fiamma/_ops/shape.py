"""Shape utilities with PyTorch's names and semantics: flip/roll/rot90, repeat/tile,
tril/triu, diagonals, broadcasting helpers, meshgrid, movedim, atleast_nd, one_hot, block_diag,
cartesian_prod, combinations, vander, trace. pad lives in ``_ops/pad.py``; einsum, tensordot,
kron, cross and cdist in ``_ops/einsum.py`` (both re-exported here).

Views (diagonal, broadcast_to, broadcast_tensors, meshgrid, movedim, swapaxes, atleast_nd)
share storage and record through ``Tensor._view``. Copies are one strided ``fm_copy`` each
(negative strides are fine inside the C copy, so flip/rot90 cost one pass) and record their own
op name for autograd (see ``_rec``); the rest are compositions of ops that already record.
"""

import builtins
import itertools
import operator

import numpy as np

from fiamma import _dtype as D, _grad_hook as G
from fiamma._lib import check, ffi, lib
from fiamma._ops import _common as C
from fiamma._ops.einsum import __all__ as _einsum_all, cdist, cross, einsum, kron, tensordot
from fiamma._ops.pad import pad
from fiamma._storage import CPU
from fiamma._tensor import Size, Tensor, _shape_arg, install_methods, new_empty, wrap_dim

__all__ = [
    "flip", "fliplr", "flipud", "roll", "rot90", "repeat_interleave", "tile", "tril", "triu",
    "tril_indices", "triu_indices", "diag", "diagonal", "diag_embed", "diagflat", "broadcast_to",
    "broadcast_tensors", "broadcast_shapes", "meshgrid", "movedim", "moveaxis", "swapaxes",
    "swapdims", "atleast_1d", "atleast_2d", "atleast_3d", "pad", "one_hot", "block_diag",
    "cartesian_prod", "combinations", "vander", "trace", *_einsum_all,
]

_index = operator.index
_copy_c = lib.fm_copy
_gather_c = lib.fm_index_gather


# ---- helpers ---------------------------------------------------------------------------------

def _t(x, op, name="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected {name} to be a Tensor, got {type(x).__name__}")
    return x


def _cpu(x, op):
    if x._storage.device is not CPU:
        raise RuntimeError(f"{op}: not implemented for tensors on {x._storage.device}")
    return x


def _rec(op, out, inputs, kwargs):
    """Record ``op`` for autograd when a tensor input (or one inside a tuple input) needs grad."""
    for t in inputs:
        if isinstance(t, Tensor):
            if t.requires_grad:
                break
        elif isinstance(t, (tuple, list)) and builtins.any(
                isinstance(u, Tensor) and u.requires_grad for u in t):
            break
    else:
        return out
    G.record(op, out, inputs, kwargs)
    return out


def _copy_raw(op, dt, shape, optr, ostride, iptr, istride):
    """Same-dtype strided copy of raw layouts (strides may be negative on the input side)."""
    for s in shape:
        if s == 0:
            return
    check(_copy_c(dt.code, dt.code, len(shape), shape, optr, ostride, iptr, istride), op)


def _dims_list(dims, nd, op):
    if isinstance(dims, (tuple, list)):
        ds = tuple(wrap_dim(d, nd, op) for d in dims)
    else:
        ds = (wrap_dim(dims, nd, op),)
    if len(set(ds)) != len(ds):
        d = next(d for d in ds if ds.count(d) > 1)
        raise RuntimeError(f"{op}: dim {d} appears multiple times in the list of dims")
    return ds


def _take(x, d, idx, op):
    """``x`` indexed along dim ``d`` by the int64 tensor ``idx`` (values already known to be in
    range): shape ``x.shape[:d] + idx.shape + x.shape[d+1:]`` (index_select generalised)."""
    xs = x._shape
    nd = len(xs)
    shape = xs[:d] + idx._shape + xs[d + 1:]
    out = new_empty(shape, x._dtype, x._storage.device)
    if out._numel == 0:
        return out
    k = len(idx._shape)
    ssrc = x._stride[:d] + (0,) * k + x._stride[d + 1:]
    sidx = (0,) * d + idx._stride + (0,) * (nd - d - 1)
    bad = ffi.new("int64_t[2]")
    check(_gather_c(x._dtype.code, len(shape), shape, out._ptr, out._stride, x._ptr, ssrc, 1,
                    [idx._ptr], sidx, [xs[d]], [x._stride[d]], bad), op)
    return out


def _from_np(a):
    from fiamma._interop import from_numpy

    return from_numpy(np.ascontiguousarray(a))


# ---- flip / roll / rot90 ---------------------------------------------------------------------

def _flipped_layout(x, dims):
    """(pointer, strides) reading ``x`` reversed along ``dims``."""
    ptr = x._ptr
    st = list(x._stride)
    isz = x._dtype.itemsize
    for d in dims:
        n = x._shape[d]
        if n > 1:
            ptr += (n - 1) * st[d] * isz
            st[d] = -st[d]
    return ptr, st


def flip(input, dims):
    """Reverse the order of elements along ``dims`` (a copy, like PyTorch).

    >>> import fiamma
    >>> fiamma.flip(fiamma.arange(4).reshape(2, 2), [0, 1]).tolist()
    [[3, 2], [1, 0]]
    """
    x = _cpu(_t(input, "flip"), "flip")
    nd = len(x._shape)
    ds = _dims_list(dims, nd, "flip")
    if nd == 0:
        ds = ()
    out = new_empty(x._shape, x._dtype)
    ptr, st = _flipped_layout(x, ds)
    _copy_raw("flip", x._dtype, x._shape, out._ptr, out._stride, ptr, st)
    return _rec("flip", out, (input,), {"dims": ds})


def _flip_method(self, *dims):
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


def _int_tuple(v, op, name):
    if isinstance(v, (tuple, list)):
        return tuple(_index(s) for s in v)
    try:
        return (_index(v),)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int or a tuple of ints, got {v!r}") from None


def roll(input, shifts, dims=None):
    """Roll elements along ``dims`` by ``shifts`` (wrapping around); without ``dims`` the
    tensor is rolled as if flattened, then restored to its shape.

    >>> import fiamma
    >>> fiamma.roll(fiamma.arange(5), 2).tolist()
    [3, 4, 0, 1, 2]
    """
    x = _cpu(_t(input, "roll"), "roll")
    sh = _int_tuple(shifts, "roll", "shifts")
    nd = len(x._shape)
    if dims is None:
        if len(sh) != 1:
            raise RuntimeError(f"roll: shifts and dimensions must align. shifts: {len(sh)}, "
                               "dims: 0")
        flat = x.detach().reshape(-1)
        out = _roll(flat, sh, (0,)).view(x._shape)
        return _rec("roll", out, (input,), {"shifts": sh, "dims": None})
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
    return _rec("roll", out, (input,), {"shifts": sh, "dims": ds})


def _roll(x, shifts, dims):
    shape = x._shape
    total = {}
    for s, d in zip(shifts, dims):
        total[d] = total.get(d, 0) + s
    out = new_empty(shape, x._dtype)
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
    isz = x._dtype.itemsize
    for blocks in itertools.product(*per_dim):
        optr, iptr, bshape = out._ptr, x._ptr, []
        for d, (o0, i0, ln) in enumerate(blocks):
            optr += o0 * out._stride[d] * isz
            iptr += i0 * x._stride[d] * isz
            bshape.append(ln)
        _copy_raw("roll", x._dtype, bshape, optr, out._stride, iptr, x._stride)
    return out


def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane of ``dims`` (from the first towards the
    second dim).

    >>> import fiamma
    >>> fiamma.rot90(fiamma.tensor([[1, 2], [3, 4]])).tolist()
    [[2, 4], [1, 3]]
    """
    x = _cpu(_t(input, "rot90"), "rot90")
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
    ptr, st = _flipped_layout(x, flips)
    shape = list(x._shape)
    if k % 2:  # rotated by an odd multiple: the two dims swap
        shape[d0], shape[d1] = shape[d1], shape[d0]
        st[d0], st[d1] = st[d1], st[d0]
    out = new_empty(tuple(shape), x._dtype)
    _copy_raw("rot90", x._dtype, out._shape, out._ptr, out._stride, ptr, st)
    return _rec("rot90", out, (input,), {"k": k, "dims": (d0, d1)})


# ---- repeat / repeat_interleave / tile -------------------------------------------------------

def _repeat_copy(x, reps, op):
    """``x`` (ndim == len(reps)) tiled ``reps`` times per dim: one copy from a zero-stride
    view (dims with a single repeat are not split)."""
    shape, ost, ist = [], [], []
    final = tuple(r * s for r, s in zip(reps, x._shape))
    out = new_empty(final, x._dtype)
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
    if len(shape) > lib.FM_MAX_DIMS:  # too many split dims for one call: two passes
        h = len(reps) // 2
        x2 = _repeat_copy(x, reps[:h] + (1,) * (len(reps) - h), op)
        return _repeat_copy(x2, (1,) * h + reps[h:], op)
    _copy_raw(op, x._dtype, shape, out._ptr, ost, x._ptr, ist)
    return out


def _repeat(self, *sizes):
    """Tile the tensor ``sizes`` times along each dim (``sizes`` may have more dims than the
    tensor: leading ones are added). Always a copy.

    >>> import fiamma
    >>> fiamma.tensor([1, 2]).repeat(2, 2).tolist()
    [[1, 2, 1, 2], [1, 2, 1, 2]]
    """
    x = _cpu(_t(self, "repeat"), "repeat")
    reps = _shape_arg(sizes)
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
    return _rec("repeat", out, (self,), {"repeats": reps})


def tile(input, dims):
    """Repeat ``input`` ``dims`` times per dim; ``dims`` shorter than ``input.ndim`` is padded
    with leading ones (NumPy's tile). Records as ``repeat`` for autograd."""
    x = _t(input, "tile")
    reps = _int_tuple(dims, "tile", "dims")
    nd = len(x._shape)
    if len(reps) < nd:
        reps = (1,) * (nd - len(reps)) + reps
    return _repeat(x, reps)


def _tile_method(self, *dims):
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
    op = "repeat_interleave"
    if repeats is None:
        counts = _t(input, op, "repeats")
        if len(counts._shape) != 1:
            raise RuntimeError(f"{op}: repeats must be a 1-dim tensor, got shape "
                               f"{list(counts._shape)}")
        r = _repeats_counts(counts, counts._shape[0], op)
        out = _from_np(np.repeat(np.arange(r.size, dtype=np.int64), r))
        _check_output_size(out._numel, output_size, op)
        return out
    x = _cpu(_t(input, op), op)
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
            and repeats._dtype.kind == 1:
        repeats = repeats.item()
    if isinstance(repeats, Tensor):
        r = _repeats_counts(repeats, n, op)
        _check_output_size(int(r.sum()), output_size, op)
        idx = _from_np(np.repeat(np.arange(n, dtype=np.int64), r))
        out = _take(xv, d, idx, op)
    else:
        rep = _index(repeats)
        if rep < 0:
            raise RuntimeError(f"{op}: repeats can not be negative, got {rep}")
        _check_output_size(n * rep, output_size, op)
        s = xv._shape
        v = xv._view(s[:d + 1] + (rep,) + s[d + 1:],
                     xv._stride[:d + 1] + (0,) + xv._stride[d + 1:])
        out = new_empty(v._shape, x._dtype)
        _copy_raw(op, x._dtype, v._shape, out._ptr, out._stride, v._ptr, v._stride)
        out = out.view(s[:d] + (n * rep,) + s[d + 1:])
    return _rec(op, out, (input,), {"repeats": repeats, "dim": dim, "output_size": output_size})


def _check_output_size(total, output_size, op):
    if output_size is not None and _index(output_size) != total:
        raise RuntimeError(f"{op}: allocated output_size {output_size} does not match the "
                           f"required size {total}")


# ---- tril / triu -----------------------------------------------------------------------------

def _tri(op, input, diagonal, out, upper):
    x = _cpu(_t(input, op), op)
    if len(x._shape) < 2:
        raise RuntimeError(f"{op}: input tensor must have at least 2 dimensions, got "
                           f"{len(x._shape)}")
    k = _index(diagonal)
    m, n = x._shape[-2:]
    # np.tri builds the boolean mask directly (no int intermediate)
    keep = np.tri(m, n, k - 1, dtype=bool) if upper else np.tri(m, n, k, dtype=bool)
    keep = _from_np(~keep if upper else keep)
    from fiamma._ops.elementwise import where

    zero = new_empty((), x._dtype, zero=True)
    res = where(keep, x.detach(), zero)
    if out is not None:
        C.check_out(out, res._shape, res._dtype, op)
        out.copy_(res)
        return out
    return _rec(op, res, (input,), {"diagonal": k})


def tril(input, diagonal=0, *, out=None):
    """The lower triangle of the last two dims (elements on and below ``diagonal``); the rest
    are zero.

    >>> import fiamma
    >>> fiamma.tril(fiamma.ones(2, 2)).tolist()
    [[1.0, 0.0], [1.0, 1.0]]
    """
    return _tri("tril", input, diagonal, out, False)


def triu(input, diagonal=0, *, out=None):
    """The upper triangle of the last two dims (elements on and above ``diagonal``)."""
    return _tri("triu", input, diagonal, out, True)


def _tri_inplace(op, upper):
    def method(self, diagonal=0):
        res = _tri(op[:-1], self.detach(), diagonal, None, upper)
        from fiamma._tensor import _copy_into

        _copy_into(self, res)
        self._bump()
        if self.requires_grad:
            G.record_inplace(op, self, (self,), {"diagonal": _index(diagonal)})
        return self
    method.__name__ = op
    return method


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
    return t if device is None else t.to(device)


# ---- diagonals -------------------------------------------------------------------------------

def _diag_layout(shape, stride, offset, d1, d2, base):
    n1, n2 = shape[d1], shape[d2]
    if offset >= 0:
        ln = builtins.max(0, builtins.min(n1, n2 - offset))
        start = base + offset * stride[d2]
    else:
        ln = builtins.max(0, builtins.min(n1 + offset, n2))
        start = base - offset * stride[d1]
    if ln == 0:
        start = base
    keep = [i for i in range(len(shape)) if i not in (d1, d2)]
    return (tuple(shape[i] for i in keep) + (ln,),
            tuple(stride[i] for i in keep) + (stride[d1] + stride[d2],), start)


def _diag_dims(nd, dim1, dim2, op):
    if nd < 2:
        raise RuntimeError(f"{op}: expected a tensor with at least 2 dimensions, got {nd}")
    d1, d2 = wrap_dim(dim1, nd, op), wrap_dim(dim2, nd, op)
    if d1 == d2:
        raise RuntimeError(f"{op}: diagonal dimensions cannot be identical {dim1}, {dim2}")
    return d1, d2


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of ``input`` over ``dim1`` and ``dim2`` as a VIEW (shares storage): those
    dims are removed and the diagonal is appended as the last dim. ``offset`` > 0 is above
    the main diagonal.

    >>> import fiamma
    >>> fiamma.arange(9).reshape(3, 3).diagonal(1).tolist()
    [1, 5]
    """
    x = _t(input, "diagonal")
    d1, d2 = _diag_dims(len(x._shape), dim1, dim2, "diagonal")
    shape, stride, off = _diag_layout(x._shape, x._stride, _index(offset), d1, d2, x._offset)
    return x._view(shape, stride, off, op="diagonal")


def diag(input, diagonal=0, *, out=None):
    """1-D input: a square matrix with ``input`` on the ``diagonal``-th diagonal. 2-D input:
    a copy of that diagonal as a 1-D tensor.

    >>> import fiamma
    >>> fiamma.diag(fiamma.tensor([1, 2])).tolist()
    [[1, 0], [0, 2]]
    """
    x = _cpu(_t(input, "diag"), "diag")
    k = _index(diagonal)
    nd = len(x._shape)
    if nd == 1:
        res = _embed(x.detach(), k, 0, 1)
    elif nd == 2:
        v = globals()["diagonal"](x.detach(), k)
        res = new_empty(v._shape, x._dtype)
        _copy_raw("diag", x._dtype, v._shape, res._ptr, res._stride, v._ptr, v._stride)
    else:
        raise RuntimeError(f"diag: Supports 1D or 2D tensors. Got {nd}D")
    if out is not None:
        C.check_out(out, res._shape, res._dtype, "diag")
        out.copy_(res)
        return out
    return _rec("diag", res, (input,), {"diagonal": k})


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
    out = new_empty(tuple(shape), x._dtype, zero=True)
    vs, vst, voff = _diag_layout(out._shape, out._stride, offset, d1, d2, 0)
    _copy_raw("diag_embed", x._dtype, vs, out._ptr + voff * x._dtype.itemsize, vst, x._ptr,
              x._stride if x._shape else (1,))
    return out


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """A tensor whose (dim1, dim2) diagonals (at ``offset``) hold the last dim of ``input``;
    everything else is zero.

    >>> import fiamma
    >>> fiamma.diag_embed(fiamma.tensor([[1, 2]])).shape
    fiamma.Size([1, 2, 2])
    """
    x = _cpu(_t(input, "diag_embed"), "diag_embed")
    if not x._shape:
        raise RuntimeError("diag_embed: expected input with at least 1 dimension, got 0")
    nd = len(x._shape) + 1
    d1, d2 = _diag_dims(nd, dim1, dim2, "diag_embed")
    res = _embed(x.detach(), _index(offset), d1, d2)
    return _rec("diag_embed", res, (input,), {"offset": _index(offset), "dim1": d1, "dim2": d2})


def diagflat(input, offset=0):
    """A 2-D tensor with the flattened ``input`` on the ``offset``-th diagonal."""
    x = _cpu(_t(input, "diagflat"), "diagflat")
    k = _index(offset)
    res = _embed(x.detach().reshape(-1), k, 0, 1)
    return _rec("diagflat", res, (input,), {"offset": k})


def trace(input):
    """Sum of the main diagonal of a 2-D tensor (integers sum in int64)."""
    x = _t(input, "trace")
    if len(x._shape) != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {len(x._shape)}")
    return diagonal(x).sum()


# ---- broadcasting ----------------------------------------------------------------------------

def broadcast_to(input, size):
    """``input`` viewed with shape ``size`` (a view; broadcast dims have stride 0)."""
    return _t(input, "broadcast_to").expand(size)


def broadcast_shapes(*shapes):
    """The shape that tensors of the given shapes broadcast to (ints count as 1-D shapes).

    >>> import fiamma
    >>> fiamma.broadcast_shapes((2, 1), (3,))
    fiamma.Size([2, 3])
    """
    norm = []
    for s in shapes:
        if isinstance(s, (tuple, list)):
            norm.append(tuple(_index(n) for n in s))
        else:
            norm.append((_index(s),))
        if builtins.any(n < 0 for n in norm[-1]):
            raise RuntimeError(f"broadcast_shapes: Trying to create tensor with negative "
                               f"dimension: {list(norm[-1])}")
    return Size(C.broadcast_shapes(*norm, op="broadcast_shapes"))


def _tensors_arg(tensors, op):
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tensors[0]
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected Tensor as element {i}, got {type(t).__name__}")
    return tuple(tensors)


def broadcast_tensors(*tensors):
    """Views of the tensors expanded to their common broadcast shape."""
    ts = _tensors_arg(tensors, "broadcast_tensors")
    shape = C.broadcast_shapes(*[t._shape for t in ts], op="broadcast_tensors")
    return tuple(t if t._shape == shape else t.expand(shape) for t in ts)


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids from 1-D tensors (views). ``indexing='ij'``: output dim i follows
    tensor i; ``'xy'``: the first two dims are swapped (Cartesian, NumPy's default).

    >>> import fiamma
    >>> a, b = fiamma.meshgrid(fiamma.arange(2), fiamma.arange(3), indexing="ij")
    >>> a.shape
    fiamma.Size([2, 3])
    """
    ts = _tensors_arg(tensors, "meshgrid")
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"meshgrid: indexing must be one of \"xy\" or \"ij\", but received: "
                           f"{indexing}")
    if not ts:
        raise RuntimeError("meshgrid: expects a non-empty TensorList")
    for i, t in enumerate(ts):
        if len(t._shape) > 1:
            raise RuntimeError(f"meshgrid: Expected 0D or 1D tensor in the tensor list but got: "
                               f"{len(t._shape)}D tensor at position {i}")
        if t._dtype is not ts[0]._dtype:
            raise RuntimeError(f"meshgrid: expects all tensors to have the same dtype, got "
                               f"{ts[0]._dtype} and {t._dtype}")
        if t._storage.device != ts[0]._storage.device:
            raise RuntimeError("meshgrid: expects all tensors to have the same device")
    n = len(ts)
    where = list(range(n))
    if indexing == "xy" and n >= 2:
        where[0], where[1] = 1, 0
    shape = [0] * n
    for i, t in enumerate(ts):
        shape[where[i]] = t._numel
    shape = tuple(shape)
    outs = []
    for i, t in enumerate(ts):
        vs = [1] * n
        vs[where[i]] = t._numel
        outs.append(t.reshape(vs).expand(shape))
    return tuple(outs)


# ---- dim moves and atleast_nd ----------------------------------------------------------------

def movedim(input, source, destination):
    """Move dims ``source`` to positions ``destination`` (a view); the other dims keep their
    order.

    >>> import fiamma
    >>> fiamma.movedim(fiamma.zeros(2, 3, 4), 0, -1).shape
    fiamma.Size([3, 4, 2])
    """
    x = _t(input, "movedim")
    nd = len(x._shape)
    src = _int_tuple(source, "movedim", "source")
    dst = _int_tuple(destination, "movedim", "destination")
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} "
                           f"dims) should contain the same number of dims as destination "
                           f"({list(dst)} dims)")
    src = tuple(wrap_dim(d, nd, "movedim") for d in src)
    dst = tuple(wrap_dim(d, nd, "movedim") for d in dst)
    for name, ds in (("source", src), ("destination", dst)):
        if len(set(ds)) != len(ds):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({list(ds)})")
    if nd == 0:
        return x._view((), (), op="permute")
    order = [-1] * nd
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(nd) if i not in src)
    order = [o if o >= 0 else next(rest) for o in order]
    return x.permute(order)


moveaxis = movedim


def swapaxes(input, axis0, axis1):
    """``input`` with two dims swapped (a view; alias of transpose)."""
    return _t(input, "swapaxes").transpose(axis0, axis1)


def swapdims(input, dim0, dim1):
    """``input`` with two dims swapped (a view; alias of transpose)."""
    return _t(input, "swapdims").transpose(dim0, dim1)


def _atleast(nd, op, tensors):
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    ts = _tensors_arg(tensors, op)
    outs = []
    for t in ts:
        s = t._shape
        if len(s) >= nd:
            outs.append(t)
        elif nd == 1 or (nd == 2 and len(s) <= 1):
            outs.append(t.reshape((1,) * (nd - len(s)) + s))
        elif len(s) == 0:
            outs.append(t.reshape(1, 1, 1))
        elif len(s) == 1:
            outs.append(t.reshape(1, s[0], 1))
        else:
            outs.append(t.unsqueeze(-1))
    return outs[0] if single else tuple(outs)


def atleast_1d(*tensors):
    """Views with at least one dim (0-d becomes shape (1,)); one tensor in, one out."""
    return _atleast(1, "atleast_1d", tensors)


def atleast_2d(*tensors):
    """Views with at least two dims (1-D (n,) becomes (1, n))."""
    return _atleast(2, "atleast_2d", tensors)


def atleast_3d(*tensors):
    """Views with at least three dims ((n,) becomes (1, n, 1); (m, n) becomes (m, n, 1))."""
    return _atleast(3, "atleast_3d", tensors)


# ---- one_hot, block_diag, cartesian_prod, combinations, vander --------------------------------

def one_hot(tensor, num_classes=-1):
    """int64 one-hot encoding: a trailing dim of ``num_classes`` (-1: max value + 1) holding 1 at
    each value's position. Input must be an int64 index tensor.

    >>> import fiamma
    >>> fiamma.one_hot(fiamma.tensor([0, 2]), 3).tolist()
    [[1, 0, 0], [0, 0, 1]]
    """
    op = "one_hot"
    x = _cpu(_t(tensor, op, "tensor"), op)
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
    out = new_empty(x._shape + (nc,), D.int64, zero=True)
    if x._numel and nc:
        flat = x.reshape(-1)
        one = new_empty((), D.int64)
        check(lib.fm_fill(D.int64.code, 0, (), one._ptr, (), 0.0, 1, 1), op)
        bad = ffi.new("int64_t[2]")
        check(lib.fm_index_scatter(D.int64.code, 1, (flat._numel,), out._ptr, (nc,), one._ptr,
                                   (0,), 1, [flat._ptr], flat._stride, [nc], [1], 0, bad), op)
    return out


def block_diag(*tensors):
    """A block-diagonal matrix from 0-d, 1-D and 2-D tensors (a 0-d tensor is a 1x1 block, a
    1-D tensor a 1xn row), promoted to a common dtype.

    >>> import fiamma
    >>> fiamma.block_diag(fiamma.tensor([[1]]), fiamma.tensor([2, 3])).tolist()
    [[1, 0, 0], [0, 2, 3]]
    """
    op = "block_diag"
    ts = list(tensors)
    for i, t in enumerate(ts):
        _cpu(_t(t, op, f"tensor {i}"), op)
        if len(t._shape) > 2:
            raise RuntimeError(f"{op}: Input tensors must have 2 or fewer dimensions. Input {i} "
                               f"has {len(t._shape)} dimensions")
    mats = [t.detach().reshape(1, 1) if not t._shape else
            (t.detach().reshape(1, -1) if len(t._shape) == 1 else t.detach()) for t in ts]
    dt = D.result_type(*ts) if ts else D.get_default_dtype()
    rows = builtins.sum(m._shape[0] for m in mats)
    cols = builtins.sum(m._shape[1] for m in mats)
    out = new_empty((rows, cols), dt, zero=True)
    r = c = 0
    isz = dt.itemsize
    for m in mats:
        h, w = m._shape
        if h and w:
            check(_copy_c(dt.code, m._dtype.code, 2, (h, w), out._ptr + (r * cols + c) * isz,
                          out._stride, m._ptr, m._stride), op)
        r += h
        c += w
    return _rec(op, out, (tuple(ts),), {})


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
    idx = _from_np(flat.reshape(-1, r))
    return x[idx]


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of a 1-D tensor: columns are powers ``x**(N-1) ... x**0``
    (``increasing=True``: ``x**0 ... x**(N-1)``). Integer and bool inputs give int64.

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
    dt = x._dtype if x._dtype.kind == 2 else D.int64
    from fiamma._ops.join import cat

    ones = new_empty((n, builtins.min(N, 1)), dt)
    check(lib.fm_fill(dt.code, 2, ones._shape, ones._ptr, ones._stride, 1.0, 1, 1), op)
    if N > 1:
        xs = x.to(dt).unsqueeze(1).expand(n, N - 1)
        res = cat([ones, xs.cumprod(1)], 1)
    else:
        res = ones
    return res if increasing else res.flip(1)


# ---- Tensor methods --------------------------------------------------------------------------

install_methods({
    "flip": _flip_method, "fliplr": fliplr, "flipud": flipud, "roll": roll, "rot90": rot90,
    "repeat": _repeat, "repeat_interleave": repeat_interleave, "tile": _tile_method,
    "tril": tril, "triu": triu, "tril_": _tri_inplace("tril_", False),
    "triu_": _tri_inplace("triu_", True), "diag": diag, "diagonal": diagonal,
    "diag_embed": diag_embed, "diagflat": diagflat, "trace": trace, "movedim": movedim,
    "moveaxis": movedim, "kron": kron, "cross": cross,
})
_ = (einsum, tensordot, cdist, pad)
