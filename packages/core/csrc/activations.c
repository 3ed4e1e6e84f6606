/* Fused GELU forward and backward (one pass over memory each, instead of the five recorded ops
 * of the composition). The exact form in float32 is gelu_f32.h (a branch-free erfc and exp the
 * compiler vectorises, one copy per x86-64 ISA level picked at load time, see there); the tanh
 * form uses fmath.h's expf in contiguous loops compiled once per ISA level (FM_CLONES);
 * float64 calls libm (erfc, exp) per element.
 *
 * Tanh form, u = sqrt(2/pi) (x + 0.044715 x^3): 1 + tanh(u) = 2 / (1 + e) for u >= 0 and
 * 2 e / (1 + e) below, e = exp(-2|u|); 1 - tanh(u)^2 = 4 e / (1 + e)^2.
 * Beyond |x| = 14.5 (exact, float32) or 12 (tanh) the results are the limits (x or -0; slope 1 or 0), which
 * also makes +-inf come out right instead of inf * 0.
 * Work above GELU_PAR_MIN elements is split over OpenMP threads (the exact form is compute-bound:
 * ~60 flops per element); a forked child stays single-threaded.
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <omp.h>
#include <pthread.h>

#include "dtypes.h"
#include "fmath.h"
#include "api_activations.h"

#define GELU_PAR_MIN (1 << 16)
#define GELU_CHUNK (1 << 14)
#define INV_SQRT2 0.70710678118654752440
#define INV_SQRT_2PI 0.39894228040143267794
#define TANH_K 0.79788456080286535588
#define TANH_C 0.044715

static volatile int act_forked = 0;
static void act_mark_forked(void) { act_forked = 1; }
__attribute__((constructor)) static void act_register_atfork(void) {
    pthread_atfork(NULL, NULL, act_mark_forked);
}

/* exact form, float32: gelu_f32.h compiled per ISA level, picked once at run time */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GELU_FMA 1
#define GELU_TARGET __attribute__((target("arch=x86-64-v4")))
#define GF(name) name##_v4
#include "gelu_f32.h"
#undef GELU_TARGET
#undef GF
#define GELU_TARGET __attribute__((target("arch=x86-64-v3")))
#define GF(name) name##_v3
#include "gelu_f32.h"
#undef GELU_TARGET
#undef GF
#undef GELU_FMA
#define GELU_FMA 0
#define GELU_TARGET
#define GF(name) name##_base
#include "gelu_f32.h"
#undef GELU_TARGET
#undef GF
#undef GELU_FMA

typedef void (*gelu_fwd_fn)(int64_t, const float *, float *);
typedef void (*gelu_bwd_fn)(int64_t, const float *, const float *, float *);
typedef void (*gelu_fwdd_fn)(int64_t, const float *, float *, float *);

static void gelu_f_pick(gelu_fwd_fn *fwd, gelu_bwd_fn *bwd, gelu_fwdd_fn *fwdd) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4")) {
        *fwd = gelu_fwd_f_v4;
        *bwd = gelu_bwd_f_v4;
        *fwdd = gelu_fwdd_f_v4;
    } else if (__builtin_cpu_supports("x86-64-v3")) {
        *fwd = gelu_fwd_f_v3;
        *bwd = gelu_bwd_f_v3;
        *fwdd = gelu_fwdd_f_v3;
    } else {
        *fwd = gelu_fwd_f_base;
        *bwd = gelu_bwd_f_base;
        *fwdd = gelu_fwdd_f_base;
    }
}
#else
#ifdef __FP_FAST_FMAF
#define GELU_FMA 1
#else
#define GELU_FMA 0
#endif
#define GELU_TARGET
#define GF(name) name##_base
#include "gelu_f32.h"
#undef GELU_TARGET
#undef GF
#undef GELU_FMA

typedef void (*gelu_fwd_fn)(int64_t, const float *, float *);
typedef void (*gelu_bwd_fn)(int64_t, const float *, const float *, float *);
typedef void (*gelu_fwdd_fn)(int64_t, const float *, float *, float *);

static void gelu_f_pick(gelu_fwd_fn *fwd, gelu_bwd_fn *bwd, gelu_fwdd_fn *fwdd) {
    *fwd = gelu_fwd_f_base;
    *bwd = gelu_bwd_f_base;
    *fwdd = gelu_fwdd_f_base;
}
#endif

static gelu_fwd_fn gelu_fwd_f;
static gelu_bwd_fn gelu_bwd_f;
static gelu_fwdd_fn gelu_fwdd_f;

__attribute__((constructor)) static void gelu_f_init(void) {
    gelu_f_pick(&gelu_fwd_f, &gelu_bwd_f, &gelu_fwdd_f);
}

/* 1 + tanh(u) and 1 - tanh(u)^2 for float x; u and 2|u| in double, split into float hi + lo
   for exp (u rounded to float would cost ~|u| ulps in the tails) */
static inline float tanh_parts_f(float x, float *sech2) {
    double xd = (double)x;
    double ud = TANH_K * xd * (1.0 + TANH_C * xd * xd);
    double m = -2.0 * fabs(ud);
    m = m > -110.0 ? m : -110.0;
    float h = (float)m;
    float e = fm_expf(h) * (1.0f + (float)(m - (double)h));
    float s = 1.0f / (1.0f + e);
    *sech2 = 4.0f * e * s * s;
    return ud >= 0.0 ? 2.0f * s : 2.0f * e * s;
}

FM_CLONES static void gelu_tanh_fwd_f(int64_t n, const float *FM_RESTRICT x,
                                      float *FM_RESTRICT y) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], s2;
        float r = 0.5f * v * tanh_parts_f(v, &s2);
        r = v > 12.0f ? v : r;
        y[i] = v < -12.0f ? -0.0f : r;
    }
}

FM_CLONES static void gelu_tanh_bwd_f(int64_t n, const float *FM_RESTRICT g,
                                      const float *FM_RESTRICT x, float *FM_RESTRICT gx) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], s2;
        float p = tanh_parts_f(v, &s2);
        float du = (float)TANH_K * (1.0f + 3.0f * (float)TANH_C * v * v);
        float d = 0.5f * p + 0.5f * v * s2 * du;
        d = v > 12.0f ? 1.0f : d;
        d = v < -12.0f ? 0.0f : d;
        gx[i] = g[i] * d;
    }
}

/* float64: libm per element */
static inline double phi2_d(double x) { return erfc(-x * INV_SQRT2); }
static inline double tanh_parts_d(double x, double *sech2) {
    double u = TANH_K * x * (1.0 + TANH_C * x * x);
    double e = exp(-2.0 * fabs(u));
    double s = 1.0 / (1.0 + e);
    *sech2 = 4.0 * e * s * s;
    return u >= 0.0 ? 2.0 * s : 2.0 * e * s;
}

static void gelu_fwd_d(int approx, int64_t n, const double *x, double *y) {
    for (int64_t i = 0; i < n; i++) {
        double v = x[i], s2;
        if (v > (approx ? 12.0 : 40.0)) y[i] = v;
        else if (v < (approx ? -30.0 : -40.0)) y[i] = -0.0; /* below double's subnormals */
        else y[i] = 0.5 * v * (approx ? tanh_parts_d(v, &s2) : phi2_d(v));
    }
}

static void gelu_bwd_d(int approx, int64_t n, const double *g, const double *x, double *gx) {
    for (int64_t i = 0; i < n; i++) {
        double v = x[i], d, s2;
        if (v > (approx ? 24.0 : 40.0)) d = 1.0;
        else if (v < (approx ? -30.0 : -40.0)) d = 0.0;
        else if (approx) {
            double p = tanh_parts_d(v, &s2);
            d = 0.5 * p + 0.5 * v * s2 * TANH_K * (1.0 + 3.0 * TANH_C * v * v);
        } else {
            d = 0.5 * phi2_d(v) + v * exp(-0.5 * v * v) * INV_SQRT_2PI;
        }
        gx[i] = g[i] * d;
    }
}

static void gelu_piece(int dtype, int approx, int bwd, int64_t o, int64_t n, intptr_t g,
                       intptr_t x, intptr_t y) {
    if (dtype == FM_FLOAT32) {
        const float *xf = (const float *)x + o;
        float *yf = (float *)y + o;
        if (bwd == 2) { /* forward, and the derivative into g (exact form only) */
            gelu_fwdd_f(n, xf, yf, (float *)g + o);
        } else if (!bwd) {
            if (approx) gelu_tanh_fwd_f(n, xf, yf);
            else gelu_fwd_f(n, xf, yf);
        } else {
            const float *gf = (const float *)g + o;
            if (approx) gelu_tanh_bwd_f(n, gf, xf, yf);
            else gelu_bwd_f(n, gf, xf, yf);
        }
    } else {
        if (!bwd) gelu_fwd_d(approx, n, (const double *)x + o, (double *)y + o);
        else gelu_bwd_d(approx, n, (const double *)g + o, (const double *)x + o, (double *)y + o);
    }
}

static int gelu_run(int dtype, int approx, int bwd, int64_t n, intptr_t g, intptr_t x,
                    intptr_t y) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (approx != FM_GELU_NONE && approx != FM_GELU_TANH) return FM_ERR_ARG;
    if (n < 0 || (n > 0 && (!x || !y || (bwd && !g)))) return FM_ERR_ARG;
    int nth = n >= GELU_PAR_MIN && !act_forked ? omp_get_max_threads() : 1;
    if (nth > 1) {
        int64_t np = (n + GELU_CHUNK - 1) / GELU_CHUNK;
#pragma omp parallel for num_threads(nth) schedule(static)
        for (int64_t k = 0; k < np; k++) {
            int64_t o = k * GELU_CHUNK;
            gelu_piece(dtype, approx, bwd, o, n - o < GELU_CHUNK ? n - o : GELU_CHUNK, g, x, y);
        }
    } else {
        gelu_piece(dtype, approx, bwd, 0, n, g, x, y);
    }
    return FM_OK;
}

int fm_gelu_fwd(int dtype, int approximate, int64_t n, intptr_t x, intptr_t y) {
    return gelu_run(dtype, approximate, 0, n, 0, x, y);
}

int fm_gelu_bwd(int dtype, int approximate, int64_t n, intptr_t g, intptr_t x, intptr_t gx) {
    return gelu_run(dtype, approximate, 1, n, g, x, gx);
}

int fm_gelu_fwd_grad(int dtype, int approximate, int64_t n, intptr_t x, intptr_t y, intptr_t d) {
    if (dtype != FM_FLOAT32 || approximate != FM_GELU_NONE) return FM_ERR_OP;
    if (n > 0 && !d) return FM_ERR_ARG;
    return gelu_run(dtype, approximate, 2, n, d, x, y);
}

/* ---- ReLU backward: one pass (the composition is a comparison into a bool mask, then a where);
   a NaN output passes its gradient, as PyTorch's threshold_backward (y <= 0 gives 0) */

#define RELU_PAR_MIN (1 << 18) /* memory-bound: threads pay off only on large tensors */
#define RELU_CHUNK (1 << 15)

FM_CLONES static void relu_bwd_f(int64_t n, const float *g, const float *y, float *gx) {
    for (int64_t i = 0; i < n; i++) gx[i] = y[i] <= 0.0f ? 0.0f : g[i];
}

FM_CLONES static void relu_bwd_d(int64_t n, const double *g, const double *y, double *gx) {
    for (int64_t i = 0; i < n; i++) gx[i] = y[i] <= 0.0 ? 0.0 : g[i];
}

static void relu_piece(int dtype, int64_t o, int64_t n, intptr_t g, intptr_t y, intptr_t gx) {
    if (dtype == FM_FLOAT32)
        relu_bwd_f(n, (const float *)g + o, (const float *)y + o, (float *)gx + o);
    else
        relu_bwd_d(n, (const double *)g + o, (const double *)y + o, (double *)gx + o);
}

int fm_relu_bwd(int dtype, int64_t n, intptr_t g, intptr_t y, intptr_t gx) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (n < 0 || (n > 0 && (!g || !y || !gx))) return FM_ERR_ARG;
    int nth = n >= RELU_PAR_MIN && !act_forked ? omp_get_max_threads() : 1;
    if (nth > 1) {
        int64_t np = (n + RELU_CHUNK - 1) / RELU_CHUNK;
#pragma omp parallel for num_threads(nth) schedule(static)
        for (int64_t k = 0; k < np; k++) {
            int64_t o = k * RELU_CHUNK;
            relu_piece(dtype, o, n - o < RELU_CHUNK ? n - o : RELU_CHUNK, g, y, gx);
        }
    } else {
        relu_piece(dtype, 0, n, g, y, gx);
    }
    return FM_OK;
}

/* ---- parameterised activations (api_activations.h, FM_ACT_*): one pass forward and backward.
 * Each kind is its own loop (the switch is outside it) so the float32 loops vectorise with
 * fmath.h's branch-free exp/log1p/tanh/sigmoid in the per-ISA clones; float64 uses libm. Selects
 * are written so NaN takes the branch PyTorch's kernels give it (std::max(a, b) = a < b ? b : a). */

#define ACT_PAR_MIN (1 << 16)
#define ACT_CHUNK (1 << 14)

#define ACT_LOOPS(T, SFX, EXP, EXPM1, LOG1P, TANH, ABS)                                    \
    FM_CLONES static int act_fwd_##SFX(int kind, int64_t n, const T *x, T *y, T p0, T p1,      \
                                       T p2) {                                                  \
        switch (kind) {                                                                         \
        case FM_ACT_SILU:                                                                       \
            for (int64_t i = 0; i < n; i++) y[i] = x[i] / ((T)1 + EXP(-x[i]));                 \
            return FM_OK;                                                                       \
        case FM_ACT_LEAKY_RELU:                                                                 \
            for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : x[i] * p0;                \
            return FM_OK;                                                                       \
        case FM_ACT_ELU:                                                                        \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T v = x[i];                                                                     \
                T neg = EXPM1(v * p2) * (p0 * p1);                                              \
                y[i] = v <= 0 ? neg : v * p1;                                                   \
            }                                                                                   \
            return FM_OK;                                                                       \
        case FM_ACT_HARDSWISH:                                                                  \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T t = x[i] + (T)3;                                                              \
                t = t < 0 ? (T)0 : t;                                                           \
                t = (T)6 < t ? (T)6 : t;                                                        \
                y[i] = x[i] * t / (T)6;                                                         \
            }                                                                                   \
            return FM_OK;                                                                       \
        case FM_ACT_HARDSIGMOID:                                                                \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T t = x[i] + (T)3;                                                              \
                t = t < 0 ? (T)0 : t;                                                           \
                t = (T)6 < t ? (T)6 : t;                                                        \
                y[i] = t / (T)6;                                                                \
            }                                                                                   \
            return FM_OK;                                                                       \
        case FM_ACT_SOFTPLUS:                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T bx = x[i] * p0;                                                               \
                T soft = LOG1P(EXP(bx)) / p0;                                                   \
                y[i] = bx > p1 ? x[i] : soft;                                                   \
            }                                                                                   \
            return FM_OK;                                                                       \
        case FM_ACT_MISH:                                                                       \
            for (int64_t i = 0; i < n; i++) y[i] = x[i] * TANH(LOG1P(EXP(x[i])));              \
            return FM_OK;                                                                       \
        case FM_ACT_HARDTANH:                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T v = x[i];                                                                     \
                T r = v < p0 ? p0 : v;                                                          \
                y[i] = r > p1 ? p1 : r;                                                         \
            }                                                                                   \
            return FM_OK;                                                                       \
        case FM_ACT_SOFTSHRINK:                                                                 \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T v = x[i];                                                                     \
                T r = v < -p0 ? v + p0 : v * (T)0;                                              \
                y[i] = v > p0 ? v - p0 : r;                                                     \
            }                                                                                   \
            return FM_OK;                                                                       \
        case FM_ACT_HARDSHRINK:                                                                 \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T v = x[i];                                                                     \
                y[i] = (v >= -p0 && v <= p0) ? (T)0 : v;                                        \
            }                                                                                   \
            return FM_OK;                                                                       \
        case FM_ACT_THRESHOLD:                                                                  \
            for (int64_t i = 0; i < n; i++) y[i] = x[i] <= p0 ? p1 : x[i];                      \
            return FM_OK;                                                                       \
        case FM_ACT_LOG_SIGMOID:                                                                \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T v = x[i];                                                                     \
                T m = v < 0 ? v : (T)0;                                                         \
                y[i] = m - LOG1P(EXP(-ABS(v)));                                                 \
            }                                                                                   \
            return FM_OK;                                                                       \
        }                                                                                       \
        return FM_ERR_OP;                                                                       \
    }                                                                                           \
    FM_CLONES static int act_bwd_##SFX(int kind, int64_t n, const T *g, const T *x, T *gx,     \
                                       T p0, T p1, T p2) {                                      \
        switch (kind) {                                                                         \
        case FM_ACT_SILU:                                                                       \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T s = (T)1 / ((T)1 + EXP(-x[i]));                                               \
                gx[i] = g[i] * s * ((T)1 + x[i] * ((T)1 - s));                                  \
            }                                                                                   \
            return FM_OK;                                                                       \
        case FM_ACT_LEAKY_RELU:                                                                 \
            for (int64_t i = 0; i < n; i++) gx[i] = x[i] > 0 ? g[i] : g[i] * p0;               \
            return FM_OK;                                                                       \
        case FM_ACT_ELU:                                                                        \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T v = x[i];                                                                     \
                T neg = g[i] * (p2 * (p0 * p1)) * EXP(v * p2);                                  \
                gx[i] = v <= 0 ? neg : g[i] * p1;                                               \
            }                                                                                   \
            return FM_OK;                                                                       \
        case FM_ACT_HARDSWISH:                                                                  \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T v = x[i];                                                                     \
                T mid = g[i] * (v / (T)3 + (T)0.5);                                             \
                T r = v < (T)3 ? mid : g[i];                                                    \
                gx[i] = v <= (T)-3 ? (T)0 : r;                                                  \
            }                                                                                   \
            return FM_OK;                                                                       \
        case FM_ACT_HARDSIGMOID:                                                                \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T v = x[i];                                                                     \
                gx[i] = (v > (T)-3 && v < (T)3) ? g[i] / (T)6 : (T)0;                           \
            }                                                                                   \
            return FM_OK;                                                                       \
        case FM_ACT_SOFTPLUS:                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T bx = x[i] * p0;                                                               \
                T z = EXP(bx);                                                                  \
                T soft = g[i] * z / (z + (T)1);                                                 \
                gx[i] = bx > p1 ? g[i] : soft;                                                  \
            }                                                                                   \
            return FM_OK;                                                                       \
        case FM_ACT_MISH:                                                                       \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T v = x[i];                                                                     \
                T t = TANH(LOG1P(EXP(v)));                                                      \
                T s = (T)1 / ((T)1 + EXP(-v));                                                  \
                gx[i] = g[i] * (t + v * s * ((T)1 - t * t));                                    \
            }                                                                                   \
            return FM_OK;                                                                       \
        case FM_ACT_SIGMOID:                                                                    \
            for (int64_t i = 0; i < n; i++) gx[i] = g[i] * ((T)1 - x[i]) * x[i];                \
            return FM_OK;                                                                       \
        case FM_ACT_TANH:                                                                       \
            for (int64_t i = 0; i < n; i++) gx[i] = g[i] * ((T)1 - x[i] * x[i]);                \
            return FM_OK;                                                                       \
        case FM_ACT_HARDTANH:                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T v = x[i];                                                                     \
                gx[i] = (v <= p0 || v >= p1) ? (T)0 : g[i];                                     \
            }                                                                                   \
            return FM_OK;                                                                       \
        case FM_ACT_SOFTSHRINK:                                                                 \
        case FM_ACT_HARDSHRINK:                                                                 \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T v = x[i];                                                                     \
                gx[i] = (v >= -p0 && v <= p0) ? (T)0 : g[i];                                    \
            }                                                                                   \
            return FM_OK;                                                                       \
        case FM_ACT_THRESHOLD:                                                                  \
            for (int64_t i = 0; i < n; i++) gx[i] = x[i] <= p0 ? (T)0 : g[i];                   \
            return FM_OK;                                                                       \
        case FM_ACT_LOG_SIGMOID:                                                                \
            for (int64_t i = 0; i < n; i++) {                                                   \
                T v = x[i];                                                                     \
                T z = EXP(-ABS(v));                                                             \
                T q = z / ((T)1 + z);                                                           \
                gx[i] = g[i] * (v < 0 ? (T)1 - q : q);                                          \
            }                                                                                   \
            return FM_OK;                                                                       \
        }                                                                                       \
        return FM_ERR_OP;                                                                       \
    }

ACT_LOOPS(float, f, fm_expf, fm_expm1f, fm_log1pf, fm_tanhf, fabsf)
ACT_LOOPS(double, d, exp, expm1, log1p, tanh, fabs)

static int act_piece(int dtype, int kind, int bwd, int64_t o, int64_t n, intptr_t g, intptr_t x,
                     intptr_t y, double p0, double p1, double p2) {
    if (dtype == FM_FLOAT32) {
        if (bwd)
            return act_bwd_f(kind, n, (const float *)g + o, (const float *)x + o, (float *)y + o,
                             (float)p0, (float)p1, (float)p2);
        return act_fwd_f(kind, n, (const float *)x + o, (float *)y + o, (float)p0, (float)p1,
                         (float)p2);
    }
    if (bwd)
        return act_bwd_d(kind, n, (const double *)g + o, (const double *)x + o, (double *)y + o,
                         p0, p1, p2);
    return act_fwd_d(kind, n, (const double *)x + o, (double *)y + o, p0, p1, p2);
}

static int act_run(int dtype, int kind, int bwd, int64_t n, intptr_t g, intptr_t x, intptr_t y,
                   double p0, double p1, double p2) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (kind < FM_ACT_SILU || kind > FM_ACT_TANH) return FM_ERR_OP;
    if (!bwd && (kind == FM_ACT_SIGMOID || kind == FM_ACT_TANH))
        return FM_ERR_OP; /* forward: the unary ops */
    if (n < 0 || (n > 0 && (!x || !y || (bwd && !g)))) return FM_ERR_ARG;
    /* the cheap kinds are memory-bound: threads only on large tensors */
    int cheap = kind == FM_ACT_LEAKY_RELU || kind == FM_ACT_HARDSWISH ||
                kind == FM_ACT_HARDSIGMOID || kind == FM_ACT_SIGMOID || kind >= FM_ACT_HARDTANH;
    int64_t par_min = cheap ? RELU_PAR_MIN : ACT_PAR_MIN;
    int nth = n >= par_min && !act_forked ? omp_get_max_threads() : 1;
    if (nth > 1) {
        int64_t np = (n + ACT_CHUNK - 1) / ACT_CHUNK;
#pragma omp parallel for num_threads(nth) schedule(static)
        for (int64_t k = 0; k < np; k++) {
            int64_t o = k * ACT_CHUNK;
            act_piece(dtype, kind, bwd, o, n - o < ACT_CHUNK ? n - o : ACT_CHUNK, g, x, y, p0, p1,
                      p2);
        }
        return FM_OK;
    }
    return act_piece(dtype, kind, bwd, 0, n, g, x, y, p0, p1, p2);
}

int fm_act_fwd(int dtype, int kind, int64_t n, intptr_t x, intptr_t y, double p0, double p1,
               double p2) {
    return act_run(dtype, kind, 0, n, 0, x, y, p0, p1, p2);
}

int fm_act_bwd(int dtype, int kind, int64_t n, intptr_t g, intptr_t x, intptr_t gx, double p0,
               double p1, double p2) {
    return act_run(dtype, kind, 1, n, g, x, gx, p0, p1, p2);
}
