"""A failure scenario chosen by argv[1]; every one must end the job with an error, quickly."""

import datetime
import os
import sys
import time

import fiamma
import fiamma.distributed as dist

mode = sys.argv[1]
dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=float(sys.argv[2])))
rank = dist.get_rank()
t = fiamma.ones(4)
dist.all_reduce(t)  # everybody is up

if mode == "shapes":  # rank 1 passes another shape: every rank gets the mismatch error
    x = fiamma.ones(4) if rank == 0 else fiamma.ones(2, 3)
    try:
        dist.all_reduce(x)
    except dist.DistBackendError as e:
        print(f"rank {rank} caught: {e}", flush=True)
    else:
        raise AssertionError("no error")
    dist.barrier()  # the group is still usable after a mismatch
    # sizes on either side of what rides with the check, and of the worker thread's path
    x = fiamma.ones(3) if rank == 0 else fiamma.ones(100_000)
    try:
        dist.all_reduce(x)
    except dist.DistBackendError as e:
        print(f"rank {rank} caught: {e}", flush=True)
    else:
        raise AssertionError("no error")
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(0)
elif mode == "ops":  # different collectives at the same point
    if rank == 0:
        dist.broadcast(fiamma.ones(3), src=0)
    else:
        dist.all_reduce(fiamma.ones(3, dtype=fiamma.float64))
elif mode == "recv":  # a receive of the wrong size
    if rank == 0:
        dist.send(fiamma.ones(5), 1)
    elif rank == 1:
        dist.recv(fiamma.zeros(3), 0)
elif mode == "raise":  # rank 1 raises; the others wait in a collective
    if rank == 1:
        raise ValueError("rank 1 gives up")
    dist.all_reduce(t)
elif mode == "kill":  # rank 1 is killed
    if rank == 1:
        os.kill(os.getpid(), 9)
    dist.all_reduce(t)
elif mode == "exit":  # rank 1 leaves quietly without the collective: the others time out
    if rank == 1:
        os._exit(0)
    dist.all_reduce(t)
elif mode == "hang":  # rank 1 never joins (busy elsewhere): the others time out
    if rank == 1:
        time.sleep(300)
    dist.all_reduce(t)
elif mode == "monitored":  # rank 1 never reaches the barrier: rank 0 names it
    if rank == 1:
        time.sleep(300)
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=float(sys.argv[2])))
elif mode == "ddp":  # rank 1 never runs backward: rank 0's gradient all-reduce times out
    model = fiamma.nn.parallel.DistributedDataParallel(fiamma.nn.Linear(3, 2))
    out = model(fiamma.ones(4, 3)).sum()
    if rank == 1:
        time.sleep(300)
    out.backward()
dist.destroy_process_group()
print(f"rank {rank} finished", flush=True)
