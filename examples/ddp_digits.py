"""Data-parallel training of LeNet on real handwritten digits, one process per rank.

    python -m fiamma.distributed.run --nproc-per-node 2 examples/ddp_digits.py --epochs 3

Each rank reads its share of the 4,000 training digits shipped in ``examples/data`` (through
``DistributedSampler``), the model is wrapped in ``DistributedDataParallel`` (gradients averaged
across ranks during backward), the test accuracy on the 1,000 held-out digits is computed by
all ranks together (each counts its share, ``all_reduce`` sums the counts), and rank 0 saves a
checkpoint of the plain model that loads anywhere. ``--batch-size`` is the global batch: each
of N ranks takes batch-size / N samples per step, so any N follows the same trajectory.
Run without the launcher it trains as a world of one.
"""

import argparse
import gzip
import json
import time
from pathlib import Path

import numpy as np

import fiamma
import fiamma.distributed as dist
import fiamma.nn as nn
import fiamma.nn.functional as F
from fiamma.data import DataLoader, DistributedSampler, TensorDataset

DIGITS = Path(__file__).resolve().parent / "data" / "mnist_5k.csv.gz"
TEST_PER_CLASS = 100


def load_digits():
    """(train_x, train_y, test_x, test_y): normalised float32 (N, 1, 28, 28), int64 (N,)."""
    with gzip.open(DIGITS, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.uint8)
    x = ((table[:, :-1].reshape(-1, 1, 28, 28) / 255.0 - 0.1307) / 0.3081).astype(np.float32)
    y = table[:, -1].astype(np.int64)
    test = np.zeros(len(y), dtype=bool)
    for c in range(10):  # sorted by class: the last 100 digits of each class are held out
        test[np.flatnonzero(y == c)[-TEST_PER_CLASS:]] = True
    return x[~test], y[~test], x[test], y[test]


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc3(F.relu(self.fc2(x)))


def evaluate(model, x, y, rank, world):
    """Accuracy on the whole test set: each rank counts its slice, all_reduce sums."""
    share = slice(rank * len(y) // world, (rank + 1) * len(y) // world)
    with fiamma.no_grad():
        pred = model(fiamma.from_numpy(x[share])).argmax(1)
        counts = fiamma.tensor([int((pred == fiamma.from_numpy(y[share])).sum()), len(y[share])],
                               dtype=fiamma.int64)
    dist.all_reduce(counts)
    return counts[0].item() / counts[1].item()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64, help="the global batch size")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--limit", type=int, default=None, help="train on the first N digits only")
    p.add_argument("--save", default=None, help="rank 0 saves the model's state_dict here")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = p.parse_args(argv)

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch_size % world:
        raise SystemExit(f"--batch-size {args.batch_size} is not divisible by {world} ranks")
    train_x, train_y, test_x, test_y = load_digits()
    if args.limit:
        train_x, train_y = train_x[:args.limit], train_y[:args.limit]
    train = TensorDataset(fiamma.from_numpy(train_x), fiamma.from_numpy(train_y))
    sampler = DistributedSampler(train, shuffle=True, seed=0)  # rank/world from the group
    loader = DataLoader(train, batch_size=args.batch_size // world, sampler=sampler,
                        drop_last=True)

    fiamma.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(LeNet())
    opt = fiamma.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    seen, train_time, cpu_time = 0, 0.0, 0.0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        start, cpu_start = time.perf_counter(), time.process_time()
        total, n = 0.0, 0
        for x, y in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item() * len(y)
            n += len(y)
        cpu_time += time.process_time() - cpu_start  # this process's CPU, every thread
        dist.barrier()
        train_time += time.perf_counter() - start
        seen += n * world
        model.eval()
        acc = evaluate(model.module, test_x, test_y, rank, world)
        if rank == 0 and not args.json:
            print(f"epoch {epoch + 1}: train loss {total / max(n, 1):.4f} (rank 0's share), "
                  f"test accuracy {acc:.2%}, {n * world / train_time:.0f} samples/s so far",
                  flush=True)
    busiest = fiamma.tensor([cpu_time], dtype=fiamma.float64)
    dist.all_reduce(busiest, op=dist.ReduceOp.MAX)
    if rank == 0:
        if args.save:
            fiamma.save(model.module.state_dict(), args.save)
        figures = {"ranks": world, "epochs": args.epochs, "samples": seen,
                   "seconds": round(train_time, 3), "samples_per_s": round(seen / train_time, 1),
                   "busiest_rank_cpu_s": round(busiest.item(), 3), "test_accuracy": acc}
        print(("FIGURES " + json.dumps(figures)) if args.json else
              f"{world} rank(s): {figures['samples_per_s']} samples/s, test accuracy {acc:.2%}",
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
