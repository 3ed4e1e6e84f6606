/* Sparse compressed (CSR) kernels: see api_sparse.h.
 *
 * fm_csr_mm and fm_csr_sddmm split rows across OpenMP threads (each row's output is written by
 * one thread; rows are independent). fm_csr_mm_t scatters into the rows of its result, so it
 * runs on one thread. The structure is checked in full before any work. The products have an
 * AVX2/FMA clone (x86-64-v3) beside the baseline one. */
#include <omp.h>
#include <string.h>

#include "dtypes.h"
#include "api_sparse.h"

#define SP_PAR_MIN 2e5 /* multiply-adds before a second thread pays */

static int csr_check(int64_t m, int64_t k, int64_t nnz, const int64_t *crow, const int64_t *col,
                     int64_t *bad) {
    if (m < 0 || k < 0 || nnz < 0) return FM_ERR_ARG;
    if (crow[0] != 0) {
        if (bad) { bad[0] = 0; bad[1] = 0; }
        return FM_ERR_INDEX;
    }
    for (int64_t i = 0; i < m; i++) {
        if (crow[i + 1] < crow[i] || crow[i + 1] > nnz) {
            if (bad) { bad[0] = 0; bad[1] = i + 1; }
            return FM_ERR_INDEX;
        }
    }
    if (crow[m] != nnz) {
        if (bad) { bad[0] = 0; bad[1] = m; }
        return FM_ERR_INDEX;
    }
    for (int64_t p = 0; p < nnz; p++) {
        if (col[p] < 0 || col[p] >= k) {
            if (bad) { bad[0] = 1; bad[1] = p; }
            return FM_ERR_INDEX;
        }
    }
    return FM_OK;
}

/* Rows [lo, hi) of out = S @ d. Four stored entries at a time: each pass over the output row
   adds four scaled dense rows (a quarter of the output loads and stores of one at a time). The
   OpenMP region lives outside the ISA clones (see norm.c), each thread calls a clone on its
   rows. */
#define SP_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))

#define CSR_MM(T)                                                                            \
    SP_CLONES static void csr_mm_rows_##T(int64_t lo, int64_t hi, int64_t n,                  \
                                          const int64_t *restrict crow,                      \
                                          const int64_t *restrict col, const T *restrict v,  \
                                          const T *restrict d, T *restrict out) {            \
        for (int64_t i = lo; i < hi; i++) {                                                  \
            T *restrict o = out + i * n;                                                     \
            for (int64_t j = 0; j < n; j++) o[j] = 0;                                        \
            int64_t p = crow[i];                                                             \
            const int64_t e = crow[i + 1];                                                   \
            for (; p + 4 <= e; p += 4) {                                                     \
                const T a0 = v[p], a1 = v[p + 1], a2 = v[p + 2], a3 = v[p + 3];              \
                const T *r0 = d + col[p] * n, *r1 = d + col[p + 1] * n;                      \
                const T *r2 = d + col[p + 2] * n, *r3 = d + col[p + 3] * n;                  \
                for (int64_t j = 0; j < n; j++)                                              \
                    o[j] += a0 * r0[j] + a1 * r1[j] + a2 * r2[j] + a3 * r3[j];               \
            }                                                                                \
            for (; p < e; p++) {                                                             \
                const T a = v[p];                                                            \
                const T *r = d + col[p] * n;                                                 \
                for (int64_t j = 0; j < n; j++) o[j] += a * r[j];                            \
            }                                                                                \
        }                                                                                    \
    }                                                                                        \
    static void csr_mm_##T(int64_t m, int64_t n, const int64_t *crow, const int64_t *col,    \
                           const T *v, const T *d, T *out, int nt) {                        \
        if (nt <= 1 || m < 2) {                                                              \
            csr_mm_rows_##T(0, m, n, crow, col, v, d, out);                                  \
            return;                                                                          \
        }                                                                                    \
        if (nt > m) nt = (int)m;                                                             \
        _Pragma("omp parallel num_threads(nt)")                                              \
        {                                                                                    \
            int t = omp_get_thread_num(), k = omp_get_num_threads();                         \
            csr_mm_rows_##T(m * t / k, m * (t + 1) / k, n, crow, col, v, d, out);            \
        }                                                                                    \
    }                                                                                        \
    SP_CLONES static void csr_mm_t_##T(int64_t m, int64_t k, int64_t n,                      \
                                       const int64_t *restrict crow,                         \
                                       const int64_t *restrict col, const T *restrict v,     \
                                       const T *restrict d, T *restrict out) {               \
        memset(out, 0, (size_t)(k * n) * sizeof(T));                                         \
        for (int64_t i = 0; i < m; i++) {                                                    \
            const T *restrict r = d + i * n;                                                 \
            for (int64_t p = crow[i]; p < crow[i + 1]; p++) {                                \
                const T a = v[p];                                                            \
                T *restrict o = out + col[p] * n;                                            \
                for (int64_t j = 0; j < n; j++) o[j] += a * r[j];                            \
            }                                                                                \
        }                                                                                    \
    }                                                                                        \
    static void csr_sddmm_##T(int64_t m, int64_t n, const int64_t *crow, const int64_t *col, \
                              const T *a, const T *b, T *out, int nt) {                      \
        _Pragma("omp parallel for num_threads(nt) schedule(dynamic, 64) if(nt > 1)")         \
        for (int64_t i = 0; i < m; i++) {                                                    \
            const T *ra = a + i * n;                                                         \
            for (int64_t p = crow[i]; p < crow[i + 1]; p++) {                                \
                const T *rb = b + col[p] * n;                                                \
                T s = 0;                                                                     \
                for (int64_t j = 0; j < n; j++) s += ra[j] * rb[j];                          \
                out[p] = s;                                                                  \
            }                                                                                \
        }                                                                                    \
    }

CSR_MM(float)
CSR_MM(double)

int fm_csr_mm(int dtype, int64_t m, int64_t k, int64_t n, int64_t nnz, const int64_t *crow,
              const int64_t *col, intptr_t vals, intptr_t d, intptr_t out, int64_t *bad) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (n < 0) return FM_ERR_ARG;
    int rc = csr_check(m, k, nnz, crow, col, bad);
    if (rc) return rc;
    int nt = fm_par_threads((double)nnz * (double)n, SP_PAR_MIN);
    if (dtype == FM_FLOAT32)
        csr_mm_float(m, n, crow, col, (const float *)vals, (const float *)d, (float *)out, nt);
    else
        csr_mm_double(m, n, crow, col, (const double *)vals, (const double *)d, (double *)out,
                      nt);
    return FM_OK;
}

int fm_csr_mm_t(int dtype, int64_t m, int64_t k, int64_t n, int64_t nnz, const int64_t *crow,
                const int64_t *col, intptr_t vals, intptr_t d, intptr_t out, int64_t *bad) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (n < 0) return FM_ERR_ARG;
    int rc = csr_check(m, k, nnz, crow, col, bad);
    if (rc) return rc;
    if (dtype == FM_FLOAT32)
        csr_mm_t_float(m, k, n, crow, col, (const float *)vals, (const float *)d, (float *)out);
    else
        csr_mm_t_double(m, k, n, crow, col, (const double *)vals, (const double *)d,
                        (double *)out);
    return FM_OK;
}

int fm_csr_sddmm(int dtype, int64_t m, int64_t k, int64_t n, int64_t nnz, const int64_t *crow,
                 const int64_t *col, intptr_t a, intptr_t b, intptr_t out, int64_t *bad) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (n < 0) return FM_ERR_ARG;
    int rc = csr_check(m, k, nnz, crow, col, bad);
    if (rc) return rc;
    int nt = fm_par_threads((double)nnz * (double)n, SP_PAR_MIN);
    if (dtype == FM_FLOAT32)
        csr_sddmm_float(m, n, crow, col, (const float *)a, (const float *)b, (float *)out, nt);
    else
        csr_sddmm_double(m, n, crow, col, (const double *)a, (const double *)b, (double *)out,
                         nt);
    return FM_OK;
}
