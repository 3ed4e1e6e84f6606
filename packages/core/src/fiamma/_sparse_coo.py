"""Sparse COO tensors (``layout=fiamma.sparse_coo``): the class, construction, conversions.

A sparse COO tensor of shape ``sparse_shape + dense_shape`` holds two dense tensors: ``indices``
(int64, ``(sparse_dim, nnz)``) and ``values`` (``(nnz,) + dense_shape``). Entries may repeat
(their values add up) until ``coalesce()`` sorts the indices and sums duplicates.

``SparseCOO`` subclasses ``fiamma.Tensor`` (``isinstance(s, fiamma.Tensor)`` holds, as in
PyTorch) but sets only ``_shape`` and ``_dtype`` of the dense slots. Every operation is built
from differentiable dense ops on ``indices``/``values``, so autograd, the xp backend and cuda
work with no kernels of their own. A dense op handed a sparse tensor touches an unset dense slot
(``_storage``, ``_stride``, ...); ``__getattr__`` turns that into an error naming the op.
"""

import builtins
import importlib
import operator
import sys

from fiamma import _dtype as D, _layout
from fiamma._layout import sparse_coo
from fiamma._tensor import Tensor
from fiamma._torch_function import (
    disabled_torch_function_impl as _disabled_torch_function_impl,
)

__all__ = ["sparse_coo_tensor", "SparseCOO", "indices_copy", "values_copy"]

_new = object.__new__
# the dense slots a sparse tensor leaves unset: touching one means a dense-only op was called
_DENSE_SLOTS = frozenset(("_storage", "_stride", "_offset", "_ptr", "_numel", "_contig",
                          "_cpu_contig"))


def _fiamma():
    return sys.modules["fiamma"]


_GENERIC = frozenset(("fn", "method", "wrapper", "inner", "f", "op", "call", "impl"))


def _caller_op():
    """The name of the outermost fiamma function on the stack (the op the user called); for
    generated functions (``fn``, lambdas) the op name they close over."""
    f = sys._getframe(2)
    name = None
    while f is not None:
        mod = f.f_globals.get("__name__", "")
        if not (mod == "fiamma" or mod.startswith("fiamma.")) or mod == "fiamma.run":
            break
        co = f.f_code.co_name
        if co.startswith("<") or co in _GENERIC:
            loc = f.f_locals
            cand = loc.get("name", loc.get("op"))
            if isinstance(cand, str) and cand.isidentifier():
                name = cand
        else:
            name = co
        f = f.f_back
    if name is None:
        return "this op"
    return name[2:-2] if name.startswith("__") and name.endswith("__") else name.lstrip("_")


def unsupported(op):
    return NotImplementedError(
        f"{op}: not supported for sparse COO tensors (layout {sparse_coo!r}); convert with "
        ".to_dense() first")


class SparseCOO(Tensor):
    """A sparse COO tensor: build one with ``fiamma.sparse_coo_tensor`` or ``x.to_sparse()``.

    >>> import fiamma
    >>> s = fiamma.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2))
    >>> s.to_dense().tolist()
    [[0.0, 2.0], [3.0, 0.0]]
    >>> (s @ fiamma.ones(2, 1)).tolist()
    [[2.0], [3.0]]
    """

    __slots__ = ("_sp_i", "_sp_v", "_sp_c", "_sp_leaf")

    is_sparse = True
    _layout_alt = True
    layout = sparse_coo
    # fiamma's own layout subclass: outside the __torch_function__ protocol (it dispatches
    # its ops itself), as nn.Parameter
    __torch_function__ = _disabled_torch_function_impl

    def __new__(cls, *args, **kwargs):
        raise TypeError("SparseCOO: build sparse tensors with fiamma.sparse_coo_tensor or "
                        "Tensor.to_sparse()")

    def __getattr__(self, name):
        if name in _DENSE_SLOTS:
            raise unsupported(_caller_op())
        raise AttributeError(f"'Tensor' object (sparse COO) has no attribute {name!r}")

    # ---- autograd: the state lives on the values tensor ----------------------------------------
    @property
    def requires_grad(self):
        return self._sp_v.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad=True):
        v = self._sp_v
        if requires_grad and not v.requires_grad:
            self._sp_v = v.detach().requires_grad_(True)
            self._sp_leaf = True
        elif not requires_grad and v.requires_grad:
            if v.grad_fn is not None:
                raise RuntimeError("requires_grad_: you can only change requires_grad flags of "
                                   "leaf variables")
            self._sp_v = v.detach()
        return self

    @property
    def grad_fn(self):
        return None if self._sp_leaf else self._sp_v.grad_fn

    @grad_fn.setter
    def grad_fn(self, value):
        if value is not None:
            raise RuntimeError("grad_fn: cannot set the grad_fn of a sparse tensor")

    @property
    def is_leaf(self):
        return self._sp_leaf or not self._sp_v.requires_grad

    @property
    def grad(self):
        """The gradient of a sparse leaf: sparse (coalesced), with this tensor's pattern."""
        if not self._sp_leaf:
            return None
        g = self._sp_v.grad
        if g is None:
            return None
        if self._sp_c:
            return _make(self._sp_i, g, self._shape, True)
        # as PyTorch: the gradient at each position of the pattern, once. Duplicates of a
        # position all received it (the tensor's value depends only on their sum), so any
        # one of them carries it
        f = _fiamma()
        sshape = self._shape[:self._sp_i._shape[0]]
        uniq, inv = f.unique(_linear(self._sp_i, sshape), sorted=True, return_inverse=True)
        gv = f.zeros((uniq._shape[0],) + g._shape[1:], dtype=g._dtype, device=g.device)
        return _make(_unravel(uniq, sshape), gv.index_put_((inv,), g), self._shape, True)

    @grad.setter
    def grad(self, value):
        if value is None:
            if self._sp_leaf:
                self._sp_v.grad = None
            return
        raise RuntimeError("grad: only None can be assigned to a sparse tensor's .grad")

    def backward(self, *args, **kwargs):
        raise unsupported("backward")

    def detach(self):
        return _make(self._sp_i, self._sp_v.detach(), self._shape, self._sp_c)

    def detach_(self):
        self._sp_v = self._sp_v.detach()
        self._sp_leaf = False
        return self

    def zero_(self):
        """Drop every entry in place (nnz 0, coalesced), as PyTorch's sparse ``zero_``: what
        ``zero_grad(set_to_none=False)`` does to a sparse gradient."""
        if self._sp_v.requires_grad and _fiamma().is_grad_enabled():
            raise RuntimeError("zero_: a sparse tensor that requires grad can not be zeroed in "
                               "place (use detach() or no_grad())")
        self._sp_i = self._sp_i[:, :0]
        self._sp_v = self._sp_v[:0]
        self._sp_c = True
        return self

    # ---- layout -----------------------------------------------------------------------------
    @property
    def device(self):
        return self._sp_v.device

    @property
    def is_cuda(self):
        return self._sp_v.is_cuda

    @property
    def is_cpu(self):
        return self._sp_v.is_cpu

    @property
    def data(self):
        return self.detach()

    def numel(self):
        n = 1
        for s in self._shape:
            n *= s
        return n

    nelement = numel

    def sparse_dim(self):
        return self._sp_i._shape[0]

    def dense_dim(self):
        return len(self._shape) - self._sp_i._shape[0]

    def _nnz(self):
        return self._sp_v._shape[0]

    def is_coalesced(self):
        return self._sp_c

    def _indices(self):
        return self._sp_i

    def _values(self):
        return self._sp_v

    def indices(self):
        if not self._sp_c:
            raise RuntimeError("indices: Cannot get indices on an uncoalesced tensor, please "
                               "call .coalesce() first")
        return self._sp_i

    def values(self):
        if not self._sp_c:
            raise RuntimeError("values: Cannot get values on an uncoalesced tensor, please "
                               "call .coalesce() first")
        return self._sp_v

    def is_contiguous(self, memory_format=None):
        raise unsupported("is_contiguous")

    def stride(self, dim=None):
        raise unsupported("stride")

    def data_ptr(self):
        raise unsupported("data_ptr")

    @property
    def nbytes(self):
        return self._sp_i.nbytes + self._sp_v.nbytes

    def type(self, dtype=None, non_blocking=False):
        if dtype is None:
            from fiamma._tensor import _TYPE_NAMES

            return D.NAMESPACE + "sparse." + _TYPE_NAMES[self._dtype.name]
        from fiamma._legacy_types import dtype_of_type

        return self.to(dtype_of_type(dtype, "type"))

    def __repr__(self):
        from fiamma._sparse_print import sparse_repr

        return sparse_repr(self)

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        return (_rebuild, (self._sp_i, self._sp_v, tuple(self._shape), self._sp_c))

    def __deepcopy__(self, memo):
        out = self.clone()
        if self._sp_leaf:
            out.requires_grad_(True)
        memo[id(self)] = out
        return out

    # ---- conversions ------------------------------------------------------------------------
    def to(self, *args, **kwargs):
        """As ``Tensor.to`` (dtype and/or device); the result stays sparse COO."""
        v = self._sp_v.to(*args, **kwargs)
        if v is self._sp_v:
            return self
        i = self._sp_i if self._sp_i.device == v.device else self._sp_i.to(v.device)
        return _make(i, v, self._shape, self._sp_c)

    def clone(self, memory_format=None):
        return _make(self._sp_i.clone(), self._sp_v.clone(), self._shape, self._sp_c)

    def to_dense(self, dtype=None, *, masked_grad=None):
        """The dense (strided) tensor: duplicates add up. Differentiable w.r.t. the values."""
        v = self._sp_v if dtype is None else self._sp_v.to(dtype)
        f = _fiamma()
        sd = self._sp_i._shape[0]
        sshape, dshape = self._shape[:sd], self._shape[sd:]
        rows = 1
        for s in sshape:
            rows *= s
        if v._dtype is D.bool:  # duplicates of a bool tensor combine with "or"
            d = f.zeros((rows,) + dshape, dtype=D.int64, device=v.device)
            d = d.index_put_((_linear(self._sp_i, sshape),), v.to(D.int64), accumulate=True) != 0
        else:
            d = f.zeros((rows,) + dshape, dtype=v._dtype, device=v.device)
            d = d.index_put_((_linear(self._sp_i, sshape),), v, accumulate=True)
        return d.reshape(self._shape)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        if layout is not None and layout is not sparse_coo:
            return _compressed().coo_to_compressed(
                self, layout, blocksize, dense_dim, "to_sparse")
        if blocksize is not None:
            raise RuntimeError("to_sparse: blocksize is only for the sparse_bsr and sparse_bsc "
                               "layouts")
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            raise RuntimeError(f"to_sparse: conversion of a sparse COO tensor with sparse_dim "
                               f"{self.sparse_dim()} to sparse_dim {sparse_dim} is not "
                               "supported")
        return self

    def to_sparse_coo(self):
        return self

    def to_sparse_csr(self, dense_dim=None):
        return _compressed().coo_to_compressed(self, _layout.sparse_csr, None, dense_dim,
                                               "to_sparse_csr")

    def to_sparse_csc(self, dense_dim=None):
        return _compressed().coo_to_compressed(self, _layout.sparse_csc, None, dense_dim,
                                               "to_sparse_csc")

    def to_sparse_bsr(self, blocksize, dense_dim=None):
        return _compressed().coo_to_compressed(self, _layout.sparse_bsr, blocksize, dense_dim,
                                               "to_sparse_bsr")

    def to_sparse_bsc(self, blocksize, dense_dim=None):
        return _compressed().coo_to_compressed(self, _layout.sparse_bsc, blocksize, dense_dim,
                                               "to_sparse_bsc")

    def coalesce(self):
        """Indices sorted (row-major) and unique, values of duplicates summed."""
        if self._sp_c:
            return self
        f = _fiamma()
        sd = self._sp_i._shape[0]
        sshape = self._shape[:sd]
        lin = _linear(self._sp_i, sshape)
        uniq, inv = f.unique(lin, sorted=True, return_inverse=True)
        v = self._sp_v
        nv = f.zeros((uniq._shape[0],) + v._shape[1:], dtype=v._dtype, device=v.device)
        if v._dtype is D.bool:
            nv = nv.to(D.int64).index_put_((inv,), v.to(D.int64), accumulate=True) != 0
        else:
            nv = nv.index_put_((inv,), v, accumulate=True)
        return _make(_unravel(uniq, sshape), nv, self._shape, True)

    # ---- shape --------------------------------------------------------------------------------
    def transpose(self, dim0, dim1):
        nd = len(self._shape)
        d0 = _wrap(dim0, nd, "transpose")
        d1 = _wrap(dim1, nd, "transpose")
        sd = self._sp_i._shape[0]
        if d0 == d1:
            return self
        shape = list(self._shape)
        shape[d0], shape[d1] = shape[d1], shape[d0]
        if d0 < sd and d1 < sd:
            order = list(range(sd))
            order[d0], order[d1] = d1, d0
            i = self._sp_i.index_select(0, _fiamma().tensor(order, device=self._sp_i.device))
            return _make(i, self._sp_v, tuple(shape), False)
        if d0 >= sd and d1 >= sd:
            v = self._sp_v.transpose(d0 - sd + 1, d1 - sd + 1)
            return _make(self._sp_i, v, tuple(shape), self._sp_c)
        raise RuntimeError(f"transpose: a sparse dim ({builtins.min(d0, d1)}) cannot be swapped "
                           f"with a dense dim ({builtins.max(d0, d1)}) of a sparse COO tensor")

    def t(self):
        if len(self._shape) > 2:
            raise RuntimeError(f"t: expects a tensor with <= 2 dimensions, but self is "
                               f"{len(self._shape)}D")
        return self if len(self._shape) < 2 else self.transpose(0, 1)

    @property
    def T(self):
        return self.t()

    @property
    def mT(self):
        return self.transpose(-2, -1)


def _compressed():
    return importlib.import_module("fiamma._sparse_compressed")


def _wrap(dim, nd, op):
    dim = operator.index(dim)
    if not -nd <= dim < builtins.max(nd, 1):
        raise IndexError(f"{op}: Dimension out of range (expected to be in range of "
                         f"[{-nd}, {nd - 1}], but got {dim})")
    return dim + nd if dim < 0 else dim


def _strides_of(shape):
    st = []
    acc = 1
    for s in reversed(shape):
        st.append(acc)
        acc *= s
    return st[::-1]


def _linear(indices, sshape):
    """Row-major linear positions (int64, (nnz,)) of the sparse coordinates."""
    sd = len(sshape)
    if sd == 1:
        return indices[0]
    st = _strides_of(sshape)
    lin = indices[sd - 1]
    for d in range(sd - 1):
        lin = lin + indices[d] * st[d]
    return lin


def _unravel(lin, sshape):
    """(sparse_dim, n) coordinates of row-major positions ``lin``."""
    f = _fiamma()
    if not sshape:
        return lin.reshape(0, lin._shape[0])
    rows = []
    rest = lin
    for s in reversed(sshape[1:]):
        rows.append(rest % s)
        rest = f.div(rest, s, rounding_mode="floor")
    rows.append(rest)
    return f.stack(rows[::-1])


def _make(indices, values, shape, coalesced):
    """A sparse tensor from checked parts (no validation)."""
    s = _new(SparseCOO)
    s._sp_i = indices
    s._sp_v = values
    s._sp_c = coalesced
    s._sp_leaf = False
    s._shape = tuple(shape)
    s._dtype = values._dtype
    s._base = None
    s._ag = None
    return s


def _rebuild(indices, values, size, is_coalesced):
    return _make(indices, values, tuple(size), bool(is_coalesced))


def _as_tensor(x, op, name, dtype=None, device=None):
    f = _fiamma()
    if isinstance(x, SparseCOO):
        raise TypeError(f"{op}: {name} must be a dense tensor, got a sparse tensor")
    if isinstance(x, Tensor):
        return x if device is None else x.to(device)
    return f.tensor(x, dtype=dtype, device=device)


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None,
                      pin_memory=False, requires_grad=False, check_invariants=None,
                      is_coalesced=None):
    """A sparse COO tensor with ``values`` at ``indices`` (as ``torch.sparse_coo_tensor``).

    indices: ``(sparse_dim, nnz)`` integers; values: ``(nnz,) + dense_shape``; size: the full
    shape (inferred from the largest indices when omitted). Duplicate indices are allowed and
    add up. Indices are always checked against ``size`` (``check_invariants`` is accepted for
    PyTorch's signature; ``is_coalesced=True`` asserts sorted, unique indices and is then
    checked too).

    >>> import fiamma
    >>> s = fiamma.sparse_coo_tensor([[0, 0, 2]], [1.0, 2.0, 5.0], (4,))
    >>> s.to_dense().tolist()
    [3.0, 0.0, 5.0, 0.0]
    >>> s.coalesce().values().tolist()
    [3.0, 5.0]
    """
    op = "sparse_coo_tensor"
    v = _as_tensor(values, op, "values", dtype=dtype, device=device)
    if dtype is not None:
        v = v.to(D.to_dtype(dtype, op))
    if device is not None:
        v = v.to(device)
    i = _as_tensor(indices, op, "indices", device=v.device)
    if i._dtype._kind > 1 or i._dtype is D.bool:
        raise RuntimeError(f"{op}: indices must be an integer tensor, got {i._dtype}")
    if i._dtype is not D.int64:
        i = i.to(D.int64)
    if i.requires_grad:
        i = i.detach()
    if len(i._shape) != 2:
        raise RuntimeError(f"{op}: indices must be 2-D (sparse_dim, nnz), got shape "
                           f"{tuple(i._shape)}")
    if len(v._shape) < 1:
        raise RuntimeError(f"{op}: values must have at least 1 dim (nnz, ...), got a 0-d tensor")
    sd, nnz = i._shape
    if v._shape[0] != nnz:
        raise RuntimeError(f"{op}: indices have {nnz} entries (shape {tuple(i._shape)}) but "
                           f"values have {v._shape[0]} (shape {tuple(v._shape)})")
    dshape = tuple(v._shape[1:])
    if i.device != v.device:
        raise RuntimeError(f"{op}: indices on {i.device} and values on {v.device}")
    if nnz:
        mins = i.amin(1).tolist()
        maxs = i.amax(1).tolist()
        for d, m in enumerate(mins):
            if m < 0:
                raise RuntimeError(f"{op}: found negative index {m} for dim {d}")
    else:
        maxs = [-1] * sd
    if size is None:
        shape = tuple(m + 1 for m in maxs) + dshape
    else:
        if isinstance(size, int):
            size = (size,)
        try:
            shape = tuple(operator.index(s) for s in size)
        except TypeError:
            raise TypeError(f"{op}: size must be a sequence of ints, got {size!r}") from None
        for s in shape:
            if s < 0:
                raise RuntimeError(f"{op}: negative size {s} in {shape}")
        if len(shape) != sd + len(dshape):
            raise RuntimeError(f"{op}: number of dimensions must be sparse_dim ({sd}) + "
                               f"dense_dim ({len(dshape)}), but got {len(shape)} (size "
                               f"{shape})")
        if shape[sd:] != dshape:
            raise RuntimeError(f"{op}: the dense dims of size {shape[sd:]} must match the "
                               f"trailing dims of values {dshape}")
        for d, m in enumerate(maxs):
            if m >= shape[d]:
                raise RuntimeError(f"{op}: size is inconsistent with indices: for dim {d}, size "
                                   f"is {shape[d]} but found index {m}")
    coalesced = nnz <= 1
    if is_coalesced:
        if nnz > 1:
            lin = _linear(i, shape[:sd])
            if not builtins.bool((lin[1:] > lin[:-1]).all()):
                raise RuntimeError(f"{op}: is_coalesced=True but the indices are not sorted "
                                   "and unique")
        coalesced = True
    s = _make(i, v, shape, coalesced)
    if requires_grad:
        if v._dtype._kind < 2:
            raise RuntimeError(f"{op}: only floating point and complex tensors can require "
                               f"gradients, got {v._dtype}")
        s.requires_grad_(True)
    return s


def _to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """This dense tensor as a sparse COO tensor (coalesced) holding its nonzeros; with
    ``sparse_dim`` < ndim the trailing dims stay dense (a slice is kept when any element of it
    is nonzero). Differentiable w.r.t. the kept values.

    >>> import fiamma
    >>> s = fiamma.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()
    >>> s._nnz(), s.indices().tolist()
    (2, [[0, 1], [1, 0]])
    """
    if layout is not None and layout is not sparse_coo:
        if sparse_dim is not None:
            raise RuntimeError("to_sparse: sparse_dim cannot be given with a compressed layout "
                               "(use dense_dim)")
        return _compressed().dense_to_compressed(
            self, layout, blocksize, dense_dim, "to_sparse")
    if blocksize is not None:
        raise RuntimeError("to_sparse: blocksize is only for the sparse_bsr and sparse_bsc "
                           "layouts")
    f = _fiamma()
    nd = len(self._shape)
    sd = nd if sparse_dim is None else operator.index(sparse_dim)
    if not 0 <= sd <= nd:
        raise RuntimeError(f"to_sparse: sparse_dim must be in [0, {nd}], got {sd}")
    sshape = self._shape[:sd]
    rows = 1
    for s in sshape:
        rows *= s
    flat = self.reshape((rows,) + self._shape[sd:])
    nz = flat != 0
    if sd < nd:
        nz = nz.reshape(rows, -1).any(1)
    lin = f.nonzero(nz).reshape(-1)
    values = flat[lin]
    return _make(_unravel(lin, sshape), values, self._shape, True)


def _to_dense_dense(self, dtype=None, *, masked_grad=None):
    return self if dtype is None else self.to(dtype)


def _sparse_only(name, what="sparse coordinate"):
    def method(self, *args, **kwargs):
        raise RuntimeError(f"{name} expected {what} tensor layout but got {self.layout!r}")

    method.__name__ = name
    return method


def _sparse_mask(self, mask):
    """This dense tensor's entries at the positions of the sparse ``mask``: a sparse tensor with
    ``mask``'s pattern (as ``torch.Tensor.sparse_mask``)."""
    if not isinstance(mask, SparseCOO):
        raise RuntimeError(f"sparse_mask: mask must be a sparse COO tensor, got layout "
                           f"{getattr(mask, 'layout', type(mask).__name__)}")
    if tuple(self._shape) != tuple(mask._shape):
        raise RuntimeError(f"sparse_mask: expected self and mask to have the same shape, got "
                           f"{tuple(self._shape)} and {tuple(mask._shape)}")
    m = mask.coalesce()
    sd = m._sp_i._shape[0]
    rows = 1
    for n in m._shape[:sd]:
        rows *= n
    flat = self.reshape((rows,) + tuple(m._shape[sd:]))
    return _make(m._sp_i, flat[_linear(m._sp_i, m._shape[:sd])], m._shape, True)


# Tensor methods of this module: attached by fiamma._methods (the one place that does)
METHODS = {
    "to_sparse": _to_sparse, "to_sparse_coo": lambda self: _to_sparse(self),
    "to_dense": _to_dense_dense, "sparse_mask": _sparse_mask,
    # what a dense tensor answers (as PyTorch's strided tensors)
    "sparse_dim": lambda self: 0, "dense_dim": lambda self: len(self._shape),
    "indices": _sparse_only("indices"), "values": _sparse_only("values", "sparse"),
    "is_coalesced": _sparse_only("is_coalesced"), "coalesce": _sparse_only("coalesce"),
    "_indices": _sparse_only("_indices"), "_values": _sparse_only("_values", "sparse"),
    "_nnz": _sparse_only("_nnz", "sparse"), "smm": _sparse_only("smm", "sparse"),
}


def indices_copy(input):
    """A copy of a coalesced sparse tensor's indices (``torch.indices_copy``)."""
    if not isinstance(input, SparseCOO):
        raise RuntimeError("indices_copy: expected a sparse COO tensor")
    return input.indices().clone()


def values_copy(input):
    """A copy of a coalesced sparse tensor's values (``torch.values_copy``)."""
    if not isinstance(input, SparseCOO):
        raise RuntimeError("values_copy: expected a sparse COO tensor")
    return input.values().clone()
