"""``fiamma.amp.autocast`` and the autocast state functions (PyTorch's ``torch.amp``)."""

import functools
import warnings

from fiamma import _autocast as _AC

__all__ = ["autocast", "is_autocast_available", "is_autocast_enabled", "get_autocast_dtype",
           "set_autocast_enabled", "set_autocast_dtype", "clear_autocast_cache", "cast_lower",
           "custom_fwd", "custom_bwd"]


def _check_device_type(device_type, op):
    if not isinstance(device_type, str):
        raise TypeError(f"{op}: expected device_type of type str, got "
                        f"{type(device_type).__name__}")
    if device_type not in _AC.DEVICE_TYPES:
        raise RuntimeError(f"{op}: unsupported device_type {device_type!r} (fiamma supports "
                           f"{', '.join(map(repr, _AC.DEVICE_TYPES))})")


# PyTorch's other autocast device types: fiamma has none of these devices, so autocast is never
# on there; asking about them answers (off, PyTorch's default dtype) instead of raising, as
# device-agnostic library code asks about every type it knows
_ABSENT_TYPES = {"ipu": "float16", "xpu": "float16", "mps": "float16", "mtia": "float16",
                 "privateuseone": "float16", "maia": "bfloat16", "xla": "bfloat16",
                 "hpu": "bfloat16"}


def is_autocast_available(device_type):
    """Whether autocast can run on ``device_type`` ('cpu' always; 'cuda' with CUDA; False for
    PyTorch's other autocast device types, which fiamma does not have)."""
    if device_type in _ABSENT_TYPES:
        return False
    _check_device_type(device_type, "is_autocast_available")
    if device_type == "cuda":
        from fiamma import cuda

        return cuda.is_available()
    return True


def is_autocast_enabled(device_type=None):
    """Whether autocast is on for ``device_type`` in this thread (no argument: 'cuda', as in
    PyTorch; False for PyTorch's other autocast device types, such as 'mps')."""
    device_type = "cuda" if device_type is None else device_type
    if device_type in _ABSENT_TYPES:
        return False
    _check_device_type(device_type, "is_autocast_enabled")
    return _AC.state(device_type).enabled


def get_autocast_dtype(device_type):
    """The dtype autocast uses on ``device_type`` in this thread (PyTorch's default for its
    other autocast device types, such as 'mps')."""
    if device_type in _ABSENT_TYPES:
        import fiamma

        return getattr(fiamma, _ABSENT_TYPES[device_type])
    _check_device_type(device_type, "get_autocast_dtype")
    return _AC.state(device_type).dtype


def set_autocast_enabled(device_type, enabled):
    """Turn autocast on or off for ``device_type`` in this thread (prefer ``autocast``)."""
    _check_device_type(device_type, "set_autocast_enabled")
    _AC.set_enabled(_AC.state(device_type), enabled)


def set_autocast_dtype(device_type, dtype):
    """Set the dtype autocast uses on ``device_type`` in this thread."""
    _check_device_type(device_type, "set_autocast_dtype")
    _AC.state(device_type).dtype = _check_dtype(device_type, dtype, "set_autocast_dtype")


def clear_autocast_cache():
    """Drop the parameters' cached casts of this thread."""
    _AC.clear_cache()


def cast_lower(device_type, *args):
    """``args`` with their floating-point tensors (not float64) cast to the autocast dtype
    when autocast is on for ``device_type`` in this thread: what an op on PyTorch's
    lower-precision list does first. ``device_type=None`` casts each tensor by the autocast
    state of its own device type (what fiamma's ops pass: an op's inputs share a device)."""
    return _AC.cast_lower(device_type, *args)


def _check_dtype(device_type, dtype, op):
    import fiamma

    allowed = (fiamma.bfloat16, fiamma.float16) if device_type == "cpu" else (
        fiamma.float16, fiamma.bfloat16, fiamma.float32)
    if dtype not in allowed:
        raise ValueError(f"{op}: {device_type} autocast supports the dtypes "
                         f"{', '.join(map(str, allowed))}, got {dtype}")
    return dtype


class autocast:
    """Run the region's ops in mixed precision: PyTorch's ``torch.autocast``.

    ``autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``: on 'cpu' the
    dtype defaults to bfloat16 (float16 is allowed); on 'cuda' it defaults to float16
    (bfloat16 and float32 are allowed) and, without CUDA, the region warns and stays disabled,
    as in PyTorch on a machine without a GPU. Usable as a context manager (nesting restores
    the outer state) and as a decorator. Inside, ops on PyTorch's CPU lower-precision list
    (the same list on cuda) return the autocast dtype for tensors on the region's device;
    ops on its float32 list (losses) compute in float32; everything else runs in its inputs'
    dtypes. Gradients flow back through the casts to the float32 parameters.

    >>> import fiamma
    >>> x = fiamma.randn(8, 16)
    >>> with fiamma.autocast("cpu"):
    ...     y = x @ fiamma.randn(16, 4)
    ...     z = y.float().sum()
    >>> y.dtype, z.dtype
    (fiamma.bfloat16, fiamma.float32)
    """

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        _check_device_type(device_type, "autocast")
        self.device = device_type
        self.fast_dtype = (_AC.default_dtype(device_type) if dtype is None
                           else _check_dtype(device_type, dtype, "autocast"))
        self._enabled = bool(enabled)
        self._cache_enabled = (_AC.cache_flag() if cache_enabled is None
                               else bool(cache_enabled))
        if self._enabled and device_type == "cuda" and not is_autocast_available("cuda"):
            warnings.warn("User provided device_type of 'cuda', but CUDA is not available. "
                          "Disabling", UserWarning, stacklevel=2)
            self._enabled = False
        self._saved = []

    def __enter__(self):
        st = _AC.state(self.device)
        self._saved.append((st.enabled, st.dtype, st.cache_enabled, _AC.cache_flag()))
        _AC.region_entered()
        st.dtype, st.cache_enabled = self.fast_dtype, self._cache_enabled
        _AC._tls.cache_flag = self._cache_enabled  # what is_autocast_cache_enabled() says
        _AC.set_enabled(st, self._enabled)
        return self

    def __exit__(self, *exc):
        st = _AC.state(self.device)
        enabled, dtype, cache_enabled, flag = self._saved.pop()
        _AC.set_enabled(st, enabled)
        st.dtype, st.cache_enabled = dtype, cache_enabled
        _AC._tls.cache_flag = flag
        _AC.region_exited()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return fn(*args, **kwargs)

        return wrapper


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator for a custom autograd ``Function.forward``: inside an enabled autocast region
    on ``device_type``, with ``cast_inputs`` a dtype, the floating-point tensor arguments are
    cast to it and forward runs with autocast off; otherwise forward runs in the region's
    state. ``custom_bwd`` runs backward in the state forward ran in."""
    _check_device_type(device_type, "custom_fwd")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def forward(*args, **kwargs):
        st = _AC.state(device_type)
        ctx = args[0] if args else None
        if ctx is not None:
            try:
                ctx._fwd_used_autocast = st.enabled
                ctx._dtype = st.dtype
            except AttributeError:
                pass
        if cast_inputs is None or not st.enabled:
            return fwd(*args, **kwargs)
        args = tuple(_AC._cast(a, cast_inputs, device_type, False) for a in args)
        kwargs = {k: _AC._cast(v, cast_inputs, device_type, False) for k, v in kwargs.items()}
        with autocast(device_type, enabled=False):
            return fwd(*args, **kwargs)

    return forward


def custom_bwd(bwd=None, *, device_type):
    """Decorator for a custom autograd ``Function.backward``: runs it with the autocast state
    its forward ran with (see :func:`custom_fwd`)."""
    _check_device_type(device_type, "custom_bwd")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def backward(*args, **kwargs):
        ctx = args[0]
        enabled = getattr(ctx, "_fwd_used_autocast", False)
        dtype = getattr(ctx, "_dtype", None)
        with autocast(device_type, dtype=dtype if enabled else None, enabled=enabled):
            return bwd(*args, **kwargs)

    return backward


# ---- PyTorch's deprecated per-backend state functions for IPU and XLA ---------------------
# fiamma has no IPU or XLA device, so no op ever reads these states; they are kept per thread
# (defaults float16 for IPU, bfloat16 for XLA, as PyTorch's) so that code which saves and
# restores them round-trips, and warn as PyTorch does.

_LEGACY_DEFAULT = {"ipu": "float16", "xla": "bfloat16"}


def _legacy_state(device_type, fn, replacement):
    import fiamma

    warnings.warn(f"fiamma.{fn} is deprecated. Please use fiamma.{replacement} instead.",
                  DeprecationWarning, stacklevel=3)
    st = _AC.state(device_type)
    if not getattr(_AC._tls, device_type + "_init", False):
        st.dtype = getattr(fiamma, _LEGACY_DEFAULT[device_type])
        setattr(_AC._tls, device_type + "_init", True)
    return st


def _legacy_enabled(fn, enabled):
    if not isinstance(enabled, bool):
        raise TypeError(f"{fn}: enabled must be a bool (got {type(enabled).__name__})")
    return enabled


def _legacy_dtype(fn, dtype):
    import fiamma

    if not isinstance(dtype, fiamma.dtype):
        raise TypeError(f"{fn}: dtype must be a fiamma.dtype (got {type(dtype).__name__})")
    return dtype


def is_autocast_ipu_enabled():
    """Whether the (never used) IPU autocast state is on in this thread (deprecated)."""
    return _legacy_state("ipu", "is_autocast_ipu_enabled()", "is_autocast_enabled('ipu')").enabled


def is_autocast_xla_enabled():
    """Whether the (never used) XLA autocast state is on in this thread (deprecated)."""
    return _legacy_state("xla", "is_autocast_xla_enabled()", "is_autocast_enabled('xla')").enabled


def set_autocast_ipu_enabled(enabled):
    """Set the IPU autocast flag of this thread (no fiamma op runs on an IPU; deprecated)."""
    _legacy_state("ipu", "set_autocast_ipu_enabled(enabled)",
                  "set_autocast_enabled('ipu', enabled)").enabled = _legacy_enabled(
        "set_autocast_ipu_enabled", enabled)


def set_autocast_xla_enabled(enabled):
    """Set the XLA autocast flag of this thread (no fiamma op runs on XLA; deprecated)."""
    _legacy_state("xla", "set_autocast_xla_enabled(enabled)",
                  "set_autocast_enabled('xla', enabled)").enabled = _legacy_enabled(
        "set_autocast_xla_enabled", enabled)


def get_autocast_ipu_dtype():
    """The IPU autocast dtype of this thread (float16 unless set; deprecated)."""
    return _legacy_state("ipu", "get_autocast_ipu_dtype()", "get_autocast_dtype('ipu')").dtype


def get_autocast_xla_dtype():
    """The XLA autocast dtype of this thread (bfloat16 unless set; deprecated)."""
    return _legacy_state("xla", "get_autocast_xla_dtype()", "get_autocast_dtype('xla')").dtype


def set_autocast_ipu_dtype(dtype):
    """Set the IPU autocast dtype of this thread (deprecated)."""
    _legacy_state("ipu", "set_autocast_ipu_dtype(dtype)",
                  "set_autocast_dtype('ipu', dtype)").dtype = _legacy_dtype(
        "set_autocast_ipu_dtype", dtype)


def set_autocast_xla_dtype(dtype):
    """Set the XLA autocast dtype of this thread (deprecated)."""
    _legacy_state("xla", "set_autocast_xla_dtype(dtype)",
                  "set_autocast_dtype('xla', dtype)").dtype = _legacy_dtype(
        "set_autocast_xla_dtype", dtype)


LEGACY_DEVICE_FUNCTIONS = (
    "is_autocast_ipu_enabled", "is_autocast_xla_enabled", "set_autocast_ipu_enabled",
    "set_autocast_xla_enabled", "get_autocast_ipu_dtype", "get_autocast_xla_dtype",
    "set_autocast_ipu_dtype", "set_autocast_xla_dtype")


# ---- PyTorch's older CPU/GPU autocast state functions ---------------------------------------
# the per-device-type functions above under their pre-2.4 names (deprecated: they warn as
# PyTorch's), the cache switch and the nesting counter


def _deprecated(old, new):
    warnings.warn(f"fiamma.{old} is deprecated. Please use fiamma.{new} instead.",
                  DeprecationWarning, stacklevel=3)


def is_autocast_cpu_enabled():
    """Whether CPU autocast is on in this thread (deprecated name)."""
    _deprecated("is_autocast_cpu_enabled()", "is_autocast_enabled('cpu')")
    return is_autocast_enabled("cpu")


def set_autocast_cpu_enabled(enabled):
    """Turn CPU autocast on or off in this thread (deprecated name)."""
    _deprecated("set_autocast_cpu_enabled(enabled)", "set_autocast_enabled('cpu', enabled)")
    set_autocast_enabled("cpu", _legacy_enabled("set_autocast_cpu_enabled", enabled))


def get_autocast_cpu_dtype():
    """The CPU autocast dtype of this thread (deprecated name)."""
    _deprecated("get_autocast_cpu_dtype()", "get_autocast_dtype('cpu')")
    return get_autocast_dtype("cpu")


def set_autocast_cpu_dtype(dtype):
    """Set the CPU autocast dtype of this thread (deprecated name)."""
    _deprecated("set_autocast_cpu_dtype(dtype)", "set_autocast_dtype('cpu', dtype)")
    set_autocast_dtype("cpu", dtype)


def get_autocast_gpu_dtype():
    """The CUDA autocast dtype of this thread (deprecated name)."""
    _deprecated("get_autocast_gpu_dtype()", "get_autocast_dtype('cuda')")
    return get_autocast_dtype("cuda")


def set_autocast_gpu_dtype(dtype):
    """Set the CUDA autocast dtype of this thread (deprecated name)."""
    _deprecated("set_autocast_gpu_dtype(dtype)", "set_autocast_dtype('cuda', dtype)")
    set_autocast_dtype("cuda", dtype)


def is_autocast_cache_enabled():
    """Whether autocast caches the lower-precision casts of parameters in this thread (the
    default of ``autocast(cache_enabled=None)``; True unless turned off)."""
    return _AC.cache_flag()


def set_autocast_cache_enabled(enabled):
    """Turn the autocast cast cache on or off in this thread."""
    _AC.set_cache_flag(_legacy_enabled("set_autocast_cache_enabled", enabled))


def autocast_increment_nesting():
    """Count one more autocast region in this thread (what ``autocast.__enter__`` does);
    returns the depth."""
    return _AC.region_entered()


def autocast_decrement_nesting():
    """Count one autocast region fewer; at depth 0 the cast cache is dropped. Returns the
    depth."""
    return _AC.region_exited()


LEGACY_STATE_FUNCTIONS = (
    "is_autocast_cpu_enabled", "set_autocast_cpu_enabled", "get_autocast_cpu_dtype",
    "set_autocast_cpu_dtype", "get_autocast_gpu_dtype", "set_autocast_gpu_dtype",
    "is_autocast_cache_enabled", "set_autocast_cache_enabled", "autocast_increment_nesting",
    "autocast_decrement_nesting")
