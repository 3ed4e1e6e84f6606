"""``fiamma.distributed.optim`` (``torch.distributed.optim``): :class:`ZeroRedundancyOptimizer`,
which shards an optimizer's state across the ranks (ZeRO stage 1). It wraps an optimizer class
of fiamma-optim (``pip install fiamma-optim``)."""

from fiamma.distributed.optim.zero_redundancy_optimizer import ZeroRedundancyOptimizer

__all__ = ["ZeroRedundancyOptimizer"]
