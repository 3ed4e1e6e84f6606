"""Sparse compressed tensors: the CSR, CSC, BSR and BSC layouts (``fiamma.sparse_csr`` ...).

A compressed tensor of shape ``batch + (rows, cols) + dense`` holds three dense tensors:
``compressed_indices`` (``batch + (ncompressed + 1,)``: row offsets for CSR/BSR, column
offsets for CSC/BSC), ``plain_indices`` (``batch + (nnz,)``: the column, resp. row, of each
stored element or block) and ``values`` (``batch + (nnz,) + block + dense``; ``block`` is
``(bh, bw)`` for BSR/BSC, empty for CSR/CSC). The index dtype (int32 or int64) is the user's.

As ``SparseCOO``, the class subclasses ``fiamma.Tensor`` and sets only ``_shape`` and
``_dtype`` of the dense slots, so a dense op handed one fails with an error naming the op.
Every conversion is composed of differentiable dense ops on the values; the product CSR @
dense runs a C kernel (``fm_csr_mm``, see ``_sparse_compressed_ops``).

Structure is always checked at construction against the size (offsets start at 0, never
decrease and end at nnz; plain indices in range), because the kernels and scatters read
memory through the indices; ``check_invariants=True`` also checks that the plain indices of
each compressed slice are sorted and distinct, as PyTorch's check.
"""

import builtins
import operator
import sys

import numpy as _np

from fiamma import _dtype as D
from fiamma._layout import sparse_bsc, sparse_bsr, sparse_coo, sparse_csc, sparse_csr, strided
from fiamma._tensor import Tensor
from fiamma._torch_function import (
    disabled_torch_function_impl as _disabled_torch_function_impl,
)

__all__ = ["SparseCompressed", "sparse_compressed_tensor", "sparse_csr_tensor",
           "sparse_csc_tensor", "sparse_bsr_tensor", "sparse_bsc_tensor", "crow_indices_copy",
           "col_indices_copy", "ccol_indices_copy", "row_indices_copy"]

_new = object.__new__
_DENSE_SLOTS = frozenset(("_storage", "_stride", "_offset", "_ptr", "_numel", "_contig",
                          "_cpu_contig"))
_NAMES = {sparse_csr: "Sparse CSR", sparse_csc: "Sparse CSC", sparse_bsr: "Sparse BSR",
          sparse_bsc: "Sparse BSC"}
COMPRESSED = (sparse_csr, sparse_csc, sparse_bsr, sparse_bsc)


def _f():
    return sys.modules["fiamma"]


def _coo():
    # the COO module through sys.modules (fiamma/__init__ imports it first): an import
    # statement here would put this module in the package's import cycle
    return sys.modules["fiamma._sparse_coo"]


def _is_coo(x):
    return getattr(x, "is_sparse", False) is True


def _check_invariants_default():
    return _CHECK[0]


_CHECK = [False]  # fiamma.sparse.check_sparse_tensor_invariants's state


def unsupported(op, layout):
    return NotImplementedError(
        f"{op}: not supported for sparse compressed tensors (layout {layout!r}); convert with "
        ".to_dense() first")


class SparseCompressed(Tensor):
    """A sparse compressed tensor (CSR, CSC, BSR or BSC): build one with
    ``fiamma.sparse_csr_tensor`` (and the other constructors) or ``x.to_sparse_csr()``.

    >>> import fiamma
    >>> s = fiamma.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse_csr()
    >>> s.crow_indices().tolist(), s.col_indices().tolist(), s.values().tolist()
    ([0, 1, 2], [1, 0], [2.0, 3.0])
    >>> (s @ fiamma.ones(2, 1)).tolist()
    [[2.0], [3.0]]
    """

    __slots__ = ("_cp_ci", "_cp_pi", "_cp_v", "_cp_leaf", "_cp_gf")

    is_sparse = False
    _layout_alt = True
    _compressed = True
    # set on each layout's class
    layout = None
    _row = True      # the compressed dim is the rows (CSR/BSR)
    _blocked = False
    __torch_function__ = _disabled_torch_function_impl

    def __new__(cls, *args, **kwargs):
        raise TypeError("SparseCompressed: build sparse compressed tensors with "
                        "fiamma.sparse_csr_tensor (and its siblings) or Tensor.to_sparse_csr()")

    def __getattr__(self, name):
        if name in _DENSE_SLOTS:
            raise unsupported(_coo()._caller_op(), type(self).layout)
        raise AttributeError(f"'Tensor' object ({self.layout.name}) has no attribute {name!r}")

    # ---- autograd: the state lives on the values tensor ----------------------------------------
    @property
    def requires_grad(self):
        return self._cp_v.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad=True):
        v = self._cp_v
        if requires_grad and not v.requires_grad:
            if v._dtype._kind < 2:
                raise RuntimeError(f"requires_grad_: only Tensors of floating point and complex "
                                   f"dtype can require gradients, got {v._dtype}")
            self._cp_v = v.detach().requires_grad_(True)
            self._cp_leaf = True
        elif not requires_grad and v.requires_grad:
            if v.grad_fn is not None or self._cp_gf is not None:
                raise RuntimeError("requires_grad_: you can only change requires_grad flags of "
                                   "leaf variables")
            self._cp_v = v.detach()
        return self

    @property
    def grad_fn(self):
        if self._cp_gf is not None:  # built by a constructor from values that require grad
            return self._cp_gf
        return None if self._cp_leaf else self._cp_v.grad_fn

    @property
    def is_leaf(self):
        return self._cp_leaf or not self._cp_v.requires_grad

    @property
    def grad(self):
        """The gradient of a compressed leaf: a tensor of the same layout and pattern holding
        the gradient of each stored value (PyTorch gives a dense gradient there)."""
        if not self._cp_leaf:
            return None
        g = self._cp_v.grad
        if g is None:
            return None
        return _make(type(self), self._cp_ci, self._cp_pi, g, self._shape)

    @grad.setter
    def grad(self, value):
        if value is None:
            if self._cp_leaf:
                self._cp_v.grad = None
            return
        raise RuntimeError("grad: only None can be assigned to a sparse tensor's .grad")

    def backward(self, *args, **kwargs):
        raise unsupported("backward", self.layout)

    def detach(self):
        return _make(type(self), self._cp_ci, self._cp_pi, self._cp_v.detach(), self._shape)

    def detach_(self):
        self._cp_v = self._cp_v.detach()
        self._cp_leaf = False
        self._cp_gf = None
        return self

    # ---- layout -----------------------------------------------------------------------------
    @property
    def device(self):
        return self._cp_v.device

    @property
    def is_cuda(self):
        return self._cp_v.is_cuda

    @property
    def is_cpu(self):
        return self._cp_v.is_cpu

    @property
    def data(self):
        return self.detach()

    def numel(self):
        n = 1
        for s in self._shape:
            n *= s
        return n

    nelement = numel

    def _nbatch(self):
        return len(self._cp_ci._shape) - 1

    def sparse_dim(self):
        return 2

    def dense_dim(self):
        return len(self._shape) - self._nbatch() - 2

    def _nnz(self):
        return self._cp_pi._shape[-1]

    def blocksize(self):
        return tuple(self._cp_v._shape[self._nbatch() + 1:self._nbatch() + 3]) \
            if self._blocked else (1, 1)

    def values(self):
        return self._cp_v

    def _values(self):
        return self._cp_v

    def _compressed_indices(self):
        return self._cp_ci

    def _plain_indices(self):
        return self._cp_pi

    def crow_indices(self):
        if not self._row:
            _wrong_layout("crow_indices", "row", self.layout)
        return self._cp_ci

    def col_indices(self):
        if not self._row:
            _wrong_layout("col_indices", "row", self.layout)
        return self._cp_pi

    def ccol_indices(self):
        if self._row:
            _wrong_layout("ccol_indices", "column", self.layout)
        return self._cp_ci

    def row_indices(self):
        if self._row:
            _wrong_layout("row_indices", "column", self.layout)
        return self._cp_pi

    def indices(self):
        raise RuntimeError(f"indices expected sparse coordinate tensor layout but got "
                           f"{_NAMES[self.layout].replace(' ', '')}")

    def _indices(self):
        return self.indices()

    def is_coalesced(self):
        raise RuntimeError(f"is_coalesced expected sparse coordinate tensor layout but got "
                           f"{_NAMES[self.layout].replace(' ', '')}")

    def coalesce(self):
        raise RuntimeError(f"coalesce expected sparse coordinate tensor layout but got "
                           f"{_NAMES[self.layout].replace(' ', '')}")

    def is_contiguous(self, memory_format=None):
        raise RuntimeError(f"{_NAMES[self.layout]} tensors do not have is_contiguous")

    def stride(self, dim=None):
        raise RuntimeError(f"{_NAMES[self.layout]} tensors do not have strides")

    def data_ptr(self):
        raise unsupported("data_ptr", self.layout)

    @property
    def nbytes(self):
        return self._cp_ci.nbytes + self._cp_pi.nbytes + self._cp_v.nbytes

    def __repr__(self):
        return _repr(self)

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        return (_rebuild, (self.layout.name, self._cp_ci, self._cp_pi, self._cp_v.detach(),
                           tuple(self._shape)))

    def __deepcopy__(self, memo):
        out = self.clone()
        if self._cp_leaf:
            out.requires_grad_(True)
        memo[id(self)] = out
        return out

    # ---- conversions ------------------------------------------------------------------------
    def to(self, *args, **kwargs):
        """As ``Tensor.to`` (dtype and/or device); the layout stays."""
        v = self._cp_v.to(*args, **kwargs)
        if v is self._cp_v:
            return self
        ci, pi = self._cp_ci, self._cp_pi
        if ci.device != v.device:
            ci, pi = ci.to(v.device), pi.to(v.device)
        return _make(type(self), ci, pi, v, self._shape)

    def clone(self, memory_format=None):
        return _make(type(self), self._cp_ci.clone(), self._cp_pi.clone(), self._cp_v.clone(),
                     self._shape)

    def type(self, dtype=None, non_blocking=False):
        if dtype is None:
            from fiamma._tensor import _TYPE_NAMES

            return D.NAMESPACE + "sparse." + _TYPE_NAMES[self._dtype.name]
        return self.to(sys.modules["fiamma._legacy_types"].dtype_of_type(dtype, "type"))

    def to_dense(self, dtype=None, *, masked_grad=None):
        """The dense (strided) tensor. Differentiable w.r.t. the values."""
        b, r, c, v = _entries(self)
        if dtype is not None:
            v = v.to(dtype)
        return _scatter_dense(self, b, r, c, v)

    def to_sparse_coo(self):
        return _to_coo(self)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        if layout is None or layout is sparse_coo:
            if sparse_dim is not None and sparse_dim != 2 + self._nbatch():
                raise RuntimeError(f"to_sparse: sparse_dim {sparse_dim} is not supported for a "
                                   f"{self.layout.name} tensor (its sparse_dim is "
                                   f"{2 + self._nbatch()})")
            return _to_coo(self)
        return _convert(self, layout, blocksize, dense_dim, "to_sparse")

    def to_sparse_csr(self, dense_dim=None):
        return _convert(self, sparse_csr, None, dense_dim, "to_sparse_csr")

    def to_sparse_csc(self, dense_dim=None):
        return _convert(self, sparse_csc, None, dense_dim, "to_sparse_csc")

    def to_sparse_bsr(self, blocksize, dense_dim=None):
        return _convert(self, sparse_bsr, blocksize, dense_dim, "to_sparse_bsr")

    def to_sparse_bsc(self, blocksize, dense_dim=None):
        return _convert(self, sparse_bsc, blocksize, dense_dim, "to_sparse_bsc")

    # ---- shape --------------------------------------------------------------------------------
    def transpose(self, dim0, dim1):
        """Swapping the two sparse dims turns CSR into CSC (BSR into BSC, blocks transposed)
        and back, with the same index tensors."""
        nd = len(self._shape)
        nb = self._nbatch()
        d0, d1 = sorted((_wrap(dim0, nd, "transpose"), _wrap(dim1, nd, "transpose")))
        if d0 == d1:
            return self
        if (d0, d1) != (nb, nb + 1):
            raise RuntimeError(f"transpose(): {self.layout.name} tensors support only the "
                               f"transposition of their two sparse dims ({nb}, {nb + 1}), got "
                               f"({d0}, {d1})")
        shape = list(self._shape)
        shape[d0], shape[d1] = shape[d1], shape[d0]
        v = self._cp_v
        if self._blocked:
            v = v.transpose(nb + 1, nb + 2)
        return _make(_TRANSPOSED[type(self)], self._cp_ci, self._cp_pi, v, tuple(shape))

    def t(self):
        if len(self._shape) != 2:
            raise RuntimeError(f"t: expects a tensor with <= 2 dimensions, but self is "
                               f"{len(self._shape)}D")
        return self.transpose(0, 1)

    @property
    def T(self):
        return self.t()

    @property
    def mT(self):
        return self.transpose(-2, -1) if self.dense_dim() == 0 else \
            self.transpose(self._nbatch(), self._nbatch() + 1)

    # ---- indexing -----------------------------------------------------------------------------
    def select(self, dim, index):
        return self._select(dim, index, False)

    def _select_copy(self, dim, index):
        # fiamma.select_copy: as select, and a sparse dim of a blocked tensor is allowed
        return self._select(dim, index, True)

    def _select(self, dim, index, copy):
        """PyTorch's rules: a batch dim keeps the layout (one batch fewer); a dense dim keeps
        the layout and the indices; a sparse dim of an unbatched tensor without blocks (or
        with 1 x 1 blocks) gives a sparse COO tensor of the other sparse dim."""
        nd = len(self._shape)
        dim = _wrap(dim, nd, "select")
        size = self._shape[dim]
        if isinstance(index, bool) or not isinstance(index, int):
            index = operator.index(index)
        if not -size <= index < size:
            raise IndexError(f"select(): index {index} out of range for tensor of size "
                             f"{list(self._shape)} at dimension {dim}")
        index = index + size if index < 0 else index
        nb = self._nbatch()
        shape = self._shape[:dim] + self._shape[dim + 1:]
        if dim < nb:
            return _make(type(self), self._cp_ci.select(dim, index),
                         self._cp_pi.select(dim, index), self._cp_v.select(dim, index), shape)
        if dim >= nb + 2:  # a dense dim: the values' dim after (nnz,) + block
            vd = dim - 1 + (2 if self._blocked else 0)
            return _make(type(self), self._cp_ci, self._cp_pi, self._cp_v.select(vd, index),
                         shape)
        if nb:
            raise RuntimeError(f"select(): selecting sparse dimensions is not supported for "
                               f"batched sparse compressed tensors ({self.layout.name}, "
                               f"{nb} batch dim(s), dim {dim})")
        if self.blocksize() != (1, 1) and not copy:
            raise RuntimeError(f"select(): selecting a sparse dim of a {self.layout.name} "
                               f"tensor with blocksize {self.blocksize()} has no view "
                               f"(PyTorch raises too); use fiamma.select_copy or convert "
                               f"with .to_dense() first")
        if self.blocksize() != (1, 1):
            c = _to_coo(self)
            i = c._sp_i
            keep = _f().nonzero(i[dim] == index).reshape(-1)
            return _coo()._make(i[1 - dim][keep].reshape(1, -1), c._sp_v[keep], shape,
                                False).coalesce()
        return _select_sparse(self, dim, index, shape)

    def __getitem__(self, idx):
        items = idx if isinstance(idx, tuple) else (idx,)
        if any(isinstance(it, Tensor) for it in items):  # a 0-d integer tensor is an int
            items = tuple(int(it) if isinstance(it, Tensor) and it.ndim == 0 and
                          it._dtype._kind == 1 else it for it in items)
        for it in items:
            if isinstance(it, bool) or not hasattr(type(it), "__index__") or \
                    isinstance(it, Tensor):
                raise RuntimeError(f"getitem: {_NAMES[self.layout]} tensors do not have "
                                   f"strides: only integer indices (select) are supported, "
                                   f"got {type(it).__name__} {it!r}; convert with .to_dense() "
                                   f"first")
        if len(items) > len(self._shape):
            raise IndexError(f"getitem: too many indices for tensor of dimension "
                             f"{len(self._shape)} (got {len(items)})")
        out = self
        for it in items:
            if isinstance(out, SparseCompressed):
                out = out.select(0, it)
            elif _is_coo(out):
                out = _coo_select0(out, it)
            else:
                out = out.select(0, it)
        return out

    def narrow(self, dim, start, length):
        raise RuntimeError(f"narrow: {_NAMES[self.layout]} tensors do not have strides "
                           f"(PyTorch raises too); convert with .to_dense() first")


def _select_sparse(s, dim, index, shape):
    """Row ``index`` (dim 0) or column ``index`` (dim 1) of an unbatched compressed tensor
    with 1 x 1 blocks, as a coalesced 1-sparse-dim COO tensor of shape ``shape``."""
    f = _f()
    dense = tuple(s._shape[2:])
    v = s._cp_v.reshape((s._nnz(),) + dense)
    if (dim == 0) == s._row:  # the compressed dim: one slice of the offsets
        lo, hi = (int(x) for x in s._cp_ci[index:index + 2].tolist())
        pos = s._cp_pi[lo:hi].to(D.int64)
        vals = v[lo:hi]
    else:  # the plain dim: the entries whose plain index is ``index``
        b, r, c, _ = _entries(s)
        comp = r if s._row else c
        keep = f.nonzero(s._cp_pi.reshape(-1) == index).reshape(-1)
        pos = comp[keep]
        vals = v[keep]
    return _coo()._make(pos.reshape(1, -1), vals, shape, False).coalesce()


def _coo_select0(c, index):
    """Element ``index`` of a COO tensor with one sparse dim: a dense tensor of its dense
    shape (the sum of the coalesced entries there, so zeros where none is stored)."""
    f = _f()
    size = c._shape[0]
    if isinstance(index, bool) or not isinstance(index, int):
        index = operator.index(index)
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(c._shape)} at dimension 0")
    index = index + size if index < 0 else index
    if c.sparse_dim() != 1:
        raise RuntimeError(f"getitem: indexing a sparse COO tensor with sparse_dim "
                           f"{c.sparse_dim()} is not supported")
    c = c.coalesce()
    i, v = c._sp_i, c._sp_v
    keep = f.nonzero(i[0] == index).reshape(-1)
    if keep._shape[0] == 0:
        return f.zeros(tuple(v._shape[1:]), dtype=v._dtype, device=v.device)
    return v[int(keep[0])]


def _rebuild(layout_name, ci, pi, values, size):
    """Unpickling (checked as the constructor checks)."""
    layout = {x.name: x for x in COMPRESSED}[layout_name]
    return sparse_compressed_tensor(ci, pi, values, size, layout=layout)


def _wrong_layout(op, kind, layout):
    raise RuntimeError(f"{op} expected sparse {kind} compressed tensor layout but got "
                       f"{_NAMES[layout].replace(' ', '')}")


class SparseCSR(SparseCompressed):
    __slots__ = ()
    layout = sparse_csr
    is_sparse_csr = True


class SparseCSC(SparseCompressed):
    __slots__ = ()
    layout = sparse_csc
    _row = False


class SparseBSR(SparseCompressed):
    __slots__ = ()
    layout = sparse_bsr
    _blocked = True


class SparseBSC(SparseCompressed):
    __slots__ = ()
    layout = sparse_bsc
    _row = False
    _blocked = True


_CLASS = {sparse_csr: SparseCSR, sparse_csc: SparseCSC, sparse_bsr: SparseBSR,
          sparse_bsc: SparseBSC}
_TRANSPOSED = {SparseCSR: SparseCSC, SparseCSC: SparseCSR, SparseBSR: SparseBSC,
               SparseBSC: SparseBSR}
_INDEX_NAMES = {True: ("crow_indices", "col_indices"), False: ("ccol_indices", "row_indices")}


def _wrap(dim, nd, op):
    dim = operator.index(dim)
    if not -nd <= dim < builtins.max(nd, 1):
        raise IndexError(f"{op}: Dimension out of range (expected to be in range of "
                         f"[{-nd}, {nd - 1}], but got {dim})")
    return dim + nd if dim < 0 else dim


def _make(cls, ci, pi, values, shape):
    """A compressed tensor from checked parts (no validation)."""
    s = _new(cls)
    s._cp_ci = ci
    s._cp_pi = pi
    s._cp_v = values
    s._cp_leaf = False
    s._cp_gf = None
    s._shape = tuple(shape)
    s._dtype = values._dtype
    s._base = None
    s._ag = None
    return s


def _prod(xs):
    n = 1
    for x in xs:
        n *= x
    return n


# ---- the entries view: (batch, block-row, block-col, values) for every stored element --------

def _grid(s):
    """(batch shape, B, rows, cols, bh, bw, dense shape) of a compressed tensor."""
    nb = s._nbatch()
    batch = tuple(s._shape[:nb])
    rows, cols = s._shape[nb], s._shape[nb + 1]
    bh, bw = s.blocksize()
    return batch, _prod(batch), rows, cols, bh, bw, tuple(s._shape[nb + 2:])


def _entries(s):
    """Flat per-entry coordinates on the block grid (int64 ``b``, ``r``, ``c``) and the values
    ``(B * nnz, bh, bw) + dense`` (blocks of 1 x 1 for CSR/CSC); differentiable in the values."""
    f = _f()
    batch, nbt, rows, cols, bh, bw, dense = _grid(s)
    ncomp = (rows // bh) if s._row else (cols // bw)
    ci = s._cp_ci.reshape(nbt, ncomp + 1).to(D.int64)
    counts = (ci[:, 1:] - ci[:, :-1]).reshape(-1)
    slot = f.repeat_interleave(f.arange(nbt * ncomp, device=ci.device), counts)
    comp = slot % ncomp if ncomp else slot
    b = f.div(slot, builtins.max(ncomp, 1), rounding_mode="floor")
    plain = s._cp_pi.reshape(-1).to(D.int64)
    r, c = (comp, plain) if s._row else (plain, comp)
    v = s._cp_v.reshape((nbt * s._nnz(), bh, bw) + dense)
    return b, r, c, v


def _scatter_dense(s, b, r, c, v):
    """The dense tensor of shape ``s.shape`` holding the entries (duplicates add up)."""
    f = _f()
    batch, nbt, rows, cols, bh, bw, dense = _grid(s)
    mb, nbk = rows // bh, cols // bw
    lin = (b * mb + r) * nbk + c
    if v._dtype is D.bool:
        z = f.zeros((nbt * mb * nbk, bh, bw) + dense, dtype=D.int64, device=v.device)
        z = z.index_put_((lin,), v.to(D.int64), accumulate=True) != 0
    else:
        z = f.zeros((nbt * mb * nbk, bh, bw) + dense, dtype=v._dtype, device=v.device)
        z = z.index_put_((lin,), v, accumulate=True)
    nd = len(dense)
    z = z.reshape((nbt, mb, nbk, bh, bw) + dense)
    z = z.permute((0, 1, 3, 2, 4) + tuple(range(5, 5 + nd)))
    return z.reshape(batch + (rows, cols) + dense)


def _blocks_of_dense(x, nbatch, bh, bw, dense_dim):
    """Dense ``x`` (batch + (rows, cols) + dense) as ``(B, MB, NB, bh, bw) + dense`` blocks."""
    shape = tuple(x.shape)
    batch = shape[:nbatch]
    rows, cols = shape[nbatch], shape[nbatch + 1]
    dense = shape[nbatch + 2:]
    y = x.reshape((_prod(batch), rows // bh, bh, cols // bw, bw) + dense)
    return y.permute((0, 1, 3, 2, 4) + tuple(range(5, 5 + len(dense))))


def _build(cls, shape, nbatch, bh, bw, b, r, c, v, op, index_dtype=D.int64, presorted=False):
    """A compressed tensor of ``cls`` from flat entries on the block grid (unique positions);
    sorts them into the layout's order. ``v``: ``(n, bh, bw) + dense``."""
    f = _f()
    batch = tuple(shape[:nbatch])
    nbt = _prod(batch)
    rows, cols = shape[nbatch], shape[nbatch + 1]
    mb, nbk = rows // bh, cols // bw
    comp, plain = (r, c) if cls._row else (c, r)
    ncomp, nplain = (mb, nbk) if cls._row else (nbk, mb)
    # one batch (b all zero, or None): the slot is the compressed index itself
    slot = comp if nbt == 1 or b is None else b * ncomp + comp
    if not presorted and slot._shape[0] > 1:
        perm = f.argsort(slot * nplain + plain, stable=True)
        slot, plain, v = slot[perm], plain[perm], v[perm]
    n_total = slot._shape[0]
    nnz = n_total // nbt if nbt else 0
    if slot.device.type == "cpu":
        # the offsets in NumPy: one bincount and one cumsum over a buffer that already holds
        # the leading zeros (fiamma's bincount checks and reduces more on the way)
        counts = _np.bincount(slot.numpy(), minlength=nbt * ncomp).reshape(nbt, ncomp)
        per_batch = counts.sum(1) if nbt > 1 else None
        bad = nbt > 1 and n_total and bool((per_batch != nnz).any())
        ci_np = _np.zeros((nbt, ncomp + 1), _np.int64)
        _np.cumsum(counts, axis=1, out=ci_np[:, 1:])
        ci = f.from_numpy(ci_np)
    else:
        counts = f.bincount(slot, minlength=nbt * ncomp).reshape(nbt, ncomp)
        per_batch = counts.sum(1)
        bad = nbt > 1 and n_total and not builtins.bool((per_batch == nnz).all())
        ci = f.cat([f.zeros((nbt, 1), dtype=D.int64, device=counts.device), counts.cumsum(1)],
                   1)
    if bad:
        raise RuntimeError(f"{op}: Expect the same number of specified elements per batch, "
                           f"got {per_batch.tolist()}")
    ci = ci.reshape(batch + (ncomp + 1,)).to(index_dtype)
    pi = plain.reshape(batch + (nnz,)).to(index_dtype)
    dense = tuple(v._shape[3:])
    if cls._blocked:
        vals = v.reshape(batch + (nnz, bh, bw) + dense)
    else:
        vals = v.reshape(batch + (nnz,) + dense)
    return _make(cls, ci, pi, vals, shape)


def _check_blocksize(op, layout, blocksize, rows, cols):
    if layout in (sparse_bsr, sparse_bsc):
        if blocksize is None:
            raise RuntimeError(f"{op}: blocksize is required for the {layout.name} layout")
        bs = _pair(blocksize, op)
        if bs[0] <= 0 or bs[1] <= 0:
            raise RuntimeError(f"{op}: blocksize must be positive, got {bs}")
        if rows % bs[0] or cols % bs[1]:
            raise RuntimeError(f"{op}: tensor sparse size ({rows},{cols}) must be divisible by "
                               f"given blocksize ({bs[0]},{bs[1]})")
        return bs
    if blocksize is not None and _pair(blocksize, op) != (1, 1):
        raise RuntimeError(f"{op}: blocksize is only for the sparse_bsr and sparse_bsc layouts, "
                           f"got blocksize={blocksize!r} for {layout.name}")
    return 1, 1


def _pair(bs, op):
    if isinstance(bs, int):
        return bs, bs
    try:
        t = tuple(operator.index(x) for x in bs)
    except TypeError:
        raise TypeError(f"{op}: blocksize must be an int or a pair of ints, got {bs!r}") \
            from None
    if len(t) != 2:
        raise RuntimeError(f"{op}: blocksize needs to be a tuple of size 2, but got {len(t)}")
    return t


def dense_to_compressed(x, layout, blocksize=None, dense_dim=None, op="to_sparse_csr"):
    """Dense ``x`` as a compressed tensor of ``layout`` holding its nonzero elements (blocks);
    leading dims beyond ``2 + dense_dim`` are batch dims (each batch must hold as many)."""
    f = _f()
    if layout not in COMPRESSED:
        raise RuntimeError(f"{op}: expected a sparse compressed layout, got {layout!r}")
    nd = len(x._shape)
    dd = 0 if dense_dim is None else operator.index(dense_dim)
    if dd < 0 or nd - dd < 2:
        raise RuntimeError(f"{op}: expected {layout.name} tensor to have at least 2 sparse "
                           f"dims: ndim {nd} with dense_dim {dd} gives {nd - dd}")
    nbatch = nd - dd - 2
    rows, cols = x._shape[nbatch], x._shape[nbatch + 1]
    bh, bw = _check_blocksize(op, layout, blocksize, rows, cols)
    blocks = _blocks_of_dense(x, nbatch, bh, bw, dd)  # (B, MB, NB, bh, bw) + dense
    nzb = (blocks != 0)
    if bh * bw > 1 or dd:
        nzb = nzb.reshape(tuple(nzb.shape[:3]) + (-1,)).any(3)
    cls = _CLASS[layout]
    if not cls._row:
        nzb = nzb.transpose(1, 2)
    idx = f.nonzero(nzb)  # row-major: sorted by (batch, compressed, plain)
    b, comp, plain = idx[:, 0], idx[:, 1], idx[:, 2]
    r, c = (comp, plain) if cls._row else (plain, comp)
    v = blocks[b, r, c]
    return _build(cls, tuple(x._shape), nbatch, bh, bw, b, r, c, v, op, presorted=True)


def _to_coo(s):
    """The COO tensor of a compressed one (elements of blocks become separate entries)."""
    f = _f()
    b, r, c, v = _entries(s)
    batch, nbt, rows, cols, bh, bw, dense = _grid(s)
    n = v._shape[0]
    if bh * bw > 1:
        ii = f.arange(bh, device=r.device).reshape(1, bh, 1)
        jj = f.arange(bw, device=r.device).reshape(1, 1, bw)
        r = (r.reshape(n, 1, 1) * bh + ii).expand(n, bh, bw).reshape(-1)
        c = (c.reshape(n, 1, 1) * bw + jj).expand(n, bh, bw).reshape(-1)
        b = b.reshape(n, 1, 1).expand(n, bh, bw).reshape(-1)
    v = v.reshape((-1,) + dense)
    coords = []
    if batch:
        rest = b
        bidx = []
        for sz in reversed(batch):
            bidx.append(rest % sz)
            rest = f.div(rest, sz, rounding_mode="floor")
        coords.extend(bidx[::-1])
    coords.extend([r, c])
    i = f.stack(coords)
    out = _coo()._make(i, v, s._shape, False)
    # a row layout without blocks lists its entries by (batch, row, col) when each row's
    # columns are sorted and distinct (always, unless built from such parts by hand): then
    # they are already coalesced, which one comparison pass confirms
    if s._row and bh * bw == 1 and i._shape[1] > 1:
        lin = _coo()._linear(i, tuple(s._shape[:i._shape[0]]))
        if builtins.bool((lin[1:] > lin[:-1]).all()):
            out._sp_c = True
    return out.coalesce()


def coo_to_compressed(s, layout, blocksize=None, dense_dim=None, op="to_sparse_csr"):
    """A COO tensor as a compressed one (its coalesced entries; without blocks, directly)."""
    if layout not in COMPRESSED:
        raise RuntimeError(f"{op}: expected a sparse compressed layout, got {layout!r}")
    sd = s.sparse_dim()
    if dense_dim is not None and dense_dim != s.dense_dim():
        raise RuntimeError(f"{op}: conversion from sparse COO with dense_dim {s.dense_dim()} to "
                           f"{layout.name} with dense_dim {dense_dim} is not supported")
    if sd < 2:
        raise RuntimeError(f"{op}: expected a sparse COO tensor with at least 2 sparse dims, "
                           f"got sparse_dim {sd}")
    if layout in (sparse_bsr, sparse_bsc):
        return dense_to_compressed(s.to_dense(), layout, blocksize, s.dense_dim(), op)
    _check_blocksize(op, layout, blocksize, 1, 1)
    c = s.coalesce()
    i, v = c._sp_i, c._sp_v
    nbatch = sd - 2
    batch = tuple(s._shape[:nbatch])
    b = None  # one batch
    if nbatch:
        b = i[0]
        for d in range(1, nbatch):
            b = b * batch[d] + i[d]
    v = v.reshape((v._shape[0], 1, 1) + tuple(v._shape[1:]))
    cls = _CLASS[layout]
    return _build(cls, tuple(s._shape), nbatch, 1, 1, b, i[nbatch], i[nbatch + 1], v, op,
                  presorted=cls._row)


def _convert(s, layout, blocksize, dense_dim, op):
    """A compressed tensor in another compressed layout (or the same one)."""
    if layout not in COMPRESSED:
        raise RuntimeError(f"{op}: expected a sparse compressed layout, got {layout!r}")
    if dense_dim is not None and dense_dim != s.dense_dim():
        raise RuntimeError(f"{op}: conversion of a {s.layout.name} tensor with dense_dim "
                           f"{s.dense_dim()} to dense_dim {dense_dim} is not supported")
    nb = s._nbatch()
    rows, cols = s._shape[nb], s._shape[nb + 1]
    bs = _check_blocksize(op, layout, blocksize, rows, cols)
    if layout is s.layout and bs == s.blocksize():
        return s
    if s._blocked or layout in (sparse_bsr, sparse_bsc):
        if s._blocked and bs == s.blocksize():  # BSR <-> BSC: re-order the same blocks
            b, r, c, v = _entries(s)
            return _build(_CLASS[layout], s._shape, nb, bs[0], bs[1], b, r, c, v, op,
                          index_dtype=s._cp_ci._dtype)
        return dense_to_compressed(s.to_dense(), layout, bs, s.dense_dim(), op)
    b, r, c, v = _entries(s)
    return _build(_CLASS[layout], s._shape, nb, 1, 1, b, r, c, v, op,
                  index_dtype=s._cp_ci._dtype)


# ---- construction ---------------------------------------------------------------------------

def _as_tensor(x, op, name, dtype=None, device=None):
    f = _f()
    if isinstance(x, SparseCompressed) or _is_coo(x):
        raise TypeError(f"{op}: {name} must be a dense tensor, got layout {x.layout!r}")
    if isinstance(x, Tensor):
        return x if device is None else x.to(device)
    return f.tensor(x, dtype=dtype, device=device)


def _fail(op, cond, detail):
    raise RuntimeError(f"{op}: `{cond}` is not satisfied ({detail}).")


def _validate(op, layout, ci, pi, v, shape, check_order):
    """Check the structure (always) and the ordering (check_order) of compressed parts."""
    f = _f()
    cname, pname = _INDEX_NAMES[layout in (sparse_csr, sparse_bsr)]
    row = layout in (sparse_csr, sparse_bsr)
    nb = len(ci._shape) - 1
    nnz = pi._shape[-1]
    rows, cols = shape[nb], shape[nb + 1]
    if layout in (sparse_bsr, sparse_bsc):
        bh, bw = v._shape[nb + 1], v._shape[nb + 2]
        if bh <= 0 or bw <= 0 or rows % bh or cols % bw:
            raise RuntimeError(f"{op}: the sparse size ({rows}, {cols}) must be divisible by "
                               f"the blocksize ({bh}, {bw}) of values")
    else:
        bh = bw = 1
    ncomp, nplain = (rows // bh, cols // bw) if row else (cols // bw, rows // bh)
    if ci._shape[-1] != ncomp + 1:
        what = "rows" if row else "columns"
        raise RuntimeError(f"{op}: {cname}.shape[-1] must be equal to the number of {what} + 1 "
                           f"(={ncomp + 1}), but got {ci._shape[-1]}")
    nbt = _prod(ci._shape[:nb])
    c64 = ci.reshape(nbt, ncomp + 1).to(D.int64)
    p64 = pi.reshape(nbt, nnz).to(D.int64)
    if c64._shape[0] and builtins.bool((c64[:, 0] != 0).any()):
        _fail(op, f"{cname}[..., 0] == 0", f"got {c64[:, 0].tolist()}")
    if c64._shape[0] and builtins.bool((c64[:, -1] != nnz).any()):
        _fail(op, f"{cname}[..., -1] == nnz", f"nnz {nnz}, got {c64[:, -1].tolist()}")
    if ncomp:
        dif = c64[:, 1:] - c64[:, :-1]
        if builtins.bool((dif < 0).any()):
            bad = f.nonzero(dif < 0)[0].tolist()
            _fail(op, f"0 <= {cname}[..., i] - {cname}[..., i - 1] <= {nplain}",
                  f"{cname} decreases at position {bad[-1] + 1}")
        if builtins.bool((dif > nplain).any()):
            bad = f.nonzero(dif > nplain)[0].tolist()
            _fail(op, f"0 <= {cname}[..., i] - {cname}[..., i - 1] <= {nplain}",
                  f"slice {bad[-1]} holds {dif[bad[0], bad[1]].item()} entries")
    if nnz and p64._shape[0]:
        lo, hi = p64.amin().item(), p64.amax().item()
        if lo < 0 or hi >= nplain:
            what = "ncols" if row else "nrows"
            _fail(op, f"0 <= {pname} < {what}", f"{what} {nplain}, got an index "
                  f"{lo if lo < 0 else hi}")
    if check_order and nnz and ncomp:
        # within each compressed slice: strictly increasing plain indices
        counts = (c64[:, 1:] - c64[:, :-1]).reshape(-1)
        slot = f.repeat_interleave(f.arange(counts._shape[0], device=ci.device), counts)
        key = slot * (nplain + 1) + p64.reshape(-1)
        if key._shape[0] > 1 and not builtins.bool((key[1:] > key[:-1]).all()):
            _fail(op, f"{pname}[..., {cname}[..., i - 1]:{cname}[..., i]] for all i = 1, ..., "
                  f"n are sorted and distinct along the last dimension values",
                  "a slice holds unsorted or repeated indices")


def sparse_compressed_tensor(compressed_indices, plain_indices, values, size=None, *,
                             dtype=None, layout=None, device=None, pin_memory=False,
                             requires_grad=False, check_invariants=None):
    """A sparse compressed tensor of ``layout`` (``fiamma.sparse_csr``, ``sparse_csc``,
    ``sparse_bsr`` or ``sparse_bsc``), as ``torch.sparse_compressed_tensor``.

    compressed_indices: ``batch + (ncompressed + 1,)`` offsets; plain_indices:
    ``batch + (nnz,)``; values: ``batch + (nnz,) + block + dense``. Without ``size`` the sparse
    dims are inferred (compressed: from the offsets; plain: the largest index + 1, times the
    block). The structure is always checked; ``check_invariants=True`` also requires the plain
    indices of each slice to be sorted and distinct.

    >>> import fiamma
    >>> s = fiamma.sparse_compressed_tensor([0, 1, 2], [1, 0], [5.0, 6.0],
    ...                                     layout=fiamma.sparse_csc)
    >>> s.to_dense().tolist()
    [[0.0, 6.0], [5.0, 0.0]]
    """
    op = "sparse_compressed_tensor"
    if layout not in COMPRESSED:
        raise RuntimeError(f"{op} expected sparse compressed tensor layout but got {layout}")
    return _construct(op, layout, compressed_indices, plain_indices, values, size, dtype,
                      device, requires_grad, check_invariants)


def _construct(op, layout, ci, pi, values, size, dtype, device, requires_grad,
               check_invariants):
    v = _as_tensor(values, op, "values", dtype=dtype, device=device)
    if dtype is not None:
        v = v.to(D.to_dtype(dtype, op))
    if device is not None:
        v = v.to(device)
    cname, pname = _INDEX_NAMES[layout in (sparse_csr, sparse_bsr)]
    ci = _as_tensor(ci, op, cname, device=v.device)
    pi = _as_tensor(pi, op, pname, device=v.device)
    for t, n in ((ci, cname), (pi, pname)):
        if t._dtype not in (D.int32, D.int64):
            raise RuntimeError(f"{op}: {n} must be an int32 or int64 tensor, got {t._dtype}")
    if ci._dtype is not pi._dtype:
        raise RuntimeError(f"{op}: {cname} and {pname} must have the same dtype, got "
                           f"{ci._dtype} and {pi._dtype}")
    ci, pi = ci.detach(), pi.detach()
    if len(ci._shape) < 1 or len(pi._shape) < 1:
        raise RuntimeError(f"{op}: {cname} and {pname} must have at least 1 dim, got shapes "
                           f"{tuple(ci._shape)} and {tuple(pi._shape)}")
    nb = len(ci._shape) - 1
    if len(pi._shape) - 1 != nb or tuple(pi._shape[:nb]) != tuple(ci._shape[:nb]):
        raise RuntimeError(f"{op}: batch shapes of {cname} {tuple(ci._shape)} and {pname} "
                           f"{tuple(pi._shape)} must match (all dims but the last)")
    nnz = pi._shape[-1]
    blocked = layout in (sparse_bsr, sparse_bsc)
    need = nb + 1 + (2 if blocked else 0)
    if len(v._shape) < need or tuple(v._shape[:nb + 1]) != tuple(pi._shape):
        raise RuntimeError(f"{op}: values must have shape batch + (nnz,)"
                           f"{' + (blocksize)' if blocked else ''} + dense, with batch + (nnz,) "
                           f"= {tuple(pi._shape)}, but got values of shape {tuple(v._shape)}")
    bh, bw = (v._shape[nb + 1], v._shape[nb + 2]) if blocked else (1, 1)
    dense = tuple(v._shape[need:])
    row = layout in (sparse_csr, sparse_bsr)
    if size is None:
        ncomp = ci._shape[-1] - 1
        if ncomp < 0:
            raise RuntimeError(f"{op}: {cname} must hold at least one offset")
        nplain = (pi.amax().item() + 1) if nnz and pi._numel else 0
        nplain = builtins.max(nplain, 0)
        rows, cols = ((ncomp * bh, nplain * bw) if row else (nplain * bh, ncomp * bw))
        shape = tuple(ci._shape[:nb]) + (rows, cols) + dense
    else:
        if isinstance(size, int):
            size = (size,)
        try:
            shape = tuple(operator.index(s) for s in size)
        except TypeError:
            raise TypeError(f"{op}: size must be a sequence of ints, got {size!r}") from None
        if any(s < 0 for s in shape):
            raise RuntimeError(f"{op}: negative size in {shape}")
        if len(shape) != nb + 2 + len(dense):
            raise RuntimeError(f"{op}: size {shape} must have batch dims ({nb}) + 2 sparse dims "
                               f"+ dense dims ({len(dense)}) = {nb + 2 + len(dense)} dims, got "
                               f"{len(shape)}")
        if tuple(shape[:nb]) != tuple(ci._shape[:nb]):
            raise RuntimeError(f"{op}: batch dims of size {shape[:nb]} must match those of "
                               f"{cname} {tuple(ci._shape[:nb])}")
        if tuple(shape[nb + 2:]) != dense:
            raise RuntimeError(f"{op}: dense dims of size {shape[nb + 2:]} must match the "
                               f"trailing dims of values {dense}")
    if check_invariants is None:
        check_invariants = _CHECK[0]
    _validate(op, layout, ci, pi, v, shape, builtins.bool(check_invariants))
    s = _make(_CLASS[layout], ci, pi, v, shape)
    if requires_grad:
        s.requires_grad_(True)
    elif v.requires_grad:
        s._cp_gf = SparseCompressedTensorBackward0(v)
    return s


class SparseCompressedTensorBackward0:
    """The grad_fn shown for a compressed tensor a constructor built from values that require
    grad (PyTorch's node of that name): its one edge leads to the values' node (their
    AccumulateGrad for a leaf). Gradients flow through the values themselves; this node is
    what ``grad_fn``, ``name()``, ``next_functions`` and the repr show."""

    __slots__ = ("_v",)

    def __init__(self, values):
        self._v = values

    def name(self):
        return "SparseCompressedTensorBackward0"

    @property
    def next_functions(self):
        v = self._v
        if v.grad_fn is not None:
            return ((v.grad_fn, 0),)
        with _f().enable_grad():  # a leaf's AccumulateGrad: the one edge of a view of it
            return v.view_as(v).grad_fn.next_functions[:1]

    def __repr__(self):
        return f"<SparseCompressedTensorBackward0 object at {hex(id(self))}>"


def _constructor(layout, name):
    def ctor(compressed_indices, plain_indices, values, size=None, *, dtype=None, device=None,
             pin_memory=False, requires_grad=False, check_invariants=None):
        return _construct(name, layout, compressed_indices, plain_indices, values, size, dtype,
                          device, requires_grad, check_invariants)

    ctor.__name__ = ctor.__qualname__ = name
    return ctor


sparse_csr_tensor = _constructor(sparse_csr, "sparse_csr_tensor")
sparse_csr_tensor.__doc__ = """A sparse CSR tensor (as ``torch.sparse_csr_tensor``):
``crow_indices`` (row offsets), ``col_indices``, ``values``; see ``sparse_compressed_tensor``.

>>> import fiamma
>>> s = fiamma.sparse_csr_tensor([0, 2, 3], [0, 2, 1], [1.0, 2.0, 3.0])
>>> s.shape, s.to_dense().tolist()
(fiamma.Size([2, 3]), [[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]])
"""
sparse_csc_tensor = _constructor(sparse_csc, "sparse_csc_tensor")
sparse_csc_tensor.__doc__ = """A sparse CSC tensor (``ccol_indices``, ``row_indices``,
``values``); see ``sparse_compressed_tensor``."""
sparse_bsr_tensor = _constructor(sparse_bsr, "sparse_bsr_tensor")
sparse_bsr_tensor.__doc__ = """A sparse BSR tensor (``crow_indices`` and ``col_indices`` of
blocks, ``values`` of shape ``(nnz, bh, bw) + dense``); see ``sparse_compressed_tensor``."""
sparse_bsc_tensor = _constructor(sparse_bsc, "sparse_bsc_tensor")
sparse_bsc_tensor.__doc__ = """A sparse BSC tensor (``ccol_indices`` and ``row_indices`` of
blocks, ``values`` of shape ``(nnz, bh, bw) + dense``); see ``sparse_compressed_tensor``."""


def _copy_fn(name, attr):
    def fn(input):
        if not isinstance(input, SparseCompressed):
            raise RuntimeError(f"{name}: expected a sparse compressed tensor, got layout "
                               f"{getattr(input, 'layout', type(input).__name__)}")
        return getattr(input, attr)().clone()

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"A copy of ``input.{attr}()`` (``torch.{name}``)."
    return fn


crow_indices_copy = _copy_fn("crow_indices_copy", "crow_indices")
col_indices_copy = _copy_fn("col_indices_copy", "col_indices")
ccol_indices_copy = _copy_fn("ccol_indices_copy", "ccol_indices")
row_indices_copy = _copy_fn("row_indices_copy", "row_indices")


# ---- printing -------------------------------------------------------------------------------

def _body(t, col):
    """PyTorch's ``_tensor_str(t, col)``: the elements of dense ``t`` laid out from column
    ``col`` (no dtype), with ``, size=...`` when it is empty."""
    from fiamma import _printing as P

    opts = P.get_printoptions()
    t = t.detach()
    if t.numel() == 0:
        return "[], size=" + str(tuple(t.shape))
    a = P._host_array(t)
    shown = P._edges(a, opts["edgeitems"]) if t.numel() > opts["threshold"] else a
    dt = t._dtype
    if dt is D.bfloat16:
        shown = P._bf16_bits_to_f32(shown)
    fmt = P._ComplexFormatter(shown, opts["precision"], opts["sci_mode"]) if dt._kind == 3 \
        else P._Formatter(shown, dt, opts["precision"], opts["sci_mode"])
    if dt._kind == 0:
        shown = shown.astype(bool)
    return P._render(shown, a.shape, col, fmt, opts)


def _repr(s):
    """PyTorch's repr of a compressed tensor: the two index tensors and the values, each laid
    out under its opening bracket, then size, nnz, dtype, layout (each suffix on a new line
    only when it does not fit, as PyTorch's rule)."""
    from fiamma._printing import _grad_fn_name, get_printoptions

    indent = len("tensor(")
    cname, pname = _INDEX_NAMES[s._row]
    parts = []
    for name, t in ((cname, s._cp_ci), (pname, s._cp_pi), ("values", s._cp_v)):
        prefix = name + "=tensor("
        parts.append(prefix + _body(t, indent + len(prefix)) + ")")
    text = "tensor(" + (",\n" + " " * indent).join(parts)
    suffixes = [f"size={tuple(s.shape)}", f"nnz={s._nnz()}"]
    dev = s.device
    if dev.type != "cpu":
        suffixes.append(f"device='{dev.type}:{dev.index or 0}'" if dev.type == "cuda"
                        else f"device='{dev}'")
    dt = s.dtype
    if dt not in (D.get_default_dtype(), D.int64, D.bool, D.default_complex_dtype()):
        suffixes.append(f"dtype={dt}")
    suffixes.append(f"layout={s.layout!r}")
    if s.grad_fn is not None:
        suffixes.append(f"grad_fn=<{_grad_fn_name(s.grad_fn)}>")
    elif s.requires_grad:
        suffixes.append("requires_grad=True")
    width = get_printoptions()["linewidth"]
    last = len(text) - text.rfind("\n") + 1
    for suf in suffixes:
        if last + len(suf) + 2 > width:
            text += ",\n" + " " * indent + suf
            last = indent + len(suf)
        else:
            text += ", " + suf
            last += len(suf) + 2
    return text + ")"


# ---- Tensor methods of dense tensors (attached by fiamma._methods) ----------------------------

def _dense_to_sparse_csr(self, dense_dim=None):
    """This dense tensor as sparse CSR (its nonzeros; leading dims beyond 2 + dense_dim are
    batch dims). Differentiable w.r.t. the kept values.

    >>> import fiamma
    >>> s = fiamma.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse_csr()
    >>> s.layout, s.crow_indices().tolist()
    (fiamma.sparse_csr, [0, 1, 2])
    """
    return dense_to_compressed(self, sparse_csr, None, dense_dim, "to_sparse_csr")


def _dense_to_sparse_csc(self, dense_dim=None):
    """This dense tensor as sparse CSC (see ``to_sparse_csr``)."""
    return dense_to_compressed(self, sparse_csc, None, dense_dim, "to_sparse_csc")


def _dense_to_sparse_bsr(self, blocksize, dense_dim=None):
    """This dense tensor as sparse BSR with ``blocksize`` blocks (those holding a nonzero)."""
    return dense_to_compressed(self, sparse_bsr, blocksize, dense_dim, "to_sparse_bsr")


def _dense_to_sparse_bsc(self, blocksize, dense_dim=None):
    """This dense tensor as sparse BSC with ``blocksize`` blocks (those holding a nonzero)."""
    return dense_to_compressed(self, sparse_bsc, blocksize, dense_dim, "to_sparse_bsc")


def _dense_only(name, kind):
    def method(self, *args, **kwargs):
        raise RuntimeError(f"{name} expected sparse {kind} compressed tensor layout but got "
                           f"{'Strided' if self.layout is strided else self.layout.name}")

    method.__name__ = name
    return method


def _sspaddmm(self, mat1, mat2, *, beta=1, alpha=1):
    """``beta * self + alpha * (mat1 @ mat2)`` for sparse COO ``self`` and ``mat1`` (as
    ``torch.sspaddmm``)."""
    return sys.modules["fiamma._sparse_compressed_ops"].sspaddmm(self, mat1, mat2, beta=beta,
                                                                alpha=alpha)


METHODS = {
    "to_sparse_csr": _dense_to_sparse_csr, "to_sparse_csc": _dense_to_sparse_csc,
    "to_sparse_bsr": _dense_to_sparse_bsr, "to_sparse_bsc": _dense_to_sparse_bsc,
    "crow_indices": _dense_only("crow_indices", "row"),
    "col_indices": _dense_only("col_indices", "row"),
    "ccol_indices": _dense_only("ccol_indices", "column"),
    "row_indices": _dense_only("row_indices", "column"),
    "sspaddmm": _sspaddmm,
}
