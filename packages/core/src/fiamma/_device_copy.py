"""Moving tensors between devices. Only the CPU exists until the cuda backend lands; asking for
another device raises a clear error (carrying CuPy's import error when that is the reason)."""

from fiamma._storage import device

__all__ = ["to_device", "copy_across", "device_storage", "cuda_unavailable_reason"]


def cuda_unavailable_reason():
    try:
        import cupy  # noqa: F401
    except Exception as e:  # ImportError, or CUDA driver errors raised at import
        return f"CuPy could not be imported ({type(e).__name__}: {e})"
    return "the cuda backend is not implemented in this version of fiamma-core"


def _unsupported(dev):
    dev = device(dev)
    if dev.type == "cuda":
        raise RuntimeError(f"device {dev}: CUDA is not available: {cuda_unavailable_reason()}")
    raise RuntimeError(f"device {dev}: tensors on '{dev.type}' are not supported")


def device_storage(dev, nbytes, zero=False):
    _unsupported(dev)


def to_device(x, dev):
    _unsupported(dev)


def copy_across(dst, src):
    _unsupported(dst.device if dst.device.type != "cpu" else src.device)
