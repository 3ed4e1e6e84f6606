"""The cuda backend: the array-module backend over CuPy (filled in below)."""

_BACKEND = None
_REASON = None


def backend():
    """The registered cuda backend, or None (with ``reason()`` saying why) when CuPy or a GPU
    is missing."""
    return _BACKEND


def reason():
    return _REASON
