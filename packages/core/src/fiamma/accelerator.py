"""fiamma.accelerator: PyTorch's ``torch.accelerator`` (the device-agnostic accelerator API).

fiamma's accelerator is CUDA (fiamma.cuda, through CuPy). Without CuPy or a GPU,
``is_available()`` is False, ``device_count()`` is 0 and ``current_accelerator()`` is None (as
in a CPU-only PyTorch build), so PyTorch's idiom picks the CPU:

>>> import fiamma
>>> acc = fiamma.accelerator.current_accelerator()
>>> device = acc if fiamma.accelerator.is_available() else fiamma.device("cpu")
>>> device.type in ("cpu", "cuda")
True

The functions that need an accelerator (``current_device_index``, ``set_device_index``,
``current_stream``, ``set_stream``, ``synchronize``, ``get_device_capability``,
``get_memory_info``) raise a ``RuntimeError`` saying why when there is none; the memory
counters are 0 and ``empty_cache()`` does nothing, as PyTorch's are before an accelerator is
initialized.
"""

from fiamma import cuda as _cuda

__all__ = [
    "current_accelerator", "current_device_idx", "current_device_index", "current_stream",
    "device_count", "device_index", "empty_cache", "empty_host_cache", "get_device_capability",
    "get_memory_info", "is_available", "max_memory_allocated", "max_memory_reserved",
    "memory_allocated", "memory_reserved", "memory_stats", "reset_accumulated_memory_stats",
    "reset_peak_memory_stats", "set_device_idx", "set_device_index", "set_stream",
    "synchronize",
]


def _accelerator_type():
    """The accelerator's device type ('cuda' once fiamma has a CUDA backend), or None."""
    return "cuda" if _cuda._backend() is not None else None


def _need(op):
    if _accelerator_type() is None:
        raise RuntimeError(f"fiamma.accelerator.{op}: no accelerator is available (fiamma has "
                           f"no accelerator backend here: CUDA: {_cuda.unavailable_reason()})")


def device_count():
    """The number of accelerator devices (0 without one)."""
    return _cuda.device_count() if _accelerator_type() else 0


def is_available():
    """Whether an accelerator is available: built, with its drivers and a visible device."""
    return device_count() > 0


def current_accelerator(check_available=False):
    """The accelerator's device (index None), or None when fiamma has none; with
    ``check_available=True``, also None when it is not available at run time."""
    import fiamma

    kind = _accelerator_type()
    if kind is None or (check_available and not is_available()):
        return None
    return fiamma.device(kind)


def current_device_index():
    """The index of the current accelerator device."""
    _need("current_device_index")
    return _cuda.current_device()


current_device_idx = current_device_index


def set_device_index(device, /):
    """Make ``device`` (an index, a device or a string) the current accelerator device."""
    _need("set_device_index")
    _cuda.set_device(device)


set_device_idx = set_device_index


class device_index:
    """Context manager making device index ``device`` current (``None``: a no-op)."""

    def __init__(self, device, /):
        self.idx = device
        self.prev = None

    def __enter__(self):
        if self.idx is not None:
            self.prev = current_device_index()
            set_device_index(self.idx)

    def __exit__(self, *exc):
        if self.idx is not None:
            set_device_index(self.prev)
        return False


def current_stream(device=None, /):
    _need("current_stream")
    return _cuda.current_stream(device)


def set_stream(stream):
    """Make ``stream`` (a ``fiamma.cuda.Stream``) the current stream of its device."""
    _need("set_stream")
    if not isinstance(stream, _cuda.Stream):
        raise TypeError(f"fiamma.accelerator.set_stream: expected a fiamma.cuda.Stream, got "
                        f"{type(stream).__name__}")
    if stream.device.index != _cuda.current_device():
        _cuda.set_device(stream.device.index)
    stream._cp.use()


def synchronize(device=None, /):
    """Wait for the accelerator's queued work to finish."""
    _need("synchronize")
    _cuda.synchronize(device)


def get_device_capability(device=None, /):
    _need("get_device_capability")
    return _cuda.get_device_capability(device)


def get_memory_info(device_index=None, /):
    _need("get_memory_info")
    return _cuda.mem_get_info(device_index)


def empty_cache():
    """Release the accelerator's cached memory (nothing without one)."""
    _cuda.empty_cache()


def empty_host_cache():
    """Release cached pinned host memory (fiamma caches none)."""


def memory_stats(device_index=None, /):
    return _cuda.memory_stats(device_index)


def memory_allocated(device_index=None, /):
    return _cuda.memory_allocated(device_index)


def max_memory_allocated(device_index=None, /):
    return _cuda.max_memory_allocated(device_index)


def memory_reserved(device_index=None, /):
    return _cuda.memory_reserved(device_index)


def max_memory_reserved(device_index=None, /):
    return _cuda.max_memory_reserved(device_index)


def reset_peak_memory_stats(device_index=None, /):
    _cuda.reset_peak_memory_stats(device_index)


def reset_accumulated_memory_stats(device_index=None, /):
    """Reset the accumulated counters (there are none without an accelerator)."""
