"""Every collective against a NumPy reference (each rank can compute all ranks' inputs)."""

import datetime

import numpy as np

import fiamma
import fiamma.distributed as dist

dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=20))
rank, n = dist.get_rank(), dist.get_world_size()
DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64,
          "int8": np.int8, "uint8": np.uint8, "int16": np.int16}


def data(r, shape, np_dtype, seed=0):
    rng = np.random.default_rng(1000 * seed + r)
    if np.issubdtype(np_dtype, np.floating):
        return rng.integers(-8, 9, size=shape).astype(np_dtype) / 4  # exact in any order
    return rng.integers(1, 4, size=shape).astype(np_dtype)


def check(got, want, what):
    got = got.numpy() if isinstance(got, fiamma.Tensor) else got
    if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
        raise AssertionError(f"rank {rank}: {what}: got {got!r}, want {want!r}")


REF = {dist.ReduceOp.SUM: lambda xs: np.sum(xs, axis=0).astype(xs[0].dtype),
       dist.ReduceOp.PRODUCT: lambda xs: np.prod(xs, axis=0).astype(xs[0].dtype),
       dist.ReduceOp.MIN: lambda xs: np.min(xs, axis=0),
       dist.ReduceOp.MAX: lambda xs: np.max(xs, axis=0),
       dist.ReduceOp.AVG: lambda xs: (np.sum(xs, axis=0) / len(xs)).astype(xs[0].dtype)}

shape = (3, 5)
for name, npd in DTYPES.items():
    fd = getattr(fiamma, name)
    for op, ref in REF.items():
        if op is dist.ReduceOp.AVG and not np.issubdtype(npd, np.floating):
            continue
        xs = [data(r, shape, npd) for r in range(n)]
        t = fiamma.from_numpy(xs[rank].copy())
        dist.all_reduce(t, op=op)
        check(t, ref(xs), f"all_reduce {op.name} {name}")
        t = fiamma.from_numpy(xs[rank].copy())
        dist.reduce(t, dst=n - 1, op=op)
        check(t, ref(xs) if rank == n - 1 else xs[rank], f"reduce {op.name} {name}")
        big = [data(r, (n * 2, 3), npd, 1) for r in range(n)]
        out = fiamma.zeros(2, 3, dtype=fd)
        dist.reduce_scatter_tensor(out, fiamma.from_numpy(big[rank].copy()), op=op)
        check(out, ref(big)[2 * rank:2 * rank + 2], f"reduce_scatter_tensor {op.name} {name}")

# bool: SUM is a logical or, PRODUCT a logical and (PyTorch)
bs = [data(r, (7,), np.int64, 2) > 2 for r in range(n)]
t = fiamma.from_numpy(bs[rank].copy())
dist.all_reduce(t)
check(t, np.logical_or.reduce(bs), "all_reduce bool SUM")
t = fiamma.from_numpy(bs[rank].copy())
dist.all_reduce(t, op=dist.ReduceOp.PRODUCT)
check(t, np.logical_and.reduce(bs), "all_reduce bool PRODUCT")
# bitwise ops on integers
ints = [data(r, (6,), np.int32, 3) for r in range(n)]
for op, f in ((dist.ReduceOp.BAND, np.bitwise_and), (dist.ReduceOp.BOR, np.bitwise_or),
              (dist.ReduceOp.BXOR, np.bitwise_xor)):
    t = fiamma.from_numpy(ints[rank].copy())
    dist.all_reduce(t, op=op)
    check(t, f.reduce(ints), f"all_reduce {op.name}")
# every size regime of the checked all_reduce: the operand riding with the check (up to 1 KB),
# a second non-blocking round (up to 64 KB), the worker thread's blocking call (larger)
for count in (1, 255, 256, 257, 4096, 16383, 16384, 16385, 40000):
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.MIN, dist.ReduceOp.AVG):
        for npd in (np.float32, np.int64):
            if op is dist.ReduceOp.AVG and npd is np.int64:
                continue
            xs = [data(r, (count,), npd, 7) for r in range(n)]
            t = fiamma.from_numpy(xs[rank].copy())
            dist.all_reduce(t, op=op)
            check(t, REF[op](xs), f"all_reduce {op.name} {npd.__name__}[{count}]")
# float16 / bfloat16: reduced in float32, rounded back as fiamma converts
for fd in (fiamma.float16, fiamma.bfloat16):
    xs = [data(r, (9,), np.float32, 4) for r in range(n)]
    t = fiamma.from_numpy(xs[rank].copy()).to(fd)
    dist.all_reduce(t)
    check(t.float(), np.sum(xs, axis=0).astype(np.float32), f"all_reduce {fd}")
    t = fiamma.from_numpy(xs[rank].copy()).to(fd)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    check(t.float(), np.max(xs, axis=0), f"all_reduce MAX {fd}")

# broadcast from every root, all dtypes incl. 0-d and empty tensors
for name, npd in DTYPES.items():
    for src in range(n):
        xs = [data(r, (4, 2), npd, 5) for r in range(n)]
        t = fiamma.from_numpy(xs[rank].copy())
        dist.broadcast(t, src=src)
        check(t, xs[src], f"broadcast {name} src={src}")
t = fiamma.tensor(float(rank))
dist.broadcast(t, src=0)
check(t, np.array(0.0, np.float32), "broadcast 0-d")
t = fiamma.zeros(0, 3)
dist.broadcast(t, src=0)
check(t, np.zeros((0, 3), np.float32), "broadcast empty")

# all_gather (list) and all_gather_into_tensor (stacked and concatenated)
xs = [data(r, (2, 3), np.float32, 6) for r in range(n)]
outs = [fiamma.zeros(2, 3) for _ in range(n)]
dist.all_gather(outs, fiamma.from_numpy(xs[rank].copy()))
for r in range(n):
    check(outs[r], xs[r], f"all_gather [{r}]")
out = fiamma.zeros(n, 2, 3)
dist.all_gather_into_tensor(out, fiamma.from_numpy(xs[rank].copy()))
check(out, np.stack(xs), "all_gather_into_tensor stacked")
out = fiamma.zeros(n * 2, 3)
dist.all_gather_into_tensor(out, fiamma.from_numpy(xs[rank].copy()))
check(out, np.concatenate(xs), "all_gather_into_tensor concatenated")

# all_to_all_single, equal and uneven splits
xs = [data(r, (2 * n, 3), np.int64, 7) for r in range(n)]
out = fiamma.zeros(2 * n, 3, dtype=fiamma.int64)
dist.all_to_all_single(out, fiamma.from_numpy(xs[rank].copy()))
check(out, np.concatenate([xs[r][2 * rank:2 * rank + 2] for r in range(n)]), "all_to_all")


def split(r):  # rank r sends (r + d + 1) rows to rank d
    return [r + d + 1 for d in range(n)]


xs = [data(r, (sum(split(r)), 2), np.float64, 8) for r in range(n)]
recv_sizes = [split(r)[rank] for r in range(n)]
out = fiamma.zeros(sum(recv_sizes), 2, dtype=fiamma.float64)
dist.all_to_all_single(out, fiamma.from_numpy(xs[rank].copy()), recv_sizes, split(rank))
pieces = []
for r in range(n):
    start = sum(split(r)[:rank])
    pieces.append(xs[r][start:start + split(r)[rank]])
check(out, np.concatenate(pieces), "all_to_all uneven")

# large tensors take the worker thread's blocking path (small ones run in the calling thread)
xs = [data(r, (40000,), np.float32, 9) for r in range(n)]
for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MAX):
    t = fiamma.from_numpy(xs[rank].copy())
    dist.all_reduce(t, op=op)
    check(t, REF[op](xs), f"all_reduce large {op.name}")
t = fiamma.from_numpy(xs[rank].copy())
dist.broadcast(t, src=n - 1)
check(t, xs[n - 1], "broadcast large")
out = fiamma.zeros(n * 40000)
dist.all_gather_into_tensor(out, fiamma.from_numpy(xs[rank].copy()))
check(out, np.concatenate(xs), "all_gather_into_tensor large")

# gather / scatter / reduce_scatter (lists) / all_to_all (lists of different sizes)
xs = [data(r, (2, 2), np.int64, 10) for r in range(n)]
root = n - 1
got = [fiamma.zeros(2, 2, dtype=fiamma.int64) for _ in range(n)] if rank == root else None
dist.gather(fiamma.from_numpy(xs[rank].copy()), got, dst=root)
if rank == root:
    for r in range(n):
        check(got[r], xs[r], f"gather [{r}]")
parts = [data(r, (3,), np.float32, 11) for r in range(n)]
out = fiamma.zeros(3)
dist.scatter(out, [fiamma.from_numpy(p.copy()) for p in parts] if rank == 0 else None, src=0)
check(out, parts[rank], "scatter")
lists = [[data(10 * r + d, (4,), np.float64, 12) for d in range(n)] for r in range(n)]
out = fiamma.zeros(4, dtype=fiamma.float64)
dist.reduce_scatter(out, [fiamma.from_numpy(x.copy()) for x in lists[rank]])
check(out, np.sum([lists[r][rank] for r in range(n)], axis=0), "reduce_scatter")
sizes = [[r + d + 1 for d in range(n)] for r in range(n)]  # rank r sends r+d+1 items to d
ins = [fiamma.full((sizes[rank][d],), rank * 100 + d, dtype=fiamma.int32) for d in range(n)]
outs = [fiamma.zeros(sizes[s][rank], dtype=fiamma.int32) for s in range(n)]
w = dist.all_to_all(outs, ins, async_op=True)
w.wait()
for s in range(n):
    check(outs[s], np.full(sizes[s][rank], s * 100 + rank, np.int32), f"all_to_all from {s}")

# async: several in flight, waited out of order
ts = [fiamma.full((5,), float(rank + i)) for i in range(4)]
works = [dist.all_reduce(t, async_op=True) for t in ts]
for i in reversed(range(4)):
    assert works[i].wait() is True
    check(ts[i], np.full(5, sum(r + i for r in range(n)), np.float32), f"async {i}")
    assert works[i].is_completed() and works[i].result() == [ts[i]]
dist.barrier()

# the same collectives asynchronous on some ranks and not on others (each rank's choice is
# its own, as in PyTorch: the MPI calls must still be of one kind; this hung before)
for size in (4, 300, 40000):
    t = fiamma.full((size,), float(rank + 1))
    if rank % 2:
        dist.all_reduce(t, async_op=True).wait()
    else:
        dist.all_reduce(t)
    check(t, np.full(size, sum(range(1, n + 1)), np.float32), f"mixed async all_reduce {size}")
    b = fiamma.full((size,), float(rank))
    (dist.broadcast(b, 1, async_op=True).wait() if rank % 2 == 0 else dist.broadcast(b, 1))
    check(b, np.full(size, 1.0, np.float32), f"mixed async broadcast {size}")
first = fiamma.ones(3)
pending = dist.all_reduce(first, async_op=True) if rank == 0 else dist.all_reduce(first)
t = fiamma.ones(2)
dist.all_reduce(t)  # rank 0 may still have the first queued; the others run this one inline
if pending is not None:
    pending.wait()
check(first, np.full(3, float(n), np.float32), "all_reduce, async on rank 0")
check(t, np.full(2, float(n), np.float32), "all_reduce behind a pending one")

# point to point: a ring, blocking and non-blocking, and a receive from any rank
right, left = (rank + 1) % n, (rank - 1) % n
out = fiamma.zeros(3, dtype=fiamma.int32)
sw = dist.isend(fiamma.full((3,), rank, dtype=fiamma.int32), right)
rw = dist.irecv(out, left)
sw.wait()
rw.wait()
check(out, np.full(3, left, np.int32), "isend/irecv ring")
# the same ring as one batch, receive listed first on every rank (all posted without waiting)
got = fiamma.zeros(2, 3)
works = dist.batch_isend_irecv([dist.P2POp(dist.irecv, got[1], left, tag=3),
                                dist.P2POp(dist.isend, fiamma.full((3,), 10.0 * rank), right,
                                           tag=3)])
assert len(works) == 2
for w in works:
    w.wait()
check(got, np.stack([np.zeros(3), np.full(3, 10.0 * left)]).astype(np.float32),
      "batch_isend_irecv ring")
try:
    dist.P2POp(dist.send, got[0], right)
    raise AssertionError("P2POp took send")
except ValueError as e:
    assert "Expected ``op`` to be of type" in str(e), e
try:
    dist.batch_isend_irecv([])
    raise AssertionError("batch_isend_irecv took an empty list")
except ValueError as e:
    assert "non-empty list of P2POp" in str(e), e
if rank == 0:
    got = set()
    for _ in range(n - 1):
        t = fiamma.zeros(2)
        src = dist.recv(t)
        check(t, np.full(2, float(src), np.float32), "recv any")
        got.add(src)
    assert got == set(range(1, n)), got
else:
    dist.send(fiamma.full((2,), float(rank)), 0)

# objects
objs = [None] * n
dist.all_gather_object(objs, {"rank": rank, "s": "x" * rank})
assert objs == [{"rank": r, "s": "x" * r} for r in range(n)], objs
lst = [rank, "a"] if rank == 1 else [None, None]
dist.broadcast_object_list(lst, src=1)
assert lst == [1, "a"], lst
gathered = [None] * n if rank == 0 else None
dist.gather_object(rank * 10, gathered, dst=0)
if rank == 0:
    assert gathered == [r * 10 for r in range(n)]
out = [None]
dist.scatter_object_list(out, [f"to{r}" for r in range(n)] if rank == 0 else None, src=0)
assert out == [f"to{rank}"], out
if rank == 0:
    dist.send_object_list([{"k": 1}, (2, 3)], dst=1)
elif rank == 1:
    got = [None, None]
    assert dist.recv_object_list(got, src=0) == 0
    assert got == [{"k": 1}, (2, 3)], got

# subgroups: the even ranks
evens = dist.new_group([r for r in range(n) if r % 2 == 0])
if rank % 2 == 0:
    t = fiamma.full((2,), float(rank))
    dist.all_reduce(t, group=evens)
    check(t, np.full(2, float(sum(range(0, n, 2))), np.float32), "all_reduce subgroup")
    assert dist.get_world_size(evens) == len(range(0, n, 2))
    assert dist.get_rank(evens) == rank // 2
    t = fiamma.full((1,), float(rank))
    dist.broadcast(t, src=max(range(0, n, 2)), group=evens)
    check(t, np.full(1, float(max(range(0, n, 2))), np.float32), "broadcast subgroup")
else:
    assert evens is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(evens) == -1
dist.barrier()
dist.monitored_barrier()
dist.monitored_barrier(wait_all_ranks=True)
dist.destroy_process_group()
print(f"OK rank {rank}")
