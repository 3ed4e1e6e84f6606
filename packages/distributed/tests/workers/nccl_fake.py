"""The NCCL backend's plumbing on the CPU: CUDA tensors of core's stand-in CuPy and the
stand-in NCCL of _fake_nccl.py (which reduces over MPI); every collective against NumPy, DDP on
"cuda" parameters equal to one process on the full batch. ``nccl_fake.py CORE_TESTS [timeout]``.
"""

import datetime
import os
import sys

sys.path[:0] = [sys.argv[1], os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
import _fake_cupy  # noqa: E402  (core's CuPy stand-in)
import _fake_nccl  # noqa: E402
from nccl_checks import run_checks  # noqa: E402

import fiamma  # noqa: E402
import fiamma.distributed as dist  # noqa: E402

mode = sys.argv[2] if len(sys.argv) > 2 else "all"
with _fake_cupy.cuda_backend() as backend:
    calls = []
    fake_cp = backend.xp  # the stand-in cupy module the cuda backend runs on
    fake_cp.cuda.nccl = _fake_nccl.make(calls)
    sys.modules["cupy"] = fake_cp
    sys.modules["cupy.cuda"] = fake_cp.cuda
    sys.modules["cupy.cuda.nccl"] = fake_cp.cuda.nccl
    if mode != "shared":  # one "GPU" per process (mode shared: all ranks on one)
        fake_cp.cuda.Device.pci_bus_id = f"0000:{os.getpid() % 256:02x}:00.0"
    if mode == "shared":
        try:
            dist.init_process_group("nccl")
        except RuntimeError as e:
            print(f"rank refused: {e}", flush=True)
            assert not dist.is_initialized()
            raise SystemExit(0) from None
        raise AssertionError("two ranks on one GPU were accepted")
    seconds = 2 if mode == "timeout" else 30
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=seconds))
    assert dist.is_nccl_available() and dist.get_backend() == "nccl"
    rank, n = dist.get_rank(), dist.get_world_size()
    assert calls[0] == ("init", n, rank), calls
    dev = "cuda"
    if n == 3:  # an NCCL before 2.10 (no ncclAvg): AVG is a SUM divided on the device
        del fake_cp.cuda.nccl.NCCL_AVG

    if mode == "timeout":
        fake_cp.cuda.Event.done = False  # the collective "never finishes" on the device
        w = dist.all_reduce(fiamma.ones(3, device=dev), async_op=True)
        try:
            w.synchronize()
        except dist.DistTimeoutError as e:
            print(f"rank {rank} timed out: {e}", flush=True)
        assert ("abort",) in calls
        try:
            dist.all_reduce(fiamma.ones(3, device=dev))
        except dist.DistBackendError as e:
            print(f"rank {rank} then: {e}", flush=True)
        raise SystemExit(0)

    run_checks(dev)
    kinds = {c[0] for c in calls}
    assert {"allReduce", "broadcast", "reduce", "allGather", "reduceScatter", "send",
            "recv"} <= kinds, kinds
    dist.destroy_process_group()
    assert ("destroy",) in calls
print(f"OK rank {rank}", flush=True)
