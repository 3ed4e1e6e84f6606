"""``torch.profiler.profiler``: PyTorch's module path of the profiler's classes and helpers
(``from torch.profiler.profiler import profile``); they are :mod:`fiamma.profiler`'s."""

from fiamma.profiler import (
    ProfilerAction,
    ProfilerActivity,
    profile,
    schedule,
    supported_activities,
    tensorboard_trace_handler,
)

__all__ = ["profile", "schedule", "ProfilerAction", "ProfilerActivity", "supported_activities",
           "tensorboard_trace_handler"]
