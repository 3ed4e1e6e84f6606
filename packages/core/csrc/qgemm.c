/* Int8 GEMM for dynamic quantization (api_qgemm.h documents the contract).
 *
 * The kernels compute a tile of 4 rows of C by 32 columns (two 16-column panels of the packed
 * B) over the whole k: per group of 4 k values, each row's 4 activation bytes are broadcast
 * and multiplied by the panel's 64 weight bytes, summing the 4 products of each column into
 * its int32 lane (vpdpbusd on AVX-512 VNNI; vpmaddubsw + vpmaddwd on AVX2, exact for 7-bit
 * activations; plain C otherwise). Edge tiles (rows past m, a missing second panel, columns
 * past n) are computed with clamped pointers and stored through a small buffer. */
#include <stdint.h>
#include <string.h>

#include "fiamma.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QG_X86 1
#endif

int64_t fm_qgemm_packed_bytes(int64_t n, int64_t k) {
    return ((n + 15) / 16) * ((k + 3) / 4) * 64;
}

int fm_qgemm_pack_b(int64_t n, int64_t k, intptr_t b, intptr_t bp) {
    if (n < 0 || k < 0) return FM_ERR_ARG;
    const int8_t *B = (const int8_t *)b;
    int8_t *P = (int8_t *)bp;
    const int64_t k4 = (k + 3) / 4;
    memset(P, 0, (size_t)fm_qgemm_packed_bytes(n, k));
    for (int64_t j = 0; j < n; j++) {
        int8_t *panel = P + (j / 16) * k4 * 64 + (j % 16) * 4;
        const int8_t *row = B + j * k;
        for (int64_t kk = 0; kk < k; kk++) panel[(kk / 4) * 64 + kk % 4] = row[kk];
    }
    return FM_OK;
}

/* one tile: rows r[0..3] of A, panels p0, p1 (k4 groups each); out[4][32] */
static void tile_c(const uint8_t *const r[4], const int8_t *p0, const int8_t *p1, int64_t k4,
                   int32_t out[4][32]) {
    memset(out, 0, sizeof(int32_t) * 4 * 32);
    for (int64_t g = 0; g < k4; g++)
        for (int i = 0; i < 4; i++) {
            const uint8_t *a = r[i] + 4 * g;
            for (int half = 0; half < 2; half++) {
                const int8_t *w = (half ? p1 : p0) + g * 64;
                for (int j = 0; j < 16; j++)
                    out[i][16 * half + j] += a[0] * w[4 * j] + a[1] * w[4 * j + 1] +
                                             a[2] * w[4 * j + 2] + a[3] * w[4 * j + 3];
            }
        }
}

#ifdef QG_X86
__attribute__((target("avx512f,avx512bw,avx512vnni")))
static void tile_vnni(const uint8_t *const r[4], const int8_t *p0, const int8_t *p1, int64_t k4,
                      int32_t out[4][32]) {
    __m512i c00 = _mm512_setzero_si512(), c01 = c00, c10 = c00, c11 = c00;
    __m512i c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    for (int64_t g = 0; g < k4; g++) {
        const __m512i w0 = _mm512_loadu_si512((const void *)(p0 + g * 64));
        const __m512i w1 = _mm512_loadu_si512((const void *)(p1 + g * 64));
        int32_t v;
        memcpy(&v, r[0] + 4 * g, 4);
        __m512i a = _mm512_set1_epi32(v);
        c00 = _mm512_dpbusd_epi32(c00, a, w0);
        c01 = _mm512_dpbusd_epi32(c01, a, w1);
        memcpy(&v, r[1] + 4 * g, 4);
        a = _mm512_set1_epi32(v);
        c10 = _mm512_dpbusd_epi32(c10, a, w0);
        c11 = _mm512_dpbusd_epi32(c11, a, w1);
        memcpy(&v, r[2] + 4 * g, 4);
        a = _mm512_set1_epi32(v);
        c20 = _mm512_dpbusd_epi32(c20, a, w0);
        c21 = _mm512_dpbusd_epi32(c21, a, w1);
        memcpy(&v, r[3] + 4 * g, 4);
        a = _mm512_set1_epi32(v);
        c30 = _mm512_dpbusd_epi32(c30, a, w0);
        c31 = _mm512_dpbusd_epi32(c31, a, w1);
    }
    _mm512_storeu_si512((void *)(out[0]), c00);
    _mm512_storeu_si512((void *)(out[0] + 16), c01);
    _mm512_storeu_si512((void *)(out[1]), c10);
    _mm512_storeu_si512((void *)(out[1] + 16), c11);
    _mm512_storeu_si512((void *)(out[2]), c20);
    _mm512_storeu_si512((void *)(out[2] + 16), c21);
    _mm512_storeu_si512((void *)(out[3]), c30);
    _mm512_storeu_si512((void *)(out[3] + 16), c31);
}

/* AVX2: a 16-column panel is two ymm of 8 columns x 4 k; vpmaddubsw sums pairs of u8 x s8
   products into int16 (exact while a <= 127: 2 * 127 * 128 < 32768), vpmaddwd by ones sums
   the two pairs into int32 */
__attribute__((target("avx2")))
static void tile_avx2(const uint8_t *const r[4], const int8_t *p0, const int8_t *p1, int64_t k4,
                      int32_t out[4][32]) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i c[4][4];
    for (int i = 0; i < 4; i++)
        for (int q = 0; q < 4; q++) c[i][q] = _mm256_setzero_si256();
    for (int64_t g = 0; g < k4; g++) {
        __m256i w[4];
        w[0] = _mm256_loadu_si256((const __m256i *)(p0 + g * 64));
        w[1] = _mm256_loadu_si256((const __m256i *)(p0 + g * 64 + 32));
        w[2] = _mm256_loadu_si256((const __m256i *)(p1 + g * 64));
        w[3] = _mm256_loadu_si256((const __m256i *)(p1 + g * 64 + 32));
        for (int i = 0; i < 4; i++) {
            int32_t v;
            memcpy(&v, r[i] + 4 * g, 4);
            const __m256i a = _mm256_set1_epi32(v);
            for (int q = 0; q < 4; q++)
                c[i][q] = _mm256_add_epi32(
                    c[i][q], _mm256_madd_epi16(_mm256_maddubs_epi16(a, w[q]), ones));
        }
    }
    for (int i = 0; i < 4; i++)
        for (int q = 0; q < 4; q++) _mm256_storeu_si256((__m256i *)(out[i] + 8 * q), c[i][q]);
}
#endif

typedef void (*tile_fn)(const uint8_t *const r[4], const int8_t *, const int8_t *, int64_t,
                        int32_t out[4][32]);

int fm_qgemm_u8s8(int64_t m, int64_t n, int64_t k, intptr_t a, int64_t lda, intptr_t bp,
                  intptr_t c, int a7) {
    const int64_t k4 = (k + 3) / 4;
    if (m < 0 || n < 0 || k < 0 || lda < 4 * k4) return FM_ERR_ARG;
    if (m == 0 || n == 0) return FM_OK;
    const uint8_t *A = (const uint8_t *)a;
    const int8_t *P = (const int8_t *)bp;
    int32_t *C = (int32_t *)c;
    tile_fn fn = tile_c;
#ifdef QG_X86
    /* a7's bits 1 and 2 (tests): skip the VNNI path / use the plain C one */
    if (!(a7 & 4)) {
        if (!(a7 & 2) && __builtin_cpu_supports("avx512vnni") &&
            __builtin_cpu_supports("avx512bw"))
            fn = tile_vnni;
        else if ((a7 & 1) && __builtin_cpu_supports("avx2"))
            fn = tile_avx2;
    }
#else
    (void)a7;
#endif
    const int64_t np = (n + 15) / 16, pairs = (np + 1) / 2, mt = (m + 3) / 4;
    const int T = fm_par_threads((double)m * (double)n * (double)k, 1 << 22);
    /* a thread takes a pair of panels at a time (the weight slice stays in its L1 while it
       sweeps the rows); dynamic, so a thread the shared machine deschedules delays little */
#pragma omp parallel for num_threads(T) schedule(dynamic, 1) if (T > 1)
    for (int64_t pp = 0; pp < pairs; pp++) {
        const int64_t j0 = pp * 32;
        const int8_t *p0 = P + 2 * pp * k4 * 64;
        const int8_t *p1 = 2 * pp + 1 < np ? p0 + k4 * 64 : p0;
        const int64_t cols = n - j0 < 32 ? n - j0 : 32;
        for (int64_t rt = 0; rt < mt; rt++) {
            const int64_t i0 = rt * 4;
            const uint8_t *r[4];
            for (int i = 0; i < 4; i++) r[i] = A + (i0 + i < m ? i0 + i : m - 1) * lda;
            int32_t out[4][32];
            fn(r, p0, p1, k4, out);
            const int64_t rows = m - i0 < 4 ? m - i0 : 4;
            for (int64_t i = 0; i < rows; i++)
                memcpy(C + (i0 + i) * n + j0, out[i], (size_t)cols * sizeof(int32_t));
        }
    }
    return FM_OK;
}
