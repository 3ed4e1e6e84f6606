/* Depthwise convolutions (one input channel per group, cs = multiplier * cb), called by fm_conv
 * for FWD, BWD_DATA and BWD_WEIGHT. im2col + GEMM wastes most of its time there: each product
 * has 1 row of the weight per output channel, so the packing dominates.
 *
 * Why this layout: each (n, c) image is copied once into a zero-padded scratch ("P") split into
 * stride phases (padded row v, column u go to phase plane (v % sh, u % sw) at (v / sh, u / sw),
 * each phase plane Hq x Wq). An output (oh, ow) laid out as oh * Wq + ow then reads tap (kh, kw)
 * at a fixed offset of one phase plane, so every tap is ONE contiguous multiply-add over the
 * whole output plane (no bounds checks, no strided loads; columns ow >= Wo are scratch that is
 * cropped away). Depth (3-D) stays an outer loop over padded slices. The transposed direction
 * (BWD_DATA) gathers into each phase plane from the zero-padded gradient, the same inner loop.
 */
#include <omp.h>

#include "fiamma.h"
#include "dtypes.h"
#include "api_conv.h"

typedef struct {
    int64_t B[3], S[3], K[3], st[3], pd[3], dl[3];
    int64_t Hq, Wq, Q, Pd, Dp, Pn, F, Yn, Lb, Ls, Kp, K2d, L, Lr;
    int64_t off[1024]; /* per 2-D tap (kh, kw), phase-sorted: offset in P of a depth slice */
    int64_t fo[1024];  /* the same tap's offset inside its phase plane */
    int widx[1024];    /* its index kh * K2 + kw */
    int pstart[65];    /* taps of phase q: [pstart[q], pstart[q + 1]) */
} dw_t;

int fm__conv_depthwise(int mode, int dt, int64_t n, int64_t cb, int64_t m, const int64_t *B,
                       const int64_t *S, const int64_t *K, const int64_t *st, const int64_t *pd,
                       const int64_t *dl, char *a, char *b, char *bias, char *out);

#define DEFINE_DW(T, SFX)                                                                       \
    /* d[i] += sum_t w[t] * s[t][i], taps four at a time (one load/store of d per four) */    \
    FM_CLONES static void mac_##SFX(T *FM_RESTRICT d, int64_t L, const T *const *s,           \
                                    const T *w, int cnt) {                                    \
        int t = 0;                                                                            \
        for (; t + 4 <= cnt; t += 4) {                                                        \
            const T *FM_RESTRICT s0 = s[t], *FM_RESTRICT s1 = s[t + 1];                       \
            const T *FM_RESTRICT s2 = s[t + 2], *FM_RESTRICT s3 = s[t + 3];                   \
            const T w0 = w[t], w1 = w[t + 1], w2 = w[t + 2], w3 = w[t + 3];                   \
            for (int64_t i = 0; i < L; i++)                                                   \
                d[i] += w0 * s0[i] + w1 * s1[i] + w2 * s2[i] + w3 * s3[i];                    \
        }                                                                                     \
        if (cnt - t == 3) {                                                                   \
            const T *FM_RESTRICT s0 = s[t], *FM_RESTRICT s1 = s[t + 1];                       \
            const T *FM_RESTRICT s2 = s[t + 2];                                               \
            const T w0 = w[t], w1 = w[t + 1], w2 = w[t + 2];                                  \
            for (int64_t i = 0; i < L; i++) d[i] += w0 * s0[i] + w1 * s1[i] + w2 * s2[i];     \
        } else if (cnt - t == 2) {                                                            \
            const T *FM_RESTRICT s0 = s[t], *FM_RESTRICT s1 = s[t + 1];                       \
            const T w0 = w[t], w1 = w[t + 1];                                                 \
            for (int64_t i = 0; i < L; i++) d[i] += w0 * s0[i] + w1 * s1[i];                  \
        } else if (cnt - t == 1) {                                                            \
            const T *FM_RESTRICT s0 = s[t];                                                   \
            const T w0 = w[t];                                                                \
            for (int64_t i = 0; i < L; i++) d[i] += w0 * s0[i];                               \
        }                                                                                     \
    }                                                                                         \
                                                                                              \
    FM_CLONES static T dot_##SFX(const T *FM_RESTRICT x, const T *FM_RESTRICT y, int64_t L) { \
        T acc[16] = {0};                                                                      \
        int64_t i = 0;                                                                        \
        for (; i + 16 <= L; i += 16)                                                          \
            for (int k = 0; k < 16; k++) acc[k] += x[i + k] * y[i + k];                       \
        T r = 0;                                                                              \
        for (; i < L; i++) r += x[i] * y[i];                                                  \
        for (int k = 0; k < 16; k++) r += acc[k];                                             \
        return r;                                                                             \
    }                                                                                         \
                                                                                              \
    /* one image row x (B2 long) to its padded, phase-split row (back: x = row + bv) */       \
    static void row_io_##SFX(const dw_t *g, T *row, T *x, int back, T bv) {                   \
        const int64_t sw = g->st[2], pw = g->pd[2], B2 = g->B[2];                             \
        if (sw == 1) {                                                                        \
            if (!back) {                                                                      \
                memcpy(row + pw, x, B2 * sizeof(T));                                          \
            } else {                                                                          \
                for (int64_t i = 0; i < B2; i++) x[i] = row[pw + i] + bv;                     \
            }                                                                                 \
            return;                                                                           \
        }                                                                                     \
        for (int64_t r = 0; r < sw; r++) {                                                    \
            const int64_t i0 = ((r - pw) % sw + sw) % sw;                                     \
            if (i0 >= B2) continue;                                                           \
            const int64_t cnt = (B2 - 1 - i0) / sw + 1;                                       \
            T *d = row + r * g->Q + (i0 + pw) / sw, *xs = x + i0;                             \
            if (sw == 2) {                                                                    \
                if (!back)                                                                    \
                    for (int64_t k = 0; k < cnt; k++) d[k] = xs[2 * k];                       \
                else                                                                          \
                    for (int64_t k = 0; k < cnt; k++) xs[2 * k] = d[k] + bv;                  \
            } else {                                                                          \
                if (!back)                                                                    \
                    for (int64_t k = 0; k < cnt; k++) d[k] = xs[k * sw];                      \
                else                                                                          \
                    for (int64_t k = 0; k < cnt; k++) xs[k * sw] = d[k] + bv;                 \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
                                                                                              \
    /* zero-padded, phase-split copy of image x (B0 x B1 x B2) into P */                      \
    static void fill_##SFX(const dw_t *g, const T *x, T *P) {                                 \
        const int64_t sh = g->st[1], sw = g->st[2];                                           \
        memset(P, 0, g->Pn * sizeof(T));                                                      \
        for (int64_t id = 0; id < g->B[0]; id++)                                              \
            for (int64_t ih = 0; ih < g->B[1]; ih++) {                                        \
                const int64_t v = ih + g->pd[1];                                              \
                T *row = P + (id + g->pd[0]) * g->Pd + (v % sh) * sw * g->Q + (v / sh) * g->Wq; \
                const T *src = x + (id * g->B[1] + ih) * g->B[2];                             \
                row_io_##SFX(g, row, (T *)src, 0, 0);                                         \
            }                                                                                 \
    }                                                                                         \
                                                                                              \
    /* output plane od of y (S1 x S2) into Y (S1 rows of Wq, zero beyond S2) */               \
    static void spread_##SFX(const dw_t *g, const T *y, T *Y) {                               \
        memset(Y, 0, g->Lr * sizeof(T));                                                      \
        for (int64_t oh = 0; oh < g->S[1]; oh++)                                              \
            memcpy(Y + oh * g->Wq, y + oh * g->S[2], g->S[2] * sizeof(T));                    \
    }                                                                                         \
                                                                                              \
    /* FWD of planes [p0, p1) of n * cb: each input plane makes its m output channels */      \
    static void fwd_##SFX(const dw_t *g, int64_t p0, int64_t p1, int64_t cb, int64_t m,      \
                          const T *x, const T *w, const T *bias, T *y, T *P, T *Y) {          \
        const T *src[1024];                                                                   \
        T wv[1024];                                                                           \
        for (int64_t p = p0; p < p1; p++) {                                                   \
            const int64_t nn = p / cb, c = p % cb;                                            \
            fill_##SFX(g, x + p * g->Lb, P);                                                  \
            for (int64_t j = 0; j < m; j++) {                                                 \
                const int64_t oc = c * m + j;                                                 \
                const T *wc = w + oc * g->Kp;                                                 \
                T *yc = y + (nn * cb * m + oc) * g->Ls;                                       \
                const T bv = bias ? bias[oc] : (T)0;                                          \
                for (int64_t od = 0; od < g->S[0]; od++) {                                    \
                    for (int64_t i = 0; i < g->Lr; i++) Y[i] = bv;                            \
                    for (int64_t kd = 0; kd < g->K[0]; kd++) {                                \
                        const T *base = P + (od * g->st[0] + kd * g->dl[0]) * g->Pd;          \
                        for (int64_t t = 0; t < g->K2d; t++) {                                \
                            src[t] = base + g->off[t];                                        \
                            wv[t] = wc[kd * g->K2d + g->widx[t]];                             \
                        }                                                                     \
                        mac_##SFX(Y, g->Lr, src, wv, (int)g->K2d);                            \
                    }                                                                         \
                    T *yo = yc + od * g->S[1] * g->S[2];                                      \
                    for (int64_t oh = 0; oh < g->S[1]; oh++)                                  \
                        memcpy(yo + oh * g->S[2], Y + oh * g->Wq, g->S[2] * sizeof(T));       \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
                                                                                              \
    /* BWD_DATA of planes [p0, p1): gradient gy (n, cb * m, small) -> gx (n, cb, big) */      \
    static void bwd_data_##SFX(const dw_t *g, int64_t p0, int64_t p1, int64_t cb, int64_t m,  \
                               const T *gy, const T *w, const T *bias, T *gx, T *P, T *Y) {   \
        const T *src[1024];                                                                   \
        T wv[1024];                                                                           \
        const int64_t sh = g->st[1], sw = g->st[2], nq = sh * sw;                             \
        for (int64_t p = p0; p < p1; p++) {                                                   \
            const int64_t nn = p / cb, c = p % cb;                                            \
            memset(P, 0, g->Pn * sizeof(T));                                                  \
            for (int64_t j = 0; j < m; j++) {                                                 \
                const int64_t oc = c * m + j;                                                 \
                const T *wc = w + oc * g->Kp, *gc = gy + (nn * cb * m + oc) * g->Ls;          \
                for (int64_t od = 0; od < g->S[0]; od++) {                                    \
                    memset(Y, 0, g->F * sizeof(T));                                           \
                    spread_##SFX(g, gc + od * g->S[1] * g->S[2], Y + g->F);                   \
                    memset(Y + g->F + g->L, 0, (g->Yn - g->F - g->L) * sizeof(T));            \
                    for (int64_t kd = 0; kd < g->K[0]; kd++) {                                \
                        T *slice = P + (od * g->st[0] + kd * g->dl[0]) * g->Pd;               \
                        for (int64_t q = 0; q < nq; q++) {                                    \
                            int cnt = 0;                                                      \
                            for (int t = g->pstart[q]; t < g->pstart[q + 1]; t++, cnt++) {   \
                                src[cnt] = Y + g->F - g->fo[t];                               \
                                wv[cnt] = wc[kd * g->K2d + g->widx[t]];                       \
                            }                                                                 \
                            if (cnt) mac_##SFX(slice + q * g->Q, g->Q, src, wv, cnt);         \
                        }                                                                     \
                    }                                                                         \
                }                                                                             \
            }                                                                                 \
            T *xo = gx + p * g->Lb;                                                           \
            const T bv = bias ? bias[c] : (T)0;                                               \
            for (int64_t id = 0; id < g->B[0]; id++)                                          \
                for (int64_t ih = 0; ih < g->B[1]; ih++) {                                    \
                    const int64_t v = ih + g->pd[1];                                          \
                    const T *row = P + (id + g->pd[0]) * g->Pd + (v % sh) * sw * g->Q +       \
                                   (v / sh) * g->Wq;                                          \
                    T *dst = xo + (id * g->B[1] + ih) * g->B[2];                              \
                    row_io_##SFX(g, (T *)row, dst, 1, bv);                                    \
                }                                                                             \
        }                                                                                     \
    }                                                                                         \
                                                                                              \
    /* BWD_WEIGHT of input channels [c0, c1): sums over the batch, each channel its own */    \
    static void bwd_weight_##SFX(const dw_t *g, int64_t c0, int64_t c1, int64_t n,           \
                                 int64_t cb, int64_t m, const T *x, const T *gy, T *gw, T *P, \
                                 T *Y, double *acc) {                                         \
        for (int64_t c = c0; c < c1; c++) {                                                   \
            for (int64_t i = 0; i < m * g->Kp; i++) acc[i] = 0;                               \
            for (int64_t nn = 0; nn < n; nn++) {                                              \
                fill_##SFX(g, x + (nn * cb + c) * g->Lb, P);                                  \
                for (int64_t j = 0; j < m; j++) {                                             \
                    const T *gc = gy + (nn * cb * m + c * m + j) * g->Ls;                     \
                    for (int64_t od = 0; od < g->S[0]; od++) {                                \
                        spread_##SFX(g, gc + od * g->S[1] * g->S[2], Y);                      \
                        for (int64_t kd = 0; kd < g->K[0]; kd++) {                            \
                            const T *base = P + (od * g->st[0] + kd * g->dl[0]) * g->Pd;      \
                            for (int64_t t = 0; t < g->K2d; t++)                              \
                                acc[j * g->Kp + kd * g->K2d + g->widx[t]] +=                  \
                                    dot_##SFX(Y, base + g->off[t], g->Lr);                    \
                        }                                                                     \
                    }                                                                         \
                }                                                                             \
            }                                                                                 \
            for (int64_t i = 0; i < m * g->Kp; i++) gw[c * m * g->Kp + i] = (T)acc[i];       \
        }                                                                                     \
    }
DEFINE_DW(float, f32)
DEFINE_DW(double, f64)

/* 0 when the shape is not handled here (the caller falls back to im2col) */
static int setup(dw_t *g, const int64_t *B, const int64_t *S, const int64_t *K,
                 const int64_t *st, const int64_t *pd, const int64_t *dl) {
    for (int i = 0; i < 3; i++) {
        g->B[i] = B[i], g->S[i] = S[i], g->K[i] = K[i];
        g->st[i] = st[i], g->pd[i] = pd[i], g->dl[i] = dl[i];
    }
    g->K2d = K[1] * K[2];
    if (g->K2d > 1024 || st[1] * st[2] > 64) return 0;
    int64_t need[3], P3[3];
    for (int i = 0; i < 3; i++) {
        need[i] = (S[i] - 1) * st[i] + (K[i] - 1) * dl[i] + 1;
        P3[i] = B[i] + 2 * pd[i];
        if (P3[i] < need[i]) P3[i] = need[i];
    }
    const int64_t sh = st[1], sw = st[2];
    g->Dp = P3[0];
    g->Hq = (P3[1] + sh - 1) / sh;
    g->Wq = (P3[2] + sw - 1) / sw;
    g->Q = g->Hq * g->Wq;
    g->Pd = sh * sw * g->Q;
    g->Pn = g->Dp * g->Pd + g->Wq + 32; /* slack: scratch columns of the last row read past */
    g->L = S[1] * g->Wq;
    g->Lr = (g->L + 15) / 16 * 16; /* FWD / BWD_WEIGHT: whole vectors (no scalar tail) */
    g->Lb = B[0] * B[1] * B[2];
    g->Ls = S[0] * S[1] * S[2];
    g->Kp = K[0] * g->K2d;
    /* taps sorted by phase */
    int cnt[64] = {0};
    for (int64_t kh = 0; kh < K[1]; kh++)
        for (int64_t kw = 0; kw < K[2]; kw++) cnt[((kh * dl[1]) % sh) * sw + (kw * dl[2]) % sw]++;
    g->pstart[0] = 0;
    for (int q = 0; q < sh * sw; q++) g->pstart[q + 1] = g->pstart[q] + cnt[q];
    int fillp[64];
    for (int q = 0; q < sh * sw; q++) fillp[q] = g->pstart[q];
    g->F = 0;
    for (int64_t kh = 0; kh < K[1]; kh++)
        for (int64_t kw = 0; kw < K[2]; kw++) {
            const int64_t a = kh * dl[1], b = kw * dl[2];
            const int q = (int)((a % sh) * sw + b % sw);
            const int t = fillp[q]++;
            g->fo[t] = (a / sh) * g->Wq + b / sw;
            g->off[t] = q * g->Q + g->fo[t];
            g->widx[t] = (int)(kh * K[2] + kw);
            if (g->fo[t] > g->F) g->F = g->fo[t];
        }
    /* the zero-padded gradient plane of BWD_DATA: F zeros, then Q (>= L) */
    g->Yn = g->F + g->Q + 16;
    return 1;
}

int fm__conv_depthwise(int mode, int dt, int64_t n, int64_t cb, int64_t m, const int64_t *B,
                       const int64_t *S, const int64_t *K, const int64_t *st, const int64_t *pd,
                       const int64_t *dl, char *a, char *b, char *bias, char *out) {
    dw_t *g = (dw_t *)fm_alloc(sizeof(dw_t));
    if (!g) return FM_ERR_NOMEM;
    if (!setup(g, B, S, K, st, pd, dl)) {
        fm_free((intptr_t)g, sizeof(dw_t));
        return -1;
    }
    const int64_t esz = dt == FM_FLOAT32 ? 4 : 8;
    const int64_t units = mode == FM_CONV_BWD_WEIGHT ? cb : n * cb;
    const double work = (double)n * cb * m * g->Ls * g->Kp;
    int nt = fm_par_threads(work, 2e5);
    if (nt > units) nt = (int)units;
    if (nt < 1) nt = 1;
    const int64_t pbytes = g->Pn * esz, ybytes = g->Yn * esz, abytes = m * g->Kp * 8 + 64;
    int rc = FM_OK;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        const int64_t u0 = units * t / T, u1 = units * (t + 1) / T;
        char *P = (char *)fm_alloc(pbytes), *Y = (char *)fm_alloc(ybytes);
        double *acc = (double *)fm_alloc(abytes);
        if (!P || !Y || !acc) {
            __atomic_store_n(&rc, FM_ERR_NOMEM, __ATOMIC_RELAXED);
        } else if (dt == FM_FLOAT32) {
            if (mode == FM_CONV_FWD)
                fwd_f32(g, u0, u1, cb, m, (float *)a, (float *)b, (float *)bias, (float *)out,
                        (float *)P, (float *)Y);
            else if (mode == FM_CONV_BWD_DATA)
                bwd_data_f32(g, u0, u1, cb, m, (float *)a, (float *)b, (float *)bias,
                             (float *)out, (float *)P, (float *)Y);
            else
                bwd_weight_f32(g, u0, u1, n, cb, m, (float *)a, (float *)b, (float *)out,
                               (float *)P, (float *)Y, acc);
        } else {
            if (mode == FM_CONV_FWD)
                fwd_f64(g, u0, u1, cb, m, (double *)a, (double *)b, (double *)bias,
                        (double *)out, (double *)P, (double *)Y);
            else if (mode == FM_CONV_BWD_DATA)
                bwd_data_f64(g, u0, u1, cb, m, (double *)a, (double *)b, (double *)bias,
                             (double *)out, (double *)P, (double *)Y);
            else
                bwd_weight_f64(g, u0, u1, n, cb, m, (double *)a, (double *)b, (double *)out,
                               (double *)P, (double *)Y, acc);
        }
        if (P) fm_free((intptr_t)P, pbytes);
        if (Y) fm_free((intptr_t)Y, ybytes);
        if (acc) fm_free((intptr_t)acc, abytes);
    }
    fm_free((intptr_t)g, sizeof(dw_t));
    return rc;
}
