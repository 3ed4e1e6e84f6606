"""Fused cross_entropy beside PyTorch: forward, and forward + backward through autograd, for
class-index targets (mean reduction) on the GPT benchmark's logits (1024, 65), an ImageNet-like
(256, 1000) and a language model's (64, 32000); also with label smoothing and ignore_index, and
fiamma's former composition (log_softmax + nll_loss, four recorded ops) for reference. Both
libraries in one process, interleaved round-robin, 1 thread; min over rounds of the mean CPU
time per call (the machine is shared and loaded: process CPU time, the least disturbed round),
ratio fiamma / PyTorch.

    python benchmarks/bench_xent.py
"""

import argparse

import numpy as np
import torch
from _timing import compare_min

import fiamma


def compare(name, fns, rounds, reps):
    compare_min(name, fns, rounds, reps, width=34, num="8.1f")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=12)
    a = ap.parse_args()
    torch.set_num_threads(1)
    fiamma.set_num_threads(1)
    F, TF = fiamma.nn.functional, torch.nn.functional
    rng = np.random.default_rng(0)
    for n, c in [(1024, 65), (256, 1000), (64, 32000)]:
        x = rng.standard_normal((n, c)).astype(np.float32)
        t = rng.integers(0, c, n)
        fx, tx = fiamma.from_numpy(x).requires_grad_(), torch.from_numpy(x).requires_grad_()
        ft, tt = fiamma.from_numpy(t), torch.from_numpy(t)
        reps = max(3, 200_000 // (n * c) * 5)
        for label, kw in [("", {}), (" ls=0.1 ii=3", {"label_smoothing": 0.1,
                                                       "ignore_index": 3})]:
            def fwd_f(kw=kw):
                with fiamma.no_grad():
                    F.cross_entropy(fx, ft, **kw)

            def fwd_t(kw=kw):
                with torch.no_grad():
                    TF.cross_entropy(tx, tt, **kw)

            def comp_f(kw=kw):
                with fiamma.no_grad():
                    F.nll_loss(fx.log_softmax(1), ft, ignore_index=kw.get("ignore_index", -100))

            compare(f"({n}, {c}){label} forward", {"fiamma": fwd_f, "torch": fwd_t,
                                                   "composed": comp_f} if not kw else
                    {"fiamma": fwd_f, "torch": fwd_t}, a.rounds, reps)

            def fb_f(kw=kw):
                fx.grad = None
                F.cross_entropy(fx, ft, **kw).backward()

            def fb_t(kw=kw):
                tx.grad = None
                TF.cross_entropy(tx, tt, **kw).backward()

            def fb_c(kw=kw):
                fx.grad = None
                F.nll_loss(fx.log_softmax(1), ft).backward()

            compare(f"({n}, {c}){label} fwd+bwd", {"fiamma": fb_f, "torch": fb_t,
                                                   "composed": fb_c} if not kw else
                    {"fiamma": fb_f, "torch": fb_t}, a.rounds, reps)


if __name__ == "__main__":
    main()
