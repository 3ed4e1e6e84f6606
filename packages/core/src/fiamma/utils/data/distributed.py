"""``fiamma.utils.data.distributed``: PyTorch's ``torch.utils.data.distributed`` path for
fiamma.data's ``DistributedSampler`` (the same class)."""

from fiamma.utils._sibling import require

DistributedSampler = require("fiamma.data", "fiamma-data", __name__).DistributedSampler

__all__ = ["DistributedSampler"]
