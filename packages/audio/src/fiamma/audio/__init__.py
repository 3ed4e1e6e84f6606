"""fiamma.audio: audio I/O, filters, resampling, transforms and datasets (torchaudio's API).

>>> import fiamma, fiamma.audio
>>> wav, sr = fiamma.audio.load("speech.flac")                     # doctest: +SKIP
>>> wav8k = fiamma.audio.functional.resample(wav, sr, 8000)         # doctest: +SKIP
>>> fiamma.audio.save("speech8k.wav", wav8k, 8000, bits_per_sample=16)  # doctest: +SKIP

``functional``, ``transforms``, ``datasets``, ``models`` and ``pipelines`` are imported on first
use, and libsndfile (soundfile) on the first file operation, so ``import fiamma.audio`` stays
fast.
"""

import importlib
import importlib.util

from fiamma.audio._io import AudioIOError, AudioMetaData, AudioStream, info, load, save, stream
from fiamma.audio._version import __version__

__all__ = ["load", "save", "info", "stream", "list_audio_backends", "AudioMetaData",
           "AudioStream", "AudioIOError", "functional", "transforms", "datasets", "models",
           "compliance", "pipelines", "__version__"]

_SUBMODULES = {"functional", "transforms", "datasets", "models", "compliance", "pipelines"}


def list_audio_backends():
    """The audio I/O backends available: ``["soundfile"]`` when soundfile (libsndfile) is
    installed, else ``[]`` (fiamma reads and writes files only through soundfile)."""
    return ["soundfile"] if importlib.util.find_spec("soundfile") is not None else []


def __getattr__(name):
    if name in _SUBMODULES:
        mod = importlib.import_module(f"fiamma.audio.{name}")
        globals()[name] = mod
        return mod
    raise AttributeError(f"module 'fiamma.audio' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _SUBMODULES)
