/* Internal (not part of the cffi API): a matrix product with a fixed right operand, for loops
 * that multiply many left operands by the same B (the recurrent weight of lstm.c's sequence
 * loop). On fiamma's own AVX-512 kernel B is packed once (sgemm.c's fm_sgemm_pack) instead of
 * per product; otherwise each product goes to BLAS with B as it lies. matmul.c implements it. */
#ifndef FM_GEMM_PLAN_H
#define FM_GEMM_PLAN_H
#include <stdint.h>

typedef struct {
    int dtype;           /* FM_FLOAT32 or FM_FLOAT64 */
    int64_t m, n, k;
    const void *b;       /* k x n, row stride sbk, column stride sbn (one of them 1) */
    int64_t sbk, sbn;
    float *packed;       /* the own kernel's packed B, or NULL: BLAS */
    int64_t packed_bytes;
    int nthreads;
} fm_gemm_plan;

/* FM_OK, FM_ERR_ARG (B neither row- nor column-major, sizes < 1), FM_ERR_NOMEM */
int fm_gemm_plan_init(fm_gemm_plan *p, int dtype, int64_t m, int64_t n, int64_t k,
                      const void *b, int64_t sbk, int64_t sbn);
/* C (m x n, row stride ldc) = A (m x k, row-major, row stride lda) @ B + beta * C */
int fm_gemm_plan_run(const fm_gemm_plan *p, const void *a, int64_t lda, double beta, void *c,
                     int64_t ldc);
void fm_gemm_plan_free(fm_gemm_plan *p);

/* sgemm.c: B packed once for fm_sgemm_packed (k x n, any strides) into fm_sgemm_packed_floats
   floats; FM_ERR_OP without AVX-512 */
int64_t fm_sgemm_packed_floats(int64_t k, int64_t n);
int fm_sgemm_pack(int64_t k, int64_t n, intptr_t b, int64_t sbk, int64_t sbn, intptr_t out);
int fm_sgemm_packed(int64_t m, int64_t n, int64_t k, intptr_t a, int64_t sam, intptr_t bp,
                    double beta, intptr_t c, int64_t ldc, int nthreads);
#endif
