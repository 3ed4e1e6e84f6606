"""``fiamma.backends.mkldnn``: oneDNN's flags (fiamma's kernels do not use oneDNN)."""

import sys

from fiamma.backends._flags import set_flags

enabled = True
deterministic = False


def is_available():
    """Whether oneDNN can be used (never: fiamma has its own CPU kernels)."""
    return False


def flags(enabled=False, deterministic=False):
    """Set the flags inside a ``with`` block (they change nothing in fiamma)."""
    return set_flags(sys.modules[__name__], enabled=enabled, deterministic=deterministic)
