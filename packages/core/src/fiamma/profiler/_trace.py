"""Chrome trace JSON (the format Perfetto, chrome://tracing and TensorBoard's profiler read) and
``tensorboard_trace_handler``.

Each event is a complete event (``"ph": "X"``) with ``ts`` (start, microseconds since the Unix
epoch) and ``dur`` (microseconds) on its process and thread; GPU time measured with CUDA events
goes on a process of its own per device ("GPU 0"), as PyTorch's traces put kernels.
"""

import os
import time

__all__ = ["write_chrome_trace", "chrome_trace", "tensorboard_trace_handler"]


def chrome_trace(events):
    """The trace of ``events`` (an EventList) as a JSON-ready dict."""
    info = events._trace or {}
    epoch_us = info.get("epoch0_ns", 0) / 1e3
    pid = info.get("pid", os.getpid())
    out = []
    tids = {}
    gpus = set()
    for e in events:
        tid = tids.setdefault(e.thread, len(tids) + 1) if e.thread else 0
        args = {"External id": e.id}
        if e.input_shapes:
            args["Input Dims"] = e.input_shapes
        if e.stack:
            args["Call stack"] = ";".join(e.stack)
        if events._profile_memory:
            args["CPU Mem"] = e.cpu_memory_usage
            args["Self CPU Mem"] = e.self_cpu_memory_usage
        if e.cpu_parent is not None:
            args["Parent id"] = e.cpu_parent.id
        out.append({"ph": "X", "cat": e.cat, "name": e.name, "pid": pid, "tid": tid,
                    "ts": round(epoch_us + e.start_ns / 1e3, 3),
                    "dur": round((e.end_ns - e.start_ns) / 1e3, 3), "args": args})
        if e.device_start_ns is not None:
            gpus.add(e.device_index)
            out.append({"ph": "X", "cat": "kernel", "name": e.name, "pid": e.device_index,
                        "tid": 7, "ts": round(epoch_us + e.device_start_ns / 1e3, 3),
                        "dur": round(e.device_time_ns / 1e3, 3),
                        "args": {"External id": e.id, "device": e.device_index,
                                 "stream": 7, "timing": "CUDA events around the op"}})
    meta = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
             "args": {"name": "python"}}]
    for ident, tid in tids.items():
        meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                     "args": {"name": f"thread {tid} ({ident})"}})
    for g in sorted(gpus):
        meta.append({"ph": "M", "name": "process_name", "pid": g, "tid": 0,
                     "args": {"name": f"GPU {g}"}})
    trace = {"schemaVersion": 1, "displayTimeUnit": "ms",
             "traceName": info.get("name", ""),
             "deviceProperties": info.get("device_properties", []),
             "traceEvents": meta + out}
    trace.update(info.get("metadata", {}))
    return trace


def write_chrome_trace(events, path, use_gzip=None):
    """Write ``events`` as Chrome trace JSON at ``path`` (gzip-compressed when the name ends
    in ``.gz``), through a temporary file and a rename."""
    import gzip
    import json

    path = os.fspath(path)
    trace = chrome_trace(events)
    trace["traceName"] = path
    data = json.dumps(trace).encode()
    if use_gzip or (use_gzip is None and path.endswith(".gz")):
        data = gzip.compress(data)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return path


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """An ``on_trace_ready`` that writes each finished cycle's trace into ``dir_name`` as
    ``{worker_name}.{time in ms}.pt.trace.json`` (``.gz`` with ``use_gzip``), the layout
    TensorBoard's profiler plugin reads; ``worker_name`` defaults to ``{hostname}_{pid}``.

    >>> import tempfile, fiamma
    >>> from fiamma.profiler import profile, tensorboard_trace_handler
    >>> d = tempfile.mkdtemp()
    >>> with profile(on_trace_ready=tensorboard_trace_handler(d)):
    ...     y = fiamma.ones(3) + 1
    >>> import os; [n.endswith(".pt.trace.json") for n in os.listdir(d)]
    [True]
    """
    dir_name = os.fspath(dir_name)

    def handler(prof):
        import socket

        os.makedirs(dir_name, exist_ok=True)
        name = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        fname = f"{name}.{time.time_ns() // 1_000_000}.pt.trace.json" + (
            ".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, fname))

    return handler
