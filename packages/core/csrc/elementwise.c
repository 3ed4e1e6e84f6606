/* Elementwise unary, binary and ternary kernels over strided, broadcast operands.
 *
 * Each (op, dtype) pair is one inner loop, looked up in a table and run by fm_iterate. An inner
 * loop has a contiguous branch (vectorised by the compiler, one clone per ISA level), branches
 * for broadcast scalar operands (stride 0), and a generic strided branch. The 16-bit floats
 * compute in float. A NULL table entry means the op does not support that dtype (FM_ERR_DTYPE).
 *
 * The whole file is compiled with -fno-trapping-math (pragma below, before any include so every
 * inline helper shares the options): with FP traps assumed possible, GCC 12 refuses to
 * if-convert selects on float compares and the fmath.h functions stay scalar in the AVX2 clone.
 * FP exception flags are the only thing this changes; NaN/inf semantics are unaffected.
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <omp.h>
#include <pthread.h>
#include <string.h>

#include "dtypes.h"
#include "fmath.h"
#include "ferf.h"
#include "api_elementwise.h"

/* float16 in these kernels is the tag h16: stored as raw bits, converted with fmath.h's integer
   code so the loops vectorise (dtypes.h's _Float16 loads keep them scalar) */
typedef uint16_t ct_h16;
typedef float cp_h16;
#define LD_h16(p) fm_h2f(*(const uint16_t *)(p))
#define ST_h16(p, v) (*(uint16_t *)(p) = fm_f2h((float)(v)))

/* ---- type-generic scalar math: float for float32 and the 16-bit floats, double for float64 -- */
#define TG1(fn, x) _Generic((x), float: fn##f, default: fn)(x)
#define TG2(fn, x, y) _Generic((x), float: fn##f, default: fn)(x, y)
#define VT(x) __typeof__(x)

static inline double fm_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
#define EXP(x) _Generic((x), float: fm_expf, default: exp)(x)
#define LOG(x) _Generic((x), float: fm_logf, default: log)(x)
#define EXPM1(x) _Generic((x), float: fm_expm1f, default: expm1)(x)
#define LOG1P(x) _Generic((x), float: fm_log1pf, default: log1p)(x)
#define TANH(x) _Generic((x), float: fm_tanhf, default: tanh)(x)
#define ERF(x) _Generic((x), float: fm_erff, default: erf)(x)
#define ERFC(x) _Generic((x), float: fm_erfcf, default: erfc)(x)
/* the sign bit read through the bits (GCC 12 ICEs vectorising signbit() for bfloat16 loops) */
static inline int fm_signbitf(float x) { return (int)(fm_f_to_bits(x) >> 31); }
static inline int fm_signbitd(double x) {
    uint64_t u;
    memcpy(&u, &x, 8);
    return (int)(u >> 63);
}
#define SIGNBIT(x) _Generic((x), float: fm_signbitf, default: fm_signbitd)(x)
#define SIGMOID(x) _Generic((x), float: fm_sigmoidf, default: fm_sigmoid)(x)

/* Python-style floor division and remainder on floats (the sign of the result follows the
   divisor; quotient computed from fmod so it is exact for representable results). */
#define DEF_FLOAT_DIVMOD(T, S)                                                                 \
    static inline T fm_floordiv##S(T a, T b) {                                                 \
        if (b == 0) return a / b;                                                              \
        T mod = fmod##S(a, b);                                                                 \
        T div = (a - mod) / b;                                                                 \
        if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;                                      \
        if (div == 0) return copysign##S(0, a / b);                                            \
        T fl = floor##S(div);                                                                  \
        return div - fl > (T)0.5 ? fl + 1 : fl;                                                \
    }                                                                                          \
    static inline T fm_remainder##S(T a, T b) {                                                \
        T mod = fmod##S(a, b);                                                                 \
        return (mod != 0 && ((b < 0) != (mod < 0))) ? mod + b : mod;                           \
    }
DEF_FLOAT_DIVMOD(float, f)
DEF_FLOAT_DIVMOD(double, )
#define FFLOORDIV(x, y) _Generic((x), float: fm_floordivf, default: fm_floordiv)(x, y)
#define FREMAINDER(x, y) _Generic((x), float: fm_remainderf, default: fm_remainder)(x, y)

/* Integer division family. Division by zero sets *bad and gives 0; x / -1 is computed as a
   wrapping negation so INT_MIN / -1 neither traps nor is undefined. */
static inline int64_t fm_idiv(int64_t x, int64_t y, int *bad) {
    if (y == 0) { *bad = 1; return 0; }
    if (y == -1) return (int64_t)(0 - (uint64_t)x);
    return x / y;
}
static inline int64_t fm_ifloordiv(int64_t x, int64_t y, int *bad) {
    if (y == 0) { *bad = 1; return 0; }
    if (y == -1) return (int64_t)(0 - (uint64_t)x);
    int64_t q = x / y, r = x % y;
    return (r != 0 && ((r < 0) != (y < 0))) ? q - 1 : q;
}
static inline int64_t fm_ifmod(int64_t x, int64_t y, int *bad) {
    if (y == 0) { *bad = 1; return 0; }
    return y == -1 ? 0 : x % y;
}
static inline int64_t fm_iremainder(int64_t x, int64_t y, int *bad) {
    if (y == 0) { *bad = 1; return 0; }
    if (y == -1) return 0;
    int64_t r = x % y;
    return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}

/* uint64 division and remainder (floor and truncation agree for unsigned values) */
static inline uint64_t fm_udiv(uint64_t x, uint64_t y, int *bad) {
    if (y == 0) { *bad = 1; return 0; }
    return x / y;
}
static inline uint64_t fm_umod(uint64_t x, uint64_t y, int *bad) {
    if (y == 0) { *bad = 1; return 0; }
    return x % y;
}
static inline uint64_t fm_upow(uint64_t b, uint64_t e) {
    uint64_t r = 1;
    while (e) {
        if (e & 1) r *= b;
        b *= b;
        e >>= 1;
    }
    return r;
}

/* integer power by squaring in wrapping (unsigned) arithmetic; a negative exponent gives 0
   except for bases 1 and -1 (PyTorch's rule for tensor exponents) */
static inline int64_t fm_ipow(int64_t base, int64_t e) {
    if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)base;
    while (e) {
        if (e & 1) r *= b;
        b *= b;
        e >>= 1;
    }
    return (int64_t)r;
}

/* shifts by a count outside [0, bits) give 0 (left) or the sign fill (right) instead of UB */
#define IS_SIGNED(x) ((VT(x))-1 < 0)
#define ISHL(x, y) \
    (((int64_t)(y) < 0 || (int64_t)(y) >= (int64_t)sizeof(x) * 8) ? (VT(x))0 \
                                                                   : (VT(x))((uint64_t)(x) << (y)))
#define ISHR(x, y) \
    (((int64_t)(y) < 0 || (int64_t)(y) >= (int64_t)sizeof(x) * 8 - IS_SIGNED(x)) \
         ? (VT(x))((x) < 0 ? -1 : 0) : (VT(x))((x) >> (y)))

/* NaN test for any compute type (0 for integers) */
#define ISNAN(x) (_Generic((x), float: fm_isnanf(x), double: (x) != (x), default: 0))
/* NaN-propagating max/min */
#define MAXP(x, y) ((ISNAN(x) || (x) > (y)) ? (x) : (y))
#define MINP(x, y) ((ISNAN(x) || (x) < (y)) ? (x) : (y))

/* ---- loop templates ------------------------------------------------------------------------
   Binary: NAME op name, T input dtype tag, O output dtype tag, EXPR the result from x and y
   (both of the compute type cp_T); P0..P2 are the op parameters; EXPR may set bad_ to report an
   invalid value (integer division by zero). */
typedef struct {
    int status;
    double p0, p1, p2;
} bin_ctx;

#define DEF_BIN(NAME, T, O, EXPR)                                                              \
    FM_CLONES static void bin_##NAME##_##T(int64_t n, char **p, const int64_t *s,              \
                                           const void *ctx_) {                                \
        bin_ctx *ctx = (bin_ctx *)ctx_;                                                        \
        const double P0 = ctx->p0, P1 = ctx->p1, P2 = ctx->p2;                                 \
        (void)P0; (void)P1; (void)P2;                                                          \
        int bad_ = 0;                                                                          \
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
        if (bad_) ctx->status = FM_ERR_VALUE;                                                  \
    }

/* Unary: EXPR from x (compute type); P0..P2 the op parameters. */
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

/* Unary whose vector formula EXPR holds only where OK(x): other elements are stored unchanged
   by the first pass and recomputed by the scalar FIX(x) in a second pass over the output (which
   reads only the output, so out may alias the input). Every valid EXPR result must satisfy OK. */
#define DEF_UN_FIX(NAME, T, EXPR, OK, FIX)                                                     \
    FM_CLONES static void un_##NAME##_##T(int64_t n, char **p, const int64_t *s,               \
                                          const void *ctx_) {                                 \
        (void)ctx_;                                                                            \
        int bad_ = 0;                                                                          \
        const int64_t so = sizeof(ct_##T);                                                     \
        if (s[0] == so && s[1] == so) {                                                        \
            ct_##T *FM_RESTRICT out = (ct_##T *)p[0];                                          \
            const ct_##T *FM_RESTRICT a = (const ct_##T *)p[1];                                \
            for (int64_t k = 0; k < n; k++) {                                                  \
                cp_##T x = LD_##T(&a[k]);                                                      \
                int ok_ = (OK);                                                                \
                bad_ |= !ok_;                                                                  \
                ST_##T(&out[k], ok_ ? (EXPR) : x);                                             \
            }                                                                                  \
        } else {                                                                               \
            char *o = p[0];                                                                    \
            const char *a = p[1];                                                              \
            for (int64_t k = 0; k < n; k++, o += s[0], a += s[1]) {                            \
                cp_##T x = LD_##T(a);                                                          \
                int ok_ = (OK);                                                                \
                bad_ |= !ok_;                                                                  \
                ST_##T(o, ok_ ? (EXPR) : x);                                                   \
            }                                                                                  \
        }                                                                                      \
        if (!bad_) return;                                                                     \
        char *o = p[0];                                                                        \
        for (int64_t k = 0; k < n; k++, o += s[0]) {                                           \
            cp_##T x = LD_##T(o);                                                              \
            if (!(OK)) ST_##T(o, (FIX));                                                       \
        }                                                                                      \
    }
#define UN_FIX_TRIG(NAME, T, FN) DEF_UN_FIX(NAME, T, fm_##FN##f(x), fabsf(x) <= FM_TRIG_MAX, \
                                            FN##f(x))

/* Ternary: out (T) = EXPR(a, b, c) with a of dtype TA (bool for where) and b, c of dtype T. The
   fast branches cover contiguous operands where b and/or c may be a broadcast scalar. */
typedef struct {
    double p0;
} ter_ctx;

#define TER_LOOP(TA, T, BEXPR, CEXPR, EXPR)                                                           \
    for (int64_t k = 0; k < n; k++) {                                                          \
        cp_##TA a = LD_##TA(&pa[k]);                                                           \
        cp_##T b = BEXPR, c = CEXPR;                                                           \
        ST_##T(&out[k], (EXPR));                                                               \
    }

#define DEF_TER_(NAME, TA, T, EXPR)                                                            \
    FM_CLONES static void ter_##NAME##_##T(int64_t n, char **p, const int64_t *s,              \
                                           const void *ctx_) {                                \
        const double P0 = ((const ter_ctx *)ctx_)->p0;                                         \
        (void)P0;                                                                              \
        const int64_t sz = sizeof(ct_##T), sza = sizeof(ct_##TA);                              \
        if (s[0] == sz && s[1] == sza && (s[2] == sz || s[2] == 0) &&                          \
            (s[3] == sz || s[3] == 0)) {                                                       \
            ct_##T *FM_RESTRICT out = (ct_##T *)p[0];                                          \
            const ct_##TA *FM_RESTRICT pa = (const ct_##TA *)p[1];                             \
            const ct_##T *FM_RESTRICT pb = (const ct_##T *)p[2];                               \
            const ct_##T *FM_RESTRICT pc = (const ct_##T *)p[3];                               \
            if (s[2] && s[3]) {                                                                \
                TER_LOOP(TA, T, LD_##T(&pb[k]), LD_##T(&pc[k]), EXPR)                                 \
            } else if (s[2]) {                                                                 \
                const cp_##T c0 = LD_##T(pc);                                                  \
                TER_LOOP(TA, T, LD_##T(&pb[k]), c0, EXPR)                                             \
            } else if (s[3]) {                                                                 \
                const cp_##T b0 = LD_##T(pb);                                                  \
                TER_LOOP(TA, T, b0, LD_##T(&pc[k]), EXPR)                                             \
            } else {                                                                           \
                const cp_##T b0 = LD_##T(pb), c0 = LD_##T(pc);                                 \
                TER_LOOP(TA, T, b0, c0, EXPR)                                                         \
            }                                                                                  \
            return;                                                                            \
        }                                                                                      \
        char *o = p[0];                                                                        \
        const char *qa = p[1], *qb = p[2], *qc = p[3];                                         \
        for (int64_t k = 0; k < n; k++, o += s[0], qa += s[1], qb += s[2], qc += s[3]) {       \
            cp_##TA a = LD_##TA(qa);                                                           \
            cp_##T b = LD_##T(qb), c = LD_##T(qc);                                             \
            ST_##T(o, (EXPR));                                                                 \
        }                                                                                      \
    }

/* ---- instantiation helpers ------------------------------------------------------------------ */
#define BOOLT(X, NAME, EXPR) X(NAME, b, EXPR)
/* the integers whose values all fit in int64 (the int64 helpers below are exact for them) */
#define INTS64(X, NAME, EXPR)                                                                  \
    X(NAME, u8, EXPR) X(NAME, i8, EXPR) X(NAME, i16, EXPR) X(NAME, i32, EXPR) X(NAME, i64, EXPR) \
    X(NAME, u16, EXPR) X(NAME, u32, EXPR)
#define INTS(X, NAME, EXPR) INTS64(X, NAME, EXPR) X(NAME, u64, EXPR)
#define FLOATS(X, NAME, EXPR) \
    X(NAME, h16, EXPR) X(NAME, bf16, EXPR) X(NAME, f32, EXPR) X(NAME, f64, EXPR)
#define NUMERIC(X, NAME, EXPR) INTS(X, NAME, EXPR) FLOATS(X, NAME, EXPR)
#define INTB(X, NAME, EXPR) BOOLT(X, NAME, EXPR) INTS(X, NAME, EXPR)
#define ALL(X, NAME, EXPR) BOOLT(X, NAME, EXPR) NUMERIC(X, NAME, EXPR)

#define BIN_SAME(NAME, T, EXPR) DEF_BIN(NAME, T, T, EXPR)
#define BIN_BOOL(NAME, T, EXPR) DEF_BIN(NAME, T, b, EXPR)
#define UN_SAME(NAME, T, EXPR) DEF_UN(NAME, T, T, EXPR)
#define UN_BOOL(NAME, T, EXPR) DEF_UN(NAME, T, b, EXPR)
#define TER(NAME, T, EXPR) DEF_TER_(NAME, T, T, EXPR)
#define TER_COND(NAME, T, EXPR) DEF_TER_(NAME, b, T, EXPR)

/* a table row: one function per dtype; B, I, F (0/1) select bool, the integers, the floats */
#define SEL_0(f) NULL
#define SEL_1(f) f
#define ROW(K, P, NAME, B, I, F)                                                               \
    [K] = {SEL_##B(P##_##NAME##_b), SEL_##I(P##_##NAME##_u8), SEL_##I(P##_##NAME##_i8),        \
           SEL_##I(P##_##NAME##_i16), SEL_##I(P##_##NAME##_i32), SEL_##I(P##_##NAME##_i64),    \
           SEL_##F(P##_##NAME##_h16), SEL_##F(P##_##NAME##_bf16), SEL_##F(P##_##NAME##_f32),   \
           SEL_##F(P##_##NAME##_f64), [FM_UINT16] = SEL_##I(P##_##NAME##_u16),                \
           SEL_##I(P##_##NAME##_u32), SEL_##I(P##_##NAME##_u64)}

/* ---- binary ops ------------------------------------------------------------------------------ */
ALL(BIN_SAME, add, x + y)
NUMERIC(BIN_SAME, sub, x - y)
ALL(BIN_SAME, mul, x * y)
FLOATS(BIN_SAME, div, x / y)
ALL(BIN_BOOL, eq, x == y)
ALL(BIN_BOOL, ne, x != y)
ALL(BIN_BOOL, lt, x < y)
ALL(BIN_BOOL, le, x <= y)
ALL(BIN_BOOL, gt, x > y)
ALL(BIN_BOOL, ge, x >= y)
ALL(BIN_SAME, maximum, MAXP(x, y))
ALL(BIN_SAME, minimum, MINP(x, y))
INTS64(BIN_SAME, floordiv, fm_ifloordiv(x, y, &bad_))
BIN_SAME(floordiv, u64, fm_udiv(x, y, &bad_))
FLOATS(BIN_SAME, floordiv, FFLOORDIV(x, y))
INTS64(BIN_SAME, truncdiv, fm_idiv(x, y, &bad_))
BIN_SAME(truncdiv, u64, fm_udiv(x, y, &bad_))
FLOATS(BIN_SAME, truncdiv, TG1(trunc, x / y))
INTS64(BIN_SAME, remainder, fm_iremainder(x, y, &bad_))
BIN_SAME(remainder, u64, fm_umod(x, y, &bad_))
FLOATS(BIN_SAME, remainder, FREMAINDER(x, y))
INTS64(BIN_SAME, fmod, fm_ifmod(x, y, &bad_))
BIN_SAME(fmod, u64, fm_umod(x, y, &bad_))
FLOATS(BIN_SAME, fmod, TG2(fmod, x, y))
INTS64(BIN_SAME, pow, fm_ipow(x, y))
BIN_SAME(pow, u64, fm_upow(x, y))
FLOATS(BIN_SAME, pow, TG2(pow, x, y))
FLOATS(BIN_SAME, atan2, TG2(atan2, x, y))
FLOATS(BIN_SAME, hypot, TG2(hypot, x, y))
FLOATS(BIN_SAME, copysign, TG2(copysign, x, y))
/* fmax/fmin ignore a NaN operand */
ALL(BIN_SAME, fmax, ISNAN(x) ? y : ((ISNAN(y) || x > y) ? x : y))
ALL(BIN_SAME, fmin, ISNAN(x) ? y : ((ISNAN(y) || x < y) ? x : y))
ALL(BIN_BOOL, logical_and, (x != 0) & (y != 0))
ALL(BIN_BOOL, logical_or, (x != 0) | (y != 0))
ALL(BIN_BOOL, logical_xor, (x != 0) ^ (y != 0))
INTB(BIN_SAME, bitand, x & y)
INTB(BIN_SAME, bitor, x | y)
INTB(BIN_SAME, bitxor, x ^ y)
INTS(BIN_SAME, lshift, ISHL(x, y))
INTS(BIN_SAME, rshift, ISHR(x, y))
/* isclose: P0 rtol, P1 atol, P2 equal_nan; integers and bool compare in double */
INTB(BIN_BOOL, isclose, ({
    double d_ = fabs((double)x - (double)y);
    (x == y) | (d_ <= P1 + fabs(P0 * (double)y));
}))
FLOATS(BIN_BOOL, isclose, ({
    VT(x) d_ = TG1(fabs, x - y);
    (x == y) | ((P2 != 0) & ISNAN(x) & ISNAN(y)) |
        ((d_ <= (VT(x))P1 + TG1(fabs, (VT(x))P0 * y)) & (d_ < INFINITY));
}))
/* (an integer alpha goes through int64: a negative double converted to an unsigned type is
   undefined) */
INTS(BIN_SAME, add_alpha, x + (VT(x))(int64_t)P0 * y)
FLOATS(BIN_SAME, add_alpha, x + (VT(x))P0 * y)

static const fm_inner_fn bin_table[FM_NBINARY][FM_NDTYPES] = {
    ROW(FM_BIN_ADD, bin, add, 1, 1, 1),
    ROW(FM_BIN_SUB, bin, sub, 0, 1, 1), /* PyTorch rejects bool subtraction */
    ROW(FM_BIN_MUL, bin, mul, 1, 1, 1),
    ROW(FM_BIN_DIV, bin, div, 0, 0, 1),
    ROW(FM_BIN_EQ, bin, eq, 1, 1, 1),
    ROW(FM_BIN_NE, bin, ne, 1, 1, 1),
    ROW(FM_BIN_LT, bin, lt, 1, 1, 1),
    ROW(FM_BIN_LE, bin, le, 1, 1, 1),
    ROW(FM_BIN_GT, bin, gt, 1, 1, 1),
    ROW(FM_BIN_GE, bin, ge, 1, 1, 1),
    ROW(FM_BIN_MAXIMUM, bin, maximum, 1, 1, 1),
    ROW(FM_BIN_MINIMUM, bin, minimum, 1, 1, 1),
    ROW(FM_BIN_FLOORDIV, bin, floordiv, 0, 1, 1),
    ROW(FM_BIN_TRUNCDIV, bin, truncdiv, 0, 1, 1),
    ROW(FM_BIN_REMAINDER, bin, remainder, 0, 1, 1),
    ROW(FM_BIN_FMOD, bin, fmod, 0, 1, 1),
    ROW(FM_BIN_POW, bin, pow, 0, 1, 1),
    ROW(FM_BIN_ATAN2, bin, atan2, 0, 0, 1),
    ROW(FM_BIN_HYPOT, bin, hypot, 0, 0, 1),
    ROW(FM_BIN_COPYSIGN, bin, copysign, 0, 0, 1),
    ROW(FM_BIN_FMAX, bin, fmax, 1, 1, 1),
    ROW(FM_BIN_FMIN, bin, fmin, 1, 1, 1),
    ROW(FM_BIN_LOGICAL_AND, bin, logical_and, 1, 1, 1),
    ROW(FM_BIN_LOGICAL_OR, bin, logical_or, 1, 1, 1),
    ROW(FM_BIN_LOGICAL_XOR, bin, logical_xor, 1, 1, 1),
    ROW(FM_BIN_BITAND, bin, bitand, 1, 1, 0),
    ROW(FM_BIN_BITOR, bin, bitor, 1, 1, 0),
    ROW(FM_BIN_BITXOR, bin, bitxor, 1, 1, 0),
    ROW(FM_BIN_LSHIFT, bin, lshift, 0, 1, 0),
    ROW(FM_BIN_RSHIFT, bin, rshift, 0, 1, 0),
    ROW(FM_BIN_ISCLOSE, bin, isclose, 1, 1, 1),
    ROW(FM_BIN_ADD_ALPHA, bin, add_alpha, 0, 1, 1),
};

/* ops whose output is bool */
static int bin_is_predicate(int op) {
    return (op >= FM_BIN_EQ && op <= FM_BIN_GE) ||
           (op >= FM_BIN_LOGICAL_AND && op <= FM_BIN_LOGICAL_XOR) || op == FM_BIN_ISCLOSE;
}

/* ---- unary ops ------------------------------------------------------------------------------- */
NUMERIC(UN_SAME, neg, -x)
FLOATS(UN_SAME, exp, EXP(x))
NUMERIC(UN_SAME, relu, x < 0 ? (VT(x))0 : x) /* NaN passes through */
INTS(UN_SAME, abs, x < 0 ? -x : x)
FLOATS(UN_SAME, abs, TG1(fabs, x))
ALL(UN_SAME, sign, (VT(x))((x > 0) - (x < 0)))
FLOATS(UN_SAME, exp2, TG1(exp2, x))
FLOATS(UN_SAME, expm1, EXPM1(x))
FLOATS(UN_SAME, log, LOG(x))
FLOATS(UN_SAME, log2, TG1(log2, x))
FLOATS(UN_SAME, log10, TG1(log10, x))
FLOATS(UN_SAME, log1p, LOG1P(x))
FLOATS(UN_SAME, sqrt, TG1(sqrt, x))
FLOATS(UN_SAME, rsqrt, 1 / TG1(sqrt, x))
NUMERIC(UN_SAME, square, x * x)
FLOATS(UN_SAME, reciprocal, 1 / x)
/* sin / cos: vectorised for |x| <= 1e6 in float (libm beyond), libm for float64 */
UN_FIX_TRIG(sin, h16, sin) UN_FIX_TRIG(sin, bf16, sin) UN_FIX_TRIG(sin, f32, sin)
UN_SAME(sin, f64, sin(x))
UN_FIX_TRIG(cos, h16, cos) UN_FIX_TRIG(cos, bf16, cos) UN_FIX_TRIG(cos, f32, cos)
UN_SAME(cos, f64, cos(x))
FLOATS(UN_SAME, tan, TG1(tan, x))
FLOATS(UN_SAME, asin, TG1(asin, x))
FLOATS(UN_SAME, acos, TG1(acos, x))
FLOATS(UN_SAME, atan, TG1(atan, x))
FLOATS(UN_SAME, sinh, TG1(sinh, x))
FLOATS(UN_SAME, cosh, TG1(cosh, x))
FLOATS(UN_SAME, tanh, TANH(x))
FLOATS(UN_SAME, asinh, TG1(asinh, x))
FLOATS(UN_SAME, acosh, TG1(acosh, x))
FLOATS(UN_SAME, atanh, TG1(atanh, x))
FLOATS(UN_SAME, sigmoid, SIGMOID(x))
FLOATS(UN_SAME, erf, ERF(x))
FLOATS(UN_SAME, erfc, ERFC(x))
INTS(UN_SAME, floor, x)
FLOATS(UN_SAME, floor, TG1(floor, x))
INTS(UN_SAME, ceil, x)
FLOATS(UN_SAME, ceil, TG1(ceil, x))
INTS(UN_SAME, round, x)
FLOATS(UN_SAME, round, TG1(nearbyint, x)) /* half to even */
INTS(UN_SAME, trunc, x)
FLOATS(UN_SAME, trunc, TG1(trunc, x))
FLOATS(UN_SAME, frac, x - TG1(trunc, x))
INTB(UN_BOOL, isnan, ((void)x, 0))
FLOATS(UN_BOOL, isnan, ISNAN(x))
INTB(UN_BOOL, isinf, ((void)x, 0))
FLOATS(UN_BOOL, isinf, TG1(fabs, x) == INFINITY)
INTB(UN_BOOL, isposinf, ((void)x, 0))
FLOATS(UN_BOOL, isposinf, x == INFINITY)
INTB(UN_BOOL, isneginf, ((void)x, 0))
FLOATS(UN_BOOL, isneginf, x == -INFINITY)
INTB(UN_BOOL, isfinite, ((void)x, 1))
FLOATS(UN_BOOL, isfinite, TG1(fabs, x) < INFINITY)
INTB(UN_BOOL, signbit, x < 0)
FLOATS(UN_BOOL, signbit, SIGNBIT(x))
FLOATS(UN_SAME, nan_to_num, ISNAN(x) ? (VT(x))P0 : x == INFINITY ? (VT(x))P1
                                                 : x == -INFINITY ? (VT(x))P2 : x)
ALL(UN_BOOL, logical_not, x == 0)
BOOLT(UN_SAME, bitwise_not, !x)
INTS(UN_SAME, bitwise_not, ~x)
FLOATS(UN_SAME, round_decimals,
       P1 != 0 ? TG1(nearbyint, x / (VT(x))P0) * (VT(x))P0
               : TG1(nearbyint, x * (VT(x))P0) / (VT(x))P0)
/* log(sigmoid(x)) = min(x, 0) - log1p(e^-|x|), stable for large |x| */
FLOATS(UN_SAME, log_sigmoid, (x < 0 ? x : (VT(x))0) - LOG1P(EXP(-TG1(fabs, x))))

static const fm_inner_fn un_table[FM_NUNARY][FM_NDTYPES] = {
    ROW(FM_UN_NEG, un, neg, 0, 1, 1),
    ROW(FM_UN_EXP, un, exp, 0, 0, 1),
    ROW(FM_UN_RELU, un, relu, 0, 1, 1),
    ROW(FM_UN_ABS, un, abs, 0, 1, 1),
    ROW(FM_UN_SIGN, un, sign, 1, 1, 1),
    ROW(FM_UN_EXP2, un, exp2, 0, 0, 1),
    ROW(FM_UN_EXPM1, un, expm1, 0, 0, 1),
    ROW(FM_UN_LOG, un, log, 0, 0, 1),
    ROW(FM_UN_LOG2, un, log2, 0, 0, 1),
    ROW(FM_UN_LOG10, un, log10, 0, 0, 1),
    ROW(FM_UN_LOG1P, un, log1p, 0, 0, 1),
    ROW(FM_UN_SQRT, un, sqrt, 0, 0, 1),
    ROW(FM_UN_RSQRT, un, rsqrt, 0, 0, 1),
    ROW(FM_UN_SQUARE, un, square, 0, 1, 1),
    ROW(FM_UN_RECIPROCAL, un, reciprocal, 0, 0, 1),
    ROW(FM_UN_SIN, un, sin, 0, 0, 1),
    ROW(FM_UN_COS, un, cos, 0, 0, 1),
    ROW(FM_UN_TAN, un, tan, 0, 0, 1),
    ROW(FM_UN_ASIN, un, asin, 0, 0, 1),
    ROW(FM_UN_ACOS, un, acos, 0, 0, 1),
    ROW(FM_UN_ATAN, un, atan, 0, 0, 1),
    ROW(FM_UN_SINH, un, sinh, 0, 0, 1),
    ROW(FM_UN_COSH, un, cosh, 0, 0, 1),
    ROW(FM_UN_TANH, un, tanh, 0, 0, 1),
    ROW(FM_UN_ASINH, un, asinh, 0, 0, 1),
    ROW(FM_UN_ACOSH, un, acosh, 0, 0, 1),
    ROW(FM_UN_ATANH, un, atanh, 0, 0, 1),
    ROW(FM_UN_SIGMOID, un, sigmoid, 0, 0, 1),
    ROW(FM_UN_ERF, un, erf, 0, 0, 1),
    ROW(FM_UN_ERFC, un, erfc, 0, 0, 1),
    ROW(FM_UN_FLOOR, un, floor, 0, 1, 1),
    ROW(FM_UN_CEIL, un, ceil, 0, 1, 1),
    ROW(FM_UN_ROUND, un, round, 0, 1, 1),
    ROW(FM_UN_TRUNC, un, trunc, 0, 1, 1),
    ROW(FM_UN_FRAC, un, frac, 0, 0, 1),
    ROW(FM_UN_ISNAN, un, isnan, 1, 1, 1),
    ROW(FM_UN_ISINF, un, isinf, 1, 1, 1),
    ROW(FM_UN_ISPOSINF, un, isposinf, 1, 1, 1),
    ROW(FM_UN_ISNEGINF, un, isneginf, 1, 1, 1),
    ROW(FM_UN_ISFINITE, un, isfinite, 1, 1, 1),
    ROW(FM_UN_SIGNBIT, un, signbit, 1, 1, 1),
    ROW(FM_UN_NAN_TO_NUM, un, nan_to_num, 0, 0, 1),
    ROW(FM_UN_LOGICAL_NOT, un, logical_not, 1, 1, 1),
    ROW(FM_UN_BITWISE_NOT, un, bitwise_not, 1, 1, 0),
    ROW(FM_UN_ROUND_DECIMALS, un, round_decimals, 0, 0, 1),
    ROW(FM_UN_LOG_SIGMOID, un, log_sigmoid, 0, 0, 1),
};

static int un_is_predicate(int op) {
    return (op >= FM_UN_ISNAN && op <= FM_UN_SIGNBIT) || op == FM_UN_LOGICAL_NOT;
}

/* ---- ternary ops ----------------------------------------------------------------------------- */
/* where moves bits: floats use the integer loop of their width (exact, NaN payloads kept) */
INTB(TER_COND, where, a ? b : c)
NUMERIC(TER, clamp, MINP(MAXP(a, b), c))
FLOATS(TER, lerp, TG1(fabs, c) < 0.5f ? a + c * (b - a) : b - (b - a) * (1 - c))
INTS(TER, addcmul, a + (VT(a))(int64_t)P0 * b * c)
FLOATS(TER, addcmul, a + (VT(a))P0 * b * c)
FLOATS(TER, addcdiv, a + (VT(a))P0 * b / c)

static const fm_inner_fn ter_table[FM_NTERNARY][FM_NDTYPES] = {
    [FM_TER_WHERE] = {ter_where_b, ter_where_u8, ter_where_i8, ter_where_i16, ter_where_i32,
                      ter_where_i64, ter_where_i16, ter_where_i16, ter_where_i32, ter_where_i64,
                      [FM_UINT16] = ter_where_i16, ter_where_i32, ter_where_i64},
    ROW(FM_TER_CLAMP, ter, clamp, 0, 1, 1),
    ROW(FM_TER_LERP, ter, lerp, 0, 0, 1),
    ROW(FM_TER_ADDCMUL, ter, addcmul, 0, 1, 1),
    ROW(FM_TER_ADDCDIV, ter, addcdiv, 0, 0, 1),
};

/* A bfloat16/float16 tensor times a number, or divided by one: computed in float32 with the number as a
   float32 (PyTorch's opmath rule: `x * 0.37` does not round 0.37 to the tensor's dtype first),
   then rounded to the dtype. p[0] the output, p[1] the tensor operand. */
typedef struct {
    int op, left;
    float v;
} lowp_ctx;

#define LOWP_LOOP(T, EXPR)                                                                      \
    for (int64_t k = 0; k < n; k++, o += s[0], a += s[1]) {                                    \
        const float x = LD_##T(a);                                                             \
        ST_##T(o, (EXPR));                                                                     \
    }

#define DEF_LOWP(T)                                                                             \
    static void lowp_##T(int64_t n, char **p, const int64_t *s, const void *ctx_) {           \
        const lowp_ctx *c = (const lowp_ctx *)ctx_;                                            \
        char *o = p[0];                                                                        \
        const char *a = p[1];                                                                  \
        const float v = c->v;                                                                  \
        switch (c->op) {                                                                       \
        case FM_BIN_ADD: LOWP_LOOP(T, x + v) break;                                            \
        case FM_BIN_SUB:                                                                       \
            if (c->left) { LOWP_LOOP(T, v - x) } else { LOWP_LOOP(T, x - v) }                  \
            break;                                                                             \
        case FM_BIN_MUL: LOWP_LOOP(T, x * v) break;                                            \
        default:                                                                               \
            if (c->left) { LOWP_LOOP(T, v / x) } else { LOWP_LOOP(T, x / v) }                  \
            break;                                                                             \
        }                                                                                      \
    }
DEF_LOWP(bf16)
DEF_LOWP(f16)

/* PyTorch keeps the number in float32 for * and for tensor / number; + and - round it to the
   tensor's dtype first (their alpha path), and number / tensor is reciprocal(tensor) * number:
   those keep the generic kernels, which match */
static fm_inner_fn lowp_fn(int op, int dtype, int left) {
    if (op != FM_BIN_MUL && !(op == FM_BIN_DIV && !left)) return NULL;
    return dtype == FM_BFLOAT16 ? lowp_bf16 : dtype == FM_FLOAT16 ? lowp_f16 : NULL;
}

/* ---- entry points ---------------------------------------------------------------------------- */
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

/* a scalar operand (a == 0 or b == 0): the value converted to dtype in C, read with stride 0 */
static const int64_t bin_zeros[FM_MAX_DIMS];

int fm_binary(int op, int dtype, int ndim, const int64_t *shape, intptr_t out,
              const int64_t *sout, intptr_t a, const int64_t *sa, intptr_t b, const int64_t *sb,
              double sf, int64_t si, double p0, double p1, double p2) {
    fm_inner_fn fn;
    int isz[3];
    int rc = bin_lookup(op, dtype, &fn, isz);
    if (rc) return rc;
    if (ndim < 0 || ndim > FM_MAX_DIMS) return FM_ERR_NDIM;
    if (!a && !b) return FM_ERR_ARG;
    if (!a || !b) {
        fm_inner_fn lf = lowp_fn(op, dtype, !a);
        if (lf) {
            lowp_ctx lc = {op, !a, (float)sf};
            char *lb[2] = {(char *)out, (char *)(a ? a : b)};
            const int64_t *ls[2] = {sout, a ? sa : sb};
            int lsz[2] = {fm_itemsize[dtype], fm_itemsize[dtype]};
            return fm_iterate(2, ndim, shape, lb, ls, lsz, lf, &lc);
        }
    }
    _Alignas(8) char buf[8];
    char *base[3] = {(char *)out, (char *)a, (char *)b};
    const int64_t *st[3] = {sout, sa, sb};
    if (!a || !b) {
        int k = a ? 2 : 1;
        fm_scalar_bytes(dtype, sf, si, !fm_is_float(dtype), buf);
        base[k] = buf;
        st[k] = bin_zeros;
    }
    bin_ctx ctx = {FM_OK, p0, p1, p2};
    rc = fm_iterate(3, ndim, shape, base, st, isz, fn, &ctx);
    return rc ? rc : ctx.status;
}

/* ---- threads for large contiguous operands ----------------------------------------------------
   A contiguous unary or binary op over EW_PAR_MIN elements or more is split into one range per
   thread (OpenMP, the library's thread setting; ranges start at multiples of 64 elements).
   These ops are bound by memory bandwidth, which one core of a server part cannot saturate: on
   2 cores a 10M-element float32 add takes ~7 ms on one thread and ~3.5 on two. Below the
   threshold the region's start-up costs more than it saves. After fork() the child stays on
   one thread (libgomp's pool does not survive a fork: a data-loader worker would hang). */
#define EW_PAR_MIN (1 << 17)

static volatile int ew_forked = 0;
static void ew_mark_forked(void) { ew_forked = 1; }
__attribute__((constructor)) static void ew_register_atfork(void) {
    pthread_atfork(NULL, NULL, ew_mark_forked);
}

static int ew_threads(int64_t n) {
    if (n < EW_PAR_MIN || ew_forked) return 1;
    int64_t nt = omp_get_max_threads(), cap = n / (EW_PAR_MIN / 2);
    nt = nt < cap ? nt : cap;
    return nt > 1 ? (int)nt : 1;
}

/* fn over n elements of the np operands (base, byte strides s; a stride 0 is a scalar) on nt
   threads; ctx is copied per thread; with np == 3 it is a bin_ctx, whose first nonzero status
   is returned */
static int ew_split(fm_inner_fn fn, int np, int64_t n, char **base, const int64_t *s,
                    const void *ctx, size_t ctx_size, int nt) {
    int status = FM_OK;
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        int64_t per = ((n + T - 1) / T + 63) & ~(int64_t)63;
        int64_t lo = per * t, hi = lo + per < n ? lo + per : n;
        if (lo < hi) {
            char *bt[4];
            _Alignas(16) char c[64];
            memcpy(c, ctx, ctx_size);
            for (int k = 0; k < np; k++) bt[k] = base[k] + lo * s[k];
            fn(hi - lo, bt, s, c);
            if (np == 3 && ((bin_ctx *)c)->status != FM_OK) {
#pragma omp critical(fm_ew_status)
                if (status == FM_OK) status = ((bin_ctx *)c)->status;
            }
        }
    }
    return status;
}

static int bin_contig(int op, int dtype, int64_t n, intptr_t out, intptr_t a, intptr_t b,
                      double sf, int64_t si) {
    fm_inner_fn fn;
    int isz[3];
    int rc = bin_lookup(op, dtype, &fn, isz);
    if (rc) return rc;
    if (n < 0 || (!a && !b)) return FM_ERR_ARG;
    if (n == 0) return FM_OK;
    if (!a || !b) {
        fm_inner_fn lf = lowp_fn(op, dtype, !a);
        if (lf) {
            lowp_ctx lc = {op, !a, (float)sf};
            char *lb[2] = {(char *)out, (char *)(a ? a : b)};
            int64_t ls[2] = {isz[0], isz[1]};
            lf(n, lb, ls, &lc);
            return FM_OK;
        }
    }
    _Alignas(8) char buf[8];
    char *base[3] = {(char *)out, (char *)a, (char *)b};
    int64_t s[3] = {isz[0], isz[1], isz[2]};
    if (!a || !b) {
        int k = a ? 2 : 1;
        fm_scalar_bytes(dtype, sf, si, !fm_is_float(dtype), buf);
        base[k] = buf;
        s[k] = 0;
    }
    bin_ctx ctx = {FM_OK, 0, 0, 0};
    int nt = ew_threads(n);
    if (nt > 1) return ew_split(fn, 3, n, base, s, &ctx, sizeof(ctx), nt);
    fn(n, base, s, &ctx);
    return ctx.status;
}

int fm_binary_contig(int op, int dtype, int64_t n, intptr_t out, intptr_t a, intptr_t b) {
    return bin_contig(op, dtype, n, out, a, b, 0, 0);
}

int fm_binary_scalar_contig(int op, int dtype, int64_t n, intptr_t out, intptr_t a, intptr_t b,
                            double sf, int64_t si) {
    if (a && b) return FM_ERR_ARG;
    return bin_contig(op, dtype, n, out, a, b, sf, si);
}

int fm_unary_out_dtype(int op, int dtype) {
    if (op < 0 || op >= FM_NUNARY || !fm_dtype_ok(dtype)) return -1;
    if (!un_table[op][dtype]) return -1;
    return un_is_predicate(op) ? FM_BOOL : dtype;
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
    int nt = ew_threads(n);
    if (nt > 1) return ew_split(un_table[op][dtype], 2, n, base, s, &ctx, sizeof(ctx), nt);
    un_table[op][dtype](n, base, s, &ctx);
    return FM_OK;
}

int fm_ternary_out_dtype(int op, int dtype) {
    if (op < 0 || op >= FM_NTERNARY || !fm_dtype_ok(dtype)) return -1;
    return ter_table[op][dtype] ? dtype : -1;
}

int fm_ternary(int op, int dtype, int ndim, const int64_t *shape, intptr_t out,
               const int64_t *sout, intptr_t a, const int64_t *sa, intptr_t b,
               const int64_t *sb, intptr_t c, const int64_t *sc, double bf, int64_t bi,
               double cf, int64_t ci, double p0) {
    if (op < 0 || op >= FM_NTERNARY) return FM_ERR_OP;
    if (fm_ternary_out_dtype(op, dtype) < 0) return FM_ERR_DTYPE;
    if (ndim < 0 || ndim > FM_MAX_DIMS) return FM_ERR_NDIM;
    int use_int = !fm_is_float(dtype);
    _Alignas(8) char bbuf[8], cbuf[8];
    int64_t zeros[FM_MAX_DIMS] = {0};
    char *base[4] = {(char *)out, (char *)a, (char *)b, (char *)c};
    const int64_t *st[4] = {sout, sa, sb, sc};
    if (!b) {
        fm_scalar_bytes(dtype, bf, bi, use_int, bbuf);
        base[2] = bbuf;
        st[2] = zeros;
    }
    if (!c) {
        fm_scalar_bytes(dtype, cf, ci, use_int, cbuf);
        base[3] = cbuf;
        st[3] = zeros;
    }
    int isz[4] = {fm_itemsize[dtype], op == FM_TER_WHERE ? 1 : fm_itemsize[dtype],
                  fm_itemsize[dtype], fm_itemsize[dtype]};
    ter_ctx ctx = {p0};
    return fm_iterate(4, ndim, shape, base, st, isz, ter_table[op][dtype], &ctx);
}
