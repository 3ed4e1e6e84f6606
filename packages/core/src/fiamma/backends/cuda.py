"""``fiamma.backends.cuda``: PyTorch's CUDA flags (``matmul.allow_tf32``, the scaled-dot-product
attention kernel switches), settable as in PyTorch. This fiamma-core has no CUDA backend:
``is_built()`` is False and the flags change nothing on the CPU (as in PyTorch, where they
only steer CUDA kernels)."""

import contextlib

__all__ = ["is_built", "matmul", "preferred_linalg_library", "flash_sdp_enabled",
           "enable_flash_sdp", "mem_efficient_sdp_enabled", "enable_mem_efficient_sdp",
           "math_sdp_enabled", "enable_math_sdp", "cudnn_sdp_enabled", "enable_cudnn_sdp",
           "sdp_kernel"]


def is_built():
    """Whether fiamma was built with CUDA support (not this version; see fiamma.cuda)."""
    return False


class _MatmulFlags:
    """``fiamma.backends.cuda.matmul``: PyTorch's cuBLAS precision flags."""

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    def __repr__(self):
        return (f"matmul(allow_tf32={self.allow_tf32}, allow_fp16_reduced_precision_reduction="
                f"{self.allow_fp16_reduced_precision_reduction}, "
                "allow_bf16_reduced_precision_reduction="
                f"{self.allow_bf16_reduced_precision_reduction})")


matmul = _MatmulFlags()

_LINALG = ("default", "cusolver", "magma")
_linalg = "default"


def preferred_linalg_library(backend=None):
    """Get or set the preferred CUDA linear-algebra library ('default', 'cusolver',
    'magma'); returned as a string (PyTorch returns an enum)."""
    global _linalg
    if backend is not None:
        name = str(getattr(backend, "name", backend)).lower()
        if name not in _LINALG:
            raise ValueError(f"preferred_linalg_library: expected one of {_LINALG}, "
                             f"got {backend!r}")
        _linalg = name
    return _linalg


_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def flash_sdp_enabled():
    return _sdp["flash"]


def enable_flash_sdp(enabled):
    _sdp["flash"] = bool(enabled)


def mem_efficient_sdp_enabled():
    return _sdp["mem_efficient"]


def enable_mem_efficient_sdp(enabled):
    _sdp["mem_efficient"] = bool(enabled)


def math_sdp_enabled():
    return _sdp["math"]


def enable_math_sdp(enabled):
    _sdp["math"] = bool(enabled)


def cudnn_sdp_enabled():
    return _sdp["cudnn"]


def enable_cudnn_sdp(enabled):
    _sdp["cudnn"] = bool(enabled)


@contextlib.contextmanager
def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True,
               enable_cudnn=True):
    """Set the attention kernel switches inside a ``with`` block."""
    saved = dict(_sdp)
    _sdp.update(flash=bool(enable_flash), math=bool(enable_math),
                mem_efficient=bool(enable_mem_efficient), cudnn=bool(enable_cudnn))
    try:
        yield
    finally:
        _sdp.update(saved)
