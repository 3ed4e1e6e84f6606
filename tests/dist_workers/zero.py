"""ZeroRedundancyOptimizer on 2 ranks (run by tests/test_dist_zero.py under the launcher):
DDP + ZeRO(Adam) against DDP + Adam (float64), the partition, the sharded state, LR schedulers,
consolidated and loaded state dicts, add_param_group, and Join with uneven inputs."""

import copy

import numpy as np

import fiamma
import fiamma.distributed as dist
import fiamma.nn.functional as F
from fiamma import nn, optim
from fiamma.distributed.algorithms import Join
from fiamma.distributed.optim import ZeroRedundancyOptimizer as ZeRO
from fiamma.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank, n = dist.get_rank(), dist.get_world_size()
assert n == 2
fiamma.set_default_dtype(fiamma.float64)


def net():
    fiamma.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 8), nn.Tanh(),
                         nn.Linear(8, 3))


def batch(r, step):
    rng = np.random.default_rng(10 * r + step)
    return (fiamma.from_numpy(rng.standard_normal((6, 5))),
            fiamma.from_numpy(rng.integers(0, 3, 6)))


def train(model, opt, steps, sched=None, start=0):
    for step in range(start, start + steps):
        opt.zero_grad()
        x, y = batch(rank, step)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        if sched is not None:
            sched.step()


def params(model):
    return [p.detach().clone() for p in model.parameters()]


def err(a, b):
    return max(float((x - y).abs().max()) for x, y in zip(a, b))


# the partition: largest first, greedily to the rank with fewest elements (PyTorch's)
ref_model = DDP(net())
ref = optim.Adam(ref_model.parameters(), lr=0.01)
model = DDP(net())
zero = ZeRO(model.parameters(), optimizer_class=optim.Adam, lr=0.01)
sizes = [sum(p.numel() for ps in zero._partition[r] for p in ps) for r in range(n)]
assert sizes == [128 + 3, 80 + 24 + 16 + 8], sizes
train(ref_model, ref, 5)
train(model, zero, 5)
assert err(params(model), params(ref_model)) < 1e-12, err(params(model), params(ref_model))
mine = [p for ps in zero._partition[rank] for p in ps]
assert len(zero.optim.state) == len(mine) and all(p in zero.optim.state for p in mine)
print(f"rank {rank}: ddp + zero == ddp + adam, state of {len(mine)} parameters here",
      flush=True)

# an LR scheduler on the ZeRO optimizer reaches the local one
ref_model, model = DDP(net()), DDP(net())
ref = optim.SGD(ref_model.parameters(), lr=0.1, momentum=0.9)
zero = ZeRO(model.parameters(), optimizer_class=optim.SGD, lr=0.1, momentum=0.9)
train(ref_model, ref, 4, optim.lr_scheduler.StepLR(ref, 1, gamma=0.5))
train(model, zero, 4, optim.lr_scheduler.StepLR(zero, 1, gamma=0.5))
# (the local optimizer takes the group's lr at each step: the last scheduler step is ahead)
assert zero.param_groups[0]["lr"] == 0.1 * 0.5 ** 4
assert zero.optim.param_groups[0]["lr"] == 0.1 * 0.5 ** 3
assert err(params(model), params(ref_model)) < 1e-12
print(f"rank {rank}: lr scheduler ok", flush=True)

# consolidate on rank 0: the whole state dict, as the plain optimizer's
ref_model, model = DDP(net()), DDP(net())
ref = optim.Adam(ref_model.parameters(), lr=0.01, weight_decay=0.1)
zero = ZeRO(model.parameters(), optimizer_class=optim.Adam, lr=0.01, weight_decay=0.1)
train(ref_model, ref, 3)
train(model, zero, 3)
zero.consolidate_state_dict(to=0)
if rank == 0:
    got, want = zero.state_dict(), ref.state_dict()
    assert [{k: v for k, v in g.items()} for g in got["param_groups"]] == want["param_groups"]
    assert sorted(got["state"]) == sorted(want["state"]) == list(range(6))
    for i in range(6):
        for k in ("exp_avg", "exp_avg_sq", "step"):
            assert fiamma.equal(got["state"][i][k], want["state"][i][k]), (i, k)
else:
    try:
        zero.state_dict()
        raise AssertionError("no error")
    except RuntimeError as e:
        assert "has not been consolidated on this rank" in str(e)
# every rank loads the plain optimizer's dict and continues as it does
full = ref.state_dict()
model2 = DDP(copy.deepcopy(model.module))
zero2 = ZeRO(model2.parameters(), optimizer_class=optim.Adam, lr=0.5, weight_decay=0.0)
zero2.load_state_dict(full)
assert zero2.param_groups[0]["lr"] == 0.01 and zero2.optim.param_groups[0]["weight_decay"] == 0.1
train(ref_model, ref, 2, start=3)
train(model2, zero2, 2, start=3)
assert err(params(model2), params(ref_model)) < 1e-12, err(params(model2), params(ref_model))
print(f"rank {rank}: state dicts ok", flush=True)

# add_param_group: the new parameters are shared out and stepped
extra = nn.Parameter(fiamma.ones(4))
zero.add_param_group({"params": [extra], "lr": 0.5})
extra.grad = fiamma.full((4,), 2.0)
for p in model.parameters():
    p.grad = None
zero.step()
assert fiamma.allclose(extra.detach(), fiamma.full((4,), 0.5), atol=1e-6), extra
print(f"rank {rank}: add_param_group ok", flush=True)

# Join with uneven inputs (rank r trains 2 + r steps): the joined rank steps its share with
# the average of the ranks still training, so every rank ends with the same model, equal to
# one process applying the averaged gradients
STEPS = [2 + r for r in range(n)]
model = DDP(net())
zero = ZeRO(model.parameters(), optimizer_class=optim.Adam, lr=0.01)
with Join([model, zero]):
    for step in range(STEPS[rank]):
        zero.zero_grad()
        x, y = batch(rank, step)
        F.cross_entropy(model(x), y).backward()
        zero.step()
single = net()
opt = optim.Adam(single.parameters(), lr=0.01)
for step in range(max(STEPS)):
    grads = None
    for r in range(n):
        if step < STEPS[r]:
            m = copy.deepcopy(single)
            F.cross_entropy(m(batch(r, step)[0]), batch(r, step)[1]).backward()
            g = [p.grad for p in m.parameters()]
            grads = g if grads is None else [a + b for a, b in zip(grads, g)]
    for p, g in zip(single.parameters(), grads):
        p.grad = g / n
    opt.step()
assert err(params(model.module), params(single)) < 1e-12, err(params(model.module),
                                                               params(single))
print(f"OK rank {rank}", flush=True)
dist.destroy_process_group()
