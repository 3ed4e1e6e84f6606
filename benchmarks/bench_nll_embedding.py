"""F.nll_loss and F.embedding beside PyTorch: forward + backward through autograd.

nll_loss (mean reduction, class-index targets) on (64, 10), (256, 1000) and (4096, 32000)
log-probabilities; embedding of (32, 128) indices into a (50000, 512) table, the gradient
reduced by a sum. Both libraries in one process, interleaved round-robin, 1 thread; min over
rounds of the mean CPU time per call, ratio fiamma / PyTorch.

    python benchmarks/bench_nll_embedding.py [--rounds N]
"""

import argparse

import numpy as np
import torch
from _timing import compare_min

import fiamma


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    a = ap.parse_args()
    torch.set_num_threads(1)
    fiamma.set_num_threads(1)
    F, TF = fiamma.nn.functional, torch.nn.functional
    rng = np.random.default_rng(0)
    for n, c in [(64, 10), (256, 1000), (4096, 32000)]:
        x = rng.standard_normal((n, c)).astype(np.float32)
        t = rng.integers(0, c, n)
        fx, tx = fiamma.from_numpy(x).requires_grad_(), torch.from_numpy(x).requires_grad_()
        ft, tt = fiamma.from_numpy(t), torch.from_numpy(t)

        def fb_f():
            fx.grad = None
            F.nll_loss(fx, ft).backward()

        def fb_t():
            tx.grad = None
            TF.nll_loss(tx, tt).backward()

        reps = max(2, min(2000, 4_000_000 // (n * c)))
        compare_min(f"nll_loss ({n}, {c}) fwd+bwd", {"fiamma": fb_f, "torch": fb_t},
                    a.rounds, reps, width=34, num="10.1f")

    w = rng.standard_normal((50000, 512)).astype(np.float32)
    idx = rng.integers(0, 50000, (32, 128))
    fw, tw = fiamma.from_numpy(w).requires_grad_(), torch.from_numpy(w).requires_grad_()
    fi, ti = fiamma.from_numpy(idx), torch.from_numpy(idx)

    def emb_f():
        fw.grad = None
        F.embedding(fi, fw).sum().backward()

    def emb_t():
        tw.grad = None
        TF.embedding(ti, tw).sum().backward()

    compare_min("embedding 50000x512 [32x128] fwd+bwd", {"fiamma": emb_f, "torch": emb_t},
                a.rounds, 3, width=34, num="10.1f")

    def fwd_f():
        with fiamma.no_grad():
            F.embedding(fi, fw)

    def fwd_t():
        with torch.no_grad():
            TF.embedding(ti, tw)

    compare_min("embedding 50000x512 [32x128] forward", {"fiamma": fwd_f, "torch": fwd_t},
                a.rounds, 20, width=34, num="10.1f")


if __name__ == "__main__":
    main()
