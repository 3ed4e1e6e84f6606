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
