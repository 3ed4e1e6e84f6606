"""CPU primitives of the sparse family: products with a CSR matrix (contract.Backend documents
each). ``bad`` is a Python list (or None): on codes.ERR_INDEX it receives which index tensor
was bad (0: the offsets, 1: the plain indices) and the position."""

from fiamma._backend.codes import ERR_INDEX
from fiamma._lib import ffi, lib

__all__ = ["csr_mm", "csr_sddmm"]

_NULL = ffi.NULL


def _run(fn, dt, m, k, n, crow, col, x, y, out, bad):
    args = (dt, m, k, n, col._shape[0], ffi.cast("int64_t *", crow._ptr),
            ffi.cast("int64_t *", col._ptr), x._ptr, y._ptr, out._ptr)
    rc = fn(*args, _NULL)
    if rc == ERR_INDEX and bad is not None:
        buf = ffi.new("int64_t[2]")
        fn(*args, buf)  # nothing was written: run the check again to learn where
        bad[:] = [buf[0], buf[1]]
    return rc


def csr_mm(m, k, n, crow, col, vals, d, out, trans, bad):
    dt = vals._dtype.code
    if trans:
        return _run(lib.fm_csr_mm_t, dt, m, k, n, crow, col, vals, d, out, bad)
    return _run(lib.fm_csr_mm, dt, m, k, n, crow, col, vals, d, out, bad)


def csr_sddmm(m, k, n, crow, col, a, b, out, bad):
    return _run(lib.fm_csr_sddmm, a._dtype.code, m, k, n, crow, col, a, b, out, bad)
