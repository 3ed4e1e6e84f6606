"""torch.distributed._functional_collectives on N ranks: each op returns a new tensor holding
the collective's result (the input unchanged), exact against NumPy."""

import numpy as np

import fiamma
import fiamma.distributed as dist
import fiamma.distributed._functional_collectives as funcol

dist.init_process_group("mpi")
rank, n = dist.get_rank(), dist.get_world_size()
W = dist.group.WORLD


def base(r):  # rank r's input: shape [2n, 3], distinct per rank
    return np.arange(2 * n * 3, dtype=np.float32).reshape(2 * n, 3) + 100 * r


x = fiamma.tensor(base(rank))
before = x.clone()

s = funcol.all_reduce(x, "sum", W)
assert np.array_equal(s.numpy(), sum(base(r) for r in range(n))), s
m = funcol.all_reduce(x, dist.ReduceOp.MAX, W)
assert np.array_equal(m.numpy(), base(n - 1)), m

g0 = funcol.all_gather_tensor(x, 0, W)
assert np.array_equal(g0.numpy(), np.concatenate([base(r) for r in range(n)], 0)), g0
g1 = funcol.all_gather_tensor(x, -1, W)  # along the last dim: [2n, 3n]
assert np.array_equal(g1.numpy(), np.concatenate([base(r) for r in range(n)], 1)), g1

total = sum(base(r) for r in range(n))
rs0 = funcol.reduce_scatter_tensor(x, "sum", 0, W)
assert np.array_equal(rs0.numpy(), np.split(total, n, 0)[rank]), rs0
y = fiamma.tensor(base(rank).T.copy())  # [3, 2n]: scatter along dim 1
rs1 = funcol.reduce_scatter_tensor(y, "avg", 1, W)
assert np.allclose(rs1.numpy(), np.split(total.T / n, n, 1)[rank]), rs1

a = funcol.all_to_all_single(x, None, None, W)
want = np.concatenate([np.split(base(r), n, 0)[rank] for r in range(n)], 0)
assert np.array_equal(a.numpy(), want), a
# uneven splits: rank r sends r+1 rows to every rank (rows (r+1)*n in all)
z = fiamma.tensor(np.full(((rank + 1) * n, 2), rank, dtype=np.float32))
u = funcol.all_to_all_single(z, [r + 1 for r in range(n)], [rank + 1] * n, W)
assert u.shape == (sum(r + 1 for r in range(n)), 2), u.shape
assert np.array_equal(u.numpy()[:, 0], np.repeat(np.arange(n), np.arange(1, n + 1))), u

b = funcol.broadcast(x, n - 1, W)
assert np.array_equal(b.numpy(), base(n - 1)), b

assert fiamma.equal(x, before)  # inputs untouched
assert funcol.wait_tensor(s) is s and not isinstance(s, funcol.AsyncCollectiveTensor)
for bad, err in [(lambda: funcol.all_reduce(x, "mean", W), ValueError),
                 (lambda: funcol.all_reduce(x, "sum", [0, 1]), TypeError),
                 (lambda: funcol.all_gather_tensor(x, 2, W), IndexError)]:
    try:
        bad()
    except err as e:
        assert "all_" in str(e), e
    else:
        raise AssertionError("should raise")
dist.destroy_process_group()
print(f"OK rank {rank}")
