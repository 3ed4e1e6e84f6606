"""fiamma.nn.parallel: ``DataParallel`` (one device per process: a pass-through wrapper) and
``DistributedDataParallel`` (from the ``fiamma-distributed`` distribution, imported on first
use; fiamma-nn does not depend on it)."""

from fiamma.nn.parallel.data_parallel import DataParallel  # noqa: F401

__all__ = ["DataParallel", "DistributedDataParallel"]


def __getattr__(name):
    if name == "DistributedDataParallel":
        try:
            from fiamma.distributed._ddp import DistributedDataParallel
        except ModuleNotFoundError as e:
            if e.name not in ("fiamma.distributed", "fiamma.distributed._ddp"):
                raise
            raise AttributeError(
                "fiamma.nn.parallel.DistributedDataParallel lives in the fiamma-distributed "
                "distribution, which is not installed: pip install fiamma-distributed") from None
        return DistributedDataParallel
    raise AttributeError(f"module 'fiamma.nn.parallel' has no attribute {name!r}")
