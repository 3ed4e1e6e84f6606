"""Autograd's per-op cost with a large Python heap, fiamma beside PyTorch.

The workload is bench.py's gradient chain: 10,000 adds ``z = z + y`` of 16-element float32
tensors that require grad, then one ``z.sum().backward()``. Each library runs in its own fresh
process holding ``--objects`` extra live Python objects (small lists, all tracked by the cyclic
GC, like the objects of a real program with pandas or transformers loaded); the processes
alternate, and each reports the mean CPU time per op over its rounds, the CPU time spent in the
cyclic GC (gc.callbacks) and the number of full collections. The GC is left ON: its cost is the
subject. CPU time (time.process_time) rather than wall time, because the machine is shared.

    python benchmarks/bench_autograd_heap.py                 # 0 and 1M extra objects
    python benchmarks/bench_autograd_heap.py --objects 1000000 --pairs 5

Graph nodes that outlive the forward pass are promoted to the GC's oldest generation, and every
``len(heap) / 4`` promotions trigger a full collection that traverses the whole heap; PyTorch's
graph lives in C++ and is invisible to the GC (only its tensors are Python objects).
"""

import argparse
import os
import statistics
import subprocess
import sys

CHILD = r"""
import gc, sys, time
lib_name, nobj, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
import numpy as np
if lib_name == "torch":
    import torch as lib
    lib.set_num_threads(1)
else:
    import fiamma as lib
    lib.set_num_threads(1)
junk = [[i] for i in range(nobj)]
x = lib.from_numpy(np.ones(16, np.float32)).requires_grad_()
y = lib.from_numpy(np.ones(16, np.float32)).requires_grad_()
N = 10_000
def run():
    x.grad = None
    y.grad = None
    z = x
    for _ in range(N):
        z = z + y
    z.sum().backward()
    assert float(y.grad[0]) == N
acc = [0.0, 0.0, 0]
def cb(phase, info):
    if phase == "start":
        acc[1] = time.process_time()
    else:
        acc[0] += time.process_time() - acc[1]
        acc[2] += info["generation"] == 2
run()
run()
gc.callbacks.append(cb)
t = time.process_time()
for _ in range(rounds):
    run()
t = time.process_time() - t
gc.callbacks.remove(cb)
print(t / rounds / N * 1e6, acc[0] / rounds / N * 1e6, acc[2], len(gc.get_objects()))
"""


def child(lib, nobj, rounds):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, lib, str(nobj), str(rounds)],
                         capture_output=True, text=True, env=env, check=True).stdout.split()
    return float(out[0]), float(out[1]), int(out[2]), int(out[3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, nargs="*", default=[0, 1_000_000])
    ap.add_argument("--pairs", type=int, default=3, help="process pairs (fiamma, torch) each")
    ap.add_argument("--rounds", type=int, default=12, help="chains per process")
    a = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    for nobj in a.objects:
        res = {"fiamma": [], "torch": []}
        for _ in range(a.pairs):
            for lib in ("fiamma", "torch"):
                res[lib].append(child(lib, nobj, a.rounds))
        best = {k: min(v) for k, v in res.items()}  # the least disturbed process
        f, t = best["fiamma"], best["torch"]
        med = statistics.median(r[0] for r in res["fiamma"])
        print(f"{nobj:>9} extra objects (heap {f[3]} / {t[3]} tracked): "
              f"fiamma {f[0]:.2f} us/op (GC {f[1]:.2f}, {f[2]} full collections in "
              f"{a.rounds} chains), torch {t[0]:.2f} us/op (GC {t[1]:.2f}, {t[2]} full); "
              f"ratio {f[0] / t[0]:.2f}x; fiamma median {med:.2f}")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
