"""fiamma.audio.functional: filters, resampling, companding, effects and augmentation on
(..., time) tensors, spectral features, RNN-T loss and CTC alignment, beamforming
(torchaudio.functional's names, arguments and defaults).

>>> import fiamma
>>> import fiamma.audio.functional as AF
>>> x = fiamma.randn(2, 16000) * 0.1
>>> tuple(AF.resample(AF.lowpass_biquad(x, 16000, 3000.0), 16000, 8000).shape)
(2, 8000)
"""

import importlib

from fiamma.audio.functional import (  # noqa: E402
    _alignment,
    _beamforming,
    _effects,
    _filtering,
    _spectral,
)
from fiamma.audio.functional._alignment import *  # noqa: F401,F403
from fiamma.audio.functional._beamforming import *  # noqa: F401,F403
from fiamma.audio.functional._effects import *  # noqa: F401,F403
from fiamma.audio.functional._filtering import *  # noqa: F401,F403
from fiamma.audio.functional._spectral import *  # noqa: F401,F403,E402

__all__ = (_filtering.__all__ + _spectral.__all__ + _effects.__all__
           + _alignment.__all__ + _beamforming.__all__)


def __getattr__(name):
    # torchaudio.functional.filtering / .functional: modules re-exporting these functions
    if name in ("filtering", "functional"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
