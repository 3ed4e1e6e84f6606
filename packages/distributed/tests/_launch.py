"""Helpers: run a worker script on N MPI ranks (mpiexec from this environment) under a hard
wall-clock limit, so that a test can never hang."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

WORKERS = Path(__file__).resolve().parent / "workers"


def mpiexec():
    found = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which(
        "mpiexec")
    if found is None:
        raise RuntimeError("no mpiexec: install the test extra (pip install mpich)")
    return found


def env():
    e = dict(os.environ)
    e.setdefault("OMP_NUM_THREADS", "1")
    # a clean environment: the launcher variables of an outer job must not leak in
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
              "MASTER_PORT", "FIAMMA_DIST_FAILURE_DIR"):
        e.pop(k, None)
    return e


def run_ranks(n, worker, *args, limit=60):
    """``mpiexec -n n python workers/<worker> args``; a CompletedProcess (text output). The
    MPICH segments a failing job leaves in /dev/shm are removed afterwards, as the launcher
    does."""
    from fiamma.distributed import _shm_sweep

    cmd = [mpiexec(), "-n", str(n), sys.executable, str(WORKERS / worker), *map(str, args)]
    before = _shm_sweep.segments()
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=limit, env=env())
    finally:
        _shm_sweep.remove_orphans(before)


def launch(n, worker, *args, limit=60, flags=()):
    """The same through ``python -m fiamma.distributed.run``."""
    cmd = [sys.executable, "-m", "fiamma.distributed.run", "--nproc-per-node", str(n), *flags,
           str(WORKERS / worker), *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=limit, env=env())


def show(proc):
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
