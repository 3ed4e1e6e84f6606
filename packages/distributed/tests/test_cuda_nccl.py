"""The NCCL backend on a GPU, where CuPy with NCCL sees one (benchmarks/gpu/run.sh runs this
file): the checks of workers/nccl_checks.py as a world of one; two ranks when there are two
GPUs (else two ranks sharing GPU 0 are refused); a collective that a rank skips times out.
Without a GPU: the error that names what is missing. The same checks run on the CPU over
stand-ins for CuPy and NCCL in the repository's tests/test_distributed_nccl.py (they need
core's tests beside these, which a wheel's test run does not have)."""

import subprocess
import sys

import pytest

pytest.importorskip("mpi4py", reason="fiamma-distributed needs mpi4py (and an MPI library)")
from _launch import WORKERS, env, run_ranks, show  # noqa: E402

import fiamma.distributed as dist  # noqa: E402


def gpus():
    try:
        import cupy
        from cupy.cuda import nccl  # noqa: F401

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001  (no CuPy, no NCCL, no driver, no device)
        return 0


needs_gpu = pytest.mark.skipif(gpus() < 1, reason="needs CuPy with NCCL and a GPU")


@pytest.mark.skipif(gpus() > 0, reason="CuPy with NCCL and a GPU are here")
def test_nccl_unavailable_names_what_is_missing():
    assert not dist.is_nccl_available()
    with pytest.raises(RuntimeError, match="backend='nccl' needs (CuPy built with NCCL|a CUDA "
                                           "device)"):
        dist.init_process_group("nccl")
    assert not dist.is_initialized()


@needs_gpu
def test_nccl_on_a_gpu_world_of_one():
    proc = subprocess.run([sys.executable, str(WORKERS / "nccl_gpu.py"), "one"],
                          capture_output=True, text=True, timeout=240, env=env())
    assert proc.returncode == 0 and "OK rank 0" in proc.stdout, show(proc)


@needs_gpu
def test_nccl_on_gpus_two_ranks():
    if gpus() >= 2:
        proc = run_ranks(2, "nccl_gpu.py", "ranks", limit=240)
        assert proc.returncode == 0, show(proc)
        assert "OK rank 0" in proc.stdout and "OK rank 1" in proc.stdout, show(proc)
    else:  # one GPU: NCCL allows one rank per GPU, fiamma says so on every rank
        proc = run_ranks(2, "nccl_gpu.py", "shared", limit=240)
        assert proc.returncode == 0, show(proc)
        assert proc.stdout.count("would share one GPU") == 2, show(proc)


@pytest.mark.skipif(gpus() < 2, reason="needs two GPUs")
def test_nccl_on_gpus_a_skipped_collective_times_out():
    proc = run_ranks(2, "nccl_gpu.py", "hang", limit=120)
    assert "rank 0 timed out" in proc.stdout and "(nccl) did not complete" in proc.stdout, \
        show(proc)
