"""The Emformer RNN-T speech recognition bundle (torchaudio.pipelines.RNNTBundle,
EMFORMER_RNNT_BASE_LIBRISPEECH): log-mel feature extractors (full-context and streaming), the
beam-search decoder over the pretrained RNN-T, and the SentencePiece token processor.

Files (the model, ``global_stats_rnnt_librispeech.json`` and the SentencePiece model) are found
as in :mod:`fiamma.audio.pipelines._assets`; every ``get_*`` takes ``dl_kwargs=`` and
``path=`` (fiamma extensions). The token processor needs the ``sentencepiece`` package.
"""

import json
import math
from dataclasses import dataclass
from functools import partial
from typing import Callable, List

import fiamma
from fiamma import nn
from fiamma.audio.models import RNNT, RNNTBeamSearch, emformer_rnnt_base
from fiamma.audio.pipelines._assets import (
    asset_url,
    bundle_name,
    fetch_asset,
    load_checkpoint,
)
from fiamma.audio.transforms import MelSpectrogram
from fiamma.nn import functional as F

__all__ = ["RNNTBundle", "EMFORMER_RNNT_BASE_LIBRISPEECH"]

# features are scaled as if the waveform were 16-bit integers: |x|^2 * 32767^2
_GAIN = 10.0 ** (0.05 * 2 * 20 * math.log10(32767))


def _piecewise_linear_log(x):
    """torchaudio's two-pass mapping: values above e become log(x), then every value at or
    below e (including those logs) is divided by e. So x / e up to e, log(x) / e up to e^e,
    log(x) above (the pretrained statistics expect exactly this)."""
    y = fiamma.where(x > math.e, fiamma.log(fiamma.clamp(x, min=math.e)), x)
    return fiamma.where(y <= math.e, y / math.e, y)


class _GlobalStatsNormalization(nn.Module):
    """(x - mean) * invstddev per feature, from a JSON file ``{"mean": [...], "invstddev":
    [...]}`` (buffers ``mean`` and ``invstddev``)."""

    def __init__(self, global_stats_path):
        super().__init__()
        with open(global_stats_path) as f:
            blob = json.load(f)
        for key in ("mean", "invstddev"):
            if key not in blob:
                raise ValueError(f"RNNTBundle: the global statistics file {global_stats_path!r} "
                                 f"has no {key!r} list")
        self.register_buffer("mean", fiamma.tensor(blob["mean"]))
        self.register_buffer("invstddev", fiamma.tensor(blob["invstddev"]))

    def forward(self, x):
        return (x - self.mean) * self.invstddev


class _LogMel(nn.Module):
    """waveform (time,) -> normalised log-mel features (frame, n_mels), right-padded with
    ``right_padding`` zero frames."""

    def __init__(self, sample_rate, n_fft, n_mels, hop_length, stats_path, right_padding):
        super().__init__()
        self.mel = MelSpectrogram(sample_rate=sample_rate, n_fft=n_fft, n_mels=n_mels,
                                  hop_length=hop_length)
        self.normalize = _GlobalStatsNormalization(stats_path)
        self.right_padding = right_padding

    def forward(self, waveform):
        if waveform.ndim != 1:
            raise ValueError("RNNTBundle feature extractor: expected a 1-D waveform (time,), got "
                             f"shape {list(waveform.shape)}")
        features = self.mel(waveform).transpose(0, 1)
        features = self.normalize(_piecewise_linear_log(features * _GAIN))
        if self.right_padding:
            features = F.pad(features, (0, 0, 0, self.right_padding))
        return features


class _ModuleFeatureExtractor(nn.Module):
    """``extractor(waveform)`` -> (features (frame, n_mels), length tensor([frame]))."""

    def __init__(self, pipeline):
        super().__init__()
        self.pipeline = pipeline

    def forward(self, input):
        features = self.pipeline(input)
        return features, fiamma.tensor([features.shape[0]])


class _SentencePieceTokenProcessor:
    """Token ids -> text with a SentencePiece model: the first id (the start symbol) and the
    unknown/end/padding ids are dropped, "\u2581" becomes a space."""

    def __init__(self, sp_model_path):
        try:
            import sentencepiece
        except ImportError:
            raise ModuleNotFoundError(
                "RNNTBundle.get_token_processor: the token processor needs the 'sentencepiece' "
                "package, which is not installed (pip install sentencepiece)") from None
        self.sp_model = sentencepiece.SentencePieceProcessor(model_file=sp_model_path)
        self.post_process_remove_list = {self.sp_model.unk_id(), self.sp_model.eos_id(),
                                         self.sp_model.pad_id()}

    def __call__(self, tokens: List[int], lstrip: bool = True) -> str:
        ids = [int(t) for t in tokens[1:] if t not in self.post_process_remove_list]
        size = self.sp_model.get_piece_size()
        bad = [t for t in ids if not 0 <= t < size]
        if bad:
            raise ValueError(f"RNNTBundle token processor: token ids must be in [0, {size}) "
                             f"(the SentencePiece model's vocabulary), got {bad[:5]}")
        text = "".join(self.sp_model.id_to_piece(ids)).replace("\u2581", " ")
        return text.lstrip() if lstrip else text


@dataclass
class RNNTBundle:
    """Components for speech recognition with a pretrained RNN-T: ``get_feature_extractor()``
    (or ``get_streaming_feature_extractor()`` for segments of ``segment_length +
    right_context_length`` frames), ``get_decoder()`` (an
    :class:`~fiamma.audio.models.RNNTBeamSearch`) and ``get_token_processor()``.

    >>> b = fiamma.audio.pipelines.EMFORMER_RNNT_BASE_LIBRISPEECH      # doctest: +SKIP
    >>> features, length = b.get_feature_extractor()(waveform)        # doctest: +SKIP
    >>> hypotheses = b.get_decoder()(features, length, 10)            # doctest: +SKIP
    >>> text = b.get_token_processor()(hypotheses[0][0])              # doctest: +SKIP
    """

    class FeatureExtractor:
        """Interface: ``extractor(waveform) -> (features, length)``."""

    class TokenProcessor:
        """Interface: ``processor(tokens, **kwargs) -> str``."""

    _rnnt_path: str
    _rnnt_factory_func: Callable[[], RNNT]
    _global_stats_path: str
    _sp_model_path: str
    _right_padding: int
    _blank: int
    _sample_rate: int
    _n_fft: int
    _n_mels: int
    _hop_length: int
    _segment_length: int
    _right_context_length: int

    @property
    def sample_rate(self):
        """Input sample rate (Hz)."""
        return self._sample_rate

    @property
    def n_fft(self):
        """FFT size of the features."""
        return self._n_fft

    @property
    def n_mels(self):
        """Number of mel features."""
        return self._n_mels

    @property
    def hop_length(self):
        """Samples between feature frames."""
        return self._hop_length

    @property
    def segment_length(self):
        """Frames per streaming segment."""
        return self._segment_length

    @property
    def right_context_length(self):
        """Frames of right context per streaming segment."""
        return self._right_context_length

    @property
    def url(self):
        """Where the model checkpoint is published (fiamma extension)."""
        return asset_url(self._rnnt_path)

    def _owner(self, method):
        return f"{bundle_name(self)}.{method}"

    def _get_model(self, dl_kwargs=None, path=None):
        model = self._rnnt_factory_func()
        model.load_state_dict(load_checkpoint(self._owner("get_decoder"), self._rnnt_path,
                                              dl_kwargs, path))
        return model.eval()

    def get_decoder(self, *, dl_kwargs=None, path=None):
        """An :class:`~fiamma.audio.models.RNNTBeamSearch` over the pretrained RNN-T."""
        return RNNTBeamSearch(self._get_model(dl_kwargs, path), self._blank)

    def _extractor(self, method, right_padding, dl_kwargs, path):
        stats = fetch_asset(self._owner(method), self._global_stats_path, dl_kwargs, path)
        return _ModuleFeatureExtractor(_LogMel(self._sample_rate, self._n_fft, self._n_mels,
                                               self._hop_length, stats, right_padding))

    def get_feature_extractor(self, *, dl_kwargs=None, path=None):
        """waveform (time,) -> (log-mel features (frame, n_mels), length) for full-context
        decoding (``path``: a local copy of the global statistics JSON)."""
        return self._extractor("get_feature_extractor", self._right_padding, dl_kwargs, path)

    def get_streaming_feature_extractor(self, *, dl_kwargs=None, path=None):
        """As :meth:`get_feature_extractor`, without the right padding, for one streaming
        segment at a time."""
        return self._extractor("get_streaming_feature_extractor", 0, dl_kwargs, path)

    def get_token_processor(self, *, dl_kwargs=None, path=None):
        """Token ids -> text (needs ``sentencepiece``; ``path``: a local SentencePiece
        model)."""
        try:
            import sentencepiece  # noqa: F401
        except ImportError:
            raise ModuleNotFoundError(
                f"{self._owner('get_token_processor')}: the token processor needs the "
                "'sentencepiece' package, which is not installed (pip install sentencepiece)"
            ) from None
        sp_path = fetch_asset(self._owner("get_token_processor"), self._sp_model_path, dl_kwargs,
                              path)
        return _SentencePieceTokenProcessor(sp_path)


EMFORMER_RNNT_BASE_LIBRISPEECH = RNNTBundle(
    _rnnt_path="models/emformer_rnnt_base_librispeech.pt",
    _rnnt_factory_func=partial(emformer_rnnt_base, num_symbols=4097),
    _global_stats_path="pipeline-assets/global_stats_rnnt_librispeech.json",
    _sp_model_path="pipeline-assets/spm_bpe_4096_librispeech.model",
    _right_padding=4,
    _blank=4096,
    _sample_rate=16000,
    _n_fft=400,
    _n_mels=80,
    _hop_length=160,
    _segment_length=16,
    _right_context_length=4,
)
EMFORMER_RNNT_BASE_LIBRISPEECH.__doc__ = """Emformer RNN-T
(:func:`~fiamma.audio.models.emformer_rnnt_base`, 4097 symbols, blank 4096) trained on
LibriSpeech; streaming and full-context decoding, 16 kHz input."""

