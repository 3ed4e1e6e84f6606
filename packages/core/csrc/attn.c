/* Fused scaled dot-product attention (see api_attn.h). Per (batch, head) the query rows are
 * taken in blocks of ATTN_BLOCK: the block's scores against every key it sees (all keys, or the
 * causal prefix) come from one BLAS gemm into a per-thread scratch, are masked and turned into
 * probabilities in place (exact softmax per row: the row is whole, so no online rescaling), and
 * one more gemm multiplies them into the values. Only the row's log-sum-exp is kept. The
 * backward recomputes each block's probabilities from it (flash attention's recomputation) and
 * uses four gemms: dP = g v^T, gv += P^T g, gq = dS k, gk += dS^T q, with dS = P (dP - delta)
 * and delta_i = sum_j P_ij dP_ij (= g_i . out_i, so the output need not be saved).
 * (batch, head) pairs are spread over OpenMP threads (fiamma's thread setting) once the work
 * pays; the backward splits by key/value head, which owns its gk/gv rows. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include <cblas.h>

#include "dtypes.h"
#include "fmath.h"
#include "api_attn.h"
#include "api_matmul.h"

#define ATTN_PAR_MIN 2e6
#define ATTN_LANES 16
/* rows per block; 0: 32 for causal attention up to 256 rows (the blocks left of the diagonal
   skip more of the masked half; measured 5-10% faster at T 64), else 64 */
static int64_t attn_block_set = 0;

int64_t fm_attn_set_block(int64_t rows) {
    int64_t prev = attn_block_set;
    attn_block_set = rows <= 0 ? 0 : rows;
    return prev;
}

typedef struct {
    int64_t B, H, Hk, L, S, E, Ev, rep, rb;
    double scale;
    const char *q, *k, *v, *mask, *drop;
    const int64_t *qs, *ks, *vs, *ms, *os, *gs;
    int mkind;
    char *out, *lse, *g, *gq, *gk, *gv;
} attn_t;

/* float32 products from 100^3 multiply-adds on fiamma's AVX-512 kernel (matmul.c's rule; measured
   8% faster at T 512, d 64 than OpenBLAS, no gain below), smaller ones on OpenBLAS, whose
   unpacked small-matrix kernels win there */
#define ATTN_OWN_MIN 1e6

static void gemm_s(int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                   int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
    if (k >= 8 && m >= 8 && n >= 32 && (double)m * n * k >= ATTN_OWN_MIN &&
        fm_sgemm(m, n, k, alpha, (intptr_t)a, ta ? 1 : lda, ta ? lda : 1, (intptr_t)b,
                 tb ? 1 : ldb, tb ? ldb : 1, beta, (intptr_t)c, ldc, 1) == FM_OK)
        return;
    scipy_cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                      (int)m, (int)n, (int)k, (float)alpha, (const float *)a, (int)lda,
                      (const float *)b, (int)ldb, (float)beta, (float *)c, (int)ldc);
}

static void gemm_d(int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                   int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
    scipy_cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                      (int)m, (int)n, (int)k, alpha, (const double *)a, (int)lda,
                      (const double *)b, (int)ldb, beta, (double *)c, (int)ldc);
}

static inline double attn_exp_d(double v) { return exp(v); }
static inline double attn_log_d(double v) { return log(v); }

/* columns a block of rows [r0, r0 + nr) sees: all S, or the causal prefix */
static inline int64_t attn_cols(const attn_t *A, int64_t r0, int64_t nr) {
    if (A->mkind != FM_ATTN_CAUSAL) return A->S;
    return r0 + nr < A->S ? r0 + nr : A->S;
}

#define DEF_ATTN(T, EXP, LOG, GEMM)                                                            \
    /* the scores of rows r0.. (already scale * q k^T in sc, row stride nc) get the mask */    \
    static void mask_##T(const attn_t *A, int64_t b, int64_t h, int64_t r0, int64_t nr,        \
                         int64_t nc, T *sc) {                                                  \
        const int64_t *ms = A->ms;                                                             \
        for (int64_t r = 0; r < nr; r++) {                                                     \
            T *row = sc + r * nc;                                                              \
            int64_t i = r0 + r;                                                                \
            if (A->mkind == FM_ATTN_CAUSAL) {                                                  \
                for (int64_t j = i + 1; j < nc; j++) row[j] = -INFINITY;                       \
            } else if (A->mkind == FM_ATTN_ADD) {                                              \
                const T *m = (const T *)A->mask + b * ms[0] + h * ms[1] + i * ms[2];           \
                if (ms[3] == 1)                                                                \
                    for (int64_t j = 0; j < nc; j++) row[j] += m[j];                           \
                else                                                                           \
                    for (int64_t j = 0; j < nc; j++) row[j] += m[j * ms[3]];                   \
            } else if (A->mkind == FM_ATTN_BOOL) {                                             \
                const uint8_t *m = (const uint8_t *)A->mask + b * ms[0] + h * ms[1] + i * ms[2]; \
                for (int64_t j = 0; j < nc; j++)                                               \
                    row[j] = m[j * ms[3]] ? row[j] : -INFINITY;                                \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    /* forward: rows of sc become probabilities (times the dropout multipliers), lse saved */  \
    FM_CLONES static void softmax_##T(int64_t nr, int64_t nc, T *FM_RESTRICT sc,               \
                                      T *FM_RESTRICT lse, const T *drop, int64_t dstride) {    \
        for (int64_t r = 0; r < nr; r++) {                                                     \
            T *FM_RESTRICT row = sc + r * nc;                                                  \
            T acc[ATTN_LANES];                                                                 \
            for (int t = 0; t < ATTN_LANES; t++) acc[t] = -INFINITY;                           \
            int64_t j = 0;                                                                     \
            for (; j + ATTN_LANES <= nc; j += ATTN_LANES)                                      \
                for (int t = 0; t < ATTN_LANES; t++)                                           \
                    acc[t] = row[j + t] > acc[t] ? row[j + t] : acc[t];                        \
            for (; j < nc; j++) acc[0] = row[j] > acc[0] ? row[j] : acc[0];                    \
            T m = acc[0];                                                                      \
            for (int t = 1; t < ATTN_LANES; t++) m = acc[t] > m ? acc[t] : m;                  \
            if (m == -INFINITY) { /* every position masked (or no keys): zeros */              \
                for (j = 0; j < nc; j++) row[j] = 0;                                           \
                lse[r] = -INFINITY;                                                            \
                continue;                                                                      \
            }                                                                                  \
            for (int t = 0; t < ATTN_LANES; t++) acc[t] = 0;                                   \
            for (j = 0; j + ATTN_LANES <= nc; j += ATTN_LANES)                                 \
                for (int t = 0; t < ATTN_LANES; t++) {                                         \
                    T e = EXP(row[j + t] - m);                                                 \
                    row[j + t] = e;                                                            \
                    acc[t] += e;                                                               \
                }                                                                              \
            for (; j < nc; j++) acc[0] += row[j] = EXP(row[j] - m);                            \
            T s = 0;                                                                           \
            for (int t = 0; t < ATTN_LANES; t++) s += acc[t];                                  \
            lse[r] = m + LOG(s);                                                               \
            T inv = 1 / s;                                                                     \
            if (drop) {                                                                        \
                const T *FM_RESTRICT d = drop + r * dstride;                                   \
                for (j = 0; j < nc; j++) row[j] *= inv * d[j];                                 \
            } else {                                                                           \
                for (j = 0; j < nc; j++) row[j] *= inv;                                        \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    /* backward: sc (masked scores) -> P, in place, from the saved lse */                      \
    FM_CLONES static void probs_##T(int64_t nr, int64_t nc, T *FM_RESTRICT sc,                 \
                                    const T *FM_RESTRICT lse) {                                \
        for (int64_t r = 0; r < nr; r++) {                                                     \
            T *FM_RESTRICT row = sc + r * nc;                                                  \
            T l = lse[r];                                                                      \
            if (l == -INFINITY) {                                                              \
                for (int64_t j = 0; j < nc; j++) row[j] = 0;                                   \
                continue;                                                                      \
            }                                                                                  \
            for (int64_t j = 0; j < nc; j++) row[j] = EXP(row[j] - l);                         \
        }                                                                                      \
    }                                                                                          \
    /* backward: dp (g v^T) -> dS = P (d dp - delta), delta_i = sum_j P d dp */                 \
    FM_CLONES static void dscores_##T(int64_t nr, int64_t nc, const T *FM_RESTRICT p,          \
                                      T *FM_RESTRICT dp, const T *drop, int64_t dstride) {     \
        for (int64_t r = 0; r < nr; r++) {                                                     \
            const T *FM_RESTRICT pr = p + r * nc;                                              \
            T *FM_RESTRICT dr = dp + r * nc;                                                   \
            if (drop) {                                                                        \
                const T *FM_RESTRICT d = drop + r * dstride;                                   \
                for (int64_t j = 0; j < nc; j++) dr[j] *= d[j];                                \
            }                                                                                  \
            T acc[ATTN_LANES];                                                                 \
            for (int t = 0; t < ATTN_LANES; t++) acc[t] = 0;                                   \
            int64_t j = 0;                                                                     \
            for (; j + ATTN_LANES <= nc; j += ATTN_LANES)                                      \
                for (int t = 0; t < ATTN_LANES; t++) acc[t] += pr[j + t] * dr[j + t];          \
            for (; j < nc; j++) acc[0] += pr[j] * dr[j];                                       \
            T delta = 0;                                                                       \
            for (int t = 0; t < ATTN_LANES; t++) delta += acc[t];                              \
            for (int64_t j = 0; j < nc; j++) dr[j] = pr[j] * (dr[j] - delta);                  \
        }                                                                                      \
    }                                                                                          \
    /* P * d (the dropped probabilities) into out */                                           \
    static void dropped_##T(int64_t nr, int64_t nc, const T *p, const T *drop,                 \
                            int64_t dstride, T *out) {                                         \
        for (int64_t r = 0; r < nr; r++)                                                       \
            for (int64_t j = 0; j < nc; j++)                                                   \
                out[r * nc + j] = p[r * nc + j] * drop[r * dstride + j];                       \
    }                                                                                          \
    /* scale * q k^T (+ mask) for rows r0.. of pair (b, h) into sc */                          \
    static void scores_##T(const attn_t *A, int64_t b, int64_t h, int64_t r0, int64_t nr,      \
                           int64_t nc, T *sc) {                                                \
        int64_t kh = h / A->rep;                                                               \
        const T *Q = (const T *)A->q + b * A->qs[0] + h * A->qs[1] + r0 * A->qs[2];            \
        const T *K = (const T *)A->k + b * A->ks[0] + kh * A->ks[1];                           \
        if (nc == 0) return;                                                                   \
        if (A->E == 0)                                                                         \
            for (int64_t t = 0; t < nr * nc; t++) sc[t] = 0;                                   \
        else                                                                                   \
            GEMM(0, 1, nr, nc, A->E, A->scale, Q, A->qs[2], K, A->ks[2], 0.0, sc, nc);         \
        mask_##T(A, b, h, r0, nr, nc, sc);                                                     \
    }                                                                                          \
    static void fwd_pair_##T(const attn_t *A, int64_t bh, T *sc) {                             \
        int64_t b = bh / A->H, h = bh % A->H, kh = h / A->rep, L = A->L, S = A->S;             \
        const T *V = (const T *)A->v + b * A->vs[0] + kh * A->vs[1];                           \
        T *O = (T *)A->out + b * A->os[0] + h * A->os[1];                                      \
        T *lse = (T *)A->lse + bh * L;                                                         \
        const T *drop = (const T *)A->drop;                                                    \
        for (int64_t r0 = 0; r0 < L; r0 += A->rb) {                                       \
            int64_t nr = L - r0 < A->rb ? L - r0 : A->rb, nc = attn_cols(A, r0, nr); \
            scores_##T(A, b, h, r0, nr, nc, sc);                                               \
            softmax_##T(nr, nc, sc, lse + r0, drop ? drop + (bh * L + r0) * S : 0, S);         \
            if (A->Ev == 0) continue;                                                          \
            if (nc == 0) {                                                                     \
                for (int64_t r = 0; r < nr; r++)                                               \
                    for (int64_t e = 0; e < A->Ev; e++) O[(r0 + r) * A->os[2] + e] = 0;        \
                continue;                                                                      \
            }                                                                                  \
            GEMM(0, 0, nr, A->Ev, nc, 1.0, sc, nc, V, A->vs[2], 0.0, O + r0 * A->os[2],        \
                 A->os[2]);                                                                    \
        }                                                                                      \
    }                                                                                          \
    /* backward of key/value head (b, kh): every query head of its group */                    \
    static void bwd_pair_##T(const attn_t *A, int64_t bk, T *sc, T *dp) {                      \
        int64_t b = bk / A->Hk, kh = bk % A->Hk, L = A->L, S = A->S, E = A->E, Ev = A->Ev;     \
        const T *K = (const T *)A->k + b * A->ks[0] + kh * A->ks[1];                           \
        const T *V = (const T *)A->v + b * A->vs[0] + kh * A->vs[1];                           \
        T *gk = A->gk ? (T *)A->gk + bk * S * E : 0, *gv = A->gv ? (T *)A->gv + bk * S * Ev : 0; \
        if (gk) memset(gk, 0, sizeof(T) * S * E);                                              \
        if (gv) memset(gv, 0, sizeof(T) * S * Ev);                                             \
        const T *drop = (const T *)A->drop;                                                    \
        for (int64_t h = kh * A->rep; h < (kh + 1) * A->rep; h++) {                            \
            int64_t bh = b * A->H + h;                                                         \
            const T *Q = (const T *)A->q + b * A->qs[0] + h * A->qs[1];                        \
            const T *G = (const T *)A->g + b * A->gs[0] + h * A->gs[1];                        \
            T *gq = A->gq ? (T *)A->gq + bh * L * E : 0;                                       \
            const T *lse = (const T *)A->lse + bh * L;                                         \
            for (int64_t r0 = 0; r0 < L; r0 += A->rb) {                                   \
                int64_t nr = L - r0 < A->rb ? L - r0 : A->rb;                        \
                int64_t nc = attn_cols(A, r0, nr);                                             \
                const T *dr = drop ? drop + (bh * L + r0) * S : 0;                             \
                const T *Gb = G + r0 * A->gs[2];                                               \
                if (nc == 0 || Ev == 0) { /* no keys, or no values: nothing flows back */     \
                    if (gq)                                                                    \
                        for (int64_t t = 0; t < nr * E; t++) gq[r0 * E + t] = 0;               \
                    continue;                                                                  \
                }                                                                              \
                scores_##T(A, b, h, r0, nr, nc, sc);                                           \
                probs_##T(nr, nc, sc, lse + r0);                                               \
                if (gv) {                                                                      \
                    const T *pd = sc;                                                          \
                    if (dr) {                                                                  \
                        dropped_##T(nr, nc, sc, dr, S, dp);                                    \
                        pd = dp;                                                               \
                    }                                                                          \
                    GEMM(1, 0, nc, Ev, nr, 1.0, pd, nc, Gb, A->gs[2], 1.0, gv, Ev);            \
                }                                                                              \
                if (!gq && !gk) continue;                                                      \
                GEMM(0, 1, nr, nc, Ev, 1.0, Gb, A->gs[2], V, A->vs[2], 0.0, dp, nc);           \
                dscores_##T(nr, nc, sc, dp, dr, S);                                            \
                if (E == 0) continue;                                                          \
                if (gq)                                                                        \
                    GEMM(0, 0, nr, E, nc, A->scale, dp, nc, K, A->ks[2], 0.0, gq + r0 * E, E); \
                if (gk)                                                                        \
                    GEMM(1, 0, nc, E, nr, A->scale, dp, nc, Q + r0 * A->qs[2], A->qs[2], 1.0,  \
                         gk, E);                                                               \
            }                                                                                  \
        }                                                                                      \
    }

DEF_ATTN(float, fm_expf, fm_logf, gemm_s)
DEF_ATTN(double, attn_exp_d, attn_log_d, gemm_d)

/* BLAS takes 32-bit sizes and leading dimensions of at least the row length */
static int attn_check(int dtype, const attn_t *A) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (A->B < 0 || A->H < 0 || A->Hk < 1 || A->L < 0 || A->S < 0 || A->E < 0 || A->Ev < 0 ||
        A->H % A->Hk)
        return FM_ERR_ARG;
    int64_t big = A->L > A->S ? A->L : A->S;
    if (big > INT_MAX / 2 || A->E > INT_MAX / 2 || A->Ev > INT_MAX / 2) return FM_ERR_ARG;
    if (A->qs[2] < (A->E > 1 ? A->E : 1) || A->ks[2] < (A->E > 1 ? A->E : 1) ||
        A->vs[2] < (A->Ev > 1 ? A->Ev : 1) || A->qs[2] > INT_MAX || A->ks[2] > INT_MAX ||
        A->vs[2] > INT_MAX)
        return FM_ERR_ARG;
    if (A->mkind < FM_ATTN_NONE || A->mkind > FM_ATTN_BOOL) return FM_ERR_ARG;
    if ((A->mkind == FM_ATTN_ADD || A->mkind == FM_ATTN_BOOL) && !A->mask) return FM_ERR_ARG;
    return FM_OK;
}

static int64_t attn_rows(attn_t *A) {
    A->rb = attn_block_set ? attn_block_set
                           : (A->mkind == FM_ATTN_CAUSAL && A->L <= 256 ? 32 : 64);
    int64_t r = A->L < A->rb ? A->L : A->rb;
    return r > 0 ? r : 1;
}

int fm_attn_fwd(int dtype, int64_t B, int64_t H, int64_t Hk, int64_t L, int64_t S, int64_t E,
                int64_t Ev, double scale, intptr_t q, const int64_t *qs, intptr_t k,
                const int64_t *ks, intptr_t v, const int64_t *vs, int mkind, intptr_t mask,
                const int64_t *ms, intptr_t drop, intptr_t out, const int64_t *os, intptr_t lse) {
    static const int64_t zero4[4] = {0, 0, 0, 0};
    attn_t A = {B, H, Hk, L, S, E, Ev, Hk > 0 ? H / Hk : 1, 64, scale,
                (const char *)q, (const char *)k, (const char *)v, (const char *)mask,
                (const char *)drop, qs, ks, vs, ms ? ms : zero4, os, 0, mkind,
                (char *)out, (char *)lse, 0, 0, 0, 0};
    int rc = attn_check(dtype, &A);
    if (rc != FM_OK) return rc;
    if (os[2] < (Ev > 1 ? Ev : 1) || os[2] > INT_MAX) return FM_ERR_ARG;
    int64_t pairs = B * H;
    if (pairs == 0 || L == 0) return FM_OK;
    int64_t isz = dtype == FM_FLOAT32 ? 4 : 8, per = attn_rows(&A) * (S > 0 ? S : 1);
    int nth = fm_par_threads((double)pairs * L * S * (E + Ev), ATTN_PAR_MIN);
    if (nth > pairs) nth = (int)pairs;
    int fail = 0;
#pragma omp parallel num_threads(nth) if (nth > 1)
    {
        void *sc = malloc((size_t)(per * isz));
        if (!sc) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(static)
        for (int64_t bh = 0; bh < pairs; bh++) {
            if (!sc) continue;
            if (dtype == FM_FLOAT32)
                fwd_pair_float(&A, bh, (float *)sc);
            else
                fwd_pair_double(&A, bh, (double *)sc);
        }
        free(sc);
    }
    return fail ? FM_ERR_NOMEM : FM_OK;
}

int fm_attn_bwd(int dtype, int64_t B, int64_t H, int64_t Hk, int64_t L, int64_t S, int64_t E,
                int64_t Ev, double scale, intptr_t q, const int64_t *qs, intptr_t k,
                const int64_t *ks, intptr_t v, const int64_t *vs, int mkind, intptr_t mask,
                const int64_t *ms, intptr_t drop, intptr_t g, const int64_t *gs, intptr_t lse,
                intptr_t gq, intptr_t gk, intptr_t gv) {
    static const int64_t zero4[4] = {0, 0, 0, 0};
    attn_t A = {B, H, Hk, L, S, E, Ev, Hk > 0 ? H / Hk : 1, 64, scale,
                (const char *)q, (const char *)k, (const char *)v, (const char *)mask,
                (const char *)drop, qs, ks, vs, ms ? ms : zero4, 0, gs, mkind,
                0, (char *)lse, (char *)g, (char *)gq, (char *)gk, (char *)gv};
    int rc = attn_check(dtype, &A);
    if (rc != FM_OK) return rc;
    if (gs[2] < (Ev > 1 ? Ev : 1) || gs[2] > INT_MAX) return FM_ERR_ARG;
    int64_t pairs = B * Hk;
    if (pairs == 0) return FM_OK;
    int64_t isz = dtype == FM_FLOAT32 ? 4 : 8, per = attn_rows(&A) * (S > 0 ? S : 1);
    int nth = fm_par_threads((double)B * H * L * S * (E + Ev) * 2, ATTN_PAR_MIN);
    if (nth > pairs) nth = (int)pairs;
    int fail = 0;
#pragma omp parallel num_threads(nth) if (nth > 1)
    {
        char *sc = malloc((size_t)(2 * per * isz));
        if (!sc) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(static)
        for (int64_t bk = 0; bk < pairs; bk++) {
            if (!sc) continue;
            if (dtype == FM_FLOAT32)
                bwd_pair_float(&A, bk, (float *)sc, (float *)sc + per);
            else
                bwd_pair_double(&A, bk, (double *)sc, (double *)sc + per);
        }
        free(sc);
    }
    return fail ? FM_ERR_NOMEM : FM_OK;
}
