"""``torchaudio.functional.functional``'s names, for programs that import that module directly;
every function of ``fiamma.audio.functional``."""

from fiamma.audio.functional import *  # noqa: F401,F403
from fiamma.audio.functional import __all__  # noqa: F401
