"""The ``meta`` device: tensors with a shape, strides and dtype but no data (PyTorch's meta
tensors). Building a model under ``with fiamma.device("meta")`` allocates nothing; its
parameters get real memory later with ``Module.to_empty(device=...)`` or
``load_state_dict(..., assign=True)``; running a meta model computes every result's shape.

Every op of fiamma computes its result's shape and dtype in Python before it calls a backend
primitive, so the meta backend is the contract with each primitive that only writes device
memory made a no-op. A primitive whose result reaches the host (an element read, a count that
sizes the next result: ``item``, ``nonzero``, ``masked_select``, ``unique``, printing the values,
copies to another device) raises, naming the op: a meta tensor has no values to give. Storages
get distinct fake addresses (never dereferenced) so that aliasing checks between tensors keep
working; ``data_ptr()`` of a meta tensor is 0, as in PyTorch.
"""

from fiamma._storage import Storage

__all__ = ["MetaBackend", "backend", "NoDataError"]


class NoDataError(NotImplementedError, AttributeError):
    """What asking a meta tensor for data raises (a NotImplementedError, as PyTorch's; also an
    AttributeError so that ``getattr(backend, "feature", None)`` probes see a missing feature)."""


_NEXT = [1 << 44]  # the next fake address: distinct ranges, never dereferenced


def _fake_range(nbytes):
    p = _NEXT[0]
    _NEXT[0] = p + ((nbytes + 4095) // 4096 + 1) * 4096
    return p


class MetaStorage(Storage):
    __slots__ = ("device",)
    backend = None  # set below

    def __init__(self, nbytes, dev):
        self.nbytes = nbytes
        self.version = 0
        self.device = dev
        self.ptr = _fake_range(nbytes)  # aliasing checks compare addresses

    def __del__(self):
        pass

    def __repr__(self):
        return f"<fiamma.Storage {self.nbytes} bytes on meta (no data)>"

    def is_shared(self):
        return False

    def share_memory_(self):
        return self


# primitives that only write device memory: on meta they have nothing to do (the op layer has
# already made the results, of the right shapes and dtypes)
_WRITE_ONLY = """
    copy copy_region fill fill_region arange linspace logspace from_host cat_rows
    unary binary ternary special_unary special_binary reduce scan softmax mm matmul mm_bias
    index_gather index_scatter ixop bincount histc pool_scatter
    sort topk select cumext searchsorted
    rand_fill rand_int rand_bernoulli_p randperm
    conv batch_norm_fwd batch_norm_bwd row_norm_fwd row_norm_bwd pool_max pool_avg
    pool_avg_backward upsample upsample_backward grid_sample grid_sample_backward adam_step
    sgd_step gelu_fwd gelu_bwd xent_fwd xent_bwd attn_fwd attn_bwd lstm_cell_fwd lstm_cell_bwd
    stft
""".split()

# primitives whose result is read on the host (values, or a count that sizes a result)
_NEEDS_DATA = {
    "to_host": "Cannot copy out of meta tensor; no data!",
    "read_float": "Tensor.item() cannot be called on meta tensors",
    "read_int": "Tensor.item() cannot be called on meta tensors",
    "nonzero_count": "nonzero: the number of nonzero elements of a meta tensor is unknown "
                     "(it has no data), so the result's shape cannot be computed",
    "nonzero": "nonzero: meta tensors have no data (the result's shape depends on it)",
    "masked_select": "masked_select: meta tensors have no data (the result's shape depends on "
                     "it)",
    "masked_put": "masked_scatter/index by mask: meta tensors have no data (which elements "
                  "are selected depends on it)",
    "unique_runs": "unique: meta tensors have no data (the result's shape depends on it)",
    "sort_rows": "unique(dim=...): meta tensors have no data (the result's shape depends on "
                 "it)",
    "multinomial": "multinomial: not supported on meta tensors",
    "nms": "nms: meta tensors have no data (the number of kept boxes depends on it)",
}

# numpy.fft's transforms whose result is real (the others give complex ones)
_FFT_REAL_OUT = frozenset(["irfft", "hfft", "irfftn"])


def _noop(*args, **kwargs):
    return 0


class _NullArray:
    """A meta tensor's memory (``backend.raw``) and the meta device's array module
    (``backend.xp``) in code that computes through an array module (complex arithmetic,
    complex reductions): the op layer has already made the results, so every operation gives
    another null array and writes into one are dropped. Reading a value (truth, a number,
    iteration, conversion to a NumPy array) raises NoDataError."""

    __slots__ = ()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __call__(self, *args, **kwargs):
        return self

    def __getitem__(self, key):
        return self

    def __setitem__(self, key, value):
        pass

    def _self(self, *args):
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _self
    __rtruediv__ = __floordiv__ = __rfloordiv__ = __pow__ = __rpow__ = __matmul__ = _self
    __rmatmul__ = __mod__ = __rmod__ = __neg__ = __pos__ = __abs__ = __invert__ = _self
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _self
    __lt__ = __le__ = __gt__ = __ge__ = _self
    __iadd__ = __isub__ = __imul__ = __itruediv__ = __ipow__ = _self

    def _no_data(self, *args):
        raise NoDataError("meta tensors have no data: a value of a meta tensor was read")

    __bool__ = __float__ = __int__ = __index__ = __complex__ = __iter__ = __len__ = _no_data
    __array__ = _no_data


_NULL = _NullArray()


def _refuse(msg):
    def prim(*args, **kwargs):
        if msg.startswith("Tensor.item()"):
            raise RuntimeError(msg)
        raise NoDataError(msg)
    return prim


class MetaBackend:
    """contract.Backend for the meta device (see the module docstring)."""

    name = "meta"

    def __init__(self):
        for n in _WRITE_ONLY:
            setattr(self, n, _noop)
        for n, msg in _NEEDS_DATA.items():
            setattr(self, n, _refuse(msg))

    def fft(self, name, x, cin, conj, kwargs):
        """The shape-only form of contract.Backend.fft: numpy.fft.<name>'s result shape from
        its ``n``/``axis`` or ``s``/``axes`` (fiamma.fft always passes the axes)."""
        from fiamma import _tensor_factory as TF
        from fiamma._backend import codes

        shape = list(x._shape[:-1] if cin else x._shape)
        if name.endswith("n"):
            axes = [a % len(shape) for a in kwargs["axes"]]
            sizes = kwargs.get("s") or [None] * len(axes)
        else:
            axes, sizes = [kwargs.get("axis", -1) % len(shape)], [kwargs.get("n")]
        half_in = name in ("rfft", "rfftn", "ihfft")      # real in, n // 2 + 1 out
        half_out = name in ("irfft", "irfftn", "hfft")    # n // 2 + 1 in, n out
        for i, (a, n) in enumerate(zip(axes, sizes)):
            last = i == len(axes) - 1
            if n is None:
                n = 2 * (shape[a] - 1) if half_out and last else shape[a]
            shape[a] = n // 2 + 1 if half_in and last else n
        if name in _FFT_REAL_OUT:
            return codes.OK, TF.new_empty(tuple(shape), x._dtype, x._storage.device)
        return codes.OK, TF.new_empty(tuple(shape) + (2,), x._dtype, x._storage.device)

    xp = _NULL  # see _NullArray

    def raw(self, t, shape=None, strides=None, off=0):
        return _NULL

    def new_storage(self, dev, nbytes, zero=False):
        return MetaStorage(nbytes, dev)

    def synchronize(self):
        pass

    def __getattr__(self, name):
        # anything beyond the primitives (an array module for linalg, the GPU's own paths)
        # needs data
        if name.startswith("__"):
            raise AttributeError(name)
        raise NoDataError(f"meta tensors have no data: '{name}' (linear algebra, interop and "
                     f"device-specific paths) is not supported on the meta device")


MetaStorage.backend = None
_BACKEND = None


def backend():
    """The meta backend (one per process)."""
    global _BACKEND
    if _BACKEND is None:
        _BACKEND = MetaBackend()
        MetaStorage.backend = _BACKEND
    return _BACKEND
