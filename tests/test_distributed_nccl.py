"""fiamma-distributed's NCCL backend on the CPU: its own code (unique id over MPI, pointers
and counts, datatypes and ops, streams and events, grouped sends and receives, the watchdog,
DDP's device buckets) run over core's CuPy stand-in (packages/core/tests/_fake_cupy.py, whose
"device" memory is host memory) and packages/distributed/tests/_fake_nccl.py (CuPy's NCCL names
and signatures, reducing over MPI), on 2 and 3 ranks under mpiexec. Here rather than in the
package's tests because it needs core's tests beside them (the root tests run in place)."""

import sys
from pathlib import Path

import pytest

pytest.importorskip("fiamma.distributed")
pytest.importorskip("mpi4py")
ROOT = Path(__file__).resolve().parents[1]
CORE_TESTS = ROOT / "packages" / "core" / "tests"
sys.path.insert(0, str(ROOT / "packages" / "distributed" / "tests"))
from _launch import run_ranks, show  # noqa: E402  (the package's test helper: mpiexec, sweep)


@pytest.mark.parametrize("ranks", [2, 3])
def test_nccl_plumbing_over_stand_ins(ranks):
    proc = run_ranks(ranks, "nccl_fake.py", CORE_TESTS, limit=180)
    assert proc.returncode == 0, show(proc)
    for r in range(ranks):
        assert f"OK rank {r}" in proc.stdout, show(proc)


def test_nccl_watchdog_aborts_a_collective_that_never_ends():
    proc = run_ranks(2, "nccl_fake.py", CORE_TESTS, "timeout", limit=120)
    out = proc.stdout + proc.stderr
    assert "rank 0 timed out: fiamma.distributed: all_reduce #2 (float32[3]) in group WORLD, " \
           "rank 0 (nccl) did not complete within the timeout 0:00:02" in out, show(proc)
    assert "The NCCL communicator was aborted" in out, show(proc)
    assert "rank 1 then: fiamma.distributed: all_reduce #3: process group WORLD is unusable" \
           in out, show(proc)
    assert proc.returncode != 0, show(proc)  # a broken group aborts the job at exit


def test_nccl_two_ranks_on_one_gpu_are_refused():
    proc = run_ranks(2, "nccl_fake.py", CORE_TESTS, "shared", limit=120)
    assert proc.returncode == 0, show(proc)
    assert proc.stdout.count("rank refused: init_process_group: backend='nccl': ranks 0 and 1 "
                             "would share one GPU") == 2, show(proc)
