/* Int8 matrix product for dynamic quantization (qgemm.c): C = A B^T exactly in int32, A uint8
 * (the quantized activations, m x k, rows lda bytes apart), B int8 (the weight, n x k).
 * cffi cdef rules: plain declarations and integer #defines only.
 *
 * fm_qgemm_pack_b: B (n x k, contiguous) into bp, the kernel's layout: ceil(n/16) panels of 16
 * columns, each ceil(k/4) groups of 64 bytes (column j's 4 consecutive k values at 4j); the
 * padding is zero. bp holds fm_qgemm_packed_bytes(n, k) bytes.
 * fm_qgemm_u8s8: c (m x n int32, contiguous) = a bp^T. a's rows must hold 4*ceil(k/4) bytes
 * (lda >= that) with zeros past k. a7 != 0 promises every a value is at most 127 (7-bit
 * activations, PyTorch's reduce_range), which lets the AVX2 path use vpmaddubsw without
 * saturation; the AVX-512 VNNI path (vpdpbusd) is exact for any uint8. a7's bit 1 (value 2)
 * skips the VNNI path and bit 2 (value 4) uses the plain C one (for tests). Threads (OpenMP)
 * split the tiles. */

int64_t fm_qgemm_packed_bytes(int64_t n, int64_t k);
int fm_qgemm_pack_b(int64_t n, int64_t k, intptr_t b, intptr_t bp);
int fm_qgemm_u8s8(int64_t m, int64_t n, int64_t k, intptr_t a, int64_t lda, intptr_t bp,
                  intptr_t c, int a7);
