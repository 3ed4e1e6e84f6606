"""A rank of a world formed through a store rendezvous (no mpiexec around the ranks):
``rendezvous.py MODE RANK WORLD_SIZE ADDRESS``; MODE tcp / file / env / store / early-mpi."""

import datetime
import faulthandler
import os
import sys

import numpy as np

import fiamma
import fiamma.distributed as dist

faulthandler.dump_traceback_later(40, exit=True)  # a hang shows where, then ends the rank
mode, rank, n, address = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
timeout = datetime.timedelta(seconds=4 if mode == "die" else 20)
if mode == "early-mpi" or (mode == "mixed" and rank == 1):
    from mpi4py import MPI  # noqa: F401  (an MPI singleton before init_process_group)
if mode in ("tcp", "early-mpi", "mpiexec-each", "die", "mixed"):
    dist.init_process_group("gloo", init_method=f"tcp://{address}", rank=rank, world_size=n,
                            timeout=timeout)
elif mode == "file":
    dist.init_process_group("gloo", init_method=f"file://{address}", rank=rank, world_size=n,
                            timeout=timeout)
elif mode == "env":
    host, port = address.rsplit(":", 1)
    os.environ.update(MASTER_ADDR=host, MASTER_PORT=port, RANK=str(rank), WORLD_SIZE=str(n))
    dist.init_process_group("gloo", timeout=timeout)
elif mode == "store":
    host, port = address.rsplit(":", 1)
    store = dist.TCPStore(host, int(port), n, is_master=rank == 0, timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=n, timeout=timeout)
assert (dist.get_rank(), dist.get_world_size()) == (rank, n), (dist.get_rank(),
                                                              dist.get_world_size())
if mode != "mpiexec-each":  # (mpiexec's own PMI_FD stays)
    assert "PMI_FD" not in os.environ
if mode == "die":
    if rank == 1:
        os._exit(3)  # gone without a word
    try:
        dist.all_reduce(fiamma.ones(3))
    except dist.DistTimeoutError as e:
        print(f"rank {rank} timed out: {e}", flush=True)
        raise SystemExit(1) from None
t = fiamma.full((5,), float(rank + 1))
dist.all_reduce(t)
assert t.tolist() == [n * (n + 1) / 2] * 5, t.tolist()
big = fiamma.from_numpy(np.arange(200_000, dtype=np.float64) * (rank + 1))
dist.all_reduce(big, op=dist.ReduceOp.MAX)
assert np.array_equal(big.numpy(), np.arange(200_000, dtype=np.float64) * n)
out = [fiamma.zeros(2, dtype=fiamma.int64) for _ in range(n)]
dist.all_gather(out, fiamma.tensor([rank, 10 * rank]))
assert [o.tolist() for o in out] == [[r, 10 * r] for r in range(n)]
objs = [None] * n
dist.all_gather_object(objs, {"rank": rank, "pid": os.getpid()})
assert [o["rank"] for o in objs] == list(range(n))
if n > 1:
    if rank == 0:
        dist.send(fiamma.tensor([42.0]), dst=n - 1)
    elif rank == n - 1:
        got = fiamma.zeros(1)
        dist.recv(got, src=0)
        assert got.item() == 42.0
dist.barrier()
dist.destroy_process_group()
if mode == "store":  # a store passed in is the caller's: still serving after destroy
    store.set(f"after{rank}", "1")
    store.wait([f"after{r}" for r in range(n)])
print(f"OK rank {rank}", flush=True)
