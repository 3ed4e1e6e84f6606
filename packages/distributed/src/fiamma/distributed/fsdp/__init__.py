"""``torch.distributed.fsdp``'s names. fiamma has no fully sharded data parallelism (FSDP) yet:
:class:`FullyShardedDataParallel` and :class:`FSDPModule` are names to test against (nothing is
an instance of them), FSDP's option types are PyTorch's, and wrapping a module
(``FullyShardedDataParallel(m)``, :func:`fully_shard`) raises :class:`NotImplementedError`.
See :mod:`fiamma.distributed.fsdp.fully_sharded_data_parallel`.
"""

import dataclasses

from fiamma.distributed.fsdp.fully_sharded_data_parallel import (  # noqa: F401
    _GAP,
    BackwardPrefetch,
    CPUOffload,
    FullyShardedDataParallel,
    MixedPrecision,
    ShardingStrategy,
    StateDictType,
)

__all__ = ["FullyShardedDataParallel", "ShardingStrategy", "StateDictType", "BackwardPrefetch",
           "CPUOffload", "MixedPrecision", "FSDPModule", "fully_shard", "CPUOffloadPolicy",
           "MixedPrecisionPolicy"]


class FSDPModule:
    """The class ``fully_shard`` mixes into a module (FSDP2): no fiamma module is one."""

    def __new__(cls, *args, **kwargs):
        raise NotImplementedError(_GAP.format(what="FSDPModule"))


@dataclasses.dataclass
class MixedPrecisionPolicy:
    """FSDP2's mixed-precision policy."""

    param_dtype: object = None
    reduce_dtype: object = None
    output_dtype: object = None
    cast_forward_inputs: bool = True


class CPUOffloadPolicy:
    """FSDP2's policy of keeping sharded parameters on the CPU."""

    def __init__(self, pin_memory=True):
        self.pin_memory = pin_memory


def fully_shard(module, **kwargs):
    """Not supported: fiamma has no FSDP (raises NotImplementedError)."""
    raise NotImplementedError(_GAP.format(what="fully_shard"))
