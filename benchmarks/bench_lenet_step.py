"""The fixed per-step cost of a small model: examples/ddp_digits.py's LeNet training step
(zero_grad, forward, F.cross_entropy, backward, SGD with momentum 0.9) on one thread, at
batch 1, 8, 32 and 64, in thread CPU time (median of ``--steps`` steps after a warm-up, so
other processes on a shared machine disturb it less than wall time). A step costs about
``fixed + batch * per_sample``; ``fixed`` from the batch-32 and batch-64 medians is the part
that two data-parallel ranks at batch 32 pay twice where one rank at batch 64 pays it once.

    PYTHONPATH=$(ls -d packages/*/src | tr '\\n' ':') python benchmarks/bench_lenet_step.py \\
        [--rounds 3] [--steps 200] [--torch]

``--torch`` also times the same model and step written against PyTorch, in this process,
interleaved with fiamma's rounds.

For a count that load does not move, run one batch size under callgrind with collection
toggled on ``functools_reduce`` (``--callgrind B``: 200 steps inside ``functools.reduce``):

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=functools_reduce \\
        python benchmarks/bench_lenet_step.py --callgrind 1
"""

import argparse
import functools
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

from ddp_digits import LeNet  # noqa: E402

import fiamma  # noqa: E402
import fiamma.nn.functional as F  # noqa: E402

BATCHES = (1, 8, 32, 64)


def fiamma_step(batch):
    fiamma.manual_seed(0)
    m = LeNet()
    opt = fiamma.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    x, y = fiamma.randn(batch, 1, 28, 28), fiamma.randint(0, 10, (batch,))

    def step():
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        opt.step()
    return step


def torch_step(batch):
    import torch
    import torch.nn as tnn
    import torch.nn.functional as TF

    class TorchLeNet(tnn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = tnn.Conv2d(1, 6, 5, padding=2)
            self.conv2 = tnn.Conv2d(6, 16, 5)
            self.fc1 = tnn.Linear(16 * 5 * 5, 120)
            self.fc2 = tnn.Linear(120, 84)
            self.fc3 = tnn.Linear(84, 10)

        def forward(self, x):
            x = TF.max_pool2d(TF.relu(self.conv1(x)), 2)
            x = TF.max_pool2d(TF.relu(self.conv2(x)), 2)
            x = TF.relu(self.fc1(x.flatten(1)))
            return self.fc3(TF.relu(self.fc2(x)))

    torch.set_num_threads(1)
    torch.manual_seed(0)
    m = TorchLeNet()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(batch, 1, 28, 28), torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad()
        TF.cross_entropy(m(x), y).backward()
        opt.step()
    return step


def median_us(step, steps):
    for _ in range(20):
        step()
    ts = []
    for _ in range(steps):
        t0 = time.thread_time_ns()
        step()
        ts.append(time.thread_time_ns() - t0)
    return statistics.median(ts) / 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--torch", action="store_true")
    p.add_argument("--callgrind", type=int, default=None, metavar="B",
                   help="run 200 steps at batch B inside functools.reduce, then exit")
    args = p.parse_args()
    fiamma.set_num_threads(1)
    if args.callgrind is not None:
        step = fiamma_step(args.callgrind)
        for _ in range(20):
            step()
        functools.reduce(lambda acc, _: step(), range(200), None)
        return
    libs = [("fiamma", fiamma_step)] + ([("torch", torch_step)] if args.torch else [])
    print(f"load average {os.getloadavg()[0]:.1f}; thread CPU us per step (median of "
          f"{args.steps}); fixed = 2 * t32 - t64")
    for r in range(args.rounds):
        for name, make in libs:
            t = {b: median_us(make(b), args.steps) for b in BATCHES}
            cells = "  ".join(f"b{b} {t[b]:7.0f}" for b in BATCHES)
            print(f"round {r + 1} {name:6s} {cells}  fixed {2 * t[32] - t[64]:6.0f}", flush=True)


if __name__ == "__main__":
    main()
