"""Pretrained audio models: :mod:`~fiamma.audio.models.crepe` (pitch)."""

from fiamma.audio.models import crepe  # noqa: F401
from fiamma.audio.models.crepe import Crepe  # noqa: F401

__all__ = ["crepe", "Crepe"]
