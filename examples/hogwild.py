"""Hogwild: several processes train ONE model at once, updating its shared parameters unlocked.

    python examples/hogwild.py
    python examples/hogwild.py --workers 4 --steps 300

The parameters are moved to shared memory (``share_memory_()``), then the model is passed to
worker processes started with ``fiamma.multiprocessing`` (spawn). Pickling sends each
parameter as a handle to the same shared memory, so every worker's ``optimizer.step()`` writes
straight into the one copy that all processes (and the parent) see. Gradients are per process
(each worker's ``.grad`` is its own). There are no locks: updates can interleave, which
Hogwild! (Niu et al., 2011) showed is fine for SGD when each step touches the weights
lightly. The task is a small MLP classifying points by which of two interleaved spirals they
lie on; each worker trains on its own shard and the parent checks that the shared model's loss
and accuracy on held-out points improved.
"""

import argparse
import math
import time

import fiamma
import fiamma.multiprocessing as mp
from fiamma import nn
from fiamma.nn import functional as F


def spirals(n, seed, noise=0.15):
    """``n`` points of two interleaved spirals: inputs (n, 2) and labels (n,) in {0, 1}."""
    gen = fiamma.Generator().manual_seed(seed)
    label = fiamma.randint(0, 2, (n,), generator=gen)
    r = fiamma.rand(n, generator=gen) * 0.9 + 0.1
    theta = r * 2 * math.pi + label * math.pi
    x = fiamma.stack([r * fiamma.cos(theta), r * fiamma.sin(theta)], dim=1)
    return x + noise * r[:, None] * fiamma.randn(n, 2, generator=gen), label


def make_model():
    return nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                         nn.Linear(64, 2))


def train_worker(rank, model, steps, batch_size, lr, counter):
    """One Hogwild worker: SGD on its own data shard, writing into the shared parameters."""
    fiamma.manual_seed(1000 + rank)
    x, y = spirals(2048, seed=rank + 1)
    opt = fiamma.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for _ in range(steps):
        idx = fiamma.randint(0, len(x), (batch_size,))
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()                      # lands in the shared memory, unlocked
    with counter.get_lock():
        counter.value += steps


@fiamma.no_grad()
def evaluate(model, x, y):
    logits = model(x)
    return F.cross_entropy(logits, y).item(), (logits.argmax(1) == y).float().mean().item()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--steps", type=int, default=1000, help="SGD steps per worker")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.1)
    args = p.parse_args(argv)

    fiamma.manual_seed(0)
    model = make_model()
    for param in model.parameters():
        param.share_memory_()
    x_test, y_test = spirals(1000, seed=0)
    loss0, acc0 = evaluate(model, x_test, y_test)
    print(f"before: test loss {loss0:.3f}  accuracy {acc0:.1%}")

    ctx = mp.get_context("spawn")       # fork is unsafe once OpenMP kernels have run
    counter = ctx.Value("i", 0)
    t0 = time.perf_counter()
    procs = [ctx.Process(target=train_worker,
                         args=(rank, model, args.steps, args.batch_size, args.lr, counter))
             for rank in range(args.workers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    bad = [proc.exitcode for proc in procs if proc.exitcode != 0]
    if bad:
        raise RuntimeError(f"hogwild: {len(bad)} worker(s) failed (exit codes {bad})")
    print(f"{args.workers} workers made {counter.value} updates to the shared model "
          f"in {time.perf_counter() - t0:.1f} s")

    loss1, acc1 = evaluate(model, x_test, y_test)
    print(f"after:  test loss {loss1:.3f}  accuracy {acc1:.1%}")
    if not loss1 < loss0:
        raise RuntimeError(f"hogwild: the shared model did not improve ({loss0:.3f} -> "
                           f"{loss1:.3f})")
    return loss0, loss1, acc1


if __name__ == "__main__":
    main()
