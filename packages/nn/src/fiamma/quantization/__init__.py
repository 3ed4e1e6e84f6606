"""``fiamma.quantization`` (``torch.quantization``): the same module as
:mod:`fiamma.ao.quantization`."""
import sys

from fiamma.ao import quantization as _q

sys.modules[__name__] = _q
