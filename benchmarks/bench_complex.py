"""Complex numbers beside NumPy and PyTorch (issue 24's targets, ratios in one run):
complex64 a*b on 10M elements vs NumPy (<= 1.0x), fft of 1M complex64 vs NumPy (<= 1.0x),
complex64 matmul 1024x1024 vs PyTorch (>= 0.9x PyTorch's speed, i.e. time ratio <= 1.11).
Medians of interleaved runs, so load on a shared machine hits both sides.

    PYTHONPATH=packages/core/src python benchmarks/bench_complex.py
"""

import statistics
import time

import numpy as np

import fiamma

try:
    import torch

    torch.set_num_threads(2)
except ImportError:  # the PyTorch comparison is skipped
    torch = None


def _once(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def compare(name, ff, other, oname, reps=15):
    ff()
    other()
    a, b = [], []
    for _ in range(reps):
        a.append(_once(ff))
        b.append(_once(other))
    fa, ob = statistics.median(a), statistics.median(b)
    print(f"{name:34s} fiamma {fa * 1e3:8.3f} ms  {oname} {ob * 1e3:8.3f} ms  "
          f"time ratio {fa / ob:5.2f}", flush=True)
    return fa / ob


def crand(rng, *shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def main():
    rng = np.random.default_rng(0)
    a, b = crand(rng, 10_000_000), crand(rng, 10_000_000)
    fa, fb = fiamma.from_numpy(a), fiamma.from_numpy(b)
    compare("complex64 a*b 10M", lambda: fa * fb, lambda: a * b, "numpy")
    x = crand(rng, 1 << 20)
    fx = fiamma.from_numpy(x)
    compare("fft 1M complex64", lambda: fiamma.fft.fft(fx), lambda: np.fft.fft(x), "numpy")
    m, n = crand(rng, 1024, 1024), crand(rng, 1024, 1024)
    fm, fn = fiamma.from_numpy(m), fiamma.from_numpy(n)
    if torch is not None:
        tm, tn = torch.from_numpy(m), torch.from_numpy(n)
        compare("complex64 matmul 1024^2", lambda: fm @ fn, lambda: tm @ tn, "torch", reps=7)
    compare("complex64 matmul 1024^2", lambda: fm @ fn, lambda: m @ n, "numpy", reps=7)


if __name__ == "__main__":
    main()
