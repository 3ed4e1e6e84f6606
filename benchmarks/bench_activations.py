"""Fused GELU (exact and tanh), erf, erfinv and trunc_normal_ beside PyTorch: forward, and
forward + backward through autograd, on the GPT benchmark's MLP activation shape (1024, 512)
float32; then forward + backward of the other fused activations (SiLU, LeakyReLU, ELU, SELU,
Hardswish, Hardsigmoid, Softplus, Mish, LogSigmoid, Sigmoid) on the same shape. Both
libraries in one process, interleaved round-robin; median per call of process CPU time in
microseconds, ratio fiamma / PyTorch.

    python benchmarks/bench_activations.py            # 1 thread
    python benchmarks/bench_activations.py --threads 2

Two threads in one process put two OpenMP runtimes on 2 cores, which distorts both columns;
the single-thread figures are the comparison.
"""

import argparse
import gc
import math
import os
import statistics
import time

import numpy as np
import torch

import fiamma


def _time(fn, reps):
    # process CPU time: on the shared VM, wall time also counts other processes' slices
    t = time.process_time()
    for _ in range(reps):
        fn()
    return (time.process_time() - t) / reps


def compare(name, ff, tf, rounds, reps=20):
    for _ in range(3):
        ff()
        tf()
    a, b = [], []
    gc.disable()
    for _ in range(rounds):
        a.append(_time(ff, reps))
        b.append(_time(tf, reps))
    gc.enable()
    fa, ta = statistics.median(a), statistics.median(b)
    print(f"{name:26s} fiamma {fa * 1e6:9.1f} us  torch {ta * 1e6:9.1f} us  ratio {fa / ta:5.2f}"
          f"  (load {os.getloadavg()[0]:.1f})", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    fiamma.set_num_threads(a.threads)
    x = np.random.default_rng(0).standard_normal((1024, 512)).astype(np.float32)
    fx, tx = fiamma.from_numpy(x), torch.from_numpy(x)
    fxg, txg = fx.clone().requires_grad_(), tx.clone().requires_grad_()
    g = np.ones_like(x)
    fg, tg = fiamma.from_numpy(g), torch.from_numpy(g)
    F, TF = fiamma.nn.functional, torch.nn.functional
    print(f"threads {a.threads}, shape {x.shape}")
    compare("erf", lambda: fx.erf(), lambda: tx.erf(), a.rounds)
    u = np.random.default_rng(1).uniform(-1, 1, x.shape).astype(np.float32)
    fu, tu = fiamma.from_numpy(u), torch.from_numpy(u)
    compare("erfinv", lambda: fu.erfinv(), lambda: tu.erfinv(), a.rounds)
    fw, tw = fiamma.empty(x.shape), torch.empty(x.shape)
    compare("trunc_normal_", lambda: fiamma.nn.init.trunc_normal_(fw, std=0.02),
            lambda: torch.nn.init.trunc_normal_(tw, std=0.02), a.rounds)
    for ap_ in ("none", "tanh"):
        compare(f"gelu({ap_}) forward", lambda: F.gelu(fx, approximate=ap_),
                lambda: TF.gelu(tx, approximate=ap_), a.rounds)

        def fb(lib, xg, g, Fn):
            y = Fn.gelu(xg, approximate=ap_)
            y.backward(g)
            xg.grad = None
        compare(f"gelu({ap_}) fwd+bwd", lambda: fb(fiamma, fxg, fg, F),
                lambda: fb(torch, txg, tg, TF), a.rounds)

    def composed(xg, g):  # what F.gelu was before the fused op: five recorded ops
        y = 0.5 * xg * (1.0 + (xg * (1.0 / math.sqrt(2.0))).erf())
        y.backward(g)
        xg.grad = None
    compare("gelu composed fwd+bwd", lambda: composed(fxg, fg), lambda: composed(txg, tg),
            a.rounds)

    acts = {"silu": lambda M, t: M.silu(t), "leaky_relu": lambda M, t: M.leaky_relu(t, 0.2),
            "elu": lambda M, t: M.elu(t), "selu": lambda M, t: M.selu(t),
            "hardswish": lambda M, t: M.hardswish(t), "hardsigmoid": lambda M, t: M.hardsigmoid(t),
            "softplus": lambda M, t: M.softplus(t), "mish": lambda M, t: M.mish(t),
            "logsigmoid": lambda M, t: M.logsigmoid(t), "sigmoid": lambda M, t: t.sigmoid()}
    for name, act in acts.items():
        def fb2(xg, g, M, act=act):
            act(M, xg).backward(g)
            xg.grad = None
        compare(f"{name} fwd+bwd", lambda: fb2(fxg, fg, F), lambda: fb2(txg, tg, TF), a.rounds)


if __name__ == "__main__":
    main()
