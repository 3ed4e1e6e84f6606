"""fiamma.cuda: PyTorch's ``torch.cuda`` API over CuPy.

With CuPy and an NVIDIA GPU, ``is_available()`` is True and the functions answer from CUDA:
devices (``device_count``, ``current_device``, ``set_device``, ``device``), ``synchronize``,
``Stream``/``Event``, memory statistics of CuPy's memory pool (``memory_allocated``,
``max_memory_allocated``, ``reset_peak_memory_stats``, ``empty_cache``, ...), device
properties, and the generators of ``manual_seed`` (the same counter-based generator as the
CPU's: a seed gives the same numbers on every device).

Without them ``is_available()`` is False and ``device_count()`` is 0, and what only makes sense
with a GPU (``current_device``, ``synchronize``, ``get_device_name``, streams, ...) raises a
``CudaUnavailableError`` (a ``RuntimeError``) carrying CuPy's own reason (its import error, or
the CUDA runtime's "no driver"/"no device" error). What a CPU program calls unconditionally is
safe: ``manual_seed``/``manual_seed_all``/``seed``/``seed_all`` do nothing, the memory counters
report 0 bytes and ``empty_cache()`` does nothing. ``fiamma.cuda.amp`` holds PyTorch's
deprecated ``autocast``/``GradScaler`` spellings.

>>> import fiamma
>>> device = fiamma.device("cuda" if fiamma.cuda.is_available() else "cpu")
>>> fiamma.cuda.is_available() == (device.type == "cuda")
True
"""

import importlib

from fiamma._errors import OutOfMemoryError  # noqa: F401  (torch.cuda.OutOfMemoryError)
from fiamma.cuda import _streams

__all__ = [
    "is_available", "is_initialized", "init", "device_count", "current_device", "set_device",
    "get_device_name", "get_device_capability", "get_device_properties", "get_arch_list",
    "synchronize", "device", "device_of", "stream", "Stream", "Event", "current_stream",
    "default_stream", "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed",
    "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all",
    "empty_cache", "memory_allocated", "max_memory_allocated", "memory_reserved",
    "max_memory_reserved", "reset_peak_memory_stats", "memory_stats", "mem_get_info",
    "reset_max_memory_allocated", "reset_max_memory_cached", "memory_cached", "max_memory_cached",
    "is_bf16_supported", "unavailable_reason", "CudaUnavailableError", "OutOfMemoryError",
]


class CudaUnavailableError(RuntimeError):
    """Raised by the fiamma.cuda functions that need a GPU when fiamma has no CUDA device."""


def _backend():
    """fiamma's CUDA backend (CuPy on a GPU), or None when CUDA is not available."""
    from fiamma._backend.xp import cuda

    return cuda.backend()


def unavailable_reason():
    """Why ``is_available()`` is False (None when it is True): CuPy's import error, or the
    CUDA runtime's error CuPy got (no driver, no device)."""
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
    """Whether the CUDA state has been initialized (the backend made on first use)."""
    from fiamma._backend.xp import cuda

    return cuda._BACKEND is not None


def init():
    """Initialize CUDA (raises ``CudaUnavailableError`` when it is not available)."""
    _lazy_init("init")


def device_count():
    """The number of CUDA devices fiamma can use (0 without CUDA)."""
    be = _backend()
    return 0 if be is None else be.device_count()


def current_device():
    """The index of the current CUDA device."""
    return _lazy_init("current_device").current_device()


def set_device(device):
    """Make ``device`` (an index, "cuda:N" or a fiamma.device) the current CUDA device; a
    negative index is a no-op, as in PyTorch."""
    if isinstance(device, int) and not isinstance(device, bool) and device < 0:
        return
    _lazy_init("set_device").set_device(device)


def get_device_name(device=None):
    """The name of a CUDA device ("NVIDIA H100 80GB HBM3", ...)."""
    return _lazy_init("get_device_name").properties(device).name


def get_device_capability(device=None):
    """``(major, minor)`` compute capability of a CUDA device."""
    p = _lazy_init("get_device_capability").properties(device)
    return (p.major, p.minor)


def get_device_properties(device=None):
    """Name, capability, memory and multiprocessor count of a CUDA device (PyTorch's names:
    ``name``, ``major``, ``minor``, ``total_memory``, ``multi_processor_count``, ...)."""
    return _lazy_init("get_device_properties").properties(device)


def get_arch_list():
    """The CUDA architectures fiamma was built for: none (fiamma compiles no CUDA code; CuPy
    compiles its kernels for the device at hand)."""
    return []


def synchronize(device=None):
    """Wait for all kernels and copies queued on a CUDA device (default: the current one)."""
    _lazy_init("synchronize").synchronize(device)


def current_stream(device=None):
    """The stream ops on ``device`` are queued on now (a ``Stream``)."""
    be = _lazy_init("current_stream")
    idx = be.device_index(device, "current_stream")
    if idx == be.current_device():
        return _streams.wrap_stream(be, be.xp.cuda.get_current_stream(), idx)
    with be.xp.cuda.Device(idx):
        return _streams.wrap_stream(be, be.xp.cuda.get_current_stream(), idx)


def default_stream(device=None):
    """The default (legacy null) stream of ``device``."""
    be = _lazy_init("default_stream")
    idx = be.device_index(device, "default_stream")
    return _streams.wrap_stream(be, be.xp.cuda.Stream.null, idx)


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
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            be = _lazy_init("device")
            self.prev_idx = be.current_device()
            if self.prev_idx != self.idx:
                be.set_device(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0 and self.prev_idx >= 0 and self.prev_idx != self.idx:
            _backend().set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager making the device of tensor ``obj`` current (a no-op for CPU tensors)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_cuda else -1)


class stream(_streams.StreamContext):
    """Context manager making ``stream`` the current stream (``stream(None)`` is a no-op).

    >>> import fiamma
    >>> with fiamma.cuda.stream(None):
    ...     pass
    """

    def __init__(self, stream):
        if stream is not None and not isinstance(stream, Stream):
            raise TypeError(f"fiamma.cuda.stream: expected a fiamma.cuda.Stream or None, got "
                            f"{type(stream).__name__}")
        super().__init__(stream)


Stream = _streams.Stream
Event = _streams.Event


# ---- random ------------------------------------------------------------------------------------
# fiamma's generator is counter-based (Philox: a value depends only on seed, offset and its
# index), and one generator serves every device, so a seed gives the same numbers on the CPU
# and on each GPU. The CUDA seeding functions therefore seed that generator (when CUDA is
# available; without it there is no CUDA generator and they do nothing, as in a CPU-only
# PyTorch).

def _generator():
    from fiamma._random import default_generator

    return default_generator


def manual_seed(seed):
    """Seed the generator CUDA tensors draw from (fiamma's one counter-based generator);
    without CUDA: does nothing."""
    int(seed)  # still refuse what is not a seed
    if _backend() is not None:
        _generator().manual_seed(int(seed))


def manual_seed_all(seed):
    """Seed every CUDA device's generator (the one generator all devices share)."""
    manual_seed(seed)


def seed():
    """Seed the CUDA generator randomly (nothing to do without CUDA)."""
    if _backend() is not None:
        _generator().seed()


def seed_all():
    """Seed every CUDA generator randomly (nothing to do without CUDA)."""
    seed()


def initial_seed():
    """The seed of the generator CUDA tensors draw from."""
    _lazy_init("initial_seed")
    return _generator().initial_seed()


def get_rng_state(device="cuda"):
    """The CUDA generator's state (a uint8 tensor, as ``fiamma.get_rng_state``)."""
    _lazy_init("get_rng_state").device_index(device, "get_rng_state")
    return _generator().get_state()


def set_rng_state(new_state, device="cuda"):
    """Restore the CUDA generator's state from ``get_rng_state()``."""
    _lazy_init("set_rng_state").device_index(device, "set_rng_state")
    _generator().set_state(new_state)


def get_rng_state_all():
    """The states of every CUDA generator: an empty list without CUDA (no devices)."""
    return [_generator().get_state() for _ in range(device_count())]


def set_rng_state_all(new_states):
    """Set every CUDA generator's state (there are none without CUDA: ``[]`` is accepted)."""
    if _backend() is None:
        if len(new_states):
            _lazy_init("set_rng_state_all")
        return
    for s in new_states:
        _generator().set_state(s)


# ---- memory: CuPy's memory pool with CUDA; none is in use without it --------------------------

def empty_cache():
    """Release cached CUDA memory (nothing is cached without CUDA)."""
    if _backend() is not None:
        _backend().empty_cache()


def memory_allocated(device=None):
    """Bytes of GPU memory in use by tensors (and CuPy's temporaries) on a device (0
    without CUDA)."""
    return 0 if _backend() is None else _backend().memory_allocated(device)


def max_memory_allocated(device=None):
    """The peak of ``memory_allocated`` since the start or ``reset_peak_memory_stats`` (0
    without CUDA)."""
    return 0 if _backend() is None else _backend().max_memory_allocated(device)


def memory_reserved(device=None):
    """Bytes the memory pool holds on a device (in use or cached) (0 without CUDA)."""
    return 0 if _backend() is None else _backend().memory_reserved(device)


def max_memory_reserved(device=None):
    """The peak of ``memory_reserved`` (0 without CUDA)."""
    return 0 if _backend() is None else _backend().max_memory_reserved(device)


def reset_peak_memory_stats(device=None):
    """Start the peaks of ``max_memory_allocated``/``max_memory_reserved`` from now."""
    if _backend() is not None:
        _backend().reset_peak_memory_stats(device)


def reset_max_memory_allocated(device=None):
    """PyTorch's older name of ``reset_peak_memory_stats`` (deprecated there)."""
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device=None):
    """PyTorch's older name of ``reset_peak_memory_stats`` (deprecated there)."""
    reset_peak_memory_stats(device)


def memory_cached(device=None):
    """PyTorch's older name of ``memory_reserved`` (deprecated there)."""
    return memory_reserved(device)


def max_memory_cached(device=None):
    """PyTorch's older name of ``max_memory_reserved`` (deprecated there)."""
    return max_memory_reserved(device)


def memory_stats(device=None):
    """CUDA allocator statistics (an empty dict before CUDA is initialized, as in PyTorch)."""
    return {} if _backend() is None else _backend().memory_stats(device)


def mem_get_info(device=None):
    """``(free, total)`` bytes of a CUDA device (needs CUDA)."""
    return _lazy_init("mem_get_info").mem_get_info(device)


def is_bf16_supported(including_emulation=True):
    """Whether the current CUDA device supports bfloat16 (False without CUDA): compute
    capability 8.0 (Ampere) or later; with ``including_emulation`` any CUDA device (bfloat16
    computed in float32)."""
    be = _backend()
    if be is None:
        return False
    return including_emulation or be.properties().major >= 8


def __getattr__(name):
    if name == "amp":
        return importlib.import_module("fiamma.cuda.amp")
    if name.endswith("Tensor"):                 # legacy fiamma.cuda.FloatTensor, ...
        # by name, at the first use: _legacy_types sits above Tensor, fiamma.cuda below it
        types = importlib.import_module("fiamma._legacy_types").CUDA_TYPES
        if name in types:
            return types[name]
    raise AttributeError(f"module 'fiamma.cuda' has no attribute {name!r}")
