/* Elementwise kernels (elementwise.c): op codes and the entry points beyond fiamma_api.h's
 * fm_binary / fm_binary_contig / fm_unary*. cffi cdef-parsable: plain declarations and integer
 * #defines only. */

/* binary op codes (fm_binary, fm_binary_contig). Output dtype: the input dtype, or bool for the predicates
   (EQ..GE, LOGICAL_*, ISCLOSE). A dtype an op does not support returns FM_ERR_DTYPE; integer
   division / remainder by zero returns FM_ERR_VALUE (INT_MIN / -1 wraps). */
#define FM_BIN_ADD 0
#define FM_BIN_SUB 1
#define FM_BIN_MUL 2
#define FM_BIN_DIV 3
#define FM_BIN_EQ 4
#define FM_BIN_NE 5
#define FM_BIN_LT 6
#define FM_BIN_LE 7
#define FM_BIN_GT 8
#define FM_BIN_GE 9
#define FM_BIN_MAXIMUM 10
#define FM_BIN_MINIMUM 11
#define FM_BIN_FLOORDIV 12
#define FM_BIN_TRUNCDIV 13
#define FM_BIN_REMAINDER 14
#define FM_BIN_FMOD 15
#define FM_BIN_POW 16
#define FM_BIN_ATAN2 17
#define FM_BIN_HYPOT 18
#define FM_BIN_COPYSIGN 19
#define FM_BIN_FMAX 20
#define FM_BIN_FMIN 21
#define FM_BIN_LOGICAL_AND 22
#define FM_BIN_LOGICAL_OR 23
#define FM_BIN_LOGICAL_XOR 24
#define FM_BIN_BITAND 25
#define FM_BIN_BITOR 26
#define FM_BIN_BITXOR 27
#define FM_BIN_LSHIFT 28
#define FM_BIN_RSHIFT 29
#define FM_BIN_ISCLOSE 30 /* params: rtol, atol, equal_nan */
#define FM_BIN_ADD_ALPHA 31 /* a + p0 * b (floats) */
#define FM_NBINARY 64

/* unary op codes (fm_unary*); params p0..p2 where noted */
#define FM_UN_NEG 0
#define FM_UN_EXP 1
#define FM_UN_RELU 2
#define FM_UN_ABS 3
#define FM_UN_SIGN 4
#define FM_UN_EXP2 5
#define FM_UN_EXPM1 6
#define FM_UN_LOG 7
#define FM_UN_LOG2 8
#define FM_UN_LOG10 9
#define FM_UN_LOG1P 10
#define FM_UN_SQRT 11
#define FM_UN_RSQRT 12
#define FM_UN_SQUARE 13
#define FM_UN_RECIPROCAL 14
#define FM_UN_SIN 15
#define FM_UN_COS 16
#define FM_UN_TAN 17
#define FM_UN_ASIN 18
#define FM_UN_ACOS 19
#define FM_UN_ATAN 20
#define FM_UN_SINH 21
#define FM_UN_COSH 22
#define FM_UN_TANH 23
#define FM_UN_ASINH 24
#define FM_UN_ACOSH 25
#define FM_UN_ATANH 26
#define FM_UN_SIGMOID 27
#define FM_UN_ERF 28
#define FM_UN_ERFC 29
#define FM_UN_FLOOR 30
#define FM_UN_CEIL 31
#define FM_UN_ROUND 32
#define FM_UN_TRUNC 33
#define FM_UN_FRAC 34
#define FM_UN_ISNAN 35
#define FM_UN_ISINF 36
#define FM_UN_ISPOSINF 37
#define FM_UN_ISNEGINF 38
#define FM_UN_ISFINITE 39
#define FM_UN_SIGNBIT 40
#define FM_UN_NAN_TO_NUM 41 /* p0 nan, p1 posinf, p2 neginf */
#define FM_UN_LOGICAL_NOT 42
#define FM_UN_BITWISE_NOT 43
#define FM_UN_ROUND_DECIMALS 44 /* p0 = 10^|decimals|, p1 = 1 if decimals < 0 */
#define FM_UN_LOG_SIGMOID 45
#define FM_NUNARY 128

/* ternary op codes (fm_ternary): out = f(a, b, c) */
#define FM_TER_WHERE 0    /* a bool condition; b, c and out of dtype */
#define FM_TER_CLAMP 1    /* min(max(a, b), c), NaN propagating */
#define FM_TER_LERP 2     /* a + c * (b - a) (floats) */
#define FM_TER_ADDCMUL 3  /* a + p0 * b * c */
#define FM_TER_ADDCDIV 4  /* a + p0 * b / c (floats) */
#define FM_NTERNARY 16

/* Ternary op. b == 0 (resp. c == 0) means that operand is the scalar bf/bi (cf/ci), converted to
   dtype in C (bi/ci for integer dtypes and bool, bf/cf for floats) and read with stride 0; the
   strides sb/sc are then ignored (may be NULL). p0: op parameter (addcmul/addcdiv value). */
int fm_ternary(int op, int dtype, int ndim, const int64_t *shape,
               intptr_t out, const int64_t *sout,
               intptr_t a, const int64_t *sa,
               intptr_t b, const int64_t *sb,
               intptr_t c, const int64_t *sc,
               double bf, int64_t bi, double cf, int64_t ci, double p0);
int fm_ternary_out_dtype(int op, int dtype);
