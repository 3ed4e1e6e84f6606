"""Pretrained wav2vec 2.0 / HuBERT / WavLM bundles (torchaudio.pipelines' names and files).

``bundle.get_model()`` builds the architecture and loads the checkpoint torchaudio publishes
at ``https://download.pytorch.org/torchaudio/models/<file>`` through
:func:`fiamma.hub.load_state_dict_from_url`: the file is downloaded once into
``$FIAMMA_HOME/hub/checkpoints`` (``dl_kwargs`` go to that function: ``model_dir``,
``file_name``, ``progress``, ``check_hash``, ``map_location``), and a file already there is
used without any network. To use a local copy, put it in that directory under its torchaudio
name (``bundle.file_name``), pass ``dl_kwargs={"model_dir": folder}``, or pass
``path=...`` (a fiamma extension).
"""

import os
from dataclasses import dataclass

import fiamma
from fiamma import nn
from fiamma.audio.models.wav2vec2.model import wav2vec2_model, wavlm_model
from fiamma.nn import functional as F

__all__ = ["Wav2Vec2Bundle", "Wav2Vec2ASRBundle", "Wav2Vec2FABundle"]

_BASE_URL = "https://download.pytorch.org/torchaudio/models/"


class _Wav2Vec2Model(nn.Module):
    """A pretrained model with the bundle's extra steps: layer norm of each waveform over
    its whole shape (the large models), log-softmax of the output and a zero "star" column
    (forced alignment)."""

    def __init__(self, model, normalize_waveform, apply_log_softmax=False, append_star=False):
        super().__init__()
        self.model = model
        self.normalize_waveform = normalize_waveform
        self.apply_log_softmax = apply_log_softmax
        self.append_star = append_star

    def forward(self, waveforms, lengths=None):
        if self.normalize_waveform:
            waveforms = F.layer_norm(waveforms, tuple(waveforms.shape))
        output, lengths = self.model(waveforms, lengths)
        if self.apply_log_softmax:
            output = F.log_softmax(output, dim=-1)
        if self.append_star:
            star = fiamma.zeros((1, output.shape[1], 1), dtype=output.dtype, device=output.device)
            output = fiamma.cat((output, star.expand(output.shape[0], -1, -1)), dim=-1)
        return output, lengths

    def extract_features(self, waveforms, lengths=None, num_layers=None):
        if self.normalize_waveform:
            waveforms = F.layer_norm(waveforms, tuple(waveforms.shape))
        return self.model.extract_features(waveforms, lengths, num_layers)


def _state_dict(bundle, dl_kwargs, path, remove_axes=None):
    if path is not None:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{bundle._name()}.get_model: no checkpoint file at "
                                    f"{str(path)!r} (the published one is {bundle.url})")
        state_dict = fiamma.load(str(path))
    else:
        from fiamma.hub import DownloadError, load_state_dict_from_url
        kwargs = dict(dl_kwargs or {})
        try:
            state_dict = load_state_dict_from_url(bundle.url, **kwargs)
        except DownloadError as e:      # names the URL and where to put the file by hand
            raise DownloadError(f"{bundle._name()}.get_model: {e}; or pass "
                                "get_model(path=<local checkpoint>)") from None
    state_dict = dict(state_dict)
    if remove_axes:
        for key in ("aux.weight", "aux.bias"):
            if key not in state_dict:
                raise KeyError(f"{bundle._name()}.get_model: the checkpoint has no {key!r}")
            rows = state_dict[key]
            keep = [i for i in range(rows.shape[0]) if i not in remove_axes]
            state_dict[key] = rows[fiamma.tensor(keep, dtype=fiamma.long)].clone()
    return state_dict


def _build(model_type, params):
    factories = {"Wav2Vec2": wav2vec2_model, "WavLM": wavlm_model}
    if model_type not in factories:
        raise ValueError(f"Wav2Vec2Bundle: model type must be one of {tuple(factories)}, got "
                         f"{model_type!r}")
    return factories[model_type](**params)


@dataclass
class Wav2Vec2Bundle:
    """A pretrained (not fine-tuned) wav2vec 2.0 / HuBERT / WavLM model: its architecture
    (``_params``), checkpoint file (``_path``), sample rate and whether the model expects
    layer-normalised waveforms.

    >>> bundle = fiamma.audio.pipelines.HUBERT_BASE                       # doctest: +SKIP
    >>> model = bundle.get_model()                                       # doctest: +SKIP
    >>> features, _ = model.extract_features(waveform)                   # doctest: +SKIP
    """

    _path: str
    _params: dict
    _sample_rate: float
    _normalize_waveform: bool
    _model_type: str

    @property
    def sample_rate(self):
        """The sample rate (Hz) the model was trained on."""
        return self._sample_rate

    @property
    def url(self):
        """Where the checkpoint is published (fiamma extension)."""
        return self._path if self._path.startswith("https") else _BASE_URL + self._path

    @property
    def file_name(self):
        """The checkpoint's file name in the cache (fiamma extension)."""
        return self.url.rsplit("/", 1)[-1]

    def _name(self):
        for name, value in globals().items():
            if value is self:
                return name
        return type(self).__name__

    def _get_state_dict(self, dl_kwargs, path=None):
        return _state_dict(self, dl_kwargs, path)

    def get_model(self, *, dl_kwargs=None, path=None):
        """The model with the pretrained weights loaded, in eval mode: a
        :class:`~fiamma.audio.models.Wav2Vec2Model`, wrapped to layer-normalise the input for
        the models trained that way (the large/XLS-R/lv-60k ones)."""
        model = _build(self._model_type, self._params)
        model.load_state_dict(self._get_state_dict(dl_kwargs, path))
        if self._normalize_waveform:
            model = _Wav2Vec2Model(model, normalize_waveform=True)
        return model.eval()


@dataclass
class Wav2Vec2ASRBundle(Wav2Vec2Bundle):
    """A wav2vec 2.0 / HuBERT model fine-tuned for CTC speech recognition; ``get_labels()``
    names its output classes (index 0 is the CTC blank).

    The published checkpoints keep fairseq's dictionary rows ``<pad>``, ``</s>``, ``<unk>``
    (1, 2, 3); ``get_model`` drops the rows in ``_remove_aux_axis`` from the output layer.
    """

    _labels: tuple = ()
    _remove_aux_axis: tuple = (1, 2, 3)

    def get_labels(self, *, blank="-"):
        """``(blank, *labels)``: the output classes in order; "|" is the word boundary."""
        return (blank, *self._labels)

    def _get_state_dict(self, dl_kwargs, path=None):
        return _state_dict(self, dl_kwargs, path, self._remove_aux_axis)


@dataclass
class Wav2Vec2FABundle(Wav2Vec2ASRBundle):
    """A model for forced alignment (MMS): ``get_model`` returns log-probabilities, with a
    zero-score "star" class appended unless ``with_star=False``."""

    def get_labels(self, star="*", blank="-"):
        labels = (blank, *self._labels)
        return labels if star is None else (*labels, star)

    def get_dict(self, star="*", blank="-"):
        """Label -> index."""
        return {label: i for i, label in enumerate(self.get_labels(star=star, blank=blank))}

    def get_model(self, with_star=True, *, dl_kwargs=None, path=None):
        model = _build(self._model_type, self._params)
        model.load_state_dict(self._get_state_dict(dl_kwargs, path))
        model = _Wav2Vec2Model(model, normalize_waveform=self._normalize_waveform,
                               apply_log_softmax=True, append_star=with_star)
        return model.eval()

    def get_tokenizer(self):
        """A callable mapping a list of (normalised) words to lists of label indices."""
        return _Tokenizer(self.get_dict())

    def get_aligner(self):
        """A callable ``(emission (frame, label) log-probs, token lists) -> lists of
        :class:`~fiamma.audio.functional.TokenSpan` per word`` (CTC forced alignment)."""
        return _Aligner(blank=0)


class _Tokenizer:
    def __init__(self, dictionary):
        self.dictionary = dictionary

    def __call__(self, transcript):
        try:
            return [[self.dictionary[c] for c in word] for word in transcript]
        except KeyError as e:
            raise ValueError(f"Wav2Vec2FABundle tokenizer: {e.args[0]!r} is not a label (the "
                             "transcript must be normalised to the bundle's labels)") from None


class _Aligner:
    def __init__(self, blank):
        self.blank = blank

    def __call__(self, emission, tokens):
        from fiamma.audio.functional import forced_align, merge_tokens

        if emission.ndim != 2:
            raise ValueError("Wav2Vec2FABundle aligner: expected a 2-D emission (frame, label), "
                             f"got shape {list(emission.shape)}")
        flat = [t for word in tokens for t in word]
        targets = fiamma.tensor([flat], dtype=fiamma.int32, device=emission.device)
        aligned, scores = forced_align(emission.unsqueeze(0), targets, blank=self.blank)
        spans = merge_tokens(aligned[0], scores[0].exp())
        out, i = [], 0
        for word in tokens:
            out.append(spans[i:i + len(word)])
            i += len(word)
        return out


# ---- the published bundles ------------------------------------------------------------------

_CONV = [(512, 10, 5)] + [(512, 3, 2)] * 4 + [(512, 2, 2)] * 2
_EN = tuple("|ETAONIHSRDLUMWCFGYPBVK'XJQZ")
_DE = tuple("|enirstadhulgcmobwfkzpvüäöjßyxq")
_VP_EN = tuple("|etoiansrhldcumpfgwybvkxjqz")
_ES = tuple("|eaosnrildctupmbqygvhófíájzñéxúkwü")
_FR = tuple("|esnitraouldcpmévqfgbhxàjèyêzôkçœûùîâwïëüæ")
_IT = tuple("|eiaontrlscdupmgvhzfbqàèùéòìkyxwjóíï")
_MMS = tuple("aienoutsrmkldghybpwcvjzf'qx")

# (extractor_mode, conv_bias, embed_dim, layers, ff_features, layer_norm_first); heads: 12 at
# width 768, else 16
_ARCH = {
    "base": ("group_norm", False, 768, 12, 3072, False),
    "large": ("group_norm", False, 1024, 24, 4096, False),
    "lv60k": ("layer_norm", True, 1024, 24, 4096, True),
    "hubert_large": ("layer_norm", False, 1024, 24, 4096, True),
    "hubert_xlarge": ("layer_norm", False, 1280, 48, 5120, True),
    "xlsr_1b": ("layer_norm", True, 1280, 48, 5120, True),
    "xlsr_2b": ("layer_norm", True, 1920, 48, 7680, True),
    "wavlm_large": ("layer_norm", False, 1024, 24, 4096, True),
}


def _params(arch, projection, attention, ff_interm, dropout, layer_drop, aux=None, wavlm=False):
    mode, bias, dim, layers, ff, first = _ARCH[arch]
    params = {
        "extractor_mode": mode, "extractor_conv_layer_config": list(_CONV),
        "extractor_conv_bias": bias, "encoder_embed_dim": dim,
        "encoder_projection_dropout": projection, "encoder_pos_conv_kernel": 128,
        "encoder_pos_conv_groups": 16, "encoder_num_layers": layers,
        "encoder_num_heads": 12 if dim == 768 else 16,
    }
    if wavlm:
        params.update(encoder_max_distance=800, encoder_num_buckets=320)
    params.update({
        "encoder_attention_dropout": attention, "encoder_ff_interm_features": ff,
        "encoder_ff_interm_dropout": ff_interm, "encoder_dropout": dropout,
        "encoder_layer_norm_first": first, "encoder_layer_drop": layer_drop,
        "aux_num_out": aux,
    })
    return params


def _pre(path, params, normalize, model_type="Wav2Vec2"):
    return Wav2Vec2Bundle(path, params, 16000, normalize, model_type)


def _asr(path, params, normalize, labels=_EN, remove=(1, 2, 3)):
    return Wav2Vec2ASRBundle(path, params, 16000, normalize, "Wav2Vec2", labels, remove)


_BASE = (0.1, 0.1, 0.0, 0.1, 0.05)
_LARGE = (0.1, 0.1, 0.0, 0.0, 0.2)
_LV60K = (0.1, 0.1, 0.0, 0.0, 0.0)
_ZERO = (0.0, 0.0, 0.0, 0.0, 0.0)
_HUBERT_ASR = (0.0, 0.0, 0.1, 0.0, 0.1)
_VOXPOPULI = (0.0, 0.0, 0.1, 0.0, 0.1)

WAV2VEC2_BASE = _pre("wav2vec2_fairseq_base_ls960.pth", _params("base", *_BASE), False)
WAV2VEC2_ASR_BASE_10M = _asr("wav2vec2_fairseq_base_ls960_asr_ll10m.pth",
                             _params("base", *_BASE, aux=29), False)
WAV2VEC2_ASR_BASE_100H = _asr("wav2vec2_fairseq_base_ls960_asr_ls100.pth",
                              _params("base", *_BASE, aux=29), False)
WAV2VEC2_ASR_BASE_960H = _asr("wav2vec2_fairseq_base_ls960_asr_ls960.pth",
                              _params("base", *_BASE, aux=29), False)
WAV2VEC2_LARGE = _pre("wav2vec2_fairseq_large_ls960.pth", _params("large", *_LARGE), False)
WAV2VEC2_ASR_LARGE_10M = _asr("wav2vec2_fairseq_large_ls960_asr_ll10m.pth",
                              _params("large", *_LARGE, aux=29), False)
WAV2VEC2_ASR_LARGE_100H = _asr("wav2vec2_fairseq_large_ls960_asr_ls100.pth",
                               _params("large", *_LARGE, aux=29), False)
WAV2VEC2_ASR_LARGE_960H = _asr("wav2vec2_fairseq_large_ls960_asr_ls960.pth",
                               _params("large", *_LARGE, aux=29), False)
WAV2VEC2_LARGE_LV60K = _pre("wav2vec2_fairseq_large_lv60k.pth", _params("lv60k", *_LV60K), True)
WAV2VEC2_ASR_LARGE_LV60K_10M = _asr("wav2vec2_fairseq_large_lv60k_asr_ll10m.pth",
                                    _params("lv60k", *_LV60K, aux=29), True)
WAV2VEC2_ASR_LARGE_LV60K_100H = _asr("wav2vec2_fairseq_large_lv60k_asr_ls100.pth",
                                     _params("lv60k", *_LV60K, aux=29), True)
WAV2VEC2_ASR_LARGE_LV60K_960H = _asr("wav2vec2_fairseq_large_lv60k_asr_ls960.pth",
                                     _params("lv60k", *_LV60K, aux=29), True)
WAV2VEC2_XLSR53 = _pre("wav2vec2_fairseq_large_xlsr53.pth", _params("lv60k", *_ZERO), True)
WAV2VEC2_XLSR_300M = _pre("wav2vec2_xlsr_300m.pth", _params("lv60k", *_ZERO), True)
WAV2VEC2_XLSR_1B = _pre("wav2vec2_xlsr_1b.pth", _params("xlsr_1b", 0.1, 0.0, 0.0, 0.0, 0.0),
                        True)
WAV2VEC2_XLSR_2B = _pre("wav2vec2_xlsr_2b.pth", _params("xlsr_2b", 0.1, 0.0, 0.0, 0.0, 0.0),
                        True)
HUBERT_BASE = _pre("hubert_fairseq_base_ls960.pth", _params("base", *_BASE), False)
HUBERT_LARGE = _pre("hubert_fairseq_large_ll60k.pth", _params("hubert_large", *_ZERO), True)
HUBERT_XLARGE = _pre("hubert_fairseq_xlarge_ll60k.pth", _params("hubert_xlarge", *_ZERO), True)
HUBERT_ASR_LARGE = _asr("hubert_fairseq_large_ll60k_asr_ls960.pth",
                        _params("hubert_large", *_HUBERT_ASR, aux=29), True)
HUBERT_ASR_XLARGE = _asr("hubert_fairseq_xlarge_ll60k_asr_ls960.pth",
                         _params("hubert_xlarge", *_HUBERT_ASR, aux=29), True)
VOXPOPULI_ASR_BASE_10K_DE = _asr("wav2vec2_voxpopuli_base_10k_asr_de.pt",
                                 _params("base", *_VOXPOPULI, aux=32), False, _DE,
                                 (1, 2, 3, 35))
VOXPOPULI_ASR_BASE_10K_EN = _asr("wav2vec2_voxpopuli_base_10k_asr_en.pt",
                                 _params("base", *_VOXPOPULI, aux=28), False, _VP_EN,
                                 (1, 2, 3, 31))
VOXPOPULI_ASR_BASE_10K_ES = _asr("wav2vec2_voxpopuli_base_10k_asr_es.pt",
                                 _params("base", *_VOXPOPULI, aux=35), False, _ES,
                                 (1, 2, 3, 35))
VOXPOPULI_ASR_BASE_10K_FR = _asr("wav2vec2_voxpopuli_base_10k_asr_fr.pt",
                                 _params("base", *_VOXPOPULI, aux=43), False, _FR)
VOXPOPULI_ASR_BASE_10K_IT = _asr("wav2vec2_voxpopuli_base_10k_asr_it.pt",
                                 _params("base", *_VOXPOPULI, aux=37), False, _IT)
WAVLM_BASE = _pre("wavlm_base.pth", _params("base", *_BASE, wavlm=True), False, "WavLM")
WAVLM_BASE_PLUS = _pre("wavlm_base_plus.pth", _params("base", *_BASE, wavlm=True), False,
                       "WavLM")
WAVLM_LARGE = _pre("wavlm_large.pth", _params("wavlm_large", 0.1, 0.1, 0.0, 0.1, 0.05,
                                              wavlm=True), True, "WavLM")
MMS_FA = Wav2Vec2FABundle(
    "https://dl.fbaipublicfiles.com/mms/torchaudio/ctc_alignment_mling_uroman/model.pt",
    _params("lv60k", 0.0, 0.0, 0.1, 0.0, 0.1, aux=28), 16000, True, "Wav2Vec2", _MMS)
