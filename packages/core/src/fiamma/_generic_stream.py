"""``torch.Stream`` and ``torch.Event``: PyTorch's device-agnostic stream and event.

``fiamma.Stream(device)`` is a CUDA stream (``fiamma.cuda.Stream``) for a CUDA device and a CPU
stream otherwise; without a device it is one on the current accelerator, or on the CPU when
there is none (as PyTorch's). A CPU stream orders nothing: ops run in order, so ``query()`` is
True and ``synchronize``/``wait_stream``/``wait_event`` return at once. ``fiamma.Event(device)``
is likewise a CUDA event for a CUDA device; on the CPU, recording one raises RuntimeError, as in
PyTorch ("cpu backend doesn't support events").

>>> import fiamma
>>> s = fiamma.Stream("cpu")
>>> s.device_type, s.query()
('cpu', True)
"""

import importlib

__all__ = ["Stream", "Event"]


def _device(device, op):
    fiamma = importlib.import_module("fiamma")
    if device is None:
        acc = fiamma.accelerator.current_accelerator()
        return acc if acc is not None else fiamma.device("cpu")
    if isinstance(device, int):  # an index of the current accelerator
        acc = fiamma.accelerator.current_accelerator()
        if acc is None:
            raise RuntimeError(f"{op}: device index {device} given but fiamma has no "
                               "accelerator")
        return fiamma.device(acc.type, device)
    dev = fiamma.device(device)
    if dev.type not in ("cpu", "cuda"):
        raise RuntimeError(f"{op}: expected a cpu or cuda device, got {dev}")
    return dev


class Stream:
    """A stream of work on a device: see the module's text."""

    def __new__(cls, device=None, *, priority=0, **kwargs):
        dev = _device(device, "Stream")
        if dev.type == "cuda":
            return importlib.import_module("fiamma.cuda").Stream(dev, priority=priority)
        return super().__new__(cls)

    def __init__(self, device=None, *, priority=0, **kwargs):
        self.device = importlib.import_module("fiamma").device("cpu")
        self.priority = priority

    device_type = "cpu"
    device_index = -1
    stream_id = 0

    def query(self):
        return True

    def synchronize(self):
        pass

    def wait_stream(self, stream):
        pass

    def wait_event(self, event):
        pass

    def record_event(self, event=None):
        event = Event(self.device) if event is None else event
        event.record(self)
        return event

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __eq__(self, other):
        return isinstance(other, Stream) and other.device == self.device

    def __hash__(self):
        return hash(("fiamma.Stream", "cpu"))

    def __repr__(self):
        return "Stream device_type=cpu, device_index=-1, stream_id=0"


class Event:
    """A marker in a stream's work: see the module's text."""

    def __new__(cls, device=None, *, enable_timing=False, blocking=False, interprocess=False):
        dev = _device(device, "Event")
        if dev.type == "cuda":
            return importlib.import_module("fiamma.cuda").Event(
                enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)
        return super().__new__(cls)

    def __init__(self, device=None, *, enable_timing=False, blocking=False,
                 interprocess=False):
        self.device = importlib.import_module("fiamma").device("cpu")

    def record(self, stream=None):
        raise RuntimeError("Event.record: the cpu backend doesn't support events (as in "
                           "PyTorch); use a CUDA device's events")

    def query(self):
        return True

    def synchronize(self):
        pass

    def wait(self, stream=None):
        pass

    def __repr__(self):
        return "Event device_type=cpu, device_index=-1, event_flag=0, event_id=0"
