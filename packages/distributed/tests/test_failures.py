"""Failures end in errors within the timeout, never in a hang: mismatched shapes, different
collectives, a wrong-sized receive, a raising rank, a killed rank, a rank that leaves, a rank
that never joins. Each run is bounded by a hard wall-clock limit."""

import time

import pytest
from _launch import launch, run_ranks, show

TIMEOUT = 5  # seconds: the process group's timeout in the worker


def test_mismatched_shapes_name_every_rank():
    proc = run_ranks(2, "failures.py", "shapes", TIMEOUT)
    assert proc.returncode == 0, show(proc)
    for r in (0, 1):
        assert f"rank {r} caught: fiamma.distributed: ranks disagree on what they passed to " \
               "all_reduce #2 in process group WORLD" in proc.stdout, show(proc)
    assert "rank 0: all_reduce #2 float32[4] op=SUM" in proc.stdout
    assert "rank 1: all_reduce #2 float32[2, 3] op=SUM" in proc.stdout
    for r in (0, 1):  # one operand small enough to ride with the check, one for the thread
        assert f"rank {r} caught: fiamma.distributed: ranks disagree on what they passed to " \
               "all_reduce #4 in process group WORLD" in proc.stdout, show(proc)
    assert "rank 0: all_reduce #4 float32[3] op=SUM" in proc.stdout
    assert "rank 1: all_reduce #4 float32[100000] op=SUM" in proc.stdout


def test_different_collectives():
    proc = launch(2, "failures.py", "ops", TIMEOUT)
    assert proc.returncode != 0, show(proc)
    assert "ranks called different collectives as operation #2" in proc.stderr
    assert "rank 0: broadcast #2 float32[3] root=0" in proc.stderr
    assert "rank 1: all_reduce #2 float64[3] op=SUM" in proc.stderr


def test_wrong_sized_receive():
    proc = launch(2, "failures.py", "recv", TIMEOUT)
    assert proc.returncode != 0, show(proc)
    assert ("rank 1 (of 2) failed first: fiamma.distributed.DistBackendError: fiamma.distributed:"
            " recv into float32[3] from rank 0") in proc.stderr, show(proc)
    assert "rank 0 sent float32[5] (its send #1)" in proc.stderr


@pytest.mark.parametrize("mode,first,text", [
    ("raise", 1, "ValueError: rank 1 gives up"),
    ("kill", 1, "killed by signal SIGKILL"),
    ("hang", 0, "all_reduce #2 (float32[4]) in group WORLD, rank 0 did not complete within the "
                "timeout 0:00:05"),
    ("monitored", 0, "monitored_barrier: rank 1 did not reach the barrier within 0:00:05"),
    ("ddp", 0, "DistributedDataParallel gradient all_reduce (1 buckets) in group WORLD, rank 0 "
               "did not complete within the timeout 0:00:05"),
])
def test_failing_rank_is_named_and_the_others_stop(mode, first, text):
    start = time.monotonic()
    proc = launch(2, "failures.py", mode, TIMEOUT, limit=60)
    took = time.monotonic() - start
    assert proc.returncode != 0, show(proc)
    assert f"fiamma.distributed.run: rank {first} (of 2) failed first: " in proc.stderr, show(proc)
    assert text in proc.stderr, show(proc)
    assert took < 30, took  # bounded by the timeout, not the 300 s the hanging rank sleeps


def test_rank_that_leaves_early():
    proc = launch(2, "failures.py", "exit", TIMEOUT)
    assert proc.returncode != 0, show(proc)
    assert "ranks [0] (of 2) were ended before they finished (rank 1 had exited, with code 0" \
        in proc.stderr, show(proc)


def test_timeout_without_the_launcher():
    """Plain mpiexec: the waiting rank raises DistTimeoutError and aborts the job."""
    start = time.monotonic()
    proc = run_ranks(2, "failures.py", "hang", TIMEOUT)
    assert proc.returncode != 0, show(proc)
    assert "DistTimeoutError" in proc.stderr and "aborting the MPI job" in proc.stderr
    assert time.monotonic() - start < 30


def test_an_aborted_job_leaves_no_mpich_segments():
    # MPI_Abort (a raising rank) leaves MPICH's /dev/shm/mpich_shm_* segments behind; the
    # launcher removes the ones its job made once mpiexec has returned
    from fiamma.distributed import _shm_sweep

    before = _shm_sweep.segments()
    proc = launch(2, "failures.py", "raise", TIMEOUT, limit=60)
    assert proc.returncode != 0, show(proc)
    assert _shm_sweep.segments() - before == set()
