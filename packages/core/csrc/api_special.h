/* Special functions (special.c): elementwise over strided operands of one float dtype.
 * cffi cdef-parsable: plain declarations and integer #defines only.
 *
 * Every op computes in double and rounds once to the operand dtype (float16, bfloat16, float32,
 * float64; other dtypes return FM_ERR_DTYPE: Python promotes integers to a float dtype first).
 * out, a (and b) all have dtype `dtype`; shapes are already broadcast (stride 0 allowed). */

/* unary op codes (fm_special_unary); p0 is the op parameter where noted */
#define FM_SP_LGAMMA 0
#define FM_SP_DIGAMMA 1
#define FM_SP_POLYGAMMA 2   /* p0 = n (integer >= 0) */
#define FM_SP_ERFINV 3
#define FM_SP_ERFCX 4
#define FM_SP_LOGIT 5       /* p0 = eps; eps < 0 means no clamping */
#define FM_SP_SINC 6
#define FM_SP_I0 7
#define FM_SP_I0E 8
#define FM_SP_I1 9
#define FM_SP_I1E 10
#define FM_SP_NDTR 11
#define FM_SP_NDTRI 12
#define FM_SP_LOG_NDTR 13
#define FM_SP_ENTR 14
#define FM_SP_MULTIGAMMALN 15 /* p0 = p (integer >= 1) */
#define FM_SP_ERFCINV 16
#define FM_SP_NUNARY 17

/* binary op codes (fm_special_binary) */
#define FM_SP_XLOGY 0
#define FM_SP_XLOG1PY 1
#define FM_SP_LOGADDEXP 2
#define FM_SP_LOGADDEXP2 3
#define FM_SP_ZETA 4        /* Hurwitz zeta(a, b) */
#define FM_SP_GAMMAINC 5    /* regularized lower incomplete gamma P(a, x) */
#define FM_SP_GAMMAINCC 6   /* regularized upper incomplete gamma Q(a, x) = 1 - P(a, x) */
#define FM_SP_NBINARY 7

int fm_special_unary(int op, int dtype, int ndim, const int64_t *shape,
                     intptr_t out, const int64_t *sout, intptr_t a, const int64_t *sa,
                     double p0);
int fm_special_binary(int op, int dtype, int ndim, const int64_t *shape,
                      intptr_t out, const int64_t *sout,
                      intptr_t a, const int64_t *sa, intptr_t b, const int64_t *sb);
/* one value in double (for tests and scalar use) */
double fm_special_scalar(int op, double x, double p0);
