"""Moving tensors between devices, and memory on a device other than the CPU. A device is
usable when a backend is registered for it (fiamma._backend.register): memory comes from its
``new_storage`` and crosses through host memory with its ``from_host``/``to_host`` primitives.
Asking for a device without a backend raises a clear error (carrying CuPy's import error when
that is the reason for cuda)."""

from fiamma import _backend, _grad_hook as G, _tensor_factory as TF
from fiamma._autograd_api import ops
from fiamma._storage import CPU, Storage, device

__all__ = ["to_device", "copy_across", "device_storage", "cuda_unavailable_reason", "pin_memory",
           "is_pinned"]


def _load_xp(op, dev):
    """The reference device's backend (NumPy), built on first use."""
    from fiamma._backend.xp import reference

    return reference()


def _load_cuda(op, dev):
    """The cuda backend (CuPy), built on first use; RuntimeError saying why there is none."""
    from fiamma._backend.xp import cuda

    be = cuda.backend()  # registers itself when CuPy and a GPU are there
    if be is None:
        raise RuntimeError(f"{op}: device {dev}: CUDA is not available: {cuda.reason()}")
    return be


def _load_meta(op, dev):
    """The meta device's backend (tensors without data), built on first use."""
    from fiamma._backend import meta

    be = meta.backend()
    _backend.register("meta", be)
    return be


_backend.register_loader("xp", _load_xp)
_backend.register_loader("meta", _load_meta)
_backend.register_loader("cuda", _load_cuda)


def cuda_unavailable_reason():
    """CuPy's own reason why fiamma has no cuda backend (None when it has one)."""
    from fiamma._backend.xp import cuda

    if cuda.backend() is not None:
        return None
    return cuda.reason()


def device_storage(dev, nbytes, zero=False):
    """A fresh storage of ``nbytes`` on ``dev`` (not the CPU) from its backend."""
    dev = device(dev)
    return _backend.backend_for(dev).new_storage(dev, nbytes, zero)


def _host_copy(x):
    """x's data in a fresh contiguous CPU tensor."""
    out = TF.new_empty(x._shape, x._dtype, CPU)
    if out._numel:
        src = x if x._contig else x.contiguous()
        _backend.check(src._storage.backend.to_host(src, out._ptr), "to")
    return out


def to_device(x, dev, non_blocking=False):
    """A copy of x on ``dev`` (x is on another device); recorded for autograd like ``to``.
    ``non_blocking``: from pinned host memory to a GPU, or from a GPU to (new, pinned) host
    memory, the copy is queued on the current stream and not waited for (as in PyTorch)."""
    dev = device(dev)
    out = _async_copy(x, dev) if non_blocking and x._numel and x._contig else None
    if out is not None:
        if x.requires_grad and x._dtype._kind == 2:
            G.record(ops.to, out, (x,), {"device": dev, "source_device": x._storage.device})
        return out
    src = x if x._storage.device is CPU else _host_copy(x)
    if dev is CPU:
        out = src if src is not x else x.clone()
    else:
        out = TF.new_empty(x._shape, x._dtype, dev)
        if out._numel:
            src = src if src._contig else src.contiguous()
            _backend.check(out._storage.backend.from_host(out, src._dtype, src._ptr), "to")
    if x.requires_grad and x._dtype._kind == 2:
        G.record(ops.to, out, (x,), {"device": dev, "source_device": x._storage.device})
    return out


def copy_across(dst, src, non_blocking=False):
    """dst[...] = src (broadcast, cast) where the two are on different devices."""
    if src._shape != dst._shape:
        src = src.expand(dst._shape)
    if (non_blocking and dst._dtype is src._dtype and dst._contig and src._contig and
            dst._numel and dst._storage.device.type == "cuda" and src._storage.device is CPU
            and is_pinned(src)):
        dst._storage.backend.upload_async(dst, src)
        dst._bump()
        return
    if dst._storage.device is CPU:
        dst.copy_(_host_copy(src))
    else:
        dst.copy_(to_device(src.detach(), dst._storage.device))


# ---- pinned host memory and asynchronous copies ------------------------------------------------

class PinnedOwner:
    """Keeps a block of page-locked host memory (CuPy's PinnedMemoryPointer) alive."""

    __slots__ = ("mem",)

    def __init__(self, mem):
        self.mem = mem


def _cuda_backend(op):
    from fiamma._backend.xp import cuda

    be = cuda.backend()
    if be is None:
        raise RuntimeError(f"{op}: pinned host memory needs CUDA, which is not available: "
                           f"{cuda.reason()}")
    return be


def _pinned_empty(shape, dt, be):
    n = 1
    for s in shape:
        n *= s
    mem = be.alloc_pinned(n * dt.itemsize)
    st = Storage.borrow(mem.ptr, n * dt.itemsize, PinnedOwner(mem))
    return TF.wrap(st, dt, shape, TF.cached_strides(shape))


def pin_memory(x):
    """A copy of CPU tensor x in page-locked host memory (what ``Tensor.pin_memory`` returns);
    x itself when it is pinned already."""
    if x._storage.device is not CPU:
        raise RuntimeError(f"pin_memory: cannot pin a tensor on {x.device}: only dense CPU "
                           "tensors can be pinned")
    if is_pinned(x):
        return x
    out = _pinned_empty(x._shape, x._dtype, _cuda_backend("pin_memory"))
    out.copy_(x.detach())
    return out.requires_grad_(True) if x.requires_grad else out


def is_pinned(x):
    """Whether x's memory is page-locked host memory (allocated by ``pin_memory``, or pinned
    by CUDA for another library)."""
    st = x._storage
    if st.device is not CPU:
        return False
    if isinstance(st.owner, PinnedOwner):
        return True
    from fiamma._backend.xp import cuda

    be = cuda._BACKEND  # without CUDA initialised nothing can be pinned: no import here
    return be is not None and be.is_pinned_address(x._ptr)


def _async_copy(x, dev):
    """The non_blocking copy of contiguous x to ``dev``, or None where it would not be
    asynchronous (then the ordinary, synchronous copy runs)."""
    src_dev = x._storage.device
    if src_dev is CPU and dev.type == "cuda" and is_pinned(x):
        out = TF.new_empty(x._shape, x._dtype, dev)
        out._storage.backend.upload_async(out, x)
        return out
    if src_dev.type == "cuda" and dev is CPU:
        be = x._storage.backend
        out = _pinned_empty(x._shape, x._dtype, be)
        be.download_async(x, out)
        return out
    return None
