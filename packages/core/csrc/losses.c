/* Fused elementwise losses (api_losses.h has the formulas): one pass forward, computing the
 * elementwise loss or summing it in the same pass, and one pass backward writing the input's
 * and the target's gradients together. The composition was two to eight recorded ops each way.
 *
 * Work goes in blocks of LOSS_BLOCK elements (a block never crosses the end of a weight's
 * period, so each block reads its weights contiguously); a reduced forward writes the block's
 * losses into a stack buffer and sums it with 16 independent partial sums (vectorised), the
 * block totals in double. Each kind is its own loop (the switch is outside it) so the float32
 * loops vectorise with fmath.h's branch-free exp/log/log1p in the per-ISA clones; float64 uses
 * libm. Selects are written so NaN takes the branch PyTorch's kernels give it.
 * Above LOSS_PAR_MIN elements chunks of LOSS_CHUNK go to OpenMP threads; the chunk sums are
 * added in chunk order, so a reduced loss does not depend on the thread count.
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>

#include "dtypes.h"
#include "fmath.h"
#include "api_losses.h"

#define LOSS_BLOCK 512
#define LOSS_CHUNK (1 << 15)
#define LOSS_PAR_MIN (1 << 17)
#define LOSS_PAR_MIN_CHEAP (1 << 19) /* mse, l1, smooth_l1, huber: memory-bound */

static volatile int loss_forked = 0;
static void loss_mark_forked(void) { loss_forked = 1; }
__attribute__((constructor)) static void loss_register_atfork(void) {
    pthread_atfork(NULL, NULL, loss_mark_forked);
}

static inline double fm_sigmoid_d(double x) {
    double e = exp(-fabs(x));
    return (x >= 0.0 ? 1.0 : e) / (1.0 + e);
}

/* PyTorch's BCE gradient floor, a C float constant 1e-12 */
#define BCE_EPS 9.999999960041972e-13

/* the next chunk of elements [o, o1): at most LOSS_BLOCK, and not past the end of a period of
   the weight (wn elements, 0: none) or of pos_weight (pn); *wo / *po: the offsets into them */
static inline int64_t loss_chunk(int64_t o, int64_t o1, int64_t wn, int64_t pn, int64_t *wo,
                                 int64_t *po) {
    int64_t m = o1 - o < LOSS_BLOCK ? o1 - o : LOSS_BLOCK;
    *wo = *po = 0;
    if (wn) {
        *wo = o % wn;
        if (m > wn - *wo) m = wn - *wo;
    }
    if (pn) {
        *po = o % pn;
        if (m > pn - *po) m = pn - *po;
    }
    return m;
}

#define LOSS_LOOPS(T, SFX, EXP, LOG, LOG1P, SIGMOID, ABS)                                        \
    /* y[i] = the unweighted loss of element i */                                                 \
    FM_CLONES static int lossv_##SFX(int kind, int64_t m, const T *FM_RESTRICT x,                 \
                                     const T *FM_RESTRICT t, const T *FM_RESTRICT pw, T p0,       \
                                     T *FM_RESTRICT y) {                                          \
        switch (kind) {                                                                           \
        case FM_LOSS_MSE:                                                                         \
            for (int64_t i = 0; i < m; i++) {                                                     \
                T d = x[i] - t[i];                                                                \
                y[i] = d * d;                                                                     \
            }                                                                                     \
            return FM_OK;                                                                         \
        case FM_LOSS_L1:                                                                          \
            for (int64_t i = 0; i < m; i++) y[i] = ABS(x[i] - t[i]);                              \
            return FM_OK;                                                                         \
        case FM_LOSS_SMOOTH_L1: {                                                                 \
            T hb = (T)0.5 * p0, ib = (T)0.5 / p0;                                                 \
            for (int64_t i = 0; i < m; i++) {                                                     \
                T a = ABS(x[i] - t[i]);                                                           \
                y[i] = a < p0 ? a * a * ib : a - hb;                                              \
            }                                                                                     \
            return FM_OK;                                                                         \
        }                                                                                         \
        case FM_LOSS_HUBER: {                                                                     \
            T hd = (T)0.5 * p0;                                                                   \
            for (int64_t i = 0; i < m; i++) {                                                     \
                T a = ABS(x[i] - t[i]);                                                           \
                y[i] = a <= p0 ? (T)0.5 * a * a : p0 * (a - hd);                                  \
            }                                                                                     \
            return FM_OK;                                                                         \
        }                                                                                         \
        case FM_LOSS_BCE:                                                                         \
            for (int64_t i = 0; i < m; i++) {                                                     \
                T lx = LOG(x[i]), l1x = LOG1P(-x[i]);                                             \
                lx = lx < (T)-100 ? (T)-100 : lx;                                                 \
                l1x = l1x < (T)-100 ? (T)-100 : l1x;                                              \
                y[i] = (t[i] - (T)1) * l1x - t[i] * lx;                                           \
            }                                                                                     \
            return FM_OK;                                                                         \
        case FM_LOSS_BCE_LOGITS:                                                                  \
            if (pw) {                                                                             \
                for (int64_t i = 0; i < m; i++) {                                                 \
                    T v = x[i], nv = -v;                                                          \
                    T sp = (nv > 0 ? nv : (T)0) + LOG1P(EXP(-ABS(v)));                            \
                    T lw = (T)1 + (pw[i] - (T)1) * t[i];                                          \
                    y[i] = ((T)1 - t[i]) * v + lw * sp;                                           \
                }                                                                                 \
            } else {                                                                              \
                for (int64_t i = 0; i < m; i++) {                                                 \
                    T v = x[i], nv = -v;                                                          \
                    T sp = (nv > 0 ? nv : (T)0) + LOG1P(EXP(-ABS(v)));                            \
                    y[i] = ((T)1 - t[i]) * v + sp;                                                \
                }                                                                                 \
            }                                                                                     \
            return FM_OK;                                                                         \
        case FM_LOSS_SOFT_MARGIN:                                                                 \
            for (int64_t i = 0; i < m; i++) {                                                     \
                T z = -t[i] * x[i];                                                               \
                y[i] = (z > 0 ? z : (T)0) + LOG1P(EXP(-ABS(z)));                                  \
            }                                                                                     \
            return FM_OK;                                                                         \
        case FM_LOSS_KL_DIV:                                                                      \
            for (int64_t i = 0; i < m; i++) {                                                     \
                T tv = t[i];                                                                      \
                T tl = tv * LOG(tv);                                                              \
                tl = tv == 0 ? (T)0 : tl;                                                         \
                y[i] = tl - tv * x[i];                                                            \
            }                                                                                     \
            return FM_OK;                                                                         \
        case FM_LOSS_KL_DIV_LOG:                                                                  \
            for (int64_t i = 0; i < m; i++) y[i] = EXP(t[i]) * (t[i] - x[i]);                     \
            return FM_OK;                                                                         \
        }                                                                                         \
        return FM_ERR_OP;                                                                         \
    }                                                                                             \
    /* gx[i] = c[i] dl/dx, gt[i] = c[i] dl/dt */                                                  \
    FM_CLONES static int lossd_##SFX(int kind, int64_t m, const T *FM_RESTRICT x,                 \
                                     const T *FM_RESTRICT t, const T *FM_RESTRICT pw, T p0,       \
                                     const T *FM_RESTRICT c, T *FM_RESTRICT gx,                   \
                                     T *FM_RESTRICT gt) {                                         \
        switch (kind) {                                                                           \
        case FM_LOSS_MSE:                                                                         \
            for (int64_t i = 0; i < m; i++) {                                                     \
                T r = (T)2 * c[i] * (x[i] - t[i]);                                                \
                gx[i] = r;                                                                        \
                gt[i] = -r;                                                                       \
            }                                                                                     \
            return FM_OK;                                                                         \
        case FM_LOSS_L1:                                                                          \
            for (int64_t i = 0; i < m; i++) {                                                     \
                T d = x[i] - t[i];                                                                \
                T s = d > 0 ? (T)1 : (d < 0 ? (T)-1 : (T)0); /* sign: 0 for NaN, as PyTorch */    \
                gx[i] = c[i] * s;                                                                 \
                gt[i] = -(c[i] * s);                                                              \
            }                                                                                     \
            return FM_OK;                                                                         \
        case FM_LOSS_SMOOTH_L1: {                                                                 \
            T ib = (T)1 / p0;                                                                     \
            for (int64_t i = 0; i < m; i++) {                                                     \
                T d = x[i] - t[i];                                                                \
                T s = d < -p0 ? (T)-1 : (d > p0 ? (T)1 : d * ib);                                 \
                gx[i] = c[i] * s;                                                                 \
                gt[i] = -(c[i] * s);                                                              \
            }                                                                                     \
            return FM_OK;                                                                         \
        }                                                                                         \
        case FM_LOSS_HUBER:                                                                       \
            for (int64_t i = 0; i < m; i++) {                                                     \
                T d = x[i] - t[i];                                                                \
                T s = d < -p0 ? -p0 : (d > p0 ? p0 : d);                                          \
                gx[i] = c[i] * s;                                                                 \
                gt[i] = -(c[i] * s);                                                              \
            }                                                                                     \
            return FM_OK;                                                                         \
        case FM_LOSS_BCE:                                                                         \
            for (int64_t i = 0; i < m; i++) {                                                     \
                T v = x[i];                                                                       \
                T den = ((T)1 - v) * v;                                                           \
                den = den < (T)BCE_EPS ? (T)BCE_EPS : den;                                        \
                gx[i] = c[i] * (v - t[i]) / den;                                                  \
                T lx = LOG(v), l1x = LOG1P(-v);                                                   \
                lx = lx < (T)-100 ? (T)-100 : lx;                                                 \
                l1x = l1x < (T)-100 ? (T)-100 : l1x;                                              \
                gt[i] = c[i] * (l1x - lx);                                                        \
            }                                                                                     \
            return FM_OK;                                                                         \
        case FM_LOSS_BCE_LOGITS:                                                                  \
            if (pw) {                                                                             \
                for (int64_t i = 0; i < m; i++) {                                                 \
                    T v = x[i], nv = -v, tv = t[i];                                               \
                    T sp = (nv > 0 ? nv : (T)0) + LOG1P(EXP(-ABS(v)));                            \
                    T lw = (T)1 + (pw[i] - (T)1) * tv;                                            \
                    gx[i] = c[i] * (lw * SIGMOID(v) - pw[i] * tv);                                \
                    gt[i] = c[i] * ((pw[i] - (T)1) * sp - v);                                     \
                }                                                                                 \
            } else {                                                                              \
                for (int64_t i = 0; i < m; i++) {                                                 \
                    gx[i] = c[i] * (SIGMOID(x[i]) - t[i]);                                        \
                    gt[i] = -(c[i] * x[i]);                                                       \
                }                                                                                 \
            }                                                                                     \
            return FM_OK;                                                                         \
        case FM_LOSS_SOFT_MARGIN:                                                                 \
            for (int64_t i = 0; i < m; i++) {                                                     \
                T q = c[i] * SIGMOID(-t[i] * x[i]);                                               \
                gx[i] = -t[i] * q;                                                                \
                gt[i] = -x[i] * q;                                                                \
            }                                                                                     \
            return FM_OK;                                                                         \
        case FM_LOSS_KL_DIV:                                                                      \
            for (int64_t i = 0; i < m; i++) {                                                     \
                T tv = t[i];                                                                      \
                gx[i] = -(c[i] * tv);                                                             \
                gt[i] = c[i] * (LOG(tv) + (T)1 - x[i]);                                           \
            }                                                                                     \
            return FM_OK;                                                                         \
        case FM_LOSS_KL_DIV_LOG:                                                                  \
            for (int64_t i = 0; i < m; i++) {                                                     \
                T e = EXP(t[i]);                                                                  \
                gx[i] = -(c[i] * e);                                                              \
                gt[i] = c[i] * e * (t[i] - x[i] + (T)1);                                          \
            }                                                                                     \
            return FM_OK;                                                                         \
        }                                                                                         \
        return FM_ERR_OP;                                                                         \
    }                                                                                             \
    /* 16 partial sums the vectoriser keeps in registers, then double */                          \
    FM_CLONES static double lsum_##SFX(int64_t m, const T *FM_RESTRICT y) {                       \
        T acc[16] = {0};                                                                          \
        int64_t i = 0;                                                                            \
        for (; i + 16 <= m; i += 16)                                                              \
            for (int j = 0; j < 16; j++) acc[j] += y[i + j];                                      \
        double s = 0.0;                                                                           \
        for (int j = 0; j < 16; j++) s += (double)acc[j];                                         \
        for (; i < m; i++) s += (double)y[i];                                                     \
        return s;                                                                                 \
    }                                                                                             \
    /* whether some x (or t) is outside [0, 1] or NaN: 1 for x, 2 for t, 0 when all are in */     \
    FM_CLONES static int lrange_##SFX(int64_t n, const T *FM_RESTRICT x,                          \
                                      const T *FM_RESTRICT t) {                                   \
        int bx = 0, bt = 0;                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                         \
            bx |= !(x[i] >= 0 && x[i] <= 1);                                                      \
            bt |= !(t[i] >= 0 && t[i] <= 1);                                                      \
        }                                                                                         \
        return bx ? 1 : (bt ? 2 : 0);                                                             \
    }                                                                                             \
    /* elements [o0, o1): losses into y (reduction none) or their sum into *acc */                \
    static int lfwd_##SFX(int kind, int red, int64_t o0, int64_t o1, const T *x, const T *t,      \
                          const T *w, int64_t wn, const T *pw, int64_t pn, T p0, T *y,            \
                          double *acc) {                                                          \
        T buf[LOSS_BLOCK];                                                                        \
        double s = 0.0;                                                                           \
        for (int64_t o = o0; o < o1;) {                                                           \
            int64_t wo, po;                                                                       \
            int64_t m = loss_chunk(o, o1, w ? wn : 0, pw ? pn : 0, &wo, &po);                     \
            T *dst = red ? buf : y + o;                                                           \
            int rc = lossv_##SFX(kind, m, x + o, t + o, pw ? pw + po : NULL, p0, dst);            \
            if (rc) return rc;                                                                    \
            if (w)                                                                                \
                for (int64_t i = 0; i < m; i++) dst[i] *= w[wo + i];                              \
            if (red) s += lsum_##SFX(m, dst);                                                     \
            o += m;                                                                               \
        }                                                                                         \
        *acc = s;                                                                                 \
        return FM_OK;                                                                             \
    }                                                                                             \
    static int lbwd_##SFX(int kind, int64_t o0, int64_t o1, const T *g, int64_t gstep, T scale,   \
                          const T *x, const T *t, const T *w, int64_t wn, const T *pw,            \
                          int64_t pn, T p0, T *gx, T *gt) {                                       \
        T c[LOSS_BLOCK], s1[LOSS_BLOCK], s2[LOSS_BLOCK];                                          \
        T g0 = g[0] * scale;                                                                      \
        for (int64_t o = o0; o < o1;) {                                                           \
            int64_t wo, po;                                                                       \
            int64_t m = loss_chunk(o, o1, w ? wn : 0, pw ? pn : 0, &wo, &po);                     \
            if (gstep)                                                                            \
                for (int64_t i = 0; i < m; i++) c[i] = g[o + i] * scale;                          \
            else                                                                                  \
                for (int64_t i = 0; i < m; i++) c[i] = g0;                                        \
            if (w)                                                                                \
                for (int64_t i = 0; i < m; i++) c[i] *= w[wo + i];                                \
            int rc = lossd_##SFX(kind, m, x + o, t + o, pw ? pw + po : NULL, p0, c,               \
                                 gx ? gx + o : s1, gt ? gt + o : s2);                             \
            if (rc) return rc;                                                                    \
            o += m;                                                                               \
        }                                                                                         \
        return FM_OK;                                                                             \
    }

LOSS_LOOPS(float, f, fm_expf, fm_logf, fm_log1pf, fm_sigmoidf, fabsf)
LOSS_LOOPS(double, d, exp, log, log1p, fm_sigmoid_d, fabs)

static int loss_check(int dtype, int kind, int64_t n, intptr_t x, intptr_t t, intptr_t w,
                      int64_t wn, intptr_t pw, int64_t pn) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (kind < FM_LOSS_MSE || kind > FM_LOSS_KL_DIV_LOG) return FM_ERR_OP;
    if (n < 0 || (n > 0 && (!x || !t))) return FM_ERR_ARG;
    if (n > 0 && w && (wn <= 0 || n % wn)) return FM_ERR_ARG;
    if (n > 0 && pw && (pn <= 0 || n % pn)) return FM_ERR_ARG;
    return FM_OK;
}

static int loss_threads(int kind, int64_t n) {
    int cheap = kind <= FM_LOSS_HUBER;
    if (loss_forked || n < (cheap ? LOSS_PAR_MIN_CHEAP : LOSS_PAR_MIN)) return 1;
    return omp_get_max_threads();
}

int fm_loss_fwd(int dtype, int kind, int reduction, int64_t n, intptr_t x, intptr_t t,
                intptr_t w, int64_t wn, intptr_t pw, int64_t pn, double p0, intptr_t y) {
    int rc = loss_check(dtype, kind, n, x, t, w, wn, pw, pn);
    if (rc) return rc;
    if (reduction < FM_LOSS_NONE || reduction > FM_LOSS_SUM || !y) return FM_ERR_ARG;
    if (n == 0) w = pw = 0;
    int f32 = dtype == FM_FLOAT32;
    if (kind == FM_LOSS_BCE && n > 0) {
        int bad = f32 ? lrange_f(n, (const float *)x, (const float *)t)
                      : lrange_d(n, (const double *)x, (const double *)t);
        if (bad) return FM_ERR_VALUE;
    }
    int red = reduction != FM_LOSS_NONE;
    int nth = loss_threads(kind, n);
    double total = 0.0;
    if (nth > 1) {
        int64_t np = (n + LOSS_CHUNK - 1) / LOSS_CHUNK;
        double *part = (double *)calloc((size_t)np, sizeof(double));
        if (!part) return FM_ERR_NOMEM;
        int err = 0;
#pragma omp parallel for num_threads(nth) schedule(static)
        for (int64_t k = 0; k < np; k++) {
            int64_t o0 = k * LOSS_CHUNK, o1 = o0 + LOSS_CHUNK < n ? o0 + LOSS_CHUNK : n;
            int r = f32 ? lfwd_f(kind, red, o0, o1, (const float *)x, (const float *)t,
                                 (const float *)w, wn, (const float *)pw, pn, (float)p0,
                                 (float *)y, part + k)
                        : lfwd_d(kind, red, o0, o1, (const double *)x, (const double *)t,
                                 (const double *)w, wn, (const double *)pw, pn, p0, (double *)y,
                                 part + k);
            if (r) err = r;
        }
        for (int64_t k = 0; k < np; k++) total += part[k];
        free(part);
        if (err) return err;
    } else {
        rc = f32 ? lfwd_f(kind, red, 0, n, (const float *)x, (const float *)t, (const float *)w,
                          wn, (const float *)pw, pn, (float)p0, (float *)y, &total)
                 : lfwd_d(kind, red, 0, n, (const double *)x, (const double *)t,
                          (const double *)w, wn, (const double *)pw, pn, p0, (double *)y, &total);
        if (rc) return rc;
    }
    if (red) {
        double v = reduction == FM_LOSS_MEAN ? total / (double)n : total; /* 0 / 0: NaN */
        if (f32) *(float *)y = (float)v;
        else *(double *)y = v;
    }
    return FM_OK;
}

int fm_loss_bwd(int dtype, int kind, int64_t n, intptr_t g, int64_t gstep, double scale,
                intptr_t x, intptr_t t, intptr_t w, int64_t wn, intptr_t pw, int64_t pn,
                double p0, intptr_t gx, intptr_t gt) {
    int rc = loss_check(dtype, kind, n, x, t, w, wn, pw, pn);
    if (rc) return rc;
    if (n == 0) return FM_OK;
    if (!g || (gstep != 0 && gstep != 1)) return FM_ERR_ARG;
    int f32 = dtype == FM_FLOAT32;
    int nth = loss_threads(kind, n);
    if (nth > 1) {
        int64_t np = (n + LOSS_CHUNK - 1) / LOSS_CHUNK;
        int err = 0;
#pragma omp parallel for num_threads(nth) schedule(static)
        for (int64_t k = 0; k < np; k++) {
            int64_t o0 = k * LOSS_CHUNK, o1 = o0 + LOSS_CHUNK < n ? o0 + LOSS_CHUNK : n;
            int r = f32 ? lbwd_f(kind, o0, o1, (const float *)g, gstep, (float)scale,
                                 (const float *)x, (const float *)t, (const float *)w, wn,
                                 (const float *)pw, pn, (float)p0, (float *)gx, (float *)gt)
                        : lbwd_d(kind, o0, o1, (const double *)g, gstep, scale,
                                 (const double *)x, (const double *)t, (const double *)w, wn,
                                 (const double *)pw, pn, p0, (double *)gx, (double *)gt);
            if (r) err = r;
        }
        return err;
    }
    return f32 ? lbwd_f(kind, 0, n, (const float *)g, gstep, (float)scale, (const float *)x,
                        (const float *)t, (const float *)w, wn, (const float *)pw, pn, (float)p0,
                        (float *)gx, (float *)gt)
               : lbwd_d(kind, 0, n, (const double *)g, gstep, scale, (const double *)x,
                        (const double *)t, (const double *)w, wn, (const double *)pw, pn, p0,
                        (double *)gx, (double *)gt);
}
