"""Text-to-speech bundles (torchaudio.pipelines.Tacotron2TTSBundle): Tacotron2 trained on
LJSpeech with a character or phoneme text processor and a Griffin-Lim or WaveRNN vocoder
(TACOTRON2_GRIFFINLIM_CHAR_LJSPEECH, TACOTRON2_GRIFFINLIM_PHONE_LJSPEECH,
TACOTRON2_WAVERNN_CHAR_LJSPEECH, TACOTRON2_WAVERNN_PHONE_LJSPEECH).

``get_tacotron2`` / ``get_vocoder`` find their checkpoints as in
:mod:`fiamma.audio.pipelines._assets` (``dl_kwargs=``, and ``path=`` as a fiamma extension).
The phoneme text processor needs DeepPhonemizer (the ``dp`` package) and its
``en_us_cmudict_forward.pt`` model.
"""

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

import fiamma
from fiamma import nn
from fiamma.audio.functional import mu_law_decoding
from fiamma.audio.models import Tacotron2, WaveRNN
from fiamma.audio.pipelines._assets import asset_url, bundle_name, fetch_asset, load_checkpoint
from fiamma.audio.transforms import GriffinLim, InverseMelScale

__all__ = ["Tacotron2TTSBundle", "TACOTRON2_GRIFFINLIM_CHAR_LJSPEECH",
           "TACOTRON2_GRIFFINLIM_PHONE_LJSPEECH", "TACOTRON2_WAVERNN_CHAR_LJSPEECH",
           "TACOTRON2_WAVERNN_PHONE_LJSPEECH"]

_PUNCTUATION = ("_", "-", "!", "'", "(", ")", ",", ".", ":", ";", "?", " ")
_CHARS = _PUNCTUATION + tuple("abcdefghijklmnopqrstuvwxyz")
# CMUDict's ARPAbet: vowels bare and with stress 0/1/2, then consonants, sorted together
_VOWELS = ("AA", "AE", "AH", "AO", "AW", "AY", "EH", "ER", "EY", "IH", "IY", "OW", "OY", "UH",
           "UW")
_CONSONANTS = ("B", "CH", "D", "DH", "F", "G", "HH", "JH", "K", "L", "M", "N", "NG", "P", "R",
               "S", "SH", "T", "TH", "V", "W", "Y", "Z", "ZH")
_PHONES = _PUNCTUATION + tuple(sorted([v + s for v in _VOWELS for s in ("", "0", "1", "2")]
                                      + list(_CONSONANTS)))
_PHONEMIZER_URL = ("https://public-asai-dl-models.s3.eu-central-1.amazonaws.com/"
                   "DeepPhonemizer/en_us_cmudict_forward.pt")


def _to_tensor(indices):
    """Lists of token ids -> (padded (batch, max_len) int64, lengths int32)."""
    lengths = fiamma.tensor([len(i) for i in indices], dtype=fiamma.int32)
    width = max((len(i) for i in indices), default=0)
    out = fiamma.zeros((len(indices), width), dtype=fiamma.int64)
    for row, ids in enumerate(indices):
        if ids:
            out[row, :len(ids)] = fiamma.tensor(ids, dtype=fiamma.int64)
    return out, lengths


def _texts(op, texts):
    if isinstance(texts, str):
        return [texts]
    if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
        raise TypeError(f"{op}: expected a str or a list of str, got {type(texts).__name__}")
    return list(texts)


class Tacotron2TTSBundle:
    """A text-to-speech pipeline: ``get_text_processor()`` (text -> token ids),
    ``get_tacotron2()`` (token ids -> mel spectrogram) and ``get_vocoder()`` (mel spectrogram
    -> waveform at ``vocoder.sample_rate``).

    >>> bundle = fiamma.audio.pipelines.TACOTRON2_WAVERNN_CHAR_LJSPEECH   # doctest: +SKIP
    >>> tokens, lengths = bundle.get_text_processor()("Hello world!")   # doctest: +SKIP
    >>> spec, spec_lengths, _ = bundle.get_tacotron2().infer(tokens, lengths)  # doctest: +SKIP
    >>> waveforms, lengths = bundle.get_vocoder()(spec, spec_lengths)    # doctest: +SKIP
    """

    class TextProcessor:
        """Interface: ``processor(texts) -> (token ids (batch, max_len), lengths (batch,))``;
        ``tokens`` lists the symbols."""

        @property
        def tokens(self):
            raise NotImplementedError

        def __call__(self, texts):
            raise NotImplementedError

    class Vocoder:
        """Interface: ``vocoder(specgrams, lengths=None) -> (waveforms, lengths)``."""

        @property
        def sample_rate(self):
            raise NotImplementedError

    def get_text_processor(self, *, dl_kwargs=None):
        raise NotImplementedError

    def get_vocoder(self, *, dl_kwargs=None):
        raise NotImplementedError

    def get_tacotron2(self, *, dl_kwargs=None):
        raise NotImplementedError


class _EnglishCharProcessor(Tacotron2TTSBundle.TextProcessor):
    """Lower-cases the text and keeps the characters in ``tokens`` (others are dropped)."""

    def __init__(self):
        self._tokens = _CHARS
        self._mapping = {s: i for i, s in enumerate(self._tokens)}

    @property
    def tokens(self):
        return self._tokens

    def __call__(self, texts: Union[str, List[str]]) -> Tuple[fiamma.Tensor, fiamma.Tensor]:
        texts = _texts("Tacotron2TTSBundle text processor", texts)
        return _to_tensor([[self._mapping[c] for c in t.lower() if c in self._mapping]
                           for t in texts])


class _EnglishPhoneProcessor(Tacotron2TTSBundle.TextProcessor):
    """Text -> ARPAbet phonemes with DeepPhonemizer's CMUDict model -> ids in ``tokens``."""

    def __init__(self, *, dl_kwargs=None, path=None):
        self._tokens = _PHONES
        self._mapping = {p: i for i, p in enumerate(self._tokens)}
        self._pattern = r"(\[[A-Z]+?\]|[_!'(),.:;? -])"
        try:
            from dp.phonemizer import Phonemizer
        except ImportError:
            raise ModuleNotFoundError(
                "Tacotron2TTSBundle.get_text_processor: the phoneme bundles need DeepPhonemizer "
                "(the 'dp' package, pip install deep-phonemizer), which is not installed; the "
                "character bundles (TACOTRON2_*_CHAR_LJSPEECH) do not") from None
        file = fetch_asset("Tacotron2TTSBundle.get_text_processor", _PHONEMIZER_URL, dl_kwargs,
                           path)
        self._phonemizer = Phonemizer.from_checkpoint(file)

    @property
    def tokens(self):
        return self._tokens

    def __call__(self, texts):
        texts = _texts("Tacotron2TTSBundle text processor", texts)
        indices = []
        for phones in self._phonemizer(texts, lang="en_us"):
            found = [re.sub(r"[\[\]]", "", r) for r in re.findall(self._pattern, phones)]
            indices.append([self._mapping[p] for p in found])
        return _to_tensor(indices)


def _check_mel(op, mel_spec, n_mels):
    if mel_spec.ndim not in (2, 3) or mel_spec.shape[-2] != n_mels:
        raise ValueError(f"{op}: expected a mel spectrogram (batch, {n_mels}, frames) or "
                         f"({n_mels}, frames), got shape {list(mel_spec.shape)}")


class _WaveRNNVocoder(nn.Module, Tacotron2TTSBundle.Vocoder):
    """Tacotron2's natural-log mel spectrogram -> dB -> [0, 1] (``min_level_db`` floor) ->
    WaveRNN sampling -> mu-law decoding."""

    def __init__(self, model: WaveRNN, min_level_db: Optional[float] = -100):
        super().__init__()
        self._sample_rate = 22050
        self._model = model
        self._min_level_db = min_level_db

    @property
    def sample_rate(self):
        return self._sample_rate

    def forward(self, mel_spec, lengths=None):
        n_freq = self._model.fc.in_features - self._model.n_aux - 1
        _check_mel("Tacotron2TTSBundle WaveRNN vocoder", mel_spec, n_freq)
        db = 20 * fiamma.log10(fiamma.clamp(fiamma.exp(mel_spec), min=1e-5))
        if self._min_level_db is not None:
            db = fiamma.clamp((self._min_level_db - db) / self._min_level_db, min=0, max=1)
        waveform, lengths = self._model.infer(db, lengths)
        bits = self._model.n_bits
        labels = ((fiamma.clamp(waveform, -1, 1) + 1.0) * (2 ** bits - 1) / 2)
        labels = fiamma.clamp(labels, 0, 2 ** bits - 1).int()
        waveform = mu_law_decoding(labels, self._model.n_classes)
        return waveform.squeeze(1), lengths


class _GriffinLimVocoder(nn.Module, Tacotron2TTSBundle.Vocoder):
    """exp(mel) -> linear magnitude (InverseMelScale, Slaney mel scale and norm, 0-8 kHz) ->
    Griffin-Lim (n_fft 1024, hop 256, 32 iterations) at 22.05 kHz."""

    def __init__(self):
        super().__init__()
        self._sample_rate = 22050
        self._inv_mel = InverseMelScale(n_stft=1024 // 2 + 1, n_mels=80,
                                        sample_rate=self._sample_rate, f_min=0.0, f_max=8000.0,
                                        mel_scale="slaney", norm="slaney")
        self._griffin_lim = GriffinLim(n_fft=1024, power=1, hop_length=256, win_length=1024)

    @property
    def sample_rate(self):
        return self._sample_rate

    def forward(self, mel_spec, lengths=None):
        _check_mel("Tacotron2TTSBundle Griffin-Lim vocoder", mel_spec, 80)
        with fiamma.no_grad():
            spec = self._inv_mel(fiamma.exp(mel_spec.detach()))
            waveforms = self._griffin_lim(spec)
        return waveforms, lengths


@dataclass
class _Tacotron2Bundle(Tacotron2TTSBundle):
    _tacotron2_path: str
    _tacotron2_params: Dict[str, Any]
    _phonemes: bool = False
    _wavernn_path: Optional[str] = None
    _wavernn_params: Optional[Dict[str, Any]] = None

    @property
    def tacotron2_url(self):
        """Where the Tacotron2 checkpoint is published (fiamma extension)."""
        return asset_url("models/" + self._tacotron2_path)

    @property
    def wavernn_url(self):
        """Where the WaveRNN checkpoint is published, or None (fiamma extension)."""
        return None if self._wavernn_path is None else asset_url("models/" + self._wavernn_path)

    def get_text_processor(self, *, dl_kwargs=None, path=None):
        """Text -> (token ids, lengths): characters, or phonemes through DeepPhonemizer
        (``path``: a local ``en_us_cmudict_forward.pt``)."""
        if self._phonemes:
            return _EnglishPhoneProcessor(dl_kwargs=dl_kwargs, path=path)
        return _EnglishCharProcessor()

    def get_tacotron2(self, *, dl_kwargs=None, path=None):
        """The pretrained :class:`~fiamma.audio.models.Tacotron2`, in eval mode."""
        model = Tacotron2(**self._tacotron2_params)
        owner = f"{bundle_name(self)}.get_tacotron2"
        model.load_state_dict(load_checkpoint(owner, "models/" + self._tacotron2_path,
                                              dl_kwargs, path))
        return model.eval()

    def get_vocoder(self, *, dl_kwargs=None, path=None):
        """The vocoder: WaveRNN with its pretrained weights, or Griffin-Lim (no weights)."""
        if self._wavernn_path is None:
            return _GriffinLimVocoder()
        model = WaveRNN(**self._wavernn_params)
        owner = f"{bundle_name(self)}.get_vocoder"
        model.load_state_dict(load_checkpoint(owner, "models/" + self._wavernn_path, dl_kwargs,
                                              path))
        return _WaveRNNVocoder(model.eval())


def _taco_params(n_symbol):
    return {
        "mask_padding": False, "n_mels": 80, "n_frames_per_step": 1,
        "symbol_embedding_dim": 512, "encoder_embedding_dim": 512, "encoder_n_convolution": 3,
        "encoder_kernel_size": 5, "decoder_rnn_dim": 1024, "decoder_max_step": 2000,
        "decoder_dropout": 0.1, "decoder_early_stopping": True, "attention_rnn_dim": 1024,
        "attention_hidden_dim": 128, "attention_location_n_filter": 32,
        "attention_location_kernel_size": 31, "attention_dropout": 0.1, "prenet_dim": 256,
        "postnet_n_convolution": 5, "postnet_kernel_size": 5, "postnet_embedding_dim": 512,
        "gate_threshold": 0.5, "n_symbol": n_symbol,
    }


def _wavernn_params():
    return {"upsample_scales": [5, 5, 11], "n_classes": 2 ** 8, "hop_length": 275,
            "n_res_block": 10, "n_rnn": 512, "n_fc": 512, "kernel_size": 5, "n_freq": 80,
            "n_hidden": 128, "n_output": 128}


TACOTRON2_GRIFFINLIM_CHAR_LJSPEECH = _Tacotron2Bundle(
    "tacotron2_english_characters_1500_epochs_ljspeech.pth", _taco_params(38))
TACOTRON2_GRIFFINLIM_CHAR_LJSPEECH.__doc__ = """Character-based Tacotron2 trained on LJSpeech
for 1,500 epochs, Griffin-Lim vocoder."""

TACOTRON2_GRIFFINLIM_PHONE_LJSPEECH = _Tacotron2Bundle(
    "tacotron2_english_phonemes_1500_epochs_ljspeech.pth", _taco_params(96), _phonemes=True)
TACOTRON2_GRIFFINLIM_PHONE_LJSPEECH.__doc__ = """Phoneme-based Tacotron2 (DeepPhonemizer's
CMUDict model) trained on LJSpeech for 1,500 epochs, Griffin-Lim vocoder."""

TACOTRON2_WAVERNN_CHAR_LJSPEECH = _Tacotron2Bundle(
    "tacotron2_english_characters_1500_epochs_wavernn_ljspeech.pth", _taco_params(38),
    _wavernn_path="wavernn_10k_epochs_8bits_ljspeech.pth", _wavernn_params=_wavernn_params())
TACOTRON2_WAVERNN_CHAR_LJSPEECH.__doc__ = """Character-based Tacotron2 trained on LJSpeech for
1,500 epochs (WaveRNN-style features: win 1100, hop 275, n_fft 2048, 40-11025 Hz), WaveRNN
vocoder trained on 8-bit LJSpeech for 10,000 epochs."""

TACOTRON2_WAVERNN_PHONE_LJSPEECH = _Tacotron2Bundle(
    "tacotron2_english_phonemes_1500_epochs_wavernn_ljspeech.pth", _taco_params(96),
    _phonemes=True, _wavernn_path="wavernn_10k_epochs_8bits_ljspeech.pth",
    _wavernn_params=_wavernn_params())
TACOTRON2_WAVERNN_PHONE_LJSPEECH.__doc__ = """Phoneme-based Tacotron2 trained on LJSpeech for
1,500 epochs, WaveRNN vocoder trained on 8-bit LJSpeech for 10,000 epochs."""
