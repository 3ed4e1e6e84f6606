"""Moving tensors between devices, and memory on a device other than the CPU. A device is
usable when a backend is registered for it (fiamma._backend.register): memory comes from its
``new_storage`` and crosses through host memory with its ``from_host``/``to_host`` primitives.
Asking for a device without a backend raises a clear error (carrying CuPy's import error when
that is the reason for cuda)."""

from fiamma import _backend
from fiamma._storage import CPU, device

__all__ = ["to_device", "copy_across", "device_storage", "cuda_unavailable_reason"]


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
    from fiamma._tensor import new_empty

    out = new_empty(x._shape, x._dtype, CPU)
    if out._numel:
        src = x if x._contig else x.contiguous()
        _backend.check(src._storage.backend.to_host(src, out._ptr), "to")
    return out


def to_device(x, dev):
    """A copy of x on ``dev`` (x is on another device); recorded for autograd like ``to``."""
    from fiamma import _grad_hook as G
    from fiamma._tensor import new_empty

    dev = device(dev)
    src = x if x._storage.device is CPU else _host_copy(x)
    if dev is CPU:
        out = src if src is not x else x.clone()
    else:
        out = new_empty(x._shape, x._dtype, dev)
        if out._numel:
            src = src if src._contig else src.contiguous()
            _backend.check(out._storage.backend.from_host(out, src._dtype, src._ptr), "to")
    if x.requires_grad and x._dtype.kind == 2:
        G.record("to", out, (x,), {"device": dev, "source_device": x._storage.device})
    return out


def copy_across(dst, src):
    """dst[...] = src (broadcast, cast) where the two are on different devices."""
    if src._shape != dst._shape:
        src = src.expand(dst._shape)
    if dst._storage.device is CPU:
        dst.copy_(_host_copy(src))
    else:
        dst.copy_(to_device(src.detach(), dst._storage.device))
