"""``fiamma.autograd.profiler``: PyTorch's older profiler API (``torch.autograd.profiler``)
over core's :mod:`fiamma.profiler`, which records the same events.

>>> import fiamma
>>> from fiamma.autograd import profiler
>>> x = fiamma.ones(3, requires_grad=True)
>>> with profiler.profile(record_shapes=True) as prof:
...     with profiler.record_function("fwd_bwd"):
...         (x * 2).sum().backward()
>>> "fwd_bwd" in [e.key for e in prof.key_averages()]
True
"""

from fiamma.profiler import (
    EventList,
    FunctionEvent,
    FunctionEventAvg,
    ProfilerActivity,
    profile as _profile,
    record_function,
)

__all__ = ["profile", "record_function", "emit_nvtx", "EventList", "FunctionEvent",
           "FunctionEventAvg"]


class profile:
    """Profile the ops, backward nodes and ``record_function`` blocks run inside ``with``;
    afterwards ``function_events``, ``key_averages()``, ``table()``,
    ``export_chrome_trace(path)`` give the results (``enabled=False``: record nothing).
    ``use_cuda=True`` (or ``use_device="cuda"``) adds GPU time from CUDA events."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False,
                 use_kineto=False, use_cpu=True, experimental_config=None, acc_events=False,
                 custom_trace_id_callback=None):
        if use_device not in (None, "cuda"):
            raise ValueError(f"profile: use_device must be None or 'cuda', got {use_device!r}")
        if not use_cpu:
            raise ValueError("profile: use_cpu=False is not supported (fiamma records the "
                             "device time of ops through their CPU-side events)")
        self.enabled = bool(enabled)
        activities = [ProfilerActivity.CPU]
        if use_cuda or use_device == "cuda":
            activities.append(ProfilerActivity.CUDA)
        self._prof = _profile(activities=activities, record_shapes=record_shapes,
                              profile_memory=profile_memory, with_stack=with_stack,
                              with_flops=with_flops, with_modules=with_modules,
                              experimental_config=experimental_config, acc_events=acc_events,
                              custom_trace_id_callback=custom_trace_id_callback)
        self.entered = False
        self.function_events = None

    def __enter__(self):
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        self.entered = True
        self._prof.start()
        return self

    def __exit__(self, *exc):
        if not self.enabled:
            return False
        self._prof.stop()
        self.function_events = self._prof.events()
        return False

    def _check_finish(self):
        if self.function_events is None:
            raise RuntimeError("Profiler didn't finish running")

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False):
        self._check_finish()
        return self.function_events.table(sort_by, row_limit, max_src_column_width,
                                          max_name_column_width, max_shapes_column_width,
                                          header, top_level_events_only)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        self._check_finish()
        return self.function_events.key_averages(group_by_input_shape, group_by_stack_n,
                                                 group_by_overload_name)

    def total_average(self):
        self._check_finish()
        return self.function_events.total_average()

    def export_chrome_trace(self, path):
        self._check_finish()
        return self.function_events.export_chrome_trace(path)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        self._check_finish()
        return self.function_events.export_stacks(path, metric)

    @property
    def self_cpu_time_total(self):
        self._check_finish()
        return self.function_events.self_cpu_time_total

    def __str__(self):
        self._check_finish()
        return self.function_events.table()

    def __repr__(self):
        return "<unfinished fiamma.autograd.profiler.profile>" if self.function_events is None \
            else self.function_events.table()


class emit_nvtx:
    """PyTorch's context that marks each op with an NVTX range for NVIDIA's profilers. fiamma
    emits no NVTX ranges: entering it enabled raises (``enabled=False`` does nothing, as in
    PyTorch); use :class:`profile` (``use_cuda=True`` for GPU times) instead."""

    def __init__(self, enabled=True, record_shapes=False):
        self.enabled = enabled
        self.record_shapes = record_shapes

    def __enter__(self):
        if self.enabled:
            raise RuntimeError("emit_nvtx: fiamma emits no NVTX ranges; profile with "
                               "fiamma.autograd.profiler.profile (or fiamma.profiler.profile)")
        return self

    def __exit__(self, *exc):
        return False
