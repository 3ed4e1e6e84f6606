"""``fiamma.backends.mps``: Apple's Metal backend (fiamma has none)."""


def is_available():
    """Whether tensors can be put on an MPS device (never in fiamma)."""
    return False


def is_built():
    """Whether fiamma was built with MPS support (no)."""
    return False


def is_macos_or_newer(major, minor):
    """Whether MPS runs on macOS ``major.minor`` or newer (False: there is no MPS backend)."""
    return False
