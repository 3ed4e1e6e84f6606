"""examples/ddp_digits.py's training written against PyTorch's API, for bench_distributed.py's
comparison: the same LeNet, digits, global batch 64 split over the ranks, SGD with momentum,
gloo (PyTorch) or MPI (fiamma). Run under torchrun for PyTorch, or under fiamma's launcher with
``-m fiamma.run`` for fiamma (the same file, unmodified); prints one ``FIGURES {json}`` line
from rank 0 with the training samples per second and the test accuracy."""

import argparse
import gzip
import json
import os
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

DIGITS = Path(__file__).resolve().parents[1] / "examples" / "data" / "mnist_5k.csv.gz"


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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64, help="the global batch")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    with gzip.open(DIGITS, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.uint8)
    x = ((table[:, :-1].reshape(-1, 1, 28, 28) / 255.0 - 0.1307) / 0.3081).astype(np.float32)
    y = table[:, -1].astype(np.int64)
    test = np.zeros(len(y), dtype=bool)
    for c in range(10):  # the last 100 digits of each class are held out (as ddp_digits.py)
        test[np.flatnonzero(y == c)[-100:]] = True
    train = TensorDataset(torch.from_numpy(x[~test]), torch.from_numpy(y[~test]))
    sampler = DistributedSampler(train, shuffle=True, seed=0)
    loader = DataLoader(train, batch_size=args.batch_size // world, sampler=sampler,
                        drop_last=True)
    torch.manual_seed(0)
    model = DDP(LeNet())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    seen, seconds = 0, 0.0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        start = time.perf_counter()
        n = 0
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
            n += len(yb)
        dist.barrier()
        seconds += time.perf_counter() - start
        seen += n * world
    with torch.no_grad():
        share = slice(rank * 1000 // world, (rank + 1) * 1000 // world)
        pred = model.module(torch.from_numpy(x[test][share])).argmax(1)
        counts = torch.tensor([int((pred == torch.from_numpy(y[test][share])).sum()),
                               len(y[test][share])])
    dist.all_reduce(counts)
    if rank == 0:
        print("FIGURES " + json.dumps({"ranks": world, "samples_per_s": round(seen / seconds, 1),
                                       "test_accuracy": counts[0].item() / counts[1].item(),
                                       "library": torch.__name__}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
