"""The text table of ``EventList.table`` (PyTorch's columns, units and footer)."""

import math

from fiamma.profiler._events import _fmt_time

_KB, _MB, _GB = 1024, 1024 ** 2, 1024 ** 3


def _fmt_mem(n):
    if abs(n) >= _GB:
        return f"{n / _GB:.2f} Gb"
    if abs(n) >= _MB:
        return f"{n / _MB:.2f} Mb"
    if abs(n) >= _KB:
        return f"{n / _KB:.2f} Kb"
    return f"{n} b"


def _pct(x, total):
    return f"{100.0 * x / total:.2f}%" if total else "0.00%"


_FLOP_UNITS = ("FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs")


def _flops_scale(events):
    """(header, factor): the unit that suits the smallest nonzero FLOP count, as PyTorch's."""
    nonzero = [e.flops for e in events if getattr(e, "flops", 0) > 0]
    if not nonzero:
        return None, 1.0
    k = int(max(0.0, min(math.log10(min(nonzero)) / 3.0, len(_FLOP_UNITS) - 1)))
    return f"Total {_FLOP_UNITS[k]}", 10.0 ** (-3 * k)


def _clip(s, width):
    return s if len(s) <= width else s[:width - 3] + "..."


def build_table(events, sort_key, row_limit, max_src_width, max_name_width, max_shapes_width,
                header, top_level_only):
    rows = list(events)
    if top_level_only:
        rows = [e for e in rows
                if getattr(e, "cpu_parent", None) is None and getattr(e, "is_top_level", True)]
    if sort_key is not None:
        rows.sort(key=lambda e: getattr(e, sort_key), reverse=True)
    if row_limit is not None and row_limit >= 0:
        rows = rows[:row_limit]
    # the totals the percentages are of: every event's self time (nothing counted twice)
    self_cpu = sum(e.self_cpu_time_total for e in events)
    self_dev = sum(e.self_device_time_total for e in events)
    with_dev = events._with_device or self_dev > 0
    with_mem = events._profile_memory
    with_dev_mem = with_mem and any(e.device_memory_usage for e in events)
    with_shapes = getattr(events, "_grouped_by_shape", False)
    stack_n = getattr(events, "_stack_n", 0)

    cols = [("Name", max(4, min(max_name_width, max((len(e.key) for e in rows), default=4))))]
    cols += [("Self CPU %", 12), ("Self CPU", 12), ("CPU total %", 12), ("CPU total", 12),
             ("CPU time avg", 12)]
    if with_dev:
        cols += [("Self CUDA", 12), ("Self CUDA %", 12), ("CUDA total", 12),
                 ("CUDA time avg", 13)]
    if with_mem:
        cols += [("CPU Mem", 12), ("Self CPU Mem", 12)]
    if with_dev_mem:
        cols += [("CUDA Mem", 12), ("Self CUDA Mem", 13)]
    cols.append(("# of Calls", 12))
    flops_header, flops_factor = _flops_scale(events)
    if flops_header:
        cols.append((flops_header, 12))
    if with_shapes:
        cols.append(("Input Shapes", max(12, min(max_shapes_width, max(
            (len(str(e.input_shapes)) for e in rows), default=12)))))
    if stack_n:
        cols.append(("Source Location", max(15, min(max_src_width, max(
            (len(s) for e in rows for s in e.stack), default=15)))))

    def line(cells):
        return "  ".join(c.rjust(w) if i else c.ljust(w)
                         for i, (c, (_, w)) in enumerate(zip(cells, cols)))

    sep = "  ".join("-" * w for _, w in cols)
    out = []
    if header:
        out.append("=" * len(sep))
        out.append(header)
    out += [sep, line([h for h, _ in cols]), sep]
    for e in rows:
        cells = [_clip(e.key, cols[0][1]),
                 _pct(e.self_cpu_time_total, self_cpu), _fmt_time(e.self_cpu_time_total),
                 _pct(e.cpu_time_total, self_cpu), _fmt_time(e.cpu_time_total),
                 _fmt_time(e.cpu_time_total / max(e.count, 1))]
        if with_dev:
            cells += [_fmt_time(e.self_device_time_total), _pct(e.self_device_time_total,
                                                                 self_dev),
                      _fmt_time(e.device_time_total),
                      _fmt_time(e.device_time_total / max(e.count, 1))]
        if with_mem:
            cells += [_fmt_mem(e.cpu_memory_usage), _fmt_mem(e.self_cpu_memory_usage)]
        if with_dev_mem:
            cells += [_fmt_mem(e.device_memory_usage), _fmt_mem(e.self_device_memory_usage)]
        cells.append(str(e.count))
        if flops_header:
            f = getattr(e, "flops", 0)
            cells.append(f"{f * flops_factor:8.3f}" if f > 0 else "--")
        if with_shapes:
            cells.append(_clip(str(e.input_shapes), cols[len(cells)][1]))
        if stack_n:
            first = e.stack[0] if e.stack else ""
            cells.append(_clip(first, cols[len(cells)][1]))
        out.append(line(cells))
        if stack_n:
            for s in e.stack[1:stack_n]:
                extra = [""] * (len(cols) - 1) + [_clip(s, cols[-1][1])]
                out.append(line(extra))
    out.append(sep)
    out.append(f"Self CPU time total: {_fmt_time(self_cpu)}")
    if with_dev:
        out.append(f"Self CUDA time total: {_fmt_time(self_dev)}")
    return "\n".join(out) + "\n"
