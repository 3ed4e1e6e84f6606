"""Audio models: :mod:`~fiamma.audio.models.crepe` (pitch), the wav2vec 2.0 family
(:mod:`~fiamma.audio.models.wav2vec2`) and torchaudio's recognition, separation and synthesis
models (Wav2Letter, DeepSpeech, ConvTasNet, Conformer, Emformer, RNNT, WaveRNN, Tacotron2,
HDemucs), with torchaudio's names."""

from fiamma.audio.models import crepe  # noqa: F401
from fiamma.audio.models.crepe import Crepe  # noqa: F401

__all__ = ["crepe", "Crepe"]

# ---- wav2vec 2.0 / HuBERT / WavLM (models/wav2vec2/) ------------------------------------------
from fiamma.audio.models import wav2vec2  # noqa: E402,F401
from fiamma.audio.models.wav2vec2 import (  # noqa: E402,F401
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

__all__ += ["Wav2Vec2Model", "HuBERTPretrainModel", "wav2vec2_model", "wav2vec2_base",
            "wav2vec2_large", "wav2vec2_large_lv60k", "wav2vec2_xlsr_300m", "wav2vec2_xlsr_1b",
            "wav2vec2_xlsr_2b", "hubert_base", "hubert_large", "hubert_xlarge",
            "hubert_pretrain_model", "hubert_pretrain_base", "hubert_pretrain_large",
            "hubert_pretrain_xlarge", "wavlm_model", "wavlm_base", "wavlm_large"]
# ---- end wav2vec 2.0 -----------------------------------------------------------------------------

# ---- SQUIM (models/squim/) ----------------------------------------------------------------------
from fiamma.audio.models import squim  # noqa: E402,F401
from fiamma.audio.models.squim import (  # noqa: E402,F401
    SquimObjective,
    SquimSubjective,
    squim_objective_base,
    squim_objective_model,
    squim_subjective_base,
    squim_subjective_model,
)

__all__ += ["SquimObjective", "SquimSubjective", "squim_objective_model", "squim_objective_base",
            "squim_subjective_model", "squim_subjective_base"]
# ---- end SQUIM ----------------------------------------------------------------------------------

# isort: split
# --- torchaudio.models: recognition, separation and synthesis models (not wav2vec2) ---
from fiamma.audio.models._hdemucs import (  # noqa: E402
    HDemucs,
    hdemucs_high,
    hdemucs_low,
    hdemucs_medium,
)
from fiamma.audio.models.conformer import Conformer  # noqa: E402
from fiamma.audio.models.conv_tasnet import ConvTasNet, conv_tasnet_base  # noqa: E402
from fiamma.audio.models.deepspeech import DeepSpeech  # noqa: E402
from fiamma.audio.models.emformer import Emformer  # noqa: E402
from fiamma.audio.models.rnnt import RNNT, emformer_rnnt_base, emformer_rnnt_model  # noqa: E402
from fiamma.audio.models.rnnt_decoder import Hypothesis, RNNTBeamSearch  # noqa: E402
from fiamma.audio.models.tacotron2 import Tacotron2  # noqa: E402
from fiamma.audio.models.wav2letter import Wav2Letter  # noqa: E402
from fiamma.audio.models.wavernn import WaveRNN  # noqa: E402

__all__ += ["Wav2Letter", "DeepSpeech", "ConvTasNet", "conv_tasnet_base", "Conformer",
            "Emformer", "RNNT", "emformer_rnnt_base", "emformer_rnnt_model", "Hypothesis",
            "RNNTBeamSearch", "WaveRNN", "Tacotron2", "HDemucs", "hdemucs_low",
            "hdemucs_medium", "hdemucs_high"]
# --- end of the torchaudio.models block ---
