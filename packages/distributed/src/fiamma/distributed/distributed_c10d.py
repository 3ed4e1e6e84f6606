"""fiamma.distributed.distributed_c10d: PyTorch's ``torch.distributed.distributed_c10d``, the
module that holds most of ``torch.distributed``'s functions. The public names are
``fiamma.distributed``'s; the private ones libraries reach (PyTorch Lightning) are
``_get_default_group()`` and ``_pg_map`` (a live, read-only view: each existing process group
-> its ``(backend, store)``, the store being None here).

>>> from fiamma.distributed import distributed_c10d
>>> len(distributed_c10d._pg_map)   # no group before init_process_group
0
"""

from collections.abc import Mapping

import fiamma.distributed as _dist
from fiamma.distributed import *  # noqa: F401,F403
from fiamma.distributed import __all__ as _public, _state

__all__ = list(_public)


def _get_default_group():
    """The default process group (``group.WORLD``); raises before ``init_process_group``."""
    if not _state.is_initialized():
        raise ValueError("Default process group has not been initialized, please make sure to "
                         "call init_process_group.")
    return _dist.group.WORLD


class _ProcessGroupMap(Mapping):
    """PyTorch's ``_pg_map``: process group -> (backend, store), for the groups that exist."""

    def __getitem__(self, pg):
        for g in _state._groups:
            if g is pg:
                return (g.backend, None)
        raise KeyError(pg)

    def __iter__(self):
        return iter(list(_state._groups))

    def __len__(self):
        return len(_state._groups)

    def __contains__(self, pg):
        return any(g is pg for g in _state._groups)


_pg_map = _ProcessGroupMap()
