"""CUDA streams and events (PyTorch's ``torch.cuda.Stream``/``Event``) over CuPy's.

Streams are created blocking (they order themselves after the legacy default stream, CuPy's
default), so work queued by code that is unaware of streams never races a stream's work.
"""

__all__ = ["Stream", "Event", "StreamContext", "wrap_stream"]


def _cuda(op):
    from fiamma.cuda import _lazy_init

    return _lazy_init(op)


class Stream:
    """A CUDA stream on ``device`` (default: the current one); ``priority``: lower numbers run
    first (0 is the default priority, negative numbers are higher).

    >>> import fiamma
    >>> if fiamma.cuda.is_available():
    ...     s = fiamma.cuda.Stream()
    ...     with fiamma.cuda.stream(s):
    ...         y = fiamma.ones(4, device="cuda") * 2
    ...     s.synchronize()
    """

    def __init__(self, device=None, priority=0, **kwargs):
        be = _cuda("Stream")
        self._be = be
        idx = be.device_index(device, "Stream")
        self.device = be.cuda_device(idx)
        with be.xp.cuda.Device(idx):
            self._cp = kwargs.get("_cupy_stream") or be.xp.cuda.Stream(
                non_blocking=False, priority=priority if priority else None)

    @classmethod
    def _wrap(cls, be, cp_stream, idx):
        self = cls.__new__(cls)
        self._be = be
        self._cp = cp_stream
        self.device = be.cuda_device(idx)
        return self

    @property
    def cuda_stream(self):
        """The raw cudaStream_t (an int)."""
        return self._cp.ptr

    @property
    def priority(self):
        return getattr(self._cp, "priority", 0) or 0

    def query(self):
        """Whether all work queued on the stream has finished."""
        return bool(self._cp.done)

    def synchronize(self):
        """Wait until all work queued on the stream has finished."""
        self._cp.synchronize()

    def wait_event(self, event):
        """Make work queued on this stream after now wait for ``event``."""
        self._cp.wait_event(event._cp)

    def wait_stream(self, stream):
        """Make work queued on this stream after now wait for everything queued on ``stream``."""
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        """Record ``event`` (a new one if None) on this stream; returns it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def __enter__(self):
        self._ctx = StreamContext(self)
        return self._ctx.__enter__()

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)

    def __eq__(self, other):
        return isinstance(other, Stream) and self.cuda_stream == other.cuda_stream and \
            self.device == other.device

    def __hash__(self):
        return hash((self.cuda_stream, self.device))

    def __cuda_stream__(self):
        """The CUDA stream protocol: (version 0, the stream's address)."""
        return (0, self._cp.ptr)

    def __repr__(self):
        return f"<fiamma.cuda.Stream device={self.device} cuda_stream={self.cuda_stream:#x}>"


class StreamContext:
    """Makes ``stream`` current for the ops queued inside (``fiamma.cuda.stream(s)``); None is
    a no-op."""

    def __init__(self, stream):
        self.stream = stream
        self._prev = None

    def __enter__(self):
        s = self.stream
        if s is None:
            return None
        be = s._be
        self._prev_dev = be.current_device()
        idx = s.device.index
        if idx != self._prev_dev:
            be.set_device(idx)
        self._prev = be.xp.cuda.get_current_stream()
        s._cp.use()
        return s

    def __exit__(self, *exc):
        s = self.stream
        if s is None:
            return False
        self._prev.use()
        if s._be.current_device() != self._prev_dev:
            s._be.set_device(self._prev_dev)
        return False


def wrap_stream(be, cp_stream, idx):
    return Stream._wrap(be, cp_stream, idx)


class Event:
    """A CUDA event: a marker in a stream to wait for or time against.

    ``Event(enable_timing=False, blocking=False, interprocess=False)``; ``record(stream=None)``
    on the current stream by default; ``elapsed_time(end)`` in milliseconds (both events need
    ``enable_timing=True``).

    >>> import fiamma
    >>> if fiamma.cuda.is_available():
    ...     start = fiamma.cuda.Event(enable_timing=True)
    ...     end = fiamma.cuda.Event(enable_timing=True)
    ...     start.record(); y = fiamma.ones(1000, device="cuda") + 1; end.record()
    ...     end.synchronize(); ms = start.elapsed_time(end)
    """

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        be = _cuda("Event")
        self._be = be
        self.enable_timing = bool(enable_timing)
        self._cp = be.xp.cuda.Event(block=bool(blocking), disable_timing=not enable_timing,
                                    interprocess=bool(interprocess))
        self._recorded = False

    def record(self, stream=None):
        """Record the event on ``stream`` (default: the current stream)."""
        self._cp.record(None if stream is None else stream._cp)
        self._recorded = True

    def wait(self, stream=None):
        """Make ``stream`` (default: the current one) wait for this event."""
        if stream is None:
            self._be.xp.cuda.get_current_stream().wait_event(self._cp)
        else:
            stream.wait_event(self)

    def query(self):
        """Whether the work before the recorded point has finished."""
        return bool(self._cp.done)

    def synchronize(self):
        """Wait until the work before the recorded point has finished."""
        self._cp.synchronize()

    def elapsed_time(self, end_event):
        """Milliseconds between this event and ``end_event`` (both recorded, with timing)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Event.elapsed_time: both events must be created with "
                               "enable_timing=True")
        if not (self._recorded and end_event._recorded):
            raise RuntimeError("Event.elapsed_time: both events must be recorded first")
        return float(self._be.xp.cuda.get_elapsed_time(self._cp, end_event._cp))

    @property
    def cuda_event(self):
        return self._cp.ptr

    def __repr__(self):
        return f"<fiamma.cuda.Event {self._cp.ptr:#x}>"
