"""``fiamma.backends.cudnn``: cuDNN's flags, settable as in PyTorch, and what the loaded library
is. fiamma finds libcudnn at run time (fiamma/_backend/xp/cudnn_api.py: ``FIAMMA_CUDNN_LIB``,
then the nvidia-cudnn wheels on sys.path, then the system's), and the cuda backend computes
convolutions through it when a GPU is at hand. ``enabled`` (use cuDNN at all), ``allow_tf32``
(float32 convolutions may use TF32 tensor cores), ``deterministic`` (only deterministic
algorithms) and ``benchmark`` (measure the algorithms once per geometry instead of asking
cuDNN's heuristics) are read when a convolution geometry is first seen.
``benchmark_limit`` is kept for PyTorch's API and changes nothing."""

import sys

from fiamma.backends._flags import set_flags

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True


def _api():
    from fiamma._backend.xp import cudnn_api

    return cudnn_api


def is_available():
    """Whether a usable libcudnn (cuDNN 8 or newer) was found and loaded; it serves the cuda
    backend's convolutions once a GPU is at hand.

    >>> import fiamma
    >>> fiamma.backends.cudnn.is_available() in (True, False)
    True
    """
    return _api().library() is not None


def version():
    """The loaded cuDNN's version as one integer (``cudnnGetVersion()``: 92000 for 9.20.0),
    or None when there is none (as in a PyTorch built without cuDNN)."""
    return _api().version()


def is_acceptable(tensor):
    """Whether cuDNN would run a convolution of ``tensor``: a floating tensor on cuda, cuDNN
    enabled and available."""
    from fiamma import _dtype as D

    return (bool(enabled) and tensor.device.type == "cuda" and
            tensor.dtype in (D.float16, D.bfloat16, D.float32, D.float64) and is_available())


def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False,
          allow_tf32=True):
    """Set the flags inside a ``with`` block (PyTorch's ``torch.backends.cudnn.flags``)."""
    return set_flags(sys.modules[__name__], enabled=enabled, benchmark=benchmark,
                     benchmark_limit=benchmark_limit, deterministic=deterministic,
                     allow_tf32=allow_tf32)
