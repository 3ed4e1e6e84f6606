"""ResNet-50 forward, batch 8, 224x224, eval mode: fiamma.vision.models.resnet50 beside the same
network in PyTorch (a twin with torchvision's module names from packages/nn/tests/nn_models.py,
as torchvision need not be installed), loaded with the same weights. 2 threads each; runs
alternate between the two libraries and the medians are compared (ratio < 1: fiamma faster).

    PYTHONPATH=<the packages' src dirs> python benchmarks/bench_resnet50.py [--rounds 10]
"""

import argparse
import os
import statistics
import time

THREADS = 2
os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(THREADS))

import numpy as np  # noqa: E402
from _models import nn_models  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()

    import fiamma
    from fiamma.vision import models

    fm = models.resnet50().eval()
    x = np.random.default_rng(0).standard_normal((args.batch, 3, 224, 224)).astype(np.float32)
    xf = fiamma.from_numpy(x)

    def ours():
        with fiamma.no_grad():
            return fm(xf)

    try:
        import torch
    except ImportError:
        ours()
        ts = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            ours()
            ts.append(time.perf_counter() - t0)
        print(f"fiamma ResNet-50 fwd batch {args.batch}: {statistics.median(ts) * 1e3:.1f} ms "
              "(torch not installed: no ratio)")
        return
    torch.set_num_threads(THREADS)
    tm = nn_models().resnet50(torch.nn).eval()
    for m in tm.modules():  # non-trivial running stats, so BN is not an identity
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    fm.load_state_dict({k: fiamma.from_numpy(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})
    xt = torch.from_numpy(x)

    def ref():
        with torch.no_grad():
            return tm(xt)

    a, b = ours().numpy(), ref().numpy()
    err = float(np.abs(a - b).max() / np.abs(b).max())
    tf, tt = [], []
    for _ in range(args.rounds):
        for fn, ts in ((ours, tf), (ref, tt)):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    mf, mt = statistics.median(tf), statistics.median(tt)
    print(f"ResNet-50 fwd, batch {args.batch}, 224x224, eval, {THREADS} threads "
          f"(max rel. difference {err:.1e})")
    print(f"  fiamma  median {mf * 1e3:8.1f} ms   min {min(tf) * 1e3:8.1f} ms")
    print(f"  torch   median {mt * 1e3:8.1f} ms   min {min(tt) * 1e3:8.1f} ms")
    print(f"  ratio fiamma / torch: median {mf / mt:.2f}x   min {min(tf) / min(tt):.2f}x")


if __name__ == "__main__":
    main()
