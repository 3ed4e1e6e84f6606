"""``fiamma.backends.mha``: PyTorch's switch for the "fast path" of ``nn.MultiheadAttention``
and ``nn.TransformerEncoderLayer`` in inference (a fused native kernel). fiamma's modules take
the same code path either way, so the flag is kept for programs that read or set it and changes
no result."""

_fastpath_enabled = True


def get_fastpath_enabled():
    """Whether the fast path is enabled (True by default, as in PyTorch)."""
    return _fastpath_enabled


def set_fastpath_enabled(value):
    """Enable or disable the fast path (no effect on fiamma's results)."""
    global _fastpath_enabled
    if not isinstance(value, bool):
        raise TypeError(f"set_fastpath_enabled: expected a bool, got {type(value).__name__}")
    _fastpath_enabled = value
