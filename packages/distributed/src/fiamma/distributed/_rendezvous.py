"""Forming the MPI world from a store rendezvous (``init_method="tcp://..."``, ``"file://..."``,
``store=``, or ``env://`` with ``MASTER_ADDR`` in processes no MPI launcher started).

Two ways, picked per process:

- MPI not initialised yet and no process manager in the environment (plain processes): rank 0
  starts a small PMI-1 server (fiamma.distributed._pmi, what ``mpiexec`` would provide) and
  publishes its address in the store; every rank connects to it and initialises MPI through
  it (``PMI_FD``/``PMI_RANK``/``PMI_SIZE``), so the ranks form one ``MPI_COMM_WORLD``. This is
  MPICH's process-manager protocol (MPICH from PyPI is the default MPI here).
- Every rank already is an MPI world of one under a process manager (e.g. each started with
  its own ``mpiexec -n 1``): rank 0 opens an MPI port (``MPI_Open_port``), its name travels
  through the store, and the ranks join one at a time (``MPI_Comm_accept``/``connect``,
  ``MPI_Intercomm_merge``).

A process whose MPI was initialised as an MPICH singleton (mpi4py.MPI imported before
init_process_group, no mpiexec) cannot do either: MPICH 5.0's singletons fail in
``MPI_Comm_connect``/``accept`` (pmodels/mpich#7805), and MPI cannot be initialised twice, so
that case raises an error saying what to do instead.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from urllib.parse import parse_qs, urlparse

from fiamma.distributed import _mpi
from fiamma.distributed._store import DistStoreError, FileStore, Store, TCPStore

# variables a process manager (Hydra, Open MPI, PMIx, Slurm's PMI) puts in the environment
_PM_VARS = ("PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE",
            "MPI_LOCALNRANKS")
_ERROR_KEY = "fiamma/rendezvous/error"


def under_process_manager():
    return any(os.environ.get(v) for v in _PM_VARS)


def mpi_started():
    return _mpi._MPI is not None or "mpi4py.MPI" in sys.modules


def store_from_url(url, rank, world_size, seconds, what="init_process_group"):
    """The store, rank and world size that ``init_method=url`` names (PyTorch's rules: rank and
    world_size from the arguments, or from ``?rank=..&world_size=..`` in the URL)."""
    import datetime

    parsed = urlparse(url)
    query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
    if rank is None or rank < 0:
        rank = int(query["rank"]) if "rank" in query else -1
    if world_size is None or world_size < 0:
        world_size = int(query["world_size"]) if "world_size" in query else -1
    if rank < 0 or world_size < 1:
        raise ValueError(f"{what}: init_method={url!r} needs rank= and world_size= (got rank="
                         f"{rank}, world_size={world_size})")
    if rank >= world_size:
        raise ValueError(f"{what}: rank {rank} is not in [0, {world_size})")
    timeout = datetime.timedelta(seconds=seconds)
    if parsed.scheme == "tcp":
        if not parsed.hostname or not parsed.port:
            raise ValueError(f"{what}: init_method={url!r} must be tcp://host:port")
        store = TCPStore(parsed.hostname, parsed.port, world_size, is_master=rank == 0,
                         timeout=timeout, wait_for_workers=False)
    elif parsed.scheme == "file":
        path = parsed.path if not parsed.netloc else f"//{parsed.netloc}{parsed.path}"
        if not path:
            raise ValueError(f"{what}: init_method={url!r} must be file:///path")
        store = FileStore(path, world_size)
        store.set_timeout(timeout)
    else:
        raise ValueError(f"{what}: init_method={url!r}: expected env://, tcp://host:port or "
                         "file:///path")
    return store, rank, world_size


def _fail(store, rank, text):
    """Tell the other ranks (they are waiting on the store) before raising."""
    try:
        store.set(_ERROR_KEY, f"rank {rank}: {text}")
    except Exception:  # noqa: BLE001  (the store itself is what failed)
        pass
    return RuntimeError(f"init_process_group: {text}")


def _wait(store, keys, deadline, what):
    """Wait for ``keys`` in the store, stopping early if another rank reported a failure."""
    while True:
        if store.check([_ERROR_KEY]):
            raise RuntimeError(f"init_process_group: another rank failed during the "
                               f"rendezvous: {store.get(_ERROR_KEY).decode()}")
        if store.check(keys):
            return
        if time.monotonic() > deadline:
            missing = [k for k in keys if not store.check([k])]
            raise DistStoreError(f"init_process_group: timed out during the rendezvous "
                                 f"waiting for {what}: {', '.join(missing)}")
        time.sleep(0.01)


def form_world(store, rank, size, seconds, advertise=None):
    """An MPI intracommunicator of ``size`` processes, this one at ``rank``, and whether
    ``MPI_COMM_WORLD`` is that world (False: it was joined from worlds of one)."""
    if not isinstance(store, Store):
        raise TypeError(f"init_process_group: store must be a fiamma.distributed Store, got "
                        f"{type(store).__name__}")
    deadline = time.monotonic() + seconds
    fresh = not mpi_started() and not under_process_manager()
    store.set(f"fiamma/rendezvous/rank{rank}",
              f"{socket.gethostname()} pid {os.getpid()} {'fresh' if fresh else 'mpi'}")
    keys = [f"fiamma/rendezvous/rank{r}" for r in range(size)]
    _wait(store, keys, deadline, "every rank to arrive (missing keys name the ranks)")
    modes = [v.decode().rsplit(" ", 1)[-1] for v in store.multi_get(keys)]
    if len(set(modes)) > 1:  # every rank sees the same list, so every rank raises
        fresh_ranks = [r for r, m in enumerate(modes) if m == "fresh"]
        raise RuntimeError(
            "init_process_group: the ranks disagree on how to form the MPI world: ranks "
            f"{fresh_ranks} have not initialised MPI and run without an MPI process manager, "
            f"the others ({[r for r in range(size) if r not in fresh_ranks]}) have MPI up "
            "already or run under mpiexec. Start every rank the same way.")
    if fresh:
        return _through_pmi(store, rank, size, seconds, deadline, advertise), True
    MPI = _mpi.mpi()
    world = MPI.COMM_WORLD
    if world.Get_size() == size:
        if world.Get_rank() != rank:
            raise _fail(store, rank, f"rank {rank} was given, but MPI_COMM_WORLD (started by "
                        f"an MPI launcher) has this process at rank {world.Get_rank()}")
        return world.Dup(), True
    if world.Get_size() != 1:
        raise _fail(store, rank, f"world_size is {size} but the MPI launcher started "
                    f"{world.Get_size()} processes")
    if not under_process_manager() and "MPICH" in MPI.Get_library_version():
        raise _fail(store, rank, (
            "MPI was initialised in this process (mpi4py.MPI imported) before "
            "init_process_group, without mpiexec: an MPICH singleton, which cannot join other "
            "processes (MPI_Comm_connect/accept fail for MPICH 5 singletons, "
            "pmodels/mpich#7805). Call init_process_group before importing mpi4py.MPI (then "
            "the ranks form the MPI world through fiamma's process manager), start each rank "
            "with `mpiexec -n 1`, or start all ranks with `python -m fiamma.distributed.run`."))
    return _through_ports(store, rank, size, deadline), False


def _through_pmi(store, rank, size, seconds, deadline, advertise):
    if rank == 0:
        host = advertise or socket.getfqdn()
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_pmi.py")
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", script, str(size), "0.0.0.0", str(seconds)],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        line = proc.stdout.readline().strip()
        if not line.isdigit():
            raise _fail(store, rank, f"the process manager did not start (it printed "
                        f"{line!r}, exit code {proc.poll()})")
        _PMI_SERVERS.append(proc)
        store.set("fiamma/rendezvous/pmi", f"{host}:{line}")
    _wait(store, ["fiamma/rendezvous/pmi"], deadline, "rank 0's process manager address")
    host, port = store.get("fiamma/rendezvous/pmi").decode().rsplit(":", 1)
    try:
        sock = socket.create_connection((host, int(port)), timeout=max(
            deadline - time.monotonic(), 1.0))
    except OSError as e:
        raise _fail(store, rank, f"cannot reach rank 0's process manager at {host}:{port}: "
                    f"{e}") from None
    sock.settimeout(None)
    fd = sock.detach()  # MPICH owns the descriptor from now on (it is used until exit)
    env = {"PMI_FD": str(fd), "PMI_RANK": str(rank), "PMI_SIZE": str(size)}
    os.environ.update(env)
    try:
        MPI = _mpi.mpi()
    finally:
        for k in env:  # child processes must not see a descriptor they do not have
            os.environ.pop(k, None)
    world = MPI.COMM_WORLD
    if (world.Get_size(), world.Get_rank()) != (size, rank):
        raise _fail(store, rank, (
            f"the MPI library ({MPI.Get_library_version().splitlines()[0]}) did not take its "
            f"rank from fiamma's process manager (MPI_COMM_WORLD has size {world.Get_size()}, "
            f"rank {world.Get_rank()}): the tcp:// and file:// rendezvous of plain processes "
            "needs MPICH; start the ranks with mpiexec or `python -m fiamma.distributed.run`"))
    return world.Dup()


_PMI_SERVERS = []


def _through_ports(store, rank, size, deadline):
    MPI = _mpi.mpi()
    if rank == 0:
        port = MPI.Open_port()
        store.set("fiamma/rendezvous/port", port)
        store.set("fiamma/rendezvous/joined0", "1")
    _wait(store, ["fiamma/rendezvous/port"], deadline, "rank 0's MPI port name")
    port = store.get("fiamma/rendezvous/port").decode()
    comm = MPI.COMM_SELF.Dup()
    try:
        if rank > 0:  # join after rank-1, so that every member is accepting
            _wait(store, [f"fiamma/rendezvous/joined{rank - 1}"], deadline,
                  f"rank {rank - 1} to join")
            inter = MPI.COMM_SELF.Connect(port, root=0)
            merged = inter.Merge(high=True)
            inter.Free()
            comm.Free()
            comm = merged
            store.set(f"fiamma/rendezvous/joined{rank}", "1")
        for _ in range(rank + 1, size):
            inter = comm.Accept(port, root=0)
            merged = inter.Merge(high=False)
            inter.Free()
            comm.Free()
            comm = merged
    except MPI.Exception as e:
        raise _fail(store, rank, f"joining the MPI worlds of the ranks through "
                    f"MPI_Comm_connect/accept failed: {e}") from None
    if rank == 0:
        MPI.Close_port(port)
    ordered = comm.Split(0, key=rank)
    comm.Free()
    return ordered


def leave(store, size, is_master, owned):
    """At destroy_process_group: the store init_process_group made from init_method (``owned``;
    a store passed as ``store=`` stays as it is) is cleaned up: a FileStore's file is removed by
    the last rank to leave; a TCPStore's master stops serving once every rank has left (or after
    a few seconds)."""
    if not owned:
        return
    try:
        n = store.add("fiamma/rendezvous/left", 1)
        if isinstance(store, FileStore) and n >= size:
            os.unlink(store.path)
        elif isinstance(store, TCPStore) and is_master:
            end = time.monotonic() + 5.0
            while int(store.get("fiamma/rendezvous/left")) < size and time.monotonic() < end:
                time.sleep(0.01)
            store.close()
    except (DistStoreError, OSError):
        pass
