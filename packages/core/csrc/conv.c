/* Convolutions by im2col + GEMM (fm_conv, see api_conv.h).
 *
 * Why chunks: the full column matrix of one image (cb * prod(k) rows by prod(small) columns) is
 * several MB for typical layers; it is built a slice of output positions at a time so the slice
 * is still in L2 when the GEMM packs it. Pointwise convolutions (1 x 1, stride 1, no padding)
 * skip the columns: the image already is the matrix. Small images go several to a product.
 * float32 GEMMs run on fiamma's sgemm, single-threaded: threads take whole image blocks (or,
 * for a forward batch smaller than the thread count, column slices), so no product needs
 * synchronisation. float64 goes to BLAS on one driving thread (BLAS threads itself).
 * Depthwise convolutions (one input channel per group) skip all this: conv_dw.c.
 */
#include <omp.h>

#include "fiamma.h"
#include "dtypes.h"
#include "api_matmul.h"
#include "api_conv.h"

/* the geometry, always as 3 spatial dims (missing leading dims have size 1) */
typedef struct {
    int64_t B[3], S[3], K[3], st[3], pd[3], dl[3];
    int64_t Lb, Ls, Kp;
} geo_t;

/* columns of output positions [l0, l1) for C channels of x (each Lb long) into col, a
   (C * Kp) x (l1 - l0) matrix with row stride ld; with ACC the reverse: col is added into x.
   Output positions are walked row segment by row segment (no division per segment). */
#define DEFINE_COLS(T, SFX)                                                                     \
    static void cols_##SFX(const geo_t *g, T *x, int64_t C, int64_t l0, int64_t l1, T *col,   \
                           int64_t ld, int acc) {                                             \
        const int64_t S12 = g->S[1] * g->S[2], st2 = g->st[2], B2 = g->B[2];                  \
        const int64_t od0 = l0 / S12, oh0 = (l0 % S12) / g->S[2], ow00 = l0 % g->S[2];        \
        for (int64_t c = 0; c < C; c++) {                                                     \
            T *xc = x + c * g->Lb;                                                            \
            int64_t kidx = 0;                                                                 \
            for (int64_t kd = 0; kd < g->K[0]; kd++)                                          \
                for (int64_t kh = 0; kh < g->K[1]; kh++)                                      \
                    for (int64_t kw = 0; kw < g->K[2]; kw++, kidx++) {                        \
                        T *row = col + (c * g->Kp + kidx) * ld;                               \
                        const int64_t off = kw * g->dl[2] - g->pd[2];                         \
                        /* ow range whose input column is inside the image */                 \
                        const int64_t owlo = off >= 0 ? 0 : (-off + st2 - 1) / st2;           \
                        const int64_t owhi = B2 - 1 - off < 0 ? 0 : (B2 - 1 - off) / st2 + 1; \
                        const int64_t idk = kd * g->dl[0] - g->pd[0];                         \
                        const int64_t ihk = kh * g->dl[1] - g->pd[1];                         \
                        int64_t od = od0, oh = oh0, ow0 = ow00, l = l0;                       \
                        while (l < l1) {                                                      \
                            int64_t seg = g->S[2] - ow0;                                      \
                            if (seg > l1 - l) seg = l1 - l;                                   \
                            T *dst = row + (l - l0);                                          \
                            const int64_t id = od * g->st[0] + idk, ih = oh * g->st[1] + ihk; \
                            int64_t ja = owlo - ow0, jb = owhi - ow0;                         \
                            if (ja < 0) ja = 0;                                               \
                            if (jb > seg) jb = seg;                                           \
                            if (id < 0 || id >= g->B[0] || ih < 0 || ih >= g->B[1] || ja >= jb) { \
                                if (!acc)                                                     \
                                    for (int64_t j = 0; j < seg; j++) dst[j] = 0;             \
                            } else {                                                          \
                                T *src = xc + (id * g->B[1] + ih) * B2 + off + ow0 * st2;     \
                                if (acc) {                                                    \
                                    if (st2 == 1)                                             \
                                        for (int64_t j = ja; j < jb; j++) src[j] += dst[j];   \
                                    else                                                      \
                                        for (int64_t j = ja; j < jb; j++)                     \
                                            src[j * st2] += dst[j];                           \
                                } else {                                                      \
                                    for (int64_t j = 0; j < ja; j++) dst[j] = 0;              \
                                    if (st2 == 1)                                             \
                                        for (int64_t j = ja; j < jb; j++) dst[j] = src[j];    \
                                    else                                                      \
                                        for (int64_t j = ja; j < jb; j++)                     \
                                            dst[j] = src[j * st2];                            \
                                    for (int64_t j = jb; j < seg; j++) dst[j] = 0;            \
                                }                                                             \
                            }                                                                 \
                            l += seg;                                                         \
                            ow0 = 0;                                                          \
                            if (++oh == g->S[1]) oh = 0, od++;                                \
                        }                                                                     \
                    }                                                                         \
        }                                                                                     \
    }
DEFINE_COLS(float, f32)
DEFINE_COLS(double, f64)

/* The same for 1-D and 2-D geometry over whole output rows [oh0, oh1) (every image block and
   most chunks): a tap's in-image column range [lo, hi) is the same on every row, so each row
   segment is one copy (and a zero fill at the borders) without the bookkeeping above, which
   dominated for small images (LeNet's 10-wide rows). */
#define DEFINE_COLS2D(T, SFX)                                                                   \
    static void cols2d_##SFX(const geo_t *g, T *x, int64_t C, int64_t oh0, int64_t oh1,        \
                             T *col, int64_t ld, int acc) {                                    \
        const int64_t S2 = g->S[2], B1 = g->B[1], B2 = g->B[2], st1 = g->st[1];               \
        const int64_t st2 = g->st[2], K1 = g->K[1], K2 = g->K[2];                             \
        for (int64_t c = 0; c < C; c++) {                                                     \
            T *xc = x + c * g->Lb;                                                            \
            for (int64_t kh = 0; kh < K1; kh++)                                               \
                for (int64_t kw = 0; kw < K2; kw++) {                                         \
                    T *row = col + ((c * K1 + kh) * K2 + kw) * ld;                            \
                    const int64_t off = kw * g->dl[2] - g->pd[2];                             \
                    const int64_t ihk = kh * g->dl[1] - g->pd[1];                             \
                    int64_t lo = off >= 0 ? 0 : (-off + st2 - 1) / st2;                       \
                    int64_t hi = B2 - 1 - off < 0 ? 0 : (B2 - 1 - off) / st2 + 1;             \
                    if (hi > S2) hi = S2;                                                     \
                    if (lo > hi) lo = hi;                                                     \
                    for (int64_t oh = oh0; oh < oh1; oh++) {                                  \
                        T *dst = row + (oh - oh0) * S2;                                       \
                        const int64_t ih = oh * st1 + ihk;                                    \
                        if (ih < 0 || ih >= B1) {                                             \
                            if (!acc)                                                         \
                                for (int64_t j = 0; j < S2; j++) dst[j] = 0;                  \
                            continue;                                                         \
                        }                                                                     \
                        if (lo == hi) {                                                       \
                            if (!acc)                                                         \
                                for (int64_t j = 0; j < S2; j++) dst[j] = 0;                  \
                            continue;                                                         \
                        }                                                                     \
                        T *src = xc + ih * B2 + off + lo * st2; /* x[ih, lo * st2 + off] */   \
                        T *d = dst + lo;                                                      \
                        const int64_t n = hi - lo;                                            \
                        if (acc) {                                                            \
                            if (st2 == 1)                                                     \
                                for (int64_t j = 0; j < n; j++) src[j] += d[j];               \
                            else                                                              \
                                for (int64_t j = 0; j < n; j++) src[j * st2] += d[j];         \
                        } else {                                                              \
                            for (int64_t j = 0; j < lo; j++) dst[j] = 0;                      \
                            if (st2 == 1)                                                     \
                                for (int64_t j = 0; j < n; j++) d[j] = src[j];                \
                            else                                                              \
                                for (int64_t j = 0; j < n; j++) d[j] = src[j * st2];          \
                            for (int64_t j = hi; j < S2; j++) dst[j] = 0;                     \
                        }                                                                     \
                    }                                                                         \
                }                                                                             \
        }                                                                                     \
    }
DEFINE_COLS2D(float, f32)
DEFINE_COLS2D(double, f64)

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define COLS_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw")))
/* float32 columns (not their sum back: overlapping masked stores and loads stall store
   forwarding, the plain loops above add faster) with unit stride along rows of at most 16
   outputs: a row segment is one masked load and one store (lanes outside [lo, hi) are never
   read) */
COLS_AVX512 static void cols2d_f32_narrow(const geo_t *g, const float *x, int64_t C, int64_t oh0,
                                          int64_t oh1, float *col, int64_t ld) {
    const int64_t S2 = g->S[2], B1 = g->B[1], B2 = g->B[2], st1 = g->st[1];
    const int64_t K1 = g->K[1], K2 = g->K[2];
    const __mmask16 full = (__mmask16)((1u << S2) - 1);
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t c = 0; c < C; c++) {
        const uintptr_t xc = (uintptr_t)(x + c * g->Lb);
        for (int64_t kh = 0; kh < K1; kh++)
            for (int64_t kw = 0; kw < K2; kw++) {
                float *row = col + ((c * K1 + kh) * K2 + kw) * ld;
                const int64_t off = kw * g->dl[2] - g->pd[2];
                const int64_t ihk = kh * g->dl[1] - g->pd[1];
                int64_t lo = off >= 0 ? 0 : -off;
                int64_t hi = B2 - off < S2 ? B2 - off : S2;
                if (hi < lo) hi = lo;
                const __mmask16 in = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
                for (int64_t oh = oh0; oh < oh1; oh++) {
                    const int64_t ih = oh * st1 + ihk;
                    __m512 v = zero;
                    if (ih >= 0 && ih < B1) /* lane j is x[ih, j + off] */
                        v = _mm512_maskz_loadu_ps(
                            in, (const float *)(xc + (uintptr_t)((ih * B2 + off) *
                                                                 (int64_t)sizeof(float))));
                    _mm512_mask_storeu_ps(row + (oh - oh0) * S2, full, v);
                }
            }
    }
}
static int cols_have_avx512 = -1;
#endif

static void cols_ld(int dt, const geo_t *g, void *x, int64_t C, int64_t l0, int64_t l1,
                    void *col, int64_t ld, int acc) {
    const int64_t S2 = g->S[2];
    if (g->K[0] == 1 && g->B[0] == 1 && g->S[0] == 1 && g->pd[0] == 0 && l0 % S2 == 0 &&
        l1 % S2 == 0) {
        const int64_t oh0 = l0 / S2, oh1 = l1 / S2;
#if defined(__x86_64__) && defined(__GNUC__)
        if (cols_have_avx512 < 0)
            cols_have_avx512 = __builtin_cpu_supports("avx512f") &&
                               __builtin_cpu_supports("avx512vl") &&
                               __builtin_cpu_supports("avx512dq") &&
                               __builtin_cpu_supports("avx512bw");
        if (dt == FM_FLOAT32 && !acc && S2 <= 16 && g->st[2] == 1 && cols_have_avx512) {
            cols2d_f32_narrow(g, (const float *)x, C, oh0, oh1, (float *)col, ld);
            return;
        }
#endif
        if (dt == FM_FLOAT32)
            cols2d_f32(g, (float *)x, C, oh0, oh1, (float *)col, ld, acc);
        else
            cols2d_f64(g, (double *)x, C, oh0, oh1, (double *)col, ld, acc);
        return;
    }
    if (dt == FM_FLOAT32)
        cols_f32(g, (float *)x, C, l0, l1, (float *)col, ld, acc);
    else
        cols_f64(g, (double *)x, C, l0, l1, (double *)col, ld, acc);
}

static void cols(int dt, int T, const geo_t *g, char *x, int64_t C, int64_t l0, int64_t l1,
                 char *col, int acc) {
    (void)T;
    cols_ld(dt, g, x, C, l0, l1, col, l1 - l0, acc);
}

/* C (m x n, leading dim ldc) = A @ B + beta * C */
static int gemm(int dt, int T, int64_t m, int64_t n, int64_t k, const void *a, int64_t sam,
                int64_t sak, const void *b, int64_t sbk, int64_t sbn, double beta, void *c,
                int64_t ldc) {
    if (dt == FM_FLOAT32 && fm_sgemm_available())
        return fm_sgemm(m, n, k, 1.0, (intptr_t)a, sam, sak, (intptr_t)b, sbk, sbn, beta,
                        (intptr_t)c, ldc, T);
    return fm_mm(dt, m, n, k, (intptr_t)c, ldc, 1, (intptr_t)a, sam, sak, (intptr_t)b, sbk, sbn,
                 1.0, beta, 0, 0);
}

static void add_bias(int dt, void *y, const void *bias, int64_t C, int64_t L) {
    if (!bias) return;
    for (int64_t c = 0; c < C; c++) {
        if (dt == FM_FLOAT32) {
            float *p = (float *)y + c * L, v = ((const float *)bias)[c];
            for (int64_t i = 0; i < L; i++) p[i] += v;
        } else {
            double *p = (double *)y + c * L, v = ((const double *)bias)[c];
            for (int64_t i = 0; i < L; i++) p[i] += v;
        }
    }
}

/* the shared parameters of one call */
typedef struct {
    int mode, dt, inner_T;
    int64_t cb, cs, groups, cbg, csg, esz, Lc, nb;
    int pointwise;
    geo_t g;
    char *a, *b, *bias, *out;
} job_t;

/* one image of FWD / BWD_DATA / IM2COL / COL2IM; col: scratch of rows * Lc elements.
   BWD_WEIGHT: adds image n's contribution into acc (beta 0 when first) */
static int one_image(const job_t *J, int64_t n, char *col, char *acc, int first) {
    const geo_t *g = &J->g;
    const int dt = J->dt, T = J->inner_T;
    const int64_t esz = J->esz, cbg = J->cbg, csg = J->csg, rows = cbg * g->Kp;
    const int64_t Lb = g->Lb, Ls = g->Ls;
    int rc = FM_OK;
    switch (J->mode) {
    case FM_CONV_IM2COL:
        cols(dt, 1, g, J->a + n * J->cb * Lb * esz, J->cb, 0, Ls,
             J->out + n * J->cb * g->Kp * Ls * esz, 0);
        return FM_OK;
    case FM_CONV_COL2IM: {
        char *y = J->out + n * J->cb * Lb * esz;
        memset(y, 0, J->cb * Lb * esz);
        cols(dt, 1, g, y, J->cb, 0, Ls, J->a + n * J->cb * g->Kp * Ls * esz, 1);
        return FM_OK;
    }
    case FM_CONV_FWD: {
        for (int64_t gi = 0; gi < J->groups && !rc; gi++) {
            char *x = J->a + (n * J->cb + gi * cbg) * Lb * esz;
            char *w = J->b + gi * csg * rows * esz;
            char *y = J->out + (n * J->cs + gi * csg) * Ls * esz;
            if (J->pointwise) {
                rc = gemm(dt, T, csg, Ls, cbg, w, rows, 1, x, Ls, 1, 0.0, y, Ls);
                continue;
            }
            for (int64_t l0 = 0; l0 < Ls && !rc; l0 += J->Lc) {
                int64_t l1 = l0 + J->Lc < Ls ? l0 + J->Lc : Ls;
                cols(dt, T, g, x, cbg, l0, l1, col, 0);
                rc = gemm(dt, T, csg, l1 - l0, rows, w, rows, 1, col, l1 - l0, 1, 0.0,
                          y + l0 * esz, Ls);
            }
        }
        if (!rc) add_bias(dt, J->out + n * J->cs * Ls * esz, J->bias, J->cs, Ls);
        return rc;
    }
    case FM_CONV_BWD_DATA: {
        char *ybase = J->out + n * J->cb * Lb * esz;
        if (!J->pointwise) memset(ybase, 0, J->cb * Lb * esz);
        for (int64_t gi = 0; gi < J->groups && !rc; gi++) {
            char *x = J->a + (n * J->cs + gi * csg) * Ls * esz;
            char *w = J->b + gi * csg * rows * esz;
            char *y = ybase + gi * cbg * Lb * esz;
            if (J->pointwise) {
                rc = gemm(dt, T, cbg, Ls, csg, w, 1, rows, x, Ls, 1, 0.0, y, Lb);
                continue;
            }
            for (int64_t l0 = 0; l0 < Ls && !rc; l0 += J->Lc) {
                int64_t l1 = l0 + J->Lc < Ls ? l0 + J->Lc : Ls;
                rc = gemm(dt, T, rows, l1 - l0, csg, w, 1, rows, x + l0 * esz, Ls, 1, 0.0, col,
                          l1 - l0);
                if (!rc) cols(dt, T, g, y, cbg, l0, l1, col, 1);
            }
        }
        if (!rc) add_bias(dt, ybase, J->bias, J->cb, Lb);
        return rc;
    }
    case FM_CONV_BWD_WEIGHT: {
        for (int64_t gi = 0; gi < J->groups && !rc; gi++) {
            char *x = J->a + (n * J->cb + gi * cbg) * Lb * esz;
            char *gy = J->b + (n * J->cs + gi * csg) * Ls * esz;
            char *gw = acc + gi * csg * rows * esz;
            if (J->pointwise) {
                rc = gemm(dt, T, csg, cbg, Ls, gy, Ls, 1, x, 1, Lb, first ? 0.0 : 1.0, gw, rows);
                continue;
            }
            for (int64_t l0 = 0; l0 < Ls && !rc; l0 += J->Lc) {
                int64_t l1 = l0 + J->Lc < Ls ? l0 + J->Lc : Ls;
                cols(dt, T, g, x, cbg, l0, l1, col, 0);
                rc = gemm(dt, T, csg, rows, l1 - l0, gy + l0 * esz, Ls, 1, col, 1, l1 - l0,
                          (first && l0 == 0) ? 0.0 : 1.0, gw, rows);
            }
        }
        return rc;
    }
    }
    return FM_ERR_ARG;
}

/* nimg images side by side (small images: one wider product instead of nimg narrow ones).
   col: rows x (nimg * Ls); tmp: csg x (nimg * Ls) */
static int image_block(const job_t *J, int64_t n0, int64_t nimg, char *col, char *tmp, char *acc,
                       int first) {
    const geo_t *g = &J->g;
    const int dt = J->dt, T = J->inner_T;
    const int64_t esz = J->esz, cbg = J->cbg, csg = J->csg, rows = cbg * g->Kp;
    const int64_t Lb = g->Lb, Ls = g->Ls, Lt = nimg * Ls, sl = Ls * esz;
    int rc = FM_OK;
    for (int64_t gi = 0; gi < J->groups && !rc; gi++) {
        char *w = J->b + gi * csg * rows * esz;
        switch (J->mode) {
        case FM_CONV_FWD:
            for (int64_t i = 0; i < nimg; i++)
                cols_ld(dt, g, J->a + ((n0 + i) * J->cb + gi * cbg) * Lb * esz, cbg, 0, Ls,
                        col + i * sl, Lt, 0);
            rc = gemm(dt, T, csg, Lt, rows, w, rows, 1, col, Lt, 1, 0.0, tmp, Lt);
            for (int64_t i = 0; i < nimg && !rc; i++) {
                char *y = J->out + ((n0 + i) * J->cs + gi * csg) * sl;
                for (int64_t c = 0; c < csg; c++)
                    memcpy(y + c * sl, tmp + (c * Lt + i * Ls) * esz, sl);
            }
            break;
        case FM_CONV_BWD_DATA:
            for (int64_t i = 0; i < nimg; i++) {
                const char *x = J->a + ((n0 + i) * J->cs + gi * csg) * sl;
                for (int64_t c = 0; c < csg; c++)
                    memcpy(tmp + (c * Lt + i * Ls) * esz, x + c * sl, sl);
            }
            rc = gemm(dt, T, rows, Lt, csg, w, 1, rows, tmp, Lt, 1, 0.0, col, Lt);
            for (int64_t i = 0; i < nimg && !rc; i++) {
                char *y = J->out + ((n0 + i) * J->cb + gi * cbg) * Lb * esz;
                memset(y, 0, cbg * Lb * esz);
                cols_ld(dt, g, y, cbg, 0, Ls, col + i * sl, Lt, 1);
            }
            break;
        case FM_CONV_BWD_WEIGHT:
            for (int64_t i = 0; i < nimg; i++) {
                const char *gy = J->b + ((n0 + i) * J->cs + gi * csg) * sl;
                for (int64_t c = 0; c < csg; c++)
                    memcpy(tmp + (c * Lt + i * Ls) * esz, gy + c * sl, sl);
                cols_ld(dt, g, J->a + ((n0 + i) * J->cb + gi * cbg) * Lb * esz, cbg, 0, Ls,
                        col + i * sl, Lt, 0);
            }
            rc = gemm(dt, T, csg, rows, Lt, tmp, Lt, 1, col, 1, Lt, first ? 0.0 : 1.0,
                      acc + gi * csg * rows * esz, rows);
            break;
        }
    }
    if (!rc && J->bias && J->mode != FM_CONV_BWD_WEIGHT)
        for (int64_t i = 0; i < nimg; i++) {
            if (J->mode == FM_CONV_FWD)
                add_bias(dt, J->out + (n0 + i) * J->cs * sl, J->bias, J->cs, Ls);
            else
                add_bias(dt, J->out + (n0 + i) * J->cb * Lb * esz, J->bias, J->cb, Lb);
        }
    return rc;
}

static int run_block(const job_t *J, int64_t blk, int64_t n, char *col, char *tmp, char *acc,
                     int first) {
    int64_t n0 = blk * J->nb, nimg = n - n0 < J->nb ? n - n0 : J->nb;
    if (J->nb == 1) return one_image(J, n0, col, acc, first);
    return image_block(J, n0, nimg, col, tmp, acc, first);
}

/* FWD for a batch smaller than the thread count: thread t of T takes every T-th column slice
   of every image (the slices write disjoint output columns) */
static int fwd_chunks(const job_t *J, int64_t n, int t, int T, char *col) {
    const geo_t *g = &J->g;
    const int dt = J->dt;
    const int64_t esz = J->esz, cbg = J->cbg, csg = J->csg, rows = cbg * g->Kp;
    const int64_t Lb = g->Lb, Ls = g->Ls, Lc = J->Lc, nq = (Ls + Lc - 1) / Lc;
    for (int64_t i = 0; i < n; i++)
        for (int64_t gi = 0; gi < J->groups; gi++)
            for (int64_t q = t; q < nq; q += T) {
                int64_t l0 = q * Lc, l1 = l0 + Lc < Ls ? l0 + Lc : Ls;
                char *x = J->a + (i * J->cb + gi * cbg) * Lb * esz;
                char *w = J->b + gi * csg * rows * esz;
                char *y = J->out + (i * J->cs + gi * csg) * Ls * esz;
                int rc;
                if (J->pointwise) {
                    rc = gemm(dt, 1, csg, l1 - l0, cbg, w, rows, 1, x + l0 * esz, Ls, 1, 0.0,
                              y + l0 * esz, Ls);
                } else {
                    cols_ld(dt, g, x, cbg, l0, l1, col, l1 - l0, 0);
                    rc = gemm(dt, 1, csg, l1 - l0, rows, w, rows, 1, col, l1 - l0, 1, 0.0,
                              y + l0 * esz, Ls);
                }
                if (rc) return rc;
                if (J->bias)
                    for (int64_t c = 0; c < csg; c++) {
                        if (dt == FM_FLOAT32) {
                            float *p = (float *)y + c * Ls, v = ((float *)J->bias)[gi * csg + c];
                            for (int64_t l = l0; l < l1; l++) p[l] += v;
                        } else {
                            double *p = (double *)y + c * Ls;
                            double v = ((double *)J->bias)[gi * csg + c];
                            for (int64_t l = l0; l < l1; l++) p[l] += v;
                        }
                    }
            }
    return FM_OK;
}

/* thread t of T: its share of the image blocks, with its own scratch; sets *started once it
   wrote into acc, and *rc on failure */
static void worker(const job_t *J, int t, int T, int64_t nblk, int64_t n, int64_t colbytes,
                   int64_t tmpbytes, char *acc, int *started, int *rc) {
    char *col = (char *)fm_alloc(colbytes), *tmp = (char *)fm_alloc(tmpbytes);
    if (!col || !tmp) {
        __atomic_store_n(rc, FM_ERR_NOMEM, __ATOMIC_RELAXED);
    } else {
        for (int64_t i = nblk * t / T; i < nblk * (t + 1) / T; i++) {
            if (__atomic_load_n(rc, __ATOMIC_RELAXED)) break;
            int r = run_block(J, i, n, col, tmp, acc, !*started);
            *started = 1;
            if (r) __atomic_store_n(rc, r, __ATOMIC_RELAXED);
        }
    }
    if (col) fm_free((intptr_t)col, colbytes);
    if (tmp) fm_free((intptr_t)tmp, tmpbytes);
}

int fm__conv_depthwise(int mode, int dt, int64_t n, int64_t cb, int64_t m, const int64_t *B,
                       const int64_t *S, const int64_t *K, const int64_t *st, const int64_t *pd,
                       const int64_t *dl, char *a, char *b, char *bias, char *out);

int fm__conv_winograd(int mode, int dt, int nd, int64_t n, int64_t cb, int64_t cs,
                      int64_t groups, const int64_t *B, const int64_t *S, const int64_t *K,
                      const int64_t *st, const int64_t *pd, const int64_t *dl, const char *a,
                      const char *b, const char *bias, char *out);

static int depthwise_on = 1;

int fm_conv_set_depthwise(int on) {
    int prev = depthwise_on;
    if (on >= 0) depthwise_on = on != 0;
    return prev;
}

static int64_t chunk_elems = 131072; /* 512 KB of float32: measured best of 32K..512K */

int64_t fm_conv_set_chunk(int64_t elems) {
    int64_t prev = chunk_elems;
    if (elems > 0) chunk_elems = elems;
    return prev;
}

int fm_conv(int mode, int dtype, int nd, int64_t n, int64_t cb, int64_t cs, int64_t groups,
            const int64_t *big, const int64_t *small, const int64_t *k, const int64_t *stride,
            const int64_t *pad, const int64_t *dil, intptr_t a, intptr_t b, intptr_t bias,
            intptr_t out) {
    if (mode < FM_CONV_FWD || mode > FM_CONV_COL2IM) return FM_ERR_ARG;
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (nd < 1 || nd > 3) return FM_ERR_NDIM;
    if (mode >= FM_CONV_IM2COL) groups = 1, cs = cb;
    if (n < 0 || cb < 1 || cs < 1 || groups < 1 || cb % groups || cs % groups) return FM_ERR_ARG;
    job_t J;
    memset(&J, 0, sizeof(J));
    geo_t *g = &J.g;
    for (int i = 0; i < 3; i++) {
        int j = i - (3 - nd);
        g->B[i] = j < 0 ? 1 : big[j];
        g->S[i] = j < 0 ? 1 : small[j];
        g->K[i] = j < 0 ? 1 : k[j];
        g->st[i] = j < 0 ? 1 : stride[j];
        g->pd[i] = j < 0 ? 0 : pad[j];
        g->dl[i] = j < 0 ? 1 : dil[j];
        if (g->B[i] < 1 || g->S[i] < 1 || g->K[i] < 1 || g->st[i] < 1 || g->pd[i] < 0 ||
            g->dl[i] < 1)
            return FM_ERR_ARG;
    }
    g->Lb = g->B[0] * g->B[1] * g->B[2];
    g->Ls = g->S[0] * g->S[1] * g->S[2];
    g->Kp = g->K[0] * g->K[1] * g->K[2];
    J.mode = mode, J.dt = dtype, J.cb = cb, J.cs = cs, J.groups = groups;
    J.cbg = cb / groups, J.csg = cs / groups, J.esz = fm_itemsize[dtype];
    J.a = (char *)a, J.b = (char *)b, J.bias = (char *)bias, J.out = (char *)out;
    J.pointwise = g->Kp == 1 && g->Lb == g->Ls && mode <= FM_CONV_BWD_WEIGHT;
    for (int i = 0; i < 3; i++)
        if (g->st[i] != 1 || g->pd[i] != 0) J.pointwise = 0;
    const int64_t rows = J.cbg * g->Kp;
    /* whole 32-column tiles of the GEMM kernel (a partial tile per slice costs more than the
       extra row segments) */
    int64_t Lc = chunk_elems / rows / 32 * 32;
    if (Lc < 32) Lc = 32;
    if (mode >= FM_CONV_IM2COL || Lc > g->Ls) Lc = g->Ls;
    J.Lc = Lc;
    const int64_t wbytes = cs * rows * J.esz;
    if (n == 0) {
        if (mode == FM_CONV_BWD_WEIGHT) memset(J.out, 0, wbytes);
        return FM_OK;
    }
    /* depthwise (one input channel per group, a few outputs each): direct loops (conv_dw.c) */
    if (depthwise_on && mode <= FM_CONV_BWD_WEIGHT && J.cbg == 1 && cb >= 2 && J.csg <= 8) {
        int r = fm__conv_depthwise(mode, dtype, n, cb, J.csg, g->B, g->S, g->K, g->st, g->pd,
                                   g->dl, J.a, J.b, J.bias, J.out);
        if (r != -1) return r;
    }
    /* 3x3 stride-1 float32 with enough channels and tiles: Winograd F(2x2, 3x3) (conv_wino.c) */
    if (mode <= FM_CONV_BWD_WEIGHT) {
        int r = fm__conv_winograd(mode, dtype, nd, n, cb, cs, groups, g->B, g->S, g->K, g->st,
                                  g->pd, g->dl, J.a, J.b, J.bias, J.out);
        if (r != -1) return r;
    }
    /* threads: over images (one whole product each) when the batch allows, else inside sgemm */
    const double work = 2.0 * (double)n * (double)cs * (double)rows * (double)g->Ls;
    const int sg = dtype == FM_FLOAT32 && fm_sgemm_available();
    int nt = mode >= FM_CONV_IM2COL ? 1 : sg ? fm_par_threads(work, 4e6) : 1;
    int outer = nt > 1 && n >= nt ? nt : 1;
    /* small images: several side by side per product (narrow products waste the kernel) */
    J.nb = 1;
    if (mode <= FM_CONV_BWD_WEIGHT && g->Ls < 256) {
        int64_t per = (n + outer - 1) / outer, nb = (512 + g->Ls - 1) / g->Ls;
        int64_t cap = (int64_t)(1 << 21) / (rows * g->Ls);
        if (nb > cap) nb = cap;
        if (nb > per) nb = per;
        J.nb = nb < 1 ? 1 : nb;
    }
    /* sgemm's own threads are never used: they synchronise per block and on a busy machine
       small threaded products ran 30x slower than one thread. A batch smaller than the thread
       count splits FWD's column slices over threads; the backward modes run on one thread. */
    J.inner_T = 1;
    if (nt > 1 && n < nt && mode == FM_CONV_FWD) {
        J.nb = 1;
        int64_t want = (g->Ls + 2 * nt - 1) / (2 * nt);
        want = want < 32 ? 32 : (want + 31) / 32 * 32;
        if (J.pointwise || want < Lc) J.Lc = Lc = want < g->Ls ? want : g->Ls;
        const int64_t cb2 = J.pointwise ? 64 : rows * Lc * J.esz;
        int rc = FM_OK;
#pragma omp parallel num_threads(nt)
        {
            char *col = (char *)fm_alloc(cb2);
            int r = col ? fwd_chunks(&J, n, omp_get_thread_num(), omp_get_num_threads(), col)
                        : FM_ERR_NOMEM;
            if (r) __atomic_store_n(&rc, r, __ATOMIC_RELAXED);
            if (col) fm_free((intptr_t)col, cb2);
        }
        return rc;
    }
    const int64_t nblk = (n + J.nb - 1) / J.nb;
    if (nblk < outer) outer = 1;
    const int64_t colbytes = J.nb > 1 ? rows * J.nb * g->Ls * J.esz
                             : J.pointwise || mode >= FM_CONV_IM2COL ? 64 : rows * Lc * J.esz;
    const int64_t tmpbytes = J.nb > 1 ? J.csg * J.nb * g->Ls * J.esz : 64;
    int rc = FM_OK;
    if (mode == FM_CONV_BWD_WEIGHT) {
        char *accs[64] = {0};
        int started[64] = {0};
        accs[0] = J.out;
        for (int t = 1; t < outer; t++) {
            accs[t] = (char *)fm_alloc(wbytes);
            if (!accs[t]) rc = FM_ERR_NOMEM;
        }
        if (!rc) {
            if (outer > 1) {
#pragma omp parallel num_threads(outer)
                {
                    int t = omp_get_thread_num();
                    worker(&J, t, omp_get_num_threads(), nblk, n, colbytes, tmpbytes, accs[t],
                           &started[t], &rc);
                }
            } else {
                worker(&J, 0, 1, nblk, n, colbytes, tmpbytes, accs[0], &started[0], &rc);
            }
        }
        if (!rc) {
            if (!started[0]) memset(J.out, 0, wbytes);
            int64_t cnt = cs * rows;
            for (int t = 1; t < outer; t++) {
                if (!started[t]) continue;
                if (dtype == FM_FLOAT32) {
                    float *o = (float *)J.out, *s = (float *)accs[t];
                    for (int64_t i = 0; i < cnt; i++) o[i] += s[i];
                } else {
                    double *o = (double *)J.out, *s = (double *)accs[t];
                    for (int64_t i = 0; i < cnt; i++) o[i] += s[i];
                }
            }
        }
        for (int t = 1; t < outer; t++)
            if (accs[t]) fm_free((intptr_t)accs[t], wbytes);
        return rc;
    }
    /* no enclosing region when one thread drives: sgemm's and the column builders' own
       regions must be top-level (nested ones ran tens of times slower) */
    if (outer > 1) {
        int dummy[64] = {0};
#pragma omp parallel num_threads(outer)
        {
            int t = omp_get_thread_num();
            worker(&J, t, omp_get_num_threads(), nblk, n, colbytes, tmpbytes, NULL, &dummy[t],
                   &rc);
        }
    } else {
        int dummy = 0;
        worker(&J, 0, 1, nblk, n, colbytes, tmpbytes, NULL, &dummy, &rc);
    }
    return rc;
}
