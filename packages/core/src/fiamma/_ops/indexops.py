"""Index ops with PyTorch's names and semantics: gather, scatter (+ add / reduce),
index_select, index_add, index_copy, index_fill, masked_fill, masked_select, masked_scatter,
take, take_along_dim, put, bincount, histc.

The dim-wise family runs on one C kernel (``fm_ixop``, csrc/indexops.c) that checks every index;
the mask ops reuse the mask kernels of csrc/index.c. As in PyTorch, gather/scatter/index_select/
index_add/index_copy/take_along_dim do not wrap negative indices (a negative index is out of
range), while index_fill, take and put do. Scatters visit the index in row-major order, so with
duplicate indices the last write wins and accumulations are exact in that order.
"""

import builtins
import math

import numpy as np

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check, codes as K
from fiamma._ops._common import broadcast_shapes, check_out, is_scalar
from fiamma._ops.indexing import _fill_args
from fiamma._tensor import Tensor, _copy_into, new_empty, wrap_dim

__all__ = ["gather", "scatter", "scatter_add", "scatter_reduce", "index_select", "index_add",
           "index_copy", "index_fill", "masked_fill", "masked_select", "masked_scatter", "take",
           "take_along_dim", "put", "bincount", "histc"]

_GATHER, _SCATTER, _ADD, _MUL, _MAX, _MIN = (K.IXOP_GATHER, K.IXOP_SCATTER, K.IXOP_ADD,
                                              K.IXOP_MUL, K.IXOP_MAX, K.IXOP_MIN)
_ERR_INDEX = K.ERR_INDEX


# ---- argument helpers ------------------------------------------------------------------------

def _tensor_arg(x, op, name="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(x).__name__}")
    return x


def _index_arg(index, op, int32=True, name="index"):
    """An index tensor as int64 (int32 is converted where PyTorch accepts it)."""
    _tensor_arg(index, op, name)
    dt = index._dtype
    if dt is D.int64:
        return index
    if int32 and dt is D.int32:
        out = new_empty(index._shape, D.int64, index._storage.device)
        _copy_into(out, index)
        return out
    want = "int32/int64" if int32 else "int64"
    raise RuntimeError(f"{op}(): Expected dtype {want} for {name}, but got {dt}")


def _as1(t):
    """(shape, stride) of t with a 0-d tensor seen as 1-d (PyTorch's rule for these ops)."""
    if t._shape:
        return t._shape, t._stride
    return (1,), (1,)


def _value_buf(value, dt, op, dev):
    """A number (or 0-d tensor) as a 0-d tensor of dtype ``dt`` on ``dev``."""
    if isinstance(value, Tensor):
        if value._shape:
            raise RuntimeError(f"{op}: only supports a 0-dimensional value tensor, but got "
                               f"tensor with {len(value._shape)} dimension(s).")
        value = value.item()
    if not is_scalar(value):
        raise TypeError(f"{op}: value must be a number, got {type(value).__name__}")
    t = new_empty((), dt, dev)
    if dt._kind == 3:
        from fiamma._creation import fill_

        return fill_(t, value)
    check(t._storage.backend.fill(t, *_fill_args(value, dt, op)), op)
    return t


def _no_internal_overlap(x, op):
    for n, st in zip(x._shape, x._stride):
        if st == 0 and n > 1 and 0 not in x._shape:  # an empty tensor writes nothing
            raise RuntimeError(f"{op}: unsupported operation: more than one element of the "
                               "written-to tensor refers to a single memory location. Please "
                               "clone() the tensor before performing the operation.")


def _private(t, dst):
    """``t`` itself, or a copy when it shares memory with the destination ``dst``."""
    if t._storage is dst._storage:
        return t.detach().clone()
    return t


def _same_device(op, *ts):
    """RuntimeError naming op unless the tensors ts (None skipped) share one device."""
    devs = [t._storage.device for t in ts if t is not None]
    for d in devs[1:]:
        if d != devs[0]:
            raise RuntimeError(f"{op}: expected all tensors to be on the same device, but found "
                               f"at least two devices, {devs[0]} and {d}")


def _run(mode, op, shape, a, sa, b, sb, idx, sidx, isize, istride, dim, wrap=0,
         precheck=0, init=None):
    """The backend's ixop over tensors a (dense), b (indexed) and idx (int64 indices)."""
    dev = b._storage.device
    if a._storage.device is not dev or idx._storage.device is not dev:
        _same_device(op, b, a, idx)
    if b._dtype._kind == 3:
        a, sa, b, sb, shape, sidx, istride = _complex_as_pairs(mode, op, shape, a, sa, b, sb,
                                                               sidx, istride)
    bad = [0]
    rc = b._storage.backend.ixop(mode, shape, a, sa, b, sb, idx, sidx, isize, istride, wrap,
                                 precheck, bad, init)
    if rc:
        if rc == _ERR_INDEX:
            if dim is None:
                raise IndexError(f"{op}(): index {bad[0]} is out of range for a tensor of "
                                 f"{isize} elements")
            raise IndexError(f"{op}(): index {bad[0]} is out of bounds for dimension {dim} "
                             f"with size {isize}")
        check(rc, op)


def _complex_as_pairs(mode, op, shape, a, sa, b, sb, sidx, istride):
    """A complex gather/scatter/add as the same op on the (real, imag) pairs: one more
    dimension of size 2 that the index does not move (adding is componentwise)."""
    from fiamma._ops.complex_ops import view_as_real

    if mode not in (K.IXOP_GATHER, K.IXOP_SCATTER, K.IXOP_ADD) or a._dtype is not b._dtype:
        raise TypeError(f"{op}: not implemented for dtype {b._dtype}")
    return (view_as_real(a), tuple(2 * s for s in sa) + (1,), view_as_real(b),
            tuple(2 * s for s in sb) + (1,), tuple(shape) + (2,), tuple(sidx) + (0,),
            2 * istride)


def _finish(op, res, out, inputs, kwargs, grad):
    """Copy into ``out=`` if given, record for autograd, return the result."""
    if out is not None:
        check_out(out, res._shape, res._dtype, op)
        _copy_into(out, res)
        res = out
    if grad:
        G.record(op, res, inputs, kwargs)
    return res


def _grad(*xs):
    for x in xs:
        if isinstance(x, Tensor) and x.requires_grad:
            return True
    return False


def _inplace_done(name, self, inputs, kwargs):
    self._bump()
    if _grad(*inputs):
        G.record_inplace(name, self, inputs, kwargs)
    return self


def _fresh(x):
    """A contiguous private copy of x (the result of an out-of-place scatter-like op)."""
    out = new_empty(x._shape, x._dtype, x._storage.device)
    _copy_into(out, x)
    return out


# ---- gather ----------------------------------------------------------------------------------

def _check_gather_shapes(op, x, dim, index, src=None):
    xs, _ = _as1(x)
    ishape, _ = _as1(index)
    if len(ishape) != len(xs):
        raise RuntimeError(f"{op}(): Index tensor must have the same number of dimensions as "
                           f"self tensor "
                           f"({len(index._shape)} vs {len(x._shape)})")
    if src is not None:
        ss, _ = _as1(src)
        if len(ss) != len(xs):
            raise RuntimeError(f"{op}(): Index tensor must have the same number of dimensions "
                               f"as src tensor ({len(index._shape)} vs {len(src._shape)})")
    if index._numel == 0:
        return
    for d, n in enumerate(ishape):
        if (d != dim and n > xs[d]) or (src is not None and n > _as1(src)[0][d]):
            what = f" and to be no larger size than src {list(src._shape)}" if src is not None \
                else ""
            raise RuntimeError(f"{op}(): Size does not match at dimension {d}: expected index "
                               f"{list(index._shape)} to be no larger than self "
                               f"{list(x._shape)} apart from dimension {dim}{what}")


def gather(input, dim, index, *, sparse_grad=False, out=None):
    """Values of ``input`` along ``dim`` at ``index``: ``out[i][j] = input[i][index[i][j]]`` for
    ``dim=1`` (``index`` has input's number of dims and is no larger outside ``dim``; int64 or
    int32; negative indices are out of range).

    >>> import fiamma
    >>> x = fiamma.tensor([[1, 2], [3, 4]])
    >>> fiamma.gather(x, 1, fiamma.tensor([[0, 0], [1, 0]])).tolist()
    [[1, 1], [4, 3]]
    """
    _tensor_arg(input, "gather")
    index = _index_arg(index, "gather")
    d = wrap_dim(dim, len(input._shape), "gather")
    _check_gather_shapes("gather", input, d, index)
    res = new_empty(index._shape, input._dtype, input._storage.device)
    if index._numel:
        xs, xst = _as1(input)
        ish, ist = _as1(index)
        sb = xst[:d] + (0,) + xst[d + 1:]
        _run(_GATHER, "gather", ish, res, _as1(res)[1], input, sb,
             index, ist, xs[d], xst[d], d)
    return _finish(ops.gather, res, out, (input, dim, index), {}, input.requires_grad)


# ---- scatter family --------------------------------------------------------------------------

_LEGACY = {"add": _ADD, "multiply": _MUL}
_REDUCE = {"sum": _ADD, "prod": _MUL, "mean": _ADD, "amax": _MAX, "amin": _MIN}


def _scatter_into(op, dst, d, index, src, mode, precheck, init=None):
    """dst[..., index[p], ...] (op)= src[p] (or the number ``src``) over index's positions;
    with ``init`` (contiguous, dst's layout) dst first receives a copy of it."""
    _no_internal_overlap(dst, op)
    if index._numel == 0:
        if init is not None:
            _copy_into(dst, init)
        return
    if index._storage is dst._storage:
        index = index.detach().clone()
    if mode == _MUL and dst._dtype._kind == 3:
        if init is not None:
            _copy_into(dst, init)
        _complex_scatter_mul(op, dst, d, index, src)
        return
    ds, dst_st = _as1(dst)
    ish, ist = _as1(index)
    sb = dst_st[:d] + (0,) + dst_st[d + 1:]
    if isinstance(src, Tensor):
        src = _private(src, dst)
        _run(mode, op, ish, src, _as1(src)[1], dst, sb, index, ist,
             ds[d], dst_st[d], d, precheck=precheck, init=init)
    else:
        vt = _value_buf(src, dst._dtype, op, dst._storage.device)
        _run(mode, op, ish, vt, (0,) * len(ish), dst, sb, index, ist,
             ds[d], dst_st[d], d, precheck=precheck, init=init)


def _complex_scatter_mul(op, dst, d, index, src):
    """dst[..., index[p], ...] *= src[p] for complex dst (the C kernels multiply reals only):
    with the device's array module, in rounds in which every destination appears once (a
    product of complex numbers is not a product of their parts)."""
    from fiamma._ops.complex_ops import arr, xp_of

    xp = xp_of(dst)
    I = arr(index)
    n = dst._shape[d]
    bad = (I < 0) | (I >= n)
    if bool(bad.any()):
        raise IndexError(f"{op}(): index {int(I[bad].ravel()[0])} is out of bounds for "
                         f"dimension {d} with size {n}")
    ish = index._shape
    if isinstance(src, Tensor):
        src = _private(src, dst)
        vals = arr(src)[tuple(slice(0, k) for k in ish)]
    else:
        vals = xp.full(ish, dst._dtype._np.type(src.item() if isinstance(src, Tensor) else src))
    comps = [xp.broadcast_to(xp.arange(k).reshape((k,) + (1,) * (len(ish) - i - 1)), ish)
             for i, k in enumerate(ish)]
    comps[d] = I
    D = arr(dst)
    flat = xp.ravel_multi_index(tuple(c.ravel() for c in comps), D.shape)
    order = xp.argsort(flat)
    fs, vs = flat[order], vals.ravel()[order]
    start = xp.concatenate([xp.ones(1, dtype=bool), fs[1:] != fs[:-1]])
    pos = xp.arange(fs.shape[0])
    rank = pos - pos[start][xp.cumsum(start) - 1]  # position within its destination's run
    acc = D.reshape(-1).copy()
    for r in range(int(rank.max()) + 1):
        m = rank == r
        acc[fs[m]] *= vs[m]
    D[...] = acc.reshape(D.shape)


def _scatter_fresh(op, input, d, index, src, mode):
    """A new tensor: a copy of input with src scattered into it (one C call when input is
    contiguous: the copy is made slab by slab by the scattering threads)."""
    if input._contig:
        res = new_empty(input._shape, input._dtype, input._storage.device)
        _scatter_into(op, res, d, index, src, mode, 0, init=input)
    else:
        res = _fresh(input)
        _scatter_into(op, res, d, index, src, mode, 0)
    return res


def _scatter_args(op, input, dim, index, src, value):
    _tensor_arg(input, op)
    index = _index_arg(index, op)
    d = wrap_dim(dim, len(input._shape), op)
    if src is None:
        src = value
    elif value is not None:
        raise TypeError(f"{op}(): give either src or value, not both")
    if src is None:
        raise TypeError(f"{op}(): missing the src tensor or value")
    if isinstance(src, Tensor):
        if src._dtype is not input._dtype:
            raise RuntimeError(f"{op}(): Expected self.dtype to be equal to src.dtype "
                               f"(got {input._dtype} and {src._dtype})")
        _check_gather_shapes(op, input, d, index, src)
    else:
        _check_gather_shapes(op, input, d, index)
    return index, d, src


def _legacy_mode(reduce, op):
    if reduce is None:
        return _SCATTER
    try:
        return _LEGACY[reduce]
    except (KeyError, TypeError):
        raise RuntimeError(f"{op}(): reduce argument must be either add or multiply, got "
                           f"{reduce!r}") from None


def scatter(input, dim, index, src=None, *, value=None, reduce=None, out=None):
    """A copy of ``input`` with ``src`` (a tensor, or a number) written along ``dim`` at
    ``index``: ``out[i][index[i][j]] = src[i][j]`` for ``dim=1``. With duplicate indices the
    last one (row-major) wins; ``reduce='add'``/``'multiply'`` accumulates instead.

    >>> import fiamma
    >>> fiamma.zeros(2, 3).scatter(1, fiamma.tensor([[2], [0]]), 5.0).tolist()
    [[0.0, 0.0, 5.0], [5.0, 0.0, 0.0]]
    """
    index, d, src = _scatter_args("scatter", input, dim, index, src, value)
    mode = _legacy_mode(reduce, "scatter")
    res = _scatter_fresh("scatter", input, d, index, src, mode)
    kw = {"reduce": reduce} if reduce is not None else {}
    return _finish(ops.scatter, res, out, (input, dim, index, src), kw, _grad(input, src))


def _scatter_(self, dim, index, src=None, *, value=None, reduce=None):
    """In-place :func:`scatter`."""
    if self.requires_grad:
        G.check_inplace(self, "scatter_")
    index, d, src = _scatter_args("scatter_", self, dim, index, src, value)
    _scatter_into("scatter_", self, d, index, src, _legacy_mode(reduce, "scatter_"), 1)
    kw = {"reduce": reduce} if reduce is not None else {}
    return _inplace_done(ops.scatter_, self, (self, dim, index, src), kw)


def scatter_add(input, dim, index, src, *, out=None):
    """A copy of ``input`` with ``src`` added along ``dim`` at ``index`` (duplicates summed in
    row-major order of ``index``).

    >>> import fiamma
    >>> fiamma.zeros(3).scatter_add(0, fiamma.tensor([0, 2, 0]), fiamma.ones(3)).tolist()
    [2.0, 0.0, 1.0]
    """
    _tensor_arg(src, "scatter_add", "src")
    index, d, src = _scatter_args("scatter_add", input, dim, index, src, None)
    res = _scatter_fresh("scatter_add", input, d, index, src, _ADD)
    return _finish(ops.scatter_add, res, out, (input, dim, index, src), {}, _grad(input, src))


def _scatter_add_(self, dim, index, src):
    """In-place :func:`scatter_add`."""
    if self.requires_grad:
        G.check_inplace(self, "scatter_add_")
    _tensor_arg(src, "scatter_add_", "src")
    index, d, src = _scatter_args("scatter_add_", self, dim, index, src, None)
    _scatter_into("scatter_add_", self, d, index, src, _ADD, 1)
    return _inplace_done(ops.scatter_add_, self, (self, dim, index, src), {})


def _identity(reduce, dt):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dt is D.bool:
        return reduce == "amin"
    if dt._kind == 2:
        return -math.inf if reduce == "amax" else math.inf
    if dt._kind == 3:  # no order: the kernel refuses amax/amin of complex, as in PyTorch
        raise TypeError(f"scatter_reduce: reduce={reduce!r} is not implemented for dtype {dt}")
    info = D.iinfo(dt)
    return info.min if reduce == "amax" else info.max


def _scatter_reduce_into(op, dst, d, index, src, reduce, include_self, precheck):
    if reduce not in _REDUCE:
        raise RuntimeError(f"{op}(): reduce argument must be one of sum, prod, mean, amax, amin, "
                           f"got {reduce!r}")
    if reduce == "mean" and dst._dtype is D.bool:
        raise RuntimeError(f"{op}(): reduce='mean' is not implemented for bool")
    if precheck:  # nothing may change when an index is bad
        _check_only(op, dst, d, index)
    if not include_self:
        _scatter_into(op, dst, d, index, _identity(reduce, dst._dtype), _SCATTER, 0)
    if reduce == "mean":
        cnt = new_empty(dst._shape, D.int64, dst._storage.device)
        cnt._storage.backend.fill(cnt, 0.0, 1, 1)
        if not include_self:
            _scatter_into(op, cnt, d, index, 0, _SCATTER, 0)
        _scatter_into(op, cnt, d, index, 1, _ADD, 0)
    _scatter_into(op, dst, d, index, src, _REDUCE[reduce], 0)
    if reduce == "mean":
        from fiamma._ops.elementwise import div

        if dst._dtype._kind == 3:  # complex: the mean of each part
            _copy_into(dst, div(dst.detach(), cnt.to(dst._dtype.to_real)))
            return
        div(dst.detach(), cnt, rounding_mode=None if dst._dtype._kind == 2 else "floor",
            out=dst.detach())


def _check_only(op, dst, d, index):
    """Raise IndexError for a bad index without writing (the check pass of an in-place op)."""
    if index._numel == 0:
        return
    ds, dst_st = _as1(dst)
    ish, ist = _as1(index)
    sb = dst_st[:d] + (0,) + dst_st[d + 1:]
    scratch = new_empty(index._shape, dst._dtype, dst._storage.device)
    _run(_GATHER, op, ish, scratch, _as1(scratch)[1], dst, sb, index,
         ist, ds[d], dst_st[d], d)


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True, out=None):
    """A copy of ``input`` with ``src`` reduced into it along ``dim`` at ``index``; ``reduce`` is
    ``'sum'``, ``'prod'``, ``'mean'``, ``'amax'`` or ``'amin'``. With ``include_self=False`` the
    values of ``input`` at scattered positions do not take part. Integer means round down.

    >>> import fiamma
    >>> x = fiamma.tensor([1.0, 2.0, 3.0])
    >>> x.scatter_reduce(0, fiamma.tensor([0, 0]), fiamma.tensor([5.0, 7.0]), "amax").tolist()
    [7.0, 2.0, 3.0]
    """
    _tensor_arg(src, "scatter_reduce", "src")
    index, d, src = _scatter_args("scatter_reduce", input, dim, index, src, None)
    if include_self and reduce in ("sum", "prod", "amax", "amin"):
        res = _scatter_fresh("scatter_reduce", input, d, index, src, _REDUCE[reduce])
    else:
        res = _fresh(input)
        _scatter_reduce_into("scatter_reduce", res, d, index, src, reduce, include_self, 0)
    return _finish(ops.scatter_reduce, res, out, (input, dim, index, src),
                   {"reduce": reduce, "include_self": include_self}, _grad(input, src))


def _scatter_reduce_(self, dim, index, src, reduce, *, include_self=True):
    """In-place :func:`scatter_reduce`."""
    if self.requires_grad:
        G.check_inplace(self, "scatter_reduce_")
    _tensor_arg(src, "scatter_reduce_", "src")
    index, d, src = _scatter_args("scatter_reduce_", self, dim, index, src, None)
    _scatter_reduce_into("scatter_reduce_", self, d, index, src, reduce, include_self, 1)
    return _inplace_done(ops.scatter_reduce_, self, (self, dim, index, src),
                         {"reduce": reduce, "include_self": include_self})


# ---- index_select / index_add / index_copy / index_fill ---------------------------------------

def _vector_index(index, op, int32):
    index = _index_arg(index, op, int32)
    if len(index._shape) > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector, got shape "
                         f"{list(index._shape)}")
    return index


def _dim_layout(x, d, index):
    """Iteration over x's shape with dim d replaced by len(index): (shape, x strides with 0 at
    d, index strides, size and stride of dim d)."""
    xs, xst = _as1(x)
    n = index._numel
    shape = xs[:d] + (n,) + xs[d + 1:]
    sb = xst[:d] + (0,) + xst[d + 1:]
    si = (0,) * d + ((index._stride[0] if index._shape else 0),) + (0,) * (len(xs) - d - 1)
    return shape, sb, si, xs[d], xst[d]


def index_select(input, dim, index, *, out=None):
    """The slices of ``input`` along ``dim`` at the positions in the 1-d ``index`` (int64 or
    int32; negative positions are out of range).

    >>> import fiamma
    >>> x = fiamma.tensor([[1, 2, 3], [4, 5, 6]])
    >>> fiamma.index_select(x, 1, fiamma.tensor([2, 0])).tolist()
    [[3, 1], [6, 4]]
    """
    _tensor_arg(input, "index_select")
    index = _vector_index(index, "index_select", True)
    d = wrap_dim(dim, len(input._shape), "index_select")
    if not input._shape and index._numel != 1:
        raise IndexError(f"index_select(): Index to scalar can have only 1 value, got "
                         f"{index._numel} value(s)")
    shape, sb, si, isize, istride = _dim_layout(input, d, index)
    res = new_empty(shape if input._shape else (), input._dtype, input._storage.device)
    if res._numel:
        _run(_GATHER, "index_select", shape, res, _as1(res)[1], input,
             sb, index, si, isize, istride, d)
    return _finish(ops.index_select, res, out, (input, dim, index), {}, input.requires_grad)


def _source_check(op, x, d, index, source):
    _tensor_arg(source, op, "source")
    if source._dtype is not x._dtype:
        raise RuntimeError(f"{op}(): self ({x._dtype}) and source ({source._dtype}) must have "
                           "the same scalar type")
    xs, _ = _as1(x)
    ss, _ = _as1(source)
    want = xs[:d] + (index._numel,) + xs[d + 1:]
    if ss != want:
        raise RuntimeError(f"{op}(): source tensor shape must match self tensor shape, excluding "
                           f"the specified dimension, with size(dim) == len(index): self.shape = "
                           f"{list(x._shape)}, index length {index._numel}, source.shape = "
                           f"{list(source._shape)}")


def _index_scatter(op, dst, d, index, source, mode, precheck, wrap=0):
    _no_internal_overlap(dst, op)
    if index._storage is dst._storage:
        index = index.detach().clone()
    shape, sb, si, isize, istride = _dim_layout(dst, d, index)
    if 0 in shape:
        return
    if isinstance(source, Tensor):
        source = _private(source, dst)
        _run(mode, op, shape, source, _as1(source)[1], dst, sb, index,
             si, isize, istride, d, wrap, precheck)
    else:
        vt = _value_buf(source, dst._dtype, op, dst._storage.device)
        _run(mode, op, shape, vt, (0,) * len(shape), dst, sb, index, si,
             isize, istride, d, wrap, precheck)


def _scaled(source, alpha, dt, op="index_add"):
    if isinstance(alpha, complex) and dt._kind != 3:
        raise RuntimeError(f"{op}: alpha {alpha} cannot be converted to type {dt} without "
                           "overflow")
    if isinstance(alpha, float) and dt._kind < 2:  # PyTorch truncates it: refused, as add does
        raise RuntimeError(f"{op}: For integral input tensors, argument alpha must not be a "
                           f"floating point number, got {alpha}")
    if alpha == 1:
        return source
    from fiamma._ops.elementwise import mul

    prod = mul(source.detach(), alpha)
    if prod._dtype is dt:
        return prod
    out = new_empty(prod._shape, dt, prod._storage.device)
    _copy_into(out, prod)
    return out


def _index_add_impl(op, dst, dim, index, source, alpha, precheck):
    index = _vector_index(index, op, True)
    d = wrap_dim(dim, len(dst._shape), op)
    _source_check(op, dst, d, index, source)
    _index_scatter(op, dst, d, index, _scaled(source, alpha, dst._dtype, op), _ADD, precheck)


def index_add(input, dim, index, source, *, alpha=1, out=None):
    """A copy of ``input`` with ``alpha * source`` added to the slices along ``dim`` at the
    positions in the 1-d ``index`` (duplicates accumulate).

    >>> import fiamma
    >>> fiamma.zeros(3).index_add(0, fiamma.tensor([0, 0, 2]), fiamma.ones(3)).tolist()
    [2.0, 0.0, 1.0]
    """
    _tensor_arg(input, "index_add")
    res = _fresh(input)
    _index_add_impl("index_add", res, dim, index, source, alpha, 0)
    return _finish(ops.index_add, res, out, (input, dim, index, source), {"alpha": alpha},
                   _grad(input, source))


def _index_add_(self, dim, index, source, *, alpha=1):
    """In-place :func:`index_add`."""
    if self.requires_grad:
        G.check_inplace(self, "index_add_")
    _index_add_impl("index_add_", self, dim, index, source, alpha, 1)
    return _inplace_done(ops.index_add_, self, (self, dim, index, source), {"alpha": alpha})


def _index_copy_impl(op, dst, dim, index, source, precheck):
    index = _vector_index(index, op, False)
    d = wrap_dim(dim, len(dst._shape), op)
    _source_check(op, dst, d, index, source)
    _index_scatter(op, dst, d, index, source, _SCATTER, precheck)


def index_copy(input, dim, index, source, *, out=None):
    """A copy of ``input`` whose slices along ``dim`` at the positions in ``index`` (int64) are
    replaced by those of ``source`` (a duplicate position gets its last slice)."""
    _tensor_arg(input, "index_copy")
    res = _fresh(input)
    _index_copy_impl("index_copy", res, dim, index, source, 0)
    return _finish(ops.index_copy, res, out, (input, dim, index, source), {},
                   _grad(input, source))


def _index_copy_(self, dim, index, source):
    """In-place :func:`index_copy`."""
    if self.requires_grad:
        G.check_inplace(self, "index_copy_")
    _index_copy_impl("index_copy_", self, dim, index, source, 1)
    return _inplace_done(ops.index_copy_, self, (self, dim, index, source), {})


def _index_fill_impl(op, dst, dim, index, value, precheck):
    index = _vector_index(index, op, False)
    d = wrap_dim(dim, len(dst._shape), op)
    if isinstance(value, Tensor):  # a 0-d tensor value is a number here, never a source
        if value._shape:
            raise RuntimeError(f"{op}(): only supports a 0-dimensional value tensor, but got "
                               f"tensor with {len(value._shape)} dimension(s).")
        value = value.item()
    _index_scatter(op, dst, d, index, value, _SCATTER, precheck, wrap=1)


def index_fill(input, dim, index, value):
    """A copy of ``input`` with the slices along ``dim`` at ``index`` (int64; negative positions
    count from the end) set to ``value`` (a number or a 0-d tensor).

    >>> import fiamma
    >>> fiamma.zeros(2, 3).index_fill(1, fiamma.tensor([-1]), 7.0).tolist()
    [[0.0, 0.0, 7.0], [0.0, 0.0, 7.0]]
    """
    _tensor_arg(input, "index_fill")
    res = _fresh(input)
    _index_fill_impl("index_fill", res, dim, index, value, 0)
    return _finish(ops.index_fill, res, None, (input, dim, index, value), {}, _grad(input, value))


def _index_fill_(self, dim, index, value):
    """In-place :func:`index_fill`."""
    if self.requires_grad:
        G.check_inplace(self, "index_fill_")
    _index_fill_impl("index_fill_", self, dim, index, value, 1)
    return _inplace_done(ops.index_fill_, self, (self, dim, index, value), {})


# ---- masked ops -----------------------------------------------------------------------------

def _mask_arg(mask, op):
    _tensor_arg(mask, op, "mask")
    if mask._dtype is not D.bool:
        raise RuntimeError(f"{op}: expected a bool mask, but got mask with dtype {mask._dtype}")
    return mask


def _bstrides(t, shape, op):
    """Strides of t broadcast to shape (RuntimeError naming op when it does not broadcast)."""
    ts = t._shape
    if ts == shape:
        return t._stride
    if len(ts) > len(shape):
        raise RuntimeError(f"{op}: shape {list(ts)} cannot be broadcast to {list(shape)}")
    off = len(shape) - len(ts)
    st = [0] * len(shape)
    for i, n in enumerate(ts):
        if n == shape[off + i]:
            st[off + i] = t._stride[i] if n != 1 else 0
        elif n != 1:
            raise RuntimeError(f"{op}: shape {list(ts)} cannot be broadcast to {list(shape)}")
    return tuple(st)


def _masked_fill_into(op, dst, mask, value):
    if mask._storage.device is not dst._storage.device:
        _same_device(op, dst, mask)
    _no_internal_overlap(dst, op)
    if mask._storage is dst._storage:
        mask = mask.detach().clone()
    mst = _bstrides(mask, dst._shape, op)
    vt = _value_buf(value, dst._dtype, op, dst._storage.device)
    check(dst._storage.backend.masked_put(dst._shape, dst, dst._stride, mask, mst, vt, 1, 0),
          op)


def _expanded_copy(x, shape):
    out = new_empty(shape, x._dtype, x._storage.device)
    if out._numel:
        check(out._storage.backend.copy_region(shape, out, 0, out._stride, x, 0,
                                               _bstrides(x, shape, "expand")), "expand")
    return out


def masked_fill(input, mask, value):
    """A copy of ``input`` (broadcast with the bool ``mask``) with ``value`` (a number or a 0-d
    tensor) where ``mask`` is True.

    >>> import fiamma
    >>> fiamma.zeros(3).masked_fill(fiamma.tensor([True, False, True]), 2.0).tolist()
    [2.0, 0.0, 2.0]
    """
    _tensor_arg(input, "masked_fill")
    mask = _mask_arg(mask, "masked_fill")
    shape = broadcast_shapes(input._shape, mask._shape, op="masked_fill")
    res = _expanded_copy(input, shape)
    _masked_fill_into("masked_fill", res, mask, value)
    return _finish(ops.masked_fill, res, None, (input, mask, value), {}, _grad(input, value))


def _masked_fill_(self, mask, value):
    """In-place :func:`masked_fill` (the mask broadcasts to self's shape)."""
    if self.requires_grad:
        G.check_inplace(self, "masked_fill_")
    mask = _mask_arg(mask, "masked_fill_")
    _masked_fill_into("masked_fill_", self, mask, value)
    return _inplace_done(ops.masked_fill_, self, (self, mask, value), {})


def _count(mask, shape, mst):
    rc, n = mask._storage.backend.nonzero_count(shape, mask, mst)
    check(rc, "count")
    return n


def masked_select(input, mask, *, out=None):
    """A 1-d tensor of the elements of ``input`` where the bool ``mask`` is True (both broadcast
    to a common shape), in row-major order.

    >>> import fiamma
    >>> fiamma.masked_select(fiamma.tensor([[1, 2], [3, 4]]), fiamma.tensor([True, False])).tolist()
    [1, 3]
    """
    _tensor_arg(input, "masked_select")
    mask = _mask_arg(mask, "masked_select")
    shape = broadcast_shapes(input._shape, mask._shape, op="masked_select")
    if mask._storage.device is not input._storage.device:
        _same_device("masked_select", input, mask)
    mst = _bstrides(mask, shape, "masked_select")
    xst = _bstrides(input, shape, "masked_select")
    n = _count(mask, shape, mst)
    res = new_empty((n,), input._dtype, input._storage.device)
    if n:
        check(res._storage.backend.masked_select(shape, res, n, input, xst, mask, mst)[0],
              "masked_select")
    return _finish(ops.masked_select, res, out, (input, mask), {}, input.requires_grad)


def _masked_scatter_into(op, dst, mask, source):
    _tensor_arg(source, op, "source")
    if source._dtype is not dst._dtype:
        raise RuntimeError(f"{op}: expected self and source to have same dtypes but got "
                           f"{dst._dtype} and {source._dtype}")
    if mask._storage.device is not dst._storage.device or \
            source._storage.device is not dst._storage.device:
        _same_device(op, dst, mask, source)
    _no_internal_overlap(dst, op)
    if mask._storage is dst._storage:
        mask = mask.detach().clone()
    mst = _bstrides(mask, dst._shape, op)
    n = _count(mask, dst._shape, mst)
    if n > source._numel:
        raise RuntimeError(f"{op}: Number of elements of source ({source._numel}) < number of "
                           f"ones in mask ({n})")
    if n == 0:
        return
    src = source.detach()
    if not src._contig or src._storage is dst._storage:
        src = _fresh(src)
    check(dst._storage.backend.masked_put(dst._shape, dst, dst._stride, mask, mst, src,
                                          source._numel, 1), op)


def masked_scatter(input, mask, source):
    """A copy of ``input`` (broadcast with ``mask``) whose elements where ``mask`` is True are
    replaced, in row-major order, by consecutive elements of ``source``.

    >>> import fiamma
    >>> fiamma.zeros(4).masked_scatter(fiamma.tensor([True, False, True, False]),
    ...                                fiamma.tensor([5.0, 6.0])).tolist()
    [5.0, 0.0, 6.0, 0.0]
    """
    _tensor_arg(input, "masked_scatter")
    mask = _mask_arg(mask, "masked_scatter")
    shape = broadcast_shapes(input._shape, mask._shape, op="masked_scatter")
    res = _expanded_copy(input, shape)
    _masked_scatter_into("masked_scatter", res, mask, source)
    return _finish(ops.masked_scatter, res, None, (input, mask, source), {}, _grad(input, source))


def _masked_scatter_(self, mask, source):
    """In-place :func:`masked_scatter` (the mask broadcasts to self's shape)."""
    if self.requires_grad:
        G.check_inplace(self, "masked_scatter_")
    mask = _mask_arg(mask, "masked_scatter_")
    _masked_scatter_into("masked_scatter_", self, mask, source)
    return _inplace_done(ops.masked_scatter_, self, (self, mask, source), {})


# ---- take / take_along_dim / put ------------------------------------------------------------

def take(input, index, *, out=None):
    """Elements of ``input`` seen as 1-d (row-major) at ``index`` (int64, any shape; negative
    positions count from the end); the result has ``index``'s shape.

    >>> import fiamma
    >>> fiamma.take(fiamma.tensor([[1, 2], [3, 4]]), fiamma.tensor([0, -1])).tolist()
    [1, 4]
    """
    _tensor_arg(input, "take")
    index = _index_arg(index, "take", False)
    res = new_empty(index._shape, input._dtype, input._storage.device)
    if index._numel:
        flat = input if input._contig else _fresh(input)
        ish, ist = _as1(index)
        _run(_GATHER, "take", ish, res, _as1(res)[1], flat,
             (0,) * len(ish), index, ist, input._numel, 1, None, wrap=1)
    return _finish(ops.take, res, out, (input, index), {}, input.requires_grad)


def take_along_dim(input, indices, dim=None, *, out=None):
    """``gather`` with broadcasting: ``input`` and ``indices`` (int64, same number of dims) are
    broadcast against each other outside ``dim``; with ``dim=None`` both are flattened.

    >>> import fiamma
    >>> x = fiamma.tensor([[10, 30, 20], [60, 40, 50]])
    >>> fiamma.take_along_dim(x, fiamma.argmax(x, 1, keepdim=True), 1).tolist()
    [[30], [60]]
    """
    op = ops.take_along_dim
    _tensor_arg(input, op)
    indices = _index_arg(indices, op, False, "indices")
    if dim is None:
        res = gather(input.detach().reshape(-1), 0, indices.reshape(-1))
        return _finish(op, res, out, (input, indices), {"dim": None}, input.requires_grad)
    if len(input._shape) != len(indices._shape):
        raise RuntimeError(f"{op}(): input and indices should have the same number of dimensions, "
                           f"but got {len(input._shape)} dimensions for input, and "
                           f"{len(indices._shape)} dimensions for indices")
    d = wrap_dim(dim, len(input._shape), op)
    given = indices
    if indices._numel and input._shape and bool((indices < 0).any()):
        # PyTorch's take_along_dim (unlike gather) counts negative indices from the end
        n = input._shape[d]
        indices = indices + (indices < 0).to(indices._dtype) * n
    xs, js = list(input._shape), list(indices._shape)
    if xs:
        xs[d] = js[d] = 1
    b = broadcast_shapes(tuple(xs), tuple(js), op=op)
    x = input.detach()
    if b:
        x = x.expand(b[:d] + (input._shape[d],) + b[d + 1:])
        indices = indices.expand(b[:d] + (indices._shape[d],) + b[d + 1:])
    res = gather(x, d, indices)
    return _finish(op, res, out, (input, given), {"dim": dim}, input.requires_grad)


def _put_into(op, dst, index, source, accumulate):
    _tensor_arg(dst, op)
    index = _index_arg(index, op, False)
    _tensor_arg(source, op, "source")
    if source._dtype is not dst._dtype:
        raise RuntimeError(f"{op}(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {dst._dtype} and source.dtype = {source._dtype}")
    if source._numel != index._numel:
        raise RuntimeError(f"{op}(): Expected source and index to have the same number of "
                           f"elements, but got source.numel() = {source._numel}, index.numel() "
                           f"= {index._numel}")
    if index._numel == 0:
        return
    target = dst if dst._contig else _fresh(dst)
    idx = index if index._contig and index._storage is not dst._storage else _fresh(index)
    src = source if source._contig and source._storage is not dst._storage else _fresh(source)
    n = index._numel
    _run(_ADD if accumulate else _SCATTER, op, (n,), src, (1,), target,
         (0,), idx, (1,), dst._numel, 1, None, wrap=1, precheck=1)
    if target is not dst:
        _copy_into(dst, target)


def put(input, index, source, accumulate=False):
    """A copy of ``input`` with ``source``'s elements written at the positions ``index`` of the
    row-major flattened tensor (negative positions count from the end); ``accumulate=True``
    adds instead, summing duplicates.

    >>> import fiamma
    >>> fiamma.zeros(2, 2).put(fiamma.tensor([0, -1]), fiamma.tensor([1.0, 2.0])).tolist()
    [[1.0, 0.0], [0.0, 2.0]]
    """
    _tensor_arg(input, "put")
    res = _fresh(input)
    _put_into("put", res, index, source, accumulate)
    return _finish(ops.put, res, None, (input, index, source), {"accumulate": accumulate},
                   _grad(input, source))


def _put_(self, index, source, accumulate=False):
    """In-place :func:`put`."""
    if self.requires_grad:
        G.check_inplace(self, "put_")
    _no_internal_overlap(self, "put_")
    _put_into("put_", self, index, source, accumulate)
    return _inplace_done(ops.put_, self, (self, index, source), {"accumulate": accumulate})


# ---- bincount / histc ------------------------------------------------------------------------

def bincount(input, weights=None, minlength=0):
    """Counts of each value in the 1-d non-negative integer tensor ``input`` (length
    ``max(input) + 1``, at least ``minlength``); with ``weights`` the sums of the weights
    (float32 weights give float32, others float64).

    >>> import fiamma
    >>> fiamma.bincount(fiamma.tensor([1, 3, 1]), minlength=5).tolist()
    [0, 2, 0, 1, 0]
    """
    _tensor_arg(input, "bincount")
    if input._dtype._kind != 1 or input._dtype is D.bool:
        raise RuntimeError(f"bincount: only integral inputs are supported, got {input._dtype}")
    if len(input._shape) != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs, got shape "
                           f"{list(input._shape)}")
    minlength = builtins.int(minlength)
    if minlength < 0:
        raise RuntimeError(f"bincount: minlength should be >= 0, got {minlength}")
    if weights is not None:
        _tensor_arg(weights, "bincount", "weights")
        if weights._storage.device is not input._storage.device:
            _same_device("bincount", input, weights)
        if weights._shape != input._shape:
            raise RuntimeError(f"bincount: weights should be 1-d and have the same length as "
                               f"input, got {list(weights._shape)} and {list(input._shape)}")
        wdt = D.float32 if weights._dtype is D.float32 else D.float64
        if weights._dtype is not wdt:
            w = new_empty(weights._shape, wdt, weights._storage.device)
            _copy_into(w, weights)
            weights = w
    odt = D.int64 if weights is None else wdt
    n = input._numel
    nbins = minlength
    if n:
        from fiamma._ops.reduce import amax, amin

        lo = amin(input).item()
        if lo < 0:
            raise RuntimeError(f"bincount only supports 1-d non-negative integral inputs, got "
                               f"value {lo}")
        nbins = builtins.max(nbins, amax(input).item() + 1)
    res = new_empty((nbins,), odt, input._storage.device, zero=True)
    if n:
        bad = [0]
        rc = res._storage.backend.bincount(input, n, input._stride[0], weights,
                                           weights._stride[0] if weights is not None else 0, res,
                                           nbins, bad)
        if rc == _ERR_INDEX:
            raise RuntimeError(f"bincount only supports 1-d non-negative integral inputs, got "
                               f"value {bad[0]}")
        check(rc, "bincount")
    return res


def histc(input, bins=100, min=0, max=0, *, out=None):
    """Histogram of the floating tensor ``input`` with ``bins`` equal bins over [min, max]
    (``min == max``: the data's range); values outside are ignored. Same dtype as ``input``.

    >>> import fiamma
    >>> fiamma.histc(fiamma.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3).tolist()
    [0.0, 2.0, 1.0, 0.0]
    """
    _tensor_arg(input, "histc")
    dt = input._dtype
    if dt._kind != 2:
        raise NotImplementedError(f"histc: not implemented for {dt}")
    bins = builtins.int(bins)
    if bins <= 0:
        raise RuntimeError(f"histc: bins must be > 0, but got {bins}")
    lo, hi = builtins.float(min), builtins.float(max)
    if lo == hi and input._numel:
        from fiamma._ops.reduce import amax, amin

        lo, hi = amin(input).item(), amax(input).item()
    if lo == hi:
        lo, hi = lo - 1, hi + 1
        if lo == hi and math.isfinite(lo):  # |value| beyond 2**53: +-1 is lost in rounding
            lo, hi = math.nextafter(lo, -math.inf), math.nextafter(hi, math.inf)
    if lo > hi:
        raise RuntimeError(f"histc: max must be larger than min (got min={lo}, max={hi})")
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"histc: range of [{lo}, {hi}] is not finite")
    counts = new_empty((bins,), D.int64, input._storage.device, zero=True)
    if input._numel:
        edges = np.linspace(lo, hi, bins + 1)
        check(counts._storage.backend.histc(input, bins, lo, hi, edges, counts), "histc")
    res = new_empty((bins,), dt, input._storage.device)
    _copy_into(res, counts)
    return _finish(ops.histc, res, out, (input,), {}, False)


# Tensor methods of this module: attached by fiamma._methods (the one place that does)
METHODS = {
    "gather": lambda self, dim, index, *, sparse_grad=False: gather(self, dim, index),
    "scatter": lambda self, dim, index, src=None, *, value=None, reduce=None:
        scatter(self, dim, index, src, value=value, reduce=reduce),
    "scatter_": _scatter_,
    "scatter_add": lambda self, dim, index, src: scatter_add(self, dim, index, src),
    "scatter_add_": _scatter_add_,
    "scatter_reduce": lambda self, dim, index, src, reduce, *, include_self=True:
        scatter_reduce(self, dim, index, src, reduce, include_self=include_self),
    "scatter_reduce_": _scatter_reduce_,
    "index_select": lambda self, dim, index: index_select(self, dim, index),
    "index_add": lambda self, dim, index, source, *, alpha=1:
        index_add(self, dim, index, source, alpha=alpha),
    "index_add_": _index_add_,
    "index_copy": lambda self, dim, index, source: index_copy(self, dim, index, source),
    "index_copy_": _index_copy_,
    "index_fill": index_fill,
    "index_fill_": _index_fill_,
    "masked_fill": masked_fill,
    "masked_fill_": _masked_fill_,
    "masked_select": lambda self, mask: masked_select(self, mask),
    "masked_scatter": masked_scatter,
    "masked_scatter_": _masked_scatter_,
    "take": lambda self, index: take(self, index),
    "take_along_dim": lambda self, indices, dim=None: take_along_dim(self, indices, dim),
    "put": put,
    "put_": _put_,
    "bincount": bincount,
    "histc": lambda self, bins=100, min=0, max=0: histc(self, bins, min, max),
}
