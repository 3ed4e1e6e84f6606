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
#include <omp.h>

/* work (elements) below which the kernels stay on one thread */
#define NORM_PAR_MIN 65536.0

/* The OpenMP region lives outside the ISA clones (an omp region inside a target_clones
   function ran 6-9x slower on short rows here); each thread calls the clone on its range. */
typedef void (*range_fn)(const void *ctx, int64_t lo, int64_t hi, int tid);

static void par_range(int nt, int64_t n, range_fn fn, const void *ctx) {
    if (nt <= 1 || n <= 1) { fn(ctx, 0, n, 0); return; }
    if (nt > n) nt = (int)n;
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), k = omp_get_num_threads();
        fn(ctx, n * t / k, n * (t + 1) / k, t);
    }
}

typedef struct {
    int64_t N, C, S, srm, srv;
    const int64_t *xs;
    const void *X, *W, *B;
    void *Y, *MEAN, *INV, *RM, *RV;
    int training;
    double mom, eps;
    double *scr; /* (N, C) inputs: 5 * C doubles of per-channel scratch */
} bnf_ctx;

typedef struct {
    int64_t N, C, S;
    const int64_t *gs, *xs;
    const void *G, *X, *W, *MEAN, *INV;
    void *GX, *GW, *GB;
    int training;
    double *scr;
} bnb_ctx;

typedef struct {
    int rms;
    int64_t M, K, sx, G, P, Sp;
    const void *X, *W, *B;
    void *Y, *MEAN, *RSTD;
    double eps;
} rowf_ctx;

typedef struct {
    int rms;
    int64_t M, K, sg, sx, G, P, Sp, nacc;
    const void *Gr, *X, *W, *MEAN, *RSTD;
    void *GX;
    double *acc; /* per thread: nacc doubles (grad_weight sums, then grad_bias sums), or NULL */
} rowb_ctx;

/* sums of (x - sh) and (x - sh)^2 over n contiguous or strided elements, added to s1, s2 (a
   macro, not a function: a default-ISA helper is not inlined into an ISA clone, and calling it
   from AVX code per row cost 0.5 us a call here) */
#define NORM_SUMS(T, p, n, st, sh, s1, s2)                                                      \
    do {                                                                                        \
        double a_ = 0, b_ = 0;                                                                  \
        if ((st) == 1) {                                                                        \
            _Pragma("omp simd reduction(+:a_,b_)")                                              \
            for (int64_t i_ = 0; i_ < (n); i_++) {                                              \
                double d_ = (double)(p)[i_] - (sh); a_ += d_; b_ += d_ * d_;                    \
            }                                                                                   \
        } else {                                                                                \
            for (int64_t i_ = 0; i_ < (n); i_++) {                                              \
                double d_ = (double)(p)[i_ * (st)] - (sh); a_ += d_; b_ += d_ * d_;             \
            }                                                                                   \
        }                                                                                       \
        (s1) += a_; (s2) += b_;                                                                 \
    } while (0)

#define DEFINE_NORM(T, SFX)                                                                     \
FM_CLONES static void bn_fwd_##SFX(const void *vc, int64_t lo, int64_t hi, int tid) {          \
    const bnf_ctx *k = vc;                                                                      \
    int64_t N = k->N, C = k->C, S = k->S, sN = k->xs[0], sC = k->xs[1], sS = k->xs[2];          \
    const T *X = k->X, *W = k->W, *B = k->B;                                                    \
    T *Y = k->Y, *MEAN = k->MEAN, *INV = k->INV, *RM = k->RM, *RV = k->RV;                     \
    double mom = k->mom, eps = k->eps;                                                          \
    for (int64_t c = lo; c < hi; c++) {                                                         \
        double mu, inv;                                                                         \
        if (k->training) {                                                                      \
            double m = (double)N * S, s1 = 0, s2 = 0;                                           \
            double sh = m > 0 ? (double)X[c * sC] : 0.0;                                        \
            for (int64_t n = 0; n < N; n++) NORM_SUMS(T, X + n * sN + c * sC, S, sS, sh, s1, s2); \
            double dm = m > 0 ? s1 / m : 0.0;                                                  \
            double var = m > 0 ? s2 / m - dm * dm : NAN;                                        \
            if (var < 0) var = 0;                                                               \
            mu = sh + dm;                                                                       \
            inv = 1.0 / sqrt(var + eps);                                                        \
            if (RM) RM[c * k->srm] = (T)((1 - mom) * (double)RM[c * k->srm] + mom * mu);        \
            if (RV) {                                                                           \
                double ub = m > 1 ? var * m / (m - 1) : (double)INFINITY;                       \
                RV[c * k->srv] = (T)((1 - mom) * (double)RV[c * k->srv] + mom * ub);           \
            }                                                                                   \
        } else {                                                                                \
            mu = (double)RM[c * k->srm];                                                        \
            inv = 1.0 / sqrt((double)RV[c * k->srv] + eps);                                     \
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
/* eval with a contiguous input: every (n, c) plane is one affine map (MEAN/INV already set) */ \
FM_CLONES static void bn_planes_##SFX(const void *vc, int64_t lo, int64_t hi, int tid) {       \
    const bnf_ctx *k = vc;                                                                      \
    int64_t C = k->C, S = k->S;                                                                 \
    const T *X = k->X, *W = k->W, *B = k->B, *MEAN = k->MEAN, *INV = k->INV;                    \
    T *Y = k->Y;                                                                                \
    for (int64_t pl = lo; pl < hi; pl++) {                                                      \
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
FM_CLONES static void bn_bwd_##SFX(const void *vc, int64_t lo, int64_t hi, int tid) {          \
    const bnb_ctx *k = vc;                                                                      \
    int64_t N = k->N, C = k->C, S = k->S;                                                       \
    const int64_t *gs = k->gs, *xs = k->xs;                                                     \
    const T *G = k->G, *X = k->X, *W = k->W, *MEAN = k->MEAN, *INV = k->INV;                    \
    T *GX = k->GX, *GW = k->GW, *GB = k->GB;                                                    \
    int training = k->training;                                                                 \
    for (int64_t c = lo; c < hi; c++) {                                                         \
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
/* (N, C) input with unit channel stride: rows are swept once, vectorised over the channels     \
   of this thread's range (a loop per channel would run N loops of one element) */             \
FM_CLONES static void bn2d_fwd_##SFX(const void *vc, int64_t lo, int64_t hi, int tid) {        \
    const bnf_ctx *k = vc;                                                                      \
    int64_t N = k->N, C = k->C, sN = k->xs[0];                                                  \
    const T *X = k->X, *W = k->W, *B = k->B;                                                    \
    T *Y = k->Y, *MEAN = k->MEAN, *INV = k->INV, *RM = k->RM, *RV = k->RV;                     \
    double *s1 = k->scr, *s2 = k->scr + C, *sh = k->scr + 2 * C;                                \
    T *ta = (T *)(k->scr + 3 * C), *tb = (T *)(k->scr + 4 * C);                                 \
    double mom = k->mom, eps = k->eps, m = (double)N;                                           \
    if (k->training) {                                                                          \
        for (int64_t c = lo; c < hi; c++) { s1[c] = s2[c] = 0; sh[c] = N > 0 ? (double)X[c] : 0; } \
        for (int64_t n = 0; n < N; n++) {                                                       \
            const T *p = X + n * sN;                                                            \
            _Pragma("omp simd")                                                                 \
            for (int64_t c = lo; c < hi; c++) {                                                 \
                double d = (double)p[c] - sh[c]; s1[c] += d; s2[c] += d * d;                    \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
    for (int64_t c = lo; c < hi; c++) {                                                         \
        double mu, inv;                                                                         \
        if (k->training) {                                                                      \
            double dm = m > 0 ? s1[c] / m : 0.0;                                               \
            double var = m > 0 ? s2[c] / m - dm * dm : NAN;                                     \
            if (var < 0) var = 0;                                                               \
            mu = sh[c] + dm;                                                                    \
            inv = 1.0 / sqrt(var + eps);                                                        \
            if (RM) RM[c * k->srm] = (T)((1 - mom) * (double)RM[c * k->srm] + mom * mu);        \
            if (RV) {                                                                           \
                double ub = m > 1 ? var * m / (m - 1) : (double)INFINITY;                       \
                RV[c * k->srv] = (T)((1 - mom) * (double)RV[c * k->srv] + mom * ub);           \
            }                                                                                   \
        } else {                                                                                \
            mu = (double)RM[c * k->srm];                                                        \
            inv = 1.0 / sqrt((double)RV[c * k->srv] + eps);                                     \
        }                                                                                       \
        MEAN[c] = (T)mu; INV[c] = (T)inv;                                                       \
        double a = inv * (W ? (double)W[c] : 1.0);                                              \
        ta[c] = (T)a; tb[c] = (T)((B ? (double)B[c] : 0.0) - mu * a);                           \
    }                                                                                           \
    for (int64_t n = 0; n < N; n++) {                                                           \
        const T *p = X + n * sN;                                                                \
        T *q = Y + n * C;                                                                       \
        _Pragma("omp simd")                                                                     \
        for (int64_t c = lo; c < hi; c++) q[c] = p[c] * ta[c] + tb[c];                          \
    }                                                                                           \
}                                                                                               \
                                                                                                \
FM_CLONES static void bn2d_bwd_##SFX(const void *vc, int64_t lo, int64_t hi, int tid) {        \
    const bnb_ctx *k = vc;                                                                      \
    int64_t N = k->N, C = k->C, sgN = k->gs[0], sxN = k->xs[0];                                 \
    const T *G = k->G, *X = k->X, *W = k->W, *MEAN = k->MEAN, *INV = k->INV;                    \
    T *GX = k->GX, *GW = k->GW, *GB = k->GB;                                                    \
    double *sg = k->scr, *sgx = k->scr + C, m = (double)N;                                      \
    T *k1 = (T *)(k->scr + 2 * C), *k2 = (T *)(k->scr + 3 * C), *k0 = (T *)(k->scr + 4 * C);   \
    int need = k->training || GW || GB;                                                         \
    for (int64_t c = lo; c < hi; c++) sg[c] = sgx[c] = 0;                                       \
    for (int64_t n = 0; n < N && need; n++) {                                                   \
        const T *pg = G + n * sgN, *px = X + n * sxN;                                           \
        _Pragma("omp simd")                                                                     \
        for (int64_t c = lo; c < hi; c++) {                                                     \
            double gv = (double)pg[c];                                                          \
            sg[c] += gv; sgx[c] += gv * ((double)px[c] - (double)MEAN[c]);                      \
        }                                                                                       \
    }                                                                                           \
    for (int64_t c = lo; c < hi; c++) {                                                         \
        double inv = (double)INV[c], w = W ? (double)W[c] : 1.0;                                \
        if (GB) GB[c] = (T)sg[c];                                                               \
        if (GW) GW[c] = (T)(sgx[c] * inv);                                                      \
        k1[c] = (T)(w * inv);                                                                   \
        k2[c] = k->training && m > 0 ? (T)(-w * inv * inv * inv * sgx[c] / m) : (T)0;          \
        k0[c] = k->training && m > 0 ? (T)(-w * inv * sg[c] / m) : (T)0;                       \
    }                                                                                           \
    if (!GX) return;                                                                            \
    for (int64_t n = 0; n < N; n++) {                                                           \
        const T *pg = G + n * sgN, *px = X + n * sxN;                                           \
        T *q = GX + n * C;                                                                      \
        _Pragma("omp simd")                                                                     \
        for (int64_t c = lo; c < hi; c++) q[c] = pg[c] * k1[c] + (px[c] - MEAN[c]) * k2[c] + k0[c]; \
    }                                                                                           \
}                                                                                               \
FM_CLONES static void row_fwd_##SFX(const void *vc, int64_t lo, int64_t hi, int tid) {         \
    const rowf_ctx *c = vc;                                                                     \
    int rms = c->rms;                                                                           \
    int64_t K = c->K, sx = c->sx, G = c->G, P = c->P, Sp = c->Sp;                               \
    const T *X = c->X, *W = c->W, *B = c->B;                                                    \
    T *Y = c->Y, *MEAN = c->MEAN, *RSTD = c->RSTD;                                              \
    for (int64_t r = lo; r < hi; r++) {                                                         \
        const T *p = X + r * sx;                                                                \
        T *q = Y + r * K;                                                                       \
        double s1 = 0, s2 = 0, mu = 0, var;                                                     \
        double sh = (!rms && K > 0) ? (double)p[0] : 0.0;                                       \
        NORM_SUMS(T, p, K, 1, sh, s1, s2);                                                      \
        if (rms) var = K > 0 ? s2 / K : NAN;                                                    \
        else {                                                                                  \
            double dm = K > 0 ? s1 / K : 0.0;                                                  \
            var = K > 0 ? s2 / K - dm * dm : NAN;                                               \
            if (var < 0) var = 0;                                                               \
            mu = sh + dm;                                                                       \
            MEAN[r] = (T)mu;                                                                    \
        }                                                                                       \
        double inv = 1.0 / sqrt(var + c->eps);                                                  \
        RSTD[r] = (T)inv;                                                                       \
        int64_t off = (r % G) * P;                                                              \
        /* the mean as T plus the rest (tl): x - tm is exact for x near the mean, so a row   \
           whose mean is large beside its spread keeps its precision */                       \
        T tm = (T)mu, tl = (T)(mu - (double)tm), ti = (T)inv;                                   \
        if (Sp == 1) {                                                                          \
            const T *w = W ? W + off : NULL, *b = B ? B + off : NULL;                           \
            if (w && b) {                                                                       \
                _Pragma("omp simd")                                                             \
                for (int64_t k = 0; k < K; k++) q[k] = (p[k] - tm - tl) * ti * w[k] + b[k];     \
            } else if (w) {                                                                     \
                _Pragma("omp simd")                                                             \
                for (int64_t k = 0; k < K; k++) q[k] = (p[k] - tm - tl) * ti * w[k];            \
            } else if (b) {                                                                     \
                _Pragma("omp simd")                                                             \
                for (int64_t k = 0; k < K; k++) q[k] = (p[k] - tm - tl) * ti + b[k];            \
            } else {                                                                            \
                _Pragma("omp simd")                                                             \
                for (int64_t k = 0; k < K; k++) q[k] = (p[k] - tm - tl) * ti;                   \
            }                                                                                   \
        } else {                                                                                \
            for (int64_t pp = 0; pp < P; pp++) {                                                \
                T ta = (T)(inv * (W ? (double)W[off + pp] : 1.0));                              \
                T tb = (T)(B ? (double)B[off + pp] : 0.0);                                      \
                const T *pi = p + pp * Sp;                                                      \
                T *qi = q + pp * Sp;                                                            \
                _Pragma("omp simd")                                                             \
                for (int64_t i = 0; i < Sp; i++) qi[i] = (pi[i] - tm - tl) * ta + tb;           \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
}                                                                                               \
                                                                                                \
FM_CLONES static void row_bwd_##SFX(const void *vc, int64_t lo, int64_t hi, int tid) {         \
    const rowb_ctx *c = vc;                                                                     \
    int rms = c->rms;                                                                           \
    int64_t K = c->K, G = c->G, P = c->P, Sp = c->Sp, nw = G * P;                               \
    const T *W = c->W, *MEAN = c->MEAN, *RSTD = c->RSTD;                                        \
    T *GX = c->GX;                                                                              \
    double *acc = c->acc ? c->acc + (int64_t)tid * c->nacc : NULL;                              \
    for (int64_t r = lo; r < hi; r++) {                                                         \
        const T *pg = (const T *)c->Gr + r * c->sg, *px = (const T *)c->X + r * c->sx;          \
        double mu = rms ? 0.0 : (double)MEAN[r], inv = (double)RSTD[r];                        \
        int64_t off = (r % G) * P;                                                              \
        double A = 0, Bs = 0;                                                                   \
        if (Sp == 1) {                                                                          \
            const T *w = W ? W + off : NULL;                                                    \
            _Pragma("omp simd reduction(+:A,Bs)")                                               \
            for (int64_t k = 0; k < K; k++) {                                                   \
                double gh = (double)pg[k] * (w ? (double)w[k] : 1.0);                           \
                A += gh; Bs += gh * ((double)px[k] - mu);                                       \
            }                                                                                   \
        } else {                                                                                \
            for (int64_t pp = 0; pp < P; pp++) {                                                \
                double a = 0, b = 0, wv = W ? (double)W[off + pp] : 1.0;                        \
                const T *gi = pg + pp * Sp, *xi = px + pp * Sp;                                 \
                _Pragma("omp simd reduction(+:a,b)")                                            \
                for (int64_t i = 0; i < Sp; i++) {                                              \
                    double gv = (double)gi[i];                                                  \
                    a += gv; b += gv * ((double)xi[i] - mu);                                    \
                }                                                                               \
                A += a * wv; Bs += b * wv;                                                      \
                if (acc) { acc[off + pp] += b * inv; acc[nw + off + pp] += a; }                 \
            }                                                                                   \
        }                                                                                       \
        Bs *= inv; /* sum of gh * xhat */                                                       \
        T tmu = (T)mu, ti = (T)inv;                                                             \
        T ka = (T)(rms ? 0.0 : -inv * A / K), kb = (T)(-inv * inv * Bs / K);                   \
        T *q = GX ? GX + r * K : NULL;                                                          \
        if (Sp == 1) {                                                                          \
            const T *w = W ? W + off : NULL;                                                    \
            if (q) {                                                                            \
                _Pragma("omp simd")                                                             \
                for (int64_t k = 0; k < K; k++)                                                 \
                    q[k] = pg[k] * (w ? w[k] : (T)1) * ti + ka + (px[k] - tmu) * kb;            \
            }                                                                                   \
            if (acc) {                                                                          \
                double *aw = acc + off, *ab = acc + nw + off;                                   \
                _Pragma("omp simd")                                                             \
                for (int64_t k = 0; k < K; k++) {                                               \
                    double gv = (double)pg[k];                                                  \
                    aw[k] += gv * ((double)px[k] - mu) * inv; ab[k] += gv;                      \
                }                                                                               \
            }                                                                                   \
        } else if (q) {                                                                         \
            for (int64_t pp = 0; pp < P; pp++) {                                                \
                T k1 = (T)(inv * (W ? (double)W[off + pp] : 1.0));                              \
                const T *gi = pg + pp * Sp, *xi = px + pp * Sp;                                 \
                T *qi = q + pp * Sp;                                                            \
                _Pragma("omp simd")                                                             \
                for (int64_t i = 0; i < Sp; i++) qi[i] = gi[i] * k1 + ka + (xi[i] - tmu) * kb;  \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
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
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    int f32 = dtype == FM_FLOAT32;
    bnf_ctx k = {N, C, S, srm, srv, xs, (const void *)x, (const void *)w, (const void *)b,
                 (void *)y, (void *)mean, (void *)invstd, (void *)rmean, (void *)rvar, training,
                 momentum, eps, NULL};
    double work = (double)N * C * S;
    if (S == 1 && xs[1] == 1) {
        k.scr = malloc(sizeof(double) * (size_t)(5 * C + 1));
        if (!k.scr) return FM_ERR_NOMEM;
        par_range(fm_par_threads(work, NORM_PAR_MIN), C, f32 ? bn2d_fwd_f32 : bn2d_fwd_f64, &k);
        free(k.scr);
    } else if (!training && xs[2] == 1 && xs[1] == S && xs[0] == C * S) {
        for (int64_t c = 0; c < C; c++) {
            double m = f32 ? ((float *)rmean)[c * srm] : ((double *)rmean)[c * srm];
            double v = f32 ? ((float *)rvar)[c * srv] : ((double *)rvar)[c * srv];
            if (f32) { ((float *)mean)[c] = (float)m; ((float *)invstd)[c] = (float)(1.0 / sqrt(v + eps)); }
            else { ((double *)mean)[c] = m; ((double *)invstd)[c] = 1.0 / sqrt(v + eps); }
        }
        par_range(fm_par_threads(work, NORM_PAR_MIN * 4), N * C, f32 ? bn_planes_f32 : bn_planes_f64,
                  &k);
    } else {
        par_range(fm_par_threads(work, NORM_PAR_MIN), C, f32 ? bn_fwd_f32 : bn_fwd_f64, &k);
    }
    return FM_OK;
}

int fm_batch_norm_bwd(int dtype, int64_t N, int64_t C, int64_t S, intptr_t g,
                      const int64_t *gs, intptr_t x, const int64_t *xs, intptr_t w,
                      intptr_t mean, intptr_t invstd, int training, intptr_t gx, intptr_t gw,
                      intptr_t gb) {
    if (!dims_ok(N, C, S)) return FM_ERR_ARG;
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    bnb_ctx k = {N, C, S, gs, xs, (const void *)g, (const void *)x, (const void *)w,
                 (const void *)mean, (const void *)invstd, (void *)gx, (void *)gw, (void *)gb,
                 training, NULL};
    int f32 = dtype == FM_FLOAT32, nt = fm_par_threads((double)N * C * S, NORM_PAR_MIN);
    if (S == 1 && xs[1] == 1 && gs[1] == 1) {
        k.scr = malloc(sizeof(double) * (size_t)(5 * C + 1));
        if (!k.scr) return FM_ERR_NOMEM;
        par_range(nt, C, f32 ? bn2d_bwd_f32 : bn2d_bwd_f64, &k);
        free(k.scr);
    } else {
        par_range(nt, C, f32 ? bn_bwd_f32 : bn_bwd_f64, &k);
    }
    return FM_OK;
}

static int row_args_ok(int64_t M, int64_t K, int64_t G, int64_t P, int64_t Sp) {
    return dims_ok(M, K, P) && G >= 1 && Sp >= 1 && P * Sp == K;
}

int fm_row_norm_fwd(int dtype, int rms, int64_t M, int64_t K, intptr_t x, int64_t sx,
                    intptr_t y, intptr_t w, intptr_t b, int64_t G, int64_t P, int64_t Sp,
                    intptr_t mean, intptr_t rstd, double eps) {
    if (!row_args_ok(M, K, G, P, Sp) || (!rms && !mean) || !rstd) return FM_ERR_ARG;
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    rowf_ctx k = {rms, M, K, sx, G, P, Sp, (const void *)x, (const void *)w, (const void *)b,
                  (void *)y, (void *)mean, (void *)rstd, eps};
    par_range(fm_par_threads((double)M * K, NORM_PAR_MIN), M,
              dtype == FM_FLOAT32 ? row_fwd_f32 : row_fwd_f64, &k);
    return FM_OK;
}

int fm_row_norm_bwd(int dtype, int rms, int64_t M, int64_t K, intptr_t g, int64_t sg,
                    intptr_t x, int64_t sx, intptr_t w, int64_t G, int64_t P, int64_t Sp,
                    intptr_t mean, intptr_t rstd, intptr_t gx, intptr_t gw, intptr_t gb) {
    if (!row_args_ok(M, K, G, P, Sp) || (!rms && !mean) || !rstd) return FM_ERR_ARG;
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    int64_t nw = G * P;
    int nt = fm_par_threads((double)M * K, NORM_PAR_MIN);
    if (nt > M) nt = M > 0 ? (int)M : 1;
    double *acc = NULL;
    if (gw || gb) {
        acc = calloc((size_t)nt * (size_t)(2 * nw) + 1, sizeof(double));
        if (!acc) return FM_ERR_NOMEM;
    }
    rowb_ctx k = {rms, M, K, sg, sx, G, P, Sp, 2 * nw, (const void *)g, (const void *)x,
                  (const void *)w, (const void *)mean, (const void *)rstd, (void *)gx, acc};
    par_range(nt, M, dtype == FM_FLOAT32 ? row_bwd_f32 : row_bwd_f64, &k);
    if (acc) {
        for (int t = 1; t < nt; t++)
            for (int64_t i = 0; i < 2 * nw; i++) acc[i] += acc[(int64_t)t * 2 * nw + i];
        for (int64_t i = 0; i < nw; i++) {
            if (dtype == FM_FLOAT32) {
                if (gw) ((float *)gw)[i] = (float)acc[i];
                if (gb) ((float *)gb)[i] = (float)acc[nw + i];
            } else {
                if (gw) ((double *)gw)[i] = acc[i];
                if (gb) ((double *)gb)[i] = acc[nw + i];
            }
        }
        free(acc);
    }
    return FM_OK;
}
