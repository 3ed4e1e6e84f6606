"""SyncBatchNorm on N ranks against BatchNorm in one process on the concatenated batch
(float64): DDP training steps with equal shares (parameters and running statistics), and
unequal shares (outputs, input gradients of a summed loss, running statistics, the cumulative
average when momentum is None)."""

import copy

import numpy as np

import fiamma
import fiamma.distributed as dist
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi")
rank, n = dist.get_rank(), dist.get_world_size()
fiamma.set_default_dtype(fiamma.float64)


def close(a, b, what, tol=1e-10):
    d = float((a - b).abs().max())
    assert d < tol, f"rank {rank}: {what} differs by {d}"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 5)
        self.bn1 = nn.BatchNorm1d(5, momentum=None)

    def forward(self, x):
        return self.bn1(self.fc(F.relu(self.bn(self.conv(x))).flatten(1)))


rng = np.random.default_rng(7)
fiamma.manual_seed(0)
reference = Net()
ref = copy.deepcopy(reference)
model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(copy.deepcopy(reference)))
assert type(model.module.bn).__name__ == "SyncBatchNorm"


def sgd_step(params, lr=0.1):  # (no fiamma-optim dependency)
    with fiamma.no_grad():
        for p in params:
            p -= lr * p.grad
            p.grad = None


per = 4
for step in range(3):
    x = fiamma.from_numpy(rng.standard_normal((n * per, 2, 6, 6)))
    y = fiamma.from_numpy(rng.integers(0, 5, n * per))
    F.cross_entropy(ref(x), y).backward()
    sgd_step(ref.parameters())
    mine = slice(rank * per, (rank + 1) * per)
    F.cross_entropy(model(x[mine]), y[mine]).backward()
    sgd_step(model.parameters())
for (name, a), b in zip(ref.state_dict().items(), model.module.state_dict().values()):
    close(a.double(), b.double(), f"equal shares: {name}")

# unequal shares: rank r has r + 2 samples; the loss is a plain sum, so the input gradients
# equal the one-process gradients of the concatenated batch exactly
sizes = [r + 2 for r in range(n)]
start = sum(sizes[:rank])
x = fiamma.from_numpy(rng.standard_normal((sum(sizes), 4, 3)))
w = fiamma.from_numpy(rng.standard_normal((sum(sizes), 4, 3)))
bn = nn.BatchNorm1d(4, momentum=None)
sbn = nn.SyncBatchNorm(4, momentum=None)
with fiamma.no_grad():
    for m in (bn, sbn):
        m.weight.copy_(fiamma.tensor([0.5, 1.5, -2.0, 1.0]))
        m.bias.copy_(fiamma.tensor([0.1, -0.2, 0.3, 0.0]))
for _ in range(2):
    xa = x.clone().requires_grad_()
    (bn(xa) * w).sum().backward()
    xb = x[start:start + sizes[rank]].clone().requires_grad_()
    out = sbn(xb)
    (out * w[start:start + sizes[rank]]).sum().backward()
    close(xb.grad, xa.grad[start:start + sizes[rank]], "unequal shares: input gradient")
    with fiamma.no_grad():
        expect = F.batch_norm(x, None, None, bn.weight, bn.bias, True, 0.0, bn.eps)
    close(out.detach(), expect[start:start + sizes[rank]], "unequal shares: output")
close(sbn.running_mean, bn.running_mean, "running_mean")
close(sbn.running_var, bn.running_var, "running_var")
assert int(sbn.num_batches_tracked) == 2
# weight/bias gradients are local (DDP averages them): their sum over ranks is the total
g = fiamma.cat([sbn.weight.grad, sbn.bias.grad])
dist.all_reduce(g)
close(g, fiamma.cat([bn.weight.grad, bn.bias.grad]), "summed weight/bias gradients")
# evaluation uses the running statistics, no communication
sbn.eval()
bn.eval()
close(sbn(x[:2]), bn(x[:2]), "eval")
print(f"OK rank {rank}", flush=True)
dist.destroy_process_group()
