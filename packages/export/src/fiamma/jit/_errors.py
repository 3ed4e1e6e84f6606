"""The tracer's warning and error classes."""

__all__ = ["TracerWarning", "TracingError"]


class TracerWarning(Warning):
    """A value the trace baked in that may differ for other inputs (as torch.jit.TracerWarning)."""


class TracingError(RuntimeError):
    """The function did something a trace cannot record faithfully."""
