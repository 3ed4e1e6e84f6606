"""The shared body of device modules fiamma has no backend for (``fiamma.xpu``, ``fiamma.mps``).

PyTorch's CPU-only builds have these modules too: ``is_available()`` is False and
``device_count()`` 0, seeding is accepted and does nothing (PyTorch queues it until a device is
initialized, which never happens), ``empty_cache()`` does nothing, and whatever needs a device
raises a ``RuntimeError`` saying there is none.
"""

__all__ = ["install"]


def install(ns, kind, title):
    """Fill the module namespace ``ns`` with the API of the absent device type ``kind``."""

    def _none(op):
        def fn(*args, **kwargs):
            raise RuntimeError(f"fiamma.{kind}.{op}: fiamma has no {title} backend, so no "
                               f"{kind} device is available (fiamma.{kind}.is_available() is "
                               "False)")
        fn.__name__ = fn.__qualname__ = op
        fn.__doc__ = f"Needs a {title} device: always raises RuntimeError (there is none)."
        return fn

    def is_available():
        return False

    def device_count():
        return 0

    def is_initialized():
        return False

    def _noop(op):
        def fn(*args, **kwargs):
            return None
        fn.__name__ = fn.__qualname__ = op
        fn.__doc__ = (f"Accepted and does nothing: there is no {title} device to apply it to "
                      "(as in PyTorch before a device is initialized).")
        return fn

    is_available.__doc__ = f"Whether a {title} device can be used (never, in fiamma)."
    device_count.__doc__ = f"The number of {title} devices (0)."
    is_initialized.__doc__ = f"Whether the {title} runtime is initialized (never)."
    ns.update(is_available=is_available, device_count=device_count,
              is_initialized=is_initialized)
    for op in ("manual_seed", "manual_seed_all", "seed", "seed_all", "empty_cache"):
        ns[op] = _noop(op)
    for op in ("init", "synchronize", "current_device", "set_device", "get_device_name",
               "get_device_properties", "get_device_capability", "get_rng_state",
               "set_rng_state", "memory_allocated", "max_memory_allocated", "memory_reserved",
               "current_stream", "Stream", "Event"):
        ns[op] = _none(op)
    return sorted(n for n in ns if not n.startswith("_") and n not in ("install", "annotations"))
