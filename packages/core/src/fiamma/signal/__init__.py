"""``fiamma.signal``: PyTorch's ``torch.signal`` (window functions in :mod:`.windows`)."""

from fiamma.signal import windows  # noqa: F401

__all__ = ["windows"]
