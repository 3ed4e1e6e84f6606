"""fiamma.jit / fiamma.onnx speed: trace+export of ResNet-50 (target < 10 s on 2 cores), and
a traced module's call beside the eager model on an MLP and ResNet-18 (ratio in one run).

    python benchmarks/bench_export.py            # all of it
    python benchmarks/bench_export.py --cpu      # only the CPU-time ResNet-18 comparison

The CPU-time comparison is meant for a shared, loaded machine: each round runs eager and the
loaded traced module back to back (alternating which goes first) and measures the process's
CPU time (time.process_time: every thread of this process, not the wall clock that other
processes stretch); the ratio reported is the median of the per-round ratios.
"""

import io
import statistics
import sys
import time
import warnings

import fiamma
import fiamma.jit
import fiamma.nn as nn


def _best(fn, n):
    best = float("inf")
    for _ in range(n):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def cpu_time_compare(name, model, tm, inp, rounds=41, n=3):
    """Per-call CPU time of eager vs the traced module over interleaved rounds."""
    def eager():
        with fiamma.no_grad():
            for _ in range(n):
                model(inp)

    def traced():
        for _ in range(n):
            tm(inp)

    def cpu(fn):
        t = time.process_time()
        fn()
        return (time.process_time() - t) / n

    eager(), traced()  # warm up
    te, tt, ratios = [], [], []
    for r in range(rounds):
        if r % 2:
            b, a = cpu(traced), cpu(eager)
        else:
            a, b = cpu(eager), cpu(traced)
        te.append(a)
        tt.append(b)
        if a > 0:
            ratios.append(b / a)
    q = statistics.quantiles(ratios, n=4)
    print(f"{name} CPU time per call ({rounds} interleaved rounds of {n}): eager median "
          f"{statistics.median(te) * 1e3:.2f} ms, traced median {statistics.median(tt) * 1e3:.2f} "
          f"ms; traced/eager median of per-round ratios {statistics.median(ratios):.3f} "
          f"(quartiles {q[0]:.3f}-{q[2]:.3f})")


def cpu_main():
    warnings.simplefilter("ignore")
    import fiamma.vision.models as M

    fiamma.manual_seed(0)
    r18 = M.resnet18().eval()
    xr = fiamma.randn(1, 3, 224, 224)
    buf = io.BytesIO()
    fiamma.jit.trace(r18, xr).save(buf)
    buf.seek(0)
    cpu_time_compare("resnet18 1x3x224x224", r18, fiamma.jit.load(buf), xr)


def main():
    if "--cpu" in sys.argv[1:]:
        return cpu_main()
    warnings.simplefilter("ignore")
    import fiamma.vision.models as M

    m = M.resnet50().eval()
    x = fiamma.randn(1, 3, 224, 224)
    try:
        import importlib

        fonnx = importlib.import_module("fiamma.onnx")
        t = time.perf_counter()
        fonnx.export(m, x, io.BytesIO())
        print(f"trace+export resnet50 to ONNX: {time.perf_counter() - t:.2f} s (target < 10 s)")
    except ImportError:
        print("onnx not installed: export timing skipped")
    t = time.perf_counter()
    fiamma.jit.trace(m, x, check_trace=False)
    print(f"trace resnet50: {time.perf_counter() - t:.2f} s")

    mlp = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                        nn.Linear(256, 10)).eval()
    xm = fiamma.randn(32, 64)
    tiny = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(),
                         nn.Linear(8, 2)).eval()
    xt = fiamma.randn(1, 8)
    r18 = M.resnet18().eval()
    xr = fiamma.randn(1, 3, 224, 224)
    for name, model, inp, n, reps in (("tiny MLP 1x8 (per-op overhead)", tiny, xt, 500, 15),
                                      ("MLP 32x64", mlp, xm, 100, 30),
                                      ("resnet18 1x3x224x224", r18, xr, 1, 9)):
        buf = io.BytesIO()
        fiamma.jit.trace(model, inp).save(buf)
        buf.seek(0)
        tm = fiamma.jit.load(buf)

        def eager():
            with fiamma.no_grad():
                for _ in range(n):
                    model(inp)

        def traced():
            for _ in range(n):
                tm(inp)

        te = tt = float("inf")
        for _ in range(reps):  # interleaved rounds: machine drift falls on both alike
            te = min(te, _best(eager, 1) / n)
            tt = min(tt, _best(traced, 1) / n)
        print(f"{name}: eager {te * 1e6:.1f} us, loaded traced {tt * 1e6:.1f} us, "
              f"ratio traced/eager {tt / te:.2f}")
    cpu_main()


if __name__ == "__main__":
    main()
