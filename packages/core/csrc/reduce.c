/* Reductions over strided tensors (sum, prod, max, var, norm, logsumexp, argmax, ...).
 *
 * A call is planned once: dimensions of size 1 are dropped, the reduced dimensions are sorted by
 * stride and merged where they are contiguous, the kept dimensions likewise. Two loop shapes then
 * cover every layout:
 *   rows:  each output reduces the rows of its reduced sub-space (the innermost reduced
 *          dimension, contiguous or strided); row results are combined pairwise;
 *   outer: when the innermost kept dimension is contiguous in the input (sum(0) of a row-major
 *          matrix), a chunk of adjacent outputs is accumulated as a vector, one input row at a
 *          time, so the loads stay contiguous and vectorise along the kept dimension.
 * The type-specific pieces (row reducer, vector step, finalisation) are generated per
 * (accumulation kind, dtype) by one template and reached through a small table (red_vt), so the
 * drivers are written once. Floating sums accumulate in float (16/32-bit) or double with blocked
 * pairwise summation; integer sums in uint64 arithmetic (wraps like int64, without UB).
 * Threads only for large inputs, decided by a plain `if` before any parallel region.
 */
#include <pthread.h>
#include <stdlib.h>
#include <omp.h>

#include "dtypes.h"
#include "api_reduce.h"

#define RED_LANES 32            /* independent accumulators in a row reducer (the tree
                                   reduction in DEF_KIND is written out for 32) */
#define RED_BLOCK 2048          /* elements per pairwise leaf */
#define RED_CH 4096             /* outer shape: adjacent outputs per chunk */
#define RED_OB 128              /* outer shape: rows per block of a blocked sum */
#define RED_ARG_BLK 512         /* argmax: elements per block maximum */
#define RED_PAR_MIN (1 << 17)   /* elements: below this, never use threads */

/* one accumulator of any kind (float, double, uint64, uint8, or a (value, index) pair) */
typedef union {
    double d;
    uint64_t u;
    unsigned char raw[16];
} acc_u;

/* the type-specific pieces of one (op, dtype) */
typedef struct {
    int odt;     /* output dtype code */
    int hasc;    /* reads a per-output centre from aux */
    int blocked; /* outer shape: accumulate blocks of rows separately (sums) */
    void (*row)(const char *p, int64_t n, int64_t bs, const acc_u *c, acc_u *res, int64_t i0,
                double P);
    void (*init)(acc_u *a);
    void (*comb)(acc_u *a, const acc_u *b);
    void (*fin)(const acc_u *a, int64_t R, double P, const acc_u *c, char *out, char *aux);
    void (*ldc)(acc_u *c, const char *aux);
    void (*vinit)(void *acc, int64_t k);
    void (*vec)(void *acc, const char *x, int64_t k, const void *c, int64_t r, double P);
    void (*vcomb)(void *acc, const void *b, int64_t k);
    void (*vfin)(const void *acc, int64_t k, int64_t R, double P, const void *c, char *out,
                 int64_t os, char *aux, int64_t as);
    void (*vldc)(void *c, const char *aux, int64_t k, int64_t as);
} red_vt;

/* fm_expf's algorithm (fmath.h) rewritten so that GCC vectorises it without -ffast-math: the
   clamps are compare-selects (fminf/fmaxf are calls there), rounding uses the 1.5 * 2^23 trick
   (n comes out of the sum's low mantissa bits), and plain a * b + c contracts to FMA. */
static inline float red_pow2i(int32_t n) {
    uint32_t bits = (uint32_t)(n + 127) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline __attribute__((always_inline)) float red_expf(float x) {
    float xc = x < -104.0f ? -104.0f : x;
    xc = xc > 89.0f ? 89.0f : xc;
    float t = xc * 1.44269504088896341f + 12582912.0f;
    float n = t - 12582912.0f;
    int32_t ni;
    memcpy(&ni, &t, 4);
    ni -= 0x4b400000;
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    int32_t n1 = ni >> 1;
    float res = p * red_pow2i(n1) * red_pow2i(ni - n1);
    return x != x ? x : res;
}

/* NaN-propagating max/min (b != b is false for integers and folds away) */
#define RED_MAXN(a, b) (((b) != (b) || (b) > (a)) ? (b) : (a))
#define RED_MINN(a, b) (((b) != (b) || (b) < (a)) ? (b) : (a))
/* type-generic float math: float for the 16/32-bit floats, double for float64 */
#define RED_ABS(x) _Generic((x), float: fabsf, double: fabs)(x)
#define RED_SQRT(x) _Generic((x), float: sqrtf, default: sqrt)(x)
#define RED_LOG(x) _Generic((x), float: logf, default: log)(x)
#define RED_EXP(x) _Generic((x), float: red_expf, default: exp)(x)
#define RED_POW(x, y) _Generic((x), float: powf, default: pow)(x, y)

#define LOWEST_b 0
#define LOWEST_u8 0
#define LOWEST_i8 INT8_MIN
#define LOWEST_i16 INT16_MIN
#define LOWEST_i32 INT32_MIN
#define LOWEST_i64 INT64_MIN
#define LOWEST_f16 (-INFINITY)
#define LOWEST_bf16 (-INFINITY)
#define LOWEST_f32 (-INFINITY)
#define LOWEST_f64 (-INFINITY)
#define LOWEST_u16 0
#define LOWEST_u32 0
#define LOWEST_u64 0
#define HIGHEST_b 1
#define HIGHEST_u8 UINT8_MAX
#define HIGHEST_i8 INT8_MAX
#define HIGHEST_i16 INT16_MAX
#define HIGHEST_i32 INT32_MAX
#define HIGHEST_i64 INT64_MAX
#define HIGHEST_f16 INFINITY
#define HIGHEST_bf16 INFINITY
#define HIGHEST_f32 INFINITY
#define HIGHEST_f64 INFINITY
#define HIGHEST_u16 UINT16_MAX
#define HIGHEST_u32 UINT32_MAX
#define HIGHEST_u64 UINT64_MAX

/* (CODE_<tag>: dtypes.h) */

/* ---- per-kind element maps and combiners ------------------------------------------------------
   INIT_K(T, AT): identity, MAP_K(AT, x, c): element x (compute type) -> accumulator (c: centre),
   COMB_K(a, b): combine two accumulators (a holds the earlier elements). */
#define INIT_SUM(T, AT) ((AT)0)
#define MAP_SUM(AT, x, c) ((AT)(x))
#define COMB_SUM(a, b) ((a) + (b))

#define INIT_NANSUM(T, AT) ((AT)0)
#define MAP_NANSUM(AT, x, c) ((x) != (x) ? (AT)0 : (AT)(x))
#define COMB_NANSUM(a, b) ((a) + (b))

#define INIT_PROD(T, AT) ((AT)1)
#define MAP_PROD(AT, x, c) ((AT)(x))
#define COMB_PROD(a, b) ((a) * (b))

#define INIT_MAX(T, AT) ((AT)LOWEST_##T)
#define MAP_MAX(AT, x, c) (x)
#define COMB_MAX(a, b) RED_MAXN(a, b)

#define INIT_MIN(T, AT) ((AT)HIGHEST_##T)
#define MAP_MIN(AT, x, c) (x)
#define COMB_MIN(a, b) RED_MINN(a, b)

#define INIT_ALL(T, AT) ((AT)1)
#define MAP_ALL(AT, x, c) ((AT)((x) != 0))
#define COMB_ALL(a, b) ((a) & (b))

#define INIT_ANY(T, AT) ((AT)0)
#define MAP_ANY(AT, x, c) ((AT)((x) != 0))
#define COMB_ANY(a, b) ((a) | (b))

#define INIT_CNZ(T, AT) ((AT)0)
#define MAP_CNZ(AT, x, c) ((AT)((x) != 0))
#define COMB_CNZ(a, b) ((a) + (b))

#define INIT_NANCNT(T, AT) ((AT)0)
#define MAP_NANCNT(AT, x, c) ((AT)((x) == (x)))
#define COMB_NANCNT(a, b) ((a) + (b))

#define INIT_ABSSUM(T, AT) ((AT)0)
#define MAP_ABSSUM(AT, x, c) ((AT)RED_ABS(x))
#define COMB_ABSSUM(a, b) ((a) + (b))

#define INIT_SQSUM(T, AT) ((AT)0)
#define MAP_SQSUM(AT, x, c) ((AT)(x) * (AT)(x))
#define COMB_SQSUM(a, b) ((a) + (b))

#define INIT_POWSUM(T, AT) ((AT)0)
#define MAP_POWSUM(AT, x, c) RED_POW((AT)RED_ABS(x), (AT)P)
#define COMB_POWSUM(a, b) ((a) + (b))

#define INIT_ABSMAX(T, AT) ((AT)0)
#define MAP_ABSMAX(AT, x, c) ((AT)RED_ABS(x))
#define COMB_ABSMAX(a, b) RED_MAXN(a, b)

#define INIT_ABSMIN(T, AT) ((AT)INFINITY)
#define MAP_ABSMIN(AT, x, c) ((AT)RED_ABS(x))
#define COMB_ABSMIN(a, b) RED_MINN(a, b)

#define INIT_SQDEV(T, AT) ((AT)0)
#define MAP_SQDEV(AT, x, c) (((AT)(x) - (c)) * ((AT)(x) - (c)))
#define COMB_SQDEV(a, b) ((a) + (b))

#define INIT_EXPSUM(T, AT) ((AT)0)
#define MAP_EXPSUM(AT, x, c) RED_EXP((AT)(x) - (c))
#define COMB_EXPSUM(a, b) ((a) + (b))

/* kinds whose row reducer runs twice the lanes */
#define WIDE_SUM 0
#define WIDE_NANSUM 0
#define WIDE_PROD 0
#define WIDE_MAX 1
#define WIDE_MIN 1
#define WIDE_ALL 0
#define WIDE_ANY 0
#define WIDE_CNZ 0
#define WIDE_NANCNT 0
#define WIDE_ABSSUM 0
#define WIDE_SQSUM 0
#define WIDE_POWSUM 0
#define WIDE_ABSMAX 1
#define WIDE_ABSMIN 1
#define WIDE_SQDEV 0
#define WIDE_EXPSUM 0

/* the centre as read from aux: logsumexp shifts by the max unless it is infinite */
#define CFIX_SQDEV(v) (v)
#define CFIX_EXPSUM(v) (isinf(v) ? 0 : (v))
#define CFIX_NONE(v) (v)

/* ---- finalisation per op: a (accumulator), R (reduced count), P (parameter), c (centre) ----- */
static inline double red_dof(int64_t R, double corr) {
    double d = (double)R - corr;
    return d > 0 ? d : 0;
}
#define FIN_PLAIN(AT, a, R, P, c) (a)
#define FIN_MEAN(AT, a, R, P, c) ((a) / (AT)(R))
#define FIN_NORM2(AT, a, R, P, c) RED_SQRT(a)
#define FIN_NORMP(AT, a, R, P, c) RED_POW(a, (AT)(1.0 / (P)))
#define FIN_VAR(AT, a, R, P, c) ((a) / (AT)red_dof(R, P))
#define FIN_STD(AT, a, R, P, c) RED_SQRT((a) / (AT)red_dof(R, P))
#define FIN_LSE(AT, a, R, P, c) (RED_LOG(a) + (c))

/* ---- template: the type-specific pieces of one accumulation kind ------------------------------ */
#define DEF_KIND(T, KN, AT, HASC, CFIX, CL)                                                         \
    static inline __attribute__((always_inline)) AT leaf_##KN##_##T(const char *p, int64_t m,       \
                                                                    int64_t bs, AT c, double P) {   \
        (void)c; (void)P;                                                                           \
        AT acc[RED_LANES];                                                                          \
        for (int j = 0; j < RED_LANES; j++) acc[j] = INIT_##KN(T, AT);                              \
        int64_t i = 0;                                                                              \
        if (bs == (int64_t)sizeof(ct_##T)) {                                                        \
            const ct_##T *FM_RESTRICT x = (const ct_##T *)p;                                        \
            if (WIDE_##KN) { /* twice the lanes: max/min are latency-bound on data in cache */     \
                AT acc2[RED_LANES];                                                                 \
                for (int j = 0; j < RED_LANES; j++) acc2[j] = INIT_##KN(T, AT);                     \
                for (; i + 2 * RED_LANES <= m; i += 2 * RED_LANES) {                                \
                    for (int j = 0; j < RED_LANES; j++)                                             \
                        acc[j] = COMB_##KN(acc[j], MAP_##KN(AT, LD_##T(&x[i + j]), c));             \
                    for (int j = 0; j < RED_LANES; j++)                                             \
                        acc2[j] = COMB_##KN(acc2[j],                                                \
                                            MAP_##KN(AT, LD_##T(&x[i + RED_LANES + j]), c));        \
                }                                                                                   \
                for (int j = 0; j < RED_LANES; j++) acc[j] = COMB_##KN(acc[j], acc2[j]);            \
            }                                                                                       \
            for (; i + RED_LANES <= m; i += RED_LANES)                                              \
                for (int j = 0; j < RED_LANES; j++)                                                 \
                    acc[j] = COMB_##KN(acc[j], MAP_##KN(AT, LD_##T(&x[i + j]), c));                 \
            for (; i + 8 <= m; i += 8)                                                              \
                for (int j = 0; j < 8; j++)                                                         \
                    acc[j] = COMB_##KN(acc[j], MAP_##KN(AT, LD_##T(&x[i + j]), c));                 \
            for (; i < m; i++) acc[0] = COMB_##KN(acc[0], MAP_##KN(AT, LD_##T(&x[i]), c));          \
        } else {                                                                                    \
            for (; i + 2 <= m; i += 2) {                                                            \
                acc[0] = COMB_##KN(acc[0], MAP_##KN(AT, LD_##T(p + i * bs), c));                    \
                acc[1] = COMB_##KN(acc[1], MAP_##KN(AT, LD_##T(p + (i + 1) * bs), c));              \
            }                                                                                       \
            for (; i < m; i++) acc[0] = COMB_##KN(acc[0], MAP_##KN(AT, LD_##T(p + i * bs), c));     \
        }                                                                                           \
        /* constant trip counts so each halving step is one vector op */                            \
        for (int j = 0; j < 16; j++) acc[j] = COMB_##KN(acc[j], acc[j + 16]);                       \
        for (int j = 0; j < 8; j++) acc[j] = COMB_##KN(acc[j], acc[j + 8]);                         \
        for (int j = 0; j < 4; j++) acc[j] = COMB_##KN(acc[j], acc[j + 4]);                         \
        for (int j = 0; j < 2; j++) acc[j] = COMB_##KN(acc[j], acc[j + 2]);                         \
        return COMB_##KN(acc[0], acc[1]);                                                           \
    }                                                                                               \
    /* blocks of RED_BLOCK combined pairwise (a binary counter over a stack of partials) */         \
    CL static void row_##KN##_##T(const char *p, int64_t n, int64_t bs, const acc_u *cu,            \
                                         acc_u *res, int64_t i0, double P) {                        \
        (void)i0;                                                                                   \
        AT c = (AT)0, stk[64];                                                                      \
        if (HASC) memcpy(&c, cu, sizeof(AT));                                                       \
        int top = 0;                                                                                \
        int64_t cnt = 0, b0 = 0;                                                                    \
        do {                                                                                        \
            int64_t m = n - b0 < RED_BLOCK ? n - b0 : RED_BLOCK;                                    \
            AT v = leaf_##KN##_##T(p + b0 * bs, m, bs, c, P);                                       \
            for (int64_t t = ++cnt; !(t & 1); t >>= 1) {                                            \
                AT u = stk[--top]; /* COMB may evaluate its arguments twice */                      \
                v = COMB_##KN(u, v);                                                                \
            }                                                                                       \
            stk[top++] = v;                                                                         \
            b0 += m;                                                                                \
        } while (b0 < n);                                                                           \
        AT r = stk[0];                                                                              \
        for (int k = 1; k < top; k++) r = COMB_##KN(r, stk[k]);                                     \
        memcpy(res, &r, sizeof(AT));                                                                \
    }                                                                                               \
    CL static void vec_##KN##_##T(void *accv, const char *xp, int64_t k, const void *cv,            \
                                         int64_t r, double P) {                                     \
        (void)r; (void)P;                                                                           \
        AT *FM_RESTRICT acc = (AT *)accv;                                                           \
        const ct_##T *FM_RESTRICT x = (const ct_##T *)xp;                                           \
        const AT *FM_RESTRICT cc = (const AT *)cv;                                                  \
        (void)cc;                                                                                   \
        for (int64_t j = 0; j < k; j++)                                                             \
            acc[j] = COMB_##KN(acc[j], MAP_##KN(AT, LD_##T(&x[j]), (HASC ? cc[j] : (AT)0)));        \
    }                                                                                               \
    CL static void vcomb_##KN##_##T(void *accv, const void *bv, int64_t k) {                        \
        AT *FM_RESTRICT acc = (AT *)accv;                                                           \
        const AT *FM_RESTRICT b = (const AT *)bv;                                                   \
        for (int64_t j = 0; j < k; j++) acc[j] = COMB_##KN(acc[j], b[j]);                           \
    }                                                                                               \
    static void vinit_##KN##_##T(void *accv, int64_t k) {                                           \
        AT *acc = (AT *)accv;                                                                       \
        for (int64_t j = 0; j < k; j++) acc[j] = INIT_##KN(T, AT);                                  \
    }                                                                                               \
    static void vldc_##KN##_##T(void *cv, const char *aux, int64_t k, int64_t as) {                 \
        AT *c = (AT *)cv;                                                                           \
        for (int64_t j = 0; j < k; j++) {                                                           \
            AT v;                                                                                   \
            memcpy(&v, aux + j * as, sizeof(AT));                                                   \
            c[j] = CFIX(v);                                                                         \
        }                                                                                           \
    }                                                                                               \
    static void init_##KN##_##T(acc_u *a) {                                                         \
        AT v = INIT_##KN(T, AT);                                                                    \
        memcpy(a, &v, sizeof(AT));                                                                  \
    }                                                                                               \
    static void comb_##KN##_##T(acc_u *a, const acc_u *b) {                                         \
        AT x, y;                                                                                    \
        memcpy(&x, a, sizeof(AT));                                                                  \
        memcpy(&y, b, sizeof(AT));                                                                  \
        x = COMB_##KN(x, y);                                                                        \
        memcpy(a, &x, sizeof(AT));                                                                  \
    }                                                                                               \
    static void ldc_##KN##_##T(acc_u *c, const char *aux) {                                         \
        AT v;                                                                                       \
        memcpy(&v, aux, sizeof(AT));                                                                \
        v = CFIX(v);                                                                                \
        memcpy(c, &v, sizeof(AT));                                                                  \
    }

/* finalisation and the table entry of one op (a kind plus a finaliser and an output dtype) */
#define DEF_OP(T, OP, KN, AT, O, HASC, BLOCKED, FIN)                                                \
    static void fin_##OP##_##T(const acc_u *au, int64_t R, double P, const acc_u *cu, char *out,    \
                               char *aux) {                                                         \
        (void)R; (void)P; (void)aux;                                                                \
        AT a, c = (AT)0;                                                                            \
        memcpy(&a, au, sizeof(AT));                                                                 \
        if (HASC) memcpy(&c, cu, sizeof(AT));                                                       \
        (void)c;                                                                                    \
        ST_##O(out, FIN(AT, a, R, P, c));                                                           \
    }                                                                                               \
    static void vfin_##OP##_##T(const void *accv, int64_t k, int64_t R, double P,                   \
                                const void *cv, char *out, int64_t os, char *aux, int64_t as) {     \
        (void)R; (void)P; (void)aux; (void)as;                                                      \
        const AT *acc = (const AT *)accv, *cc = (const AT *)cv;                                     \
        (void)cc;                                                                                   \
        for (int64_t j = 0; j < k; j++) {                                                           \
            AT a = acc[j], c = HASC ? cc[j] : (AT)0;                                                \
            (void)c;                                                                                \
            ST_##O(out + j * os, FIN(AT, a, R, P, c));                                              \
        }                                                                                           \
    }                                                                                               \
    static const red_vt vt_##OP##_##T = {                                                           \
        CODE_##O, HASC, BLOCKED, row_##KN##_##T, init_##KN##_##T, comb_##KN##_##T,                  \
        fin_##OP##_##T, ldc_##KN##_##T, vinit_##KN##_##T, vec_##KN##_##T, vcomb_##KN##_##T,         \
        vfin_##OP##_##T, vldc_##KN##_##T};

/* ---- argmax / argmin: (value, index) accumulators; the first occurrence wins ties, the first
   NaN wins over everything (NaN propagates like max) ----------------------------------------- */
#define BETTER_ARGMAX(v, b) ((v) > (b) || ((v) != (v) && (b) == (b)))
#define BETTER_ARGMIN(v, b) ((v) < (b) || ((v) != (v) && (b) == (b)))

#define DEF_ARG(T, OP, KN)                                                                          \
    FM_CLONES static void row_##OP##_##T(const char *p, int64_t n, int64_t bs, const acc_u *cu,     \
                                         acc_u *res, int64_t i0, double P) {                        \
        (void)cu; (void)P;                                                                          \
        arg_##T r;                                                                                  \
        r.v = INIT_##KN(T, cp_##T);                                                                 \
        r.i = i0;                                                                                   \
        if (n > 0 && bs == (int64_t)sizeof(ct_##T)) {                                               \
            /* one vectorised pass of block maxima remembers the first block holding the            \
               extreme (or the first NaN); only that block is then searched */                      \
            const ct_##T *FM_RESTRICT x = (const ct_##T *)p;                                        \
            cp_##T m = INIT_##KN(T, cp_##T);                                                        \
            int64_t b0 = 0;                                                                         \
            for (int64_t s0 = 0; s0 < n; s0 += RED_ARG_BLK) {                                       \
                int64_t len = n - s0 < RED_ARG_BLK ? n - s0 : RED_ARG_BLK;                          \
                cp_##T mb = leaf_##KN##_##T((const char *)(x + s0), len, bs, (cp_##T)0, 0.0);       \
                if (BETTER_##OP(mb, m)) {                                                           \
                    m = mb;                                                                         \
                    b0 = s0;                                                                        \
                }                                                                                   \
            }                                                                                       \
            int64_t e = n - b0 < RED_ARG_BLK ? n : b0 + RED_ARG_BLK;                                \
            /* the first index in that block holding m: a min over matching offsets (a              \
               branch-free reduction that vectorises; an early-exit search does not) */             \
            const ct_##T *FM_RESTRICT xb = x + b0;                                                  \
            int64_t len = e - b0, k = 0;                                                           \
            if (m != m) {                                                                           \
                for (; k < len; k++)                                                                \
                    if (LD_##T(&xb[k]) != LD_##T(&xb[k])) break;                                    \
            } else {                                                                                \
                /* int32 lane offsets stepping as a vector, int64 counters: the build uses        \
                   -fwrapv, under which GCC does not vectorise int32 index arithmetic */          \
                int32_t pos[32], off[32];                                                           \
                for (int j = 0; j < 32; j++) {                                                      \
                    pos[j] = INT32_MAX;                                                             \
                    off[j] = j;                                                                     \
                }                                                                                   \
                for (; k + 32 <= len; k += 32)                                                      \
                    for (int j = 0; j < 32; j++) {                                                  \
                        int32_t q = LD_##T(&xb[k + j]) == m ? off[j] : INT32_MAX;                   \
                        pos[j] = q < pos[j] ? q : pos[j];                                           \
                        off[j] += 32;                                                               \
                    }                                                                               \
                for (int j = 0; j < 16; j++) pos[j] = pos[j + 16] < pos[j] ? pos[j + 16] : pos[j];  \
                for (int j = 0; j < 8; j++) pos[j] = pos[j + 8] < pos[j] ? pos[j + 8] : pos[j];     \
                for (int j = 0; j < 4; j++) pos[j] = pos[j + 4] < pos[j] ? pos[j + 4] : pos[j];     \
                for (int j = 0; j < 2; j++) pos[j] = pos[j + 2] < pos[j] ? pos[j + 2] : pos[j];     \
                int32_t first = pos[1] < pos[0] ? pos[1] : pos[0];                                  \
                if (first != INT32_MAX)                                                             \
                    k = first;                                                                      \
                else                                                                                \
                    for (; k < len; k++)                                                            \
                        if (LD_##T(&xb[k]) == m) break;                                             \
            }                                                                                       \
            r.v = m;                                                                                \
            r.i = i0 + b0 + (k < len ? k : 0);                                                      \
        } else {                                                                                    \
            for (int64_t i = 0; i < n; i++) {                                                       \
                cp_##T v = LD_##T(p + i * bs);                                                      \
                if (BETTER_##OP(v, r.v)) {                                                          \
                    r.v = v;                                                                        \
                    r.i = i0 + i;                                                                   \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
        memcpy(res, &r, sizeof r);                                                                  \
    }                                                                                               \
    FM_CLONES static void vec_##OP##_##T(void *accv, const char *xp, int64_t k, const void *cv,     \
                                         int64_t r, double P) {                                     \
        (void)cv; (void)P;                                                                          \
        cp_##T *FM_RESTRICT val = (cp_##T *)accv;                                                   \
        int64_t *FM_RESTRICT idx = (int64_t *)((char *)accv + RED_CH * 8);                          \
        const ct_##T *FM_RESTRICT x = (const ct_##T *)xp;                                           \
        for (int64_t j = 0; j < k; j++) {                                                           \
            cp_##T v = LD_##T(&x[j]);                                                               \
            int b = BETTER_##OP(v, val[j]);                                                         \
            val[j] = b ? v : val[j];                                                                \
            idx[j] = b ? r : idx[j];                                                                \
        }                                                                                           \
    }                                                                                               \
    static void vcomb_##OP##_##T(void *accv, const void *bv, int64_t k) {                           \
        cp_##T *val = (cp_##T *)accv;                                                               \
        int64_t *idx = (int64_t *)((char *)accv + RED_CH * 8);                                      \
        const cp_##T *bval = (const cp_##T *)bv;                                                    \
        const int64_t *bidx = (const int64_t *)((const char *)bv + RED_CH * 8);                     \
        for (int64_t j = 0; j < k; j++)                                                             \
            if (BETTER_##OP(bval[j], val[j])) {                                                     \
                val[j] = bval[j];                                                                   \
                idx[j] = bidx[j];                                                                   \
            }                                                                                       \
    }                                                                                               \
    static void vinit_##OP##_##T(void *accv, int64_t k) {                                           \
        cp_##T *val = (cp_##T *)accv;                                                               \
        int64_t *idx = (int64_t *)((char *)accv + RED_CH * 8);                                      \
        for (int64_t j = 0; j < k; j++) {                                                           \
            val[j] = INIT_##KN(T, cp_##T);                                                          \
            idx[j] = 0;                                                                             \
        }                                                                                           \
    }                                                                                               \
    static void init_##OP##_##T(acc_u *a) {                                                         \
        arg_##T r;                                                                                  \
        r.v = INIT_##KN(T, cp_##T);                                                                 \
        r.i = 0;                                                                                    \
        memcpy(a, &r, sizeof r);                                                                    \
    }                                                                                               \
    static void comb_##OP##_##T(acc_u *a, const acc_u *b) {                                         \
        arg_##T x, y;                                                                               \
        memcpy(&x, a, sizeof x);                                                                    \
        memcpy(&y, b, sizeof y);                                                                    \
        if (BETTER_##OP(y.v, x.v)) memcpy(a, &y, sizeof y);                                         \
    }                                                                                               \
    static void fin_##OP##_##T(const acc_u *au, int64_t R, double P, const acc_u *cu, char *out,    \
                               char *aux) {                                                         \
        (void)R; (void)P; (void)cu;                                                                 \
        arg_##T r;                                                                                  \
        memcpy(&r, au, sizeof r);                                                                   \
        if (out) ST_##T(out, r.v);                                                                  \
        STI_i64(aux, r.i);                                                                          \
    }                                                                                               \
    static void vfin_##OP##_##T(const void *accv, int64_t k, int64_t R, double P,                   \
                                const void *cv, char *out, int64_t os, char *aux, int64_t as) {     \
        (void)R; (void)P; (void)cv;                                                                 \
        const cp_##T *val = (const cp_##T *)accv;                                                   \
        const int64_t *idx = (const int64_t *)((const char *)accv + RED_CH * 8);                    \
        for (int64_t j = 0; j < k; j++) {                                                           \
            if (out) ST_##T(out + j * os, val[j]);                                                  \
            STI_i64(aux + j * as, idx[j]);                                                          \
        }                                                                                           \
    }                                                                                               \
    static const red_vt vt_##OP##_##T = {                                                           \
        CODE_##T, 0, 0, row_##OP##_##T, init_##OP##_##T, comb_##OP##_##T, fin_##OP##_##T, NULL,     \
        vinit_##OP##_##T, vec_##OP##_##T, vcomb_##OP##_##T, vfin_##OP##_##T, NULL};

/* ---- instantiation ---------------------------------------------------------------------------- */
#define ARGT(T, K_) typedef struct { cp_##T v; int64_t i; } arg_##T;
FM_ALL_DTYPES(ARGT)

/* every dtype: max, min, all, any, count_nonzero, argmax, argmin */
#define ANY_DTYPE(T, K_)                                                                            \
    DEF_KIND(T, MAX, cp_##T, 0, CFIX_NONE, FM_CLONES)                                               \
    DEF_KIND(T, MIN, cp_##T, 0, CFIX_NONE, FM_CLONES)                                               \
    DEF_KIND(T, ALL, uint8_t, 0, CFIX_NONE, )                                                       \
    DEF_KIND(T, ANY, uint8_t, 0, CFIX_NONE, )                                                       \
    DEF_KIND(T, CNZ, uint64_t, 0, CFIX_NONE, )                                                      \
    DEF_OP(T, MAX, MAX, cp_##T, T, 0, 0, FIN_PLAIN)                                                 \
    DEF_OP(T, MIN, MIN, cp_##T, T, 0, 0, FIN_PLAIN)                                                 \
    DEF_OP(T, ALL, ALL, uint8_t, b, 0, 0, FIN_PLAIN)                                                \
    DEF_OP(T, ANY, ANY, uint8_t, b, 0, 0, FIN_PLAIN)                                                \
    DEF_OP(T, COUNTNZ, CNZ, uint64_t, i64, 0, 0, FIN_PLAIN)                                         \
    DEF_ARG(T, ARGMAX, MAX)                                                                         \
    DEF_ARG(T, ARGMIN, MIN)
FM_ALL_DTYPES(ANY_DTYPE)

/* integers and bool: sums and products in uint64 (int64 results) */
#define INT_DTYPE(T)                                                                                \
    DEF_KIND(T, SUM, uint64_t, 0, CFIX_NONE, FM_CLONES)                                             \
    DEF_KIND(T, PROD, uint64_t, 0, CFIX_NONE, )                                                     \
    DEF_OP(T, SUM, SUM, uint64_t, i64, 0, 0, FIN_PLAIN)                                             \
    DEF_OP(T, NANSUM, SUM, uint64_t, i64, 0, 0, FIN_PLAIN)                                          \
    DEF_OP(T, PROD, PROD, uint64_t, i64, 0, 0, FIN_PLAIN)
INT_DTYPE(b)
INT_DTYPE(u8)
INT_DTYPE(i8)
INT_DTYPE(i16)
INT_DTYPE(i32)
INT_DTYPE(i64)
INT_DTYPE(u16)
INT_DTYPE(u32)
INT_DTYPE(u64)

/* floats: accumulate in AT (float or double), results in the accumulator dtype O */
#define FLOAT_DTYPE(T, AT, O)                                                                       \
    DEF_KIND(T, SUM, AT, 0, CFIX_NONE, FM_CLONES)                                                   \
    DEF_KIND(T, NANSUM, AT, 0, CFIX_NONE, )                                                         \
    DEF_KIND(T, PROD, AT, 0, CFIX_NONE, )                                                           \
    DEF_KIND(T, NANCNT, uint64_t, 0, CFIX_NONE, )                                                   \
    DEF_KIND(T, ABSSUM, AT, 0, CFIX_NONE, FM_CLONES)                                                \
    DEF_KIND(T, SQSUM, AT, 0, CFIX_NONE, FM_CLONES)                                                 \
    DEF_KIND(T, POWSUM, AT, 0, CFIX_NONE, )                                                         \
    DEF_KIND(T, ABSMAX, AT, 0, CFIX_NONE, )                                                         \
    DEF_KIND(T, ABSMIN, AT, 0, CFIX_NONE, )                                                         \
    DEF_KIND(T, SQDEV, AT, 1, CFIX_SQDEV, FM_CLONES)                                                \
    DEF_KIND(T, EXPSUM, AT, 1, CFIX_EXPSUM, FM_CLONES)                                              \
    DEF_OP(T, SUM, SUM, AT, O, 0, 1, FIN_PLAIN)                                                     \
    DEF_OP(T, MEAN, SUM, AT, O, 0, 1, FIN_MEAN)                                                     \
    DEF_OP(T, NANSUM, NANSUM, AT, O, 0, 1, FIN_PLAIN)                                               \
    DEF_OP(T, PROD, PROD, AT, O, 0, 0, FIN_PLAIN)                                                   \
    DEF_OP(T, NANCOUNT, NANCNT, uint64_t, i64, 0, 0, FIN_PLAIN)                                     \
    DEF_OP(T, NORM0, CNZ, uint64_t, O, 0, 0, FIN_PLAIN)                                             \
    DEF_OP(T, NORM1, ABSSUM, AT, O, 0, 1, FIN_PLAIN)                                                \
    DEF_OP(T, NORM2, SQSUM, AT, O, 0, 1, FIN_NORM2)                                                 \
    DEF_OP(T, NORMP, POWSUM, AT, O, 0, 1, FIN_NORMP)                                                \
    DEF_OP(T, NORMINF, ABSMAX, AT, O, 0, 0, FIN_PLAIN)                                              \
    DEF_OP(T, NORMNINF, ABSMIN, AT, O, 0, 0, FIN_PLAIN)                                             \
    DEF_OP(T, VAR, SQDEV, AT, O, 1, 1, FIN_VAR)                                                     \
    DEF_OP(T, STD, SQDEV, AT, O, 1, 1, FIN_STD)                                                     \
    DEF_OP(T, LSE, EXPSUM, AT, O, 1, 1, FIN_LSE)
FLOAT_DTYPE(f16, float, f32)
FLOAT_DTYPE(bf16, float, f32)
FLOAT_DTYPE(f32, float, f32)
FLOAT_DTYPE(f64, double, f64)

#define VT_ALL(OP)                                                                                  \
    {&vt_##OP##_b, &vt_##OP##_u8, &vt_##OP##_i8, &vt_##OP##_i16, &vt_##OP##_i32,                    \
     &vt_##OP##_i64, &vt_##OP##_f16, &vt_##OP##_bf16, &vt_##OP##_f32, &vt_##OP##_f64,              \
     [FM_UINT16] = &vt_##OP##_u16, &vt_##OP##_u32, &vt_##OP##_u64}
#define VT_FLOATS(OP)                                                                               \
    {NULL, NULL, NULL, NULL, NULL, NULL, &vt_##OP##_f16, &vt_##OP##_bf16, &vt_##OP##_f32,           \
     &vt_##OP##_f64}

static const red_vt *const vt_table[FM_NRED][FM_NDTYPES] = {
    [FM_RED_SUM] = VT_ALL(SUM),          [FM_RED_NANSUM] = VT_ALL(NANSUM),
    [FM_RED_PROD] = VT_ALL(PROD),        [FM_RED_MEAN] = VT_FLOATS(MEAN),
    [FM_RED_MAX] = VT_ALL(MAX),          [FM_RED_MIN] = VT_ALL(MIN),
    [FM_RED_ALL] = VT_ALL(ALL),          [FM_RED_ANY] = VT_ALL(ANY),
    [FM_RED_COUNTNZ] = VT_ALL(COUNTNZ),  [FM_RED_NANCOUNT] = VT_FLOATS(NANCOUNT),
    [FM_RED_NORM1] = VT_FLOATS(NORM1),   [FM_RED_NORM2] = VT_FLOATS(NORM2),
    [FM_RED_NORMP] = VT_FLOATS(NORMP),   [FM_RED_NORMINF] = VT_FLOATS(NORMINF),
    [FM_RED_NORMNINF] = VT_FLOATS(NORMNINF), [FM_RED_NORM0] = VT_FLOATS(NORM0),
    [FM_RED_VAR] = VT_FLOATS(VAR),       [FM_RED_STD] = VT_FLOATS(STD),
    [FM_RED_LSE] = VT_FLOATS(LSE),       [FM_RED_ARGMAX] = VT_ALL(ARGMAX),
    [FM_RED_ARGMIN] = VT_ALL(ARGMIN),
};

/* ---- plan and drivers ------------------------------------------------------------------------ */
typedef struct {
    const red_vt *vt;
    int nk, nr;
    int64_t ks[FM_MAX_DIMS], kin[FM_MAX_DIMS], kout[FM_MAX_DIMS], kaux[FM_MAX_DIMS];
    int64_t rs[FM_MAX_DIMS], rin[FM_MAX_DIMS]; /* strides in BYTES */
    int64_t nout, R, router, rinner, rstride;
    const char *in;
    char *out, *aux;
    double p;
} red_plan;

/* offsets (in, out, aux) of kept position o */
static void kept_seek(const red_plan *pl, int nk, int64_t o, int64_t *idx, int64_t *off) {
    off[0] = off[1] = off[2] = 0;
    for (int d = nk - 1; d >= 0; d--) {
        int64_t i = o % pl->ks[d];
        o /= pl->ks[d];
        if (idx) idx[d] = i;
        off[0] += i * pl->kin[d];
        off[1] += i * pl->kout[d];
        off[2] += i * pl->kaux[d];
    }
}

static void kept_next(const red_plan *pl, int64_t *idx, int64_t *off) {
    for (int d = pl->nk - 1; d >= 0; d--) {
        idx[d]++;
        off[0] += pl->kin[d];
        off[1] += pl->kout[d];
        off[2] += pl->kaux[d];
        if (idx[d] < pl->ks[d]) return;
        off[0] -= pl->kin[d] * pl->ks[d];
        off[1] -= pl->kout[d] * pl->ks[d];
        off[2] -= pl->kaux[d] * pl->ks[d];
        idx[d] = 0;
    }
}

/* reduce rows [r0, r1) of the sub-space below `base` (outer reduced dims), columns [j0, j1) */
static void reduce_rows_range(const red_plan *pl, const char *base, int64_t r0, int64_t r1,
                              int64_t j0, int64_t j1, const acc_u *c, acc_u *res) {
    const red_vt *vt = pl->vt;
    int nro = pl->nr - 1;
    if (r1 - r0 == 1 && nro <= 0) { /* one row: the common case */
        vt->row(base + j0 * pl->rstride, j1 - j0, pl->rstride, c, res, j0, pl->p);
        return;
    }
    int64_t ridx[FM_MAX_DIMS], roff = 0, rem = r0;
    for (int d = nro - 1; d >= 0; d--) {
        ridx[d] = rem % pl->rs[d];
        rem /= pl->rs[d];
        roff += ridx[d] * pl->rin[d];
    }
    acc_u stk[64];
    int top = 0;
    int64_t cnt = 0;
    for (int64_t r = r0; r < r1; r++) {
        acc_u v;
        vt->row(base + roff + j0 * pl->rstride, j1 - j0, pl->rstride, c, &v, j0, pl->p);
        for (int64_t t = ++cnt; !(t & 1); t >>= 1) {
            acc_u a = stk[--top];
            vt->comb(&a, &v);
            v = a;
        }
        stk[top++] = v;
        for (int d = nro - 1; d >= 0; d--) {
            ridx[d]++;
            roff += pl->rin[d];
            if (ridx[d] < pl->rs[d]) break;
            roff -= pl->rin[d] * pl->rs[d];
            ridx[d] = 0;
        }
    }
    if (!top) {
        vt->init(res);
        return;
    }
    *res = stk[0];
    for (int k = 1; k < top; k++) vt->comb(res, &stk[k]);
}

static void rows_outputs(const red_plan *pl, int64_t o0, int64_t o1) {
    const red_vt *vt = pl->vt;
    int64_t idx[FM_MAX_DIMS], off[3];
    acc_u c;
    memset(&c, 0, sizeof c);
    if (pl->nk == 1 && pl->nr == 1 && !vt->hasc) {
        /* one kept and one reduced dimension (x.sum(-1) of a matrix): no index bookkeeping
           between rows */
        const char *in = pl->in + o0 * pl->kin[0];
        char *out = pl->out ? pl->out + o0 * pl->kout[0] : NULL;
        char *aux = pl->aux ? pl->aux + o0 * pl->kaux[0] : NULL;
        for (int64_t o = o0; o < o1; o++) {
            acc_u r;
            vt->row(in, pl->rinner, pl->rstride, &c, &r, 0, pl->p);
            vt->fin(&r, pl->R, pl->p, &c, out, aux);
            in += pl->kin[0];
            if (out) out += pl->kout[0];
            if (aux) aux += pl->kaux[0];
        }
        return;
    }
    kept_seek(pl, pl->nk, o0, idx, off);
    for (int64_t o = o0; o < o1; o++) {
        acc_u r;
        if (vt->hasc) vt->ldc(&c, pl->aux + off[2]);
        reduce_rows_range(pl, pl->in + off[0], 0, pl->router, 0, pl->rinner, &c, &r);
        vt->fin(&r, pl->R, pl->p, &c, pl->out ? pl->out + off[1] : NULL,
                pl->aux ? pl->aux + off[2] : NULL);
        kept_next(pl, idx, off);
    }
}

/* libgomp's thread pool does not survive fork(): a forked child (a data-loader worker) that
   entered a parallel region would hang, so children run single-threaded. */
static volatile int red_forked = 0;
static void red_mark_forked(void) { red_forked = 1; }
__attribute__((constructor)) static void red_register_atfork(void) {
    pthread_atfork(NULL, NULL, red_mark_forked);
}

static int red_threads(int64_t work) {
    if (work < RED_PAR_MIN || red_forked) return 1;
    int n = omp_get_max_threads();
    return n > 1 ? n : 1;
}

static int run_rows(const red_plan *pl) {
    int nth = red_threads(pl->nout * pl->R);
    if (nth <= 1) {
        rows_outputs(pl, 0, pl->nout);
        return FM_OK;
    }
    if (pl->nout >= 4 * (int64_t)nth) {
        /* blocks of outputs handed out dynamically: a thread that starts late (the machine is
           shared) takes fewer blocks instead of holding everyone up */
        int64_t nblk = 8 * (int64_t)nth, per = (pl->nout + nblk - 1) / nblk;
        nblk = (pl->nout + per - 1) / per;
#pragma omp parallel for num_threads(nth) schedule(dynamic, 1)
        for (int64_t q = 0; q < nblk; q++)
            rows_outputs(pl, q * per, (q + 1) * per < pl->nout ? (q + 1) * per : pl->nout);
        return FM_OK;
    }
    /* few outputs: split each one's reduction into nth parts, combine the parts in order */
    const red_vt *vt = pl->vt;
    int64_t ntask = pl->nout * nth;
    acc_u *part = malloc((size_t)ntask * sizeof(acc_u));
    if (!part) return FM_ERR_NOMEM;
#pragma omp parallel num_threads(nth)
    {
        int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        for (int64_t q = t; q < ntask; q += nt) {
            int64_t o = q / nth, s = q % nth, off[3];
            kept_seek(pl, pl->nk, o, NULL, off);
            acc_u c;
            memset(&c, 0, sizeof c);
            if (vt->hasc) vt->ldc(&c, pl->aux + off[2]);
            if (pl->router >= nth)
                reduce_rows_range(pl, pl->in + off[0], pl->router * s / nth,
                                  pl->router * (s + 1) / nth, 0, pl->rinner, &c, &part[q]);
            else
                reduce_rows_range(pl, pl->in + off[0], 0, pl->router, pl->rinner * s / nth,
                                  pl->rinner * (s + 1) / nth, &c, &part[q]);
        }
    }
    for (int64_t o = 0; o < pl->nout; o++) {
        int64_t off[3];
        kept_seek(pl, pl->nk, o, NULL, off);
        acc_u r = part[o * nth], c;
        memset(&c, 0, sizeof c);
        for (int s = 1; s < nth; s++) vt->comb(&r, &part[o * nth + s]);
        if (vt->hasc) vt->ldc(&c, pl->aux + off[2]);
        vt->fin(&r, pl->R, pl->p, &c, pl->out ? pl->out + off[1] : NULL,
                pl->aux ? pl->aux + off[2] : NULL);
    }
    free(part);
    return FM_OK;
}

/* outer shape: accumulate rows [r0, r1) of the reduced sub-space into the vector of outputs
   k0 .. k0+kc-1 of kept-outer position ko; the result is left in buf (unfinalised). Sums add
   rows in three levels (blocks of RED_OB rows, blocks of RED_OB blocks, the rest) so the error
   grows like a pairwise sum's rather than with the number of rows. */
static void outer_chunk(const red_plan *pl, int64_t ko, int64_t k0, int64_t kc, int64_t r0,
                        int64_t r1, char *buf) {
    const red_vt *vt = pl->vt;
    void *acc = buf, *macc = buf + RED_CH * 16, *bacc = buf + 2 * RED_CH * 16;
    void *cb = buf + 3 * RED_CH * 16;
    int nk1 = pl->nk - 1, nr = pl->nr;
    int64_t off[3], ridx[FM_MAX_DIMS], roff = 0, nblk = 0, rem = r0;
    kept_seek(pl, nk1, ko, NULL, off);
    const char *x0 = pl->in + off[0] + k0 * pl->kin[nk1];
    if (vt->hasc) vt->vldc(cb, pl->aux + off[2] + k0 * pl->kaux[nk1], kc, pl->kaux[nk1]);
    for (int d = nr - 1; d >= 0; d--) {
        ridx[d] = rem % pl->rs[d];
        rem /= pl->rs[d];
        roff += ridx[d] * pl->rin[d];
    }
    int blocked = vt->blocked && r1 - r0 > RED_OB;
    vt->vinit(acc, kc);
    if (blocked) vt->vinit(macc, kc);
    for (int64_t r = r0; r < r1;) {
        int64_t re = blocked ? (r1 - r < RED_OB ? r1 : r + RED_OB) : r1;
        void *dst = blocked ? bacc : acc;
        if (blocked) vt->vinit(bacc, kc);
        for (; r < re; r++) {
            vt->vec(dst, x0 + roff, kc, cb, r, pl->p);
            for (int d = nr - 1; d >= 0; d--) {
                ridx[d]++;
                roff += pl->rin[d];
                if (ridx[d] < pl->rs[d]) break;
                roff -= pl->rin[d] * pl->rs[d];
                ridx[d] = 0;
            }
        }
        if (blocked) {
            vt->vcomb(macc, bacc, kc);
            if (++nblk == RED_OB || r == r1) {
                vt->vcomb(acc, macc, kc);
                vt->vinit(macc, kc);
                nblk = 0;
            }
        }
    }
}

static void outer_fin(const red_plan *pl, int64_t ko, int64_t k0, int64_t kc, char *buf) {
    int nk1 = pl->nk - 1;
    int64_t off[3];
    kept_seek(pl, nk1, ko, NULL, off);
    char *ap = pl->aux ? pl->aux + off[2] + k0 * pl->kaux[nk1] : NULL;
    pl->vt->vfin(buf, kc, pl->R, pl->p, buf + 3 * RED_CH * 16,
                 pl->out ? pl->out + off[1] + k0 * pl->kout[nk1] : NULL, pl->kout[nk1], ap,
                 pl->kaux[nk1]);
}

/* tasks [t0, t1): task t = (kept-outer position, chunk of `ch` adjacent outputs), all rows */
static void outer_tasks(const red_plan *pl, int64_t t0, int64_t t1, int64_t ch, char *buf) {
    int64_t K = pl->ks[pl->nk - 1], nch = (K + ch - 1) / ch;
    for (int64_t t = t0; t < t1; t++) {
        int64_t ko = t / nch, k0 = (t % nch) * ch, kc = K - k0 < ch ? K - k0 : ch;
        outer_chunk(pl, ko, k0, kc, 0, pl->R, buf);
        outer_fin(pl, ko, k0, kc, buf);
    }
}

static int run_outer(const red_plan *pl) {
    int64_t K = pl->ks[pl->nk - 1], kouter = pl->nout / K;
    int64_t ch = RED_CH, nch = (K + ch - 1) / ch, ntask = kouter * nch;
    int nth = red_threads(pl->nout * pl->R);
    size_t per = 4 * RED_CH * 16;
    char *buf = malloc(per * (size_t)nth);
    if (!buf) return FM_ERR_NOMEM;
    if (nth <= 1) {
        outer_tasks(pl, 0, ntask, ch, buf);
    } else if (ntask >= 2 * nth || pl->R < 4 * nth) {
#pragma omp parallel num_threads(nth)
        {
            int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
            outer_tasks(pl, ntask * t / nt, ntask * (t + 1) / nt, ch, buf + per * t);
        }
    } else {
        /* few wide tasks: every thread takes a range of rows (sequential memory), the partial
           vectors are combined in row order */
        for (int64_t t = 0; t < ntask; t++) {
            int64_t ko = t / nch, k0 = (t % nch) * ch, kc = K - k0 < ch ? K - k0 : ch;
            int nt_used = nth;
#pragma omp parallel num_threads(nth)
            {
                int64_t q = omp_get_thread_num(), nt = omp_get_num_threads();
                if (q == 0) nt_used = (int)nt;
                outer_chunk(pl, ko, k0, kc, pl->R * q / nt, pl->R * (q + 1) / nt, buf + per * q);
            }
            for (int q = 1; q < nt_used; q++) pl->vt->vcomb(buf, buf + per * q, kc);
            outer_fin(pl, ko, k0, kc, buf);
        }
    }
    free(buf);
    return FM_OK;
}

typedef struct {
    int64_t n, s0, s1, s2;
} dimrec;

/* sort dims by decreasing s0 (stable), then merge neighbours that step as one in every stride */
static int sort_merge(dimrec *d, int nd, int sort) {
    if (sort)
        for (int i = 1; i < nd; i++) {
            dimrec x = d[i];
            int j = i - 1;
            while (j >= 0 && d[j].s0 < x.s0) {
                d[j + 1] = d[j];
                j--;
            }
            d[j + 1] = x;
        }
    if (nd < 2) return nd;
    int o = 0;
    for (int i = 1; i < nd; i++) {
        if (d[o].s0 == d[i].s0 * d[i].n && d[o].s1 == d[i].s1 * d[i].n &&
            d[o].s2 == d[i].s2 * d[i].n) {
            d[o].n *= d[i].n;
            d[o].s0 = d[i].s0;
            d[o].s1 = d[i].s1;
            d[o].s2 = d[i].s2;
        } else {
            d[++o] = d[i];
        }
    }
    return o + 1;
}

static int red_has_identity(int op) {
    return !(op == FM_RED_MAX || op == FM_RED_MIN || op == FM_RED_ARGMAX ||
             op == FM_RED_ARGMIN || op == FM_RED_NORMINF || op == FM_RED_NORMNINF);
}

int fm_reduce_out_dtype(int op, int dtype) {
    if (op < 0 || op >= FM_NRED || !fm_dtype_ok(dtype)) return -1;
    const red_vt *vt = vt_table[op][dtype];
    return vt ? vt->odt : -1;
}

int fm_reduce(int op, int dtype, int ndim, const int64_t *shape, intptr_t in,
              const int64_t *sin, uint64_t rmask, intptr_t out, const int64_t *sout,
              intptr_t aux, const int64_t *saux, double p) {
    if (op < 0 || op >= FM_NRED) return FM_ERR_OP;
    if (!fm_dtype_ok(dtype)) return FM_ERR_DTYPE;
    const red_vt *vt = vt_table[op][dtype];
    if (!vt) return FM_ERR_DTYPE;
    if (ndim < 0 || ndim > FM_MAX_DIMS) return FM_ERR_NDIM;
    if (ndim < 64 && (rmask >> ndim)) return FM_ERR_ARG;
    int is_arg = op == FM_RED_ARGMAX || op == FM_RED_ARGMIN;
    int uses_aux = is_arg || vt->hasc;
    if (uses_aux && (!aux || !saux)) return FM_ERR_ARG;
    if (!is_arg && !out) return FM_ERR_ARG;
    if (!in || (out && !sout)) return FM_ERR_ARG;
    if (is_arg && __builtin_popcountll(rmask) > 1) return FM_ERR_ARG;

    int64_t isz = fm_itemsize[dtype], osz = fm_itemsize[vt->odt], asz = is_arg ? 8 : osz;
    dimrec kd[FM_MAX_DIMS], rd[FM_MAX_DIMS];
    int nk = 0, nr = 0, empty = 0, zero_kept = 0;
    for (int d = 0; d < ndim; d++) {
        int64_t n = shape[d];
        if (n < 0) return FM_ERR_ARG;
        if ((rmask >> d) & 1) {
            if (n == 0) empty = 1;
            if (n <= 1) continue;
            rd[nr++] = (dimrec){n, sin[d] * isz, 0, 0};
        } else {
            if (n == 0) zero_kept = 1;
            if (n <= 1) continue;
            kd[nk++] = (dimrec){n, sin[d] * isz, out ? sout[d] * osz : 0,
                                uses_aux ? saux[d] * asz : 0};
        }
    }
    if (zero_kept) return FM_OK;
    if (empty && !red_has_identity(op)) return FM_ERR_VALUE;
    if (empty) nr = 0;
    nr = sort_merge(rd, nr, !is_arg);
    nk = sort_merge(kd, nk, 1);

    red_plan pl;
    pl.vt = vt;
    pl.nk = nk;
    pl.nr = nr;
    pl.nout = 1;
    for (int d = 0; d < nk; d++) {
        pl.ks[d] = kd[d].n;
        pl.kin[d] = kd[d].s0;
        pl.kout[d] = kd[d].s1;
        pl.kaux[d] = kd[d].s2;
        pl.nout *= kd[d].n;
    }
    pl.R = empty ? 0 : 1;
    for (int d = 0; d < nr; d++) {
        pl.rs[d] = rd[d].n;
        pl.rin[d] = rd[d].s0;
        pl.R *= rd[d].n;
    }
    if (nr) {
        pl.rinner = pl.rs[nr - 1];
        pl.rstride = pl.rin[nr - 1];
    } else {
        pl.rinner = pl.R;
        pl.rstride = isz;
    }
    pl.router = pl.rinner ? pl.R / pl.rinner : 0;
    pl.in = (const char *)in;
    pl.out = (char *)out;
    pl.aux = (char *)aux;
    pl.p = p;
    int outer = !empty && nk > 0 && pl.kin[nk - 1] == isz && pl.ks[nk - 1] >= 4 &&
                !(nr > 0 && pl.rstride == isz);
    return outer ? run_outer(&pl) : run_rows(&pl);
}

int fm_reduce_contig(int op, int dtype, int64_t n, intptr_t in, intptr_t out, double p) {
    int64_t shape[1] = {n}, st[1] = {1}, so[1] = {0};
    if (op == FM_RED_ARGMAX || op == FM_RED_ARGMIN || op == FM_RED_VAR || op == FM_RED_STD ||
        op == FM_RED_LSE)
        return FM_ERR_ARG;
    return fm_reduce(op, dtype, 1, shape, in, st, 1, out, so, 0, NULL, p);
}

/* ---- softmax / log_softmax --------------------------------------------------------------------
   Per row: the max, the sum of exp(x - max), then the normalised values. float32/float64 keep
   exp(x - max) in the output between the passes; the 16-bit types recompute it (their output
   could not hold the intermediate exactly). */
#define SM_LANES 16

#define DEF_SM(T, CT, STORE)                                                                        \
    FM_CLONES static void smrow_##T(int lg, const char *xp, int64_t n, int64_t xs, char *op,        \
                                    int64_t os) {                                                   \
        CT m = leaf_MAX_##T(xp, n, xs, (CT)0, 0.0), s, acc[SM_LANES];                               \
        for (int j = 0; j < SM_LANES; j++) acc[j] = 0;                                              \
        int64_t i = 0;                                                                              \
        if (xs == (int64_t)sizeof(ct_##T) && os == (int64_t)sizeof(ct_##T)) {                       \
            const ct_##T *FM_RESTRICT x = (const ct_##T *)xp;                                       \
            ct_##T *FM_RESTRICT o = (ct_##T *)op;                                                   \
            if (STORE && !lg) {                                                                     \
                for (; i + SM_LANES <= n; i += SM_LANES)                                            \
                    for (int j = 0; j < SM_LANES; j++) {                                            \
                        CT e = RED_EXP(LD_##T(&x[i + j]) - m);                                      \
                        ST_##T(&o[i + j], e);                                                       \
                        acc[j] += e;                                                                \
                    }                                                                               \
                for (; i < n; i++) {                                                                \
                    CT e = RED_EXP(LD_##T(&x[i]) - m);                                              \
                    ST_##T(&o[i], e);                                                               \
                    acc[0] += e;                                                                    \
                }                                                                                   \
            } else {                                                                                \
                for (; i + SM_LANES <= n; i += SM_LANES)                                            \
                    for (int j = 0; j < SM_LANES; j++) acc[j] += RED_EXP(LD_##T(&x[i + j]) - m);    \
                for (; i < n; i++) acc[0] += RED_EXP(LD_##T(&x[i]) - m);                            \
            }                                                                                       \
            for (int w = SM_LANES / 2; w >= 1; w /= 2)                                              \
                for (int j = 0; j < w; j++) acc[j] += acc[j + w];                                   \
            s = acc[0];                                                                             \
            if (lg) {                                                                               \
                CT ls = RED_LOG(s);                                                                 \
                for (i = 0; i < n; i++) ST_##T(&o[i], LD_##T(&x[i]) - m - ls);                      \
            } else if (STORE) {                                                                     \
                CT inv = 1 / s;                                                                     \
                for (i = 0; i < n; i++) ST_##T(&o[i], LD_##T(&o[i]) * inv);                         \
            } else {                                                                                \
                CT inv = 1 / s;                                                                     \
                for (i = 0; i < n; i++) ST_##T(&o[i], RED_EXP(LD_##T(&x[i]) - m) * inv);            \
            }                                                                                       \
            return;                                                                                 \
        }                                                                                           \
        s = 0;                                                                                      \
        for (i = 0; i < n; i++) s += RED_EXP(LD_##T(xp + i * xs) - m);                              \
        CT f = lg ? RED_LOG(s) : 1 / s;                                                             \
        for (i = 0; i < n; i++) {                                                                   \
            CT d = LD_##T(xp + i * xs) - m;                                                         \
            ST_##T(op + i * os, lg ? d - f : RED_EXP(d) * f);                                       \
        }                                                                                           \
    }                                                                                               \
    /* k adjacent columns of R rows (row strides xr / orr bytes); m, s: scratch of k */             \
    FM_CLONES static void smvec_##T(int lg, const char *xp, int64_t xr, int64_t R, char *op,        \
                                    int64_t orr, int64_t k, CT *FM_RESTRICT m,                      \
                                    CT *FM_RESTRICT s) {                                            \
        for (int64_t j = 0; j < k; j++) {                                                           \
            m[j] = -INFINITY;                                                                       \
            s[j] = 0;                                                                               \
        }                                                                                           \
        for (int64_t r = 0; r < R; r++) {                                                           \
            const ct_##T *FM_RESTRICT x = (const ct_##T *)(xp + r * xr);                            \
            for (int64_t j = 0; j < k; j++) m[j] = RED_MAXN(m[j], LD_##T(&x[j]));                   \
        }                                                                                           \
        for (int64_t r = 0; r < R; r++) {                                                           \
            const ct_##T *FM_RESTRICT x = (const ct_##T *)(xp + r * xr);                            \
            ct_##T *FM_RESTRICT o = (ct_##T *)(op + r * orr);                                       \
            if (STORE && !lg)                                                                       \
                for (int64_t j = 0; j < k; j++) {                                                   \
                    CT e = RED_EXP(LD_##T(&x[j]) - m[j]);                                           \
                    ST_##T(&o[j], e);                                                               \
                    s[j] += e;                                                                      \
                }                                                                                   \
            else                                                                                    \
                for (int64_t j = 0; j < k; j++) s[j] += RED_EXP(LD_##T(&x[j]) - m[j]);              \
        }                                                                                           \
        for (int64_t j = 0; j < k; j++) s[j] = lg ? RED_LOG(s[j]) : 1 / s[j];                       \
        for (int64_t r = 0; r < R; r++) {                                                           \
            const ct_##T *FM_RESTRICT x = (const ct_##T *)(xp + r * xr);                            \
            ct_##T *FM_RESTRICT o = (ct_##T *)(op + r * orr);                                       \
            if (lg)                                                                                 \
                for (int64_t j = 0; j < k; j++) ST_##T(&o[j], LD_##T(&x[j]) - m[j] - s[j]);         \
            else if (STORE)                                                                         \
                for (int64_t j = 0; j < k; j++) ST_##T(&o[j], LD_##T(&o[j]) * s[j]);                \
            else                                                                                    \
                for (int64_t j = 0; j < k; j++)                                                     \
                    ST_##T(&o[j], RED_EXP(LD_##T(&x[j]) - m[j]) * s[j]);                            \
        }                                                                                           \
    }                                                                                               \
    static void smrun_##T(int lg, const red_plan *pl, int outer, int64_t t0, int64_t t1,            \
                          int64_t ch, void *buf) {                                                  \
        int64_t R = pl->R, rin = pl->rin[0], rout = pl->rs[0];                                      \
        if (!outer) {                                                                               \
            int64_t idx[FM_MAX_DIMS], off[3];                                                       \
            kept_seek(pl, pl->nk, t0, idx, off);                                                    \
            for (int64_t t = t0; t < t1; t++) {                                                     \
                smrow_##T(lg, pl->in + off[0], R, rin, pl->out + off[1], rout);                     \
                kept_next(pl, idx, off);                                                            \
            }                                                                                       \
            return;                                                                                 \
        }                                                                                           \
        int nk1 = pl->nk - 1;                                                                       \
        int64_t K = pl->ks[nk1], nch = (K + ch - 1) / ch;                                           \
        CT *m = (CT *)buf, *s = m + RED_CH;                                                         \
        for (int64_t t = t0; t < t1; t++) {                                                         \
            int64_t k0 = (t % nch) * ch, kc = K - k0 < ch ? K - k0 : ch, off[3];                    \
            kept_seek(pl, nk1, t / nch, NULL, off);                                                 \
            smvec_##T(lg, pl->in + off[0] + k0 * pl->kin[nk1], rin, R,                              \
                      pl->out + off[1] + k0 * pl->kout[nk1], rout, kc, m, s);                       \
        }                                                                                           \
    }

DEF_SM(f16, float, 0)
DEF_SM(bf16, float, 0)
DEF_SM(f32, float, 1)
DEF_SM(f64, double, 1)

typedef void (*dim_run_fn)(int op, const red_plan *pl, int outer, int64_t t0, int64_t t1,
                           int64_t ch, void *buf);

/* Plan a dim-wise op (softmax, scans): `dim` of length R with in/out byte strides stored in
   rin[0] / rs[0]; the other dims sorted and merged as kept dims. Returns 1 when there is nothing
   to do, 0 when planned, or a negative FM_ERR code. */
static int dim_plan(red_plan *pl, int ndim, const int64_t *shape, intptr_t in, const int64_t *sin,
                    int64_t isz, intptr_t out, const int64_t *sout, int64_t osz, int dim) {
    if (ndim < 1 || ndim > FM_MAX_DIMS) return -FM_ERR_NDIM;
    if (dim < 0 || dim >= ndim) return -FM_ERR_ARG;
    if (!in || !out || !shape || !sin || !sout) return -FM_ERR_ARG;
    dimrec kd[FM_MAX_DIMS];
    int nk = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return -FM_ERR_ARG;
        if (shape[d] == 0) return 1;
        if (d == dim || shape[d] == 1) continue;
        kd[nk++] = (dimrec){shape[d], sin[d] * isz, sout[d] * osz, 0};
    }
    nk = sort_merge(kd, nk, 1);
    pl->nk = nk;
    pl->nr = 1;
    pl->nout = 1;
    for (int d = 0; d < nk; d++) {
        pl->ks[d] = kd[d].n;
        pl->kin[d] = kd[d].s0;
        pl->kout[d] = kd[d].s1;
        pl->kaux[d] = 0;
        pl->nout *= kd[d].n;
    }
    pl->R = shape[dim];
    pl->rin[0] = sin[dim] * isz;
    pl->rs[0] = sout[dim] * osz;
    pl->in = (const char *)in;
    pl->out = (char *)out;
    pl->aux = NULL;
    return 0;
}

/* run a planned dim-wise op: the outer shape when the last kept dim is contiguous in both (whole
   rows of up to RED_CH columns: streaming beats cache blocking here, measured), threads over
   rows / column chunks for large inputs */
static int dim_run(const red_plan *pl, int64_t isz, int64_t osz, int64_t par_min, int op,
                   dim_run_fn fn, size_t bufsize) {
    int nk1 = pl->nk - 1;
    int outer = pl->nk > 0 && pl->kin[nk1] == isz && pl->kout[nk1] == osz && pl->ks[nk1] >= 8 &&
                !(pl->rin[0] == isz && pl->rs[0] == osz);
    int64_t ch = 1, ntask = pl->nout;
    int nth = pl->nout * pl->R >= par_min && !red_forked ? omp_get_max_threads() : 1;
    if (outer) {
        int64_t K = pl->ks[nk1];
        ch = RED_CH;
        if (nth > 1 && pl->nout / K * ((K + ch - 1) / ch) < nth) { /* a chunk per thread */
            ch = (K + nth - 1) / nth;
            ch = (ch + 15) / 16 * 16;
        }
        ntask = pl->nout / K * ((K + ch - 1) / ch);
    }
    if (ntask < 2 || nth < 1) nth = 1;
    char *buf = malloc(bufsize * (size_t)nth);
    if (!buf) return FM_ERR_NOMEM;
    if (nth == 1) {
        fn(op, pl, outer, 0, ntask, ch, buf);
    } else {
#pragma omp parallel num_threads(nth)
        {
            int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
            fn(op, pl, outer, ntask * t / nt, ntask * (t + 1) / nt, ch, buf + bufsize * t);
        }
    }
    free(buf);
    return FM_OK;
}

static const dim_run_fn sm_table[FM_NDTYPES] = {
    [FM_FLOAT16] = smrun_f16, [FM_BFLOAT16] = smrun_bf16, [FM_FLOAT32] = smrun_f32,
    [FM_FLOAT64] = smrun_f64};

int fm_softmax(int log, int dtype, int ndim, const int64_t *shape, intptr_t in,
               const int64_t *sin, intptr_t out, const int64_t *sout, int dim) {
    if (!fm_dtype_ok(dtype) || !sm_table[dtype]) return FM_ERR_DTYPE;
    int64_t isz = fm_itemsize[dtype];
    red_plan pl;
    int rc = dim_plan(&pl, ndim, shape, in, sin, isz, out, sout, isz, dim);
    if (rc) return rc > 0 ? FM_OK : -rc;
    return dim_run(&pl, isz, isz, RED_PAR_MIN / 4, log != 0, sm_table[dtype],
                   2 * RED_CH * sizeof(double));
}

/* ---- cumulative sum / product ------------------------------------------------------------------
   Accumulate in float (16-bit floats), double (float32, float64) or uint64 (integers: int64
   results that wrap like PyTorch's). */
#define DEF_SCAN(T, OPN, AT, O, INIT, OPR)                                                          \
    static void scrow_##OPN##_##T(const char *x, int64_t n, int64_t xs, char *o, int64_t os) {      \
        AT a = INIT;                                                                                \
        for (int64_t i = 0; i < n; i++) {                                                           \
            a = a OPR(AT) LD_##T(x + i * xs);                                                       \
            ST_##O(o + i * os, a);                                                                  \
        }                                                                                           \
    }                                                                                               \
    FM_CLONES static void scvec_##OPN##_##T(const char *xp, int64_t xr, int64_t R, char *op,        \
                                            int64_t orr, int64_t k, void *accv) {                   \
        AT *FM_RESTRICT acc = (AT *)accv;                                                           \
        for (int64_t j = 0; j < k; j++) acc[j] = INIT;                                              \
        for (int64_t r = 0; r < R; r++) {                                                           \
            const ct_##T *FM_RESTRICT x = (const ct_##T *)(xp + r * xr);                            \
            ct_##O *FM_RESTRICT o = (ct_##O *)(op + r * orr);                                       \
            for (int64_t j = 0; j < k; j++) {                                                       \
                acc[j] = acc[j] OPR(AT) LD_##T(&x[j]);                                              \
                ST_##O(&o[j], acc[j]);                                                              \
            }                                                                                       \
        }                                                                                           \
    }                                                                                               \
    static void scrun_##OPN##_##T(int op, const red_plan *pl, int outer, int64_t t0,                \
                                  int64_t t1, int64_t ch, void *buf) {                              \
        (void)op;                                                                                   \
        int64_t R = pl->R, rin = pl->rin[0], rout = pl->rs[0];                                      \
        if (!outer) {                                                                               \
            int64_t idx[FM_MAX_DIMS], off[3];                                                       \
            kept_seek(pl, pl->nk, t0, idx, off);                                                    \
            for (int64_t t = t0; t < t1; t++) {                                                     \
                scrow_##OPN##_##T(pl->in + off[0], R, rin, pl->out + off[1], rout);                 \
                kept_next(pl, idx, off);                                                            \
            }                                                                                       \
            return;                                                                                 \
        }                                                                                           \
        int nk1 = pl->nk - 1;                                                                       \
        int64_t K = pl->ks[nk1], nch = (K + ch - 1) / ch;                                           \
        for (int64_t t = t0; t < t1; t++) {                                                         \
            int64_t k0 = (t % nch) * ch, kc = K - k0 < ch ? K - k0 : ch, off[3];                    \
            kept_seek(pl, nk1, t / nch, NULL, off);                                                 \
            scvec_##OPN##_##T(pl->in + off[0] + k0 * pl->kin[nk1], rin, R,                          \
                              pl->out + off[1] + k0 * pl->kout[nk1], rout, kc, buf);                \
        }                                                                                           \
    }

#define SCAN_INT(T, K_)                                                                             \
    DEF_SCAN(T, CUMSUM, uint64_t, i64, 0, +)                                                        \
    DEF_SCAN(T, CUMPROD, uint64_t, i64, 1, *)
SCAN_INT(b, I)
SCAN_INT(u8, I)
SCAN_INT(i8, I)
SCAN_INT(i16, I)
SCAN_INT(i32, I)
SCAN_INT(i64, I)
SCAN_INT(u16, I)
SCAN_INT(u32, I)
SCAN_INT(u64, U)
DEF_SCAN(f16, CUMSUM, float, f16, 0, +)
DEF_SCAN(f16, CUMPROD, float, f16, 1, *)
DEF_SCAN(bf16, CUMSUM, float, bf16, 0, +)
DEF_SCAN(bf16, CUMPROD, float, bf16, 1, *)
DEF_SCAN(f32, CUMSUM, double, f32, 0, +)
DEF_SCAN(f32, CUMPROD, double, f32, 1, *)
DEF_SCAN(f64, CUMSUM, double, f64, 0, +)
DEF_SCAN(f64, CUMPROD, double, f64, 1, *)

#define SCAN_ROW(OPN)                                                                               \
    {scrun_##OPN##_b, scrun_##OPN##_u8, scrun_##OPN##_i8, scrun_##OPN##_i16, scrun_##OPN##_i32,     \
     scrun_##OPN##_i64, scrun_##OPN##_f16, scrun_##OPN##_bf16, scrun_##OPN##_f32,                   \
     scrun_##OPN##_f64, [FM_UINT16] = scrun_##OPN##_u16, scrun_##OPN##_u32, scrun_##OPN##_u64}
static const dim_run_fn scan_table[FM_NSCAN][FM_NDTYPES] = {
    [FM_SCAN_CUMSUM] = SCAN_ROW(CUMSUM), [FM_SCAN_CUMPROD] = SCAN_ROW(CUMPROD)};

int fm_scan_out_dtype(int op, int dtype) {
    if (op < 0 || op >= FM_NSCAN || !fm_dtype_ok(dtype)) return -1;
    return fm_is_float(dtype) ? dtype : FM_INT64;
}

int fm_scan(int op, int dtype, int ndim, const int64_t *shape, intptr_t in, const int64_t *sin,
            intptr_t out, const int64_t *sout, int dim) {
    if (op < 0 || op >= FM_NSCAN) return FM_ERR_OP;
    if (!fm_dtype_ok(dtype)) return FM_ERR_DTYPE;
    int64_t isz = fm_itemsize[dtype], osz = fm_itemsize[fm_scan_out_dtype(op, dtype)];
    red_plan pl;
    int rc = dim_plan(&pl, ndim, shape, in, sin, isz, out, sout, osz, dim);
    if (rc) return rc > 0 ? FM_OK : -rc;
    return dim_run(&pl, isz, osz, RED_PAR_MIN, op, scan_table[op][dtype],
                   RED_CH * sizeof(double));
}
