"""DDP under Join with uneven inputs on 2 ranks (rank r trains on 3 + 2r batches) against one
process that applies the same averaged steps (gradients of the ranks still training, divided by
the world size or by their count), float64; then the early-termination mode."""

import copy

import numpy as np

import fiamma
import fiamma.distributed as dist
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.distributed.algorithms import Join
from fiamma.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi")
rank, n = dist.get_rank(), dist.get_world_size()
assert n == 2
fiamma.set_default_dtype(fiamma.float64)
STEPS = [3 + 2 * r for r in range(n)]


def batch(r, step):
    rng = np.random.default_rng(1000 * r + step)
    x = fiamma.from_numpy(rng.standard_normal((6, 5)))
    y = fiamma.from_numpy(rng.integers(0, 3, 6))
    return x, y


def net():
    fiamma.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))


def sgd(model):  # (fiamma-optim is not a dependency of this package)
    with fiamma.no_grad():
        for p in model.parameters():
            p.sub_(0.1 * p.grad)
            p.grad = None


def reference(divide_by_world):
    model = net()
    for step in range(max(STEPS)):
        active = [r for r in range(n) if step < STEPS[r]]
        grads = None
        for r in active:
            m = copy.deepcopy(model)
            F.cross_entropy(m(batch(r, step)[0]), batch(r, step)[1]).backward()
            g = [p.grad for p in m.parameters()]
            grads = g if grads is None else [a + b for a, b in zip(grads, g)]
        div = n if divide_by_world else len(active)
        for p, g in zip(model.parameters(), grads):
            p.grad = g / div
        sgd(model)
    return [p.detach() for p in model.parameters()]


def train(ctx_of, model, steps=None):
    with ctx_of(model):
        for step in range(STEPS[rank] if steps is None else steps):
            x, y = batch(rank, step)
            F.cross_entropy(model(x), y).backward()
            sgd(model)


for divide in (True, False):
    model = DDP(net())
    if divide:
        train(lambda m: m.join(), model)
    else:
        train(lambda m: Join([m], divide_by_initial_world_size=False), model)
    want = reference(divide)
    for p, w in zip(model.module.parameters(), want):
        err = float((p.detach() - w).abs().max())
        assert err < 1e-10, (divide, err)
    # every rank holds the last joiner's parameters and buffers
    mine = [t.detach().clone() for t in model.module.state_dict().values()]
    theirs = [t.clone() for t in mine]
    for t in theirs:
        dist.broadcast(t, src=1)
    assert all(bool((a == b).all()) for a, b in zip(mine, theirs))
    print(f"rank {rank}: join divide_by_initial_world_size={divide} ok", flush=True)

# throw_on_early_termination: every rank raises once the first one runs out
model = DDP(net())
try:
    train(lambda m: m.join(throw_on_early_termination=True), model)
    raise AssertionError("no error")
except RuntimeError as e:
    text = str(e)
want = "Rank 0 exhausted all inputs." if rank == 0 else "Detected at least one rank that " \
    "exhausted inputs. Throwing across all ranks."
assert text == want, text
dist.barrier()
# a disabled Join is a plain loop (equal inputs)
model = DDP(net())
train(lambda m: Join([m], enable=False), model, steps=2)
# a user's own Joinable: its main hook runs once per iteration of the other rank, and the
# post hook learns who joined last
from fiamma.distributed.algorithms import Joinable, JoinHook  # noqa: E402


class Counter(Joinable):
    def __init__(self):
        super().__init__()
        self.shadowed, self.last = 0, None

    def join_hook(self, **kwargs):
        outer = self

        class Hook(JoinHook):
            def main_hook(self):
                outer.shadowed += 1

            def post_hook(self, is_last_joiner):
                outer.last = is_last_joiner
        return Hook()

    @property
    def join_device(self):
        return fiamma.device("cpu")

    @property
    def join_process_group(self):
        return dist.group.WORLD

    def step(self):
        Join.notify_join_context(self)


c = Counter()
with Join([c]):
    for _ in range(STEPS[rank]):
        c.step()
assert (c.shadowed, c.last) == ((2, False) if rank == 0 else (0, True)), (c.shadowed, c.last)
print(f"OK rank {rank}", flush=True)
dist.destroy_process_group()
