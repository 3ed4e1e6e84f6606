"""The NCCL backend on real GPUs (CuPy with NCCL): ``nccl_gpu.py MODE``. MODE ``one``: a world
of one (a plain process); ``ranks``: under ``mpiexec -n N``, rank r on GPU r; ``shared``: every
rank on GPU 0 (refused: NCCL allows one rank per GPU); ``hang``: rank 1 skips a collective, so
rank 0's times out and the watchdog aborts the communicator."""

import datetime
import sys

from nccl_checks import run_checks

import fiamma
import fiamma.distributed as dist

mode = sys.argv[1]
if mode == "shared":
    try:
        dist.init_process_group("nccl", device_id=0)
    except RuntimeError as e:
        print(f"rank refused: {e}", flush=True)
        raise SystemExit(0) from None
    raise AssertionError("two ranks on one GPU were accepted")
timeout = datetime.timedelta(seconds=5 if mode == "hang" else 60)
if mode == "one":
    dist.init_process_group("nccl", timeout=timeout, device_id=0)
else:
    from mpi4py import MPI

    dist.init_process_group("nccl", timeout=timeout,
                            device_id=MPI.COMM_WORLD.Get_rank())
rank = dist.get_rank()
dev = f"cuda:{fiamma.cuda.current_device()}"
if mode == "hang":
    if rank == 0:
        try:
            w = dist.all_reduce(fiamma.ones(4, device=dev), async_op=True)
            w.synchronize()
        except dist.DistTimeoutError as e:
            print(f"rank 0 timed out: {e}", flush=True)
            raise SystemExit(0) from None
    else:
        import time

        time.sleep(15)
        raise SystemExit(0)
    raise AssertionError("no timeout")
run_checks(dev)
fiamma.cuda.synchronize()
dist.destroy_process_group()
print(f"OK rank {rank}", flush=True)
