"""``fiamma.nn.intrinsic`` (``torch.nn.intrinsic``): the same module as
:mod:`fiamma.ao.nn.intrinsic` (the fused module sequences)."""
import sys

from fiamma.ao.nn import intrinsic as _i

sys.modules[__name__] = _i
