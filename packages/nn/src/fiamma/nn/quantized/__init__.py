"""``fiamma.nn.quantized`` (``torch.nn.quantized``): the same module as
:mod:`fiamma.ao.nn.quantized` (and ``fiamma.nn.quantized.dynamic`` is
:mod:`fiamma.ao.nn.quantized.dynamic`)."""
import sys

from fiamma.ao.nn import quantized as _q

sys.modules[__name__] = _q
sys.modules[__name__ + ".dynamic"] = _q.dynamic
