"""Removing the shared-memory segments an MPICH job left behind.

MPICH's ranks on one node talk through ``/dev/shm/mpich_shm_*`` segments and unlink them when
the job finalizes normally; a job that ends with ``MPI_Abort``, a killed rank or a timeout
(every failure path of fiamma.distributed) leaves them, 2 MiB each, until reboot. The launcher
lists the segments before it starts ``mpiexec`` and, once ``mpiexec`` has returned (every rank
of the job is gone), removes the new ones that no live process still maps: a segment of another
job running at the same time is mapped by that job's ranks and stays.
"""

import glob
import os
import time

_PATTERN = "/dev/shm/mpich_shm_*"


def segments():
    """The MPICH segment paths present now (an empty set where /dev/shm does not exist)."""
    return set(glob.glob(_PATTERN))


def _mapped():
    """Every /dev/shm path some readable live process maps."""
    found = set()
    for maps in glob.glob("/proc/[0-9]*/maps"):
        try:
            with open(maps) as f:
                for line in f:
                    i = line.find("/dev/shm/")
                    if i >= 0:
                        found.add(line[i:].split(" (deleted)")[0].rstrip("\n"))
        except OSError:  # the process ended, or is not ours to read
            continue
    return found


def remove_orphans(before, settle=3.0):
    """Unlink the segments that appeared since ``before`` (a :func:`segments` result) and that
    no live process maps; returns how many were removed. Ranks killed by the job's end may
    still be exiting when ``mpiexec`` returns, so a segment still mapped is looked at again for
    up to ``settle`` seconds."""
    pending = segments() - before
    removed = 0
    deadline = time.monotonic() + settle
    while pending:
        for path in pending - _mapped():
            try:
                os.unlink(path)
                removed += 1
            except OSError:
                pass
        pending = segments() & pending
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    return removed
