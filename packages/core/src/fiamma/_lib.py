"""Loads the compiled kernels (fiamma._C) and turns their status codes into exceptions."""

import ctypes
import importlib.util
import os


def _preload_openblas():
    """Load scipy-openblas32's shared library globally so the extension's dependency on it
    resolves wherever the packages are installed (wheel, editable, sdist). The package is found
    without importing it: its __init__ reads package metadata, which costs tens of ms."""
    spec = importlib.util.find_spec("scipy_openblas32")
    if spec is None or not spec.submodule_search_locations:
        return
    libdir = os.path.join(spec.submodule_search_locations[0], "lib")
    try:
        names = sorted(n for n in os.listdir(libdir) if n.startswith("libscipy_openblas")
                       and ".so" in n)
    except OSError:
        return
    if names:
        ctypes.CDLL(os.path.join(libdir, names[0]), mode=ctypes.RTLD_GLOBAL)


# OpenBLAS's idle threads poll for new work for 2**28 cycles (about 0.1 s) after each threaded
# call. On a machine with few cores they take the CPU from fiamma's own OpenMP threads, which
# run next: a small MLP training step (a few OpenBLAS products among fiamma's kernels) ran 2.5x
# slower on 2 cores. 2**16 cycles keeps back-to-back BLAS calls hot and lets the pool sleep
# before other kernels run. OpenBLAS reads the variable when it loads, so it is set around
# loading it and removed after (nothing else sees it); a value the user set wins.
_TIMEOUT = "OPENBLAS_THREAD_TIMEOUT"
_set_timeout = _TIMEOUT not in os.environ
if _set_timeout:
    os.environ[_TIMEOUT] = "16"
try:
    _preload_openblas()
    from fiamma._C import ffi, lib  # noqa: E402
finally:
    if _set_timeout:
        os.environ.pop(_TIMEOUT, None)

__all__ = ["ffi", "lib"]
