"""Pretrained audio models: :mod:`~fiamma.audio.models.crepe` (pitch)."""

from fiamma.audio.models import crepe  # noqa: F401
from fiamma.audio.models.crepe import Crepe  # noqa: F401

__all__ = ["crepe", "Crepe"]

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
