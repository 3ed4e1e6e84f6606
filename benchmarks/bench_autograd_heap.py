"""Autograd's per-op cost with a large Python heap, fiamma beside PyTorch.

The workload is bench.py's gradient chain: 10,000 adds ``z = z + y`` of 16-element float32
tensors that require grad, then one ``z.sum().backward()``. Each library runs in its own fresh
process holding ``--objects`` extra live Python objects (small lists, all tracked by the cyclic
GC, like the objects of a real program with pandas or transformers loaded); the processes
alternate (fiamma, torch, fiamma, ...), and each reports the mean thread CPU time per op over its
``--rounds`` chains (forward and backward apart), the time spent in the cyclic GC
(gc.callbacks) and the number of full collections. The GC is left ON: its cost is the subject.
Thread CPU time (time.thread_time) rather than wall time, because the machine is shared; the
table gives the median over the processes and the least disturbed one.

    python benchmarks/bench_autograd_heap.py                 # 0 and 1M extra objects
    python benchmarks/bench_autograd_heap.py --objects 1000000 --pairs 5 --rounds 48
    # a second fiamma tree (an earlier commit's packages/*/src, say) in the same rotation:
    python benchmarks/bench_autograd_heap.py --also before=/tmp/base/core/src:/tmp/base/autograd/src

Graph nodes that outlive the forward pass are promoted to the GC's oldest generation, and every
``len(heap) / 4`` promotions trigger a full collection that traverses the whole heap; PyTorch's
graph lives in C++ and is invisible to the GC (only its tensors are Python objects). A full
collection every few chains makes one process's figure depend on where its collections fall:
use enough ``--rounds`` (48 chains see ~2 full collections at 1M objects).
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
else:
    import fiamma as lib
lib.set_num_threads(1)
junk = [[i] for i in range(nobj)]
x = lib.from_numpy(np.ones(16, np.float32)).requires_grad_()
y = lib.from_numpy(np.ones(16, np.float32)).requires_grad_()
N = 10_000
T = time.thread_time
span = [0.0, 0.0]
def run():
    x.grad = None
    y.grad = None
    t0 = T()
    z = x
    for _ in range(N):
        z = z + y
    t1 = T()
    z.sum().backward()
    span[0] += t1 - t0
    span[1] += T() - t1
    assert float(y.grad[0]) == N
acc = [0.0, 0.0, 0]
def cb(phase, info):
    if phase == "start":
        acc[1] = T()
    else:
        acc[0] += T() - acc[1]
        acc[2] += info["generation"] == 2
run()
run()
span[:] = [0.0, 0.0]
gc.callbacks.append(cb)
for _ in range(rounds):
    run()
gc.callbacks.remove(cb)
k = rounds * N / 1e6
print(span[0] / k, span[1] / k, acc[0] / k, acc[2], len(gc.get_objects()))
"""


def child(lib, pythonpath, nobj, rounds):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    out = subprocess.run([sys.executable, "-c", CHILD, lib, str(nobj), str(rounds)],
                         capture_output=True, text=True, env=env, check=True).stdout.split()
    fwd, bwd, gct = float(out[0]), float(out[1]), float(out[2])
    return fwd + bwd, fwd, bwd, gct, int(out[3]), int(out[4])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, nargs="*", default=[0, 1_000_000])
    ap.add_argument("--pairs", type=int, default=3, help="processes per library")
    ap.add_argument("--rounds", type=int, default=24, help="chains per process")
    ap.add_argument("--also", action="append", default=[], metavar="NAME=PYTHONPATH",
                    help="another fiamma tree to time in the same rotation")
    a = ap.parse_args()
    libs = [("fiamma", "fiamma", None)]
    for spec in a.also:
        name, _, path = spec.partition("=")
        libs.append((name, "fiamma", path))
    libs.append(("torch", "torch", None))
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    for nobj in a.objects:
        res = {name: [] for name, _, _ in libs}
        for _ in range(a.pairs):
            for name, lib, path in libs:
                res[name].append(child(lib, path, nobj, a.rounds))
        torch_med = statistics.median(r[0] for r in res["torch"])
        print(f"{nobj:>9} extra objects, {a.pairs} processes x {a.rounds} chains each "
              "(us/op, thread CPU time; median over processes, min in brackets):")
        for name, _, _ in libs:
            r = res[name]
            med = [statistics.median(v[i] for v in r) for i in range(4)]
            print(f"  {name:>8}: {med[0]:.2f} [{min(v[0] for v in r):.2f}] "
                  f"(forward {med[1]:.2f}, backward {med[2]:.2f}; GC {med[3]:.2f}, full "
                  f"collections {[v[4] for v in r]}; heap {r[0][5]} tracked) "
                  f"ratio to torch {med[0] / torch_med:.2f}x")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
