"""Importers of wav2vec 2.0 / HuBERT / WavLM weights from Hugging Face and fairseq."""

from fiamma.audio.models.wav2vec2.utils.import_fairseq import import_fairseq_model  # noqa: F401
from fiamma.audio.models.wav2vec2.utils.import_huggingface import import_huggingface_model  # noqa: F401

__all__ = ["import_huggingface_model", "import_fairseq_model"]
