"""Source separation bundles (torchaudio.pipelines.SourceSeparationBundle):
CONVTASNET_BASE_LIBRI2MIX (two speakers, 8 kHz) and HDEMUCS_HIGH_MUSDB(_PLUS) (drums, bass,
other, vocals at 44.1 kHz). Weights are found as in :mod:`fiamma.audio.pipelines._assets`."""

from dataclasses import dataclass
from functools import partial
from typing import Callable

from fiamma import nn
from fiamma.audio.models import conv_tasnet_base, hdemucs_high
from fiamma.audio.pipelines._assets import asset_file_name, asset_url, bundle_name, load_checkpoint

__all__ = ["SourceSeparationBundle", "CONVTASNET_BASE_LIBRI2MIX", "HDEMUCS_HIGH_MUSDB_PLUS",
           "HDEMUCS_HIGH_MUSDB"]


@dataclass
class SourceSeparationBundle:
    """A pretrained separation model: ``get_model()`` builds it with the published weights.

    ConvTasNet takes (batch, 1, time) mixtures and returns (batch, sources, time); HDemucs
    takes (batch, channels, time) and returns (batch, sources, channels, time).

    >>> model = fiamma.audio.pipelines.CONVTASNET_BASE_LIBRI2MIX.get_model()  # doctest: +SKIP
    >>> sources = model(mixture.reshape(1, 1, -1))                           # doctest: +SKIP
    """

    _model_path: str
    _model_factory_func: Callable[[], nn.Module]
    _sample_rate: int

    @property
    def sample_rate(self):
        """The sample rate (Hz) the model was trained on."""
        return self._sample_rate

    @property
    def url(self):
        """Where the checkpoint is published (fiamma extension)."""
        return asset_url(self._model_path)

    @property
    def file_name(self):
        """The checkpoint's file name in the cache (fiamma extension)."""
        return asset_file_name(self._model_path)

    def get_model(self, *, dl_kwargs=None, path=None):
        """The model with the published weights, in eval mode (``dl_kwargs``/``path``:
        fiamma extensions, see :mod:`fiamma.audio.pipelines._assets`)."""
        model = self._model_factory_func()
        owner = f"{bundle_name(self)}.get_model"
        model.load_state_dict(load_checkpoint(owner, self._model_path, dl_kwargs, path))
        return model.eval()


_MUSDB_SOURCES = ["drums", "bass", "other", "vocals"]

CONVTASNET_BASE_LIBRI2MIX = SourceSeparationBundle(
    _model_path="models/conv_tasnet_base_libri2mix.pt",
    _model_factory_func=partial(conv_tasnet_base, num_sources=2),
    _sample_rate=8000,
)
CONVTASNET_BASE_LIBRI2MIX.__doc__ = """ConvTasNet (:func:`~fiamma.audio.models.conv_tasnet_base`,
two sources) trained on Libri2Mix, 8 kHz."""

HDEMUCS_HIGH_MUSDB_PLUS = SourceSeparationBundle(
    _model_path="models/hdemucs_high_trained.pt",
    _model_factory_func=partial(hdemucs_high, sources=_MUSDB_SOURCES),
    _sample_rate=44100,
)
HDEMUCS_HIGH_MUSDB_PLUS.__doc__ = """Hybrid Demucs (:func:`~fiamma.audio.models.hdemucs_high`)
trained on MUSDB-HQ (train and test) plus 150 extra songs; sources drums, bass, other, vocals."""

HDEMUCS_HIGH_MUSDB = SourceSeparationBundle(
    _model_path="models/hdemucs_high_musdbhq_only.pt",
    _model_factory_func=partial(hdemucs_high, sources=_MUSDB_SOURCES),
    _sample_rate=44100,
)
HDEMUCS_HIGH_MUSDB.__doc__ = """Hybrid Demucs (:func:`~fiamma.audio.models.hdemucs_high`)
trained on MUSDB-HQ's training set only; sources drums, bass, other, vocals."""
