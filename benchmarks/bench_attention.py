"""Fused scaled_dot_product_attention beside PyTorch: forward (no grad) and forward + backward
through autograd, at the GPT benchmark's shape (batch 16, 4 heads, T 64, head dim 32) and a
longer one (batch 4, 4 heads, T 512, head dim 64), causal and unmasked, with q/k/v the
transposed head views of one (B, T, 3C) projection as in a transformer. Also fiamma's former
composition (matmul, mask, softmax, matmul) and the fused kernel's query-row block sizes
(``--blocks``). Both libraries in one process, alternating in rounds, 1 thread, process CPU
time; median over rounds of the mean time per call, ratio to PyTorch, and the load average.

    python benchmarks/bench_attention.py [--rounds 9] [--blocks 16,32,64,128]
"""

import argparse
import gc
import os
import statistics
import time

import numpy as np
import torch

import fiamma
import fiamma.nn._attention_functional as AF
from fiamma._lib import lib


def _time(fn, reps):
    t = time.process_time()
    for _ in range(reps):
        fn()
    return (time.process_time() - t) / reps


def compare(name, fns, rounds, reps):
    for fn in fns.values():
        fn()
    times = {k: [] for k in fns}
    gc.disable()
    for _ in range(rounds):
        for k, fn in fns.items():
            times[k].append(_time(fn, reps))
    gc.enable()
    med = {k: statistics.median(v) for k, v in times.items()}
    t = med["torch"]
    cols = "  ".join(f"{k} {v * 1e3:7.3f} ms ({v / t:4.2f}x)" for k, v in med.items())
    print(f"{name:30s} {cols}  (load {os.getloadavg()[0]:.1f})", flush=True)
    return med


def _composed(fn):
    """fn run with nn's fused path switched off (the former composition)."""
    def run():
        saved = AF._fusable
        AF._fusable = lambda *a: False
        try:
            fn()
        finally:
            AF._fusable = saved
    return run


def _blocked(fn, rows):
    def run():
        prev = lib.fm_attn_set_block(rows)
        try:
            fn()
        finally:
            lib.fm_attn_set_block(prev)
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--blocks", default="", help="comma-separated row-block sizes to compare")
    a = ap.parse_args()
    torch.set_num_threads(1)
    fiamma.set_num_threads(1)
    F, TF = fiamma.nn.functional, torch.nn.functional
    blocks = [int(b) for b in a.blocks.split(",") if b]
    rng = np.random.default_rng(0)
    for B, H, T, D in [(16, 4, 64, 32), (4, 4, 512, 64)]:
        C = H * D
        x = rng.standard_normal((B, T, 3 * C)).astype(np.float32)
        fx, tx = fiamma.from_numpy(x).requires_grad_(), torch.from_numpy(x).requires_grad_()

        def heads(t):
            q, k, v = t.split(C, dim=2)
            return [u.view(B, T, H, D).transpose(1, 2) for u in (q, k, v)]

        reps = max(1, 40 // (T // 64) ** 2)
        for causal in (True, False):
            def fwd_f(causal=causal):
                with fiamma.no_grad():
                    F.scaled_dot_product_attention(*heads(fx), is_causal=causal)

            def fwd_t(causal=causal):
                with torch.no_grad():
                    TF.scaled_dot_product_attention(*heads(tx), is_causal=causal)

            def fb_f(causal=causal):
                fx.grad = None
                y = F.scaled_dot_product_attention(*heads(fx), is_causal=causal)
                y.transpose(1, 2).contiguous().view(B, T, C).sum().backward()

            def fb_t(causal=causal):
                tx.grad = None
                y = TF.scaled_dot_product_attention(*heads(tx), is_causal=causal)
                y.transpose(1, 2).contiguous().view(B, T, C).sum().backward()

            tag = f"({B},{H},{T},{D}){' causal' if causal else ''}"
            for label, ff, ft in [("forward", fwd_f, fwd_t), ("fwd+bwd", fb_f, fb_t)]:
                fns = {"fiamma": ff, "torch": ft, "composed": _composed(ff)}
                for rows in blocks:
                    fns[f"b{rows}"] = _blocked(ff, rows)
                compare(f"{tag} {label}", fns, a.rounds, reps)


if __name__ == "__main__":
    main()
