"""The NCCL backend. On any machine: its plumbing over stand-ins (core's CuPy stand-in, whose
"device" memory is host memory, and tests/_fake_nccl.py, an NCCL that reduces over MPI) on 2
and 3 ranks; the watchdog's timeout; two ranks on one GPU refused; the error without CuPy.
Where CuPy sees a GPU (benchmarks/gpu/run.sh runs this file): the same checks on the GPU (a
world of one; two ranks when there are two GPUs, else two ranks sharing GPU 0 are refused),
and a collective that a rank skips times out."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mpi4py", reason="fiamma-distributed needs mpi4py (and an MPI library)")
from _launch import WORKERS, env, run_ranks, show  # noqa: E402

import fiamma.distributed as dist  # noqa: E402

CORE_TESTS = Path(__file__).resolve().parents[2] / "core" / "tests"
needs_stand_in = pytest.mark.skipif(not (CORE_TESTS / "_fake_cupy.py").exists(),
                                    reason="core's tests (_fake_cupy.py) are not beside this "
                                           "package's tests")


def gpus():
    try:
        import cupy
        from cupy.cuda import nccl  # noqa: F401

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001  (no CuPy, no NCCL, no driver, no device)
        return 0


needs_gpu = pytest.mark.skipif(gpus() < 1, reason="needs CuPy with NCCL and a GPU")


@needs_stand_in
@pytest.mark.parametrize("ranks", [2, 3])
def test_nccl_plumbing_over_stand_ins(ranks):
    proc = run_ranks(ranks, "nccl_fake.py", CORE_TESTS, limit=180)
    assert proc.returncode == 0, show(proc)
    for r in range(ranks):
        assert f"OK rank {r}" in proc.stdout, show(proc)


@needs_stand_in
def test_nccl_watchdog_aborts_a_collective_that_never_ends():
    proc = run_ranks(2, "nccl_fake.py", CORE_TESTS, "timeout", limit=120)
    out = proc.stdout + proc.stderr
    assert "rank 0 timed out: fiamma.distributed: all_reduce #2 (float32[3]) in group WORLD, " \
           "rank 0 (nccl) did not complete within the timeout 0:00:02" in out, show(proc)
    assert "The NCCL communicator was aborted" in out, show(proc)
    assert "rank 1 then: fiamma.distributed: all_reduce #3: process group WORLD is unusable" \
           in out, show(proc)
    assert proc.returncode != 0, show(proc)  # a broken group aborts the job at exit


@needs_stand_in
def test_nccl_two_ranks_on_one_gpu_are_refused():
    proc = run_ranks(2, "nccl_fake.py", CORE_TESTS, "shared", limit=120)
    assert proc.returncode == 0, show(proc)
    assert proc.stdout.count("rank refused: init_process_group: backend='nccl': ranks 0 and 1 "
                             "would share one GPU") == 2, show(proc)


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
