/* Elementwise unary and binary kernels over strided, broadcast operands.
 *
 * Each (op, dtype) pair is one inner loop, looked up in a table and run by fm_iterate. An inner
 * loop has a contiguous branch (vectorised by the compiler, one clone per ISA level), a branch
 * for a broadcast scalar operand (stride 0), and a generic strided branch. The 16-bit floats
 * compute in float. A NULL table entry means the op does not support that dtype (FM_ERR_DTYPE).
 */
#include "dtypes.h"
#include "fmath.h"

/* type-generic math: float for the 32- and 16-bit floats, double for float64 */
#define expf_or_exp(x) _Generic((x), float: fm_expf, default: exp)(x)

typedef struct {
    int status; /* set by a loop that meets an invalid value (e.g. integer division by zero) */
} bin_ctx;

/* ---- binary loop template -------------------------------------------------------------------
   NAME: op name, T: input dtype tag, O: output dtype tag, EXPR: the result from x and y (both of
   the compute type cp_T). */
#define DEF_BIN(NAME, T, O, EXPR)                                                              \
    FM_CLONES static void bin_##NAME##_##T(int64_t n, char **p, const int64_t *s,              \
                                           const void *ctx_) {                                \
        (void)ctx_;                                                                            \
        const int64_t so = sizeof(ct_##O), si = sizeof(ct_##T);                                \
        if (s[0] == so && s[1] == si && s[2] == si) {                                          \
            ct_##O *FM_RESTRICT out = (ct_##O *)p[0];                                          \
            const ct_##T *FM_RESTRICT a = (const ct_##T *)p[1];                                \
            const ct_##T *FM_RESTRICT b = (const ct_##T *)p[2];                                \
            for (int64_t k = 0; k < n; k++) {                                                  \
                cp_##T x = LD_##T(&a[k]), y = LD_##T(&b[k]);                                   \
                ST_##O(&out[k], (EXPR));                                                       \
            }                                                                                  \
        } else if (s[0] == so && s[1] == si && s[2] == 0) {                                    \
            ct_##O *FM_RESTRICT out = (ct_##O *)p[0];                                          \
            const ct_##T *FM_RESTRICT a = (const ct_##T *)p[1];                                \
            const cp_##T y = LD_##T(p[2]);                                                     \
            for (int64_t k = 0; k < n; k++) {                                                  \
                cp_##T x = LD_##T(&a[k]);                                                      \
                ST_##O(&out[k], (EXPR));                                                       \
            }                                                                                  \
        } else if (s[0] == so && s[1] == 0 && s[2] == si) {                                    \
            ct_##O *FM_RESTRICT out = (ct_##O *)p[0];                                          \
            const cp_##T x = LD_##T(p[1]);                                                     \
            const ct_##T *FM_RESTRICT b = (const ct_##T *)p[2];                                \
            for (int64_t k = 0; k < n; k++) {                                                  \
                cp_##T y = LD_##T(&b[k]);                                                      \
                ST_##O(&out[k], (EXPR));                                                       \
            }                                                                                  \
        } else {                                                                               \
            char *o = p[0];                                                                    \
            const char *a = p[1], *b = p[2];                                                   \
            for (int64_t k = 0; k < n; k++, o += s[0], a += s[1], b += s[2]) {                 \
                cp_##T x = LD_##T(a), y = LD_##T(b);                                           \
                ST_##O(o, (EXPR));                                                             \
            }                                                                                  \
        }                                                                                      \
    }

/* ---- unary loop template: P0..P2 are the op parameters (doubles) available to EXPR ---------- */
typedef struct {
    double p0, p1, p2;
} un_ctx;

#define DEF_UN(NAME, T, O, EXPR)                                                               \
    FM_CLONES static void un_##NAME##_##T(int64_t n, char **p, const int64_t *s,               \
                                          const void *ctx_) {                                 \
        const un_ctx *ctx = (const un_ctx *)ctx_;                                              \
        const double P0 = ctx->p0, P1 = ctx->p1, P2 = ctx->p2;                                 \
        (void)P0; (void)P1; (void)P2;                                                          \
        const int64_t so = sizeof(ct_##O), si = sizeof(ct_##T);                                \
        if (s[0] == so && s[1] == si) {                                                        \
            ct_##O *FM_RESTRICT out = (ct_##O *)p[0];                                          \
            const ct_##T *FM_RESTRICT a = (const ct_##T *)p[1];                                \
            for (int64_t k = 0; k < n; k++) {                                                  \
                cp_##T x = LD_##T(&a[k]);                                                      \
                ST_##O(&out[k], (EXPR));                                                       \
            }                                                                                  \
        } else {                                                                               \
            char *o = p[0];                                                                    \
            const char *a = p[1];                                                              \
            for (int64_t k = 0; k < n; k++, o += s[0], a += s[1]) {                            \
                cp_##T x = LD_##T(a);                                                          \
                ST_##O(o, (EXPR));                                                             \
            }                                                                                  \
        }                                                                                      \
    }

/* dtype lists for instantiating an op */
#define NUMERIC(X, NAME, EXPR) \
    X(NAME, u8, EXPR) X(NAME, i8, EXPR) X(NAME, i16, EXPR) X(NAME, i32, EXPR) X(NAME, i64, EXPR) \
    X(NAME, f16, EXPR) X(NAME, bf16, EXPR) X(NAME, f32, EXPR) X(NAME, f64, EXPR)
#define ALL(X, NAME, EXPR) X(NAME, b, EXPR) NUMERIC(X, NAME, EXPR)
#define FLOATS(X, NAME, EXPR) X(NAME, f16, EXPR) X(NAME, bf16, EXPR) X(NAME, f32, EXPR) X(NAME, f64, EXPR)

#define BIN_SAME(NAME, T, EXPR) DEF_BIN(NAME, T, T, EXPR)
#define BIN_BOOL(NAME, T, EXPR) DEF_BIN(NAME, T, b, EXPR)
#define UN_SAME(NAME, T, EXPR) DEF_UN(NAME, T, T, EXPR)

/* table rows: a function per dtype or NULL */
#define ROW_ALL(K, NAME) [K] = {bin_##NAME##_b, bin_##NAME##_u8, bin_##NAME##_i8, bin_##NAME##_i16, \
    bin_##NAME##_i32, bin_##NAME##_i64, bin_##NAME##_f16, bin_##NAME##_bf16, bin_##NAME##_f32,     \
    bin_##NAME##_f64}
#define ROW_NUMERIC(K, NAME) [K] = {NULL, bin_##NAME##_u8, bin_##NAME##_i8, bin_##NAME##_i16,       \
    bin_##NAME##_i32, bin_##NAME##_i64, bin_##NAME##_f16, bin_##NAME##_bf16, bin_##NAME##_f32,     \
    bin_##NAME##_f64}
#define ROW_FLOATS(K, NAME) [K] = {NULL, NULL, NULL, NULL, NULL, NULL, bin_##NAME##_f16,            \
    bin_##NAME##_bf16, bin_##NAME##_f32, bin_##NAME##_f64}
#define UROW_ALL(K, NAME) [K] = {un_##NAME##_b, un_##NAME##_u8, un_##NAME##_i8, un_##NAME##_i16,   \
    un_##NAME##_i32, un_##NAME##_i64, un_##NAME##_f16, un_##NAME##_bf16, un_##NAME##_f32,          \
    un_##NAME##_f64}
#define UROW_NUMERIC(K, NAME) [K] = {NULL, un_##NAME##_u8, un_##NAME##_i8, un_##NAME##_i16,         \
    un_##NAME##_i32, un_##NAME##_i64, un_##NAME##_f16, un_##NAME##_bf16, un_##NAME##_f32,          \
    un_##NAME##_f64}
#define UROW_FLOATS(K, NAME) [K] = {NULL, NULL, NULL, NULL, NULL, NULL, un_##NAME##_f16,            \
    un_##NAME##_bf16, un_##NAME##_f32, un_##NAME##_f64}

/* ---- binary ops ---- */
ALL(BIN_SAME, add, x + y)
ALL(BIN_SAME, sub, x - y)
ALL(BIN_SAME, mul, x * y)
FLOATS(BIN_SAME, div, x / y)
ALL(BIN_BOOL, eq, x == y)
ALL(BIN_BOOL, ne, x != y)
ALL(BIN_BOOL, lt, x < y)
ALL(BIN_BOOL, le, x <= y)
ALL(BIN_BOOL, gt, x > y)
ALL(BIN_BOOL, ge, x >= y)
/* maximum/minimum propagate NaN (x != x is false for integers and folds away) */
ALL(BIN_SAME, maximum, (x != x || x > y) ? x : y)
ALL(BIN_SAME, minimum, (x != x || x < y) ? x : y)

static const fm_inner_fn bin_table[FM_NBINARY][FM_NDTYPES] = {
    ROW_ALL(FM_BIN_ADD, add),
    ROW_ALL(FM_BIN_SUB, sub),
    ROW_ALL(FM_BIN_MUL, mul),
    ROW_FLOATS(FM_BIN_DIV, div),
    ROW_ALL(FM_BIN_EQ, eq),
    ROW_ALL(FM_BIN_NE, ne),
    ROW_ALL(FM_BIN_LT, lt),
    ROW_ALL(FM_BIN_LE, le),
    ROW_ALL(FM_BIN_GT, gt),
    ROW_ALL(FM_BIN_GE, ge),
    ROW_ALL(FM_BIN_MAXIMUM, maximum),
    ROW_ALL(FM_BIN_MINIMUM, minimum),
};

/* ops whose output is bool */
static int bin_is_predicate(int op) { return op >= FM_BIN_EQ && op <= FM_BIN_GE; }

/* ---- unary ops ---- */
NUMERIC(UN_SAME, neg, -x)
FLOATS(UN_SAME, exp, expf_or_exp(x))
NUMERIC(UN_SAME, relu, x > 0 ? x : 0)

static const fm_inner_fn un_table[FM_NUNARY][FM_NDTYPES] = {
    UROW_NUMERIC(FM_UN_NEG, neg),
    UROW_FLOATS(FM_UN_EXP, exp),
    UROW_NUMERIC(FM_UN_RELU, relu),
};

static int un_out_dtype(int op, int dtype) {
    (void)op;
    return dtype;
}

/* ---- entry points ---- */
int fm_binary_out_dtype(int op, int dtype) {
    if (op < 0 || op >= FM_NBINARY || !fm_dtype_ok(dtype)) return -1;
    if (!bin_table[op][dtype]) return -1;
    return bin_is_predicate(op) ? FM_BOOL : dtype;
}

static int bin_lookup(int op, int dtype, fm_inner_fn *fn, int *isz) {
    if (op < 0 || op >= FM_NBINARY) return FM_ERR_OP;
    if (!fm_dtype_ok(dtype)) return FM_ERR_DTYPE;
    *fn = bin_table[op][dtype];
    if (!*fn) return FM_ERR_DTYPE;
    isz[0] = bin_is_predicate(op) ? 1 : fm_itemsize[dtype];
    isz[1] = isz[2] = fm_itemsize[dtype];
    return FM_OK;
}

int fm_binary(int op, int dtype, int ndim, const int64_t *shape, intptr_t out,
              const int64_t *sout, intptr_t a, const int64_t *sa, intptr_t b, const int64_t *sb) {
    fm_inner_fn fn;
    int isz[3];
    int rc = bin_lookup(op, dtype, &fn, isz);
    if (rc) return rc;
    char *base[3] = {(char *)out, (char *)a, (char *)b};
    const int64_t *st[3] = {sout, sa, sb};
    bin_ctx ctx = {FM_OK};
    rc = fm_iterate(3, ndim, shape, base, st, isz, fn, &ctx);
    return rc ? rc : ctx.status;
}

int fm_binary_scalar(int op, int dtype, int ndim, const int64_t *shape, intptr_t out,
                     const int64_t *sout, intptr_t a, const int64_t *sa, double sf, int64_t si,
                     int scalar_first) {
    fm_inner_fn fn;
    int isz[3];
    int rc = bin_lookup(op, dtype, &fn, isz);
    if (rc) return rc;
    if (ndim < 0 || ndim > FM_MAX_DIMS) return FM_ERR_NDIM;
    _Alignas(8) char buf[8];
    fm_scalar_bytes(dtype, sf, si, !fm_is_float(dtype), buf);
    int64_t zeros[FM_MAX_DIMS] = {0};
    char *base[3];
    const int64_t *st[3];
    base[0] = (char *)out;
    st[0] = sout;
    if (scalar_first) {
        base[1] = buf; st[1] = zeros; base[2] = (char *)a; st[2] = sa;
    } else {
        base[1] = (char *)a; st[1] = sa; base[2] = buf; st[2] = zeros;
    }
    bin_ctx ctx = {FM_OK};
    rc = fm_iterate(3, ndim, shape, base, st, isz, fn, &ctx);
    return rc ? rc : ctx.status;
}

int fm_binary_contig(int op, int dtype, int64_t n, intptr_t out, intptr_t a, intptr_t b) {
    fm_inner_fn fn;
    int isz[3];
    int rc = bin_lookup(op, dtype, &fn, isz);
    if (rc) return rc;
    if (n < 0) return FM_ERR_ARG;
    if (n == 0) return FM_OK;
    char *base[3] = {(char *)out, (char *)a, (char *)b};
    int64_t s[3] = {isz[0], isz[1], isz[2]};
    bin_ctx ctx = {FM_OK};
    fn(n, base, s, &ctx);
    return ctx.status;
}

int fm_unary_out_dtype(int op, int dtype) {
    if (op < 0 || op >= FM_NUNARY || !fm_dtype_ok(dtype)) return -1;
    if (!un_table[op][dtype]) return -1;
    return un_out_dtype(op, dtype);
}

int fm_unary(int op, int dtype, int ndim, const int64_t *shape, intptr_t out,
             const int64_t *sout, intptr_t a, const int64_t *sa, double p0, double p1, double p2) {
    int od = fm_unary_out_dtype(op, dtype);
    if (od < 0) return (op < 0 || op >= FM_NUNARY) ? FM_ERR_OP : FM_ERR_DTYPE;
    char *base[2] = {(char *)out, (char *)a};
    const int64_t *st[2] = {sout, sa};
    int isz[2] = {fm_itemsize[od], fm_itemsize[dtype]};
    un_ctx ctx = {p0, p1, p2};
    return fm_iterate(2, ndim, shape, base, st, isz, un_table[op][dtype], &ctx);
}

int fm_unary_contig(int op, int dtype, int64_t n, intptr_t out, intptr_t a) {
    int od = fm_unary_out_dtype(op, dtype);
    if (od < 0) return (op < 0 || op >= FM_NUNARY) ? FM_ERR_OP : FM_ERR_DTYPE;
    if (n < 0) return FM_ERR_ARG;
    if (n == 0) return FM_OK;
    char *base[2] = {(char *)out, (char *)a};
    int64_t s[2] = {fm_itemsize[od], fm_itemsize[dtype]};
    un_ctx ctx = {0, 0, 0};
    un_table[op][dtype](n, base, s, &ctx);
    return FM_OK;
}
