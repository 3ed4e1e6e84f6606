/* ---- matrix products (matmul.c) -----------------------------------------------------------
 *
 * C = alpha * (A @ B) + beta * C for every index of a broadcast batch, where A is m x k, B is
 * k x n and C is m x n. All three are strided: the stride arrays hold nbatch batch strides
 * followed by the row and column strides (a batch stride of 0 broadcasts that operand). When
 * beta is zero (beta for floats, ibeta for integers and bool) C is write-only: NaNs in it do not
 * propagate. Floats use alpha/beta, integers and bool use ialpha/ibeta. float32/float64 go to
 * BLAS; float16/bfloat16 compute in float32; integers accumulate in int64 (wrapping); bool is
 * the OR of ANDs. C must not overlap A or B.
 */
int fm_matmul(int dtype, int nbatch, const int64_t *bshape, int64_t m, int64_t n, int64_t k,
              intptr_t c, const int64_t *sc, intptr_t a, const int64_t *sa,
              intptr_t b, const int64_t *sb,
              double alpha, double beta, int64_t ialpha, int64_t ibeta);

/* one product without a batch, every argument a scalar (the cheapest call) */
int fm_mm(int dtype, int64_t m, int64_t n, int64_t k,
          intptr_t c, int64_t scm, int64_t scn, intptr_t a, int64_t sam, int64_t sak,
          intptr_t b, int64_t sbk, int64_t sbn,
          double alpha, double beta, int64_t ialpha, int64_t ibeta);

/* Products with a dimension above `limit` use the portable loop instead of BLAS (BLAS takes
   32-bit sizes). For tests; returns the previous limit. */
int64_t fm_matmul_set_blas_limit(int64_t limit);

int fm_blas_get_num_threads(void);
void fm_blas_set_num_threads(int n);

/* float32 C = alpha * A @ B + beta * C by fiamma's own AVX-512 kernel (sgemm.c); C row-major with
   leading dimension ldc, A and B of any strides; m, n, k > 0; split over nthreads threads.
   FM_ERR_OP when the CPU has no AVX-512 (use BLAS then). */
int fm_sgemm_available(void);
int fm_sgemm(int64_t m, int64_t n, int64_t k, double alpha, intptr_t a, int64_t sam, int64_t sak,
             intptr_t b, int64_t sbk, int64_t sbn, double beta, intptr_t c, int64_t ldc,
             int nthreads);
/* C = A @ B + bias, float32 on the own kernel: bias (n floats, contiguous) is added to every row
   of the row-major C (row stride ldc) as the tiles are stored, instead of being copied into C
   first. FM_ERR_OP where the own kernel does not take such a product (no AVX-512, or C with
   fewer than 32 columns); the caller then fills C and multiplies with beta = 1. */
int fm_sgemm_bias(int64_t m, int64_t n, int64_t k, intptr_t a, int64_t sam, int64_t sak,
                  intptr_t b, int64_t sbk, int64_t sbn, intptr_t bias, intptr_t c, int64_t ldc,
                  int nthreads);
/* the same as a matmul entry: takes it only where fm_mm would use the own kernel (size, thread
   count, fork state); FM_ERR_OP otherwise */
int fm_mm_bias_f32(int64_t m, int64_t n, int64_t k, intptr_t c, int64_t scm, intptr_t a,
                   int64_t sam, int64_t sak, intptr_t b, int64_t sbk, int64_t sbn, intptr_t bias);
