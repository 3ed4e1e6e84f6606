"""``fiamma.nn.intrinsic`` (``torch.nn.intrinsic``): the same module as
:mod:`fiamma.ao.nn.intrinsic` (the fused module sequences); its ``quantized``,
``quantized.dynamic`` and ``qat`` submodules are the ``fiamma.ao.nn.intrinsic`` ones too."""
import sys

from fiamma.ao.nn import intrinsic as _i
from fiamma.ao.nn.intrinsic import qat as _qat, quantized as _q
from fiamma.ao.nn.intrinsic.quantized import dynamic as _qd

sys.modules[__name__] = _i
sys.modules[__name__ + ".quantized"] = _q
sys.modules[__name__ + ".quantized.dynamic"] = _qd
sys.modules[__name__ + ".qat"] = _qat
