"""The CPU backend: the contract (fiamma._backend.contract) over core's C library, compiled
through cffi. With fiamma._lib (the cffi loader) this package is the only code that calls the C
library; each family of primitives is one module, and this module is the backend object (its
functions are the primitives, without the cost of a bound method per call)."""

from fiamma._backend import codes as _codes
from fiamma._lib import lib as _lib

name = "cpu"


def _check_codes():
    """codes.py is the C header's constants by name: a C change that renumbers one fails here,
    at import, rather than running the wrong kernel."""
    for k, v in vars(_codes).items():
        if k.isupper() and getattr(_lib, "FM_" + k) != v:
            raise ImportError(f"fiamma: codes.{k} is {v} but the C library's FM_{k} is "
                              f"{getattr(_lib, 'FM_' + k)}: rebuild or regenerate codes.py")


_check_codes()

from fiamma._backend.cpu.elementwise import *  # noqa: E402,F401,F403
from fiamma._backend.cpu.fused import *  # noqa: E402,F401,F403
from fiamma._backend.cpu.index import *  # noqa: E402,F401,F403
from fiamma._backend.cpu.memory import *  # noqa: E402,F401,F403
from fiamma._backend.cpu.products import *  # noqa: E402,F401,F403
from fiamma._backend.cpu.random import *  # noqa: E402,F401,F403
from fiamma._backend.cpu.reductions import *  # noqa: E402,F401,F403
from fiamma._backend.cpu.sorting import *  # noqa: E402,F401,F403
from fiamma._backend.cpu.sparse import *  # noqa: E402,F401,F403
from fiamma._backend.cpu.spectral import *  # noqa: E402,F401,F403
