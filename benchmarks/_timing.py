"""The timing loops the benchmark scripts share (fiamma beside PyTorch, one process).

    from _timing import compare_min, compare_median
"""

import gc
import os
import statistics
import time


def per_call(fn, reps, clock=time.process_time):
    """Mean seconds per call of ``fn`` over ``reps`` calls (process CPU time by default: on the
    shared machine wall time also counts other processes' slices)."""
    t = clock()
    for _ in range(reps):
        fn()
    return (clock() - t) / reps


def compare_min(name, fns, rounds, reps, width=28, num="9.1f"):
    """Time ``fns`` ({library: fn}, one of them "torch") interleaved round-robin with the GC
    off; print each one's least disturbed round (min over ``rounds`` of the mean CPU time per
    call, in us) and its ratio to torch's."""
    for fn in fns.values():
        fn()
        fn()
    best = dict.fromkeys(fns, float("inf"))
    gc.disable()
    for _ in range(rounds):
        for k, fn in fns.items():
            best[k] = min(best[k], per_call(fn, reps))
    gc.enable()
    t = best["torch"]
    cols = "  ".join(f"{k} {v * 1e6:{num}} us ({v / t:4.2f}x)" for k, v in best.items())
    print(f"{name:{width}s} {cols}  (load {os.getloadavg()[0]:.1f})", flush=True)


def compare_median(name, ff, tf, reps, rounds, digits=3, clock=time.perf_counter):
    """Time fiamma's ``ff`` beside PyTorch's ``tf`` (alternating, ``rounds`` rounds of ``reps``
    calls); print the medians in ms and their ratio, and return the ratio."""
    ff()
    tf()
    a, b = [], []
    for _ in range(rounds):
        a.append(per_call(ff, reps, clock))
        b.append(per_call(tf, reps, clock))
    fa, ta = statistics.median(a), statistics.median(b)
    print(f"{name:44s} fiamma {fa * 1e3:8.{digits}f} ms  torch {ta * 1e3:8.{digits}f} ms  "
          f"ratio {fa / ta:5.2f}", flush=True)
    return fa / ta


def threads_and_filter(argv, default=2):
    """``[--threads N] [TEXT]`` of a benchmark script: the thread count (set for fiamma and,
    if loaded, PyTorch) and the case-name filter ("" for every case)."""
    import sys

    import fiamma

    args = list(argv)
    threads = default
    if "--threads" in args:
        i = args.index("--threads")
        threads = int(args[i + 1])
        del args[i:i + 2]
    fiamma.set_num_threads(threads)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)
    return threads, (args[0] if args else "")

