"""fiamma.audio.transforms: nn.Module wrappers of fiamma.audio.functional (torchaudio.transforms).

>>> import fiamma
>>> from fiamma.audio.transforms import Resample
>>> tuple(Resample(16000, 8000)(fiamma.zeros(1, 1600)).shape)
(1, 800)
"""

from fiamma.audio.transforms._basic import *  # noqa: F401,F403
from fiamma.audio.transforms._beamforming import *  # noqa: F401,F403
from fiamma.audio.transforms._effects import *  # noqa: F401,F403
from fiamma.audio.transforms._spectral import *  # noqa: F401,F403
