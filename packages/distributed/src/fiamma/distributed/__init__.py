"""fiamma.distributed: PyTorch's torch.distributed on MPI and NCCL.

Process groups and collectives on CPU tensors through mpi4py (MPICH or Open MPI), on CUDA
tensors through NCCL (CuPy's ``cupy.cuda.nccl``, ``backend="nccl"``), a launcher
(``python -m fiamma.distributed.run``), key-value stores with ``tcp://``/``file://``
rendezvous, and ``DistributedDataParallel``. Every collective honours
the group's timeout, and (unless ``set_debug_level("OFF")``) the ranks compare what they passed
before each collective, so a mismatch raises an error naming each rank's shapes and dtypes.

>>> import fiamma, fiamma.distributed as dist
>>> dist.init_process_group("mpi")       # under the launcher or mpiexec: one of N ranks
>>> t = fiamma.ones(3)
>>> dist.all_reduce(t)                   # sums over the ranks (here: one)
>>> t.tolist()
[1.0, 1.0, 1.0]
>>> dist.destroy_process_group()
"""

import enum as _enum
import importlib.util as _util

from fiamma.distributed._collectives import (  # noqa: F401
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    all_to_all,
    all_to_all_single,
    barrier,
    broadcast,
    gather,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
    scatter,
)
from fiamma.distributed._extras import (  # noqa: F401
    Backend,
    DebugLevel,
    all_gather_coalesced,
    all_reduce_coalesced,
    breakpoint,
    default_pg_timeout,
    get_node_local_rank,
    get_pg_count,
    is_backend_available,
    new_subgroups,
    new_subgroups_by_enumeration,
    set_debug_level_from_env,
    supports_complex,
)
from fiamma.distributed._group import (  # noqa: F401
    DistBackendError,
    DistError,
    DistTimeoutError,
    ProcessGroup,
    Work,
)
from fiamma.distributed._mpi import ReduceOp  # noqa: F401
from fiamma.distributed._objects import (  # noqa: F401
    all_gather_object,
    broadcast_object_list,
    gather_object,
    recv_object_list,
    scatter_object_list,
    send_object_list,
)
from fiamma.distributed._p2p import (  # noqa: F401
    P2POp,
    batch_isend_irecv,
    irecv,
    isend,
    monitored_barrier,
    recv,
    send,
)
from fiamma.distributed._reducer import GradBucket  # noqa: F401
from fiamma.distributed._state import (  # noqa: F401
    GroupMember,
    destroy_process_group,
    get_backend,
    get_debug_level,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_initialized,
    new_group,
    set_debug_level,
)
from fiamma.distributed._store import (  # noqa: F401
    DistStoreError,
    FileStore,
    HashStore,
    PrefixStore,
    Store,
    TCPStore,
)
from fiamma.distributed._version import __version__  # noqa: F401


class _DeprecatedReduceOp:
    """PyTorch's deprecated ``reduce_op``: its attributes are :class:`ReduceOp`'s, each read
    with PyTorch's ``FutureWarning``."""

    def __getattribute__(self, name):
        import warnings

        if name.startswith("__"):
            return object.__getattribute__(self, name)
        warnings.warn("`torch.distributed.reduce_op` is deprecated, please use "
                      "`torch.distributed.ReduceOp` instead", FutureWarning, stacklevel=2)
        return getattr(ReduceOp, name)


reduce_op = _DeprecatedReduceOp()


class BuiltinCommHookType(_enum.Enum):
    """DDP's built-in communication hooks, for
    ``DistributedDataParallel._register_builtin_comm_hook``."""

    ALLREDUCE = 1
    FP16_COMPRESS = 2

__all__ = [
    "init_process_group", "destroy_process_group", "is_initialized", "is_available",
    "is_mpi_available", "is_gloo_available", "is_nccl_available", "is_torchelastic_launched",
    "get_rank", "get_world_size", "get_backend", "new_group", "get_process_group_ranks",
    "get_global_rank", "get_group_rank", "get_default_backend_for_device", "set_debug_level",
    "get_debug_level", "GroupMember", "group", "ProcessGroup", "ReduceOp", "Work",
    "DistError", "DistBackendError", "DistTimeoutError", "DistStoreError", "Store", "TCPStore",
    "FileStore", "HashStore", "PrefixStore",
    "all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
    "reduce_scatter_tensor", "reduce_scatter", "all_to_all_single", "all_to_all", "gather",
    "scatter", "barrier", "monitored_barrier", "send", "recv", "isend", "irecv", "P2POp",
    "batch_isend_irecv",
    "all_gather_object", "gather_object", "broadcast_object_list", "scatter_object_list",
    "send_object_list", "recv_object_list", "DistributedDataParallel", "GradBucket",
    "BuiltinCommHookType", "Backend", "DebugLevel", "default_pg_timeout", "get_node_local_rank",
    "get_pg_count", "is_backend_available", "new_subgroups", "new_subgroups_by_enumeration",
    "set_debug_level_from_env", "supports_complex", "all_reduce_coalesced",
    "all_gather_coalesced", "breakpoint",
]


def is_available():
    """Whether the distributed package can run here (mpi4py is installed)."""
    return _util.find_spec("mpi4py") is not None


def is_mpi_available():
    return is_available()


def is_gloo_available():
    """True where MPI is: ``backend="gloo"`` runs on MPI in fiamma."""
    return is_available()


def is_nccl_available():
    """Whether ``backend="nccl"`` can run here: CuPy with NCCL imports and sees a GPU."""
    from fiamma.distributed._nccl import available

    return available()


def get_default_backend_for_device(device):
    """The backend PyTorch would pick for ``device``: "gloo" for CPU (MPI here), "nccl" for
    CUDA.

    >>> import fiamma.distributed as dist
    >>> dist.get_default_backend_for_device("cpu")
    'gloo'
    """
    kind = getattr(device, "type", None) or str(device).split(":")[0]
    backends = {"cpu": "gloo", "cuda": "nccl"}
    if kind not in backends:
        raise ValueError(f"get_default_backend_for_device: no backend for device {device!r}")
    return backends[kind]


def is_torchelastic_launched():
    """Whether this process was started by fiamma's launcher (PyTorch's name)."""
    import os

    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


# submodules PyTorch's torch.distributed imports at start-up, so that they read as attributes
# (``torch.distributed.device_mesh.DeviceMesh`` in an annotation, as diffusers has): imported
# here at the first use
_EAGER_SUBMODULES = ("device_mesh", "algorithms", "distributed_c10d", "constants", "utils")


def __getattr__(name):
    if name == "DistributedDataParallel":
        from fiamma.distributed._ddp import DistributedDataParallel

        return DistributedDataParallel
    if name in _EAGER_SUBMODULES:
        import importlib

        return importlib.import_module(f"fiamma.distributed.{name}")
    if name in ("DeviceMesh", "init_device_mesh"):
        from fiamma.distributed import device_mesh

        return getattr(device_mesh, name)
    raise AttributeError(f"module 'fiamma.distributed' has no attribute {name!r}")
