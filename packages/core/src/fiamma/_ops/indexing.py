"""Tensor indexing: ``__getitem__``/``__setitem__`` with PyTorch's (NumPy's) semantics,
``index_put_``/``index_put`` and ``nonzero``.

Basic indices (ints, slices with a positive step, None, Ellipsis) give views sharing storage.
A slice with a negative step (NumPy's ``x[::-1]``; PyTorch raises) gives a copy, since fiamma's
views keep non-negative strides; assigning through one (``x[::-1] = y``) writes into ``x``.
Advanced indices (integer and bool tensors, lists, NumPy arrays, bool scalars) copy through the
C gather/scatter kernels. As in PyTorch, ints are always basic: ``x[0, :, [0, 1]]`` first
selects along dim 0 and then indexes the view, so its shape is (x.shape[1], 2) (NumPy gives
(2, x.shape[1]) because it treats the int as an advanced index). Among the advanced indices the
NumPy rule holds: if they index adjacent dims of the (basic-indexed) view, the broadcast index
shape replaces those dims in place, otherwise it goes first.

Lists of numbers and ``range`` objects are index arrays (NumPy's rule); a list that holds
tensors, slices, None or Ellipsis, or a list shorter than 32 that holds sequences (lists,
tuples, ranges, arrays), is read as a tuple, as PyTorch 2.x still does (with its deprecation
warning for the sequences). A uint8 tensor is a
mask (PyTorch's deprecated rule); int8/int16/int32/int64 tensors are integer indices.
"""

import builtins
import operator
import warnings

import numpy as np

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check, codes as K
from fiamma._creation import from_array_copy, tensor as _tensor
from fiamma._ops._common import bcast_strides, broadcast_shapes, check_out, is_scalar
from fiamma._ops.elementwise import add as _add
from fiamma._storage import CPU
from fiamma._tensor import Tensor, _copy_into, _init, new_empty

__all__ = ["argwhere", "index_put", "index_put_", "nonzero"]

_new = object.__new__
_index = operator.index
_ERR_INDEX = K.ERR_INDEX

# kinds of converted (non-basic) index items
_BOOL, _ADV, _MASK = range(3)

_BAD_TYPE = ("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
             "are valid indices (got {})")
_BAD_DTYPE = "tensors used as indices must be long, int, byte or bool tensors"


# ---- views ------------------------------------------------------------------------------------

def _make_view(x, shape, stride, offset, contig, key=None):
    """A view of ``x`` (the hot path of x[0]): Tensor._view without its argument copies.
    ``key``: the basic index, kept in the recorded node (its PyTorch name, Select / Slice /
    Unsqueeze / Alias, is derived from it when asked)."""
    t = _new(Tensor)
    _init(t, x._storage, x._dtype, shape, stride, offset, contig)
    b = getattr(x, "_base", None)
    t._base = x if b is None else b
    if x.requires_grad:
        kw = {"shape": shape, "stride": stride, "offset": offset, "in_stride": x._stride,
              "in_offset": x._offset}
        if G.state.tracer is None:
            kw["_key"] = key
        G.record(ops.getitem, t, (x,), kw)
    return t


def _oob(i, d, n):
    return IndexError(f"index {i} is out of bounds for dimension {d} with size {n}")


def _zero_dim_error():
    return IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                      "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")


# ---- classifying index items -----------------------------------------------------------------

class _Item:
    """A non-basic index item after conversion: kind _BOOL (val: bool), _ADV (val: int64
    tensor) or _MASK (val: bool/uint8 tensor)."""

    __slots__ = ("kind", "val")

    def __init__(self, kind, val):
        self.kind = kind
        self.val = val


_SEQ_AS_TUPLE = ("Using a non-tuple sequence for multidimensional indexing is deprecated; use "
                 "x[tuple(seq)] instead of x[seq] (PyTorch 2.x still reads it as a tuple)")


def _seq_is_tuple(seq):
    """PyTorch reads a list (shorter than 32) holding tensors, slices, None, Ellipsis or
    sequences (lists, tuples, ranges, arrays) as a tuple of indices."""
    for k in seq:
        if k is None or k is Ellipsis or isinstance(k, (slice, Tensor)):
            return True
    if len(seq) < 32:
        for k in seq:
            if isinstance(k, (list, tuple, range, np.ndarray, str)):
                warnings.warn(_SEQ_AS_TUPLE, UserWarning, stacklevel=4)
                return True
    return False


def _int_tensor(x):
    """An integer index tensor as int64 (a copy only when the dtype differs)."""
    if x._dtype is D.int64:
        return x
    if x._dtype is D.uint64 and x._numel and (x >= (1 << 63)).any().item():
        # (as int64 these would read as negative indices, counting from the end)
        raise IndexError(f"index {int(x.max().item())} is out of bounds (uint64 index)")
    out = new_empty(x._shape, D.int64, x._storage.device)
    _copy_into(out, x)
    return out


def _from_array(a):
    """A NumPy array (or a list read as one) as an index item."""
    k = a.dtype.kind
    if k == "b":
        if a.ndim == 0:
            return _Item(_BOOL, builtins.bool(a))
        return _Item(_MASK, from_array_copy(a, D.bool))
    if k in "iu" or (a.size == 0 and k == "f"):  # [] gives a float64 array
        if a.ndim == 0:
            return builtins.int(a)
        return _Item(_ADV, from_array_copy(a.astype(np.int64, copy=False), D.int64))
    raise IndexError(f"arrays used as indices must be of integer or boolean type (got {a.dtype})")


def _convert(k, tensor0d_as_int=True):
    """A non-basic index item as an int (the ones that act as ints) or an _Item."""
    t = type(k)
    if t is _Item:
        return k
    if t is builtins.bool or t is np.bool_:
        return _Item(_BOOL, builtins.bool(k))
    if isinstance(k, Tensor):
        dt = k._dtype
        if dt is D.bool or dt is D.uint8:
            if dt is D.uint8:
                warnings.warn("indexing with dtype uint8 is deprecated, use a dtype bool "
                              "instead", UserWarning, stacklevel=4)
            if not k._shape:
                return _Item(_BOOL, builtins.bool(k.item()))
            return _Item(_MASK, k)
        if dt._kind == 1:
            if not k._shape and tensor0d_as_int:
                return k.item()
            return _Item(_ADV, _int_tensor(k))
        raise IndexError(_BAD_DTYPE)
    if isinstance(k, np.ndarray):
        return _from_array(k)
    if isinstance(k, (list, tuple, range)):
        try:
            a = np.asarray(k)
        except (ValueError, TypeError):
            raise IndexError(f"could not build an index array from {k!r}") from None
        return _from_array(a)
    if isinstance(k, np.generic) and k.dtype.kind not in "iu":
        raise IndexError(_BAD_TYPE.format(type(k).__name__))
    try:
        return _index(k)
    except TypeError:
        raise IndexError(_BAD_TYPE.format(type(k).__name__)) from None


def _key_seq(key):
    """The index items of a subscript."""
    if isinstance(key, tuple):
        return key
    if type(key) is list and _seq_is_tuple(key):
        return key
    return (key,)


# ---- parsing an index into (view, advanced indices) ---------------------------------------

_TRUE_IDX = None
_FALSE_IDX = None


def _bool_index(flag):
    """The index array a bool scalar stands for: [0] for True, [] for False (on a new dim)."""
    global _TRUE_IDX, _FALSE_IDX
    if _TRUE_IDX is None:
        _TRUE_IDX = new_empty((1,), D.int64, zero=True)
        _FALSE_IDX = new_empty((0,), D.int64)
    return _TRUE_IDX if flag else _FALSE_IDX


def _on_device(adv, dev):
    """The advanced items with their index tensors on ``dev`` (lists, arrays and CPU index
    tensors index a tensor on any device, as in PyTorch)."""
    return [(p, t if t._storage.device == dev else t.to(dev), d) for p, t, d in adv]


class _NegativeSteps(Exception):
    """Raised by _parse for negative-step slices of a tensor that requires grad: (index in
    the sequence, dim of x) of each; _getitem then indexes a flipped x instead."""


def _flipped_key(x, seq, negd):
    """x flipped along the dims of negative-step slices, and the index sequence that selects
    the same elements from it with positive steps (a differentiable form of x[seq])."""
    from fiamma._ops.shape import flip

    seq = list(seq)
    for i, d in negd:
        n = x._shape[d]
        start, stop, step = seq[i].indices(n)
        r = builtins.range(start, stop, step)
        seq[i] = slice(n - 1 - r[0], n - r[-1], -step) if len(r) else slice(0, 0)
    return flip(x, [d for _, d in negd]), tuple(seq)


def _parse(x, seq, want_view=True):
    """Apply the basic items of index sequence ``seq`` to ``x``.

    Returns (view, vshape, vstride, voff, adv): ``adv`` is None (only basic items) or a list
    of (dim in the view, int64 index tensor, dim of x it came from or None); vshape, vstride
    and voff (in elements from x's first element) describe the basic-indexed view, and
    ``view`` is that view as a Tensor, made only when ``want_view`` and needed (no advanced
    items, or x requires grad and autograd must see the view).
    """
    shape = x._shape
    stride = x._stride
    nd = len(shape)
    consumed = 0
    ell = False
    conv = None
    for i, k in enumerate(seq):
        t = type(k)
        if t is int or t is slice:
            consumed += 1
        elif k is None:
            pass
        elif k is Ellipsis:
            if ell:
                raise IndexError("an index can only have a single ellipsis ('...')")
            ell = True
        else:
            k = _convert(k)
            if conv is None:
                conv = list(seq)
            conv[i] = k
            if type(k) is int or k.kind == _ADV:
                consumed += 1
            elif k.kind == _MASK:
                consumed += len(k.val._shape)
    if conv is not None:
        seq = conv
    if consumed > nd:
        if nd == 0:
            raise _zero_dim_error()
        raise IndexError(f"too many indices for tensor of dimension {nd}")
    oshape = []
    ostride = []
    off = x._offset
    adv = None
    negd = None
    d = 0
    for i, k in enumerate(seq):
        t = type(k)
        if t is int:
            n = shape[d]
            if k < -n or k >= n:
                raise _oob(k, d, n)
            off += (k + n if k < 0 else k) * stride[d]
            d += 1
        elif t is slice:
            step = k.step
            if step is not None and _index(step) == 0:
                raise ValueError("slice step cannot be zero")
            start, stop, step = k.indices(shape[d])
            if step < 0:
                # NumPy's negative step: a negative stride here; a getitem result is then
                # copied (fiamma's views have non-negative strides), an assignment writes
                # through it
                n = (start - stop - step - 1) // -step if start > stop else 0
                if negd is None:
                    negd = []
                negd.append((i, d))
                if n == 0:
                    start = 0
            else:
                n = (stop - start + step - 1) // step if stop > start else 0
            oshape.append(n)
            # a dim of size <= 1 never steps: keep a huge step from overflowing the stride
            ostride.append(stride[d] * step if n > 1 else stride[d])
            off += start * stride[d]
            d += 1
        elif k is None:
            oshape.append(1)
            ostride.append(stride[d] * shape[d] if d < nd else 1)
        elif k is Ellipsis:
            for _ in range(nd - consumed):
                oshape.append(shape[d])
                ostride.append(stride[d])
                d += 1
        else:
            if adv is None:
                adv = []
            kind = k.kind
            if kind == _ADV:
                adv.append((len(oshape), k.val, d))
                oshape.append(shape[d])
                ostride.append(stride[d])
                d += 1
            elif kind == _BOOL:
                adv.append((len(oshape), _bool_index(k.val), None))
                oshape.append(1)
                ostride.append(stride[d] * shape[d] if d < nd else 1)
            else:  # _MASK
                ms = k.val._shape
                for j, n in enumerate(ms):
                    if shape[d + j] != n:
                        raise IndexError(
                            f"The shape of the mask {list(ms)} at index {j} does not match the "
                            f"shape of the indexed tensor {list(shape)} at index {d + j}")
                for j, col in enumerate(_nonzero_cols(k.val)):
                    adv.append((len(oshape), col, d + j))
                    oshape.append(shape[d + j])
                    ostride.append(stride[d + j])
                d += len(ms)
    if d < nd:
        oshape.extend(shape[d:])
        ostride.extend(stride[d:])
    oshape = tuple(oshape)
    ostride = tuple(ostride)
    if negd is not None and want_view and x.requires_grad:
        raise _NegativeSteps(negd)
    if not want_view:
        view = None
    elif negd is not None:
        view = None
        if adv is None:  # the elements in a new tensor
            view = new_empty(oshape, x._dtype, x._storage.device)
            check(view._storage.backend.copy_region(oshape, view, 0, view._stride, x,
                                                    off - x._offset, ostride), "getitem")
    elif adv is None:
        view = _make_view(x, oshape, ostride, off, None, tuple(seq))
    elif x.requires_grad:
        view = x._view(oshape, ostride, off, op=ops.getitem)
    else:
        view = None
    return view, oshape, ostride, off - x._offset, adv


def _layout(vshape, vstride, adv):
    """The advanced-index plan over the view (vshape, vstride): result shape, the view's
    strides per result dim, each index's strides per result dim, and each index's (size,
    stride) in the view."""
    if len(adv) == 1:  # the common x[idx] / x[:, idx]
        p, t, _ = adv[0]
        nb = len(t._shape)
        trail = len(vshape) - p - 1
        return (vshape[:p] + t._shape + vshape[p + 1:], vstride[:p] + (0,) * nb + vstride[p + 1:],
                (t,), (0,) * p + t._stride + (0,) * trail, (vshape[p],), (vstride[p],))
    k = len(adv)
    idx = []
    sizes = []
    strides = []
    bshape = adv[0][1]._shape
    same = True
    for p, t, _ in adv:
        idx.append(t)
        sizes.append(vshape[p])
        strides.append(vstride[p])
        if t._shape != bshape:
            same = False
    if not same:
        try:
            bshape = broadcast_shapes(*[t._shape for t in idx])
        except RuntimeError:
            raise IndexError("shape mismatch: indexing tensors could not be broadcast together "
                             "with shapes " + ", ".join(str(list(t._shape)) for t in idx)) \
                from None
    nb = len(bshape)
    p0 = adv[0][0]
    if adv[-1][0] - p0 == k - 1:  # adjacent: the broadcast dims replace them in place
        rshape = vshape[:p0] + bshape + vshape[p0 + k:]
        sstride = vstride[:p0] + (0,) * nb + vstride[p0 + k:]
        lead, trail = p0, len(vshape) - p0 - k
    else:  # separated: the broadcast dims go first
        pos = [a[0] for a in adv]
        keep = [i for i in range(len(vshape)) if i not in pos]
        rshape = bshape + tuple(vshape[i] for i in keep)
        sstride = (0,) * nb + tuple(vstride[i] for i in keep)
        lead, trail = 0, len(keep)
    lead = (0,) * lead
    trail = (0,) * trail
    istr = ()
    for t in idx:
        istr += lead + (t._stride if same else bcast_strides(t, bshape)) + trail
    return rshape, sstride, idx, istr, sizes, strides


def _index_error(rc, bad, adv, sizes, x_op):
    if rc == _ERR_INDEX and 0 <= bad[0] < len(adv):
        j = bad[0]
        d = adv[j][2]
        raise IndexError(f"index {bad[1]} is out of bounds for dimension "
                         f"{d if d is not None else j} with size {sizes[j]}")
    check(rc, x_op)


def _no_index(idx):
    """Whether the index tensors hold no index at all (one of them is empty, so their
    broadcast is): the kernels then have nothing to check or move, and an empty index tensor
    may have zero strides over no memory, which the kernels' checking pass would read."""
    for t in idx:
        if not t._numel:
            return True
    return False


def _gather(x, vshape, vstride, voff, adv, view):
    """The advanced-index result over x's view (vshape, vstride, voff); ``view`` (the view as
    a Tensor) is only used to record for autograd when x requires grad."""
    if x._storage.device is not CPU:
        adv = _on_device(adv, x._storage.device)
    rshape, sstride, idx, istr, sizes, strides = _layout(vshape, vstride, adv)
    out = new_empty(rshape, x._dtype, x._storage.device)
    if not _no_index(idx):
        bad = [-1, 0]
        rc = out._storage.backend.index_gather(rshape, out, x, voff, sstride, idx, istr, sizes,
                                               strides, bad)
        if rc:
            _index_error(rc, bad, adv, sizes, "index")
    if x.requires_grad:
        G.record(ops.index, out, (view, _indices_tuple(adv)), {})
    return out


def _rows(x, key):
    """``x[key]`` for a 1-d int64 ``key``: whole rows, through the dim-wise gather (one row
    copy per index) instead of the general advanced-index kernel; recorded as ``index``."""
    from fiamma._ops.indexops import _dim_layout

    dev = x._storage.device
    if key._storage.device is not dev:
        key = _on_device([(0, key, 0)], dev)[0][1]
    shape, sb, si, isize, istride = _dim_layout(x, 0, key)
    out = new_empty(shape, x._dtype, dev)
    if out._numel:
        bad = [0]
        rc = x._storage.backend.ixop(K.IXOP_GATHER, shape, out, _contig_strides(shape), x, sb,
                                     key, si, isize, istride, 1, 0, bad, None)
        if rc == K.ERR_INDEX:
            raise IndexError(f"index {bad[0]} is out of bounds for dimension 0 with size "
                             f"{isize}")
        check(rc, "index")
    if x.requires_grad:
        G.record(ops.index, out, (x, (key,)), {})
    return out


def _contig_strides(shape):
    st, acc = [], 1
    for n in reversed(shape):
        st.append(acc)
        acc *= n
    return tuple(reversed(st))


def _indices_tuple(adv):
    """PyTorch's aten::index form of the advanced indices: one entry per view dim up to the
    last indexed one, None where the dim is not indexed."""
    n = adv[-1][0] + 1
    ind = [None] * n
    for p, t, _ in adv:
        ind[p] = t
    return tuple(ind)


# ---- __getitem__ ------------------------------------------------------------------------------

def _getitem(self, key):
    """``x[key]``: a view for basic indices, a copy for advanced ones.

    >>> import fiamma
    >>> x = fiamma.tensor([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]])
    >>> x[1].tolist(), x[:, 1:3].shape, x[[0, 2], -1].tolist()
    ([4, 5, 6, 7], fiamma.Size([3, 2]), [3, 11])
    """
    tk = type(key)
    if tk is int:
        shape = self._shape
        if shape:
            n = shape[0]
            if -n <= key < n:
                if key < 0:
                    key += n
                st = self._stride
                return _make_view(self, shape[1:], st[1:], self._offset + key * st[0],
                                  True if self._contig else None, key)
    elif tk is slice:
        shape = self._shape
        if shape and (key.step is None or type(key.step) is int and key.step > 0):
            start, stop, step = key.indices(shape[0])
            st = self._stride
            n = (stop - start + step - 1) // step if stop > start else 0
            return _make_view(self, (n,) + shape[1:], (st[0] * step if n > 1 else st[0],) + st[1:],
                              self._offset + start * st[0],
                              True if self._contig and step == 1 else None, key)
    elif tk is tuple:
        v = _basic(self, key)
        if v is not None:
            return v
    elif key is None or key is Ellipsis:
        return _basic(self, (key,))
    elif tk is Tensor and self._shape and key._shape:
        if key._dtype is D.int64:
            if len(key._shape) == 1 and len(self._shape) >= 2 and self._numel and \
                    self._dtype._kind != 3:
                return _rows(self, key)
            return _gather(self, self._shape, self._stride, 0, [(0, key, 0)], self)
        if key._dtype is D.bool and key._shape == self._shape:
            return _masked_select(self, key)
    seq = _key_seq(key)
    try:
        view, vshape, vstride, voff, adv = _parse(self, seq)
    except _NegativeSteps as e:
        return _getitem(*_flipped_key(self, seq, e.args[0]))
    if adv is None:
        return view
    return _gather(self, vshape, vstride, voff, adv, view)


def _basic(x, key):
    """The view for a tuple of ints, slices (step > 0), None and Ellipsis, in one pass; None
    when the tuple holds anything else or is invalid (the general path then handles it)."""
    shape = x._shape
    stride = x._stride
    nd = len(shape)
    oshape = []
    ostride = []
    off = x._offset
    d = 0
    for i, k in enumerate(key, 1):
        t = type(k)
        if t is int:
            if d >= nd:
                return None
            n = shape[d]
            if k < 0:
                k += n
                if k < 0:
                    return None
            elif k >= n:
                return None
            off += k * stride[d]
            d += 1
        elif t is slice:
            if d >= nd or not (k.step is None or type(k.step) is int and k.step > 0):
                return None
            start, stop, step = k.indices(shape[d])
            n = (stop - start + step - 1) // step if stop > start else 0
            oshape.append(n)
            # a dim of size <= 1 never steps: keep a huge step from overflowing the stride
            ostride.append(stride[d] * step if n > 1 else stride[d])
            off += start * stride[d]
            d += 1
        elif k is None:
            oshape.append(1)
            ostride.append(stride[d] * shape[d] if d < nd else 1)
        elif k is Ellipsis:
            rest = 0
            for k2 in key[i:]:
                t2 = type(k2)
                if t2 is int or t2 is slice:
                    rest += 1
                elif k2 is Ellipsis:
                    return None
            e = nd - rest
            while d < e:
                oshape.append(shape[d])
                ostride.append(stride[d])
                d += 1
        else:
            return None
    if d < nd:
        oshape.extend(shape[d:])
        ostride.extend(stride[d:])
    return _make_view(x, tuple(oshape), tuple(ostride), off, None, key)


def _masked_select(x, mask):
    """x[mask] with a mask of x's full shape: one count and one compacting pass in C."""
    be = x._storage.backend
    mask = _to_dev(mask, x)
    rc, n = be.nonzero_count(mask._shape, mask, mask._stride)
    check(rc, "index")
    out = new_empty((n,), x._dtype, x._storage.device)
    check(be.masked_select(x._shape, out, n, x, x._stride, mask, mask._stride)[0], "index")
    if x.requires_grad:
        G.record(ops.index, out, (x, (mask,)), {})
    return out


# ---- __setitem__ ------------------------------------------------------------------------------

def _fill_args(value, dt, op):
    """A Python/NumPy number as fm_fill's (double, int64, use_int) for dtype ``dt``: floats and
    float dtypes go through double (a float into an int dtype truncates), ints stay exact."""
    if dt._kind == 2:
        return builtins.float(value), 0, 0
    if dt is D.bool and isinstance(value, (builtins.complex, np.complexfloating)):
        value = builtins.bool(value)  # any number into bool: nonzero is True
    check_fits(value, dt, op)
    if isinstance(value, (builtins.float, np.floating)):
        return builtins.float(value), 0, 0
    v = builtins.int(value)
    if v >= 1 << 63:
        v -= 1 << 64
    return 0.0, v, 1


def check_fits(value, dt, op):
    """PyTorch's overflow check for a number written into an integer dtype (fill_, full,
    masked_fill, index_fill, x[i] = v): outside the dtype's range raises; negative values
    down to -max wrap for unsigned types (as C does); floats are truncated. bool takes any."""
    if dt._kind >= 2 or dt is D.bool:
        return
    if isinstance(value, (builtins.complex, np.complexfloating)):
        if value.imag != 0:
            raise RuntimeError(f"{op}: value {value} cannot be converted to type {dt} without "
                               "overflow")
        value = value.real
    v = builtins.float(value) if isinstance(value, (builtins.float, np.floating)) else \
        builtins.int(value)
    if v != v:
        raise RuntimeError(f"{op}: value nan cannot be converted to type {dt} without overflow")
    info = D.iinfo(dt)
    hi = info.max
    lo = info.min if dt.is_signed else -hi
    if v < lo or v > hi:
        raise RuntimeError(f"{op}: value {value} cannot be converted to type {dt} without "
                           "overflow")


def _scalar_tensor(value, dt, op, dev=None):
    """A Python number as a 0-d tensor of dtype ``dt`` (on ``dev``, default the CPU)."""
    t = new_empty((), dt) if dev is None else new_empty((), dt, dev)
    if dt._kind == 3:
        from fiamma._creation import fill_

        return fill_(t, value)
    check(t._storage.backend.fill(t, *_fill_args(value, dt, op)), op)
    return t


def _to_dev(t, x):
    """Tensor t on x's device (a copy when it is elsewhere: index tensors, masks and values
    from the CPU may index or be written into a tensor on any device)."""
    dev = x._storage.device
    d = t._storage.device
    return t if d is dev or d == dev else t.to(dev)


def _value_tensor(value, dt, op, x=None):
    """The value of an assignment as a tensor of dtype ``dt`` (numbers become 0-d tensors), on
    the device of ``x`` (default the CPU)."""
    if isinstance(value, Tensor):
        if x is not None and value._storage.device is not x._storage.device:
            value = _to_dev(value, x)
        if value._dtype is dt:
            return value
        out = new_empty(value._shape, dt, value._storage.device)
        _copy_into(out, value)
        return out
    if is_scalar(value):
        return _scalar_tensor(value, dt, op, None if x is None else x._storage.device)
    try:
        t = _tensor(value, dtype=dt)
        return t if x is None else _to_dev(t, x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{op}: can't assign a {type(value).__name__} to a {dt} tensor ({e})") \
            from None


def _value_strides(v, shape, op):
    """Strides of value ``v`` broadcast to ``shape`` (leading size-1 dims of v may be dropped)."""
    vs = v._shape
    if vs == shape:
        return v._stride
    vst = v._stride
    while len(vs) > len(shape) and vs[0] == 1:
        vs = vs[1:]
        vst = vst[1:]
    ok = len(vs) <= len(shape)
    if ok:
        off = len(shape) - len(vs)
        st = [0] * len(shape)
        for i, n in enumerate(vs):
            if n == shape[off + i]:
                st[off + i] = vst[i] if n != 1 else 0
            elif n != 1:
                ok = False
                break
    if not ok:
        raise RuntimeError(f"{op}: shape mismatch: value tensor of shape {list(v._shape)} cannot "
                           f"be broadcast to indexing result of shape {list(shape)}")
    return tuple(st)


def _setitem(self, key, value):
    """``x[key] = value``: value (a number or a tensor broadcast to ``x[key]``'s shape, cast to
    x's dtype) is written through views for basic indices and scattered for advanced ones.

    >>> import fiamma
    >>> x = fiamma.zeros(3, 4)
    >>> x[0] = 1; x[:, -1] = fiamma.tensor([5., 6., 7.]); x[x > 5] = -1
    >>> x.tolist()
    [[1.0, 1.0, 1.0, 5.0], [0.0, 0.0, 0.0, -1.0], [0.0, 0.0, 0.0, -1.0]]
    """
    if self.requires_grad:
        G.check_inplace(self, "setitem")
    if type(key) is Tensor and key._shape and self._shape and key._dtype is D.bool and \
            key._shape == self._shape:
        _masked_put(self, key, value)
    elif type(key) is Tensor and key._shape and self._shape and key._dtype is D.int64:
        _scatter(self, self._shape, self._stride, 0, [(0, key, 0)], value, False,
                 "__setitem__")
    else:
        _assign(self, _key_seq(key), value, False, "__setitem__")
    if not self._quiet_version:  # a ``.data`` tensor (see Tensor._quiet_version)
        self._storage.version += 1
    if self.requires_grad or (isinstance(value, Tensor) and value.requires_grad):
        G.record_inplace(ops.setitem, self, (self, key, value), {})


def _assign(self, seq, value, accumulate, op):
    """Write ``value`` at index sequence ``seq`` of ``self`` (no version bump, no record)."""
    if accumulate and self._dtype._kind == 3:  # the C kernels accumulate reals: one per part
        from fiamma._ops.complex_ops import imag_, real_

        v = _value_tensor(value, self._dtype, op, self)
        _assign(real_(self), seq, real_(v), True, op)
        _assign(imag_(self), seq, imag_(v), True, op)
        return
    _, vshape, vstride, voff, adv = _parse(self, seq, False)
    if adv is not None:
        _scatter(self, vshape, vstride, voff, adv, value, accumulate, op)
        return
    dt = self._dtype
    if accumulate:
        view = _make_view(self.detach(), vshape, vstride, self._offset + voff, None)
        _add(view, _value_tensor(value, dt, op, self), out=view)
        return
    if is_scalar(value) and dt._kind != 3:
        check(self._storage.backend.fill_region(vshape, self, voff, vstride,
                                                *_fill_args(value, dt, op)), op)
        return
    v = _value_tensor(value, dt, op, self) if not isinstance(value, Tensor) or \
        value._storage.device is not self._storage.device else value
    if v._storage is self._storage:
        v = v.clone()
    vst = _value_strides(v, vshape, op)
    check(self._storage.backend.copy_region(vshape, self, voff, vstride, v, 0, vst), op)


def _scatter(self, vshape, vstride, voff, adv, value, accumulate, op):
    """Scatter ``value`` into the advanced indices ``adv`` of self's view (vshape, vstride,
    voff)."""
    st = self._storage
    if st.device is not CPU:
        adv = _on_device(adv, st.device)
    if any(a[1]._storage is st for a in adv):  # x[x] = v: indices must not change under us
        adv = [(p, t.clone() if t._storage is st else t, d) for p, t, d in adv]
    rshape, sstride, idx, istr, sizes, strides = _layout(vshape, vstride, adv)
    dt = self._dtype
    if is_scalar(value):
        # a number: one element, read through zero strides
        v = _scalar_tensor(value, dt, op, self._storage.device)
        vst = (0,) * len(rshape)
    else:
        v = _value_tensor(value, dt, op, self)
        if v._storage is self._storage:
            v = v.clone()
        vst = _value_strides(v, rshape, op)
    if _no_index(idx):
        return
    bad = [-1, 0]
    rc = self._storage.backend.index_scatter(rshape, self, voff, sstride, v, vst, idx, istr,
                                             sizes, strides, 1 if accumulate else 0, bad)
    if rc:  # every index is checked before the first write: nothing was written
        _index_error(rc, bad, adv, sizes, op)


def _masked_put(x, mask, value):
    """x[mask] = value with a mask of x's full shape."""
    dt = x._dtype
    mask = _to_dev(mask, x)
    if mask._storage is x._storage and (mask._ptr != x._ptr or mask._stride != x._stride):
        mask = mask.clone()  # another view of x's memory: writes would change the mask
    be = x._storage.backend
    if is_scalar(value):
        v = _scalar_tensor(value, dt, "__setitem__", x._storage.device)
        check(be.masked_put(x._shape, x, x._stride, mask, mask._stride, v, 1, 0), "__setitem__")
        return
    v = _value_tensor(value, dt, "__setitem__", x)
    if v._storage is x._storage:
        v = v.clone()
    if v._numel == 1:
        nval, sval = 1, 0
    else:
        rc, n = be.nonzero_count(mask._shape, mask, mask._stride)
        check(rc, "__setitem__")
        vs = v._shape
        while len(vs) > 1 and vs[0] == 1:
            vs = vs[1:]
        if vs != (n,):
            raise RuntimeError(f"__setitem__: shape mismatch: value tensor of shape "
                               f"{list(v._shape)} cannot be broadcast to indexing result of "
                               f"shape [{n}]")
        nval, sval = n, v._stride[-1]
    check(be.masked_put(x._shape, x, x._stride, mask, mask._stride, v, nval, sval),
          "__setitem__")


# ---- index_put ----------------------------------------------------------------------------

def _put_items(indices, op):
    """index_put's indices (tensors or None) as an index sequence; 0-d integer tensors stay
    advanced (they broadcast like any index tensor)."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"{op}: indices must be a tuple of tensors, got {type(indices).__name__}")
    seq = []
    for t in indices:
        if t is None:
            seq.append(slice(None))
        elif isinstance(t, Tensor):
            seq.append(_convert(t, tensor0d_as_int=False))
        else:
            raise TypeError(f"{op}: indices must be tensors or None, got {type(t).__name__}")
    return seq


def index_put_(input, indices, values, accumulate=False):
    """Write ``values`` into ``input`` at ``indices`` (a tuple of integer/bool tensors or None,
    as in ``input[indices] = values``); ``accumulate=True`` adds instead, summing duplicates.

    >>> import fiamma
    >>> x = fiamma.zeros(4)
    >>> x.index_put_((fiamma.tensor([0, 0, 2]),), fiamma.tensor(1.0), accumulate=True).tolist()
    [2.0, 0.0, 1.0, 0.0]
    """
    if input.requires_grad:
        G.check_inplace(input, "index_put_")
    if isinstance(values, Tensor) and values._dtype is not input._dtype:
        raise RuntimeError(f"index_put_: Index put requires the source and destination dtypes "
                           f"match, got {input._dtype} for the destination and {values._dtype} "
                           "for the source.")
    _assign(input, _put_items(indices, "index_put_"), values, accumulate, "index_put_")
    input._bump()
    if input.requires_grad or (isinstance(values, Tensor) and values.requires_grad):
        G.record_inplace(ops.index_put_, input, (input, tuple(indices), values),
                         {"accumulate": accumulate})
    return input


def index_put(input, indices, values, accumulate=False):
    """Out-of-place ``index_put_``: a copy of ``input`` with ``values`` put at ``indices``."""
    if isinstance(values, Tensor) and values._dtype is not input._dtype:
        raise RuntimeError(f"index_put: Index put requires the source and destination dtypes "
                           f"match, got {input._dtype} for the destination and {values._dtype} "
                           "for the source.")
    out = input.detach().clone()
    _assign(out, _put_items(indices, "index_put"), values, accumulate, "index_put")
    if input.requires_grad or (isinstance(values, Tensor) and values.requires_grad):
        G.record(ops.index_put, out, (input, tuple(indices), values), {"accumulate": accumulate})
    return out


# ---- nonzero ----------------------------------------------------------------------------------

def _nonzero_cols(x):
    """The coordinates of x's nonzero elements as one contiguous int64 tensor per dim."""
    nd = len(x._shape)
    be = x._storage.backend
    rc, n = be.nonzero_count(x._shape, x, x._stride)
    check(rc, "nonzero")
    out = new_empty((builtins.max(nd, 1), n), D.int64, x._storage.device)
    check(be.nonzero(x, out, 1, n, n)[0], "nonzero")
    if nd == 0:  # a 0-d tensor counts as 1-d: coordinate 0
        if n:
            be.fill(out, 0.0, 0, 1)
        return (out[0],)
    return tuple(out[j] for j in range(nd))


def nonzero(input, *, out=None, as_tuple=False):
    """Indices of the nonzero elements of ``input``: a (count, ndim) int64 tensor in row-major
    order, or with ``as_tuple=True`` a tuple of ndim 1-d tensors (one per dimension; a 0-d input
    is treated as 1-d).

    >>> import fiamma
    >>> fiamma.nonzero(fiamma.tensor([[0, 1], [2, 0]])).tolist()
    [[0, 1], [1, 0]]
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"nonzero: expected a Tensor, got {type(input).__name__}")
    if input._dtype._kind == 3:
        input = input != 0  # nonzero when either part is
    if as_tuple:
        return _nonzero_cols(input)
    nd = len(input._shape)
    be = input._storage.backend
    rc, n = be.nonzero_count(input._shape, input, input._stride)
    check(rc, "nonzero")
    res = new_empty((n, nd), D.int64, input._storage.device)
    check(be.nonzero(input, res, nd, 1, n)[0], "nonzero")
    if out is not None:
        check_out(out, res._shape, D.int64, "nonzero")
        _copy_into(out, res)
        return out
    return res


def argwhere(input):
    """Same as ``nonzero(input)``: a (count, ndim) tensor of the nonzero elements' indices."""
    return nonzero(input)


# Tensor methods of this module: attached by fiamma._methods (the one place that does)
METHODS = {
    "__getitem__": _getitem,
    "__setitem__": _setitem,
    "index_put_": index_put_,
    "index_put": index_put,
    "nonzero": lambda self, *, as_tuple=False: nonzero(self, as_tuple=as_tuple),
    "argwhere": argwhere,
}
