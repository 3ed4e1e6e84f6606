"""The array-module backend over NumPy as the CPU device's backend (FIAMMA_CPU_BACKEND=xp): the
differential run of the test suites. CPU memory stays the C allocator's (and borrowed NumPy,
shared-memory and file buffers); the primitives view it through NumPy at its address."""

import ctypes

import numpy as np

from fiamma._backend.xp import XpBackend

__all__ = ["install", "HostXpBackend"]


class HostXpBackend(XpBackend):
    """XpBackend whose storages are ordinary CPU storages (an address and a size)."""

    def __init__(self):
        XpBackend.__init__(self, np, "cpu")

    def new_storage(self, dev, nbytes, zero=False):
        from fiamma._storage import Storage

        return Storage(nbytes, zero)

    def raw(self, t, shape=None, strides=None, off=0):
        # CPU storages (core's Storage) have no slot for the view cache
        return self._raw_uncached(t, shape, strides, off)

    def _array(self, st, dtype, shape, bstrides, boff):
        n = st.nbytes
        buf = (ctypes.c_char * max(n, 1)).from_address(st.ptr) if st.ptr else bytearray(1)
        return np.ndarray(shape, dtype, buffer=buf, offset=boff, strides=bstrides)

    def __getattr__(self, name):
        # host-memory helpers and dtype tables of the CPU backend (not compute primitives)
        from fiamma._backend import cpu
        from fiamma._backend.xp import PRIMITIVES

        # a contract primitive this backend lacks, or an optional C one: no silent C
        if name in PRIMITIVES or name in cpu.fused.OPTIONAL:
            raise AttributeError(f"the xp backend has no primitive {name!r}")
        return getattr(cpu, name)


def install():
    """Make every CPU storage's primitives run on the NumPy backend."""
    from fiamma import _backend, _storage

    be = HostXpBackend()
    _storage.Storage.backend = be
    _backend.register("cpu", be)
    return be
