"""The array-module backend: one implementation of the backend contract written against the
NumPy/CuPy array API (``xp``). With NumPy it runs the reference device ``xp`` (any CPU; it
exists to test the op layer on a second device, and is not a user device); with CuPy it is the
``cuda`` backend (fiamma._backend.xp.cuda adds CuPy's fast paths).

``reference()`` returns (and registers) the NumPy backend for device type ``xp``.
"""

import functools

import numpy as np

from fiamma._backend.contract import FAMILIES
from fiamma._backend.xp.attn import AttnMixin, LstmMixin
from fiamma._backend.xp.base import XpBase
from fiamma._backend.xp.elementwise import ElementwiseMixin
from fiamma._backend.xp.fused import FusedMixin
from fiamma._backend.xp.index import IndexMixin
from fiamma._backend.xp.memory import MemoryMixin
from fiamma._backend.xp.products import ProductsMixin
from fiamma._backend.xp.random import RandomMixin
from fiamma._backend.xp.reductions import ReductionsMixin
from fiamma._backend.xp.sorting import SortingMixin
from fiamma._backend.xp.sparse import SparseMixin
from fiamma._backend.xp.special import SpecialMixin
from fiamma._backend.xp.spectral import SpectralMixin
from fiamma._backend.xp.xent import XentMixin

__all__ = ["XpBackend", "reference", "PRIMITIVES"]

PRIMITIVES = [p for names in FAMILIES.values() for p in names]
# primitives that compute nothing NumPy could warn about: no errstate around them (it costs
# ~1.5 us a call, and new_storage runs once per op)
_NO_ARITHMETIC = {"new_storage", "read_float", "read_int"}


class XpBackend(MemoryMixin, ElementwiseMixin, SpecialMixin, ReductionsMixin, ProductsMixin,
                IndexMixin, SortingMixin, RandomMixin, FusedMixin, SpectralMixin, XentMixin,
                AttnMixin, LstmMixin, SparseMixin, XpBase):
    """The contract over one array module (see the module docstring)."""

    def __init__(self, xp, name, device_cls=None):
        XpBase.__init__(self, xp, name, device_cls)
        if self.is_numpy:
            # NumPy warns on 0/0, NaN casts, overflow: the C semantics need none of that
            for p in PRIMITIVES:
                if p in _NO_ARITHMETIC:
                    continue
                fn = getattr(self, p, None)
                if fn is not None:
                    setattr(self, p, _quiet(fn))


def _quiet(fn):
    @functools.wraps(fn)
    def primitive(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)

    return primitive


_REFERENCE = None


def reference():
    """The NumPy backend of the reference device ``xp`` (registered on first use)."""
    global _REFERENCE
    if _REFERENCE is None:
        from fiamma import _backend

        _REFERENCE = XpBackend(np, "xp")
        _backend.register("xp", _REFERENCE)
    return _REFERENCE
