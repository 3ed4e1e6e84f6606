"""Tensor methods that real PyTorch code reaches for beyond the ops: the ``new_*`` family, the
device predicates, ``storage()``, and the in-place shape methods (``unsqueeze_``, ``t_``,
``resize_``, ...). Attached to Tensor by fiamma._methods like the op modules' methods.
"""

from fiamma import _creation as C, _dtype as D, _grad_hook as G
from fiamma._storage import BorrowedStorage, Storage
from fiamma._tensor import Tensor, _copy_into, _init, _keyword_args, _shape_arg

__all__ = []


# ---- new_* : a fresh tensor with this tensor's dtype and device unless told otherwise --------

def _new_kw(self, dtype, device):
    return (self._dtype if dtype is None else dtype,
            self._storage.device if device is None else device)


def _new_empty(self, *sizes, size=None, dtype=None, device=None, requires_grad=False, layout=None,
               pin_memory=False):
    """``x.new_empty(2, 3)``: an uninitialised tensor of x's dtype and device.

    >>> import fiamma
    >>> fiamma.zeros(2, dtype=fiamma.int32).new_empty(3, 1).dtype
    fiamma.int32
    """
    dt, dev = _new_kw(self, dtype, device)
    sizes = sizes if size is None else _keyword_args(sizes, size, "size", "new_empty")
    return C.empty(*sizes, dtype=dt, device=dev, requires_grad=requires_grad)


def _new_zeros(self, *sizes, size=None, dtype=None, device=None, requires_grad=False, layout=None,
               pin_memory=False):
    """``x.new_zeros(2, 3)``: zeros of x's dtype and device.

    >>> import fiamma
    >>> fiamma.ones(1, dtype=fiamma.float64).new_zeros((2,)).tolist()
    [0.0, 0.0]
    """
    dt, dev = _new_kw(self, dtype, device)
    sizes = sizes if size is None else _keyword_args(sizes, size, "size", "new_zeros")
    return C.zeros(*sizes, dtype=dt, device=dev, requires_grad=requires_grad)


def _new_ones(self, *sizes, size=None, dtype=None, device=None, requires_grad=False, layout=None,
              pin_memory=False):
    """``x.new_ones(2, 3)``: ones of x's dtype and device.

    >>> import fiamma
    >>> fiamma.zeros(1, dtype=fiamma.int64).new_ones(2).tolist()
    [1, 1]
    """
    dt, dev = _new_kw(self, dtype, device)
    sizes = sizes if size is None else _keyword_args(sizes, size, "size", "new_ones")
    return C.ones(*sizes, dtype=dt, device=dev, requires_grad=requires_grad)


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False,
              layout=None, pin_memory=False):
    """``x.new_full((2, 3), 7)``: a tensor of x's dtype and device filled with ``fill_value``.

    >>> import fiamma
    >>> fiamma.zeros(1).new_full((2,), 3).tolist()
    [3.0, 3.0]
    """
    dt, dev = _new_kw(self, dtype, device)
    return C.full(size, fill_value, dtype=dt, device=dev, requires_grad=requires_grad)


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False, layout=None,
                pin_memory=False):
    """``x.new_tensor(data)``: a copy of ``data`` with x's dtype and device (not the dtype
    inferred from ``data``, unlike ``fiamma.tensor``).

    >>> import fiamma
    >>> fiamma.zeros(1, dtype=fiamma.int64).new_tensor([1.7, 2.2]).tolist()
    [1, 2]
    """
    dt, dev = _new_kw(self, dtype, device)
    return C.tensor(data, dtype=dt, device=dev, requires_grad=requires_grad)


# ---- device predicates -----------------------------------------------------------------------

def _false(self):
    return False


def _device_is(kind):
    return property(lambda self: self._storage.device.type == kind,
                    doc=f"True if the tensor lives on a {kind!r} device.")


_PREDICATES = {
    # devices fiamma knows
    "is_meta": _device_is("meta"),
    # devices and layouts fiamma has no tensors on: always False (PyTorch answers False on a
    # machine without them too)
    **{name: property(_false) for name in (
        "is_xpu", "is_mps", "is_mkldnn", "is_vulkan", "is_ipu", "is_hpu", "is_xla", "is_mtia",
        "is_maia", "is_sparse_csr", "is_quantized", "is_sparse")},
}


def _get_device(self):
    """The CUDA device index of a tensor on a GPU, -1 on the CPU (PyTorch's answer)."""
    dev = self._storage.device
    if dev.type == "cpu":
        return -1
    return 0 if dev.index is None else dev.index


def _is_inference(self):
    """False: fiamma's inference mode does not mark tensors."""
    return False


def _is_set_to(self, other):
    """True if both tensors show the same memory with the same layout."""
    return (self._storage is other._storage and self._offset == other._offset and
            self._shape == other._shape and self._stride == other._stride)


# ---- storage ---------------------------------------------------------------------------------

def _untyped_storage(self):
    """The bytes under this tensor, shared with every view of it (``x.untyped_storage() is
    x[0].untyped_storage()``).

    >>> import fiamma
    >>> x = fiamma.zeros(2, 3)
    >>> x.untyped_storage().nbytes(), x[1].untyped_storage().data_ptr() == x.data_ptr()
    (24, True)
    """
    from fiamma._storage_api import untyped

    return untyped(self._storage)


def _typed_storage(self):
    """The storage as elements of this tensor's dtype (PyTorch's ``TypedStorage``): ``size()``
    counts elements of the whole storage, ``s[i]`` reads element i from the storage's start.

    >>> import fiamma
    >>> x = fiamma.arange(6.0).reshape(2, 3)
    >>> s = x[1].storage()
    >>> s.size(), s[4], s.dtype
    (6, 4.0, fiamma.float32)
    """
    from fiamma._storage_api import TypedStorage

    return TypedStorage(wrap_storage=_untyped_storage(self), dtype=self._dtype)


# ---- in-place shape methods ------------------------------------------------------------------

def _take_layout(self, v, op):
    """Make ``self`` show what the view ``v`` shows (same storage), keeping its identity."""
    rg, grad, fn, ag = self.requires_grad, self._grad, self.grad_fn, self._ag
    base = getattr(self, "_base", None)
    _init(self, v._storage, v._dtype, v._shape, v._stride, v._offset, None)
    self.requires_grad, self._grad, self.grad_fn, self._ag, self._base = rg, grad, fn, ag, base


def _inplace_view(self, op, fn, *args):
    """``self.<op>_(*args)``: ``fn(self, *args)`` is the out-of-place view; ``self`` takes
    its layout (and, with gradients, its history)."""
    if self.requires_grad and G.state.enabled:
        G.check_inplace(self, op + "_")  # a leaf (or a view of one) is refused, as in PyTorch
        old = self._as_subclass(Tensor)  # self before the change, with self's history
        old.requires_grad, old.grad_fn, old._ag = True, self.grad_fn, self._ag
        old._base = getattr(self, "_base", None)
        v = fn(old, *args)
        _take_layout(self, v, op)
        self.grad_fn, self._ag = v.grad_fn, v._ag
        return self
    _take_layout(self, fn(self, *args), op)
    return self


def _unsqueeze_(self, dim):
    """In-place ``unsqueeze``: this tensor gains a size-1 dim at ``dim``."""
    return _inplace_view(self, "unsqueeze", Tensor.unsqueeze, dim)


def _squeeze_(self, dim=None):
    """In-place ``squeeze``."""
    return _inplace_view(self, "squeeze", Tensor.squeeze, dim)


def _t_(self):
    """In-place ``t``."""
    return _inplace_view(self, "t", Tensor.t)


def _transpose_(self, dim0, dim1):
    """In-place ``transpose``.

    >>> import fiamma
    >>> x = fiamma.zeros(2, 3)
    >>> x.transpose_(0, 1).shape
    fiamma.Size([3, 2])
    """
    return _inplace_view(self, "transpose", Tensor.transpose, dim0, dim1)


def _as_strided_(self, size, stride, storage_offset=None):
    """In-place ``as_strided``."""
    return _inplace_view(self, "as_strided", Tensor.as_strided, size, stride, storage_offset)


def _resize_(self, *sizes, memory_format=None):
    """Give this tensor shape ``sizes`` (contiguous strides) in place, growing its storage when
    it is too small (new elements are zero; the old bytes are kept). As in PyTorch, a tensor
    that requires grad cannot be resized, nor can borrowed memory (NumPy, a file) grow.

    >>> import fiamma
    >>> x = fiamma.arange(6.0)
    >>> x.resize_(2, 2).tolist()
    [[0.0, 1.0], [2.0, 3.0]]
    """
    op = "resize_"
    if self.requires_grad:
        raise RuntimeError(f"{op}: cannot resize variables that require grad")
    shape = _shape_arg(sizes)
    for s in shape:
        if s < 0:
            raise RuntimeError(f"{op}: Trying to create tensor with negative dimension {s}: "
                               f"{list(shape)}")
    n = 1
    for s in shape:
        n *= s
    st = self._storage
    isz = self._dtype.itemsize
    need = (self._offset + n) * isz if n else 0
    if need > st.nbytes:
        if isinstance(st, BorrowedStorage) or st.device.type != "cpu":
            raise RuntimeError(f"{op}: Trying to resize storage that is not resizable "
                               f"({st.nbytes} bytes borrowed on {st.device}; need {need})")
        new = Storage(need, zero=True)
        if st.nbytes:
            _copy_into(_bytes_view(new, st.nbytes), _bytes_view(st, st.nbytes))
        new.version = st.version
        st = new
    stride = []
    acc = 1
    for s in reversed(shape):
        stride.append(acc)
        acc *= s if s > 0 else 1
    v = _view_of(st, self._dtype, shape, tuple(reversed(stride)), self._offset)
    _take_layout(self, v, op)
    return self


def _resize_as_(self, other, memory_format=None):
    """``resize_(other.shape)``."""
    return _resize_(self, other.shape)


def _bytes_view(st, nbytes):
    return _view_of(st, D.uint8, (nbytes,), (1,), 0)


def _view_of(st, dt, shape, stride, offset):
    t = object.__new__(Tensor)
    _init(t, st, dt, tuple(shape), tuple(stride), offset, None)
    t._base = None
    return t


def module_load(self, other, assign=False):
    """What ``nn.Module.load_state_dict`` (with ``fiamma.__future__``'s swap switch on) swaps
    into the parameter or buffer ``self`` for the checkpoint's ``other``: ``other.detach()``
    with ``assign``, else ``self.copy_(other).detach()``. A subclass's ``__torch_function__``
    may transform it (PyTorch's extension point)."""
    if assign:
        return other.detach()
    return self.copy_(other).detach()


# Tensor methods of this module: attached by fiamma._methods (the one place that does)
METHODS = {
    "module_load": module_load,
    "new_empty": _new_empty, "new_zeros": _new_zeros, "new_ones": _new_ones,
    "new_full": _new_full, "new_tensor": _new_tensor,
    **_PREDICATES,
    "get_device": _get_device, "is_inference": _is_inference, "is_set_to": _is_set_to,
    "untyped_storage": _untyped_storage, "storage": _typed_storage,
    "unsqueeze_": _unsqueeze_, "squeeze_": _squeeze_, "t_": _t_, "transpose_": _transpose_,
    "swapdims_": _transpose_, "swapaxes_": _transpose_, "as_strided_": _as_strided_,
    "resize_": _resize_, "resize_as_": _resize_as_,
}
