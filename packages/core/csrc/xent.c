/* Fused cross entropy (see api_xent.h): per row, the max, the sum of exp(x - max) in 16 lanes
 * (fmath.h's vectorisable expf/logf for float32; the logs of a block of rows in one vector
 * loop), then the loss from lse, x[t] and (with label smoothing) the weighted row sum. The
 * backward recomputes the row's max and writes exp(x - max) into the gradient while summing it,
 * then scales that in place (one exp per element, no log), so nothing but the input is saved.
 * Rows are split over OpenMP threads above XENT_PAR_MIN elements; a forked child stays serial. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <math.h>
#include <omp.h>
#include <pthread.h>

#include "dtypes.h"
#include "fmath.h"
#include "api_xent.h"

#define XENT_PAR_MIN (1 << 15)
#define XENT_LANES 16
#define XENT_BLOCK 32
/* the row helpers are inlined into the per-ISA clones of the row loops (one dispatch per call,
   not per row: the rows are short, e.g. 65 logits) */
#define XENT_INLINE static inline __attribute__((always_inline))

static volatile int xent_forked = 0;
static void xent_mark_forked(void) { xent_forked = 1; }
__attribute__((constructor)) static void xent_register_atfork(void) {
    pthread_atfork(NULL, NULL, xent_mark_forked);
}

static inline double xent_exp_d(double v) { return exp(v); }

#define DEF_XENT(T, EXP, LOG)                                                                  \
    /* the row's max ignoring NaN; NaN rows come out of the sum of exp(x - max) as NaN */       \
    XENT_INLINE T max_##T(const T *FM_RESTRICT x, int64_t c) {                            \
        T acc[XENT_LANES];                                                                     \
        for (int k = 0; k < XENT_LANES; k++) acc[k] = -INFINITY;                               \
        int64_t j = 0;                                                                         \
        for (; j + XENT_LANES <= c; j += XENT_LANES)                                           \
            for (int k = 0; k < XENT_LANES; k++) acc[k] = x[j + k] > acc[k] ? x[j + k] : acc[k]; \
        for (; j < c; j++) acc[0] = x[j] > acc[0] ? x[j] : acc[0];                             \
        for (int w = XENT_LANES / 2; w >= 1; w /= 2)                                           \
            for (int k = 0; k < w; k++) acc[k] = acc[k + w] > acc[k] ? acc[k + w] : acc[k];    \
        return acc[0];                                                                         \
    }                                                                                          \
    /* sum_j exp(x_j - m), stored into e when e is not null */                                 \
    XENT_INLINE T sumexp_##T(const T *FM_RESTRICT x, int64_t c, T m, T *FM_RESTRICT e) {  \
        T acc[XENT_LANES];                                                                     \
        for (int k = 0; k < XENT_LANES; k++) acc[k] = 0;                                       \
        int64_t j = 0;                                                                         \
        if (e) {                                                                               \
            for (; j + XENT_LANES <= c; j += XENT_LANES)                                       \
                for (int k = 0; k < XENT_LANES; k++) {                                         \
                    T v = EXP(x[j + k] - m);                                                   \
                    e[j + k] = v;                                                              \
                    acc[k] += v;                                                               \
                }                                                                              \
            for (; j < c; j++) acc[0] += e[j] = EXP(x[j] - m);                                 \
        } else {                                                                               \
            for (; j + XENT_LANES <= c; j += XENT_LANES)                                       \
                for (int k = 0; k < XENT_LANES; k++) acc[k] += EXP(x[j + k] - m);              \
            for (; j < c; j++) acc[0] += EXP(x[j] - m);                                        \
        }                                                                                      \
        for (int w = XENT_LANES / 2; w >= 1; w /= 2)                                           \
            for (int k = 0; k < w; k++) acc[k] += acc[k + w];                                  \
        return acc[0];                                                                         \
    }                                                                                          \
    /* the max to subtract: all -inf rows (or -inf and NaN) would give -inf - -inf = NaN */    \
    static inline T shift_##T(const T *x, int64_t c) {                                         \
        T m = max_##T(x, c);                                                                   \
        return m == -INFINITY ? 0 : m;                                                         \
    }                                                                                          \
    /* sum_j w_j x_j (w null: sum_j x_j) */                                                    \
    XENT_INLINE T wsum_##T(const T *FM_RESTRICT x, const T *FM_RESTRICT w, int64_t c) {   \
        T acc[XENT_LANES];                                                                     \
        for (int k = 0; k < XENT_LANES; k++) acc[k] = 0;                                       \
        int64_t j = 0;                                                                         \
        if (w) {                                                                               \
            for (; j + XENT_LANES <= c; j += XENT_LANES)                                       \
                for (int k = 0; k < XENT_LANES; k++) acc[k] += w[j + k] * x[j + k];            \
            for (; j < c; j++) acc[0] += w[j] * x[j];                                          \
        } else {                                                                               \
            for (; j + XENT_LANES <= c; j += XENT_LANES)                                       \
                for (int k = 0; k < XENT_LANES; k++) acc[k] += x[j + k];                       \
            for (; j < c; j++) acc[0] += x[j];                                                 \
        }                                                                                      \
        for (int v = XENT_LANES / 2; v >= 1; v /= 2)                                           \
            for (int k = 0; k < v; k++) acc[k] += acc[k + v];                                  \
        return acc[0];                                                                         \
    }                                                                                          \
    /* the summed class weights (c without weights) */                                      \
    static inline T wtotal_##T(const T *w, int64_t c) {                                        \
        T W = w ? (T)0 : (T)c;                                                                 \
        if (w)                                                                                 \
            for (int64_t j = 0; j < c; j++) W += w[j];                                         \
        return W;                                                                              \
    }                                                                                          \
    /* rows in blocks of XENT_BLOCK: max and sum first, then the logs in one vector loop */    \
    FM_CLONES static void fwd_rows_##T(int64_t r0, int64_t r1, int64_t c, const T *x,          \
                                       const int64_t *tg, const T *w, T W, int64_t ii, T s,    \
                                       T *loss, T *wt) {                                       \
        T m[XENT_BLOCK], su[XENT_BLOCK];                                                       \
        for (int64_t b0 = r0; b0 < r1; b0 += XENT_BLOCK) {                                     \
            int nb = r1 - b0 < XENT_BLOCK ? (int)(r1 - b0) : XENT_BLOCK;                       \
            for (int r = 0; r < nb; r++) {                                                     \
                const T *row = x + (b0 + r) * c;                                               \
                m[r] = shift_##T(row, c);                                                      \
                su[r] = sumexp_##T(row, c, m[r], 0);                                           \
            }                                                                                  \
            for (int r = 0; r < nb; r++) su[r] = m[r] + LOG(su[r]);                            \
            for (int r = 0; r < nb; r++) {                                                     \
                int64_t i = b0 + r, t = tg[i];                                                 \
                if (t == ii) {                                                                 \
                    loss[i] = 0;                                                               \
                    wt[i] = 0;                                                                 \
                    continue;                                                                  \
                }                                                                              \
                const T *row = x + i * c;                                                      \
                T lse = su[r], wti = w ? w[t] : (T)1;                                          \
                T l = (1 - s) * wti * (lse - row[t]);                                          \
                if (s != 0) l += s / (T)c * (W * lse - wsum_##T(row, w, c));                   \
                loss[i] = l;                                                                   \
                wt[i] = wti;                                                                   \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    XENT_INLINE void bwd_row_##T(T *FM_RESTRICT gr, int64_t c, T kp,                      \
                                      const T *FM_RESTRICT w, T sw) {                          \
        /* gr holds exp(x_j - m); gr_j = kp gr_j - sw w_j */                                   \
        if (w)                                                                                 \
            for (int64_t j = 0; j < c; j++) gr[j] = kp * gr[j] - sw * w[j];                    \
        else                                                                                   \
            for (int64_t j = 0; j < c; j++) gr[j] = kp * gr[j] - sw;                           \
    }                                                                                          \
    FM_CLONES static void bwd_rows_##T(int64_t r0, int64_t r1, int64_t c, const T *x, const int64_t *tg, \
                             const T *w, T W, int64_t ii, T s, const T *g, int64_t gs,         \
                             double scale, T *gx) {                                            \
        for (int64_t i = r0; i < r1; i++) {                                                    \
            int64_t t = tg[i];                                                                 \
            T *gr = gx + i * c;                                                                \
            if (t == ii) {                                                                     \
                for (int64_t j = 0; j < c; j++) gr[j] = 0;                                     \
                continue;                                                                      \
            }                                                                                  \
            const T *row = x + i * c;                                                          \
            T a = (T)((double)g[i * gs] * scale), wti = w ? w[t] : (T)1;                       \
            T sum = sumexp_##T(row, c, shift_##T(row, c), gr);                                 \
            bwd_row_##T(gr, c, a * ((1 - s) * wti + s * W / (T)c) / sum, w, a * s / (T)c);     \
            gr[t] -= a * (1 - s) * wti;                                                        \
        }                                                                                      \
    }

DEF_XENT(float, fm_expf, fm_logf)
DEF_XENT(double, xent_exp_d, log)

/* the first row whose target is neither a class nor ignore_index, or -1 */
static int64_t xent_bad_target(int64_t n, int64_t c, const int64_t *tg, int64_t ii) {
    for (int64_t i = 0; i < n; i++)
        if (tg[i] != ii && (tg[i] < 0 || tg[i] >= c)) return i;
    return -1;
}

static int xent_threads(int64_t n, int64_t c) {
    return n * c >= XENT_PAR_MIN && n > 1 && !xent_forked ? omp_get_max_threads() : 1;
}

/* ROWS_T (fwd_rows_T or bwd_rows_T) over the n rows, a contiguous share to each of nth threads,
   with the weights, their sum and the arguments both take, then the rest (__VA_ARGS__) */
#define XENT_RUN(T, ROWS, ...)                                                                 \
    do {                                                                                       \
        const T *w = (const T *)weight;                                                        \
        const T W = wtotal_##T(w, c);                                                          \
        _Pragma("omp parallel for num_threads(nth) schedule(static) if (nth > 1)")             \
        for (int p = 0; p < nth; p++)                                                          \
            ROWS##_##T(n * p / nth, n * (p + 1) / nth, c, (const T *)x, tg, w, W,              \
                       ignore_index, (T)smoothing, __VA_ARGS__);                               \
    } while (0)

int fm_xent_fwd(int dtype, int64_t n, int64_t c, intptr_t x, intptr_t target, intptr_t weight,
                int64_t ignore_index, double smoothing, intptr_t loss, intptr_t wt) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (n < 0 || c < 1 || (n > 0 && (!x || !target || !loss || !wt))) return FM_ERR_ARG;
    const int64_t *tg = (const int64_t *)target;
    if (xent_bad_target(n, c, tg, ignore_index) >= 0) return FM_ERR_INDEX;
    int nth = xent_threads(n, c);
    if (dtype == FM_FLOAT32)
        XENT_RUN(float, fwd_rows, (float *)loss, (float *)wt);
    else
        XENT_RUN(double, fwd_rows, (double *)loss, (double *)wt);
    return FM_OK;
}

int fm_xent_bwd(int dtype, int64_t n, int64_t c, intptr_t x, intptr_t target, intptr_t weight,
                int64_t ignore_index, double smoothing, intptr_t g, int64_t gs, double scale,
                intptr_t gx) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (n < 0 || c < 1 || gs < 0 || (n > 0 && (!x || !target || !g || !gx))) return FM_ERR_ARG;
    const int64_t *tg = (const int64_t *)target;
    if (xent_bad_target(n, c, tg, ignore_index) >= 0) return FM_ERR_INDEX;
    int nth = xent_threads(n, c);
    if (dtype == FM_FLOAT32)
        XENT_RUN(float, bwd_rows, (const float *)g, gs, scale, (float *)gx);
    else
        XENT_RUN(double, bwd_rows, (const double *)g, gs, scale, (double *)gx);
    return FM_OK;
}
