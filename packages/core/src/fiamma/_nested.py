"""Nested tensors (``fiamma.nested``): a batch of tensors whose sizes differ in some dims.

``NestedTensor`` subclasses ``fiamma.Tensor`` (``isinstance(nt, fiamma.Tensor)`` holds, as in
PyTorch) and has two layouts:

* ``fiamma.jagged``: one ragged dim. The components are stored packed in one dense ``values``
  tensor (the batch and ragged dims merged into one), with ``offsets`` (B + 1 int64 starts)
  and optionally ``lengths`` (non-contiguous: component i is ``values[offsets[i]:][:lengths[i]]``
  along the ragged dim). ``_nt_r`` is the ragged dim's index in the nested tensor (1 after
  construction, 2 after ``transpose(1, 2)``); the values tensor has that dim at ``_nt_r - 1``.
  Ops on non-ragged dims run once on ``values``.
* ``fiamma.strided``: any dims may differ between components; the components are kept as a
  list of dense tensors and ops run on each.

Everything is composed of dense differentiable ops, so autograd needs nothing of its own:
gradients reach the values (and through ``as_nested_tensor`` the list it was built from).
Dense ops handed a nested tensor touch an unset dense slot (``_storage``, ``_stride``, ...);
``__getattr__`` turns that into a ``NotImplementedError`` naming the op.
"""

import builtins
import itertools
import operator
import sys

from fiamma._layout import jagged, strided
from fiamma._sparse_coo import _caller_op
from fiamma._tensor import Size, Tensor
from fiamma._torch_function import (
    disabled_torch_function_impl as _disabled_torch_function_impl,
)

__all__ = ["NestedTensor", "NestedInt"]

_new = object.__new__
_DENSE_SLOTS = frozenset(("_storage", "_stride", "_offset", "_ptr", "_numel", "_contig",
                          "_cpu_contig"))


def _f():
    return sys.modules["fiamma"]


def unsupported(op, layout=None):
    where = f" (layout {layout!r})" if layout is not None else ""
    return NotImplementedError(f"{op}: not supported for nested tensors{where}")


class NestedInt:
    """The size of a ragged dim (PyTorch's symbolic ``j1``): one per set of offsets. Equal
    only to itself; arithmetic with it is not supported."""

    __slots__ = ("n",)
    _count = itertools.count(1)

    def __init__(self):
        self.n = next(NestedInt._count)

    def __repr__(self):
        return f"j{self.n}"

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return hash(("j", self.n))


class _Irregular:
    """A dim of a strided nested tensor whose size differs between components."""

    __slots__ = ()

    def __repr__(self):
        return "irregular"


_IRREGULAR = _Irregular()


def _wrap(dim, nd, op):
    dim = operator.index(dim)
    if not -nd <= dim < nd:
        raise IndexError(f"{op}: Dimension out of range (expected to be in range of "
                         f"[{-nd}, {nd - 1}], but got {dim})")
    return dim + nd if dim < 0 else dim


def _make_jagged(values, offsets, lengths, r, sizes, j):
    """A jagged nested tensor from checked parts. ``sizes``: (starts, lens) as Python ints."""
    nt = _new(NestedTensor)
    nt._nt_v = values
    nt._nt_off = offsets
    nt._nt_len = lengths
    nt._nt_r = r
    nt._nt_sizes = sizes
    nt._nt_j = j
    nt._nt_comps = None
    nt._nt_leaf = False
    vs = values._shape
    nt._shape = (len(sizes[0]),) + vs[:r - 1] + (j,) + vs[r:]
    nt._dtype = values._dtype
    nt._base = None
    nt._ag = None
    return nt


def _make_strided(comps):
    nt = _new(NestedTensor)
    nt._nt_comps = list(comps)
    nt._nt_v = nt._nt_off = nt._nt_len = nt._nt_j = None
    nt._nt_r = 0
    nt._nt_sizes = None
    nt._nt_leaf = False
    if comps:
        nd = comps[0].dim()
        for c in comps[1:]:
            if c.dim() != nd:
                raise RuntimeError(f"nested_tensor: all components must have the same number of "
                                   f"dims, got {nd} and {c.dim()}")
        shape = tuple(comps[0]._shape[i] if all(c._shape[i] == comps[0]._shape[i]
                                                 for c in comps) else _IRREGULAR
                      for i in range(nd))
        nt._dtype = comps[0]._dtype
    else:
        shape = ()
        nt._dtype = _f().get_default_dtype()
    nt._shape = (len(comps),) + shape
    nt._base = None
    nt._ag = None
    return nt


def _like(nt, values, r=None):
    """A jagged tensor with ``nt``'s offsets and new values (ragged dim at ``r``)."""
    r = nt._nt_r if r is None else r
    if values._shape[r - 1] != nt._nt_v._shape[nt._nt_r - 1]:
        raise RuntimeError(f"{_caller_op()}: the op changed the ragged dim of a nested tensor")
    return _make_jagged(values, nt._nt_off, nt._nt_len, r, nt._nt_sizes, nt._nt_j)


def _sizes_of(offsets, lengths):
    starts = offsets.tolist()
    if lengths is None:
        return starts[:-1], [b - a for a, b in zip(starts[:-1], starts[1:])]
    return starts[:len(lengths)] if len(starts) > len(lengths) else starts, lengths.tolist()


def _from_comps_like(nt, comps):
    """Per-component results back into ``nt``'s layout (jagged: packed along the ragged dim)."""
    if nt._nt_comps is not None:
        return _make_strided(comps)
    ax = nt._nt_r - 1
    for c, n in zip(comps, nt._nt_sizes[1]):
        if c.dim() != nt._nt_v.dim() or c._shape[ax] != n:
            raise RuntimeError(f"{_caller_op()}: the result is not a jagged nested tensor with the "
                               "input's ragged structure")
    f = _f()
    values = f.cat(comps, ax) if comps else nt._nt_v
    if nt._nt_len is None:
        return _make_jagged(values, nt._nt_off, None, nt._nt_r, nt._nt_sizes, nt._nt_j)
    return _jagged_from_list(comps, nt._nt_r)


def _jagged_from_list(comps, r=1, j=None):
    f = _f()
    ax = r - 1
    lens = [c._shape[ax] for c in comps]
    starts = [0]
    for n in lens:
        starts.append(starts[-1] + n)
    dev = comps[0].device
    offsets = f.tensor(starts, dtype=f.int64, device=dev)
    values = f.cat(list(comps), ax)
    return _make_jagged(values, offsets, None, r, (starts[:-1], lens), j or NestedInt())


class NestedTensor(Tensor):
    """A nested tensor: build one with ``fiamma.nested.nested_tensor`` (see the module).

    >>> import fiamma
    >>> nt = fiamma.nested.nested_tensor([fiamma.ones(2, 3), fiamma.ones(4, 3)],
    ...                                  layout=fiamma.jagged)
    >>> nt.dim(), nt.size(0), nt.size(2)
    (3, 2, 3)
    >>> [t.shape[0] for t in (nt * 2).unbind()]
    [2, 4]
    """

    __slots__ = ("_nt_v", "_nt_off", "_nt_len", "_nt_r", "_nt_sizes", "_nt_j", "_nt_comps",
                 "_nt_leaf")

    is_nested = True
    is_sparse = False
    _layout_alt = True
    # fiamma's own layout subclass: outside the __torch_function__ protocol (it dispatches
    # its ops itself), as nn.Parameter
    __torch_function__ = _disabled_torch_function_impl

    def __new__(cls, *args, **kwargs):
        raise TypeError("NestedTensor: build nested tensors with fiamma.nested.nested_tensor, "
                        "as_nested_tensor or nested_tensor_from_jagged")

    def __getattr__(self, name):
        if name in _DENSE_SLOTS:
            raise unsupported(_caller_op(), self.layout)
        raise AttributeError(f"'Tensor' object (nested) has no attribute {name!r}")

    # ---- what it is ----------------------------------------------------------------------
    @property
    def layout(self):
        return strided if self._nt_comps is not None else jagged

    @property
    def _ragged_idx(self):
        return self._nt_r

    def _parts(self):
        """The dense tensors holding the data (jagged: the values; strided: the components)."""
        return self._nt_comps if self._nt_comps is not None else [self._nt_v]

    @property
    def device(self):
        p = self._parts()
        return p[0].device if p else _f().device("cpu")

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    @property
    def is_cpu(self):
        return self.device.type == "cpu"

    @property
    def shape(self):
        if self._nt_comps is not None:
            raise RuntimeError("shape: a strided nested tensor has no shape (its components' "
                               "sizes differ); use size(dim) on regular dims or unbind()")
        return Size(self._shape)

    def size(self, dim=None):
        if dim is None:
            return self.shape
        d = _wrap(dim, len(self._shape), "size")
        s = self._shape[d]
        if s is _IRREGULAR:
            raise RuntimeError(f"Given dimension {dim} is irregular and does not have a size.")
        return s

    def numel(self):
        return builtins.sum(p.numel() for p in self._parts())

    nelement = numel

    def __len__(self):
        return self._shape[0]

    def is_contiguous(self, memory_format=None):
        if self._nt_comps is not None:
            return all(c.is_contiguous() for c in self._nt_comps)
        return self._nt_len is None and self._nt_v.is_contiguous()

    def stride(self, dim=None):
        raise unsupported("stride", self.layout)

    def data_ptr(self):
        raise unsupported("data_ptr", self.layout)

    # ---- jagged parts --------------------------------------------------------------------
    def _need_jagged(self, op):
        if self._nt_comps is not None:
            raise RuntimeError(f"{op}: only for nested tensors of layout fiamma.jagged (this one "
                               "is fiamma.strided)")

    def values(self):
        """The packed components (jagged layout): a view, gradients flow through it."""
        self._need_jagged("values")
        return self._nt_v

    def offsets(self):
        self._need_jagged("offsets")
        return self._nt_off

    def lengths(self):
        self._need_jagged("lengths")
        return self._nt_len

    def _max_seqlen(self):
        return builtins.max(self._nt_sizes[1]) if self._nt_comps is None else None

    def unbind(self, dim=0):
        if dim != 0:
            raise RuntimeError(f"unbind: only dim 0 is supported for nested tensors, got {dim}")
        if self._nt_comps is not None:
            return tuple(self._nt_comps)
        ax = self._nt_r - 1
        v = self._nt_v
        return tuple(v.narrow(ax, s, n) for s, n in zip(*self._nt_sizes))

    def __iter__(self):
        return iter(self.unbind())

    def __getitem__(self, index):
        if isinstance(index, tuple):
            if not index:
                return self
            head, rest = index[0], index[1:]
        else:
            head, rest = index, ()
        if isinstance(head, Tensor) and head.dim() == 0 and not head.is_floating_point():
            head = head.item()
        if isinstance(head, builtins.int):
            comp = self.unbind()[_wrap(head, self._shape[0], "index")]
            return comp[rest] if rest else comp
        if isinstance(head, slice) and head == slice(None) and rest:
            return _map(self, lambda t: t[rest], "index")
        raise unsupported(f"index with {index!r}", self.layout)

    # ---- autograd ------------------------------------------------------------------------
    @property
    def requires_grad(self):
        return builtins.any(p.requires_grad for p in self._parts())

    @requires_grad.setter
    def requires_grad(self, flag):
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad=True):
        if requires_grad and not self.requires_grad:
            if self._nt_comps is not None:
                self._nt_comps = [c.detach().requires_grad_(True) for c in self._nt_comps]
            else:
                self._nt_v = self._nt_v.detach().requires_grad_(True)
            self._nt_leaf = True
        elif not requires_grad and self.requires_grad:
            if not self.is_leaf:
                raise RuntimeError("requires_grad_: you can only change requires_grad flags of "
                                   "leaf variables")
            if self._nt_comps is not None:
                self._nt_comps = [c.detach() for c in self._nt_comps]
            else:
                self._nt_v = self._nt_v.detach()
        return self

    @property
    def grad_fn(self):
        if self._nt_leaf:
            return None
        for p in self._parts():
            if p.grad_fn is not None:
                return p.grad_fn
        return None

    @grad_fn.setter
    def grad_fn(self, value):
        if value is not None:
            raise RuntimeError("grad_fn: cannot set the grad_fn of a nested tensor")

    @property
    def is_leaf(self):
        return self._nt_leaf or not self.requires_grad

    @property
    def grad(self):
        """The gradient of a nested leaf: a nested tensor of the same structure."""
        if not self._nt_leaf:
            return None
        if self._nt_comps is not None:
            gs = [c.grad for c in self._nt_comps]
            if all(g is None for g in gs):
                return None
            return _make_strided([g if g is not None else _f().zeros_like(c)
                                  for g, c in zip(gs, self._nt_comps)])
        g = self._nt_v.grad
        return None if g is None else _like(self, g)

    @grad.setter
    def grad(self, value):
        if value is None:
            for p in self._parts():
                p.grad = None
            return
        raise RuntimeError("grad: only None can be assigned to a nested tensor's .grad")

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        if gradient is None:
            raise RuntimeError("backward: grad can be implicitly created only for scalar "
                               "outputs (give a nested gradient of the same structure)")
        outs, grads = self._parts(), gradient._parts()
        _f().autograd.backward(outs, grads, retain_graph=retain_graph,
                               create_graph=create_graph, inputs=inputs)

    def detach(self):
        return _map(self, lambda t: t.detach(), "detach")

    def detach_(self):
        if self._nt_comps is not None:
            self._nt_comps = [c.detach() for c in self._nt_comps]
        else:
            self._nt_v = self._nt_v.detach()
        self._nt_leaf = False
        return self

    @property
    def data(self):
        return self.detach()

    # ---- conversions ---------------------------------------------------------------------
    def to(self, *args, **kwargs):
        """As ``Tensor.to`` (dtype and/or device); the result stays nested."""
        out = _map(self, lambda t: t.to(*args, **kwargs), "to")
        if all(a is b for a, b in zip(out._parts(), self._parts())):
            return self
        if out._nt_comps is None and out._nt_v.device != self._nt_off.device:
            out._nt_off = self._nt_off.to(out._nt_v.device)
            if out._nt_len is not None:
                out._nt_len = self._nt_len.to(out._nt_v.device)
        return out

    def type(self, dtype=None, non_blocking=False):
        if dtype is None:
            return self._parts()[0].type()
        return self.to(dtype)

    def clone(self, memory_format=None):
        return _map(self, lambda t: t.clone(), "clone")

    def contiguous(self, memory_format=None):
        if self.is_contiguous():
            return self
        if self._nt_comps is not None:
            return _make_strided([c.contiguous() for c in self._nt_comps])
        return _jagged_from_list([c.contiguous() for c in self.unbind()], self._nt_r,
                                 self._nt_j if self._nt_len is None else None)

    def to_padded_tensor(self, padding, output_size=None):
        """A dense tensor: each component padded with ``padding`` to the largest size per dim
        (or ``output_size``). Differentiable."""
        f = _f()
        comps = self.unbind()
        if not comps:
            return f.zeros(output_size or (0,), dtype=self.dtype, device=self.device)
        nd = comps[0].dim()
        size = [builtins.max(c._shape[i] for c in comps) for i in range(nd)]
        if output_size is not None:
            output_size = tuple(output_size)
            if len(output_size) != nd + 1 or output_size[0] != len(comps) or any(
                    o < s for o, s in zip(output_size[1:], size)):
                raise RuntimeError(f"to_padded_tensor: output_size {list(output_size)} is "
                                   f"smaller than the padded size {[len(comps)] + size}")
            size = list(output_size[1:])
        rows = []
        for c in comps:
            pad = []
            for i in reversed(range(nd)):
                pad += [0, size[i] - c._shape[i]]
            rows.append(f.pad(c, pad, value=padding) if builtins.any(pad) else c)
        return f.stack(rows)

    def __repr__(self):
        if self._nt_comps is None:
            parts = [f"size={tuple(self._shape)}", f"offsets={self._nt_off!r}"]
            if self._nt_len is not None:
                parts.append(f"lengths={self._nt_len!r}")
            if self.requires_grad:
                parts.append(f"grad_fn=<{type(self.grad_fn).__name__}>" if self.grad_fn
                             is not None else "requires_grad=True")
            parts.append(f"contiguous={self.is_contiguous()}")
            return "NestedTensor(" + ", ".join(parts) + ")"
        body = ",\n".join("  " + repr(c).replace("\n", "\n  ") for c in self._nt_comps)
        return "nested_tensor([\n" + body + "\n])"

    __str__ = __repr__

    def __deepcopy__(self, memo):
        out = self.clone().detach()
        if self._nt_leaf:
            out.requires_grad_(True)
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, proto):
        raise unsupported("pickling (fiamma.save)", self.layout)

    # ---- shape ops -----------------------------------------------------------------------
    def dim(self):
        return len(self._shape)

    def _vdim(self, dim, op, ragged_ok=False):
        """The values'/components' dim for nested dim ``dim`` (never the batch dim; the
        ragged dim of a jagged tensor only if ``ragged_ok``)."""
        d = _wrap(dim, len(self._shape), op)
        if d == 0:
            raise RuntimeError(f"{op}: not supported for nested tensors on dim=0 (the batch dim)")
        if not ragged_ok and self._nt_comps is None and d == self._nt_r:
            raise RuntimeError(f"{op}: not supported for nested tensors on the ragged dim "
                               f"(dim={d})")
        return d - 1

    def transpose(self, dim0, dim1):
        nd = len(self._shape)
        d0, d1 = _wrap(dim0, nd, "transpose"), _wrap(dim1, nd, "transpose")
        if d0 == d1:
            return self
        if d0 == 0 or d1 == 0:
            raise RuntimeError("transpose(): not supported for nested tensors on the batch dim "
                               "(dim 0)")
        if self._nt_comps is not None:
            return _make_strided([c.transpose(d0 - 1, d1 - 1) for c in self._nt_comps])
        r = self._nt_r
        r = d1 if r == d0 else d0 if r == d1 else r
        return _like(self, self._nt_v.transpose(d0 - 1, d1 - 1), r)

    swapaxes = swapdims = transpose

    def permute(self, *dims):
        if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
            dims = dims[0]
        nd = len(self._shape)
        dims = [_wrap(d, nd, "permute") for d in dims]
        if sorted(dims) != list(range(nd)) or dims[0] != 0:
            raise RuntimeError(f"permute: expected a permutation of the dims keeping dim 0 (the "
                               f"batch dim) first, got {dims}")
        vd = [d - 1 for d in dims[1:]]
        if self._nt_comps is not None:
            return _make_strided([c.permute(vd) for c in self._nt_comps])
        return _like(self, self._nt_v.permute(vd), dims.index(self._nt_r))

    def _new_shape(self, op, shape):
        if len(shape) == 1 and isinstance(shape[0], (list, tuple, Size)):
            shape = shape[0]
        shape = list(shape)
        if not shape or (shape[0] != self._shape[0] and shape[0] != -1):
            raise RuntimeError(f"{op}: the batch dim (dim 0) of a nested tensor must stay "
                               f"{self._shape[0]}, got shape {shape}")
        return shape

    def _reshape(self, op, shape):
        shape = self._new_shape(op, shape)
        if self._nt_comps is not None:
            out = []
            for c in self._nt_comps:
                s = [c._shape[i - 1] if (x == -1 and i - 1 < c.dim()) else x
                     for i, x in enumerate(shape) if i > 0]
                out.append(getattr(c, op)(s))
            return _make_strided(out)
        r = self._nt_r
        old = self._shape
        if len(shape) <= r or not (shape[r] == -1 or shape[r] is self._nt_j) or \
                list(shape[1:r]) != list(old[1:r]):
            raise RuntimeError(f"{op}: for a jagged nested tensor of size {tuple(old)} the ragged "
                               f"dim must stay at dim {r} (given as -1) with the dims before it "
                               f"unchanged, got {shape}")
        vs = list(shape[1:])
        vs[r - 1] = self._nt_v._shape[r - 1]
        return _like(self, getattr(self._nt_v, op)(vs))

    def reshape(self, *shape):
        return self._reshape("reshape", shape)

    def view(self, *shape):
        if len(shape) == 1 and not isinstance(shape[0], (list, tuple, Size, builtins.int)):
            return _map(self, lambda t: t.view(shape[0]), "view")  # view(dtype)
        return self._reshape("view", shape)

    def unflatten(self, dim, sizes):
        d = self._vdim(dim, "unflatten")
        if self._nt_comps is not None:
            return _make_strided([c.unflatten(d, sizes) for c in self._nt_comps])
        r = self._nt_r
        return _like(self, self._nt_v.unflatten(d, sizes),
                     r + len(sizes) - 1 if d + 1 < r else r)

    def flatten(self, start_dim=0, end_dim=-1):
        nd = len(self._shape)
        s, e = _wrap(start_dim, nd, "flatten"), _wrap(end_dim, nd, "flatten")
        if s == e:
            return self
        if s == 0:
            raise RuntimeError("flatten: not supported for nested tensors on dim=0 (the batch "
                               "dim)")
        if self._nt_comps is not None:
            return _make_strided([c.flatten(s - 1, e - 1) for c in self._nt_comps])
        r = self._nt_r
        if s <= r <= e:
            raise RuntimeError(f"flatten: not supported for nested tensors across the ragged dim "
                               f"(dim={r})")
        return _like(self, self._nt_v.flatten(s - 1, e - 1), r - (e - s) if e < r else r)

    def squeeze(self, dim=None):
        if dim is None:
            raise unsupported("squeeze() without a dim", self.layout)
        d = self._vdim(dim, "squeeze")
        if self._nt_comps is not None:
            return _make_strided([c.squeeze(d) for c in self._nt_comps])
        v = self._nt_v.squeeze(d)
        if v.dim() == self._nt_v.dim():
            return self
        return _like(self, v, self._nt_r - 1 if d + 1 < self._nt_r else self._nt_r)

    def unsqueeze(self, dim):
        d = _wrap(dim, len(self._shape) + 1, "unsqueeze")
        if d == 0:
            raise RuntimeError("unsqueeze: not supported for nested tensors on dim=0")
        if self._nt_comps is not None:
            return _make_strided([c.unsqueeze(d - 1) for c in self._nt_comps])
        r = self._nt_r
        return _like(self, self._nt_v.unsqueeze(d - 1), r + 1 if d <= r else r)

    def split(self, split_size, dim=0):
        d = self._vdim(dim, "split")
        if self._nt_comps is not None:
            parts = [c.split(split_size, d) for c in self._nt_comps]
            return tuple(_make_strided(p) for p in zip(*parts))
        return tuple(_like(self, v) for v in self._nt_v.split(split_size, d))

    def chunk(self, chunks, dim=0):
        d = self._vdim(dim, "chunk")
        if self._nt_comps is not None:
            parts = [c.chunk(chunks, d) for c in self._nt_comps]
            return tuple(_make_strided(p) for p in zip(*parts))
        return tuple(_like(self, v) for v in self._nt_v.chunk(chunks, d))

    def narrow(self, dim, start, length):
        d = self._vdim(dim, "narrow")
        return _map(self, lambda t: t.narrow(d, start, length), "narrow")

    def expand_as(self, other):
        raise unsupported("expand_as", self.layout)

    # ---- reductions ----------------------------------------------------------------------
    def _reduce(self, op, dim, keepdim, dtype):
        kw = {} if dtype is None else {"dtype": dtype}
        if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
            if self._nt_comps is not None:
                return _f().stack([getattr(c, op)(**kw) for c in self._nt_comps]).sum() \
                    if op == "sum" else self._flat_mean(kw)
            if self._nt_len is None:
                return getattr(self._nt_v, op)(**kw)
            return self._flat_mean(kw) if op == "mean" else _f().stack(
                [c.sum(**kw) for c in self.unbind()]).sum()
        dims = list(dim) if isinstance(dim, (list, tuple)) else [dim]
        nd = len(self._shape)
        dims = sorted({_wrap(d, nd, op) for d in dims})
        if 0 in dims:
            raise RuntimeError(f"{op}: not supported for nested tensors over dim 0 (the batch "
                               "dim)")
        vd = [d - 1 for d in dims]
        if self._nt_comps is None and self._nt_r in dims:
            # over the ragged dim: one dense row per component
            rows = [getattr(c, op)(vd, keepdim=True, **kw) for c in self.unbind()]
            out = _f().stack(rows)
            if not keepdim:
                out = out.squeeze([d for d in dims])
            return out
        if self._nt_comps is not None:
            return _make_strided([getattr(c, op)(vd, keepdim=keepdim, **kw)
                                  for c in self._nt_comps])
        r = self._nt_r
        if not keepdim:
            r -= builtins.sum(1 for d in dims if d < r)
        return _like(self, getattr(self._nt_v, op)(vd, keepdim=keepdim, **kw), r)

    def _flat_mean(self, kw):
        f = _f()
        parts = self.unbind()
        return f.cat([c.reshape(-1) for c in parts]).mean(**kw)

    def sum(self, dim=None, keepdim=False, *, dtype=None):
        return self._reduce("sum", dim, keepdim, dtype)

    def mean(self, dim=None, keepdim=False, *, dtype=None):
        return self._reduce("mean", dim, keepdim, dtype)

    def amax(self, dim=(), keepdim=False):
        return self._reduce("amax", dim, keepdim, None)

    def amin(self, dim=(), keepdim=False):
        return self._reduce("amin", dim, keepdim, None)

    def _softmax(self, op, dim, dtype):
        d = self._vdim(dim, op, ragged_ok=True)
        if self._nt_comps is None and d == self._nt_r - 1:
            # over the ragged dim: each component over its own length
            return _from_comps_like(self, [getattr(c, op)(d, dtype=dtype)
                                           for c in self.unbind()])
        return _map(self, lambda t: getattr(t, op)(d, dtype=dtype), op)

    def softmax(self, dim, dtype=None):
        return self._softmax("softmax", dim, dtype)

    def log_softmax(self, dim, dtype=None):
        return self._softmax("log_softmax", dim, dtype)

    # ---- products ------------------------------------------------------------------------
    def matmul(self, other):
        return _matmul(self, other)

    __matmul__ = matmul
    bmm = matmul

    def __rmatmul__(self, other):
        raise unsupported("matmul with a dense left operand", self.layout)

    # ---- masked fill and friends ---------------------------------------------------------
    def masked_fill(self, mask, value):
        return _binary_apply(self, mask, lambda t, m: t.masked_fill(m, value), "masked_fill")

    def where(self, condition, other):
        return _binary_apply(self, condition, lambda t, c: t.where(c, other), "where")

    def clamp(self, min=None, max=None):
        return _map(self, lambda t: t.clamp(min, max), "clamp")

    clip = clamp

    def pow(self, exponent):
        return _binary(self, exponent, "pow")

    def type_as(self, other):
        return self.to(other.dtype)


def _map(nt, fn, op):
    """``fn`` applied to the values (jagged) or each component (strided)."""
    if nt._nt_comps is not None:
        return _make_strided([fn(c) for c in nt._nt_comps])
    return _like(nt, fn(nt._nt_v))


def _same_structure(a, b, op):
    if (a._nt_comps is None) != (b._nt_comps is None):
        raise RuntimeError(f"{op}: nested tensors of different layouts ({a.layout!r} and "
                           f"{b.layout!r})")
    if a._nt_comps is not None:
        if len(a._nt_comps) != len(b._nt_comps):
            raise RuntimeError(f"{op}: nested tensors with {len(a._nt_comps)} and "
                               f"{len(b._nt_comps)} components")
        return
    if a._nt_r != b._nt_r or (a._nt_off is not b._nt_off and a._nt_sizes[1] != b._nt_sizes[1]):
        raise RuntimeError(f"{op}: cannot combine jagged nested tensors of sizes "
                           f"{tuple(a._shape)} and {tuple(b._shape)} (different ragged "
                           "structure)")


def _packed_alike(a, b):
    """Whether two jagged tensors of one structure hold their rows at the same places of their
    values (so an op can run on the values at once, not per component)."""
    return a._nt_off is b._nt_off or (a._nt_len is None and b._nt_len is None and
                                      a._nt_sizes[1] == b._nt_sizes[1])


def _binary_apply(nt, other, fn, op, reflected=False):
    """``fn(nt's data, other's data)`` with PyTorch's nested broadcasting: a nested operand of
    the same structure, a scalar, or a dense tensor broadcast over the non-ragged trailing dims
    (or with the nested tensor's dim count: one row per component, size 1 in ragged dims)."""
    g = (lambda x, y: fn(y, x)) if reflected else fn
    if isinstance(other, NestedTensor):
        _same_structure(nt, other, op)
        if nt._nt_comps is not None:
            return _make_strided([g(a, b) for a, b in zip(nt._nt_comps, other._nt_comps)])
        if not _packed_alike(nt, other):
            return _from_comps_like(nt, [g(a, b) for a, b in zip(nt.unbind(), other.unbind())])
        return _like(nt, g(nt._nt_v, other._nt_v))
    if not isinstance(other, Tensor):
        return _map(nt, lambda t: g(t, other), op)
    nd, od = len(nt._shape), other.dim()
    if od >= nd:
        if od > nd:
            raise RuntimeError(f"{op}: a dense operand of {od} dims cannot broadcast with a nested "
                               f"tensor of {nd} dims")
        if other._shape[0] not in (1, nt._shape[0]):
            raise RuntimeError(f"{op}: the dense operand's batch dim {other._shape[0]} does not "
                               f"match the nested tensor's {nt._shape[0]}")
        rows = other.unbind(0) if other._shape[0] != 1 else [other[0]] * nt._shape[0]
        return _from_comps_like(nt, [g(c, o) for c, o in zip(nt.unbind(), rows)])
    if nt._nt_comps is None:
        k = od - (nd - nt._nt_r)
        if k >= 0 and other._shape[k] != 1:
            raise RuntimeError(f"{op}: the dense operand of size {tuple(other._shape)} would "
                               f"broadcast along the ragged dim of a nested tensor of size "
                               f"{tuple(nt._shape)}")
    return _map(nt, lambda t: g(t, other), op)


def _binary(nt, other, name, reflected=False):
    fn = getattr(Tensor, name)
    return _binary_apply(nt, other, fn, name, reflected)


def _matmul(a, b):
    if isinstance(b, NestedTensor) and isinstance(a, NestedTensor):
        if a._nt_comps is None and b._nt_comps is None:
            _same_structure(a, b, "matmul")
        if a._nt_comps is not None and b._nt_comps is not None:
            return _make_strided([x.matmul(y) for x, y in zip(a._nt_comps, b._nt_comps)])
        if len(a._nt_comps or ()) != len(b._nt_comps or ()):
            raise RuntimeError("matmul: nested tensors of different layouts")
        try:
            return _from_comps_like(a, [x.matmul(y) for x, y in zip(a.unbind(), b.unbind())])
        except RuntimeError as e:
            raise RuntimeError(f"matmul: jagged nested tensors of sizes {tuple(a._shape)} and "
                               f"{tuple(b._shape)}: supported per entry only where the result "
                               f"keeps the left operand's ragged lengths ({e})") from None
    if not isinstance(a, NestedTensor):
        raise unsupported("matmul with a dense left operand", b.layout)
    if not isinstance(b, Tensor):
        raise TypeError(f"matmul: expected other to be a Tensor, got {type(b).__name__}")
    if a._nt_comps is not None:
        return _make_strided([c.matmul(b) for c in a._nt_comps])
    nd = len(a._shape)
    if a._nt_r >= nd - 1 and b.dim() >= 2 or b.dim() > 2:
        if a._nt_r == nd - 1 and b.dim() <= 2:
            pass
        else:
            raise RuntimeError(f"matmul: a jagged nested tensor of size {tuple(a._shape)} times a "
                               f"dense tensor of size {tuple(b._shape)} is not supported (the "
                               "dense operand must be 1-d or 2-d, the ragged dim not the last)")
    if b.dim() == 1 and a._nt_r == nd - 1:
        raise RuntimeError("matmul: the contracted dim of a jagged nested tensor is ragged")
    return _like(a, a._nt_v.matmul(b))


# ---- generated methods -------------------------------------------------------------------------
_UNARY = (
    "abs", "neg", "negative", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt",
    "rsqrt", "square", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
    "asinh", "acosh", "atanh", "sigmoid", "relu", "sign", "sgn", "floor", "ceil", "round",
    "trunc", "frac", "reciprocal", "erf", "erfc", "erfinv", "isnan", "isinf", "isfinite",
    "logical_not", "bitwise_not", "nan_to_num", "float", "double", "half", "bfloat16", "int",
    "long", "bool", "cpu", "cuda", "sin_", "cos_", "exp_", "relu_", "neg_", "abs_", "sigmoid_",
    "tanh_", "sqrt_", "clamp_", "fill_", "zero_", "zeros_like", "ones_like", "logit", "deg2rad",
    "rad2deg", "conj", "positive", "__neg__", "__abs__", "__invert__", "__pos__",
)
_BINARY = (
    "add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod",
    "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
    "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "atan2", "hypot", "copysign",
    "__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__", "__pow__",
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__or__", "__xor__",
)
_REFLECTED = {"__radd__": "__add__", "__rsub__": "__sub__", "__rmul__": "__mul__",
              "__rtruediv__": "__truediv__", "__rfloordiv__": "__floordiv__",
              "__rmod__": "__mod__", "__rpow__": "__pow__", "__rand__": "__and__",
              "__ror__": "__or__", "__rxor__": "__xor__"}
_INPLACE_BINARY = ("add_", "sub_", "mul_", "div_", "__iadd__", "__isub__", "__imul__",
                   "__itruediv__", "masked_fill_", "copy_")


def _unary_method(name):
    fn = getattr(Tensor, name)

    def method(self, *args, **kwargs):
        if name.endswith("_") and not name.endswith("__"):
            for p in self._parts():
                fn(p, *args, **kwargs)
            return self
        return _map(self, lambda t: fn(t, *args, **kwargs), name)

    method.__name__ = name
    return method


def _binary_method(name):
    fn = getattr(Tensor, name)

    def method(self, other, *args, **kwargs):
        if args or kwargs:
            return _binary_apply(self, other, lambda a, b: fn(a, b, *args, **kwargs), name)
        return _binary_apply(self, other, fn, name)

    method.__name__ = name
    return method


def _reflected_method(name, base):
    fn = getattr(Tensor, name)  # the dense reflected operator: fn(t, other) is other op t

    def method(self, other):
        return _binary_apply(self, other, fn, base)

    method.__name__ = name
    return method


def _inplace_method(name):
    fn = getattr(Tensor, name)

    def method(self, other, *args, **kwargs):
        if isinstance(other, NestedTensor):
            _same_structure(self, other, name)
            if self._nt_comps is None and not _packed_alike(self, other):
                pairs = zip(self.unbind(), other.unbind())  # views: written in place
            else:
                pairs = zip(self._parts(), other._parts())
            for a, b in pairs:
                fn(a, b, *args, **kwargs)
        elif isinstance(other, Tensor) and other.dim() >= len(self._shape):
            raise unsupported(f"{name} with a dense operand of the nested tensor's dim count",
                              self.layout)
        else:
            for a in self._parts():
                fn(a, other, *args, **kwargs)
        return self

    method.__name__ = name
    return method


for _n in _UNARY:
    if hasattr(Tensor, _n):
        setattr(NestedTensor, _n, _unary_method(_n))
for _n in _BINARY:
    if hasattr(Tensor, _n):
        setattr(NestedTensor, _n, _binary_method(_n))
for _n, _b in _REFLECTED.items():
    if hasattr(Tensor, _b):
        setattr(NestedTensor, _n, _reflected_method(_n, _b))
for _n in _INPLACE_BINARY:
    if hasattr(Tensor, _n):
        setattr(NestedTensor, _n, _inplace_method(_n))
NestedTensor.__hash__ = Tensor.__hash__
del _n, _b


def _binary_function(name, a, b, out, fn):
    """The function form of a binary op (``fiamma.add(nt, x)``) with a nested operand: ``fn``,
    the op on dense operands, applied to the parts."""
    if out is not None:
        raise NotImplementedError(f"{name}: out= is not supported for nested tensors")
    if isinstance(a, NestedTensor):
        return _binary_apply(a, b, fn, name)
    return _binary_apply(b, a, fn, name, reflected=True)


def _map_dense(self, fn, *others, per_component=False):
    """``fn`` applied to this nested tensor's dense data, the result nested with the same
    structure (a fiamma extension: what fiamma-nn's functional ops on nested tensors use).

    ``per_component=False``: ``fn(values, *other_values)`` once (jagged; the others must have
    the same ragged structure), or per component (strided). ``per_component=True``:
    ``fn(component_i, *other_component_i)`` for each batch entry, the results packed back
    (for jagged, each result must keep its component's ragged length). Differentiable.

    >>> import fiamma
    >>> nt = fiamma.nested.nested_tensor([fiamma.ones(2, 3), fiamma.ones(1, 3)],
    ...                                  layout=fiamma.jagged)
    >>> nt.map_dense(lambda v: v * 3).values().sum().item()
    27.0
    """
    for o in others:
        if not isinstance(o, NestedTensor):
            raise TypeError(f"map_dense: expected nested tensors, got {type(o).__name__}")
        if len(o._shape) and o._shape[0] != self._shape[0]:
            raise RuntimeError(f"map_dense: batch sizes differ ({self._shape[0]} and "
                               f"{o._shape[0]})")
    if per_component or self._nt_comps is not None:
        outs = [fn(*cs) for cs in zip(self.unbind(), *[o.unbind() for o in others])]
        return _from_comps_like(self, outs)
    for o in others:
        _same_structure(self, o, "map_dense")
    if not all(_packed_alike(self, o) for o in others):
        outs = [fn(*cs) for cs in zip(self.unbind(), *[o.unbind() for o in others])]
        return _from_comps_like(self, outs)
    return _like(self, fn(self._nt_v, *[o._nt_v for o in others]))


NestedTensor.map_dense = _map_dense



def _cat(ts, dim, out, op):
    """``cat`` of nested tensors of one structure along a dim that is neither the batch dim
    nor the ragged one (PyTorch's rule)."""
    if out is not None:
        raise NotImplementedError(f"{op}: out= is not supported for nested tensors")
    t0 = ts[0]
    for t in ts[1:]:
        if not isinstance(t, NestedTensor):
            raise RuntimeError(f"{op}: cannot concatenate a nested tensor with a dense one")
        _same_structure(t0, t, op)
    d = t0._vdim(dim, op)
    f = sys.modules["fiamma"]
    if t0._nt_comps is not None:
        return _make_strided([f.cat(list(cs), d) for cs in zip(*[t._nt_comps for t in ts])])
    if not all(_packed_alike(t0, t) for t in ts):
        return _from_comps_like(t0, [f.cat(list(cs), d) for cs in zip(*[t.unbind() for t in ts])])
    return _like(t0, f.cat([t._nt_v for t in ts], d))
