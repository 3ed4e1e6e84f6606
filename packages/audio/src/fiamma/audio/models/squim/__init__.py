"""SQUIM speech-quality estimators (torchaudio.models.squim): :class:`SquimObjective`
(STOI / PESQ / SI-SDR without a reference) and :class:`SquimSubjective` (MOS against a
non-matching clean reference)."""

from fiamma.audio.models.squim.objective import (
    SquimObjective,
    squim_objective_base,
    squim_objective_model,
)
from fiamma.audio.models.squim.subjective import (
    SquimSubjective,
    squim_subjective_base,
    squim_subjective_model,
)

__all__ = ["squim_objective_base", "squim_objective_model", "squim_subjective_base",
           "squim_subjective_model", "SquimObjective", "SquimSubjective"]
