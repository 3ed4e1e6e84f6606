"""Pretrained model bundles (torchaudio.pipelines): the wav2vec 2.0 / HuBERT / WavLM family.

See :mod:`fiamma.audio.pipelines._wav2vec2` for where ``get_model`` looks for weights
(``$FIAMMA_HOME/hub/checkpoints``, ``dl_kwargs={"model_dir": ...}`` or ``path=``).
"""

from fiamma.audio.pipelines._wav2vec2 import (
    HUBERT_ASR_LARGE,
    HUBERT_ASR_XLARGE,
    HUBERT_BASE,
    HUBERT_LARGE,
    HUBERT_XLARGE,
    MMS_FA,
    VOXPOPULI_ASR_BASE_10K_DE,
    VOXPOPULI_ASR_BASE_10K_EN,
    VOXPOPULI_ASR_BASE_10K_ES,
    VOXPOPULI_ASR_BASE_10K_FR,
    VOXPOPULI_ASR_BASE_10K_IT,
    WAV2VEC2_ASR_BASE_10M,
    WAV2VEC2_ASR_BASE_100H,
    WAV2VEC2_ASR_BASE_960H,
    WAV2VEC2_ASR_LARGE_10M,
    WAV2VEC2_ASR_LARGE_100H,
    WAV2VEC2_ASR_LARGE_960H,
    WAV2VEC2_ASR_LARGE_LV60K_10M,
    WAV2VEC2_ASR_LARGE_LV60K_100H,
    WAV2VEC2_ASR_LARGE_LV60K_960H,
    WAV2VEC2_BASE,
    WAV2VEC2_LARGE,
    WAV2VEC2_LARGE_LV60K,
    WAV2VEC2_XLSR53,
    WAV2VEC2_XLSR_1B,
    WAV2VEC2_XLSR_2B,
    WAV2VEC2_XLSR_300M,
    WAVLM_BASE,
    WAVLM_BASE_PLUS,
    WAVLM_LARGE,
    Wav2Vec2ASRBundle,
    Wav2Vec2Bundle,
    Wav2Vec2FABundle,
)

__all__ = ["Wav2Vec2Bundle", "Wav2Vec2ASRBundle", "Wav2Vec2FABundle", "WAV2VEC2_BASE",
           "WAV2VEC2_LARGE", "WAV2VEC2_LARGE_LV60K", "WAV2VEC2_ASR_BASE_10M",
           "WAV2VEC2_ASR_BASE_100H", "WAV2VEC2_ASR_BASE_960H", "WAV2VEC2_ASR_LARGE_10M",
           "WAV2VEC2_ASR_LARGE_100H", "WAV2VEC2_ASR_LARGE_960H", "WAV2VEC2_ASR_LARGE_LV60K_10M",
           "WAV2VEC2_ASR_LARGE_LV60K_100H", "WAV2VEC2_ASR_LARGE_LV60K_960H", "WAV2VEC2_XLSR53",
           "WAV2VEC2_XLSR_300M", "WAV2VEC2_XLSR_1B", "WAV2VEC2_XLSR_2B",
           "VOXPOPULI_ASR_BASE_10K_EN", "VOXPOPULI_ASR_BASE_10K_ES", "VOXPOPULI_ASR_BASE_10K_DE",
           "VOXPOPULI_ASR_BASE_10K_FR", "VOXPOPULI_ASR_BASE_10K_IT", "HUBERT_BASE",
           "HUBERT_LARGE", "HUBERT_XLARGE", "HUBERT_ASR_LARGE", "HUBERT_ASR_XLARGE",
           "WAVLM_BASE", "WAVLM_BASE_PLUS", "WAVLM_LARGE", "MMS_FA"]

# ---- SQUIM (_squim.py) --------------------------------------------------------------------------
from fiamma.audio.pipelines._squim import (  # noqa: E402
    SQUIM_OBJECTIVE,
    SQUIM_SUBJECTIVE,
    SquimObjectiveBundle,
    SquimSubjectiveBundle,
)

__all__ += ["SQUIM_OBJECTIVE", "SQUIM_SUBJECTIVE", "SquimObjectiveBundle", "SquimSubjectiveBundle"]
# ---- end SQUIM ----------------------------------------------------------------------------------

# ---- source separation, RNN-T and Tacotron2 TTS (_source_separation.py, _rnnt.py, _tts.py) ----
from fiamma.audio.pipelines import rnnt_pipeline  # noqa: E402,F401
from fiamma.audio.pipelines._rnnt import EMFORMER_RNNT_BASE_LIBRISPEECH, RNNTBundle  # noqa: E402
from fiamma.audio.pipelines._source_separation import (  # noqa: E402
    CONVTASNET_BASE_LIBRI2MIX,
    HDEMUCS_HIGH_MUSDB,
    HDEMUCS_HIGH_MUSDB_PLUS,
    SourceSeparationBundle,
)
from fiamma.audio.pipelines._tts import (  # noqa: E402
    TACOTRON2_GRIFFINLIM_CHAR_LJSPEECH,
    TACOTRON2_GRIFFINLIM_PHONE_LJSPEECH,
    TACOTRON2_WAVERNN_CHAR_LJSPEECH,
    TACOTRON2_WAVERNN_PHONE_LJSPEECH,
    Tacotron2TTSBundle,
)

__all__ += ["SourceSeparationBundle", "CONVTASNET_BASE_LIBRI2MIX", "HDEMUCS_HIGH_MUSDB_PLUS",
            "HDEMUCS_HIGH_MUSDB", "RNNTBundle", "EMFORMER_RNNT_BASE_LIBRISPEECH",
            "Tacotron2TTSBundle", "TACOTRON2_GRIFFINLIM_CHAR_LJSPEECH",
            "TACOTRON2_GRIFFINLIM_PHONE_LJSPEECH", "TACOTRON2_WAVERNN_CHAR_LJSPEECH",
            "TACOTRON2_WAVERNN_PHONE_LJSPEECH"]
# ---- end source separation, RNN-T and TTS -------------------------------------------------------
