"""Row gathers: ``index_select(0, idx)``, ``x[idx]`` and ``F.embedding`` beside PyTorch and
NumPy (``np.take(axis=0)``), one thread, process CPU time, libraries alternating in rounds.

    python benchmarks/bench_index_rows.py [--rounds 7]
"""

import argparse
import time

import numpy as np


def best(f, k):
    f()
    t = time.process_time()
    for _ in range(k):
        f()
    return (time.process_time() - t) / k * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    import torch

    import fiamma
    import fiamma.nn.functional as F

    fiamma.set_num_threads(1)
    torch.set_num_threads(1)
    print("| rows x width (float32) | op | fiamma us | PyTorch us | NumPy us | fiamma/PyTorch |")
    print("|---|---|---|---|---|---|")
    for rows, width, src in ((10000, 16, 10000), (1000, 256, 10000), (30000, 64, 30000),
                             (64, 512, 50000)):
        x = fiamma.randn(src, width)
        idx = fiamma.randint(0, src, (rows,))
        tx, tidx = torch.tensor(x.numpy()), torch.tensor(idx.numpy())
        nx, nidx = x.numpy(), idx.numpy()
        k = max(20, 2000000 // (rows * width))
        cases = {
            "index_select": (lambda: x.index_select(0, idx), lambda: tx.index_select(0, tidx)),
            "x[idx]": (lambda: x[idx], lambda: tx[tidx]),
            "embedding": (lambda: F.embedding(idx, x),
                          lambda: torch.nn.functional.embedding(tidx, tx)),
        }
        for name, (ff, tf) in cases.items():
            fs, ts, ns = [], [], []
            for _ in range(args.rounds):
                fs.append(best(ff, k))
                ts.append(best(tf, k))
                ns.append(best(lambda: np.take(nx, nidx, axis=0), k))
            f, t, n = np.median(fs), np.median(ts), np.median(ns)
            print(f"| {rows} x {width} | {name} | {f:.1f} | {t:.1f} | {n:.1f} | {f / t:.2f} |")


if __name__ == "__main__":
    main()
