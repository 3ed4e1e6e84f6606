/* Fused GELU forward and backward (one pass over memory each, instead of the five recorded ops
 * of the composition). float32 uses ferf.h's vectorisable erfc pieces and fmath.h's expf, in
 * contiguous loops compiled once per ISA level; float64 calls libm (erfc, exp) per element.
 *
 * Exact form, z = x / sqrt(2): 1 + erf(z) is computed as erfc(|z|) for x < 0 (no cancellation,
 * so the negative tail keeps its relative accuracy), 2 - erfc(|z|) for x >= 0, 1 + z P(z^2) for
 * |z| < 0.5; exp(-x^2/2) from an exact split of x^2 serves both erfc and the derivative
 * gelu'(x) = Phi(x) + x phi(x).
 * Tanh form, u = sqrt(2/pi) (x + 0.044715 x^3): 1 + tanh(u) = 2 / (1 + e) for u >= 0 and
 * 2 e / (1 + e) below, e = exp(-2|u|); 1 - tanh(u)^2 = 4 e / (1 + e)^2.
 * Beyond |x| = 16 (exact) or 12 (tanh) the results are the limits (x or -0; slope 1 or 0), which
 * also makes +-inf come out right instead of inf * 0.
 * Work above GELU_PAR_MIN elements is split over OpenMP threads (the exact form is compute-bound:
 * ~30 flops per element); a forked child stays single-threaded.
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <omp.h>
#include <pthread.h>

#include "dtypes.h"
#include "ferf.h"
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

/* 1 + erf(x / sqrt(2)) and exp(-x^2 / 2) for float x */
static inline float phi2_f(float x, float *e2) {
    float a = fabsf(x);
    a = a < 16.0f ? a : 16.0f;
    float hi, lo;
    fm_sqr2f(a, &hi, &lo);
    float e = fm_expf(-0.5f * hi) * (1.0f - 0.5f * lo);
    *e2 = e;
    float z = x * (float)INV_SQRT2;
    float small = 1.0f + z * fm_erf_small_poly(z * z);
    float tail = fm_erfc_tail(a * (float)INV_SQRT2, e);
    float big = x < 0.0f ? tail : 2.0f - tail;
    return fabsf(z) < 0.5f ? small : big;
}

FM_CLONES static void gelu_fwd_f(int64_t n, const float *FM_RESTRICT x, float *FM_RESTRICT y) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], e;
        float r = 0.5f * v * phi2_f(v, &e);
        r = v > 16.0f ? v : r;
        y[i] = v < -16.0f ? -0.0f : r;
    }
}

FM_CLONES static void gelu_bwd_f(int64_t n, const float *FM_RESTRICT g,
                                 const float *FM_RESTRICT x, float *FM_RESTRICT gx) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], e;
        float p = phi2_f(v, &e);
        float d = 0.5f * p + v * e * (float)INV_SQRT_2PI;
        d = v > 16.0f ? 1.0f : d;
        d = v < -16.0f ? 0.0f : d;
        gx[i] = g[i] * d;
    }
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
        if (!bwd) {
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
