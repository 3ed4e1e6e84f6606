/* Normalisation kernels: batch norm over (N, C, S) and row norms (layer, group, RMS), forward
   and backward (grad_input, grad_weight, grad_bias in one call). See api_norm.h.

   Statistics are one pass of shifted sums accumulated in double: subtracting the first
   element of the set before summing x and x^2 keeps E[d^2] - E[d]^2 free of cancellation
   whenever the data's spread is not tiny against its distance from that element, and, unlike
   Welford's recurrence, the loop vectorises (omp simd reductions). */
#include <stdlib.h>
#include "fiamma.h"
#include "dtypes.h"
#include "api_norm.h"

/* work (elements) below which the kernels stay on one thread */
#define NORM_PAR_MIN 65536.0

#define DEFINE_NORM(T, SFX)                                                                     \
/* sums of (x - sh) and (x - sh)^2 over n contiguous or strided elements */                     \
static inline void sums_##SFX(const T *p, int64_t n, int64_t st, double sh, double *s1,        \
                              double *s2) {                                                     \
    double a = 0, b = 0;                                                                        \
    if (st == 1) {                                                                              \
        _Pragma("omp simd reduction(+:a,b)")                                                    \
        for (int64_t i = 0; i < n; i++) { double d = (double)p[i] - sh; a += d; b += d * d; }  \
    } else {                                                                                    \
        for (int64_t i = 0; i < n; i++) { double d = (double)p[i * st] - sh; a += d; b += d * d; } \
    }                                                                                           \
    *s1 += a; *s2 += b;                                                                         \
}                                                                                               \
                                                                                                \
FM_CLONES static void bn_fwd_##SFX(int64_t N, int64_t C, int64_t S, const T *X,                \
        const int64_t *xs, T *Y, const T *W, const T *B, T *MEAN, T *INV, T *RM, int64_t srm,  \
        T *RV, int64_t srv, int training, double mom, double eps) {                            \
    int nt = fm_par_threads((double)N * C * S, NORM_PAR_MIN);                                   \
    int64_t sN = xs[0], sC = xs[1], sS = xs[2];                                                 \
    _Pragma("omp parallel for num_threads(nt) schedule(static)")                                \
    for (int64_t c = 0; c < C; c++) {                                                           \
        double mu, inv;                                                                         \
        if (training) {                                                                         \
            double m = (double)N * S, s1 = 0, s2 = 0;                                           \
            double sh = m > 0 ? (double)X[c * sC] : 0.0;                                        \
            for (int64_t n = 0; n < N; n++) sums_##SFX(X + n * sN + c * sC, S, sS, sh, &s1, &s2); \
            double dm = m > 0 ? s1 / m : 0.0;                                                  \
            double var = m > 0 ? s2 / m - dm * dm : NAN;                                        \
            if (var < 0) var = 0;                                                               \
            mu = sh + dm;                                                                       \
            inv = 1.0 / sqrt(var + eps);                                                        \
            if (RM) RM[c * srm] = (T)((1 - mom) * (double)RM[c * srm] + mom * mu);              \
            if (RV) {                                                                           \
                double ub = m > 1 ? var * m / (m - 1) : (double)INFINITY;                       \
                RV[c * srv] = (T)((1 - mom) * (double)RV[c * srv] + mom * ub);                 \
            }                                                                                   \
        } else {                                                                                \
            mu = (double)RM[c * srm];                                                           \
            inv = 1.0 / sqrt((double)RV[c * srv] + eps);                                        \
        }                                                                                       \
        MEAN[c] = (T)mu; INV[c] = (T)inv;                                                       \
        double a = inv * (W ? (double)W[c] : 1.0);                                              \
        T ta = (T)a, tb = (T)((B ? (double)B[c] : 0.0) - mu * a);                               \
        for (int64_t n = 0; n < N; n++) {                                                       \
            const T *p = X + n * sN + c * sC;                                                   \
            T *q = Y + (n * C + c) * S;                                                         \
            if (sS == 1) {                                                                      \
                _Pragma("omp simd")                                                             \
                for (int64_t i = 0; i < S; i++) q[i] = p[i] * ta + tb;                          \
            } else {                                                                            \
                for (int64_t i = 0; i < S; i++) q[i] = p[i * sS] * ta + tb;                     \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
}                                                                                               \
                                                                                                \
/* eval with a contiguous input: every (n, c) plane is one affine map, split over planes */     \
FM_CLONES static void bn_eval_planes_##SFX(int64_t N, int64_t C, int64_t S, const T *X, T *Y,  \
        const T *W, const T *B, const T *RM, int64_t srm, const T *RV, int64_t srv, T *MEAN,   \
        T *INV, double eps) {                                                                   \
    for (int64_t c = 0; c < C; c++) {                                                           \
        MEAN[c] = RM[c * srm];                                                                  \
        INV[c] = (T)(1.0 / sqrt((double)RV[c * srv] + eps));                                    \
    }                                                                                           \
    int nt = fm_par_threads((double)N * C * S, NORM_PAR_MIN * 4);                               \
    _Pragma("omp parallel for num_threads(nt) schedule(static)")                                \
    for (int64_t pl = 0; pl < N * C; pl++) {                                                    \
        int64_t c = pl % C;                                                                     \
        double a = (double)INV[c] * (W ? (double)W[c] : 1.0);                                  \
        T ta = (T)a, tb = (T)((B ? (double)B[c] : 0.0) - (double)MEAN[c] * a);                  \
        const T *p = X + pl * S;                                                                \
        T *q = Y + pl * S;                                                                      \
        _Pragma("omp simd")                                                                     \
        for (int64_t i = 0; i < S; i++) q[i] = p[i] * ta + tb;                                  \
    }                                                                                           \
}                                                                                               \
                                                                                                \
FM_CLONES static void bn_bwd_##SFX(int64_t N, int64_t C, int64_t S, const T *G,                \
        const int64_t *gs, const T *X, const int64_t *xs, const T *W, const T *MEAN,           \
        const T *INV, int training, T *GX, T *GW, T *GB) {                                      \
    int nt = fm_par_threads((double)N * C * S, NORM_PAR_MIN);                                   \
    _Pragma("omp parallel for num_threads(nt) schedule(static)")                                \
    for (int64_t c = 0; c < C; c++) {                                                           \
        double mu = (double)MEAN[c], inv = (double)INV[c], m = (double)N * S;                  \
        double w = W ? (double)W[c] : 1.0;                                                      \
        double sg = 0, sgx = 0;                                                                 \
        int need = training || GW || GB;                                                        \
        for (int64_t n = 0; n < N && need; n++) {                                               \
            const T *pg = G + n * gs[0] + c * gs[1];                                            \
            const T *px = X + n * xs[0] + c * xs[1];                                            \
            double a = 0, b = 0;                                                                \
            if (gs[2] == 1 && xs[2] == 1) {                                                     \
                _Pragma("omp simd reduction(+:a,b)")                                            \
                for (int64_t i = 0; i < S; i++) {                                               \
                    double gv = (double)pg[i];                                                  \
                    a += gv; b += gv * ((double)px[i] - mu);                                    \
                }                                                                               \
            } else {                                                                            \
                for (int64_t i = 0; i < S; i++) {                                               \
                    double gv = (double)pg[i * gs[2]];                                          \
                    a += gv; b += gv * ((double)px[i * xs[2]] - mu);                            \
                }                                                                               \
            }                                                                                   \
            sg += a; sgx += b;                                                                  \
        }                                                                                       \
        if (GB) GB[c] = (T)sg;                                                                  \
        if (GW) GW[c] = (T)(sgx * inv);                                                         \
        if (!GX) continue;                                                                      \
        T k1 = (T)(w * inv), k2 = 0, k0 = 0, tmu = (T)mu;                                       \
        if (training && m > 0) {                                                                \
            k2 = (T)(-w * inv * inv * inv * sgx / m);                                           \
            k0 = (T)(-w * inv * sg / m);                                                        \
        }                                                                                       \
        for (int64_t n = 0; n < N; n++) {                                                       \
            const T *pg = G + n * gs[0] + c * gs[1];                                            \
            const T *px = X + n * xs[0] + c * xs[1];                                            \
            T *q = GX + (n * C + c) * S;                                                        \
            if (gs[2] == 1 && xs[2] == 1) {                                                     \
                _Pragma("omp simd")                                                             \
                for (int64_t i = 0; i < S; i++) q[i] = pg[i] * k1 + (px[i] - tmu) * k2 + k0;   \
            } else {                                                                            \
                for (int64_t i = 0; i < S; i++)                                                 \
                    q[i] = pg[i * gs[2]] * k1 + (px[i * xs[2]] - tmu) * k2 + k0;                \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
}                                                                                               \
                                                                                                \
FM_CLONES static void row_fwd_##SFX(int rms, int64_t M, int64_t K, const T *X, int64_t sx,     \
        T *Y, const T *W, const T *B, int64_t G, int64_t P, int64_t Sp, T *MEAN, T *RSTD,      \
        double eps) {                                                                           \
    int nt = fm_par_threads((double)M * K, NORM_PAR_MIN);                                       \
    _Pragma("omp parallel for num_threads(nt) schedule(static)")                                \
    for (int64_t r = 0; r < M; r++) {                                                           \
        const T *p = X + r * sx;                                                                \
        T *q = Y + r * K;                                                                       \
        double s1 = 0, s2 = 0, mu = 0, var;                                                     \
        double sh = (!rms && K > 0) ? (double)p[0] : 0.0;                                       \
        sums_##SFX(p, K, 1, sh, &s1, &s2);                                                      \
        if (rms) var = K > 0 ? s2 / K : NAN;                                                    \
        else {                                                                                  \
            double dm = K > 0 ? s1 / K : 0.0;                                                  \
            var = K > 0 ? s2 / K - dm * dm : NAN;                                               \
            if (var < 0) var = 0;                                                               \
            mu = sh + dm;                                                                       \
            MEAN[r] = (T)mu;                                                                    \
        }                                                                                       \
        double inv = 1.0 / sqrt(var + eps);                                                     \
        RSTD[r] = (T)inv;                                                                       \
        int64_t off = (r % G) * P;                                                              \
        if (Sp == 1) {                                                                          \
            T tm = (T)mu, ti = (T)inv;                                                          \
            const T *w = W ? W + off : NULL, *b = B ? B + off : NULL;                           \
            if (w && b) {                                                                       \
                _Pragma("omp simd")                                                             \
                for (int64_t k = 0; k < K; k++) q[k] = (p[k] - tm) * ti * w[k] + b[k];          \
            } else if (w) {                                                                     \
                _Pragma("omp simd")                                                             \
                for (int64_t k = 0; k < K; k++) q[k] = (p[k] - tm) * ti * w[k];                 \
            } else if (b) {                                                                     \
                _Pragma("omp simd")                                                             \
                for (int64_t k = 0; k < K; k++) q[k] = (p[k] - tm) * ti + b[k];                 \
            } else {                                                                            \
                _Pragma("omp simd")                                                             \
                for (int64_t k = 0; k < K; k++) q[k] = (p[k] - tm) * ti;                        \
            }                                                                                   \
        } else {                                                                                \
            for (int64_t pp = 0; pp < P; pp++) {                                                \
                double a = inv * (W ? (double)W[off + pp] : 1.0);                               \
                T ta = (T)a, tb = (T)((B ? (double)B[off + pp] : 0.0) - mu * a);                \
                const T *pi = p + pp * Sp;                                                      \
                T *qi = q + pp * Sp;                                                            \
                _Pragma("omp simd")                                                             \
                for (int64_t i = 0; i < Sp; i++) qi[i] = pi[i] * ta + tb;                       \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
}                                                                                               \
                                                                                                \
FM_CLONES static int row_bwd_##SFX(int rms, int64_t M, int64_t K, const T *Gr, int64_t sg,     \
        const T *X, int64_t sx, const T *W, int64_t G, int64_t P, int64_t Sp, const T *MEAN,   \
        const T *RSTD, T *GX, T *GW, T *GB) {                                                   \
    int64_t nw = G * P;                                                                         \
    int want = GW || GB;                                                                        \
    int nt = fm_par_threads((double)M * K, NORM_PAR_MIN);                                       \
    double *tot = NULL;                                                                         \
    if (want) { tot = calloc((size_t)(2 * nw + 1), sizeof(double)); if (!tot) return FM_ERR_NOMEM; } \
    int fail = 0;                                                                               \
    _Pragma("omp parallel num_threads(nt)")                                                     \
    {                                                                                           \
        double *acc = NULL;                                                                     \
        if (want) { acc = calloc((size_t)(2 * nw + 1), sizeof(double)); if (!acc) fail = 1; }  \
        _Pragma("omp for schedule(static)")                                                     \
        for (int64_t r = 0; r < M; r++) {                                                       \
            if (want && !acc) continue;                                                         \
            const T *pg = Gr + r * sg, *px = X + r * sx;                                        \
            double mu = rms ? 0.0 : (double)MEAN[r], inv = (double)RSTD[r];                    \
            int64_t off = (r % G) * P;                                                          \
            double A = 0, Bs = 0;                                                               \
            if (Sp == 1) {                                                                      \
                const T *w = W ? W + off : NULL;                                                \
                _Pragma("omp simd reduction(+:A,Bs)")                                           \
                for (int64_t k = 0; k < K; k++) {                                               \
                    double gh = (double)pg[k] * (w ? (double)w[k] : 1.0);                       \
                    A += gh; Bs += gh * ((double)px[k] - mu);                                   \
                }                                                                               \
            } else {                                                                            \
                for (int64_t pp = 0; pp < P; pp++) {                                            \
                    double a = 0, b = 0, wv = W ? (double)W[off + pp] : 1.0;                    \
                    const T *gi = pg + pp * Sp, *xi = px + pp * Sp;                             \
                    _Pragma("omp simd reduction(+:a,b)")                                        \
                    for (int64_t i = 0; i < Sp; i++) {                                          \
                        double gv = (double)gi[i];                                              \
                        a += gv; b += gv * ((double)xi[i] - mu);                                \
                    }                                                                           \
                    A += a * wv; Bs += b * wv;                                                  \
                    if (acc) { acc[off + pp] += b * inv; acc[nw + off + pp] += a; }             \
                }                                                                               \
            }                                                                                   \
            Bs *= inv; /* sum of gh * xhat */                                                   \
            T tmu = (T)mu, ti = (T)inv;                                                         \
            T ka = (T)(rms ? 0.0 : -inv * A / K), kb = (T)(-inv * inv * Bs / K);               \
            if (!GX) { if (Sp != 1 || !acc) continue; }                                         \
            T *q = GX ? GX + r * K : NULL;                                                      \
            if (Sp == 1) {                                                                      \
                const T *w = W ? W + off : NULL;                                                \
                if (q) {                                                                        \
                    _Pragma("omp simd")                                                         \
                    for (int64_t k = 0; k < K; k++)                                             \
                        q[k] = pg[k] * (w ? w[k] : (T)1) * ti + ka + (px[k] - tmu) * kb;        \
                }                                                                               \
                if (acc) {                                                                      \
                    double *aw = acc + off, *ab = acc + nw + off;                               \
                    _Pragma("omp simd")                                                         \
                    for (int64_t k = 0; k < K; k++) {                                           \
                        double gv = (double)pg[k];                                              \
                        aw[k] += gv * ((double)px[k] - mu) * inv; ab[k] += gv;                  \
                    }                                                                           \
                }                                                                               \
            } else if (q) {                                                                     \
                for (int64_t pp = 0; pp < P; pp++) {                                            \
                    T k1 = (T)(inv * (W ? (double)W[off + pp] : 1.0));                          \
                    const T *gi = pg + pp * Sp, *xi = px + pp * Sp;                             \
                    T *qi = q + pp * Sp;                                                        \
                    _Pragma("omp simd")                                                         \
                    for (int64_t i = 0; i < Sp; i++) qi[i] = gi[i] * k1 + ka + (xi[i] - tmu) * kb; \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
        if (acc) {                                                                              \
            _Pragma("omp critical(fm_norm_acc)")                                                \
            for (int64_t i = 0; i < 2 * nw; i++) tot[i] += acc[i];                              \
            free(acc);                                                                          \
        }                                                                                       \
    }                                                                                           \
    if (tot) {                                                                                  \
        if (!fail) {                                                                            \
            if (GW) for (int64_t i = 0; i < nw; i++) GW[i] = (T)tot[i];                         \
            if (GB) for (int64_t i = 0; i < nw; i++) GB[i] = (T)tot[nw + i];                    \
        }                                                                                       \
        free(tot);                                                                              \
    }                                                                                           \
    return fail ? FM_ERR_NOMEM : FM_OK;                                                         \
}

DEFINE_NORM(float, f32)
DEFINE_NORM(double, f64)

static int dims_ok(int64_t a, int64_t b, int64_t c) { return a >= 0 && b >= 0 && c >= 0; }

int fm_batch_norm_fwd(int dtype, int64_t N, int64_t C, int64_t S, intptr_t x,
                      const int64_t *xs, intptr_t y, intptr_t w, intptr_t b, intptr_t mean,
                      intptr_t invstd, intptr_t rmean, int64_t srm, intptr_t rvar, int64_t srv,
                      int training, double momentum, double eps) {
    if (!dims_ok(N, C, S)) return FM_ERR_ARG;
    if (!training && (!rmean || !rvar)) return FM_ERR_ARG;
    int planes = !training && xs[2] == 1 && xs[1] == S && xs[0] == C * S;
#define BN_CALL(T, SFX)                                                                        \
    if (planes) bn_eval_planes_##SFX(N, C, S, (const T *)x, (T *)y, (const T *)w, (const T *)b, \
                                     (const T *)rmean, srm, (const T *)rvar, srv, (T *)mean,   \
                                     (T *)invstd, eps);                                        \
    else bn_fwd_##SFX(N, C, S, (const T *)x, xs, (T *)y, (const T *)w, (const T *)b, (T *)mean, \
                      (T *)invstd, (T *)rmean, srm, (T *)rvar, srv, training, momentum, eps);
    if (dtype == FM_FLOAT32) { BN_CALL(float, f32) }
    else if (dtype == FM_FLOAT64) { BN_CALL(double, f64) }
    else return FM_ERR_DTYPE;
#undef BN_CALL
    return FM_OK;
}

int fm_batch_norm_bwd(int dtype, int64_t N, int64_t C, int64_t S, intptr_t g,
                      const int64_t *gs, intptr_t x, const int64_t *xs, intptr_t w,
                      intptr_t mean, intptr_t invstd, int training, intptr_t gx, intptr_t gw,
                      intptr_t gb) {
    if (!dims_ok(N, C, S)) return FM_ERR_ARG;
    if (dtype == FM_FLOAT32)
        bn_bwd_f32(N, C, S, (const float *)g, gs, (const float *)x, xs, (const float *)w,
                   (const float *)mean, (const float *)invstd, training, (float *)gx,
                   (float *)gw, (float *)gb);
    else if (dtype == FM_FLOAT64)
        bn_bwd_f64(N, C, S, (const double *)g, gs, (const double *)x, xs, (const double *)w,
                   (const double *)mean, (const double *)invstd, training, (double *)gx,
                   (double *)gw, (double *)gb);
    else return FM_ERR_DTYPE;
    return FM_OK;
}

static int row_args_ok(int64_t M, int64_t K, int64_t G, int64_t P, int64_t Sp) {
    return dims_ok(M, K, P) && G >= 1 && Sp >= 1 && P * Sp == K;
}

int fm_row_norm_fwd(int dtype, int rms, int64_t M, int64_t K, intptr_t x, int64_t sx,
                    intptr_t y, intptr_t w, intptr_t b, int64_t G, int64_t P, int64_t Sp,
                    intptr_t mean, intptr_t rstd, double eps) {
    if (!row_args_ok(M, K, G, P, Sp) || (!rms && !mean) || !rstd) return FM_ERR_ARG;
    if (dtype == FM_FLOAT32)
        row_fwd_f32(rms, M, K, (const float *)x, sx, (float *)y, (const float *)w,
                    (const float *)b, G, P, Sp, (float *)mean, (float *)rstd, eps);
    else if (dtype == FM_FLOAT64)
        row_fwd_f64(rms, M, K, (const double *)x, sx, (double *)y, (const double *)w,
                    (const double *)b, G, P, Sp, (double *)mean, (double *)rstd, eps);
    else return FM_ERR_DTYPE;
    return FM_OK;
}

int fm_row_norm_bwd(int dtype, int rms, int64_t M, int64_t K, intptr_t g, int64_t sg,
                    intptr_t x, int64_t sx, intptr_t w, int64_t G, int64_t P, int64_t Sp,
                    intptr_t mean, intptr_t rstd, intptr_t gx, intptr_t gw, intptr_t gb) {
    if (!row_args_ok(M, K, G, P, Sp) || (!rms && !mean) || !rstd) return FM_ERR_ARG;
    if (dtype == FM_FLOAT32)
        return row_bwd_f32(rms, M, K, (const float *)g, sg, (const float *)x, sx,
                           (const float *)w, G, P, Sp, (const float *)mean,
                           (const float *)rstd, (float *)gx, (float *)gw, (float *)gb);
    if (dtype == FM_FLOAT64)
        return row_bwd_f64(rms, M, K, (const double *)g, sg, (const double *)x, sx,
                           (const double *)w, G, P, Sp, (const double *)mean,
                           (const double *)rstd, (double *)gx, (double *)gw, (double *)gb);
    return FM_ERR_DTYPE;
}
