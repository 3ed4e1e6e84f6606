"""Pooling beside PyTorch (2 threads, float32): LeNet's max pool forward and forward+backward,
the ResNet stem's max pool, the ResNet head's adaptive average pool and a 2x2 average pool.
Medians of interleaved runs (fiamma, torch, fiamma, ...), so load on a shared machine hits both.

    PYTHONPATH=packages/core/src:packages/autograd/src python benchmarks/bench_pool.py
"""

import statistics
import time

import numpy as np
import torch

import fiamma

torch.set_num_threads(2)
TF = torch.nn.functional


def _once(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def compare(name, ff, tf, reps=30):
    ff()
    tf()
    a, b = [], []
    for _ in range(reps):
        a.append(_once(ff))
        b.append(_once(tf))
    fa, ta = statistics.median(a), statistics.median(b)
    print(f"{name:40s} fiamma {fa * 1e3:8.3f} ms  torch {ta * 1e3:8.3f} ms  "
          f"ratio {fa / ta:5.2f}", flush=True)


def pair(rng, shape):
    a = rng.standard_normal(shape).astype(np.float32)
    return fiamma.tensor(a), torch.tensor(a)


def main():
    rng = np.random.default_rng(0)
    xf, xt = pair(rng, (64, 32, 26, 26))
    compare("max_pool2d k2 (64,32,26,26) fwd", lambda: fiamma.max_pool2d(xf, 2),
            lambda: TF.max_pool2d(xt, 2))
    xfg, xtg = xf.detach().requires_grad_(), xt.detach().requires_grad_()
    gf, gt = fiamma.ones(64, 32, 13, 13), torch.ones(64, 32, 13, 13)

    def ffb():
        fiamma.max_pool2d(xfg, 2).backward(gf)
        xfg.grad = None

    def tfb():
        TF.max_pool2d(xtg, 2).backward(gt)
        xtg.grad = None

    compare("max_pool2d k2 (64,32,26,26) fwd+bwd", ffb, tfb)
    xf, xt = pair(rng, (8, 64, 112, 112))
    compare("max_pool2d k3 s2 p1 (8,64,112,112) fwd", lambda: fiamma.max_pool2d(xf, 3, 2, 1),
            lambda: TF.max_pool2d(xt, 3, 2, 1), 15)
    xf, xt = pair(rng, (8, 512, 7, 7))
    compare("adaptive_avg_pool2d(1) (8,512,7,7)", lambda: fiamma.adaptive_avg_pool2d(xf, 1),
            lambda: TF.adaptive_avg_pool2d(xt, 1))
    xf, xt = pair(rng, (32, 64, 56, 56))
    compare("avg_pool2d k2 (32,64,56,56)", lambda: fiamma.avg_pool2d(xf, 2),
            lambda: TF.avg_pool2d(xt, 2), 15)


if __name__ == "__main__":
    main()
