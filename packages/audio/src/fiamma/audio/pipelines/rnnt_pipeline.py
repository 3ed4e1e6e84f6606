"""The RNN-T bundle under torchaudio's public module path ``torchaudio.pipelines.rnnt_pipeline``
(defined in :mod:`fiamma.audio.pipelines._rnnt`)."""

from fiamma.audio.pipelines._rnnt import EMFORMER_RNNT_BASE_LIBRISPEECH, RNNTBundle

__all__ = ["EMFORMER_RNNT_BASE_LIBRISPEECH", "RNNTBundle"]
