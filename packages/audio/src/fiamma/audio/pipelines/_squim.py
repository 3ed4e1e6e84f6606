"""SQUIM bundles (torchaudio.pipelines.SQUIM_OBJECTIVE / SQUIM_SUBJECTIVE): the published
models for reference-free speech quality estimation, 16 kHz input.

``get_model()`` finds the checkpoint as described in :mod:`fiamma.audio.pipelines._assets`
(``path=``, ``dl_kwargs={"model_dir": ...}``, ``$FIAMMA_HOME/hub/checkpoints``).
"""

from dataclasses import dataclass

from fiamma.audio.models.squim import squim_objective_base, squim_subjective_base
from fiamma.audio.pipelines._assets import asset_file_name, asset_url, bundle_name, load_checkpoint

__all__ = ["SquimObjectiveBundle", "SquimSubjectiveBundle", "SQUIM_OBJECTIVE", "SQUIM_SUBJECTIVE"]


class _SquimBundle:
    _factory = None

    @property
    def sample_rate(self):
        """The sample rate (Hz) the model was trained on."""
        return self._sample_rate

    @property
    def url(self):
        """Where the checkpoint is published (fiamma extension)."""
        return asset_url("models/" + self._path)

    @property
    def file_name(self):
        """The checkpoint's file name in the cache (fiamma extension)."""
        return asset_file_name("models/" + self._path)

    def get_model(self, *, dl_kwargs=None, path=None):
        """The model with the published weights, in eval mode. ``dl_kwargs`` (``model_dir``,
        ``file_name``, ``progress``, ``map_location``) and ``path`` (a local checkpoint) are
        fiamma extensions."""
        model = type(self)._factory()
        owner = f"{bundle_name(self)}.get_model"
        model.load_state_dict(load_checkpoint(owner, "models/" + self._path, dl_kwargs, path))
        return model.eval()


@dataclass
class SquimObjectiveBundle(_SquimBundle):
    """A pretrained :class:`~fiamma.audio.models.SquimObjective`: ``model(waveform)`` with a
    (batch, time) waveform at ``sample_rate`` gives ``[STOI, PESQ, SI-SDR]`` estimates.

    >>> model = fiamma.audio.pipelines.SQUIM_OBJECTIVE.get_model()      # doctest: +SKIP
    >>> stoi, pesq, si_sdr = model(waveform)                           # doctest: +SKIP
    """

    _path: str
    _sample_rate: float
    _factory = staticmethod(squim_objective_base)


@dataclass
class SquimSubjectiveBundle(_SquimBundle):
    """A pretrained :class:`~fiamma.audio.models.SquimSubjective`: ``model(waveform,
    reference)`` with any clean speech as the reference gives a MOS estimate per row.

    >>> model = fiamma.audio.pipelines.SQUIM_SUBJECTIVE.get_model()     # doctest: +SKIP
    >>> mos = model(waveform, clean_reference)                         # doctest: +SKIP
    """

    _path: str
    _sample_rate: float
    _factory = staticmethod(squim_subjective_base)


SQUIM_OBJECTIVE = SquimObjectiveBundle("squim_objective_dns2020.pth", _sample_rate=16000)
SQUIM_OBJECTIVE.__doc__ = """SquimObjective trained on the DNS 2020 data set (Kumar et al., 2023);
built by :func:`~fiamma.audio.models.squim_objective_base`; weights under CC BY 4.0."""

SQUIM_SUBJECTIVE = SquimSubjectiveBundle("squim_subjective_bvcc_daps.pth", _sample_rate=16000)
SQUIM_SUBJECTIVE.__doc__ = """SquimSubjective trained on BVCC and DAPS (Manocha & Kumar, 2022;
Kumar et al., 2023); built by :func:`~fiamma.audio.models.squim_subjective_base`; weights under
CC BY-NC 4.0."""
