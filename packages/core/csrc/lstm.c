/* Fused LSTM cell arithmetic (see api_lstm.h): one pass over a time step's gates forward (the
 * four nonlinearities, the cell update, the output) and one backward, in place of the dozen
 * elementwise ops (each a call, a temporary and a pass) a recurrent layer otherwise runs per
 * step. float32 uses fmath.h's vectorisable sigmoid/tanh in per-ISA clones.
 *
 * The sequence entry points run a whole layer (one direction) in C: per time step the hidden
 * product against the recurrent weight (packed once for the sequence: gemm_plan.h) and the
 * cell, forward; the cell's backward and the product with the weight, backward. The weight's
 * own gradient is one large product the caller makes from the saved states. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "dtypes.h"
#include "fmath.h"
#include "api_lstm.h"
#include "gemm_plan.h"

static inline double lstm_sig_d(double x) { return 1.0 / (1.0 + exp(-x)); }

/* simple loops over one row each (strided ones across the four gate blocks do not vectorise) */
#define DEF_LSTM(T, SIG, TANH)                                                                 \
    FM_CLONES static void fwd_##T(int64_t B, int64_t H, const T *gates, int64_t sg,            \
                                  const T *cx, T *hy, T *cy, T *ws) {                          \
        for (int64_t b = 0; b < B; b++) {                                                      \
            const T *FM_RESTRICT gr = gates + b * sg;                                          \
            const T *FM_RESTRICT c = cx + b * H;                                               \
            T *FM_RESTRICT w = ws + b * 4 * H;                                                 \
            T *FM_RESTRICT h = hy + b * H, *FM_RESTRICT c2 = cy + b * H;                       \
            for (int64_t j = 0; j < 2 * H; j++) w[j] = SIG(gr[j]);                             \
            for (int64_t j = 2 * H; j < 3 * H; j++) w[j] = TANH(gr[j]);                        \
            for (int64_t j = 3 * H; j < 4 * H; j++) w[j] = SIG(gr[j]);                         \
            const T *FM_RESTRICT wi = w, *FM_RESTRICT wf = w + H, *FM_RESTRICT wg = w + 2 * H; \
            const T *FM_RESTRICT wo = w + 3 * H;                                               \
            for (int64_t j = 0; j < H; j++) c2[j] = wf[j] * c[j] + wi[j] * wg[j];              \
            for (int64_t j = 0; j < H; j++) h[j] = wo[j] * TANH(c2[j]);                        \
        }                                                                                      \
    }                                                                                          \
    FM_CLONES static void bwd_##T(int64_t B, int64_t H, const T *ghy, const T *gcy,            \
                                  const T *cx, const T *cy, const T *ws, T *gg, T *gcx,        \
                                  T *tmp) {                                                    \
        for (int64_t b = 0; b < B; b++) {                                                      \
            const T *FM_RESTRICT w = ws + b * 4 * H;                                           \
            const T *FM_RESTRICT wi = w, *FM_RESTRICT wf = w + H, *FM_RESTRICT wg = w + 2 * H; \
            const T *FM_RESTRICT wo = w + 3 * H;                                               \
            const T *FM_RESTRICT c = cx + b * H, *FM_RESTRICT c2 = cy + b * H;                 \
            const T *FM_RESTRICT dh = ghy + b * H, *FM_RESTRICT dc = gcy + b * H;              \
            T *FM_RESTRICT di = gg + b * 4 * H, *FM_RESTRICT df = di + H;                      \
            T *FM_RESTRICT dg = di + 2 * H, *FM_RESTRICT dO = di + 3 * H;                      \
            T *FM_RESTRICT dcs = tmp;                                                          \
            for (int64_t j = 0; j < H; j++) {                                                  \
                T tc = TANH(c2[j]);                                                            \
                dcs[j] = dc[j] + dh[j] * wo[j] * (1 - tc * tc);                                \
                dO[j] = dh[j] * tc * wo[j] * (1 - wo[j]);                                      \
            }                                                                                  \
            for (int64_t j = 0; j < H; j++) {                                                  \
                di[j] = dcs[j] * wg[j] * wi[j] * (1 - wi[j]);                                  \
                df[j] = dcs[j] * c[j] * wf[j] * (1 - wf[j]);                                   \
                dg[j] = dcs[j] * wi[j] * (1 - wg[j] * wg[j]);                                  \
            }                                                                                  \
            if (gcx)                                                                           \
                for (int64_t j = 0; j < H; j++) gcx[b * H + j] = dcs[j] * wf[j];               \
        }                                                                                      \
    }

DEF_LSTM(float, fm_sigmoidf, fm_tanhf)
DEF_LSTM(double, lstm_sig_d, tanh)

int fm_lstm_cell_fwd(int dtype, int64_t B, int64_t H, intptr_t gates, int64_t sg, intptr_t cx,
                     intptr_t hy, intptr_t cy, intptr_t ws) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (B < 0 || H < 0 || (B > 1 && sg < 4 * H)) return FM_ERR_ARG;
    if (B == 0 || H == 0) return FM_OK;
    if (dtype == FM_FLOAT32)
        fwd_float(B, H, (const float *)gates, sg, (const float *)cx, (float *)hy, (float *)cy,
                  (float *)ws);
    else
        fwd_double(B, H, (const double *)gates, sg, (const double *)cx, (double *)hy,
                   (double *)cy, (double *)ws);
    return FM_OK;
}

int fm_lstm_cell_bwd(int dtype, int64_t B, int64_t H, intptr_t ghy, intptr_t gcy, intptr_t cx,
                     intptr_t cy, intptr_t ws, intptr_t ggates, intptr_t gcx) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (B < 0 || H < 0) return FM_ERR_ARG;
    if (B == 0 || H == 0) return FM_OK;
    int64_t isz = dtype == FM_FLOAT32 ? 4 : 8;
    /* scratch: one row of the cell gradient, and zeros for a missing incoming gradient */
    int64_t nz = (!ghy || !gcy) ? B * H : 0;
    char *buf = calloc((size_t)(H + nz), (size_t)isz);
    if (!buf) return FM_ERR_NOMEM;
    intptr_t zero = (intptr_t)(buf + H * isz);
    ghy = ghy ? ghy : zero;
    gcy = gcy ? gcy : zero;
    if (dtype == FM_FLOAT32)
        bwd_float(B, H, (const float *)ghy, (const float *)gcy, (const float *)cx,
                  (const float *)cy, (const float *)ws, (float *)ggates, (float *)gcx,
                  (float *)buf);
    else
        bwd_double(B, H, (const double *)ghy, (const double *)gcy, (const double *)cx,
                   (const double *)cy, (const double *)ws, (double *)ggates, (double *)gcx,
                   (double *)buf);
    free(buf);
    return FM_OK;
}

/* ---- a whole sequence (api_lstm.h) ------------------------------------------------------- */

/* the state slots (hall/call rows of B x H) read and written at time t */
static inline int64_t slot_prev(int reverse, int64_t t) { return reverse ? t + 1 : t; }
static inline int64_t slot_next(int reverse, int64_t t) { return reverse ? t : t + 1; }

/* one step's cell over rows [r0, r1) of the batch (the forward also copies h to out) */
static void cell_fwd_rows(int dtype, int64_t r0, int64_t r1, int64_t H, const char *gates,
                          const char *cp, char *hy, char *cy, char *wst, char *outt) {
    int64_t isz = dtype == FM_FLOAT32 ? 4 : 8, o = r0 * H * isz, og = 4 * o, n = r1 - r0;
    if (n <= 0) return;
    if (dtype == FM_FLOAT32)
        fwd_float(n, H, (const float *)(gates + og), 4 * H, (const float *)(cp + o),
                  (float *)(hy + o), (float *)(cy + o), (float *)(wst + og));
    else
        fwd_double(n, H, (const double *)(gates + og), 4 * H, (const double *)(cp + o),
                   (double *)(hy + o), (double *)(cy + o), (double *)(wst + og));
    memcpy(outt + o, hy + o, (size_t)(n * H * isz));
}

static void cell_bwd_rows(int dtype, int64_t r0, int64_t r1, int64_t H, const char *gout_t,
                          char *dh, const char *dca, const char *cx, const char *cy,
                          const char *wst, char *gg, char *dcb, char *tmp) {
    int64_t isz = dtype == FM_FLOAT32 ? 4 : 8, o = r0 * H * isz, og = 4 * o, n = r1 - r0;
    if (n <= 0) return;
    if (dtype == FM_FLOAT32) {
        float *d = (float *)(dh + o);
        if (gout_t) {
            const float *g = (const float *)(gout_t + o);
            for (int64_t i = 0; i < n * H; i++) d[i] += g[i];
        }
        bwd_float(n, H, d, (const float *)(dca + o), (const float *)(cx + o),
                  (const float *)(cy + o), (const float *)(wst + og), (float *)(gg + og),
                  (float *)(dcb + o), (float *)tmp);
    } else {
        double *d = (double *)(dh + o);
        if (gout_t) {
            const double *g = (const double *)(gout_t + o);
            for (int64_t i = 0; i < n * H; i++) d[i] += g[i];
        }
        bwd_double(n, H, d, (const double *)(dca + o), (const double *)(cx + o),
                   (const double *)(cy + o), (const double *)(wst + og), (double *)(gg + og),
                   (double *)(dcb + o), (double *)tmp);
    }
}

/* threads for a step's cell: those of the product (the library's setting, one after fork,
   none for small products) when the step has rows enough to share */
static int cell_threads(const fm_gemm_plan *plan, int64_t B, int64_t H) {
    int nt = plan->nthreads;
    if (nt <= 1 || B < 2 || B * H < 8192) return 1;
    return nt < B ? nt : (int)B;
}

int fm_lstm_seq_fwd(int dtype, int64_t T, int64_t B, int64_t H, int reverse, intptr_t xw,
                    intptr_t w, intptr_t h0, intptr_t c0, intptr_t out, intptr_t hn, intptr_t cn,
                    intptr_t hall, intptr_t call, intptr_t ws) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (T < 0 || B < 0 || H < 0) return FM_ERR_ARG;
    int64_t isz = dtype == FM_FLOAT32 ? 4 : 8, bh = B * H * isz, bg = 4 * B * H * isz;
    if (B == 0 || H == 0) return FM_OK;
    char *Hs = (char *)hall, *Cs = (char *)call;
    int64_t init = reverse ? T : 0;
    memcpy(Hs + init * bh, (const void *)h0, (size_t)bh);
    memcpy(Cs + init * bh, (const void *)c0, (size_t)bh);
    if (T > 0) {
        fm_gemm_plan plan; /* gates_t += h_prev (B x H) @ W^T (H x 4H) */
        int rc = fm_gemm_plan_init(&plan, dtype, B, 4 * H, H, (const void *)w, 1, H);
        if (rc != FM_OK) return rc;
        char *gates = (char *)fm_alloc(bg);
        if (!gates) {
            fm_gemm_plan_free(&plan);
            return FM_ERR_NOMEM;
        }
        int nt = cell_threads(&plan, B, H);
        for (int64_t s = 0; s < T; s++) {
            int64_t t = reverse ? T - 1 - s : s;
            const char *hp = Hs + slot_prev(reverse, t) * bh, *cp = Cs + slot_prev(reverse, t) * bh;
            char *hy = Hs + slot_next(reverse, t) * bh, *cy = Cs + slot_next(reverse, t) * bh;
            memcpy(gates, (const char *)xw + t * bg, (size_t)bg);
            rc = fm_gemm_plan_run(&plan, hp, H, 1.0, gates, 4 * H);
            if (rc != FM_OK) break;
            char *wst = (char *)ws + t * bg, *outt = (char *)out + t * bh;
            if (nt > 1) {
#pragma omp parallel for num_threads(nt) schedule(static)
                for (int k = 0; k < nt; k++)
                    cell_fwd_rows(dtype, B * k / nt, B * (k + 1) / nt, H, gates, cp, hy, cy, wst,
                                  outt);
            } else {
                cell_fwd_rows(dtype, 0, B, H, gates, cp, hy, cy, wst, outt);
            }
        }
        fm_free((intptr_t)gates, bg);
        fm_gemm_plan_free(&plan);
        if (rc != FM_OK) return rc;
    }
    int64_t last = reverse ? 0 : T;
    memcpy((void *)hn, Hs + last * bh, (size_t)bh);
    memcpy((void *)cn, Cs + last * bh, (size_t)bh);
    return FM_OK;
}

int fm_lstm_seq_bwd(int dtype, int64_t T, int64_t B, int64_t H, int reverse, intptr_t w,
                    intptr_t call, intptr_t ws, intptr_t gout, intptr_t ghn, intptr_t gcn,
                    intptr_t ggates, intptr_t gh0, intptr_t gc0) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (T < 0 || B < 0 || H < 0) return FM_ERR_ARG;
    int64_t isz = dtype == FM_FLOAT32 ? 4 : 8, bh = B * H * isz, bg = 4 * B * H * isz;
    if (B == 0 || H == 0) return FM_OK;
    if (ghn) memcpy((void *)gh0, (const void *)ghn, (size_t)bh);
    else memset((void *)gh0, 0, (size_t)bh);
    if (T == 0) {
        if (gcn) memcpy((void *)gc0, (const void *)gcn, (size_t)bh);
        else memset((void *)gc0, 0, (size_t)bh);
        return FM_OK;
    }
    fm_gemm_plan plan; /* dh_prev = ggates_t (B x 4H) @ W (4H x H) */
    int rc = fm_gemm_plan_init(&plan, dtype, B, H, 4 * H, (const void *)w, H, 1);
    if (rc != FM_OK) return rc;
    /* scratch: two cell-gradient buffers (ping-pong) and a row per thread for the cell's
       backward */
    int nt = cell_threads(&plan, B, H);
    int64_t sbytes = 2 * bh + nt * H * isz;
    char *scr = (char *)fm_alloc(sbytes);
    if (!scr) {
        fm_gemm_plan_free(&plan);
        return FM_ERR_NOMEM;
    }
    char *dca = scr, *dcb = scr + bh, *tmp = scr + 2 * bh;
    if (gcn) memcpy(dca, (const void *)gcn, (size_t)bh);
    else memset(dca, 0, (size_t)bh);
    char *dh = (char *)gh0; /* the running hidden-state gradient lives in gh0 */
    const char *Cs = (const char *)call;
    for (int64_t s = 0; s < T; s++) {
        int64_t t = reverse ? s : T - 1 - s;
        const char *cx = Cs + slot_prev(reverse, t) * bh, *cy = Cs + slot_next(reverse, t) * bh;
        char *gg = (char *)ggates + t * bg;
        const char *wst = (const char *)ws + t * bg;
        const char *got = gout ? (const char *)gout + t * bh : NULL;
        if (nt > 1) {
#pragma omp parallel for num_threads(nt) schedule(static)
            for (int k = 0; k < nt; k++)
                cell_bwd_rows(dtype, B * k / nt, B * (k + 1) / nt, H, got, dh, dca, cx, cy, wst,
                              gg, dcb, tmp + k * H * isz);
        } else {
            cell_bwd_rows(dtype, 0, B, H, got, dh, dca, cx, cy, wst, gg, dcb, tmp);
        }
        char *sw = dca;
        dca = dcb, dcb = sw;
        rc = fm_gemm_plan_run(&plan, gg, 4 * H, 0.0, dh, H);
        if (rc != FM_OK) break;
    }
    memcpy((void *)gc0, dca, (size_t)bh);
    fm_free((intptr_t)scr, sbytes);
    fm_gemm_plan_free(&plan);
    return rc;
}
