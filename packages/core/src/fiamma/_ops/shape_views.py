"""Shape utilities that return views (share storage with their input, version counter
included): diagonal, broadcast_to / broadcast_tensors / broadcast_shapes, meshgrid, movedim /
moveaxis, swapaxes / swapdims, atleast_1d/2d/3d; plus trace (a sum over the diagonal view) and
the helpers the other shape modules share. Views record for autograd through ``Tensor._view``
(kwargs shape/stride/offset) or the view ops they are made of (expand, permute, reshape).
"""

import builtins
import operator

import numpy as np

from fiamma import _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check
from fiamma._ops import _common as C
from fiamma._storage import CPU
from fiamma._tensor import Size, Tensor, new_empty, wrap_dim

__all__ = ["diagonal", "trace", "broadcast_to", "broadcast_tensors", "broadcast_shapes",
           "meshgrid", "movedim", "moveaxis", "swapaxes", "swapdims", "atleast_1d", "atleast_2d",
           "atleast_3d"]

_index = operator.index


# ---- helpers ---------------------------------------------------------------------------------

def _t(x, op, name="input"):
    if not isinstance(x, Tensor):
        if hasattr(type(x), "__fiamma_qtensor__") and hasattr(x, op):
            return x  # fiamma-nn's quantized tensors: their own shape methods
        raise TypeError(f"{op}: expected {name} to be a Tensor, got {type(x).__name__}")
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


def _copy_raw(op, shape, out, ooff, ostride, x, ioff, istride):
    """Strided copy between layouts given as (element offset, strides) in out and x (strides
    may be negative on the input side)."""
    for s in shape:
        if s == 0:
            return
    check(out._storage.backend.copy_region(shape, out, ooff, ostride, x, ioff, istride), op)


def _dims_list(dims, nd, op):
    if isinstance(dims, (tuple, list)):
        ds = tuple(wrap_dim(d, nd, op) for d in dims)
    else:
        ds = (wrap_dim(dims, nd, op),)
    if len(set(ds)) != len(ds):
        d = next(d for d in ds if ds.count(d) > 1)
        raise RuntimeError(f"{op}: dim {d} appears multiple times in the list of dims")
    return ds


def _int_tuple(v, op, name):
    if isinstance(v, (tuple, list)):
        return tuple(_index(s) for s in v)
    try:
        return (_index(v),)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int or a tuple of ints, got {v!r}") from None


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
    check(out._storage.backend.index_gather(shape, out, x, 0, ssrc, [idx], sidx, [xs[d]],
                                            [x._stride[d]], None), op)
    return out


def _from_np(a, dev=CPU):
    """A tensor on ``dev`` holding the NumPy array ``a`` (a host-built index or mask)."""
    from fiamma._interop import from_numpy

    t = from_numpy(np.require(a, requirements="C"))  # 0-d stays 0-d
    return t if dev is CPU else t.to(dev)


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
    return x._view(shape, stride, off, op=ops.diagonal)


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
    """The shape that tensors of the given shapes broadcast to (ints count as 1-D shapes);
    computed by fiamma._ops._common.broadcast_shapes, which every broadcasting op uses.

    >>> import fiamma
    >>> fiamma.broadcast_shapes((2, 1), (3,))
    fiamma.Size([2, 3])
    """
    return Size(C.broadcast_shapes(*[C.as_shape(s, "broadcast_shapes") for s in shapes]))


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
        return x._view((), (), op=ops.permute)
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


# ---- function forms of the Tensor layout methods (torch.transpose, torch.reshape, ...) -------

def transpose(input, dim0, dim1):
    """``input`` with ``dim0`` and ``dim1`` swapped (a view)."""
    return _t(input, "transpose").transpose(dim0, dim1)


def permute(input, dims):
    """``input`` with its dims reordered as ``dims`` (a view)."""
    return _t(input, "permute").permute(dims)


def reshape(input, shape):
    """``input`` with a new shape: a view when the strides allow it, else a copy."""
    return _t(input, "reshape").reshape(shape)


def squeeze(input, dim=None):
    """``input`` without its size-1 dims (only those in ``dim`` when given; a view)."""
    return _t(input, "squeeze").squeeze(dim)


def unsqueeze(input, dim):
    """``input`` with a size-1 dim inserted at ``dim`` (a view)."""
    return _t(input, "unsqueeze").unsqueeze(dim)


def flatten(input, start_dim=0, end_dim=-1):
    """``input`` with dims ``start_dim..end_dim`` merged into one (a view when possible)."""
    return _t(input, "flatten").flatten(start_dim, end_dim)


def unflatten(input, dim, sizes):
    """``input`` with dim ``dim`` split into ``sizes`` (a view)."""
    return _t(input, "unflatten").unflatten(dim, sizes)


def ravel(input):
    """``input`` as 1-D (a view when contiguous, else a copy)."""
    return _t(input, "ravel").reshape(-1)


def narrow(input, dim, start, length):
    """Elements ``start .. start+length-1`` of dim ``dim`` (a view)."""
    return _t(input, "narrow").narrow(dim, start, length)


def narrow_copy(input, dim, start, length):
    """Like ``narrow``, but a contiguous copy."""
    return narrow(input, dim, start, length).clone()


def select(input, dim, index):
    """The slice at ``index`` of dim ``dim``, that dim removed (a view)."""
    return _t(input, "select").select(dim, index)


def unbind(input, dim=0):
    """The slices along ``dim`` as a tuple of views."""
    return _t(input, "unbind").unbind(dim)


def t(input):
    """Transpose of a tensor with at most 2 dims (a view)."""
    return _t(input, "t").t()


def adjoint(input):
    """The last two dims swapped and conjugated (a view for real tensors; a new tensor for
    complex ones: fiamma has no lazy conjugate bit)."""
    return _t(input, "adjoint").adjoint()


def as_strided(input, size, stride, storage_offset=None):
    """A view of ``input``'s storage with the given sizes, strides and offset (checked to stay
    inside the storage)."""
    return _t(input, "as_strided").as_strided(size, stride, storage_offset)


def clone(input, *, memory_format=None):
    """A contiguous copy of ``input``."""
    return _t(input, "clone").clone()


def detach(input):
    """A view of ``input`` outside the autograd graph."""
    return _t(input, "detach").detach()


def numel(input):
    """Number of elements of ``input``."""
    return _t(input, "numel").numel()


def is_tensor(obj):
    """Whether ``obj`` is a fiamma Tensor."""
    return isinstance(obj, Tensor)


def is_floating_point(input):
    """Whether ``input`` has a floating-point dtype."""
    return _t(input, "is_floating_point").is_floating_point()


__all__ += ["transpose", "permute", "reshape", "squeeze", "unsqueeze", "flatten", "unflatten",
            "ravel", "narrow", "narrow_copy", "select", "unbind", "t", "adjoint", "as_strided",
            "clone", "detach", "numel", "is_tensor", "is_floating_point"]
# Tensor methods of this module: attached by fiamma._methods (the one place that does)
METHODS = {"ravel": ravel, "narrow_copy": narrow_copy}
