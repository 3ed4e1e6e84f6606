"""The default process group: init_process_group, destroy_process_group, new_group, ranks, and
what happens at exit when something failed."""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
import traceback
import warnings

from fiamma.distributed import _mpi, _rendezvous, _store
from fiamma.distributed._group import (
    DEFAULT_TIMEOUT,
    Header,
    ProcessGroup,
    _seconds,
)


class _NonMember:
    def __repr__(self):
        return "GroupMember.NON_GROUP_MEMBER"


class GroupMember:
    """``GroupMember.WORLD`` is the default group once initialised;
    ``GroupMember.NON_GROUP_MEMBER`` is what ``new_group`` returns to ranks outside it."""

    WORLD = None
    NON_GROUP_MEMBER = _NonMember()


_world = None
_groups = []
_broken = False
_rv = None           # (store, world size, is rank 0) of a store rendezvous
_abort_comm = None   # what to abort at exit when MPI_COMM_WORLD is not the whole job
_exit_hook = False
_debug = "INFO"
_BACKENDS = ("mpi", "gloo", "nccl")


class group:  # noqa: N801  (PyTorch's name: torch.distributed.group.WORLD)
    """``group.WORLD``: the default process group (None before ``init_process_group``)."""

    WORLD = None


def set_debug_level(level):
    """How much checking collectives do, for groups created after the call: ``"OFF"`` (none),
    ``"INFO"`` (the default: before each collective the ranks exchange what they passed, one
    small allgather, and disagreements raise an error naming every rank's shapes and dtypes) or
    ``"DETAIL"`` (the same). Call it with the same level on every rank.

    >>> import fiamma.distributed as dist
    >>> dist.set_debug_level("INFO"); dist.get_debug_level()
    'INFO'
    """
    global _debug
    level = str(getattr(level, "name", level)).upper()
    if level not in ("OFF", "INFO", "DETAIL"):
        raise ValueError(f"set_debug_level: expected 'OFF', 'INFO' or 'DETAIL', got {level!r}")
    _debug = level


def get_debug_level():
    return _debug


def mark_broken():
    global _broken
    _broken = True


def is_initialized():
    """Whether the default process group exists.

    >>> import fiamma.distributed as dist
    >>> dist.is_initialized()
    False
    """
    return _world is not None


def _require(what):
    if _world is None:
        raise RuntimeError(f"{what}: the default process group has not been initialized; "
                           "call fiamma.distributed.init_process_group() first")
    return _world


def resolve(group, what):
    """The ProcessGroup to use (None: the default), or None when this rank is not a member."""
    if group is None or group is GroupMember.WORLD:
        return _require(what)
    if group is GroupMember.NON_GROUP_MEMBER:
        warnings.warn(f"{what}: this rank is not a member of the given group; nothing to do",
                      stacklevel=3)
        return None
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"{what}: group must be a ProcessGroup from new_group(), got "
                        f"{type(group).__name__}")
    _require(what)
    return group


def _env_int(name):
    v = os.environ.get(name)
    if v is None or v == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"init_process_group: environment variable {name}={v!r} is not an "
                         "integer") from None


def _rendezvous_of(init_method, store, rank, world_size, seconds):
    """(store, rank, world_size) when the world forms through a store rendezvous, else None
    (the MPI launcher formed it)."""
    if store is not None:
        if init_method is not None:
            raise ValueError("init_process_group: init_method and store are mutually exclusive")
        if rank is None or world_size is None or rank < 0 or world_size < 1:
            raise ValueError("init_process_group: store= needs rank= and world_size= (got "
                             f"rank={rank}, world_size={world_size})")
        if rank >= world_size:
            raise ValueError(f"init_process_group: rank {rank} is not in [0, {world_size})")
        return store, rank, world_size
    if init_method is not None and not isinstance(init_method, str):
        raise TypeError(f"init_process_group: init_method must be a str, got "
                        f"{type(init_method).__name__}")
    if init_method not in (None, "env://"):
        return _rendezvous.store_from_url(init_method, rank, world_size, seconds)
    # env:// in processes no MPI launcher started (e.g. by hand, or another launcher):
    # MASTER_ADDR/MASTER_PORT name rank 0's store, as in PyTorch
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    size = world_size if world_size is not None and world_size >= 0 else _env_int("WORLD_SIZE")
    if (addr and port and size and size > 1 and not _rendezvous.under_process_manager()
            and not _rendezvous.mpi_started()):
        me = rank if rank is not None and rank >= 0 else _env_int("RANK")
        if me is None:
            raise ValueError("init_process_group: env:// with MASTER_ADDR needs RANK (or "
                             "rank=)")
        return _rendezvous.store_from_url(f"tcp://{addr}:{port}", me, size, seconds)
    return None


def _launcher_size():
    """(variable, N) where an MPI launcher's environment says it started N ranks, else None."""
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        n = _env_int(name)
        if n is not None:
            return name, n
    return None


def _world_from_launcher(MPI, rank, world_size):  # noqa: N803  (the module's name)
    world = MPI.COMM_WORLD
    mpi_rank, mpi_size = world.Get_rank(), world.Get_size()
    want_rank = rank if rank is not None and rank >= 0 else _env_int("RANK")
    want_size = (world_size if world_size is not None and world_size >= 0
                 else _env_int("WORLD_SIZE"))
    launched = _launcher_size()
    if launched is not None and launched[1] != mpi_size:
        name, n = launched
        lib = MPI.Get_library_version().strip().splitlines()[0]
        raise RuntimeError(
            f"init_process_group: the launcher started {n} ranks ({name}={n}) but the MPI "
            f"library mpi4py loaded ({lib}) sees a world of {mpi_size}: the launcher and the "
            "library are from different MPI implementations. Start the ranks with the mpiexec "
            "of that library, or point mpi4py at the launcher's library (MPI4PY_LIBMPI=/path/"
            "to/libmpi.so and MPI4PY_MPIABI=mpich or openmpi)")
    if (want_size is not None and want_size != mpi_size and mpi_size == 1
            and os.environ.get("MASTER_ADDR") and os.environ.get("MASTER_PORT")
            and not _rendezvous.under_process_manager()):
        # env:// named a store, but MPI had been initialised already (mpi4py.MPI imported before
        # init_process_group: PyTorch Lightning does so when it probes for an MPI cluster), so
        # this process is an MPI singleton and cannot join the others through the store
        raise ValueError(
            f"init_process_group: MASTER_ADDR/MASTER_PORT ask for a rendezvous of {want_size} "
            "ranks, but MPI was initialised in this process before init_process_group "
            "(mpi4py.MPI imported), which makes it an MPI world of one that cannot join other "
            "processes (pmodels/mpich#7805). Call init_process_group before importing "
            "mpi4py.MPI, or start the ranks with `python -m fiamma.distributed.run "
            "--nproc-per-node N` (with PyTorch Lightning: strategy='ddp_spawn', or its 'ddp' "
            "strategy under that launcher)")
    if want_size is not None and want_size != mpi_size:
        how = ("this process was not started by an MPI launcher (it is an MPI world of one); "
               "start the ranks with `python -m fiamma.distributed.run --nproc-per-node N` or "
               "`mpiexec -n N`, or give init_method='tcp://host:port' (or MASTER_ADDR and "
               "MASTER_PORT) with rank and world_size" if mpi_size == 1
               else f"the MPI launcher started {mpi_size} processes")
        raise ValueError(f"init_process_group: world_size/WORLD_SIZE is {want_size} but {how}")
    if want_rank is not None and want_rank != mpi_rank:
        raise ValueError(f"init_process_group: rank/RANK is {want_rank} but MPI gave this process "
                         f"rank {mpi_rank}")
    return world.Dup()


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    """Join the default process group.

    Where the processes come from:

    - ``init_method=None`` or ``"env://"`` under an MPI launcher (``python -m
      fiamma.distributed.run``, ``mpiexec``, ``srun``): the launcher's ranks;
      ``RANK``/``WORLD_SIZE`` or ``rank=``/``world_size=``, when given, must agree with it.
    - ``init_method="tcp://host:port"`` (rank 0 serves a ``TCPStore`` there),
      ``"file:///path"`` (a ``FileStore``), ``store=`` a store, or ``env://`` with
      ``MASTER_ADDR``/``MASTER_PORT``/``RANK``/``WORLD_SIZE`` in processes no MPI launcher
      started: ``rank`` and ``world_size`` come from the arguments (or the environment), and
      the processes form the MPI world through the store (see ``_rendezvous.py``). Call
      ``init_process_group`` before importing ``mpi4py.MPI`` yourself.

    ``backend``: ``"mpi"`` (CPU tensors; ``"gloo"`` and None mean the same here) or
    ``"nccl"``. ``timeout`` (a ``datetime.timedelta``, default 30 minutes) bounds every
    collective of the group.

    >>> import fiamma.distributed as dist
    >>> dist.init_process_group("mpi")          # a single process is a world of one
    >>> dist.get_rank(), dist.get_world_size()
    (0, 1)
    >>> dist.destroy_process_group()
    """
    global _world, _exit_hook
    if _world is not None:
        raise RuntimeError("init_process_group: trying to initialize the default process group "
                           "twice")
    backend = "mpi" if backend is None else str(backend).lower()
    if backend not in _BACKENDS:
        raise ValueError(f"init_process_group: unknown backend {backend!r}; expected one of "
                         f"{', '.join(_BACKENDS)}")
    seconds = _seconds(timeout, "init_process_group") or DEFAULT_TIMEOUT.total_seconds()
    rendezvous = _rendezvous_of(init_method, store, rank, world_size, seconds)
    if rendezvous is not None:
        rv_store, rank, world_size = rendezvous
        advertise = None
        if isinstance(rv_store, _store.TCPStore):
            advertise = rv_store.host
        comm, is_world = _rendezvous.form_world(rv_store, rank, world_size, seconds,
                                                advertise)
        MPI = _mpi.mpi()
        global _rv, _abort_comm
        _rv = (rv_store, world_size, rank == 0, store is None)
        if not is_world and _abort_comm is None:  # joined from worlds of one
            _abort_comm = comm.Dup()
    else:
        MPI = _mpi.mpi()
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        raise RuntimeError(
            "init_process_group: MPI was initialised without MPI_THREAD_MULTIPLE (thread level "
            f"{MPI.Query_thread()}), which fiamma.distributed needs (collectives run on a worker "
            "thread): set mpi4py.rc.thread_level = 'multiple' before importing mpi4py.MPI, or "
            "let init_process_group import it")
    if rendezvous is None:
        comm = _world_from_launcher(MPI, rank, world_size)
    mpi_size = comm.Get_size()
    pg = ProcessGroup(comm, range(mpi_size), group_name or "WORLD", seconds,
                      check=_debug != "OFF")
    pg.backend = backend
    if backend == "nccl":
        _attach_nccl(pg, device_id)
    _world = pg
    _groups.append(_world)
    GroupMember.WORLD = group.WORLD = _world
    if not _exit_hook:
        atexit.register(_at_exit)
        _exit_hook = True


def _attach_nccl(pg, device_id):
    """Give ``pg`` its NCCL communicator, on ``device_id`` (a cuda device or index) or the
    current CUDA device; on failure the group is shut down and the error raised."""
    from fiamma.distributed import _nccl

    try:
        _nccl.modules()
        import fiamma

        if not fiamma.cuda.is_available():
            raise RuntimeError("init_process_group: backend='nccl' needs a CUDA device: "
                               f"{fiamma.cuda.unavailable_reason()}")
        if device_id is None:
            index = fiamma.cuda.current_device()
        else:
            index = getattr(device_id, "index", device_id)
            index = 0 if index is None else int(index)
            fiamma.cuda.set_device(index)
        pg._nccl = _nccl.NcclGroup(pg, index)
    except BaseException:
        pg._shutdown()
        raise


def destroy_process_group(group=None):
    """Leave a process group (None: the default group and every group made from it)."""
    global _world
    if group is None or group is _world:
        if _world is None:
            raise RuntimeError("destroy_process_group: the default process group is not "
                               "initialized")
        for g in reversed(_groups):
            if getattr(g, "_nccl", None) is not None:
                g._nccl.close()
            g._shutdown()
        _groups.clear()
        _world = None
        GroupMember.WORLD = globals()["group"].WORLD = None
        global _rv
        if _rv is not None:
            rv, _rv = _rv, None
            _rendezvous.leave(*rv)
        return
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    if group in _groups:
        if getattr(group, "_nccl", None) is not None:
            group._nccl.close()
        group._shutdown()
        _groups.remove(group)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization=False, group_desc=None):
    """A process group of the given global ranks (all ranks when None). Every rank of the
    default group must call it, members or not (as in PyTorch); non-members get
    ``GroupMember.NON_GROUP_MEMBER``."""
    world = _require("new_group")
    kind = world.backend if backend is None else str(backend).lower()
    if kind not in _BACKENDS:
        raise ValueError(f"new_group: unknown backend {backend!r}; expected one of "
                         f"{', '.join(_BACKENDS)}")
    size = world.size()
    members = list(range(size)) if ranks is None else sorted(int(r) for r in ranks)
    if len(set(members)) != len(members) or any(not 0 <= r < size for r in members):
        raise ValueError(f"new_group: ranks must be distinct ranks in [0, {size - 1}], got "
                         f"{ranks}")
    seconds = _seconds(timeout, "new_group") or world._timeout
    me = world.rank()
    out = {}
    MPI = _mpi.mpi()

    def run():
        color = 0 if me in members else MPI.UNDEFINED
        out["comm"] = world._comm.Split(color, key=me)

    import zlib
    header = Header.make("new_group", 0, extra=zlib.crc32(repr(members).encode()))
    world._submit("new_group", header, run, f"ranks {members}").wait()
    if me not in members:
        return GroupMember.NON_GROUP_MEMBER
    name = group_desc or f"group{len(_groups)}{members}"
    g = ProcessGroup(out["comm"], members, name, seconds, check=_debug != "OFF")
    g.backend = "mpi" if kind == "gloo" else kind
    if kind == "nccl":
        dev = getattr(world, "_nccl", None)
        _attach_nccl(g, dev.device if dev is not None else None)
    _groups.append(g)
    return g


def get_rank(group=None):
    """This process's rank in ``group`` (-1 when it is not a member)."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return resolve(group, "get_rank").rank()


def get_world_size(group=None):
    """The number of ranks in ``group`` (-1 when this process is not a member)."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return resolve(group, "get_world_size").size()


def get_backend(group=None):
    return resolve(group, "get_backend").backend


def get_process_group_ranks(group):
    return list(resolve(group, "get_process_group_ranks")._ranks)


def get_global_rank(group, group_rank):
    g = resolve(group, "get_global_rank")
    if not 0 <= group_rank < g.size():
        raise ValueError(f"get_global_rank: group rank {group_rank} is not in [0, {g.size()})")
    return g._ranks[group_rank]


def get_group_rank(group, global_rank):
    g = resolve(group, "get_group_rank")
    return g._group_rank(global_rank, "get_group_rank", "global_rank")


# ---- failures --------------------------------------------------------------------------------

def record_failure(rank, kind, text):
    """Write ``rank``'s failure where the launcher looks (first record per rank wins)."""
    folder = os.environ.get("FIAMMA_DIST_FAILURE_DIR")
    if not folder:
        return
    path = os.path.join(folder, f"rank-{rank}.json")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:
        return
    with os.fdopen(fd, "w") as f:
        json.dump({"rank": rank, "time": time.time(), "kind": kind, "text": text}, f)


def _at_exit():
    """An unhandled exception, or a collective that timed out, in a rank of a multi-process
    world aborts the MPI job: the other ranks stop now instead of waiting for this one in their
    next collective (or in MPI_Finalize)."""
    exc = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if exc is None and not _broken:
        return
    MPI = _mpi._MPI
    job = _abort_comm if _abort_comm is not None else (MPI.COMM_WORLD if MPI else None)
    if MPI is None or MPI.Is_finalized() or job.Get_size() == 1:
        return
    rank = job.Get_rank()
    if exc is not None:
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    else:
        text = "a collective timed out"
    record_failure(rank, "exception", text)
    sys.stdout.flush()
    sys.stderr.write(f"fiamma.distributed: rank {rank} failed ({text.splitlines()[0]}); "
                     "aborting the MPI job\n")
    sys.stderr.flush()
    time.sleep(0.2)  # let mpiexec forward what was printed before it kills the job
    job.Abort(1)

