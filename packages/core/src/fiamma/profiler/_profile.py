"""``profile``, ``schedule``, ``ProfilerActivity`` and ``ProfilerAction`` (torch.profiler's API)."""

import enum
import os
import warnings

from fiamma.profiler import _record as R
from fiamma.profiler._events import EventList, build

__all__ = ["ProfilerActivity", "ProfilerAction", "schedule", "profile", "supported_activities"]


class ProfilerActivity(enum.Enum):
    """What a profile records: ``CPU`` (ops and annotations on the host) and ``CUDA`` (GPU time
    of the ops on CUDA tensors, measured with CUDA events)."""

    CPU = 0
    CUDA = 2

    def __repr__(self):
        return f"<ProfilerActivity.{self.name}: {self.value}>"


class ProfilerAction(enum.Enum):
    """What a schedule asks of a step: nothing, record and discard (warm up), record, or record
    and hand the cycle to ``on_trace_ready``."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def supported_activities():
    """The activities this process can record: CPU, and CUDA when a GPU is usable.

    >>> from fiamma.profiler import ProfilerActivity, supported_activities
    >>> ProfilerActivity.CPU in supported_activities()
    True
    """
    import fiamma.cuda

    out = {ProfilerActivity.CPU}
    if fiamma.cuda.is_available():
        out.add(ProfilerActivity.CUDA)
    return out


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """A schedule for ``profile(schedule=...)``: after ``skip_first`` steps, cycles of ``wait``
    idle steps, ``warmup`` steps recorded and discarded, and ``active`` recorded steps whose
    events go to ``on_trace_ready`` at the cycle's end; ``repeat`` cycles (0: until the profile
    stops). ``skip_first_wait=1`` leaves out the first cycle's wait.

    >>> from fiamma.profiler import schedule
    >>> s = schedule(wait=1, warmup=1, active=2, repeat=1)
    >>> [s(i).name for i in range(5)]
    ['NONE', 'WARMUP', 'RECORD', 'RECORD_AND_SAVE', 'NONE']
    """
    for name, v in (("wait", wait), ("warmup", warmup), ("active", active),
                    ("repeat", repeat), ("skip_first", skip_first),
                    ("skip_first_wait", skip_first_wait)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"schedule: {name} must be an int >= 0, got {v!r}")
    if active < 1:
        raise ValueError(f"schedule: active must be >= 1, got {active}")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results",
                      stacklevel=2)
    cycle = wait + warmup + active

    def schedule_fn(step):
        if not isinstance(step, int) or step < 0:
            raise ValueError(f"schedule: step must be an int >= 0, got {step!r}")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        k = step % cycle
        if k < wait:
            return ProfilerAction.NONE
        if k < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if k < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


def _record_always(step):
    return ProfilerAction.RECORD


_UNSUPPORTED = ("with_modules", "experimental_config", "execution_trace_observer",
                "custom_trace_id_callback")


class profile:
    """Record where the time and memory of a program go: every op of fiamma (the functions and
    Tensor methods), autograd's backward nodes, optimizer steps, DataLoader fetches and
    ``record_function`` blocks, with wall time on the CPU, input shapes (``record_shapes``),
    tensor memory allocated (``profile_memory``), the Python stack (``with_stack``) and, for
    ``ProfilerActivity.CUDA``, GPU time from CUDA events.

    Use as a context manager, or with ``start()``/``stop()``; call ``step()`` at the end of each
    training step when a ``schedule`` says which steps to record. ``on_trace_ready(prof)`` runs
    when a cycle of the schedule (or, without one, the whole profile) has finished.

    >>> import fiamma
    >>> from fiamma.profiler import profile, ProfilerActivity
    >>> with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    ...     y = (fiamma.ones(2, 3) * 2).sum()
    >>> [(a.key, a.count) for a in prof.key_averages()]
    [('aten::ones', 1), ('aten::mul', 1), ('aten::sum', 1)]
    >>> print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=5))  # doctest: +SKIP
    """

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None,
                 record_shapes=False, profile_memory=False, with_stack=False, with_flops=False,
                 with_modules=False, experimental_config=None, execution_trace_observer=None,
                 acc_events=False, use_cuda=None, custom_trace_id_callback=None):
        given = {"with_modules": with_modules,
                 "experimental_config": experimental_config,
                 "execution_trace_observer": execution_trace_observer,
                 "custom_trace_id_callback": custom_trace_id_callback}
        for name in _UNSUPPORTED:
            if given[name]:
                raise NotImplementedError(f"fiamma.profiler.profile: {name} is not supported "
                                          "(fiamma records times, shapes, memory, stacks and "
                                          "FLOPs)")
        if activities is None:
            activities = supported_activities()
        activities = set(activities)
        for a in activities:
            if not isinstance(a, ProfilerActivity):
                raise TypeError("profile: activities must be ProfilerActivity values, got "
                                f"{a!r}")
        if use_cuda:
            warnings.warn("The attribute `use_cuda` will be deprecated soon, please use "
                          "ProfilerActivity.CUDA instead.", FutureWarning, stacklevel=2)
            activities.add(ProfilerActivity.CUDA)
        if schedule is not None and not callable(schedule):
            raise TypeError(f"profile: schedule must be callable, got {type(schedule).__name__}")
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError("profile: on_trace_ready must be callable, got "
                            f"{type(on_trace_ready).__name__}")
        self.activities = activities
        self.record_shapes = bool(record_shapes)
        self.profile_memory = bool(profile_memory)
        self.with_stack = bool(with_stack)
        self.with_flops = bool(with_flops)
        self.acc_events = bool(acc_events)
        self.on_trace_ready = on_trace_ready
        self.schedule = schedule if schedule is not None else _record_always
        self.record_steps = schedule is not None
        self.step_num = 0
        self.current_action = None
        self._cuda = False
        if ProfilerActivity.CUDA in activities:
            import fiamma.cuda

            if fiamma.cuda.is_available():
                self._cuda = True
            else:
                warnings.warn("fiamma.profiler: ProfilerActivity.CUDA asked for but CUDA is "
                              "not available; recording CPU activity only", stacklevel=2)
        self._rec = None
        self._events = None
        self._step_fn = None
        self._metadata = {}

    # ---- the recording of one cycle ------------------------------------------------------------
    def _begin(self):
        self._rec = R.Recorder(self.record_shapes, self.profile_memory, self.with_stack,
                               self._cuda, self.with_flops)
        R.activate(self._rec)

    def _end(self, keep):
        rec, self._rec = self._rec, None
        if rec is None:
            return
        R.deactivate(rec)
        if not keep:
            return
        events = build(rec)
        info = {"epoch0_ns": rec.epoch0, "pid": os.getpid()}
        if self.acc_events and self._events is not None:
            # later cycles keep their place on the time line of the first one
            shift = rec.perf0 - self._events._trace["perf0_ns"]
            offset = len(self._events)
            for e in events:
                e.id += offset
                e.start_ns += shift
                e.end_ns += shift
                if e.device_start_ns is not None:
                    e.device_start_ns += shift
            events = list(self._events) + events
            info = dict(self._events._trace)
        else:
            info["perf0_ns"] = rec.perf0
        if self._metadata:
            info["metadata"] = dict(self._metadata)
        if self._cuda:
            info["device_properties"] = _device_properties()
        self._events = EventList(events, self.profile_memory, self._cuda, trace=info)

    def _ready(self):
        self._end(True)
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _transit(self, prev, cur):
        A = ProfilerAction
        recording = (A.WARMUP, A.RECORD, A.RECORD_AND_SAVE)
        if prev in (None, A.NONE):
            if cur in recording:
                self._begin()
        elif prev is A.WARMUP:
            if cur in (None, A.NONE):
                if cur is None:
                    warnings.warn("Incorrect schedule: Stop profiler while in WARMUP",
                                  stacklevel=3)
                self._end(False)
            elif cur in (A.RECORD, A.RECORD_AND_SAVE):
                self._end(False)  # the warmup steps' events are discarded
                self._begin()
        elif prev is A.RECORD:
            if cur in (None, A.NONE, A.WARMUP):
                if cur is not None:
                    warnings.warn(f"Incorrect schedule: RECORD followed by {cur.name}",
                                  stacklevel=3)
                self._ready()
                if cur is A.WARMUP:
                    self._begin()
        elif prev is A.RECORD_AND_SAVE:
            self._ready()
            if cur in recording:
                self._begin()

    # ---- the public API ------------------------------------------------------------------------
    def start(self):
        """Start profiling (the schedule decides whether step 0 records)."""
        if self.current_action is not None:
            raise RuntimeError("profile.start: this profile was already started")
        R.acquire(self)
        try:
            self.current_action = self.schedule(self.step_num)
            self._transit(None, self.current_action)
        except BaseException:
            self.current_action = None
            R.release(self)
            raise
        self._enter_step()

    def stop(self):
        """Stop profiling; a cycle being recorded goes to ``on_trace_ready``."""
        if self.current_action is None:
            return
        self._exit_step()
        prev, self.current_action = self.current_action, None
        try:
            self._transit(prev, None)
        finally:
            R.release(self)

    def step(self):
        """Mark the end of a training step: the schedule decides what the next step does."""
        if self.current_action is None:
            raise RuntimeError("profile.step: the profile is not running (call start() or "
                               "use it as a context manager)")
        self._exit_step()
        prev = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(prev, self.current_action)
        self._enter_step()

    def _enter_step(self):
        if self.record_steps and self._rec is not None:
            self._step_fn = R.record_function(f"ProfilerStep#{self.step_num}")
            self._step_fn.__enter__()

    def _exit_step(self):
        if self._step_fn is not None:
            self._step_fn.__exit__(None, None, None)
            self._step_fn = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def events(self):
        """The events of the last finished cycle (all cycles with ``acc_events``)."""
        if self._events is None:
            return EventList((), self.profile_memory, self._cuda)
        return self._events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        """Events grouped by name (and input shapes / stack) with summed times and memory."""
        return self.events().key_averages(group_by_input_shape, group_by_stack_n,
                                          group_by_overload_name)

    def export_chrome_trace(self, path):
        """Write the last cycle as Chrome trace JSON (Perfetto, chrome://tracing)."""
        from fiamma.profiler._trace import write_chrome_trace

        return write_chrome_trace(self.events(), path)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """Write the stacks of the last cycle for flame graphs (needs ``with_stack=True``)."""
        return self.events().export_stacks(path, metric)

    def add_metadata(self, key, value):
        """Add a ``key: value`` string pair to the traces written from now on."""
        self._metadata[str(key)] = str(value)

    def add_metadata_json(self, key, value):
        """Add a ``key: value`` pair whose value is a JSON string."""
        import json

        self._metadata[str(key)] = json.loads(value)

    @property
    def self_cpu_time_total(self):
        return self.events().self_cpu_time_total


def _device_properties():
    try:
        import fiamma.cuda

        return [{"id": i, "name": fiamma.cuda.get_device_name(i)}
                for i in range(fiamma.cuda.device_count())]
    except Exception:  # the names are decoration; a driver that can't tell is no error
        return []
