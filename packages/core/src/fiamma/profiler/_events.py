"""Events as the user sees them: FunctionEvent (one call), FunctionEventAvg (a group of calls),
EventList (``prof.events()``) with ``key_averages`` and ``table``. Times are in microseconds and
memory in bytes, as in PyTorch's profiler."""

import os

from fiamma.profiler import _record as R

__all__ = ["FunctionEvent", "FunctionEventAvg", "EventList"]


class FunctionEvent:
    """One recorded call: an op, a backward node, a ``record_function`` block, a step.

    ``cpu_time_total`` is its wall time on the CPU (us) and ``self_cpu_time_total`` that less the
    time of the events nested in it; ``cpu_memory_usage`` the bytes of tensor memory it left
    allocated (frees count negative) and ``self_cpu_memory_usage`` that less its children's;
    ``device_time_total``/``self_device_time_total`` the GPU time between CUDA events recorded
    around it (0 for work that touched no CUDA tensor).
    """

    def __init__(self, id, name, thread, start_ns, end_ns, cat=R.CAT_OP, input_shapes=None,
                 stack=None, cpu_memory_usage=0, device_memory_usage=0, device_time_ns=0,
                 device_start_ns=None, device_index=0, flops=0):
        self.id = id
        self.flops = flops
        self.name = name
        self.thread = thread
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.cat = cat
        self.input_shapes = input_shapes if input_shapes is not None else []
        self.stack = stack if stack is not None else []
        self.cpu_memory_usage = cpu_memory_usage
        self.device_memory_usage = device_memory_usage
        self.device_time_ns = device_time_ns
        self.device_start_ns = device_start_ns
        self.device_index = device_index
        self.cpu_parent = None
        self.cpu_children = []
        self.count = 1
        self.is_async = False
        self.overload_name = ""

    key = property(lambda self: self.name)
    cpu_time_total = property(lambda self: (self.end_ns - self.start_ns) / 1e3)
    cpu_time = cpu_time_total

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def device_time_total(self):
        if self.device_start_ns is not None:
            return self.device_time_ns / 1e3
        return sum(c.device_time_total for c in self.cpu_children)

    @property
    def self_device_time_total(self):
        if self.device_start_ns is None:
            return 0.0
        return max(0.0, self.device_time_total
                   - sum(c.device_time_total for c in self.cpu_children))

    @property
    def self_cpu_memory_usage(self):
        return self.cpu_memory_usage - sum(c.cpu_memory_usage for c in self.cpu_children)

    @property
    def self_device_memory_usage(self):
        return self.device_memory_usage - sum(c.device_memory_usage for c in self.cpu_children)

    # PyTorch's older names
    cuda_time_total = device_time_total
    self_cuda_time_total = self_device_time_total
    cuda_memory_usage = property(lambda self: self.device_memory_usage)
    self_cuda_memory_usage = self_device_memory_usage

    @property
    def time_range(self):
        return _Interval(self.start_ns / 1e3, self.end_ns / 1e3)

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name!r} "
                f"cpu_time_total={_fmt_time(self.cpu_time_total)} "
                f"self_cpu_time_total={_fmt_time(self.self_cpu_time_total)} "
                f"input_shapes={self.input_shapes} "
                f"cpu_memory_usage={self.cpu_memory_usage}>")


class _Interval:
    def __init__(self, start, end):
        self.start = start
        self.end = end

    def elapsed_us(self):
        return self.end - self.start


class FunctionEventAvg:
    """The sums over the events that ``key_averages`` put in one group (same name, and input
    shapes / stack frames when grouped by those); ``cpu_time`` is the mean per call."""

    def __init__(self, key, input_shapes=None, stack=None):
        self.key = key
        self.count = 0
        self.flops = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.device_time_total = 0.0
        self.self_device_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.device_memory_usage = 0
        self.self_device_memory_usage = 0
        self.input_shapes = input_shapes
        self.stack = stack or []
        self.is_top_level = False
        self.is_async = False
        self.overload_name = ""

    def add(self, e):
        self.count += e.count
        self.flops += e.flops
        self.cpu_time_total += e.cpu_time_total
        self.self_cpu_time_total += e.self_cpu_time_total
        self.device_time_total += e.device_time_total
        self.self_device_time_total += e.self_device_time_total
        self.cpu_memory_usage += e.cpu_memory_usage
        self.self_cpu_memory_usage += e.self_cpu_memory_usage
        self.device_memory_usage += e.device_memory_usage
        self.self_device_memory_usage += e.self_device_memory_usage
        if getattr(e, "cpu_parent", None) is None or getattr(e, "is_top_level", False):
            self.is_top_level = True
        return self

    __iadd__ = add

    name = property(lambda self: self.key)
    cpu_time = property(lambda self: self.cpu_time_total / self.count if self.count else 0.0)
    device_time = property(
        lambda self: self.device_time_total / self.count if self.count else 0.0)
    cuda_time = device_time
    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)
    cuda_memory_usage = property(lambda self: self.device_memory_usage)
    self_cuda_memory_usage = property(lambda self: self.self_device_memory_usage)

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key!r} count={self.count} "
                f"self_cpu_time_total={_fmt_time(self.self_cpu_time_total)} "
                f"cpu_time_total={_fmt_time(self.cpu_time_total)} "
                f"input_shapes={self.input_shapes} "
                f"cpu_memory_usage={self.cpu_memory_usage}>")


_SORT_KEYS = {
    "cpu_time": "cpu_time", "cpu_time_total": "cpu_time_total",
    "self_cpu_time_total": "self_cpu_time_total", "count": "count", "flops": "flops",
    "device_time": "device_time", "cuda_time": "device_time",
    "device_time_total": "device_time_total", "cuda_time_total": "device_time_total",
    "self_device_time_total": "self_device_time_total",
    "self_cuda_time_total": "self_device_time_total",
    "cpu_memory_usage": "cpu_memory_usage", "self_cpu_memory_usage": "self_cpu_memory_usage",
    "device_memory_usage": "device_memory_usage", "cuda_memory_usage": "device_memory_usage",
    "self_device_memory_usage": "self_device_memory_usage",
    "self_cuda_memory_usage": "self_device_memory_usage",
}


class EventList(list):
    """The events of a profile (``prof.events()``), in start order, with PyTorch's summaries.

    >>> import fiamma
    >>> from fiamma.profiler import profile
    >>> with profile() as prof:
    ...     y = fiamma.ones(4) + 1
    >>> [a.key for a in prof.events().key_averages()]
    ['aten::ones', 'aten::add']
    """

    def __init__(self, events=(), profile_memory=False, with_device=False, trace=None):
        super().__init__(events)
        self._profile_memory = profile_memory
        self._with_device = with_device
        self._trace = trace  # what export_chrome_trace needs beyond the events

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shapes=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        """One :class:`FunctionEventAvg` per event name (and input shapes, and the first
        ``group_by_stack_n`` stack frames, when asked), in order of first appearance. (The
        keyword is ``group_by_input_shapes`` here, as on PyTorch's EventList; the profilers'
        own ``key_averages`` spell it ``group_by_input_shape``.)"""
        group_by_input_shape = group_by_input_shapes
        if not isinstance(group_by_stack_n, int) or group_by_stack_n < 0:
            raise ValueError("key_averages: group_by_stack_n must be an int >= 0, got "
                             f"{group_by_stack_n!r}")
        groups = {}
        for e in self:
            shapes = str(e.input_shapes) if group_by_input_shape else None
            stack = tuple(e.stack[:group_by_stack_n]) if group_by_stack_n else ()
            k = (e.name, shapes, stack)
            g = groups.get(k)
            if g is None:
                g = groups[k] = FunctionEventAvg(
                    e.name, e.input_shapes if group_by_input_shape else None, list(stack))
            g.add(e)
        out = EventList(groups.values(), self._profile_memory, self._with_device)
        out._grouped_by_shape = group_by_input_shape
        out._stack_n = group_by_stack_n
        return out

    def total_average(self):
        """One FunctionEventAvg summing every event (key "Total")."""
        total = FunctionEventAvg("Total")
        for e in self:
            total.add(e)
        return total

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False):
        """PyTorch's text table of these events (or averages), sorted by ``sort_by``
        descending (a key such as "self_cpu_time_total", "cpu_time_total", "count",
        "cpu_memory_usage", "device_time_total"), at most ``row_limit`` rows (-1: all)."""
        from fiamma.profiler._table import build_table

        if sort_by is not None and sort_by not in _SORT_KEYS:
            raise ValueError(f"table: sort_by must be one of {sorted(_SORT_KEYS)}, got "
                             f"{sort_by!r}")
        return build_table(self, _SORT_KEYS.get(sort_by), row_limit, max_src_column_width,
                           max_name_column_width, max_shapes_column_width, header,
                           top_level_events_only)

    def export_chrome_trace(self, path):
        """Write the events as Chrome trace JSON (opens in Perfetto and chrome://tracing)."""
        from fiamma.profiler._trace import write_chrome_trace

        write_chrome_trace(self, path)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """Write ``frame;frame;...;op value`` lines (outermost frame first), the input of
        flamegraph.pl and speedscope; needs ``with_stack=True``."""
        metric = _SORT_KEYS.get(metric)
        if metric not in ("self_cpu_time_total", "self_device_time_total"):
            raise ValueError("export_stacks: metric must be 'self_cpu_time_total' or "
                             f"'self_cuda_time_total'/'self_device_time_total', got {metric!r}")
        lines = []
        for e in self:
            if not e.stack:
                continue
            frames = [s.replace(";", "_") for s in reversed(e.stack)]
            value = int(getattr(e, metric))
            if value > 0:
                lines.append(";".join(frames + [e.name.replace(";", "_")]) + f" {value}")
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + ("\n" if lines else ""))
        os.replace(tmp, path)

    def __repr__(self):
        return f"EventList({list.__repr__(self)})"


def _fmt_time(us):
    if abs(us) >= 1e6:
        return f"{us / 1e6:.3f}s"
    if abs(us) >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def build(rec):
    """The FunctionEvents of a finished Recorder, in start order, parents linked."""
    dev_times = {}
    if rec.base_event is not None:
        dev_times = _device_times(rec)
    by_record = {}
    events = []
    for i, r in enumerate(rec.raw):
        mem = (0, 0)
        if rec.mem is not None:
            m0, m1 = r[R.MEM0], r[R.MEM1]
            mem = (m1 - m0, 0) if rec.dev_mem is None else (m1[0] - m0[0], m1[1] - m0[1])
        dt = dev_times.get(i)
        e = FunctionEvent(
            i + 1, r[R.NAME], r[R.TID], r[R.T0] - rec.perf0, r[R.T1] - rec.perf0, r[R.CAT],
            _shape_lists(r[R.SHAPES]), _frames(r[R.STACK]), mem[0], mem[1],
            device_time_ns=dt[1] if dt else 0, device_start_ns=dt[0] if dt else None,
            device_index=r[R.DEV][2] if dt else 0, flops=r[R.FLOPS])
        parent = r[R.PARENT]
        if parent is not None:
            p = by_record.get(id(parent))
            if p is not None:
                e.cpu_parent = p
                p.cpu_children.append(e)
        by_record[id(r)] = e
        events.append(e)
    return events


def _shape_lists(shapes):
    if shapes is None:
        return None
    return [[list(t) for t in s] if s.__class__ is list else list(s) for s in shapes]


def _frames(stack):
    if not stack:
        return stack
    return [f"{file}({line}): {name}" for file, line, name in stack]


def _device_times(rec):
    """(start ns after the recording's base CUDA event, elapsed ns) per record index."""
    out = {}
    if not any(r[R.DEV] is not None for r in rec.raw):
        return out
    import fiamma.cuda

    for r in rec.raw:  # every event recorded must have completed before it is read
        if r[R.DEV] is not None:
            r[R.DEV][1].synchronize()
    fiamma.cuda.synchronize()
    base = rec.base_event
    for i, r in enumerate(rec.raw):
        if r[R.DEV] is not None:
            start, end = r[R.DEV][0], r[R.DEV][1]
            out[i] = (int(base.elapsed_time(start) * 1e6), int(start.elapsed_time(end) * 1e6))
    return out
