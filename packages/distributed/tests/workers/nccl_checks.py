"""The NCCL backend's checks, shared by the run over stand-ins (nccl_fake.py) and the run on a
real GPU (nccl_gpu.py): every collective against NumPy, async handles, errors naming the op,
DDP on CUDA parameters equal to one process on the full batch (float64)."""

import numpy as np

import fiamma
import fiamma.distributed as dist
from fiamma import nn


def run_checks(dev):
    rank, n = dist.get_rank(), dist.get_world_size()

    def data(r, shape, dtype=np.float32, seed=0):
        rng = np.random.default_rng(100 * seed + r)
        return (rng.integers(-8, 9, size=shape) / 4).astype(dtype)

    def check(t, want, what):
        assert t.device.type == "cuda", what
        got = t.cpu().numpy()
        assert got.shape == want.shape and np.array_equal(got, want), \
            f"rank {rank}: {what}: {got} != {want}"

    xs = [data(r, (3, 4)) for r in range(n)]
    for op, ref in [(dist.ReduceOp.SUM, np.sum), (dist.ReduceOp.MAX, np.max),
                    (dist.ReduceOp.MIN, np.min), (dist.ReduceOp.PRODUCT, np.prod)]:
        t = fiamma.tensor(xs[rank], device=dev)
        dist.all_reduce(t, op=op)
        check(t, ref(xs, axis=0).astype(np.float32), f"all_reduce {op.name}")
    t = fiamma.tensor(xs[rank], device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    check(t, (np.sum(xs, axis=0) / n).astype(np.float32), "all_reduce AVG")
    ints = [np.arange(6, dtype=np.int64) * (r + 1) for r in range(n)]
    t = fiamma.tensor(ints[rank], device=dev)
    w = dist.all_reduce(t, async_op=True)
    assert w.wait() and w.is_completed() and w.result() == [t]
    check(t, np.sum(ints, axis=0), "async all_reduce int64")
    bs = [np.array([r == 0, False, True]) for r in range(n)]
    t = fiamma.tensor(bs[rank], device=dev)
    dist.all_reduce(t)
    check(t, np.logical_or.reduce(bs), "all_reduce bool")
    bf = fiamma.tensor(xs[rank], device=dev).to(fiamma.bfloat16)
    dist.all_reduce(bf)
    check(bf.float(), np.sum(xs, axis=0).astype(np.float32), "all_reduce bfloat16")
    t = fiamma.tensor(xs[rank], device=dev)
    dist.broadcast(t, src=n - 1)
    check(t, xs[n - 1], "broadcast")
    t = fiamma.tensor(xs[rank], device=dev)
    dist.reduce(t, dst=0)
    check(t, np.sum(xs, axis=0).astype(np.float32) if rank == 0 else xs[rank], "reduce")
    out = [fiamma.zeros(3, 4, device=dev) for _ in range(n)]
    dist.all_gather(out, fiamma.tensor(xs[rank], device=dev))
    for r in range(n):
        check(out[r], xs[r], f"all_gather [{r}]")
    big = fiamma.zeros(n * 3, 4, device=dev)
    dist.all_gather_into_tensor(big, fiamma.tensor(xs[rank], device=dev))
    check(big, np.concatenate(xs), "all_gather_into_tensor")
    ys = [data(r, (2 * n, 3), seed=1) for r in range(n)]
    o = fiamma.zeros(2, 3, device=dev)
    dist.reduce_scatter_tensor(o, fiamma.tensor(ys[rank], device=dev))
    check(o, np.sum(ys, axis=0)[2 * rank:2 * rank + 2].astype(np.float32),
          "reduce_scatter_tensor")
    # all_to_all_single with uneven splits: rank r sends r + q + 1 rows to rank q
    sizes = [[r + q + 1 for q in range(n)] for r in range(n)]
    inp = [np.arange(sum(sizes[r]) * 2, dtype=np.float64).reshape(-1, 2) + 100 * r
           for r in range(n)]
    offs = [np.concatenate([[0], np.cumsum(s)]) for s in sizes]
    want = np.concatenate([inp[r][offs[r][rank]:offs[r][rank + 1]] for r in range(n)])
    o = fiamma.zeros(want.shape[0], 2, dtype=fiamma.float64, device=dev)
    dist.all_to_all_single(o, fiamma.tensor(inp[rank], device=dev),
                           [sizes[r][rank] for r in range(n)], sizes[rank])
    check(o, want, "all_to_all_single uneven")
    root = n - 1
    got = [fiamma.zeros(3, 4, device=dev) for _ in range(n)] if rank == root else None
    dist.gather(fiamma.tensor(xs[rank], device=dev), got, dst=root)
    if rank == root:
        for r in range(n):
            check(got[r], xs[r], f"gather [{r}]")
    mine = fiamma.zeros(3, 4, device=dev)
    parts = [fiamma.tensor(xs[r] * 10, device=dev) for r in range(n)] if rank == 0 else None
    w = dist.scatter(mine, parts, src=0, async_op=True)
    w.wait()
    check(mine, xs[rank] * 10, "scatter")
    # all_to_all of lists, sizes differing per pair: rank r sends r + q + 1 values to rank q
    ins = [fiamma.full((rank + q + 1,), float(10 * rank + q), device=dev) for q in range(n)]
    outs = [fiamma.zeros(q + rank + 1, device=dev) for q in range(n)]
    dist.all_to_all(outs, ins)
    for q in range(n):
        check(outs[q], np.full(q + rank + 1, 10 * q + rank, np.float32), f"all_to_all [{q}]")
    dist.barrier()
    if n > 1 and rank == 0:
        dist.send(fiamma.tensor([5.0, 6.0], device=dev), dst=n - 1)
    elif n > 1 and rank == n - 1:
        got = fiamma.zeros(2, device=dev)
        assert dist.recv(got, src=0) == 0
        check(got, np.array([5.0, 6.0], np.float32), "recv")
    objs = [None] * n
    dist.all_gather_object(objs, rank)
    assert objs == list(range(n))
    # errors name the op
    for fn, err, text in [
        (lambda: dist.all_reduce(fiamma.ones(2, dtype=fiamma.int16, device=dev)), TypeError,
         "all_reduce: NCCL has no data type for fiamma.int16"),
        (lambda: dist.all_reduce(fiamma.ones(2, dtype=fiamma.int64, device=dev),
                                 op=dist.ReduceOp.BAND), TypeError, "no bitwise reductions"),
        (lambda: dist.recv(fiamma.ones(2, device=dev)), ValueError,
         "NCCL cannot receive from any rank"),
        (lambda: dist.all_reduce(fiamma.ones(4, 4, device=dev).t()), ValueError,
         "all_reduce: tensors must be contiguous"),
    ]:
        try:
            fn()
        except err as e:
            assert text in str(e), (text, str(e))
        else:
            raise AssertionError(f"no error: {text}")
    # a mismatch between ranks is named (the metadata check runs over MPI)
    if n > 1:
        try:
            dist.all_reduce(fiamma.ones(rank + 1, device=dev))
        except dist.DistBackendError as e:
            assert "ranks disagree on what they passed to all_reduce" in str(e), str(e)
        else:
            raise AssertionError("mismatch not detected")

    # DDP on "cuda" parameters == one process on the full batch
    fiamma.manual_seed(rank)  # different initial weights: DDP broadcasts rank 0's
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).to(dev).double()
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.0001)
    assert len(ddp._bucket_list) > 1 and ddp._cuda
    reference = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).double()
    reference.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    rng = np.random.default_rng(7)

    def sgd(params):  # (no fiamma-optim dependency)
        with fiamma.no_grad():
            for p in params:
                p -= 0.1 * p.grad
                p.grad = None
    for step in range(3):
        x = rng.standard_normal((4 * n, 4))
        y = rng.standard_normal((4 * n, 2))
        part = slice(4 * rank, 4 * rank + 4)
        loss = ((ddp(fiamma.tensor(x[part], device=dev)) - fiamma.tensor(y[part], device=dev))
                ** 2).mean()
        loss.backward()
        sgd(model.parameters())
        ((reference(fiamma.tensor(x)) - fiamma.tensor(y)) ** 2).mean().backward()
        sgd(reference.parameters())
    for (name, a), b in zip(model.named_parameters(), reference.parameters()):
        diff = np.abs(a.detach().cpu().numpy() - b.detach().numpy()).max()
        assert diff < 1e-12, (name, diff)

    # the same through a communication hook (its all-reduces on the NCCL stream, its future)
    from fiamma.distributed.algorithms.ddp_comm_hooks import default_hooks
    fiamma.manual_seed(rank)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).to(dev).double()
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.0001)
    ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    reference = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).double()
    reference.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    for step in range(2):
        x = rng.standard_normal((4 * n, 4))
        y = rng.standard_normal((4 * n, 2))
        part = slice(4 * rank, 4 * rank + 4)
        ((ddp(fiamma.tensor(x[part], device=dev)) - fiamma.tensor(y[part], device=dev))
         ** 2).mean().backward()
        sgd(model.parameters())
        ((reference(fiamma.tensor(x)) - fiamma.tensor(y)) ** 2).mean().backward()
        sgd(reference.parameters())
    for (name, a), b in zip(model.named_parameters(), reference.parameters()):
        diff = np.abs(a.detach().cpu().numpy() - b.detach().numpy()).max()
        assert diff < 1e-12, ("hook", name, diff)
