"""DDP on N ranks (each a 1/N share of a fixed batch) against one process on the whole batch
(computed on every rank, without DDP), after several SGD steps; with and without no_sync
accumulation, several bucket sizes, unused parameters; argv[1]: a checkpoint path."""

import copy
import sys

import numpy as np

import fiamma
import fiamma.distributed as dist
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi")
rank, n = dist.get_rank(), dist.get_world_size()
fiamma.set_default_dtype(fiamma.float64)  # the reference and DDP sum in different orders


class Net(nn.Module):
    def __init__(self, spare=False):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.fc1 = nn.Linear(4 * 3 * 3, 16)
        self.fc2 = nn.Linear(16, 10)
        if spare:
            self.spare = nn.Linear(3, 3)  # used only when asked
        self.register_buffer("seen", fiamma.zeros(1))

    def forward(self, x, use_spare=False):
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        x = self.fc2(F.relu(self.fc1(x.flatten(1))))
        if use_spare:
            x = x + self.spare(x[:, :3]).sum()
        return x


def batch(step):
    rng = np.random.default_rng(100 + step)
    x = fiamma.from_numpy(rng.standard_normal((4 * n, 1, 8, 8)))
    y = fiamma.from_numpy(rng.integers(0, 10, 4 * n))
    return x, y


def sgd(model, lr=0.1, set_to_none=True):
    with fiamma.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p -= lr * p.grad
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.zero_()


def close(a, b, what):
    for (name, x), y in zip(a.named_parameters(), b.parameters()):
        d = float((x - y).abs().max())
        assert d < 1e-12, f"rank {rank}: {what}: {name} differs by {d}"


fiamma.manual_seed(0)
reference = Net()
steps = 4
# gradient_as_bucket_view, with gradients set to None or zeroed in place between steps
modes = [(False, True), (True, True), (True, False)]
for accumulate, cap, (as_view, to_none) in [(a, c, m) for a in (1, 2)
                                            for c in (None, 0.001)  # 1 bucket; many
                                            for m in modes]:
    fiamma.manual_seed(0)
    ref = copy.deepcopy(reference)
    fiamma.manual_seed(rank + 1)  # every rank starts elsewhere: DDP broadcasts rank 0's
    local = Net()
    if rank == 0:
        local.load_state_dict(reference.state_dict())
    local.seen.fill_(rank + 5)
    ddp = DDP(local, bucket_cap_mb=cap, gradient_as_bucket_view=as_view)
    assert float(local.seen) == 5.0, "buffers not broadcast from rank 0"
    if cap is not None:
        assert len(ddp._bucket_list) > 2, len(ddp._bucket_list)
    for step in range(steps):
        x, y = batch(step)
        F.cross_entropy(ref(x), y).backward()
        sgd(ref)
        mine = slice(4 * rank, 4 * rank + 4)
        xs, ys = x[mine], y[mine]
        micro = 4 // accumulate
        for k in range(accumulate):
            part = slice(k * micro, (k + 1) * micro)
            last = k == accumulate - 1
            if not last:
                with ddp.no_sync():
                    (F.cross_entropy(ddp(xs[part]), ys[part]) / accumulate).backward()
            else:
                (F.cross_entropy(ddp(xs[part]), ys[part]) / accumulate).backward()
        views = [v for b in ddp._bucket_list for v in b.views]
        in_bucket = [any(p.grad is v for v in views) for p in ddp.module.parameters()]
        assert all(in_bucket) if as_view else not any(in_bucket), (as_view, in_bucket)
        sgd(ddp.module, set_to_none=to_none)
    close(ddp.module, ref, f"accumulate={accumulate} bucket_cap_mb={cap} "
                           f"gradient_as_bucket_view={as_view} set_to_none={to_none}")

# find_unused_parameters: the spare layer is unused on every rank -> its grad stays None
fiamma.manual_seed(0)
ddp = DDP(Net(spare=True), find_unused_parameters=True)
x, y = batch(0)
F.cross_entropy(ddp(x), y).backward()
assert ddp.module.spare.weight.grad is None and ddp.module.fc1.weight.grad is not None
# used on rank 0 only -> every rank gets the average of rank 0's gradient and zeros
ddp.module.zero_grad()
F.cross_entropy(ddp(x, use_spare=rank == 0), y).backward()
assert ddp.module.spare.weight.grad is not None
g = ddp.module.spare.weight.grad.clone()
everyone = fiamma.zeros(n, *g.shape)
dist.all_gather_into_tensor(everyone, g)
assert float((everyone - everyone[0]).abs().max()) == 0.0
# forwards without backward (grad on) before a real step: the all-reduces the unused
# parameters started at those forwards are finished, not left pending
ddp.module.zero_grad()
ddp(x)
ddp(x)
F.cross_entropy(ddp(x), y).backward()
g = ddp.module.fc1.weight.grad.clone()
dist.all_gather_into_tensor(everyone := fiamma.zeros(n, *g.shape), g)
assert float((everyone - everyone[0]).abs().max()) == 0.0
# a synced forward without backward, then a no_sync step: the no_sync backward stays local
ddp.module.zero_grad()
ddp(x)
with ddp.no_sync():
    F.cross_entropy(ddp(x[rank:rank + 1]), y[rank:rank + 1]).backward()
local = ddp.module.fc1.weight.grad.clone()
dist.all_gather_into_tensor(everyone := fiamma.zeros(n, *local.shape), local)
assert float((everyone[0] - everyone[1]).abs().max()) > 0, "no_sync backward was averaged"
# without find_unused_parameters, an unused parameter is named at the next forward
ddp = DDP(Net(spare=True))
F.cross_entropy(ddp(x), y).backward()
try:
    ddp(x)
except RuntimeError as e:
    assert "did not produce gradients for these parameters: spare.weight, spare.bias" in str(e), e
    print(f"rank {rank} named: {str(e)[:120]}", flush=True)
else:
    raise AssertionError("unused parameters were not reported")

# BatchNorm: buffers (float and int64) broadcast before each forward that follows a synced
# one, so an evaluation under no_grad after training is the same on every rank; a frozen
# parameter (requires_grad=False) is not bucketed
fiamma.manual_seed(rank)
bn_model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
bn_model[0].weight.requires_grad_(False)
bn_ddp = DDP(bn_model, bucket_cap_mb=0.00001)
for step in range(3):
    out = bn_ddp(fiamma.randn(6, 4) + rank)
    out.pow(2).mean().backward()
    sgd(bn_ddp.module)
bn_ddp.eval()
with fiamma.no_grad():
    y = bn_ddp(fiamma.ones(1, 4))
views = [None] * n
dist.all_gather_object(views, (bn_model[1].running_mean.tolist(),
                               int(bn_model[1].num_batches_tracked), y.tolist()))
assert all(v == views[0] for v in views), views

# bfloat16 parameters: the bucket is reduced through the float32-widening MPI op
half = DDP(nn.Linear(4, 3).to(fiamma.bfloat16))
half(fiamma.full((2, 4), float(rank + 1)).to(fiamma.bfloat16)).float().sum().backward()
want = 2.0 * sum(range(1, n + 1)) / n  # the mean over ranks of 2 rows of (rank + 1)
assert half.module.weight.grad.float().tolist() == [[want] * 4] * 3, half.module.weight.grad

# models that differ between ranks (here: a frozen bias on the last rank) are refused on
# every rank, naming the difference
odd = nn.Linear(3, 2)
if rank == n - 1:
    odd.bias.requires_grad_(False)
try:
    DDP(odd)
except RuntimeError as e:
    assert f"the ranks' models differ: rank 0 has ('bias', (2,), 'fiamma.float64', True) where " \
           f"rank {n - 1} has ('bias', (2,), 'fiamma.float64', False)" in str(e), e
else:
    raise AssertionError("different models were accepted")

# a checkpoint saved from rank 0 (the plain module's state_dict) loads anywhere
if rank == 0:
    fiamma.save(ddp.module.state_dict(), sys.argv[1])
dist.barrier()
dist.destroy_process_group()
print(f"OK rank {rank}", flush=True)
