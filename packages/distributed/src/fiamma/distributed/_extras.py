"""Smaller parts of torch.distributed's API: the ``Backend`` names, ``DebugLevel``,
``new_subgroups``/``new_subgroups_by_enumeration``, ``get_node_local_rank``, the coalesced
collectives (deprecated in PyTorch) and a per-rank ``breakpoint``."""

from __future__ import annotations

import enum
import os

from fiamma.distributed import _state
from fiamma.distributed._collectives import all_gather, all_reduce
from fiamma.distributed._group import DEFAULT_TIMEOUT
from fiamma.distributed._mpi import ReduceOp

default_pg_timeout = DEFAULT_TIMEOUT


class Backend(str):
    """A backend name (``Backend("GLOO") == "gloo"``); ``Backend.MPI``, ``GLOO``, ``NCCL``.
    Here "gloo" is MPI on the CPU (see ``init_process_group``)."""

    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    UCC = "ucc"
    MPI = "mpi"
    XCCL = "xccl"
    backend_list = ["undefined", "gloo", "nccl", "ucc", "mpi", "xccl"]
    default_device_backend_map = {"cpu": "gloo", "cuda": "nccl"}

    def __new__(cls, name):
        if not isinstance(name, str):
            raise ValueError(f"Backend name must be a string, but got: {name!r}")
        value = name.lower()
        if value not in cls.backend_list:
            raise ValueError(f"Backend: unknown backend {name!r}; fiamma provides 'mpi', "
                             "'gloo' (MPI on the CPU) and 'nccl'")
        return super().__new__(cls, value)


class DebugLevel(str, enum.Enum):
    """``OFF``, ``INFO``, ``DETAIL``; equal to the strings ``get_debug_level()`` returns."""

    OFF = "OFF"
    INFO = "INFO"
    DETAIL = "DETAIL"


def set_debug_level_from_env():
    """``set_debug_level`` from ``TORCH_DISTRIBUTED_DEBUG`` (OFF when unset)."""
    _state.set_debug_level(os.environ.get("TORCH_DISTRIBUTED_DEBUG", "OFF"))


def is_backend_available(backend):
    """Whether ``backend`` ("mpi", "gloo", "nccl") can be used here."""
    import fiamma.distributed as dist

    name = str(backend).lower()
    if name in ("mpi", "gloo"):
        return dist.is_mpi_available()
    if name == "nccl":
        return dist.is_nccl_available()
    return False


def get_node_local_rank(fallback_rank=None):
    """``LOCAL_RANK`` from the launcher's environment, else ``fallback_rank`` (an error when
    neither is there)."""
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError("get_node_local_rank: LOCAL_RANK is not in the environment (start the "
                       "script with python -m fiamma.distributed.run) and no fallback_rank was "
                       "given")


def get_pg_count():
    """How many process groups exist (the default one included)."""
    return len(_state._groups)  # (the default group is the first)


def supports_complex(reduceOp):  # noqa: N803  (PyTorch's argument name)
    """Whether ``reduceOp`` is defined on complex tensors (not MAX, MIN, PRODUCT,
    BAND, BOR, BXOR)."""
    return reduceOp not in (ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PRODUCT, ReduceOp.BAND,
                            ReduceOp.BOR, ReduceOp.BXOR)


def new_subgroups(group_size=None, group=None, timeout=None, backend=None, pg_options=None,
                  group_desc=None):
    """Split the world into consecutive groups of ``group_size`` ranks (default: the ranks of
    one node, ``LOCAL_WORLD_SIZE``); returns (this rank's group, all of them). Every rank
    calls it."""
    import fiamma.distributed as dist

    if group is not None:
        raise ValueError("new_subgroups: group= is not supported; subgroups split the world")
    world = dist.get_world_size()
    if group_size is None:
        group_size = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if group_size <= 0 or world % group_size:
        raise ValueError(f"new_subgroups: the world size ({world}) must be divisible by "
                         f"group_size ({group_size}), which must be positive")
    ranks = [list(range(s, s + group_size)) for s in range(0, world, group_size)]
    return new_subgroups_by_enumeration(ranks, timeout=timeout, backend=backend,
                                        group_desc=group_desc)


def new_subgroups_by_enumeration(ranks_per_subgroup_list, timeout=None, backend=None,
                                 pg_options=None, group_desc=None):
    """One group per list of global ranks (disjoint lists); returns (this rank's group or
    None, all of them). Every rank calls it."""
    import fiamma.distributed as dist

    seen = set()
    for ranks in ranks_per_subgroup_list:
        for r in ranks:
            if r in seen:
                raise ValueError(f"new_subgroups_by_enumeration: rank {r} is in more than one "
                                 "subgroup")
            seen.add(r)
    me = dist.get_rank()
    mine, groups = None, []
    for i, ranks in enumerate(ranks_per_subgroup_list):
        desc = f"{group_desc}_{i}" if group_desc else None
        g = dist.new_group(ranks, timeout=timeout, backend=backend, group_desc=desc)
        groups.append(g)
        if me in ranks:
            mine = g
    return mine, groups


def all_reduce_coalesced(tensors, op=ReduceOp.SUM, group=None, async_op=False):
    """All-reduce each tensor of the list (PyTorch's deprecated coalesced form)."""
    works = [all_reduce(t, op=op, group=group, async_op=async_op) for t in tensors]
    return _Works(works) if async_op else None


def all_gather_coalesced(output_tensor_lists, input_tensor_list, group=None, async_op=False):
    """``all_gather`` of each input into the matching output list (deprecated in PyTorch)."""
    if len(output_tensor_lists) != len(input_tensor_list):
        raise ValueError("all_gather_coalesced: expected one output list per input tensor, got "
                         f"{len(output_tensor_lists)} lists for {len(input_tensor_list)} "
                         "tensors")
    works = [all_gather(out, t, group=group, async_op=async_op)
             for out, t in zip(output_tensor_lists, input_tensor_list)]
    return _Works(works) if async_op else None


class _Works:
    """Several works as one handle."""

    def __init__(self, works):
        self._works = works

    def wait(self, timeout=None):
        for w in self._works:
            w.wait(timeout)
        return True

    def is_completed(self):
        return all(w.is_completed() for w in self._works)

    def result(self):
        return [t for w in self._works for t in w.result()]

    def get_future(self):
        from fiamma.futures import Future
        return Future._of_work(self)


def breakpoint(rank=0, skip=0):  # noqa: A001  (PyTorch's name)
    """Stop rank ``rank`` in pdb (reading from the terminal) while the others wait at a
    barrier; ``skip`` breakpoints are passed over first (per process)."""
    import sys

    import fiamma.distributed as dist

    global _skipped
    if skip > 0 and _skipped < skip:
        _skipped += 1
        return
    if dist.get_rank() == rank:
        import pdb

        stdin = sys.stdin
        try:
            sys.stdin = open("/dev/tty")  # mpiexec's ranks have no terminal stdin
        except OSError:
            pass
        try:
            pdb.Pdb(skip=["fiamma.distributed.*"]).set_trace(sys._getframe(1))
        finally:
            if sys.stdin is not stdin:
                sys.stdin.close()
                sys.stdin = stdin
    dist.barrier()


_skipped = 0
