"""Elementwise losses beside PyTorch: forward + backward through autograd (reduction 'mean',
float32) of mse_loss, l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy,
binary_cross_entropy_with_logits (plain, and with weight and pos_weight), soft_margin_loss and
kl_div at (64, 10), (256, 512) and (1024, 4096); the input requires grad, the target does not.
Both libraries in one process, interleaved round-robin; median per call of process CPU time in
microseconds, ratio fiamma / PyTorch.

    python benchmarks/bench_losses.py                 # 1 thread, every size
    python benchmarks/bench_losses.py --sizes 64x10 --only mse_loss,l1_loss
"""

import argparse
import gc
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


def compare(name, ff, tf, rounds, reps):
    for _ in range(2):
        ff()
        tf()
    a, b = [], []
    gc.disable()
    for _ in range(rounds):
        a.append(_time(ff, reps))
        b.append(_time(tf, reps))
    gc.enable()
    fa, ta = statistics.median(a), statistics.median(b)
    print(f"{name:34s} fiamma {fa * 1e6:10.1f} us  torch {ta * 1e6:10.1f} us  ratio "
          f"{fa / ta:5.2f}  (load {os.getloadavg()[0]:.1f})", flush=True)
    return fa, ta


def _cases(F, lib, x, xp, t01, tpm, w, pw):
    """name -> loss callable on one library's tensors."""
    return {
        "mse_loss": lambda: F.mse_loss(x, t01),
        "l1_loss": lambda: F.l1_loss(x, t01),
        "smooth_l1_loss": lambda: F.smooth_l1_loss(x, t01, beta=0.5),
        "huber_loss": lambda: F.huber_loss(x, t01, delta=0.5),
        "binary_cross_entropy": lambda: F.binary_cross_entropy(xp, t01),
        "bce_with_logits": lambda: F.binary_cross_entropy_with_logits(x, t01),
        "bce_with_logits(w, pos_w)": lambda: F.binary_cross_entropy_with_logits(
            x, t01, weight=w, pos_weight=pw),
        "soft_margin_loss": lambda: F.soft_margin_loss(x, tpm),
        "kl_div(batchmean)": lambda: F.kl_div(x, t01, reduction="batchmean"),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--sizes", default="64x10,256x512,1024x4096")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    fiamma.set_num_threads(a.threads)
    only = set(filter(None, a.only.split(",")))
    rng = np.random.default_rng(0)
    print(f"threads {a.threads}, float32, reduction 'mean', forward + backward")
    for size in a.sizes.split(","):
        shape = tuple(int(s) for s in size.split("x"))
        n = shape[0] * shape[1]
        reps = max(1, min(200, 2_000_000 // (n * 20)))
        x = rng.standard_normal(shape).astype(np.float32)
        p = rng.uniform(0.02, 0.98, shape).astype(np.float32)
        t01 = rng.uniform(0, 1, shape).astype(np.float32)
        tpm = np.sign(rng.standard_normal(shape)).astype(np.float32)
        w = rng.uniform(0.5, 1.5, shape[1:]).astype(np.float32)
        pw = rng.uniform(0.5, 3.0, shape[1:]).astype(np.float32)
        libs = {}
        for lib, F, conv in ((fiamma, fiamma.nn.functional, fiamma.from_numpy),
                             (torch, torch.nn.functional, torch.from_numpy)):
            xg = conv(x.copy()).requires_grad_()
            pg = conv(p.copy()).requires_grad_()
            ls = conv(np.log(p)).requires_grad_()  # log-probabilities for kl_div
            cases = _cases(F, lib, xg, pg, conv(t01), conv(tpm), conv(w), conv(pw))
            kl = F.kl_div
            cases["kl_div(batchmean)"] = lambda ls=ls, kl=kl, t=conv(t01): kl(
                ls, t, reduction="batchmean")
            libs[lib] = (cases, (xg, pg, ls))
        print(f"-- {shape}")
        for name in libs[fiamma][0]:
            if only and name not in only:
                continue

            def run(lib, name=name):
                cases, leaves = libs[lib]
                cases[name]().backward()
                for leaf in leaves:
                    leaf.grad = None
            compare(f"{name} {size}", lambda: run(fiamma), lambda: run(torch), a.rounds, reps)


if __name__ == "__main__":
    main()
