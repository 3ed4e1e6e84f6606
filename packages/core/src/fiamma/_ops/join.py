"""Joining and splitting tensors with PyTorch's names and rules: cat/concat/concatenate, stack,
hstack/vstack/row_stack/dstack/column_stack; split, chunk, tensor_split, hsplit/vsplit/dsplit.

cat writes each input into its slice of the result with one strided, casting copy (no
intermediate tensors); the splits return views (``narrow``) that share the input's storage.
"""

import builtins
import importlib as _importlib
import operator

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check
from fiamma._backend.cpu import operators as _cpu_operators
from fiamma._ops._common import check_out
from fiamma._tensor import Tensor, _copy_into, new_empty, wrap_dim

__all__ = ["cat", "concat", "concatenate", "stack", "hstack", "vstack", "row_stack", "dstack",
           "column_stack", "split", "chunk", "tensor_split", "hsplit", "vsplit", "dsplit"]

_index = operator.index


def _tensor_list(tensors, op):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        try:
            if isinstance(tensors, Tensor):
                raise TypeError
            tensors = list(tensors)
        except TypeError:
            raise TypeError(f"{op}: argument 'tensors' must be a sequence of Tensors, not "
                            f"{type(tensors).__name__}") from None
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected a sequence of Tensors, but element {i} is "
                            f"{type(t).__name__}")
    return tensors


# ---- joining ---------------------------------------------------------------------------------

def cat(tensors, dim=0, *, out=None):
    """Concatenate tensors along an existing dimension ``dim``.

    All inputs need the same number of dims and equal sizes except along ``dim``; the result
    dtype is the promotion of the inputs' dtypes. 1-D empty tensors (shape ``(0,)``) are skipped,
    as in PyTorch, so they can start an accumulation.

    >>> import fiamma
    >>> fiamma.cat([fiamma.zeros(2, 1), fiamma.ones(2, 2)], dim=1).tolist()
    [[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]]
    """
    if out is None and (type(tensors) is list or type(tensors) is tuple):
        res = _cpu_operators.cat_simple(tensors, dim)
        if res is not None:
            return res
    return _cat(_tensor_list(tensors, "cat"), dim, out, "cat")


def _cat(ts, dim, out, op):
    if not ts:
        raise RuntimeError(f"{op}: expected a non-empty list of Tensors")
    t0 = ts[0]
    if t0._layout_alt and t0.is_nested:
        return _importlib.import_module("fiamma._nested")._cat(ts, dim, out, op)
    dt = t0._dtype
    dev = t0._storage.device
    parts = []
    for t in ts:
        if t._dtype is not dt:
            dt = D.promote_types(dt, t._dtype)
        if t._storage.device is not dev and t._storage.device != dev:
            raise RuntimeError(f"{op}: Expected all tensors to be on the same device, but found "
                               f"at least two devices, {dev} and {t._storage.device}!")
        s = t._shape
        if not s:
            i = next(i for i, x in enumerate(ts) if x is t)
            raise RuntimeError(f"{op}: zero-dimensional tensor (at position {i}) cannot be "
                               "concatenated")
        if s != (0,):  # legacy empty 1-D tensors are skipped (their dtype still counts)
            parts.append(t)
    simple = True  # every part contiguous and of the result's dtype
    if not parts:
        wrap_dim(dim, 1, op)
        shape, d = (0,), 0
    else:
        ref = parts[0]._shape
        nd = len(ref)
        d = wrap_dim(dim, nd, op)
        head, tail = ref[:d], ref[d + 1:]
        total = 0
        for t in parts:
            s = t._shape
            if len(s) != nd:
                raise RuntimeError(f"{op}: Tensors must have same number of dimensions: got "
                                   f"{nd} and {len(s)}")
            if s[:d] != head or s[d + 1:] != tail:
                i = next(i for i, x in enumerate(ts) if x is t)
                j = next(j for j in range(nd) if j != d and s[j] != ref[j])
                raise RuntimeError(
                    f"{op}: Sizes of tensors must match except in dimension {d}. Expected "
                    f"size {ref[j]} but got size {s[j]} for tensor number {i} in the list "
                    f"(shapes {list(ref)} and {list(s)}).")
            total += s[d]
            if simple and (not t._contig or t._dtype is not dt):
                simple = False
        shape = head + (total,) + tail
    if out is not None:
        check_out(out, shape, dt, op)
        res = out
        for t in ts:
            if t._storage is out._storage:
                res = new_empty(shape, out._dtype, dev)
                break
    else:
        res = new_empty(shape, dt, dev)
    if res._numel:
        rdt = res._dtype
        simple = simple and res._contig and rdt is dt
        if simple:
            # one C call: every part is a run of bytes in each of the result's outer rows
            rows = 1
            for s in shape[:d]:
                rows *= s
            inner = rdt.itemsize
            for s in shape[d + 1:]:
                inner *= s
            check(res._storage.backend.cat_rows(res, parts, rows, shape[d] * inner,
                                                [t._shape[d] * inner for t in parts]), op)
        else:
            nd = len(shape)
            rst = res._stride
            step = rst[d]
            off = 0
            copy = res._storage.backend.copy_region
            for t in parts:
                n = t._shape[d]
                if n and t._numel:
                    check(copy(t._shape, res, off, rst, t, 0, t._stride), op)
                off += n * step
    if out is not None:
        if res is not out:
            _copy_into(out, res)
        out._bump()
        return out
    if not parts:  # only skipped empty 1-D inputs: still a result of them (as PyTorch)
        parts = ts
    for t in parts:
        if t.requires_grad:
            G.record(ops.cat, res, tuple(parts),
                     {"dim": d, "_pt": "Stack"} if op == "stack" and G.state.tracer is None
                     else {"dim": d})
            break
    return res


def concat(tensors, dim=0, *, out=None):
    """Alias of :func:`cat`."""
    return _cat(_tensor_list(tensors, "concat"), dim, out, "concat")


def concatenate(tensors, axis=0, *, dim=None, out=None):
    """Alias of :func:`cat` taking NumPy's ``axis``."""
    return _cat(_tensor_list(tensors, "concatenate"), axis if dim is None else dim, out,
                "concatenate")


def stack(tensors, dim=0, *, out=None):
    """Join equally shaped tensors along a new dimension ``dim``.

    >>> import fiamma
    >>> fiamma.stack([fiamma.zeros(3), fiamma.ones(3)], dim=1).shape
    fiamma.Size([3, 2])
    """
    ts = _tensor_list(tensors, "stack")
    if not ts:
        raise RuntimeError("stack: expects a non-empty TensorList")
    t0 = ts[0]
    s0, dt, dev = t0._shape, t0._dtype, t0._storage.device
    simple = out is None and dev.type == "cpu"
    for i, t in enumerate(ts):
        if t._shape != s0:
            raise RuntimeError(f"stack: expects each tensor to be equal size, but got "
                               f"{list(s0)} at entry 0 and {list(t._shape)} at entry {i}")
        if simple and (t._dtype is not dt or not t._contig or t.requires_grad
                       or t._storage.device is not dev):
            simple = False
    d = wrap_dim(dim, len(s0) + 1, "stack")
    if simple:
        # contiguous parts of one dtype (a DataLoader batch): one C call, no views
        n = len(ts)
        res = new_empty(s0[:d] + (n,) + s0[d:], dt, dev)
        if res._numel:
            rows = 1
            for s in s0[:d]:
                rows *= s
            inner = dt.itemsize
            for s in s0[d:]:
                inner *= s
            check(res._storage.backend.cat_rows(res, ts, rows, n * inner, [inner] * n),
                  "stack")
        return res
    return _cat([t.unsqueeze(d) for t in ts], d, out, "stack")


def _atleast(t, nd):
    s = t._shape
    if len(s) >= nd:
        return t
    if nd == 1:
        return t.reshape(1)
    if nd == 2:
        return t.reshape(1, -1) if s else t.reshape(1, 1)
    if not s:
        return t.reshape(1, 1, 1)
    if len(s) == 1:
        return t.reshape(1, s[0], 1)
    return t.unsqueeze(-1)


def hstack(tensors, *, out=None):
    """Stack horizontally: along dim 1, or dim 0 when the inputs are 1-D (0-d become 1-D)."""
    ts = [_atleast(t, 1) for t in _tensor_list(tensors, "hstack")]
    if not ts:
        raise RuntimeError("hstack: expects a non-empty TensorList")
    return _cat(ts, 0 if len(ts[0]._shape) == 1 else 1, out, "hstack")


def vstack(tensors, *, out=None):
    """Stack vertically (along dim 0) after making every input at least 2-D ((n,) -> (1, n))."""
    ts = [_atleast(t, 2) for t in _tensor_list(tensors, "vstack")]
    return _cat(ts, 0, out, "vstack")


row_stack = vstack


def dstack(tensors, *, out=None):
    """Stack depthwise (along dim 2) after making every input at least 3-D."""
    ts = [_atleast(t, 3) for t in _tensor_list(tensors, "dstack")]
    return _cat(ts, 2, out, "dstack")


def column_stack(tensors, *, out=None):
    """Stack as columns: 0-d and 1-D inputs become (n, 1) columns, then cat along dim 1."""
    ts = [t.reshape(t._numel, 1) if len(t._shape) <= 1 else t
          for t in _tensor_list(tensors, "column_stack")]
    return _cat(ts, 1, out, "column_stack")


# ---- splitting (views) -------------------------------------------------------------------------

def _pieces(x, d, sizes, op=None):
    """Views of ``x`` of ``sizes`` along ``d``; with ``op`` (split, split_with_sizes) one
    multi-output autograd node for all of them, else a narrow per piece."""
    if op is None:
        out = []
        off = 0
        for s in sizes:
            out.append(x.narrow(d, off, s))
            off += s
        return tuple(out)
    shape = list(x._shape)
    st = x._stride[d]
    geoms = []
    off = x._offset
    for s in sizes:
        shape[d] = s
        geoms.append((tuple(shape), x._stride, off))
        off += s * st
    return x._multi_view(geoms, op, {"dim": d, "sizes": tuple(sizes)}, ops.narrow)


def split(tensor, split_size_or_sections, dim=0):
    """Split into views along ``dim``: an int gives pieces of that size (the last may be
    smaller), a list gives the sizes of the pieces (they must add up to the dim's size).

    >>> import fiamma
    >>> [p.shape[0] for p in fiamma.zeros(5, 2).split(2)]
    [2, 2, 1]
    >>> [p.shape[1] for p in fiamma.zeros(5, 4).split([1, 3], dim=1)]
    [1, 3]
    """
    x = _tensor_arg(tensor, "split")
    if not x._shape:
        raise RuntimeError("split: cannot split a 0-dim tensor")
    d = wrap_dim(dim, len(x._shape), "split")
    n = x._shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [_index(s) for s in split_size_or_sections]
        if builtins.any(s < 0 for s in sizes):
            raise RuntimeError(f"split_with_sizes: expects split_sizes have only non-negative "
                               f"entries, but got split_sizes={sizes}")
        if builtins.sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes: expects split_sizes to sum exactly to {n} "
                               f"(input tensor's size at dimension {d}), but got "
                               f"split_sizes={sizes}")
        return _pieces(x, d, sizes, ops.split_with_sizes)
    s = _index(split_size_or_sections)
    if s < 0:
        raise RuntimeError(f"split: expects split_size be non-negative, but got split_size={s}")
    if s == 0:
        if n:
            raise RuntimeError(f"split: split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {n}")
        return (x.narrow(d, 0, 0),)
    if n == 0:
        return (x.narrow(d, 0, 0),)
    return _pieces(x, d, [builtins.min(s, n - i) for i in range(0, n, s)], ops.split)


def _tensor_arg(x, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    return x


def chunk(input, chunks, dim=0):
    """Split into ``chunks`` views of equal size ``ceil(n / chunks)`` (the last may be smaller,
    and there may be fewer than ``chunks``).

    >>> import fiamma
    >>> [p.shape[0] for p in fiamma.zeros(10).chunk(4)]
    [3, 3, 3, 1]
    """
    x = _tensor_arg(input, "chunk")
    c = _index(chunks)
    if c <= 0:
        raise RuntimeError(f"chunk: expects `chunks` to be greater than 0, got: {c}")
    if not x._shape:
        raise RuntimeError("chunk: expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, len(x._shape), "chunk")
    n = x._shape[d]
    if n == 0:
        return _pieces(x, d, [0] * c)
    return split(x, -(-n // c), d)


def tensor_split(input, indices_or_sections, dim=0):
    """Split into views along ``dim``, by a number of sections (sizes differ by at most one:
    the first ``n % sections`` get one more) or by a list of indices (NumPy's array_split).
    A 0-d integer tensor counts as sections, a 1-D one as indices.

    >>> import fiamma
    >>> [p.shape[0] for p in fiamma.zeros(7).tensor_split(3)]
    [3, 2, 2]
    >>> [p.shape[0] for p in fiamma.zeros(7).tensor_split([1, 5])]
    [1, 4, 2]
    """
    x = _tensor_arg(input, "tensor_split")
    if not x._shape:
        raise RuntimeError("tensor_split: expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        if ios._dtype is not D.int64:
            raise RuntimeError(f"tensor_split: expected tensor_indices_or_sections to have "
                               f"dtype of long, but got {ios._dtype}")
        if len(ios._shape) > 1:
            raise RuntimeError(f"tensor_split: expected tensor_indices_or_sections to be a "
                               f"zero-dimensional or one-dimensional tensor, but got a tensor "
                               f"with {len(ios._shape)} dims")
        ios = ios.item() if not ios._shape else [t.item() for t in ios.unbind(0)]
    d = wrap_dim(dim, len(x._shape), "tensor_split")
    n = x._shape[d]
    if isinstance(ios, (list, tuple)):
        out = []
        prev = 0
        for i in [_index(i) for i in ios] + [None]:
            start, stop, _ = slice(prev, i).indices(n)
            out.append(x.narrow(d, start, builtins.max(0, stop - start)))
            prev = i
        return tuple(out)
    sec = _index(ios)
    if sec <= 0:
        raise RuntimeError(f"tensor_split: number of sections must be larger than 0, got {sec}")
    q, r = divmod(n, sec)
    return _pieces(x, d, [q + 1 if i < r else q for i in range(sec)])


def _dirsplit(op, x, ios, mindim, dim):
    x = _tensor_arg(x, op)
    nd = len(x._shape)
    if nd < mindim:
        raise RuntimeError(f"{op}: requires a tensor with at least {mindim} dimension, but got "
                           f"a tensor with {nd} dimensions!")
    if dim == 1 and nd == 1:
        dim = 0
    if not isinstance(ios, (list, tuple, Tensor)):
        s = _index(ios)
        n = x._shape[dim]
        if s == 0 or n % s:
            raise RuntimeError(f"{op}: attempted to split along dimension {dim}, but the size "
                               f"of the dimension {n} is not divisible by the split_size {s}!")
    return tensor_split(x, ios, dim)


def hsplit(input, indices_or_sections):
    """tensor_split along dim 1 (dim 0 for 1-D tensors); sections must divide evenly."""
    return _dirsplit("hsplit", input, indices_or_sections, 1, 1)


def vsplit(input, indices_or_sections):
    """tensor_split along dim 0 of a tensor with at least 2 dims; sections must divide evenly."""
    return _dirsplit("vsplit", input, indices_or_sections, 2, 0)


def dsplit(input, indices_or_sections):
    """tensor_split along dim 2 of a tensor with at least 3 dims; sections must divide evenly."""
    return _dirsplit("dsplit", input, indices_or_sections, 3, 2)


# Tensor methods of this module: attached by fiamma._methods (the one place that does)
METHODS = {
    "split": lambda self, split_size, dim=0: split(self, split_size, dim),
    "split_with_sizes": lambda self, split_sizes, dim=0: split(self, list(split_sizes), dim),
    "chunk": lambda self, chunks, dim=0: chunk(self, chunks, dim),
    "tensor_split": lambda self, indices_or_sections, dim=0: tensor_split(
        self, indices_or_sections, dim),
    "hsplit": lambda self, *indices: hsplit(self, _method_indices(indices, "hsplit")),
    "vsplit": lambda self, *indices: vsplit(self, _method_indices(indices, "vsplit")),
    "dsplit": lambda self, *indices: dsplit(self, _method_indices(indices, "dsplit")),
}


def _method_indices(args, op):
    """The methods' ``x.hsplit(2)``, ``x.hsplit([1, 3])`` and ``x.hsplit(1, 3)`` (indices as
    separate ints, which the Tensor methods of PyTorch accept)."""
    if len(args) == 1:
        return args[0]
    if not args:
        raise TypeError(f"{op}() missing required argument 'indices_or_sections'")
    return list(args)
