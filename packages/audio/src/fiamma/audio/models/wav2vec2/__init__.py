"""wav2vec 2.0 / HuBERT / WavLM (torchaudio.models.wav2vec2): models, builders and the
importers of Hugging Face and fairseq weights (:mod:`.utils`)."""

from fiamma.audio.models.wav2vec2 import utils  # noqa: F401
from fiamma.audio.models.wav2vec2.model import (  # noqa: F401
    HuBERTPretrainModel,
    Wav2Vec2Model,
    hubert_base,
    hubert_large,
    hubert_pretrain_base,
    hubert_pretrain_large,
    hubert_pretrain_model,
    hubert_pretrain_xlarge,
    hubert_xlarge,
    wav2vec2_base,
    wav2vec2_large,
    wav2vec2_large_lv60k,
    wav2vec2_model,
    wav2vec2_xlsr_1b,
    wav2vec2_xlsr_2b,
    wav2vec2_xlsr_300m,
    wavlm_base,
    wavlm_large,
    wavlm_model,
)

__all__ = ["Wav2Vec2Model", "HuBERTPretrainModel", "wavlm_model", "wavlm_base", "wavlm_large",
           "wav2vec2_model", "wav2vec2_base", "wav2vec2_large", "wav2vec2_large_lv60k",
           "hubert_base", "hubert_large", "hubert_xlarge", "hubert_pretrain_model",
           "hubert_pretrain_base", "hubert_pretrain_large", "hubert_pretrain_xlarge", "utils",
           "wav2vec2_xlsr_300m", "wav2vec2_xlsr_1b", "wav2vec2_xlsr_2b"]
