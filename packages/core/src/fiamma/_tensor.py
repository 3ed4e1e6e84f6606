"""The Tensor class: storage + dtype + shape/strides/offset, views, conversion, basic methods.

Ops live in fiamma._ops.* and elsewhere; fiamma._methods attaches them as Tensor methods, and
this file imports none of them. It keeps what defines a tensor: its layout, views over its
storage, copies, and conversions.
"""

import builtins
import copy
import numbers
import operator

from fiamma import (
    _device_copy,
    _dtype as D,
    _grad_hook as G,
    _memory_format,
    _tensor_factory,
    _torch_function as _TF,
)
from fiamma._autograd_api import ops
from fiamma._backend import _BACKENDS, check, cpu as _cpu
from fiamma._layout import strided as _STRIDED
from fiamma._limits import (
    MAX_SIZE as _MAX_SIZE,
    allocation_error as _allocation_error,
    check_shape as _check_shape,
)
from fiamma._storage import (
    CPU,
    FAST_DEVICE as _FAST,
    Storage,
    device,
    new_cpu_storage as _new_cpu_storage,
)

__all__ = ["Tensor", "empty_strided_like", "new_empty", "contiguous_strides"]

_new = object.__new__
_index = operator.index


def contiguous_strides(shape):
    """Row-major strides (in elements) for ``shape``."""
    strides = []
    acc = 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s if s > 0 else 1
    return tuple(reversed(strides))


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


class Tensor:
    """An n-dimensional array on a device with PyTorch's API.

    >>> import fiamma
    >>> x = fiamma.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> (x + 1).sum().item()
    14.0
    """

    __slots__ = ("_storage", "_dtype", "_shape", "_stride", "_offset", "_ptr", "_numel",
                 "_contig", "_cpu_contig", "requires_grad", "_grad", "grad_fn", "_ag", "_base",
                 "__dict__", "__weakref__")
    # __dict__: arbitrary attributes as PyTorch allows (``t.foo = 1``). CPython creates the
    # dict on first use, so a tensor that never gets one pays 8 bytes and no time.

    # torch.Tensor(*sizes) / torch.Tensor(data): __new__ is _creation's (attached by _methods)
    def __init__(self, *args, **kwargs):
        pass

    # PyTorch's __torch_function__ protocol (fiamma._torch_function): the default handler
    # keeps a subclass's type on results; a dispatching subclass gets dispatching methods
    __torch_function__ = classmethod(_TF.default_torch_function)

    # PyTorch's __torch_dispatch__ (fiamma._python_dispatch): a subclass defining it sees the
    # ATen ops below autograd; Tensor's own is the disabled one
    __torch_dispatch__ = _TF.disabled_torch_dispatch_impl

    @staticmethod
    def _make_wrapper_subclass(cls, size, strides=None, storage_offset=None, **kwargs):
        """An instance of ``cls`` with the given geometry, ``dtype``, ``device`` and
        ``requires_grad`` and no data of its own (PyTorch's wrapper subclasses: the data lives
        in tensors the instance holds; its ``__torch_dispatch__`` computes every op)."""
        return _TF._pd().make_wrapper(cls, size, strides, storage_offset, **kwargs)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _TF.init_subclass(cls)

    @staticmethod
    def _make_subclass(cls, data, require_grad=False, *args, **kwargs):
        """An instance of ``cls`` sharing ``data``'s storage, detached from its history, with
        ``requires_grad=require_grad`` (PyTorch's ``Tensor._make_subclass``, what
        Parameter-like classes build on)."""
        if not (isinstance(cls, type) and issubclass(cls, Tensor)):
            raise TypeError(f"_make_subclass: expected a subclass of fiamma.Tensor, got {cls!r}")
        if not isinstance(data, Tensor):
            raise TypeError(f"_make_subclass: data must be a Tensor, got {type(data).__name__}")
        t = data._as_subclass(cls)
        if require_grad:  # the plain method: a subclass's __torch_function__ does not see it
            G.autograd_module().requires_grad_(t, True)
        return t

    def _as_subclass(self, cls):
        """A tensor of class ``cls`` sharing this tensor's storage and layout."""
        t = _new(cls)
        _init(t, self._storage, self._dtype, self._shape, self._stride, self._offset,
              self._contig)
        return t

    # ---- layout -----------------------------------------------------------------------------
    @property
    def shape(self):
        return Size(self._shape)

    def size(self, dim=None):
        if dim is None:
            return Size(self._shape)
        return self._shape[self._wrap_dim(dim, "size")]

    @property
    def dtype(self):
        return self._dtype

    @property
    def device(self):
        return self._storage.device

    def to_device(self, device, /, *, stream=None):
        """This tensor on ``device`` (itself if already there): the array API's ``to``."""
        if stream is not None:
            raise ValueError("to_device: the stream argument is not supported")
        return self.to(device)

    @property
    def is_cuda(self):
        return self._storage.device.type == "cuda"

    @property
    def is_cpu(self):
        return self._storage.device.type == "cpu"

    is_sparse = False
    is_quantized = False
    is_meta = False
    # True on the subclasses of other layouts (sparse COO, nested): the few ops that route
    # them test this one class attribute, on the path they already take
    _layout_alt = False
    is_nested = False  # a class attribute (not a property): fiamma-nn's ops test it cheaply

    def is_complex(self):
        """Whether the dtype is complex (complex64 or complex128)."""
        return self._dtype._kind == 3

    layout = _STRIDED

    @property
    def ndim(self):
        return len(self._shape)

    def dim(self):
        return len(self._shape)

    ndimension = dim

    def numel(self):
        return self._numel

    nelement = numel

    def stride(self, dim=None):
        if dim is None:
            return self._stride
        return self._stride[self._wrap_dim(dim, "stride")]

    def storage_offset(self):
        return self._offset

    def data_ptr(self):
        if self._storage.device.type == "meta":
            return 0  # no memory (the storage's address is a placeholder)
        return self._ptr

    def element_size(self):
        return self._dtype.itemsize

    @property
    def itemsize(self):
        return self._dtype.itemsize

    @property
    def nbytes(self):
        return self._numel * self._dtype.itemsize

    def untyped_storage(self):
        return self._storage

    def is_shared(self):
        """True if this tensor's storage is in shared memory."""
        return self._storage.is_shared()

    def is_floating_point(self):
        return self._dtype._kind == 2

    def is_signed(self):
        return self._dtype.is_signed

    def is_contiguous(self, memory_format=None):
        if memory_format is None:
            return self._contig or self._numel == 0  # empty: contiguous, any strides
        return _memory_format.is_contiguous(self, _memory_format.check(memory_format,
                                                                       "is_contiguous"))

    @property
    def _version(self):
        return self._storage.version

    # True on a tensor made by ``.data``: writes through it do not count as in-place changes
    # (PyTorch gives ``.data`` a version counter of its own, so code that fills a buffer
    # through ``.data`` -- torchdiffeq's Runge-Kutta scratch -- keeps the graph's saved
    # tensors valid). Views taken from it count again (conservative: a spurious error at
    # worst, never a missed one on the tensor that autograd saved).
    _quiet_version = False

    def _bump(self):
        """Mark an in-place modification (shared by every view of the storage)."""
        if not self._quiet_version:
            self._storage.version += 1

    def _wrap_dim(self, dim, op):
        return wrap_dim(dim, len(self._shape), op)

    # ---- views ------------------------------------------------------------------------------
    def _view(self, shape, stride, offset=None, op="view", pt=None):
        t = _new(Tensor)
        _init(t, self._storage, self._dtype, tuple(shape), tuple(stride),
              self._offset if offset is None else offset, None)
        # the tensor whose memory this views (the root, as PyTorch's ._base; autograd follows
        # it for in-place ops on views)
        b = getattr(self, "_base", None)
        t._base = self if b is None else b
        if self.requires_grad:
            kw = {"shape": t._shape, "stride": t._stride, "offset": t._offset,
                  "in_stride": self._stride, "in_offset": self._offset}
            if pt is not None and G.state.tracer is None:  # (a tracer takes no extra keys)
                kw["_pt"] = pt  # which of PyTorch's overloads (its node name), see autograd
            G.record(op, t, (self,), kw)
        return t

    def _contig_view(self, shape):
        """A view of this contiguous tensor with another shape of as many elements: what
        view/reshape make, built directly (the hot path of x.view(n, -1) in a forward; its slot
        stores are written out: calling _init, which recomputes numel and ptr, cost ~20%)."""
        st = self._storage
        t = _new(Tensor)
        t._storage = st
        t._dtype = self._dtype
        t._shape = shape
        stride = _STRIDES.get(shape)
        t._stride = stride if stride is not None else cached_strides(shape)
        t._offset = self._offset
        t._ptr = self._ptr
        t._numel = self._numel
        t._contig = True
        t._cpu_contig = self._cpu_contig
        t.requires_grad = False
        t._grad = None
        t.grad_fn = None
        t._ag = None
        b = getattr(self, "_base", None)
        t._base = self if b is None else b
        if self.requires_grad:
            G.record(ops.view, t, (self,), {"shape": shape, "stride": t._stride,
                                          "offset": t._offset, "in_stride": self._stride,
                                          "in_offset": self._offset})
        return t

    def as_subclass(self, cls):
        """This tensor as an instance of the Tensor subclass ``cls``: same storage, shape and
        strides (no copy), attached to the same autograd graph (as torch.Tensor.as_subclass).
        What ``fiamma.nn.Parameter`` is built on."""
        if not (isinstance(cls, type) and issubclass(cls, Tensor)):
            raise TypeError(f"as_subclass: expected a subclass of fiamma.Tensor, got {cls!r}")
        t = _new(cls)
        _init(t, self._storage, self._dtype, self._shape, self._stride, self._offset,
              self._contig)
        if self.requires_grad:
            G.record(ops.view, t, (self,), {"shape": t._shape, "stride": t._stride,
                                          "offset": t._offset, "in_stride": self._stride,
                                          "in_offset": self._offset})
        return t

    def as_strided(self, size, stride, storage_offset=None):
        size = tuple(_index(s) for s in size)
        stride = tuple(_index(s) for s in stride)
        off = self._offset if storage_offset is None else _index(storage_offset)
        if len(size) != len(stride):
            raise ValueError(f"as_strided: got {len(size)} sizes but {len(stride)} strides")
        if any(s < 0 for s in size) or any(s < 0 for s in stride) or off < 0:
            raise ValueError(
                f"as_strided: negative size, stride or offset: {size}, {stride}, {off}")
        _check_shape(size, "as_strided")
        if _prod(size):
            last = off + builtins.sum((n - 1) * st for n, st in zip(size, stride))
            cap = self._storage.nbytes // self._dtype.itemsize
            if last >= cap:
                raise RuntimeError(
                    f"as_strided: size {size} stride {stride} offset {off} needs storage of "
                    f"{last + 1} elements, but the storage holds {cap}")
        return self._view(size, stride, off, ops.as_strided)

    def view(self, *shape, size=None, dtype=None):
        if size is not None or dtype is not None:
            shape = _keyword_args(shape, size if dtype is None else dtype,
                                  "size" if dtype is None else "dtype", "view")
        if self._contig:
            plain = _plain_shape(shape, self._numel)
            if plain is not None:
                return self._contig_view(plain)
        if len(shape) == 1 and isinstance(shape[0], D.dtype):
            return self._view_dtype(shape[0])
        shape = _infer_shape(_shape_arg(shape), self._numel, "view")
        stride = _view_strides(self._shape, self._stride, shape)
        if stride is None:
            raise RuntimeError(
                f"view: size {list(shape)} is not compatible with input tensor's size "
                f"{list(self._shape)} and stride {list(self._stride)} (at least one dimension "
                "spans across two contiguous subspaces). Use .reshape(...) instead.")
        return self._view(shape, stride, op=ops.view)

    def _view_dtype(self, dt):
        old, new = self._dtype.itemsize, dt.itemsize
        shape, stride, off = self._shape, self._stride, self._offset
        if new != old:
            # PyTorch's rule: the last dimension is reinterpreted (it must be contiguous);
            # every other stride and the offset must stay whole in the new element size
            what = f"to view {self._dtype} as {dt} (different element sizes)"
            if not shape:
                raise RuntimeError(f"view(dtype): self.dim() cannot be 0 {what}")
            if stride[-1] != 1:
                raise RuntimeError(f"view(dtype): self.stride(-1) must be 1 {what}, but got "
                                   f"{stride[-1]}")
            if new < old:
                r = old // new
                shape = shape[:-1] + (shape[-1] * r,)
                stride = tuple(st * r for st in stride[:-1]) + (1,)
                off *= r
            else:
                r = new // old
                if shape[-1] % r:
                    raise RuntimeError(f"view(dtype): self.size(-1) must be divisible by {r} "
                                       f"{what}, but got {shape[-1]}")
                for d, st in enumerate(stride[:-1]):
                    if st % r:
                        raise RuntimeError(f"view(dtype): self.stride({d}) must be divisible "
                                           f"by {r} {what}, but got {st}")
                if off % r:
                    raise RuntimeError(f"view(dtype): self.storage_offset() must be divisible "
                                       f"by {r} {what}, but got {off}")
                shape = shape[:-1] + (shape[-1] // r,)
                stride = tuple(st // r for st in stride[:-1]) + (1,)
                off //= r
        t = _new(Tensor)
        _init(t, self._storage, dt, shape, stride, off, self._contig if new == old else None)
        return t

    def view_as(self, other):
        return self.view(other._shape)

    def reshape(self, *sizes, shape=None):
        shape = sizes if shape is None else _keyword_args(sizes, shape, "shape", "reshape")
        if self._contig:
            plain = _plain_shape(shape, self._numel)
            if plain is not None:
                return self._contig_view(plain)
        shape = _infer_shape(_shape_arg(shape), self._numel, "reshape")
        stride = _view_strides(self._shape, self._stride, shape)
        if stride is not None:
            return self._view(shape, stride, op=ops.view)
        return self.contiguous().view(shape)

    def reshape_as(self, other):
        return self.reshape(other._shape)

    def flatten(self, start_dim=0, end_dim=-1):
        nd = len(self._shape)
        if nd == 0:
            return self.reshape(1)
        s = wrap_dim(start_dim, nd, "flatten")
        e = wrap_dim(end_dim, nd, "flatten")
        if s > e:
            raise RuntimeError(
                f"flatten: start_dim {start_dim} cannot come after end_dim {end_dim}")
        if s == e:
            return self
        shape = self._shape[:s] + (_prod(self._shape[s:e + 1]),) + self._shape[e + 1:]
        return self.reshape(shape)

    def unflatten(self, dim, sizes):
        nd = len(self._shape)
        d = wrap_dim(dim, nd, "unflatten")
        sizes = _infer_shape(tuple(sizes), self._shape[d], "unflatten")
        return self.view(self._shape[:d] + sizes + self._shape[d + 1:])

    def permute(self, *ds, dims=None):
        dims = _shape_arg(ds if dims is None else _keyword_args(ds, dims, "dims", "permute"))
        nd = len(self._shape)
        if len(dims) != nd:
            raise RuntimeError(
                f"permute: number of dims don't match: expected {nd}, got {len(dims)}")
        dims = tuple(wrap_dim(d, nd, "permute") for d in dims)
        if len(set(dims)) != nd:
            raise RuntimeError(f"permute: repeated dim in {dims}")
        return self._view([self._shape[d] for d in dims], [self._stride[d] for d in dims],
                          op=ops.permute)

    def transpose(self, dim0, dim1):
        nd = len(self._shape)
        if nd == 0:
            wrap_dim(dim0, 0, "transpose")
            wrap_dim(dim1, 0, "transpose")
            return self._view((), (), op=ops.transpose)
        a = wrap_dim(dim0, nd, "transpose")
        b = wrap_dim(dim1, nd, "transpose")
        shape = list(self._shape)
        stride = list(self._stride)
        shape[a], shape[b] = shape[b], shape[a]
        stride[a], stride[b] = stride[b], stride[a]
        return self._view(shape, stride, op=ops.transpose)

    swapaxes = swapdims = transpose

    def t(self):
        if len(self._shape) > 2:
            raise RuntimeError(
                f"t: expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
        if len(self._shape) < 2:
            return self._view(self._shape, self._stride, op=ops.t)
        (s0, s1), (t0, t1) = self._shape, self._stride
        return self._view2((s1, s0), (t1, t0))

    def _view2(self, shape, stride):
        """A matrix's transpose (t(), mT, transpose(0, 1)): _view's work written out for two
        dims (shape and stride are the swapped tuples)."""
        t = _new(Tensor)
        st = self._storage
        dt = self._dtype
        t._storage = st
        t._dtype = dt
        t._shape = shape
        t._stride = stride
        off = t._offset = self._offset
        t._ptr = self._ptr
        t._numel = shape[0] * shape[1]
        # C-contiguous (size-1 dims aside), as _init decides it
        c = (shape[1] == 1 or stride[1] == 1) and (shape[0] == 1 or stride[0] == shape[1])
        t._contig = c
        t._cpu_contig = c and st.device is _FAST
        t.requires_grad = False
        t._grad = None
        t.grad_fn = None
        t._ag = None
        b = getattr(self, "_base", None)
        t._base = self if b is None else b
        if self.requires_grad:
            G.record(ops.transpose, t, (self,), {"shape": shape, "stride": stride,
                                                 "offset": off, "in_stride": self._stride,
                                                 "in_offset": off})
        return t

    @property
    def T(self):
        nd = len(self._shape)
        return self.permute(tuple(range(nd - 1, -1, -1))) if nd != 2 else self.transpose(0, 1)

    @property
    def mT(self):
        sh = self._shape
        if len(sh) == 2:
            st = self._stride
            return self._view2((sh[1], sh[0]), (st[1], st[0]))
        if len(sh) < 2:
            raise RuntimeError("mT: tensor must have at least 2 dimensions")
        return self.transpose(-2, -1)

    # the conjugate transposes: views for real tensors; complex ones are conjugated into a new
    # tensor (fiamma has no lazy conjugate bit)
    @property
    def H(self):
        return self.T if self._dtype._kind != 3 else self.T.conj()

    @property
    def mH(self):
        return self.mT if self._dtype._kind != 3 else self.mT.conj()

    def adjoint(self):
        return self.mT if self._dtype._kind != 3 else self.mT.conj()

    def squeeze(self, dim=None):
        nd = len(self._shape)
        if dim is None:
            dims = {i for i, s in enumerate(self._shape) if s == 1}
        else:
            ds = dim if isinstance(dim, (tuple, list)) else (dim,)
            dims = {wrap_dim(d, nd, "squeeze") for d in ds}
            dims = {d for d in dims if nd and self._shape[d] == 1}
        keep = [i for i in range(nd) if i not in dims]
        # PyTorch's overloads: squeeze() 0, squeeze(dim) 1, squeeze(dims) 2
        pt = 0 if dim is None else 2 if isinstance(dim, (tuple, list)) else 1
        return self._view([self._shape[i] for i in keep], [self._stride[i] for i in keep],
                          op=ops.squeeze, pt=pt)

    def unsqueeze(self, dim):
        nd = len(self._shape)
        d = wrap_dim(dim, nd + 1, "unsqueeze")
        shape = list(self._shape)
        stride = list(self._stride)
        st = stride[d] * shape[d] if d < nd else 1
        shape.insert(d, 1)
        stride.insert(d, st)
        return self._view(shape, stride, op=ops.unsqueeze)

    def expand(self, *sizes, size=None):
        sizes = _shape_arg(sizes if size is None else _keyword_args(sizes, size, "size",
                                                                    "expand"))
        nd = len(self._shape)
        if len(sizes) < nd:
            raise RuntimeError(
                f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal "
                f"to the number of dimensions in the tensor ({nd})")
        lead = len(sizes) - nd
        shape = []
        stride = []
        n = 1
        big = False  # a new size beyond int64: refused, as the C kernels could not take it
        for i, s in enumerate(sizes):
            s = _index(s)
            if i < lead:
                if s < 0:
                    raise RuntimeError(f"expand: -1 is not allowed in a leading, non-existing "
                                       f"dimension {i}")
                shape.append(s)
                stride.append(0)
                n *= s
                big = big or s > _MAX_SIZE
                continue
            cur = self._shape[i - lead]
            if s == -1:
                s = cur
            n *= s
            if cur == s:
                shape.append(s)
                stride.append(self._stride[i - lead])
            elif cur == 1 and s >= 0:
                shape.append(s)
                stride.append(0)
                big = big or s > _MAX_SIZE
            else:
                raise RuntimeError(
                    f"expand: the expanded size of the tensor ({s}) must match the existing size "
                    f"({cur}) at non-singleton dimension {i}. Target sizes: {list(sizes)}. "
                    f"Tensor sizes: {list(self._shape)}")
        if big or n > _MAX_SIZE:
            _check_shape(shape, "expand")
        return self._view(shape, stride, op=ops.expand)

    def expand_as(self, other):
        return self.expand(other._shape)

    def broadcast_to(self, shape):
        return self.expand(shape)

    def narrow(self, dim, start, length):
        nd = len(self._shape)
        if nd == 0:
            raise RuntimeError("narrow: cannot be applied to a 0-dim tensor")
        d = wrap_dim(dim, nd, "narrow")
        n = self._shape[d]
        start = _index(start)
        length = _index(length)
        if start < 0:
            start += n
        if start < 0 or start > n:
            raise IndexError(f"narrow: start ({start}) out of range for dimension {d} of size {n}")
        if length < 0 or start + length > n:
            raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds dimension "
                               f"size ({n})")
        shape = list(self._shape)
        shape[d] = length
        return self._view(shape, self._stride, self._offset + start * self._stride[d],
                          op=ops.narrow)

    def select(self, dim, index):
        nd = len(self._shape)
        if nd == 0:
            raise IndexError("select: cannot be applied to a 0-dim tensor")
        d = wrap_dim(dim, nd, "select")
        n = self._shape[d]
        i = _index(index)
        if i < -n or i >= n:
            raise IndexError(f"select: index {i} is out of bounds for dimension {d} with size {n}")
        if i < 0:
            i += n
        return self._view(self._shape[:d] + self._shape[d + 1:],
                          self._stride[:d] + self._stride[d + 1:],
                          self._offset + i * self._stride[d], op=ops.select)

    def unbind(self, dim=0):
        d = wrap_dim(dim, len(self._shape), "unbind")
        shape = self._shape[:d] + self._shape[d + 1:]
        stride = self._stride[:d] + self._stride[d + 1:]
        st, off = self._stride[d], self._offset
        return self._multi_view([(shape, stride, off + i * st) for i in range(self._shape[d])],
                                ops.unbind, {"dim": d}, ops.select)

    def _multi_view(self, geoms, op, kwargs, single_op):
        """Views of this tensor at ``geoms`` ((shape, stride, offset) each) recorded as ONE
        multi-output view node ``op`` (split, unbind: PyTorch's SplitBackward0/UnbindBackward0,
        whose backward joins the pieces' gradients in one pass; a node per piece would build a
        zero gradient of the whole input per piece). Under a tracer (export, jit) each piece is
        recorded as the single-view op ``single_op`` instead."""
        if not (self.requires_grad and G.state.enabled and G.state.tracer is None
                and len(geoms) > 1):
            return tuple(self._view(sh, sd, off, op=single_op) for sh, sd, off in geoms)
        b = getattr(self, "_base", None)
        base = self if b is None else b
        outs = []
        for sh, sd, off in geoms:
            t = _new(Tensor)
            _init(t, self._storage, self._dtype, tuple(sh), tuple(sd), off, None)
            t._base = base
            outs.append(t)
        outs = tuple(outs)
        kw = dict(kwargs)
        kw["in_stride"] = self._stride
        kw["in_offset"] = self._offset
        G.record(op, outs, (self,), kw)
        return outs

    def unfold(self, dimension, size, step):
        nd = len(self._shape)
        d = wrap_dim(dimension, max(nd, 1), "unfold")
        n = self._shape[d] if nd else 1
        if size < 0 or size > n:
            raise RuntimeError(f"unfold: size {size} is out of range for dimension {d} of size {n}")
        if step <= 0:
            raise RuntimeError(f"unfold: step must be positive, got {step}")
        st = self._stride[d] if nd else 1
        shape = list(self._shape)
        stride = list(self._stride)
        if nd:
            shape[d] = (n - size) // step + 1
            stride[d] = st * step
        shape.append(size)
        stride.append(st)
        return self._view(shape, stride, op=ops.unfold)

    # ---- copies and conversion ----------------------------------------------------------------
    def contiguous(self, memory_format=None):
        if memory_format is None or memory_format is _memory_format.contiguous_format:
            if self._contig or self._numel == 0:  # an empty tensor is contiguous (PyTorch)
                return self
            return self.clone(memory_format=_memory_format.contiguous_format)
        if _memory_format.check(memory_format, "contiguous") is _memory_format.preserve_format:
            raise RuntimeError("contiguous: preserve memory format is unsupported by the "
                               "contiguous operator")
        return _memory_format.to_format(self, memory_format, "contiguous")

    def clone(self, memory_format=None):
        if memory_format is not None and memory_format is not _memory_format.contiguous_format:
            fmt = _memory_format.check(memory_format, "clone")
            if fmt is _memory_format.preserve_format:
                fmt = _memory_format.preserved(self)
            if fmt is not _memory_format.contiguous_format:
                return _memory_format.to_format(self, fmt, "clone", copy=True)
        out = new_empty(self._shape, self._dtype, self._storage.device)
        if out._numel:
            rc = out._storage.backend.copy(out, self)
            if rc:
                check(rc, "clone")
        if self.requires_grad:
            G.record(ops.clone, out, (self,), {})
        return out

    def copy_(self, src, non_blocking=False):
        """Copy ``src`` (broadcast to this shape, cast to this dtype) into this tensor."""
        if not isinstance(src, Tensor):
            src = self.new_tensor(src)  # (fiamma._creation's, attached by fiamma._methods)
        if self.requires_grad:
            G.check_inplace(self, "copy_")
        if src._storage.device != self._storage.device:
            _device_copy.copy_across(self, src, non_blocking)
            return self
        if src._shape != self._shape:
            src = src.expand(self._shape)
        if not self._contig and self._numel > 1 and 0 in self._stride:
            for n, st in zip(self._shape, self._stride):
                if st == 0 and n > 1:  # an expanded view: which write would win is undefined
                    raise RuntimeError(
                        "copy_: unsupported operation: more than one element of the written-to "
                        "tensor refers to a single memory location. Please clone() the tensor "
                        "before performing the operation.")
        if src._storage is self._storage and src._numel and not (
                src._ptr == self._ptr and src._stride == self._stride) and _ranges_meet(
                self, src):
            # partially overlapping views: copy from a snapshot so no element is read after
            # it was overwritten (PyTorch raises here; a snapshot gives the intended answer)
            src = src.clone()
        _copy_into(self, src)
        self._bump()
        if self.requires_grad or src.requires_grad:
            G.record_inplace(ops.copy_, self, (self, src), {})
        return self

    def to(self, *args, **kwargs):
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``; ``copy=True``
        forces a copy. Returns self when nothing changes."""
        dt = kwargs.pop("dtype", None)
        dev = kwargs.pop("device", None)
        copy = kwargs.pop("copy", False)
        non_blocking = kwargs.pop("non_blocking", False)
        fmt = kwargs.pop("memory_format", None)
        if fmt is not None:
            _memory_format.check(fmt, "to")
        if kwargs:
            raise TypeError(f"to: unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, D.dtype):
                dt = a
            elif isinstance(a, builtins.type):
                dt = a  # float/int/bool or a NumPy scalar type, resolved by to_dtype
            elif isinstance(a, Tensor):
                dt, dev = a._dtype, a.device
            elif isinstance(a, (str, device, int)) and not isinstance(a, builtins.bool):
                dev = a
            elif isinstance(a, builtins.bool):
                non_blocking = a  # positional, as in to(device, dtype, non_blocking)
            elif a is None:  # to(None): no change, as in PyTorch
                pass
            else:
                raise TypeError(f"to: unexpected argument {a!r}")
        out = self
        if dev is not None:
            dev = device(dev)
            here = self._storage.device
            if dev != here and not (dev.index is None and dev.type == here.type):
                to_device = _device_copy.to_device
                out = to_device(out, dev, True) if non_blocking else to_device(out, dev)
                copy = False
        if dt is not None:
            dt = D.to_dtype(dt, "to")
            if dt is not out._dtype:
                out = _cast(out, dt)
                copy = False
        if fmt is not None and fmt is not _memory_format.preserve_format:
            out = _memory_format.to_format(out, fmt, "to", copy=copy and out is self)
        elif out is not self and not self._contig:  # preserve_format (the default)
            keep = _memory_format.preserved(self)
            if keep is not _memory_format.contiguous_format:
                out = _memory_format.to_format(out, keep, "to")
        if copy and out is self:
            out = self.clone()
        return out

    def type_as(self, other):
        return self.to(other._dtype)

    def float(self, *, memory_format=None):
        if memory_format is None:
            return self.to(D.float32)
        return self.to(D.float32, memory_format=_memory_format.check(memory_format, "float"))

    def double(self, *, memory_format=None):
        if memory_format is None:
            return self.to(D.float64)
        return self.to(D.float64, memory_format=_memory_format.check(memory_format, "double"))

    def half(self, *, memory_format=None):
        if memory_format is None:
            return self.to(D.float16)
        return self.to(D.float16, memory_format=_memory_format.check(memory_format, "half"))

    def bfloat16(self, *, memory_format=None):
        if memory_format is None:
            return self.to(D.bfloat16)
        return self.to(D.bfloat16, memory_format=_memory_format.check(memory_format, "bfloat16"))

    def long(self, *, memory_format=None):
        if memory_format is None:
            return self.to(D.int64)
        return self.to(D.int64, memory_format=_memory_format.check(memory_format, "long"))

    def int(self, *, memory_format=None):
        if memory_format is None:
            return self.to(D.int32)
        return self.to(D.int32, memory_format=_memory_format.check(memory_format, "int"))

    def short(self, *, memory_format=None):
        if memory_format is None:
            return self.to(D.int16)
        return self.to(D.int16, memory_format=_memory_format.check(memory_format, "short"))

    def char(self, *, memory_format=None):
        if memory_format is None:
            return self.to(D.int8)
        return self.to(D.int8, memory_format=_memory_format.check(memory_format, "char"))

    def byte(self, *, memory_format=None):
        if memory_format is None:
            return self.to(D.uint8)
        return self.to(D.uint8, memory_format=_memory_format.check(memory_format, "byte"))

    def bool(self, *, memory_format=None):
        if memory_format is None:
            return self.to(D.bool)
        return self.to(D.bool, memory_format=_memory_format.check(memory_format, "bool"))

    def cpu(self, *, memory_format=None):
        if memory_format is None:
            return self.to("cpu")
        return self.to("cpu", memory_format=_memory_format.check(memory_format, "cpu"))

    def cuda(self, device=None, non_blocking=False, *, memory_format=None):
        """A copy on a CUDA device (``device``: an index, "cuda:N"; default the current one);
        self when it is there already."""
        if isinstance(device, builtins.int) and not isinstance(device, builtins.bool):
            device = f"cuda:{device}"
        kw = {} if memory_format is None else {
            "memory_format": _memory_format.check(memory_format, "cuda")}
        return self.to("cuda" if device is None else device, non_blocking=non_blocking, **kw)

    def item(self):
        if self._numel != 1:
            raise RuntimeError(f"item: a Tensor with {self._numel} elements cannot be converted "
                               "to a Python number")
        k = self._dtype._kind
        if self._storage.device is CPU:
            t = self
        elif k != 3:
            # one element read by the device's backend (one small copy on a GPU), not a
            # host tensor made by .cpu()
            be = self._storage.backend
            if k == 2:
                return be.read_float(self)
            v = be.read_int(self)
            return builtins.bool(v) if k == 0 else v
        else:
            t = self.cpu()
        if k == 2:
            return _cpu.read_float(t)
        if k == 3:
            return builtins.complex(t.numpy().item())
        v = _cpu.read_int(t)
        if v < 0 and t._dtype is D.uint64:  # (C returns its int64 bits)
            v += 1 << 64
        return builtins.bool(v) if k == 0 else v

    def tolist(self):
        if not self._shape:
            return self.item()
        t = self.detach() if self._storage.device is CPU else self.detach().cpu()
        a = t.numpy() if self._dtype is not D.bfloat16 else t.float().numpy()
        return a.tolist()

    def __bool__(self):
        if self._numel != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self._numel} elements is ambiguous")
        return builtins.bool(self.item())

    def __float__(self):
        return builtins.float(self.item())

    def __int__(self):
        return builtins.int(self.item())

    def __index__(self):
        if self._dtype._kind == 2 or self._numel != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return self.item()

    def __complex__(self):
        return complex(self.item())

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __contains__(self, element):
        # `x in t`: whether any element of t equals x (a tensor or a number), as PyTorch's
        if isinstance(element, (Tensor, numbers.Number)):
            return builtins.bool((self == element).any().item())
        raise RuntimeError("Tensor.__contains__ only supports Tensor or scalar, but you passed "
                           f"in a {type(element)}.")

    def __hash__(self):
        return id(self)

    def __format__(self, spec):
        if not self._shape:
            return format(self.item(), spec)
        return format(repr(self), spec)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        out = self.clone()
        if self.requires_grad:
            out = out.detach().requires_grad_(True)
        memo[id(self)] = out
        d = self.__dict__
        if d:  # user attributes are copied (deeply) as PyTorch does; clone() does not carry them
            out.__dict__.update(copy.deepcopy(d, memo))
        return out

    # ---- autograd slots (behaviour supplied by fiamma-autograd) --------------------------------
    def requires_grad_(self, requires_grad=True):
        if requires_grad or self.requires_grad:
            G.autograd_module().requires_grad_(self, requires_grad)
        return self

    @property
    def is_leaf(self):
        return self.grad_fn is None

    def _get_grad(self):
        g = self._grad
        if g is None and self.grad_fn is not None:  # a non-leaf: warn unless it retains grad
            _nonleaf_grad_warning(self)
        return g

    def _set_grad(self, value):
        try:  # the common case (the engine's accumulation): a plain tensor that matches
            if (type(value) is Tensor and value._shape == self._shape and
                    value._dtype is self._dtype and
                    (value._storage.device is self._storage.device or
                     value._storage.device == self._storage.device)):
                self._grad = value
                return
        except (AttributeError, NotImplementedError):  # self sparse/nested: checked below
            pass
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError("assigned grad expected to be a Tensor or None but got grad of "
                                f"type {type(value).__name__}")
            if value.shape != self.shape:
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value._shape)}' to a "
                    f"tensor of size '{list(self._shape)}'. Please ensure that the gradient "
                    "and the tensor are the same size")
            if value.dtype is not self.dtype:
                raise RuntimeError(
                    f"attempting to assign a gradient with dtype '{value._dtype}' to a tensor "
                    f"with dtype '{self._dtype}': the gradient must have the tensor's dtype")
            if value.device != self.device:
                raise RuntimeError(
                    f"attempting to assign a gradient located on device {value.device} to a "
                    f"tensor located on device {self.device}. Please ensure that the gradient "
                    "and the tensor are on the same device")
        self._grad = value

    def _del_grad(self):
        self._grad = None

    grad = property(_get_grad, _set_grad, _del_grad, doc="""The gradient accumulated by
        ``backward`` (None until one reaches this tensor). Read on a non-leaf tensor that does
        not retain its gradient (``retain_grad()``), it is None and warns as PyTorch does.""")

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate the gradient of this tensor w.r.t. the graph leaves into their ``.grad``
        (needs fiamma-autograd; see ``fiamma.autograd.backward``)."""
        G.autograd_module().backward(self, gradient, retain_graph, create_graph, inputs)

    def retain_grad(self):
        """Keep ``.grad`` for this non-leaf tensor during backward."""
        G.autograd_module().retain_grad(self)

    @property
    def retains_grad(self):
        return self._ag is not None and G.autograd_module().retains_grad(self)

    def register_hook(self, hook):
        """Call ``hook(grad)`` when this tensor's gradient is computed; returns a handle with
        ``remove()``. The hook may return a replacement gradient."""
        return G.autograd_module().register_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(tensor)`` after a gradient was accumulated into this leaf's ``.grad``."""
        return G.autograd_module().register_post_accumulate_grad_hook(self, hook)

    def detach(self):
        t = _new(Tensor)
        _init(t, self._storage, self._dtype, self._shape, self._stride, self._offset,
              self._contig)
        return t

    def detach_(self):
        self.requires_grad = False
        self.grad_fn = None
        return self

    @property
    def data(self):
        t = self.detach()
        t._quiet_version = True
        return t

    @data.setter
    def data(self, other):
        if not isinstance(other, Tensor):
            raise TypeError(f"data: expected a Tensor, got {type(other).__name__}")
        # the tensor keeps its identity and autograd state; only what it holds changes
        keep = (self.requires_grad, self._grad, self.grad_fn, self._ag,
                getattr(self, "_base", None))
        _init(self, other._storage, other._dtype, other._shape, other._stride, other._offset,
              other._contig)
        self.requires_grad, self._grad, self.grad_fn, self._ag, self._base = keep


_TYPE_NAMES = {"bool": "BoolTensor", "uint8": "ByteTensor", "int8": "CharTensor",
               "int16": "ShortTensor", "int32": "IntTensor", "int64": "LongTensor",
               "float16": "HalfTensor", "bfloat16": "BFloat16Tensor", "float32": "FloatTensor",
               "float64": "DoubleTensor", "uint16": "UInt16Tensor", "uint32": "UInt32Tensor",
               "uint64": "UInt64Tensor", "complex64": "ComplexFloatTensor",
               "complex128": "ComplexDoubleTensor"}


class Size(tuple):
    """A tensor's shape: a tuple of ints (torch.Size)."""

    __slots__ = ()

    def numel(self):
        return _prod(self)

    def __repr__(self):
        return f"{D.NAMESPACE}Size({list(self)})"

    def __getitem__(self, k):
        r = tuple.__getitem__(self, k)
        return Size(r) if isinstance(k, slice) else r

    # arithmetic keeps the type, as torch.Size's does: shape + (1,), (2,) + shape, shape * 2
    # (a plain tuple on the left reaches __radd__ first: Size is a tuple subclass that
    # overrides it); the items joined must be integers (or have __index__, as 0-d integer
    # tensors do)
    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return _size_from(tuple.__add__(self, other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return _size_from(tuple.__add__(other, self))

    def __mul__(self, n):
        r = tuple.__mul__(self, n)
        return r if r is NotImplemented else Size(r)

    __rmul__ = __mul__


def _size_from(items):
    """A Size of ``items``, each an int or converted with ``__index__``; TypeError naming the
    first item that is neither."""
    for v in items:
        if type(v) is not int:
            break
    else:
        return Size(items)
    out = []
    for i, v in enumerate(items):
        if type(v) is not int:
            try:
                v = operator.index(v)
            except TypeError:
                raise TypeError(f"{D.NAMESPACE}Size() takes an iterable of 'int' (item {i} is "
                                f"'{type(v).__name__}')") from None
        out.append(v)
    return Size(out)


def _init(t, storage, dt, shape, stride, offset, contig):
    t._storage = storage
    t._dtype = dt
    t._shape = shape
    t._stride = stride
    t._offset = offset
    t._ptr = storage.ptr + offset * dt.itemsize
    n = 1
    if contig is None:  # numel and C-contiguity (size-1 dims aside) in one pass
        contig = True
        i = len(shape)
        while i:
            i -= 1
            s = shape[i]
            if s != 1 and stride[i] != n:
                contig = False
            n *= s
    else:
        for s in shape:
            n *= s
    t._numel = n
    t._contig = c = contig
    # the operator fast paths' one test: contiguous memory a C kernel can read on the CPU
    t._cpu_contig = c and storage.device is _FAST
    t.requires_grad = False
    t._grad = None
    t.grad_fn = None
    t._ag = None
    t._base = None  # views set theirs after


_NONLEAF_GRAD = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad field "
    "to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you "
    "access the non-leaf Tensor by mistake, make sure you access the leaf Tensor instead. See "
    "github.com/pytorch/pytorch/pull/30531 for more information.")


def _nonleaf_grad_warning(t):
    """PyTorch's UserWarning for reading ``.grad`` of a non-leaf tensor that does not retain
    its gradient; attributed to the line that read it (so shown once per line, as Python's
    warnings are)."""
    if t.retains_grad:
        return
    import warnings

    warnings.warn(_NONLEAF_GRAD, UserWarning, stacklevel=3)


def wrap(storage, dt, shape, strides):
    """A tensor viewing ``storage`` from its start with this layout (shape and strides as
    tuples)."""
    t = _new(Tensor)
    _init(t, storage, dt, tuple(shape), tuple(strides), 0, None)
    return t


_STRIDES = {}


def cached_strides(shape):
    """contiguous_strides(shape), remembered in _STRIDES for the next result of that shape
    (a program with more than 4096 shapes starts the table over with the ones it uses now)."""
    stride = contiguous_strides(shape)
    if len(_STRIDES) >= 4096:
        _STRIDES.clear()
    _STRIDES[shape] = stride
    return stride


def new_empty(shape, dt, dev=CPU, zero=False):
    """A fresh contiguous tensor (internal constructor every op uses for its result)."""
    n = 1
    for s in shape:
        n *= s
    try:
        if dev is CPU and not zero:
            st = _new_cpu_storage(n * dt.itemsize)
        else:
            # these allocators take no size beyond int64 without side effects: check first
            if n * dt.itemsize > _MAX_SIZE or n < 0:
                raise OverflowError
            if dev is CPU:
                st = Storage(n * dt.itemsize, zero)
            else:
                be = _BACKENDS.get(dev.type) if type(dev) is device else None
                st = be.new_storage(dev, n * dt.itemsize, zero) if be is not None else \
                    _device_copy.device_storage(dev, n * dt.itemsize, zero)
    except (OverflowError, MemoryError):  # the shape is beyond the limits, or memory is out
        raise _allocation_error(shape, dt, n * dt.itemsize, dev) from None
    t = _new(Tensor)
    t._storage = st
    t._dtype = dt
    t._shape = shape
    stride = _STRIDES.get(shape)
    t._stride = stride if stride is not None else cached_strides(shape)
    t._offset = 0
    t._ptr = st.ptr
    t._numel = n
    t._contig = True
    t._cpu_contig = dev is _FAST
    t.requires_grad = False
    t._grad = None
    t.grad_fn = None
    t._ag = None
    t._base = None  # not a view (set, so reading it is a plain slot load)
    return t


def empty_strided_like(x, dt=None):
    return new_empty(x._shape, dt or x._dtype, x._storage.device)


def _ranges_meet(a, b):
    """Whether the byte ranges spanned by two views (non-negative strides) intersect."""
    def span(t):
        last = builtins.sum((n - 1) * st for n, st in zip(t._shape, t._stride))
        return t._ptr, t._ptr + (last + 1) * t._dtype.itemsize

    a0, a1 = span(a)
    b0, b1 = span(b)
    return a0 < b1 and b0 < a1


def _copy_into(dst, src):
    """Copy src into dst (same shape; dtypes may differ; both CPU)."""
    if dst._numel == 0:
        return
    rc = dst._storage.backend.copy(dst, src)
    if rc:
        check(rc, "copy")


def _cast(x, dt):
    if x._dtype._kind == 3 and dt._kind != 3:
        import warnings

        warnings.warn("Casting complex values to real discards the imaginary part",
                      UserWarning, stacklevel=3)
    out = new_empty(x._shape, dt, x._storage.device)
    _copy_into(out, x)
    if x.requires_grad and dt._kind >= 2:
        G.record(ops.to, out, (x,), {"dtype": dt})
    return out


def wrap_dim(dim, ndim, op="op"):
    """Wrap a possibly negative ``dim`` into [0, ndim); 0-d tensors accept 0 and -1."""
    try:
        d = _index(dim)
    except TypeError:
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}") from None
    n = ndim if ndim > 0 else 1
    if d < -n or d >= n:
        raise IndexError(f"{op}: Dimension out of range (expected to be in range of "
                         f"[{-n}, {n - 1}], but got {d})")
    return d + n if d < 0 else d


def _keyword_args(args, value, name, op):
    """PyTorch's keyword for a method's varargs (``x.view(size=(2, 3))``) as the varargs."""
    if args:
        raise TypeError(f"{op}() got multiple values for argument '{name}'")
    return (value,)


def _shape_arg(args):
    """Accept f(2, 3), f((2, 3)), f([2, 3]) and f(Size)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    try:
        return tuple(_index(a) for a in args)
    except TypeError:
        raise TypeError(f"expected a sequence of ints as shape, got {args!r}") from None


def _plain_shape(args, numel):
    """The shape view/reshape were given, as a tuple, when every entry is a plain int, at most
    one is -1 (inferred) and the rest are >= 0 with ``numel`` elements in all; None otherwise
    (the general path then parses, infers and raises its errors)."""
    if len(args) == 1:
        a = args[0]
        if type(a) is tuple or type(a) is list or type(a) is Size:
            args = a
    p = 1
    neg = -1
    i = 0
    for s in args:
        if type(s) is not int:
            return None
        if s < 0:
            if s != -1 or neg >= 0:
                return None
            neg = i
        else:
            p *= s
        i += 1
    args = tuple(args)
    if neg >= 0:
        if p == 0 or numel % p:
            return None
        return args[:neg] + (numel // p,) + args[neg + 1:]
    return args if p == numel else None


def _infer_shape(shape, numel, op):
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError(f"{op}: only one dimension can be inferred")
    for s in shape:
        if s < -1:
            raise RuntimeError(f"{op}: invalid shape dimension {s}")
    if neg:
        rest = _prod(s for s in shape if s != -1)
        if rest == 0 or numel % rest:
            raise RuntimeError(f"{op}: shape '{list(shape)}' is invalid for input of size {numel}")
        shape = shape[:neg[0]] + (numel // rest,) + shape[neg[0] + 1:]
    elif _prod(shape) != numel:
        raise RuntimeError(f"{op}: shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def _view_strides(old_shape, old_stride, new_shape):
    """Strides for viewing (old_shape, old_stride) as new_shape without a copy, or None.

    The old dims (size-1 dims dropped) form maximal runs that are contiguous among themselves;
    a view exists iff the new shape splits each run exactly.
    """
    if _prod(old_shape) == 0:
        return contiguous_strides(new_shape)
    dims = [(n, st) for n, st in zip(old_shape, old_stride) if n != 1]
    new_stride = [0] * len(new_shape)
    ni = len(new_shape) - 1
    i = len(dims) - 1
    while i >= 0:
        size, inner = dims[i]
        j = i
        while j > 0 and dims[j - 1][1] == dims[j][1] * dims[j][0]:
            j -= 1
            size *= dims[j][0]
        acc = 1
        while acc < size:
            if ni < 0:
                return None
            new_stride[ni] = inner * acc
            acc *= new_shape[ni]
            ni -= 1
        if acc != size:
            return None
        i = j - 1
    while ni >= 0:
        if new_shape[ni] != 1:
            return None
        new_stride[ni] = new_stride[ni + 1] * new_shape[ni + 1] if ni + 1 < len(new_shape) else 1
        ni -= 1
    return tuple(new_stride)


# the modules below Tensor (backends, device copies, dtypes) make tensors through this
_tensor_factory.register(Tensor, new_empty, wrap, cached_strides, _STRIDES)
_TF._TENSOR.append(Tensor)
_TF._PLAIN.add(Tensor)
