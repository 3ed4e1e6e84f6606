"""fiamma.vision.ops: building blocks shared by the vision models (torchvision.ops' names).

    >>> from fiamma.vision.ops import Conv2dNormActivation, SqueezeExcitation, StochasticDepth
"""
from fiamma.vision.ops.misc import *  # noqa: F401,F403
from fiamma.vision.ops.misc import __all__ as _misc_all
from fiamma.vision.ops.stochastic_depth import *  # noqa: F401,F403
from fiamma.vision.ops.stochastic_depth import __all__ as _sd_all

__all__ = list(_misc_all) + list(_sd_all)
