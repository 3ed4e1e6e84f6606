"""torch.distributed.nn.functional on N ranks: all_gather and all_reduce give the collective's
values and send gradients back to the rank each input came from."""

import fiamma
import fiamma.distributed as dist
from fiamma.distributed.nn.functional import all_gather, all_reduce

dist.init_process_group("mpi")
rank, n = dist.get_rank(), dist.get_world_size()

x = fiamma.full((3,), float(rank + 1), requires_grad=True)
parts = all_gather(x)
assert isinstance(parts, tuple) and [p.tolist() for p in parts] == [[r + 1.0] * 3
                                                                     for r in range(n)]
# every rank weighs rank r's slot by (r + 1): rank r's input gets n * (r + 1) from all ranks
loss = sum((r + 1) * p.sum() for r, p in enumerate(parts))
loss.backward()
assert x.grad.tolist() == [n * (rank + 1.0)] * 3, x.grad

y = fiamma.full((2,), float(rank + 1), requires_grad=True)
s = all_reduce(y)
assert s.tolist() == [n * (n + 1) / 2] * 2
(s.sum() * (rank + 1)).backward()  # the gradient of a sum: the sum of the ranks' gradients
assert y.grad.tolist() == [n * (n + 1) / 2] * 2, y.grad
z = fiamma.ones(2, requires_grad=True)
m = all_reduce(z, op=dist.ReduceOp.MAX)
try:
    m.sum().backward()
except RuntimeError as e:
    assert "backward of" in str(e) and "MAX" in str(e)
else:
    raise AssertionError("MAX backward should raise")
dist.destroy_process_group()
print(f"OK rank {rank}")
