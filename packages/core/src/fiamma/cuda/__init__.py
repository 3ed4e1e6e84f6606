"""fiamma.cuda: PyTorch's ``torch.cuda`` API, honest on a machine where fiamma has no CUDA.

This version of fiamma-core has no CUDA backend (a later release adds one on CuPy): so
``is_available()`` is False and ``device_count()`` is 0 everywhere, and what only makes sense
with a GPU (``current_device``, ``synchronize``, ``get_device_name``, streams, ...) raises a
``RuntimeError`` that says why: the backend is missing, or CuPy's own import error. What a
CPU program calls unconditionally is safe: ``manual_seed``/``manual_seed_all``/``seed``/
``seed_all`` do nothing (there is no CUDA generator to seed, as in a CPU-only PyTorch), the
memory counters report 0 bytes and ``empty_cache()`` does nothing. ``fiamma.cuda.amp``
holds PyTorch's deprecated ``autocast``/``GradScaler`` spellings, which disable themselves
with a warning when CUDA is not available (as PyTorch's do).

>>> import fiamma
>>> device = fiamma.device("cuda" if fiamma.cuda.is_available() else "cpu")
>>> device.type, fiamma.cuda.device_count()
('cpu', 0)
"""

import importlib

__all__ = [
    "is_available", "is_initialized", "init", "device_count", "current_device", "set_device",
    "get_device_name", "get_device_capability", "get_device_properties", "get_arch_list",
    "synchronize", "device", "device_of", "stream", "Stream", "Event", "current_stream",
    "default_stream", "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed",
    "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all",
    "empty_cache", "memory_allocated", "max_memory_allocated", "memory_reserved",
    "max_memory_reserved", "reset_peak_memory_stats", "memory_stats", "mem_get_info",
    "is_bf16_supported", "unavailable_reason", "CudaUnavailableError",
]


class CudaUnavailableError(RuntimeError):
    """Raised by the fiamma.cuda functions that need a GPU when fiamma has no CUDA device."""


def _backend():
    """fiamma's CUDA backend when one is registered and usable (None in this version)."""
    return None


def unavailable_reason():
    """Why ``is_available()`` is False (None when it is True): CuPy's import error, or that
    this version of fiamma-core has no CUDA backend."""
    if _backend() is not None:
        return None
    from fiamma._device_copy import cuda_unavailable_reason

    return cuda_unavailable_reason()


def _lazy_init(op):
    backend = _backend()
    if backend is None:
        raise CudaUnavailableError(f"fiamma.cuda.{op}: CUDA is not available: "
                                   f"{unavailable_reason()}")
    return backend


def is_available():
    """Whether tensors can be put on a CUDA device (``.to("cuda")``)."""
    return _backend() is not None


def is_initialized():
    """Whether the CUDA state has been initialized (never, without a backend)."""
    return False


def init():
    """Initialize CUDA (raises ``CudaUnavailableError`` when it is not available)."""
    _lazy_init("init")


def device_count():
    """The number of CUDA devices fiamma can use (0 without a CUDA backend)."""
    return 0


def current_device():
    return _lazy_init("current_device").current_device()


def set_device(device):
    _lazy_init("set_device")


def get_device_name(device=None):
    return _lazy_init("get_device_name").get_device_name(device)


def get_device_capability(device=None):
    return _lazy_init("get_device_capability").get_device_capability(device)


def get_device_properties(device=None):
    return _lazy_init("get_device_properties").get_device_properties(device)


def get_arch_list():
    """The CUDA architectures fiamma was built for (none without CUDA), as in PyTorch."""
    return []


def synchronize(device=None):
    _lazy_init("synchronize").synchronize(device)


def current_stream(device=None):
    return _lazy_init("current_stream").current_stream(device)


def default_stream(device=None):
    return _lazy_init("default_stream").default_stream(device)


class device:
    """Context manager that makes ``device`` the current CUDA device (PyTorch's
    ``torch.cuda.device``); entering it needs CUDA (``device(None)`` or a negative index
    is a no-op, as in PyTorch)."""

    def __init__(self, device):
        if device is None or (isinstance(device, int) and device < 0):
            self.idx = -1
        else:
            import fiamma

            d = fiamma.device(device) if not isinstance(device, int) else None
            if d is not None and d.type != "cuda":
                raise ValueError(f"fiamma.cuda.device: expected a cuda device, got {d}")
            self.idx = device if isinstance(device, int) else (d.index or 0)

    def __enter__(self):
        if self.idx >= 0:
            _lazy_init("device")

    def __exit__(self, *exc):
        return False


class device_of(device):
    """Context manager making the device of tensor ``obj`` current (a no-op for CPU tensors)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_cuda else -1)


class stream:
    """Context manager selecting a CUDA stream (``stream(None)`` is a no-op)."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        if self.stream is not None:
            _lazy_init("stream")

    def __exit__(self, *exc):
        return False


class Stream:
    """A CUDA stream (needs CUDA)."""

    def __init__(self, device=None, priority=0, **kwargs):
        _lazy_init("Stream")


class Event:
    """A CUDA event (needs CUDA)."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        _lazy_init("Event")


# ---- random: safe without CUDA (nothing to seed), as in a CPU-only PyTorch ----------------------

def manual_seed(seed):
    """Seed the current CUDA device's generator; without CUDA there is none: does nothing."""
    int(seed)  # still refuse what is not a seed
    if _backend() is not None:
        _backend().manual_seed(int(seed))


def manual_seed_all(seed):
    """Seed every CUDA device's generator; without CUDA there is none: does nothing."""
    int(seed)
    if _backend() is not None:
        _backend().manual_seed_all(int(seed))


def seed():
    """Seed the current CUDA generator randomly (nothing to do without CUDA)."""
    if _backend() is not None:
        _backend().seed()


def seed_all():
    """Seed every CUDA generator randomly (nothing to do without CUDA)."""
    if _backend() is not None:
        _backend().seed_all()


def initial_seed():
    return _lazy_init("initial_seed").initial_seed()


def get_rng_state(device="cuda"):
    return _lazy_init("get_rng_state").get_rng_state(device)


def set_rng_state(new_state, device="cuda"):
    _lazy_init("set_rng_state").set_rng_state(new_state, device)


def get_rng_state_all():
    """The states of every CUDA generator: an empty list without CUDA (no devices)."""
    return [] if _backend() is None else _backend().get_rng_state_all()


def set_rng_state_all(new_states):
    """Set every CUDA generator's state (there are none without CUDA: ``[]`` is accepted)."""
    if _backend() is None:
        if len(new_states):
            _lazy_init("set_rng_state_all")
        return
    _backend().set_rng_state_all(new_states)


# ---- memory: no CUDA memory is in use without CUDA --------------------------------------------

def empty_cache():
    """Release cached CUDA memory (nothing is cached without CUDA)."""
    if _backend() is not None:
        _backend().empty_cache()


def memory_allocated(device=None):
    return 0 if _backend() is None else _backend().memory_allocated(device)


def max_memory_allocated(device=None):
    return 0 if _backend() is None else _backend().max_memory_allocated(device)


def memory_reserved(device=None):
    return 0 if _backend() is None else _backend().memory_reserved(device)


def max_memory_reserved(device=None):
    return 0 if _backend() is None else _backend().max_memory_reserved(device)


def reset_peak_memory_stats(device=None):
    if _backend() is not None:
        _backend().reset_peak_memory_stats(device)


def memory_stats(device=None):
    """CUDA allocator statistics (an empty dict before CUDA is initialized, as in PyTorch)."""
    return {} if _backend() is None else _backend().memory_stats(device)


def mem_get_info(device=None):
    """``(free, total)`` bytes of a CUDA device (needs CUDA)."""
    return _lazy_init("mem_get_info").mem_get_info(device)


def is_bf16_supported(including_emulation=True):
    """Whether the current CUDA device supports bfloat16 (False without CUDA)."""
    return False if _backend() is None else _backend().is_bf16_supported(including_emulation)


def __getattr__(name):
    if name == "amp":
        return importlib.import_module("fiamma.cuda.amp")
    raise AttributeError(f"module 'fiamma.cuda' has no attribute {name!r}")
