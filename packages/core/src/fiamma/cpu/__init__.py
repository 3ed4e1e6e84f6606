"""fiamma.cpu: PyTorch's ``torch.cpu`` device module (the CPU is always there).

>>> import fiamma
>>> fiamma.cpu.is_available(), fiamma.cpu.device_count(), fiamma.cpu.current_device()
(True, 1, 'cpu')
"""

import importlib

__all__ = ["is_available", "device_count", "current_device", "set_device", "synchronize",
           "current_stream", "stream", "Stream", "Event", "StreamContext", "amp"]


def is_available():
    """Always True."""
    return True


def device_count():
    """The number of CPU devices: 1."""
    return 1


def current_device():
    """The current CPU device's name: ``'cpu'``."""
    return "cpu"


def set_device(device):
    """Selecting a CPU device does nothing (there is one)."""


def synchronize(device=None):
    """Wait for the CPU's work: ops run synchronously, so nothing to wait for."""


class Stream:
    """The CPU "stream": work runs in order, so a stream has nothing to order."""

    def __init__(self, priority=-1):
        self.priority = priority

    def wait_stream(self, stream):
        pass

    def synchronize(self):
        pass


class Event:
    """A CPU "event": recorded work has always completed."""

    def record(self, stream=None):
        pass

    def query(self):
        return True

    def synchronize(self):
        pass

    def wait(self, stream=None):
        pass


_default = Stream()


def current_stream(device=None):
    return _default


class StreamContext:
    """Context manager selecting a CPU stream (nothing to select)."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc):
        return False


def stream(stream):
    return StreamContext(stream)


def __getattr__(name):
    if name == "amp":
        return importlib.import_module("fiamma.cpu.amp")
    raise AttributeError(f"module 'fiamma.cpu' has no attribute {name!r}")
