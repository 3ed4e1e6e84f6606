/* Pooling kernels: max / average / adaptive pools over 1-3 spatial dims and their backward
 * (declarations and the window conventions in api_pool.h). Planes are contiguous; threads split
 * the N*C planes, so no two threads ever write the same element. */
#include <stdlib.h>
#include <math.h>
#include <omp.h>
#include "fiamma.h"
#include "dtypes.h"
#include "api_pool.h"

/* Per spatial dim and output position: the first in-bounds tap, the number of in-bounds taps and
 * the divisor factor of an avg pool (window size with padding, or the in-bounds count). */
typedef struct {
    int64_t *start[3], *cnt[3], *fac[3];
    int64_t step[3];
    int64_t *buf;
} windows;

static int make_windows(windows *w, int adaptive, int avg, int cip, const int64_t *isz,
                        const int64_t *osz, const int64_t *k, const int64_t *s,
                        const int64_t *p, const int64_t *d) {
    int64_t tot = 0;
    for (int a = 0; a < 3; a++) {
        if (isz[a] < 0 || osz[a] < 0) return FM_ERR_ARG;
        if (!adaptive && (k[a] < 1 || s[a] < 1 || p[a] < 0 || (d && d[a] < 1))) return FM_ERR_ARG;
        tot += osz[a];
    }
    w->buf = (int64_t *)malloc(sizeof(int64_t) * 3 * (size_t)(tot + 1));
    if (!w->buf) return FM_ERR_NOMEM;
    int64_t *q = w->buf;
    for (int a = 0; a < 3; a++) {
        int64_t n = osz[a], in = isz[a];
        w->start[a] = q; w->cnt[a] = q + n; w->fac[a] = q + 2 * n; q += 3 * n;
        w->step[a] = (adaptive || avg || !d) ? 1 : d[a];
        for (int64_t o = 0; o < n; o++) {
            int64_t st, c, f;
            if (adaptive) {
                st = (o * in) / n;
                int64_t en = ((o + 1) * in + n - 1) / n;
                c = en - st;
                f = c;
            } else if (avg) {
                int64_t b = o * s[a] - p[a];
                int64_t e = b + k[a];
                if (e > in + p[a]) e = in + p[a];
                int64_t pool = e - b;
                if (b < 0) b = 0;
                if (e > in) e = in;
                st = b;
                c = e > b ? e - b : 0;
                f = cip ? pool : c;
            } else {
                int64_t b = o * s[a] - p[a], dl = d[a];
                int64_t j0 = b < 0 ? (-b + dl - 1) / dl : 0;
                int64_t j1 = k[a] - 1;
                if (b + j1 * dl > in - 1) j1 = (in - 1 - b) >= 0 ? (in - 1 - b) / dl : -1;
                c = j1 >= j0 ? j1 - j0 + 1 : 0;
                st = b + j0 * dl;
                /* a window with no tap inside (dilation) still reports an in-plane index */
                if (st > in - 1) st = in - 1;
                if (st < 0) st = 0;
                f = c;
            }
            w->start[a][o] = st; w->cnt[a][o] = c; w->fac[a][o] = f;
        }
    }
    return FM_OK;
}

#define POOL_MIN_WORK 60000.0

/* Sum of n contiguous values with 8 independent partial sums (a global pool's whole plane, or
 * the full rows of a window): the add latency chain of one accumulator made the ResNet-head
 * adaptive average pool twice PyTorch's time. */
#define DEFINE_SUM(T, SFX)                                                                       \
static inline T sum_contig_##SFX(const T *FM_RESTRICT r, int64_t n) {                            \
    T a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;                            \
    int64_t c = 0;                                                                               \
    for (; c + 8 <= n; c += 8) {                                                                 \
        a0 += r[c]; a1 += r[c + 1]; a2 += r[c + 2]; a3 += r[c + 3];                             \
        a4 += r[c + 4]; a5 += r[c + 5]; a6 += r[c + 6]; a7 += r[c + 7];                         \
    }                                                                                            \
    for (; c < n; c++) a0 += r[c];                                                               \
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));                                    \
}
DEFINE_SUM(float, f32)
DEFINE_SUM(double, f64)

#define DEFINE_POOL(T, SFX)                                                                      \
static void max_plane_##SFX(const windows *w, const int64_t *isz, const int64_t *osz,           \
                            const T *FM_RESTRICT ip, T *FM_RESTRICT op, int64_t *FM_RESTRICT xp) \
{                                                                                                \
    const int64_t H = isz[1], W = isz[2], HW = H * W;                                            \
    const int64_t dd = w->step[0], dh = w->step[1], dw = w->step[2];                             \
    for (int64_t od = 0; od < osz[0]; od++) {                                                    \
        const int64_t sd = w->start[0][od], cd = w->cnt[0][od];                                  \
        for (int64_t oh = 0; oh < osz[1]; oh++) {                                                \
            const int64_t sh = w->start[1][oh], ch = w->cnt[1][oh];                              \
            for (int64_t ow = 0; ow < osz[2]; ow++) {                                            \
                const int64_t sw = w->start[2][ow], cw = w->cnt[2][ow];                          \
                T best = -INFINITY;                                                              \
                int64_t bi = sd * HW + sh * W + sw;                                              \
                for (int64_t a = 0; a < cd; a++) {                                               \
                    for (int64_t b = 0; b < ch; b++) {                                           \
                        const int64_t row = (sd + a * dd) * HW + (sh + b * dh) * W + sw;         \
                        const T *r = ip + row;                                                   \
                        for (int64_t c = 0; c < cw; c++) {                                       \
                            T v = r[c * dw];                                                     \
                            if (v > best || v != v) { best = v; bi = row + c * dw; }             \
                        }                                                                        \
                    }                                                                            \
                }                                                                                \
                *op++ = best;                                                                    \
                if (xp) *xp++ = bi;                                                              \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
}                                                                                                \
                                                                                                 \
static void avg_plane_##SFX(const windows *w, const int64_t *isz, const int64_t *osz,           \
                            int64_t divo, const T *FM_RESTRICT ip, T *FM_RESTRICT op)           \
{                                                                                                \
    const int64_t H = isz[1], W = isz[2], HW = H * W;                                            \
    for (int64_t od = 0; od < osz[0]; od++) {                                                    \
        const int64_t sd = w->start[0][od], cd = w->cnt[0][od], fd = w->fac[0][od];              \
        for (int64_t oh = 0; oh < osz[1]; oh++) {                                                \
            const int64_t sh = w->start[1][oh], ch = w->cnt[1][oh], fh = w->fac[1][oh];          \
            for (int64_t ow = 0; ow < osz[2]; ow++) {                                            \
                const int64_t sw = w->start[2][ow], cw = w->cnt[2][ow];                          \
                T acc = 0;                                                                       \
                if (cw == W) {  /* whole rows: each depth slice of the window is contiguous */   \
                    for (int64_t a = 0; a < cd; a++)                                             \
                        acc += sum_contig_##SFX(ip + (sd + a) * HW + sh * W, ch * W);            \
                } else {                                                                         \
                    for (int64_t a = 0; a < cd; a++) {                                           \
                        for (int64_t b = 0; b < ch; b++) {                                       \
                            const T *r = ip + (sd + a) * HW + (sh + b) * W + sw;                 \
                            if (cw >= 16) { acc += sum_contig_##SFX(r, cw); continue; }          \
                            for (int64_t c = 0; c < cw; c++) acc += r[c];                        \
                        }                                                                        \
                    }                                                                            \
                }                                                                                \
                int64_t dv = divo > 0 ? divo : fd * fh * w->fac[2][ow];                          \
                *op++ = acc / (T)dv;                                                             \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
}                                                                                                \
                                                                                                 \
static void avg_back_plane_##SFX(const windows *w, const int64_t *isz, const int64_t *osz,      \
                                 int64_t divo, const T *FM_RESTRICT gp, T *FM_RESTRICT ip)      \
{                                                                                                \
    const int64_t H = isz[1], W = isz[2], HW = H * W;                                            \
    memset(ip, 0, sizeof(T) * (size_t)(isz[0] * HW));                                            \
    for (int64_t od = 0; od < osz[0]; od++) {                                                    \
        const int64_t sd = w->start[0][od], cd = w->cnt[0][od], fd = w->fac[0][od];              \
        for (int64_t oh = 0; oh < osz[1]; oh++) {                                                \
            const int64_t sh = w->start[1][oh], ch = w->cnt[1][oh], fh = w->fac[1][oh];          \
            for (int64_t ow = 0; ow < osz[2]; ow++) {                                            \
                const int64_t sw = w->start[2][ow], cw = w->cnt[2][ow];                          \
                int64_t dv = divo > 0 ? divo : fd * fh * w->fac[2][ow];                          \
                const T g = *gp++ / (T)dv;                                                       \
                for (int64_t a = 0; a < cd; a++) {                                               \
                    for (int64_t b = 0; b < ch; b++) {                                           \
                        T *r = ip + (sd + a) * HW + (sh + b) * W + sw;                           \
                        for (int64_t c = 0; c < cw; c++) r[c] += g;                              \
                    }                                                                            \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
}                                                                                                \
                                                                                                 \
static int64_t scatter_plane_##SFX(int acc, int64_t ssize, int64_t dsize,                        \
                                   const T *FM_RESTRICT sp, const int64_t *FM_RESTRICT xp,       \
                                   T *FM_RESTRICT dp, int *ok)                                   \
{                                                                                                \
    memset(dp, 0, sizeof(T) * (size_t)dsize);                                                    \
    for (int64_t j = 0; j < ssize; j++) {                                                        \
        int64_t x = xp[j];                                                                       \
        if ((uint64_t)x >= (uint64_t)dsize) { *ok = 0; return x; }                               \
        if (acc) dp[x] += sp[j]; else dp[x] = sp[j];                                             \
    }                                                                                            \
    return 0;                                                                                    \
}

DEFINE_POOL(float, f32)
DEFINE_POOL(double, f64)

/* Global average pool (one output per plane: ResNet's head): planes [q0, q1) summed whole; a
 * separate function so the ISA clones vectorise the 8 partial sums. */
#define DEFINE_GLOBAL(T, SFX)                                                                    \
FM_CLONES static void global_avg_##SFX(const T *FM_RESTRICT I, T *FM_RESTRICT O, int64_t q0,    \
                                       int64_t q1, int64_t is, T div) {                          \
    for (int64_t q = q0; q < q1; q++) {                                                          \
        const T *r = I + q * is;                                                                 \
        T a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;                        \
        int64_t c = 0;                                                                           \
        for (; c + 8 <= is; c += 8) {                                                            \
            a0 += r[c]; a1 += r[c + 1]; a2 += r[c + 2]; a3 += r[c + 3];                         \
            a4 += r[c + 4]; a5 += r[c + 5]; a6 += r[c + 6]; a7 += r[c + 7];                     \
        }                                                                                        \
        for (; c < is; c++) a0 += r[c];                                                          \
        O[q] = (((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))) / div;                       \
    }                                                                                            \
}
DEFINE_GLOBAL(float, f32)
DEFINE_GLOBAL(double, f64)

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define POOL_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw")))
static int pool_have_avx512 = -1;

/* float32 2x2 windows at stride 2 inside an H x W plane (max_pool2d(2), the classic CNN
   downsampling): 16 outputs per step, each input row split into its even and odd columns by
   one two-source permute; the scan order and the NaN rule are the generic loop's (a later tap
   is taken when greater or NaN), so values and indices are identical. */
POOL_AVX512 static void max2x2_plane_f32(const float *ip, float *op, int64_t *xp, int64_t W,
                                         int64_t OH, int64_t OW) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                           28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512i lane2 = _mm512_slli_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 1);
    const __m512i one = _mm512_set1_epi32(1), wv = _mm512_set1_epi32((int)W);
    for (int64_t oh = 0; oh < OH; oh++) {
        const float *r0 = ip + 2 * oh * W, *r1 = r0 + W;
        for (int64_t ow = 0; ow < OW; ow += 16) {
            const int64_t n = OW - ow < 16 ? OW - ow : 16;
            const __mmask16 m = (__mmask16)((1u << n) - 1);
            /* 2n inputs: the first min(2n, 16) from lo, the rest from hi */
            const __mmask16 mlo = (__mmask16)(n >= 8 ? 0xFFFFu : (1u << (2 * n)) - 1);
            const __mmask16 mhi = (__mmask16)(n > 8 ? (1u << (2 * n - 16)) - 1 : 0);
            const float *a0 = r0 + 2 * ow, *a1 = r1 + 2 * ow;
            const __m512 l0 = _mm512_maskz_loadu_ps(mlo, a0), h0 = _mm512_maskz_loadu_ps(mhi, a0 + 16);
            const __m512 l1 = _mm512_maskz_loadu_ps(mlo, a1), h1 = _mm512_maskz_loadu_ps(mhi, a1 + 16);
            const __m512 v[4] = {_mm512_permutex2var_ps(l0, even, h0),
                                 _mm512_permutex2var_ps(l0, odd, h0),
                                 _mm512_permutex2var_ps(l1, even, h1),
                                 _mm512_permutex2var_ps(l1, odd, h1)};
            const __m512i i0 = _mm512_add_epi32(_mm512_set1_epi32((int)(2 * oh * W + 2 * ow)),
                                                lane2);
            const __m512i idx[4] = {i0, _mm512_add_epi32(i0, one), _mm512_add_epi32(i0, wv),
                                    _mm512_add_epi32(_mm512_add_epi32(i0, wv), one)};
            __m512 best = v[0];
            __m512i bi = idx[0];
            for (int t = 1; t < 4; t++) {
                const __mmask16 take = _mm512_cmp_ps_mask(v[t], best, _CMP_GT_OQ) |
                                       _mm512_cmp_ps_mask(v[t], v[t], _CMP_UNORD_Q);
                best = _mm512_mask_mov_ps(best, take, v[t]);
                bi = _mm512_mask_mov_epi32(bi, take, idx[t]);
            }
            _mm512_mask_storeu_ps(op + oh * OW + ow, m, best);
            if (xp) {
                int64_t *x = xp + oh * OW + ow;
                _mm512_mask_storeu_epi64(x, (__mmask8)(m & 0xFF),
                                         _mm512_cvtepi32_epi64(_mm512_castsi512_si256(bi)));
                _mm512_mask_storeu_epi64(x + 8, (__mmask8)(m >> 8),
                                         _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(bi, 1)));
            }
        }
    }
}
#endif

/* whether a max pool is the plain 2x2 stride-2 one over a 2-D plane that the kernel above
   serves (every window whole: ceil_mode's partial last windows take the generic loop) */
static int plain_2x2(int adaptive, const int64_t *isz, const int64_t *osz, const int64_t *k,
                     const int64_t *s, const int64_t *p, const int64_t *d) {
    if (adaptive || isz[0] != 1 || osz[0] != 1 || k[0] != 1) return 0;
    if (k[1] != 2 || k[2] != 2 || s[1] != 2 || s[2] != 2 || p[0] || p[1] || p[2]) return 0;
    if (d[0] != 1 || d[1] != 1 || d[2] != 1) return 0;
    if (2 * osz[1] > isz[1] || 2 * osz[2] > isz[2]) return 0;
    return isz[1] * isz[2] <= INT32_MAX;
}

static int64_t prod3(const int64_t *v) { return v[0] * v[1] * v[2]; }

int fm_pool_max(int dtype, int adaptive, int64_t nplanes, const int64_t *isz,
                const int64_t *osz, const int64_t *k, const int64_t *s, const int64_t *p,
                const int64_t *d, intptr_t in, intptr_t out, intptr_t idx) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (nplanes < 0) return FM_ERR_ARG;
    windows w;
    int rc = make_windows(&w, adaptive, 0, 0, isz, osz, k, s, p, d);
    if (rc) return rc;
    const int64_t is = prod3(isz), os = prod3(osz);
    double taps = adaptive ? (double)is : (double)(k[0] * k[1] * k[2]) * (double)os;
    int nt = fm_par_threads((double)nplanes * (taps > os ? taps : os), POOL_MIN_WORK);
    int64_t *X = (int64_t *)idx;
#if defined(__x86_64__) && defined(__GNUC__)
    if (pool_have_avx512 < 0)
        pool_have_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
    if (dtype == FM_FLOAT32 && pool_have_avx512 && plain_2x2(adaptive, isz, osz, k, s, p, d)) {
        const float *I = (const float *)in; float *O = (float *)out;
        nt = fm_par_threads((double)nplanes * (double)is * 0.25, POOL_MIN_WORK);
        #pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t q = 0; q < nplanes; q++)
            max2x2_plane_f32(I + q * is, O + q * os, X ? X + q * os : NULL, isz[2], osz[1],
                             osz[2]);
        free(w.buf);
        return FM_OK;
    }
#endif
    if (dtype == FM_FLOAT32) {
        const float *I = (const float *)in; float *O = (float *)out;
        #pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t q = 0; q < nplanes; q++)
            max_plane_f32(&w, isz, osz, I + q * is, O + q * os, X ? X + q * os : NULL);
    } else {
        const double *I = (const double *)in; double *O = (double *)out;
        #pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t q = 0; q < nplanes; q++)
            max_plane_f64(&w, isz, osz, I + q * is, O + q * os, X ? X + q * os : NULL);
    }
    free(w.buf);
    return FM_OK;
}

static int avg_common(int backward, int dtype, int adaptive, int64_t nplanes, const int64_t *isz,
                      const int64_t *osz, const int64_t *k, const int64_t *s, const int64_t *p,
                      int cip, int64_t divo, intptr_t src, intptr_t dst) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (nplanes < 0) return FM_ERR_ARG;
    if (adaptive && !backward && osz[0] == 1 && osz[1] == 1 && osz[2] == 1) {
        const int64_t is = prod3(isz);
        int nt = fm_par_threads((double)nplanes * (double)is, POOL_MIN_WORK);
        #pragma omp parallel num_threads(nt)
        {
            int t = omp_get_thread_num(), T = omp_get_num_threads();
            int64_t q0 = nplanes * t / T, q1 = nplanes * (t + 1) / T;
            if (dtype == FM_FLOAT32)
                global_avg_f32((const float *)src, (float *)dst, q0, q1, is, (float)is);
            else
                global_avg_f64((const double *)src, (double *)dst, q0, q1, is, (double)is);
        }
        return FM_OK;
    }
    windows w;
    int rc = make_windows(&w, adaptive, 1, cip, isz, osz, k, s, p, NULL);
    if (rc) return rc;
    const int64_t is = prod3(isz), os = prod3(osz);
    double taps = adaptive ? (double)is : (double)(k[0] * k[1] * k[2]) * (double)os;
    int nt = fm_par_threads((double)nplanes * (taps > is ? taps : is), POOL_MIN_WORK);
    if (dtype == FM_FLOAT32) {
        const float *S = (const float *)src; float *Dp = (float *)dst;
        if (backward) {
            #pragma omp parallel for num_threads(nt) schedule(static)
            for (int64_t q = 0; q < nplanes; q++)
                avg_back_plane_f32(&w, isz, osz, divo, S + q * os, Dp + q * is);
        } else {
            #pragma omp parallel for num_threads(nt) schedule(static)
            for (int64_t q = 0; q < nplanes; q++)
                avg_plane_f32(&w, isz, osz, divo, S + q * is, Dp + q * os);
        }
    } else {
        const double *S = (const double *)src; double *Dp = (double *)dst;
        if (backward) {
            #pragma omp parallel for num_threads(nt) schedule(static)
            for (int64_t q = 0; q < nplanes; q++)
                avg_back_plane_f64(&w, isz, osz, divo, S + q * os, Dp + q * is);
        } else {
            #pragma omp parallel for num_threads(nt) schedule(static)
            for (int64_t q = 0; q < nplanes; q++)
                avg_plane_f64(&w, isz, osz, divo, S + q * is, Dp + q * os);
        }
    }
    free(w.buf);
    return FM_OK;
}

int fm_pool_avg(int dtype, int adaptive, int64_t nplanes, const int64_t *isz,
                const int64_t *osz, const int64_t *k, const int64_t *s, const int64_t *p,
                int count_include_pad, int64_t divisor_override, intptr_t in, intptr_t out) {
    return avg_common(0, dtype, adaptive, nplanes, isz, osz, k, s, p, count_include_pad,
                      divisor_override, in, out);
}

int fm_pool_avg_backward(int dtype, int adaptive, int64_t nplanes, const int64_t *isz,
                         const int64_t *osz, const int64_t *k, const int64_t *s,
                         const int64_t *p, int count_include_pad, int64_t divisor_override,
                         intptr_t gout, intptr_t gin) {
    return avg_common(1, dtype, adaptive, nplanes, isz, osz, k, s, p, count_include_pad,
                      divisor_override, gout, gin);
}

int fm_pool_scatter(int dtype, int accumulate, int64_t nplanes, int64_t ssize, int64_t dsize,
                    intptr_t src, intptr_t idx, intptr_t dst, int64_t *bad) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (nplanes < 0 || ssize < 0 || dsize < 0) return FM_ERR_ARG;
    int ok = 1;
    int64_t badv = 0;
    int nt = fm_par_threads((double)nplanes * (double)(ssize + dsize), POOL_MIN_WORK);
    const int64_t *X = (const int64_t *)idx;
    #pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t q = 0; q < nplanes; q++) {
        int lok = 1;
        int64_t b;
        if (dtype == FM_FLOAT32)
            b = scatter_plane_f32(accumulate, ssize, dsize, (const float *)src + q * ssize,
                                  X + q * ssize, (float *)dst + q * dsize, &lok);
        else
            b = scatter_plane_f64(accumulate, ssize, dsize, (const double *)src + q * ssize,
                                  X + q * ssize, (double *)dst + q * dsize, &lok);
        if (!lok) {
            #pragma omp critical(fm_pool_bad)
            { if (ok) { ok = 0; badv = b; } }
        }
    }
    if (!ok) { *bad = badv; return FM_ERR_INDEX; }
    return FM_OK;
}
