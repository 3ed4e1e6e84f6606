"""Loads the compiled kernels (fiamma._C) and turns their status codes into exceptions."""

import ctypes
import os

import scipy_openblas32 as _openblas

# The extension links against scipy-openblas32's shared library. Loading it first, globally,
# lets the dynamic linker resolve it wherever the package is installed (wheel, editable, sdist).
_blas_path = os.path.join(_openblas.get_lib_dir(), "lib" + _openblas.get_library() + ".so")
if os.path.exists(_blas_path):
    ctypes.CDLL(_blas_path, mode=ctypes.RTLD_GLOBAL)

from fiamma._C import ffi, lib  # noqa: E402

__all__ = ["ffi", "lib", "check", "raise_status"]

_MESSAGES = {
    lib.FM_ERR_NOMEM: (MemoryError, "out of memory"),
    lib.FM_ERR_DTYPE: (TypeError, "unsupported dtype"),
    lib.FM_ERR_NDIM: (ValueError, "too many dimensions (at most %d)" % lib.FM_MAX_DIMS),
    lib.FM_ERR_INDEX: (IndexError, "index out of range"),
    lib.FM_ERR_ARG: (ValueError, "invalid argument"),
    lib.FM_ERR_OP: (ValueError, "unknown operation"),
    lib.FM_ERR_VALUE: (ValueError, "invalid value"),
}


def raise_status(rc, op, detail=""):
    """Raise the exception for a nonzero C status ``rc`` returned by ``op``."""
    exc, msg = _MESSAGES.get(rc, (RuntimeError, "internal error %d" % rc))
    if detail:
        msg = msg + ": " + detail
    raise exc(f"{op}: {msg}")


def check(rc, op, detail=""):
    if rc:
        raise_status(rc, op, detail)
