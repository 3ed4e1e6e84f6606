"""``fiamma.nn.qat`` (``torch.nn.qat``): the same module as :mod:`fiamma.ao.nn.qat` (the
quantization-aware-training modules)."""
import sys

from fiamma.ao.nn import qat as _q

sys.modules[__name__] = _q
