"""Feature extraction compatible with other toolkits (``torchaudio.compliance``): ``kaldi``."""

from fiamma.audio.compliance import kaldi

__all__ = ["kaldi"]
