"""``fiamma.profiler``: where the time and memory of a program go (``torch.profiler``'s API).

``profile`` records every op of fiamma (the public functions and Tensor methods), autograd's
backward nodes, optimizer steps, DataLoader fetches and ``record_function`` blocks; its results
are ``events()``, ``key_averages().table(...)`` and ``export_chrome_trace(path)`` (Perfetto).
While no profile records nothing of it runs: the timing wrappers are put in place of the op
functions when recording starts and taken out when it stops.

>>> import fiamma
>>> from fiamma.profiler import profile, record_function
>>> with profile(record_shapes=True) as prof:
...     with record_function("scale"):
...         y = fiamma.ones(2, 3) * 2
>>> [(e.name, e.cpu_parent.name if e.cpu_parent else None) for e in prof.events()]
[('scale', None), ('aten::ones', 'scale'), ('aten::mul', 'scale')]

``hook`` is the public entry for packages above core: ``if hook.enabled:`` is all they cost
while no profile records, and ``hook.call(name, fn, *args)`` runs ``fn`` as a named event;
``register_ops(module)`` has a module's public functions recorded like core's ops.
"""

from fiamma.profiler._events import EventList, FunctionEvent, FunctionEventAvg
from fiamma.profiler._profile import (
    ProfilerAction,
    ProfilerActivity,
    profile,
    schedule,
    supported_activities,
)
from fiamma.profiler._record import ProfilerHook, hook, record_function, register_ops
from fiamma.profiler._trace import tensorboard_trace_handler

__all__ = ["profile", "schedule", "record_function", "ProfilerActivity", "ProfilerAction",
           "tensorboard_trace_handler", "supported_activities", "EventList", "FunctionEvent",
           "FunctionEventAvg", "ProfilerHook", "hook", "register_ops", "is_profiler_enabled",
           "kineto_available"]


def kineto_available():
    """Whether PyTorch's Kineto tracing library backs the profiler: no, fiamma records its
    events itself (``profile`` works all the same)."""
    return False


def is_profiler_enabled():
    """Whether a profile records now (in warmup or active steps)."""
    return hook.enabled
