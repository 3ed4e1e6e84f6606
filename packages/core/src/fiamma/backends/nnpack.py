"""``fiamma.backends.nnpack``: NNPACK's flags (fiamma's kernels do not use NNPACK)."""

import sys

from fiamma.backends._flags import set_flags

enabled = False


def is_available():
    """Whether NNPACK can be used (never: fiamma has its own CPU kernels)."""
    return False


def flags(enabled=False):
    """Set the flag inside a ``with`` block (it changes nothing in fiamma)."""
    return set_flags(sys.modules[__name__], enabled=enabled)
