"""The fixed cost of one small op, beside PyTorch: what a Python loop over tiny tensors pays per
call (a (16,) vector, an (8, 8) matrix; float32; no gradients). Each line times a loop of
20,000 calls, fiamma and PyTorch interleaved, and reports the median over the rounds in
microseconds per call with the ratio fiamma / PyTorch.

    PYTHONPATH=packages/core/src:packages/autograd/src python benchmarks/bench_small.py
"""

import statistics
import sys
import time

import torch

import fiamma

torch.set_num_threads(2)
N = 20_000


def _per_call(fn):
    t = time.perf_counter()
    for _ in range(N):
        fn()
    return (time.perf_counter() - t) / N


def compare(name, ff, tf, rounds=7):
    ff()
    tf()
    a, b = [], []
    for _ in range(rounds):
        a.append(_per_call(ff))
        b.append(_per_call(tf))
    fa, ta = statistics.median(a), statistics.median(b)
    print(f"{name:22s} fiamma {fa * 1e6:7.3f} us  torch {ta * 1e6:7.3f} us  ratio {fa / ta:5.2f}",
          flush=True)
    return fa / ta


def main():
    x, y = fiamma.rand(16), fiamma.rand(16)
    tx, ty = torch.from_numpy(x.numpy()), torch.from_numpy(y.numpy())
    m = fiamma.rand(8, 8)
    tm = torch.from_numpy(m.numpy())
    w = fiamma.rand(8)
    tw = torch.from_numpy(w.numpy())
    cases = [
        ("x + y", lambda: x + y, lambda: tx + ty),
        ("fiamma.add(x, y)", lambda: fiamma.add(x, y), lambda: torch.add(tx, ty)),
        ("x * 2.0", lambda: x * 2.0, lambda: tx * 2.0),
        ("x += y", lambda: x.__iadd__(y), lambda: tx.__iadd__(ty)),
        ("m + w (broadcast)", lambda: m + w, lambda: tm + tw),
        ("x.exp()", lambda: x.exp(), lambda: tx.exp()),
        ("x.relu()", lambda: x.relu(), lambda: tx.relu()),
        ("x.sigmoid()", lambda: x.sigmoid(), lambda: tx.sigmoid()),
        ("x.sum()", lambda: x.sum(), lambda: tx.sum()),
        ("m.sum(-1)", lambda: m.sum(-1), lambda: tm.sum(-1)),
        ("m.softmax(-1)", lambda: m.softmax(-1), lambda: tm.softmax(-1)),
        ("m @ m", lambda: m @ m, lambda: tm @ tm),
        ("x.view(4, 4)", lambda: x.view(4, 4), lambda: tx.view(4, 4)),
        ("m.t()", lambda: m.t(), lambda: tm.t()),
        ("m.unsqueeze(0)", lambda: m.unsqueeze(0), lambda: tm.unsqueeze(0)),
        ("x.expand(4, 16)", lambda: x.expand(4, 16), lambda: tx.expand(4, 16)),
        ("m[:, 0]", lambda: m[:, 0], lambda: tm[:, 0]),
        ("x[3].item()", lambda: x[3].item(), lambda: tx[3].item()),
        ("cat([x, y])", lambda: fiamma.cat([x, y]), lambda: torch.cat([tx, ty])),
        ("stack([x, y])", lambda: fiamma.stack([x, y]), lambda: torch.stack([tx, ty])),
        ("zeros(16)", lambda: fiamma.zeros(16), lambda: torch.zeros(16)),
        ("x.clone()", lambda: x.clone(), lambda: tx.clone()),
    ]
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    print(f"fiamma {fiamma.__version__} | torch {torch.__version__} | {N} calls per round")
    ratios = [compare(name, f, g) for name, f, g in cases if only in name]
    if ratios:
        print(f"geometric mean of the ratios: {statistics.geometric_mean(ratios):.2f}")


if __name__ == "__main__":
    main()
