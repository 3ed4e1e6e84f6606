/* A whole GRU layer (api_gru.h): rnn_seq.c's time loop with the GRU cell below. The hidden
 * product of a step starts from the hidden bias b_hh (it must: b_hn sits inside r's product),
 * the input projection xw_t is read by the cell beside it. float32 uses fmath.h's vectorisable
 * sigmoid/tanh in per-ISA clones. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <math.h>

#include "dtypes.h"
#include "fmath.h"
#include "api_gru.h"
#include "rnn_seq.h"

static inline double gru_sig_d(double x) { return 1.0 / (1.0 + exp(-x)); }

/* ws rows: r, z, n, gh_n (H each); the backward's dh becomes the part of the previous
   state's gradient that bypasses the product (dh z) */
#define DEF_GRU(T, SIG, TANH)                                                                 \
    FM_CLONES static void gfwd_##T(int64_t B, int64_t H, const T *gh, const T *xw,            \
                                   const T *hp, T *hy, T *ws) {                               \
        for (int64_t b = 0; b < B; b++) {                                                     \
            const T *FM_RESTRICT g = gh + b * 3 * H, *FM_RESTRICT x = xw + b * 3 * H;         \
            const T *FM_RESTRICT h = hp + b * H;                                              \
            T *FM_RESTRICT w = ws + b * 4 * H, *FM_RESTRICT o = hy + b * H;                   \
            for (int64_t j = 0; j < 2 * H; j++) w[j] = SIG(x[j] + g[j]);                      \
            for (int64_t j = 0; j < H; j++) {                                                 \
                w[3 * H + j] = g[2 * H + j];                                                  \
                w[2 * H + j] = TANH(x[2 * H + j] + w[j] * g[2 * H + j]);                      \
            }                                                                                 \
            for (int64_t j = 0; j < H; j++)                                                   \
                o[j] = w[2 * H + j] + w[H + j] * (h[j] - w[2 * H + j]);                       \
        }                                                                                     \
    }                                                                                         \
    FM_CLONES static void gbwd_##T(int64_t B, int64_t H, T *dh, const T *hp, const T *ws,     \
                                   T *gx, T *gg) {                                            \
        for (int64_t b = 0; b < B; b++) {                                                     \
            const T *FM_RESTRICT w = ws + b * 4 * H, *FM_RESTRICT h = hp + b * H;             \
            const T *FM_RESTRICT r = w, *FM_RESTRICT z = w + H, *FM_RESTRICT n = w + 2 * H;   \
            const T *FM_RESTRICT ghn = w + 3 * H;                                             \
            T *FM_RESTRICT d = dh + b * H;                                                    \
            T *FM_RESTRICT x = gx + b * 3 * H, *FM_RESTRICT g = gg + b * 3 * H;               \
            for (int64_t j = 0; j < H; j++) {                                                 \
                T dn = d[j] * (1 - z[j]) * (1 - n[j] * n[j]);                                 \
                T dr = dn * ghn[j] * r[j] * (1 - r[j]);                                       \
                T dz = d[j] * (h[j] - n[j]) * z[j] * (1 - z[j]);                              \
                x[j] = g[j] = dr;                                                             \
                x[H + j] = g[H + j] = dz;                                                     \
                x[2 * H + j] = dn;                                                            \
                g[2 * H + j] = dn * r[j];                                                     \
                d[j] *= z[j];                                                                 \
            }                                                                                 \
        }                                                                                     \
    }

DEF_GRU(float, fm_sigmoidf, fm_tanhf)
DEF_GRU(double, gru_sig_d, tanh)

static void seq_fwd(int dtype, int64_t n, const fm_rnn_fwd_rows *s) {
    if (dtype == FM_FLOAT32)
        gfwd_float(n, s->H, (const float *)s->gates, (const float *)s->xw,
                   (const float *)s->hp, (float *)s->hy, (float *)s->ws);
    else
        gfwd_double(n, s->H, (const double *)s->gates, (const double *)s->xw,
                    (const double *)s->hp, (double *)s->hy, (double *)s->ws);
}

/* sp: the hidden state the step read */
static void seq_bwd(int dtype, int64_t n, const fm_rnn_bwd_rows *s) {
    if (dtype == FM_FLOAT32)
        gbwd_float(n, s->H, (float *)s->dh, (const float *)s->sp, (const float *)s->ws,
                   (float *)s->gx, (float *)s->gh);
    else
        gbwd_double(n, s->H, (double *)s->dh, (const double *)s->sp, (const double *)s->ws,
                    (double *)s->gx, (double *)s->gh);
}

static const fm_rnn_cell gru_cell = {3, 4, 0, 0, 1, seq_fwd, seq_bwd};

int fm_gru_seq_fwd(int dtype, int64_t T, int64_t B, int64_t H, int reverse, intptr_t xw,
                   intptr_t w, intptr_t bhh, intptr_t h0, intptr_t out, intptr_t hn,
                   intptr_t hall, intptr_t ws) {
    return fm_rnn_seq_fwd(&gru_cell, dtype, T, B, H, reverse, xw, w, bhh, h0, 0, out, hn, 0,
                          hall, 0, ws);
}

int fm_gru_seq_bwd(int dtype, int64_t T, int64_t B, int64_t H, int reverse, intptr_t w,
                   intptr_t hall, intptr_t ws, intptr_t gout, intptr_t ghn, intptr_t gxw,
                   intptr_t ggh, intptr_t gh0) {
    return fm_rnn_seq_bwd(&gru_cell, dtype, T, B, H, reverse, w, hall, ws, gout, ghn, 0, gxw,
                          ggh, gh0, 0);
}
