"""Autocast state and input casting (the machinery behind ``fiamma.amp.autocast``).

The state is per thread and per device type (PyTorch's rule). Ops on PyTorch's CPU autocast
lists call :func:`cast_lower` (matmul, linear, convolutions: eligible inputs go to the
autocast dtype) or run under :func:`float32_op` (losses: eligible inputs go to float32 and the
op runs with autocast off). Eligible means a floating-point tensor on the autocast device that
is not float64, as in PyTorch.

Ops check a module-level boolean before calling in here, so code outside autocast pays one
global lookup: :func:`listen` registers a module's globals, whose ``_AC_ON`` is True while an
enabled autocast region exists in any thread.
"""

import functools
import threading

DEVICE_TYPES = ("cpu", "cuda")

_tls = threading.local()
_lock = threading.Lock()
_regions = 0  # enabled autocast regions open in all threads
_listeners = []  # globals() of modules whose _AC_ON mirrors `_regions > 0`


class _DeviceState:
    __slots__ = ("enabled", "dtype", "cache_enabled")

    def __init__(self, enabled, dtype, cache_enabled):
        self.enabled, self.dtype, self.cache_enabled = enabled, dtype, cache_enabled


def default_dtype(device_type):
    import fiamma

    return fiamma.bfloat16 if device_type == "cpu" else fiamma.float16


def state(device_type):
    """This thread's autocast state for ``device_type`` (created disabled on first use)."""
    states = getattr(_tls, "states", None)
    if states is None:
        states = _tls.states = {}
        _tls.cache = {}
        _tls.depth = 0
    st = states.get(device_type)
    if st is None:
        st = states[device_type] = _DeviceState(False, default_dtype(device_type), cache_flag())
    return st


def cache_flag():
    """This thread's autocast weight-cache switch (PyTorch's ``is_autocast_cache_enabled``):
    the default of ``autocast(cache_enabled=None)``."""
    return getattr(_tls, "cache_flag", True)


def set_cache_flag(enabled):
    """Set the switch, and the cache setting of this thread's device states with it."""
    _tls.cache_flag = bool(enabled)
    for st in getattr(_tls, "states", {}).values():
        st.cache_enabled = bool(enabled)


def listen(module_globals):
    """Keep ``module_globals["_AC_ON"]`` equal to "an autocast region is enabled somewhere"."""
    module_globals["_AC_ON"] = _regions > 0
    _listeners.append(module_globals)


def set_enabled(st, enabled):
    """Turn a thread's device state on or off, keeping the count of enabled states (and the
    listeners' ``_AC_ON``) right."""
    global _regions
    enabled = bool(enabled)
    if enabled == st.enabled:
        return
    st.enabled = enabled
    with _lock:
        _regions += 1 if enabled else -1
        if _regions == (1 if enabled else 0):
            for g in _listeners:
                g["_AC_ON"] = enabled


def region_entered():
    """One more autocast region open in this thread; returns the nesting depth."""
    state("cpu")  # creates the thread's cache and depth
    _tls.depth += 1
    return _tls.depth


def region_exited():
    """One autocast region fewer; returns the depth (the cache is dropped at 0)."""
    state("cpu")
    _tls.depth = max(_tls.depth - 1, 0)
    if _tls.depth == 0:
        _tls.cache.clear()  # PyTorch drops cached casts when the outermost region exits
    return _tls.depth


def clear_cache():
    """Drop this thread's cached casts of parameters."""
    cache = getattr(_tls, "cache", None)
    if cache is not None:
        cache.clear()


_TENSOR = []  # [Tensor], filled on first use (this module is imported before _tensor)


def _cast(x, dtype, device_type, cache_enabled):
    if not _TENSOR:
        from fiamma._tensor import Tensor

        _TENSOR.append(Tensor)
    if not isinstance(x, _TENSOR[0]):
        if isinstance(x, (list, tuple)):
            return type(x)(_cast(v, dtype, device_type, cache_enabled) for v in x)
        return x
    dt = x.dtype
    if dt is dtype or not dt.is_floating_point or dt.itemsize == 8 or \
            x.device.type != device_type:
        return x
    # parameters (leaves that want gradients) are cast once per region, as in PyTorch
    if cache_enabled and x.requires_grad and x.grad_fn is None:
        cache = _tls.cache
        hit = cache.get(id(x))
        if hit is not None and hit[0] is x and hit[1] == x._version and hit[2].dtype is dtype:
            return hit[2]
        y = x.to(dtype)
        cache[id(x)] = (x, x._version, y)
        return y
    return x.to(dtype)


def cast_lower(device_type, *args):
    """``args`` with eligible tensors cast to this thread's autocast dtype for
    ``device_type`` when autocast is enabled there (unchanged otherwise). ``device_type``
    None: each tensor by the autocast state of its own device type (what an op on the
    lower-precision list does: its inputs share one device)."""
    if device_type is None:
        for dev_type, st in _enabled_states():
            args = tuple(_cast(a, st.dtype, dev_type, st.cache_enabled) for a in args)
        return args
    st = state(device_type)
    if not st.enabled:
        return args
    return tuple(_cast(a, st.dtype, device_type, st.cache_enabled) for a in args)


def _enabled_states():
    """[(device type, state)] of this thread's enabled autocast states."""
    states = getattr(_tls, "states", None)
    if not states:
        return []
    return [(k, st) for k, st in states.items() if st.enabled]


def float32_op(fn):
    """Run ``fn`` on float32 inputs with autocast off inside an enabled autocast region
    (PyTorch's "fp32" list: losses and other precision-sensitive ops); a tensor is cast when
    autocast is on for its device type."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not _regions:
            return fn(*args, **kwargs)
        enabled = _enabled_states()
        if not enabled:
            return fn(*args, **kwargs)
        import fiamma

        f32 = fiamma.float32
        for dev_type, st in enabled:
            args = tuple(_cast(a, f32, dev_type, False) for a in args)
            kwargs = {k: _cast(v, f32, dev_type, False) for k, v in kwargs.items()}
            st.enabled = False  # not counted: the region stays open around this call
        try:
            return fn(*args, **kwargs)
        finally:
            for _, st in enabled:
                st.enabled = True

    return wrapper
