/* Fused LSTM cell arithmetic (see api_lstm.h): one pass over a time step's gates forward (the
 * four nonlinearities, the cell update, the output) and one backward, in place of the dozen
 * elementwise ops (each a call, a temporary and a pass) a recurrent layer otherwise runs per
 * step. float32 uses fmath.h's vectorisable sigmoid/tanh in per-ISA clones.
 *
 * The sequence entry points run a whole layer (one direction) in C: rnn_seq.c's time loop (the
 * hidden product against the recurrent weight packed once, the cell's rows over threads) with
 * this cell. The weight's own gradient is one large product the caller makes from the saved
 * states. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtypes.h"
#include "fmath.h"
#include "api_lstm.h"
#include "rnn_seq.h"

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

/* ---- a whole sequence (api_lstm.h): rnn_seq.c's loop with the LSTM cell -------------------- */

static void seq_fwd(int dtype, int64_t n, const fm_rnn_fwd_rows *s) {
    int64_t H = s->H;
    if (dtype == FM_FLOAT32)
        fwd_float(n, H, (const float *)s->gates, 4 * H, (const float *)s->cp, (float *)s->hy,
                  (float *)s->cy, (float *)s->ws);
    else
        fwd_double(n, H, (const double *)s->gates, 4 * H, (const double *)s->cp,
                   (double *)s->hy, (double *)s->cy, (double *)s->ws);
}

/* sp, sn: the cell states before and after the step; dca -> dcb the cell-state gradient */
static void seq_bwd(int dtype, int64_t n, const fm_rnn_bwd_rows *s) {
    if (dtype == FM_FLOAT32)
        bwd_float(n, s->H, (const float *)s->dh, (const float *)s->dca, (const float *)s->sp,
                  (const float *)s->sn, (const float *)s->ws, (float *)s->gx, (float *)s->dcb,
                  (float *)s->tmp);
    else
        bwd_double(n, s->H, (const double *)s->dh, (const double *)s->dca,
                   (const double *)s->sp, (const double *)s->sn, (const double *)s->ws,
                   (double *)s->gx, (double *)s->dcb, (double *)s->tmp);
}

static const fm_rnn_cell lstm_cell = {4, 4, 1, 1, 0, seq_fwd, seq_bwd};

int fm_lstm_seq_fwd(int dtype, int64_t T, int64_t B, int64_t H, int reverse, intptr_t xw,
                    intptr_t w, intptr_t h0, intptr_t c0, intptr_t out, intptr_t hn, intptr_t cn,
                    intptr_t hall, intptr_t call, intptr_t ws) {
    return fm_rnn_seq_fwd(&lstm_cell, dtype, T, B, H, reverse, xw, w, 0, h0, c0, out, hn, cn,
                          hall, call, ws);
}

int fm_lstm_seq_bwd(int dtype, int64_t T, int64_t B, int64_t H, int reverse, intptr_t w,
                    intptr_t call, intptr_t ws, intptr_t gout, intptr_t ghn, intptr_t gcn,
                    intptr_t ggates, intptr_t gh0, intptr_t gc0) {
    return fm_rnn_seq_bwd(&lstm_cell, dtype, T, B, H, reverse, w, call, ws, gout, ghn, gcn,
                          ggates, 0, gh0, gc0);
}
