"""``fiamma.backends.cudnn``: cuDNN's flags, settable as in PyTorch; fiamma has no cuDNN, so
``is_available()`` is False and the flags change nothing."""

import sys

from fiamma.backends._flags import set_flags

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True


def is_available():
    """Whether cuDNN can be used (never: fiamma has no cuDNN)."""
    return False


def version():
    """cuDNN's version (None: fiamma has no cuDNN, as in a PyTorch built without it)."""
    return None


def is_acceptable(tensor):
    """Whether cuDNN would run an op on ``tensor`` (never)."""
    return False


def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False,
          allow_tf32=True):
    """Set the flags inside a ``with`` block (PyTorch's ``torch.backends.cudnn.flags``)."""
    return set_flags(sys.modules[__name__], enabled=enabled, benchmark=benchmark,
                     benchmark_limit=benchmark_limit, deterministic=deterministic,
                     allow_tf32=allow_tf32)
