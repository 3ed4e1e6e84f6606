"""CPU primitives of the matmul family (contract.Backend documents each), and the thread count
of the CPU kernels (OpenBLAS and OpenMP)."""

from fiamma._lib import lib

__all__ = ["mm", "matmul", "mm_bias", "get_num_threads", "set_num_threads"]

_mm = lib.fm_mm
_matmul = lib.fm_matmul
_mm_bias = lib.fm_mm_bias_f32


def mm(m, n, k, c, scm, scn, a, sam, sak, b, sbk, sbn, alpha, beta, ialpha, ibeta):
    return _mm(c._dtype.code, m, n, k, c._ptr, scm, scn, a._ptr, sam, sak, b._ptr, sbk, sbn,
               alpha, beta, ialpha, ibeta)


def matmul(batch, m, n, k, c, sc, a, sa, b, sb, alpha, beta, ialpha, ibeta):
    return _matmul(c._dtype.code, len(batch), batch, m, n, k, c._ptr, sc, a._ptr, sa, b._ptr, sb,
                   alpha, beta, ialpha, ibeta)


def mm_bias(m, n, k, c, scm, a, sam, sak, b, sbk, sbn, bias):
    return _mm_bias(m, n, k, c._ptr, scm, a._ptr, sam, sak, b._ptr, sbk, sbn, bias._ptr)


def get_num_threads():
    return int(lib.fm_blas_get_num_threads())


def set_num_threads(n):
    lib.fm_blas_set_num_threads(n)
