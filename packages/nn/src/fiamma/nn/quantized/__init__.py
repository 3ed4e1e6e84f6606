"""``fiamma.nn.quantized`` (``torch.nn.quantized``): the same module as
:mod:`fiamma.ao.nn.quantized` (``FloatFunctional``; no int8 modules)."""
import sys

from fiamma.ao.nn import quantized as _q

sys.modules[__name__] = _q
