"""``torch.distributed.fsdp.fully_sharded_data_parallel``'s names. fiamma has no fully sharded
data parallelism (FSDP) yet.

Libraries test ``isinstance(module, FullyShardedDataParallel)`` and name FSDP's option enums
at start-up; for them this module gives :class:`FullyShardedDataParallel`, an ``nn.Module``
subclass that no module is an instance of (wrapping a module in it raises
:class:`NotImplementedError`), and PyTorch's option types with PyTorch's members:
:class:`ShardingStrategy`, :class:`StateDictType`, :class:`BackwardPrefetch`,
:class:`CPUOffload`, :class:`MixedPrecision`. Use ``DistributedDataParallel`` instead.

>>> import fiamma
>>> isinstance(fiamma.nn.Linear(2, 2), FullyShardedDataParallel)
False
>>> ShardingStrategy.FULL_SHARD.value
1
"""

import dataclasses
import enum

from fiamma.nn import Module as _Module

__all__ = ["FullyShardedDataParallel", "ShardingStrategy", "StateDictType", "BackwardPrefetch",
           "CPUOffload", "MixedPrecision"]

_GAP = ("fiamma has no fully sharded data parallelism (torch.distributed.fsdp): {what} is not "
        "supported; use fiamma.nn.parallel.DistributedDataParallel")


class ShardingStrategy(enum.Enum):
    """How FSDP shards parameters, gradients and optimizer state (PyTorch's members)."""

    FULL_SHARD = 1
    SHARD_GRAD_OP = 2
    NO_SHARD = 3
    HYBRID_SHARD = 4
    _HYBRID_SHARD_ZERO2 = 5


class StateDictType(enum.Enum):
    """Which kind of state dict an FSDP module gives (PyTorch's members)."""

    FULL_STATE_DICT = 1
    LOCAL_STATE_DICT = 2
    SHARDED_STATE_DICT = 3


class BackwardPrefetch(enum.Enum):
    """When FSDP prefetches the next parameters in backward (PyTorch's members)."""

    BACKWARD_PRE = 1
    BACKWARD_POST = 2


@dataclasses.dataclass
class CPUOffload:
    """Whether FSDP keeps parameters on the CPU."""

    offload_params: bool = False


@dataclasses.dataclass
class MixedPrecision:
    """FSDP's mixed-precision policy: the dtypes of parameters, reductions and buffers."""

    param_dtype: object = None
    reduce_dtype: object = None
    buffer_dtype: object = None
    keep_low_precision_grads: bool = False
    cast_forward_inputs: bool = False
    cast_root_forward_inputs: bool = True


class FullyShardedDataParallel(_Module):
    """PyTorch's FSDP wrapper: here only a name to test against; wrapping raises
    NotImplementedError."""

    def __init__(self, module=None, *args, **kwargs):
        raise NotImplementedError(_GAP.format(what="FullyShardedDataParallel(module)"))
