/* Convolutions by im2col + GEMM (fm_conv, see api_conv.h).
 *
 * Why chunks: the full column matrix of one image (cb * prod(k) rows by prod(small) columns) is
 * several MB for typical layers; it is built a slice of output positions at a time so the slice
 * is still in L2 when the GEMM packs it. Pointwise convolutions (1 x 1, stride 1, no padding)
 * skip the columns: the image already is the matrix. float32 GEMMs run on fiamma's sgemm, one
 * image per thread when the batch allows (no synchronisation inside a product), else all threads
 * on each product; float64 goes to BLAS, which threads itself.
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
   (C * Kp) x (l1 - l0) row-major matrix; with ACC the reverse: col is added into x */
#define DEFINE_COLS(T, SFX)                                                                     \
    static void cols_##SFX(const geo_t *g, T *x, int64_t C, int64_t l0, int64_t l1, T *col,   \
                           int acc) {                                                         \
        const int64_t Lc = l1 - l0, S12 = g->S[1] * g->S[2];                                  \
        const int64_t st2 = g->st[2];                                                         \
        for (int64_t c = 0; c < C; c++) {                                                     \
            T *xc = x + c * g->Lb;                                                            \
            int64_t kidx = 0;                                                                 \
            for (int64_t kd = 0; kd < g->K[0]; kd++)                                          \
                for (int64_t kh = 0; kh < g->K[1]; kh++)                                      \
                    for (int64_t kw = 0; kw < g->K[2]; kw++, kidx++) {                        \
                        T *row = col + (c * g->Kp + kidx) * Lc;                               \
                        const int64_t off = kw * g->dl[2] - g->pd[2];                         \
                        /* ow range whose input column is inside the image */                 \
                        int64_t owlo = off >= 0 ? 0 : (-off + st2 - 1) / st2;                 \
                        int64_t owhi = g->B[2] - 1 - off < 0 ? 0                              \
                                                              : (g->B[2] - 1 - off) / st2 + 1;  \
                        int64_t l = l0;                                                       \
                        while (l < l1) {                                                      \
                            int64_t od = l / S12, r = l - od * S12;                           \
                            int64_t oh = r / g->S[2], ow0 = r - oh * g->S[2];                 \
                            int64_t seg = g->S[2] - ow0;                                      \
                            if (seg > l1 - l) seg = l1 - l;                                   \
                            T *dst = row + (l - l0);                                          \
                            int64_t id = od * g->st[0] - g->pd[0] + kd * g->dl[0];            \
                            int64_t ih = oh * g->st[1] - g->pd[1] + kh * g->dl[1];            \
                            int64_t ja = owlo - ow0, jb = owhi - ow0;                         \
                            if (ja < 0) ja = 0;                                               \
                            if (jb > seg) jb = seg;                                           \
                            if (id < 0 || id >= g->B[0] || ih < 0 || ih >= g->B[1] || ja >= jb) { \
                                if (!acc) memset(dst, 0, seg * sizeof(T));                    \
                            } else {                                                          \
                                T *src = xc + (id * g->B[1] + ih) * g->B[2] + off;            \
                                if (!acc) {                                                   \
                                    if (ja > 0) memset(dst, 0, ja * sizeof(T));               \
                                    if (jb < seg) memset(dst + jb, 0, (seg - jb) * sizeof(T)); \
                                }                                                             \
                                const int64_t base = ow0 * st2;                               \
                                if (acc) {                                                    \
                                    for (int64_t j = ja; j < jb; j++)                         \
                                        src[base + j * st2] += dst[j];                        \
                                } else if (st2 == 1) {                                        \
                                    memcpy(dst + ja, src + base + ja, (jb - ja) * sizeof(T)); \
                                } else {                                                      \
                                    for (int64_t j = ja; j < jb; j++)                         \
                                        dst[j] = src[base + j * st2];                         \
                                }                                                             \
                            }                                                                 \
                            l += seg;                                                         \
                        }                                                                     \
                    }                                                                         \
        }                                                                                     \
    }
DEFINE_COLS(float, f32)
DEFINE_COLS(double, f64)

static void cols(int dt, const geo_t *g, void *x, int64_t C, int64_t l0, int64_t l1, void *col,
                 int acc) {
    if (dt == FM_FLOAT32)
        cols_f32(g, (float *)x, C, l0, l1, (float *)col, acc);
    else
        cols_f64(g, (double *)x, C, l0, l1, (double *)col, acc);
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
    int64_t cb, cs, groups, cbg, csg, esz, Lc;
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
        cols(dt, g, J->a + n * J->cb * Lb * esz, J->cb, 0, Ls,
             J->out + n * J->cb * g->Kp * Ls * esz, 0);
        return FM_OK;
    case FM_CONV_COL2IM: {
        char *y = J->out + n * J->cb * Lb * esz;
        memset(y, 0, J->cb * Lb * esz);
        cols(dt, g, y, J->cb, 0, Ls, J->a + n * J->cb * g->Kp * Ls * esz, 1);
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
                cols(dt, g, x, cbg, l0, l1, col, 0);
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
                if (!rc) cols(dt, g, y, cbg, l0, l1, col, 1);
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
                cols(dt, g, x, cbg, l0, l1, col, 0);
                rc = gemm(dt, T, csg, rows, l1 - l0, gy + l0 * esz, Ls, 1, col, 1, l1 - l0,
                          (first && l0 == 0) ? 0.0 : 1.0, gw, rows);
            }
        }
        return rc;
    }
    }
    return FM_ERR_ARG;
}

/* elements of the column slice: about 256 KB of float32 (fits L2 beside the packed operands) */
#define CHUNK_ELEMS 65536

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
    int64_t Lc = CHUNK_ELEMS / rows;
    Lc = Lc < 64 ? 64 : (Lc + 31) / 32 * 32;
    if (mode >= FM_CONV_IM2COL || Lc > g->Ls) Lc = g->Ls;
    J.Lc = Lc;
    const int64_t wbytes = cs * rows * J.esz;
    if (n == 0) {
        if (mode == FM_CONV_BWD_WEIGHT) memset(J.out, 0, wbytes);
        return FM_OK;
    }
    /* threads: over images (one whole product each) when the batch allows, else inside sgemm */
    const double work = 2.0 * (double)n * (double)cs * (double)rows * (double)g->Ls;
    const int sg = dtype == FM_FLOAT32 && fm_sgemm_available();
    int nt = mode >= FM_CONV_IM2COL ? 1 : sg ? fm_par_threads(work, 4e6) : 1;
    int outer = nt > 1 && n >= nt ? nt : 1;
    J.inner_T = outer > 1 ? 1 : nt;
    const int64_t colbytes = J.pointwise || mode >= FM_CONV_IM2COL ? 64 : rows * Lc * J.esz;
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
#pragma omp parallel num_threads(outer) if (outer > 1)
            {
                int t = omp_get_thread_num();
                char *col = (char *)fm_alloc(colbytes);
                if (!col) {
                    __atomic_store_n(&rc, FM_ERR_NOMEM, __ATOMIC_RELAXED);
                } else {
#pragma omp for schedule(static)
                    for (int64_t i = 0; i < n; i++) {
                        if (__atomic_load_n(&rc, __ATOMIC_RELAXED)) continue;
                        int r = one_image(&J, i, col, accs[t], !started[t]);
                        started[t] = 1;
                        if (r) __atomic_store_n(&rc, r, __ATOMIC_RELAXED);
                    }
                    fm_free((intptr_t)col, colbytes);
                }
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
#pragma omp parallel num_threads(outer) if (outer > 1)
    {
        char *col = (char *)fm_alloc(colbytes);
        if (!col) {
            __atomic_store_n(&rc, FM_ERR_NOMEM, __ATOMIC_RELAXED);
        } else {
#pragma omp for schedule(static)
            for (int64_t i = 0; i < n; i++) {
                if (__atomic_load_n(&rc, __ATOMIC_RELAXED)) continue;
                int r = one_image(&J, i, col, NULL, 0);
                if (r) __atomic_store_n(&rc, r, __ATOMIC_RELAXED);
            }
            fm_free((intptr_t)col, colbytes);
        }
    }
    return rc;
}
