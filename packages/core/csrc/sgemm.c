/* float32 GEMM with an AVX-512 micro-kernel, for CPUs that have it (fm_sgemm, see api_matmul.h).
 *
 * Why not only OpenBLAS: on this project's reference machine (Sapphire Rapids) OpenBLAS runs its
 * Skylake-X sgemm at about 80% of what PyTorch's MKL reaches for 128..1024-sized products; this
 * kernel closes most of that gap. Other dtypes, other CPUs and vector shapes stay on OpenBLAS.
 *
 * Structure (Goto/BLIS): C is row-major, so the micro-kernel keeps a 12 x 32 tile of C in 24
 * zmm registers, one row per register pair; per step k it loads 32 values of a packed row of B
 * and broadcasts 12 values of a packed column of A (24 FMAs to 14 loads). Blocks: B is packed
 * KC x NC at a time (sized for L2), A MC x KC; a 12 x KC sliver of A stays in L1 while the
 * 32-wide slivers of B stream past it. Packing reads any strides (transposed operands need no
 * copy beforehand); partial tiles at the edges use masked stores and fewer rows.
 * Threads (OpenMP) split the tiles of each block; packing is shared between them.
 */
#include <stdlib.h>
#include <omp.h>

#include "dtypes.h"
#include "api_matmul.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define MR 12
#define NR 32
#define KC_MAX 256
#define MC_MAX 384
#define NC_MAX 1024

#define AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))

/* C[r x 32] (masks m0/m1 select the valid columns) = alpha * A.B + beta * C, with A the packed
   kc x MR sliver and B the packed kc x NR sliver; R is a compile-time constant after inlining */
static inline __attribute__((always_inline)) AVX512 void
kern_t(const int R, int64_t kc, const float *Ap, const float *Bp, float *C, int64_t ldc,
       float alpha, float beta, __mmask16 m0, __mmask16 m1) {
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) c0[i] = c1[i] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_load_ps(Bp), b1 = _mm512_load_ps(Bp + 16);
        _mm_prefetch((const char *)(Bp + 16 * NR), _MM_HINT_T0);
#pragma GCC unroll 12
        for (int i = 0; i < R; i++) {
            __m512 a = _mm512_set1_ps(Ap[i]);
            c0[i] = _mm512_fmadd_ps(a, b0, c0[i]);
            c1[i] = _mm512_fmadd_ps(a, b1, c1[i]);
        }
        Ap += MR;
        Bp += NR;
    }
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
        float *p = C + i * ldc;
        __m512 r0 = _mm512_mul_ps(va, c0[i]), r1 = _mm512_mul_ps(va, c1[i]);
        if (beta != 0.0f) {
            r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, p), r0);
            r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, p + 16), r1);
        }
        _mm512_mask_storeu_ps(p, m0, r0);
        _mm512_mask_storeu_ps(p + 16, m1, r1);
    }
}

typedef void (*kern_fn)(int64_t, const float *, const float *, float *, int64_t, float, float,
                        __mmask16, __mmask16);
#define KERN(R)                                                                               \
    static AVX512 void kern_##R(int64_t kc, const float *Ap, const float *Bp, float *C,        \
                                int64_t ldc, float al, float be, __mmask16 m0, __mmask16 m1) { \
        kern_t(R, kc, Ap, Bp, C, ldc, al, be, m0, m1);                                        \
    }
KERN(1) KERN(2) KERN(3) KERN(4) KERN(5) KERN(6) KERN(7) KERN(8) KERN(9) KERN(10) KERN(11)
KERN(12)
static const kern_fn kerns[MR + 1] = {NULL, kern_1, kern_2, kern_3, kern_4, kern_5, kern_6,
                                      kern_7, kern_8, kern_9, kern_10, kern_11, kern_12};

/* out[k*W + i] = src[i*ld + k*ks] for i < w (zeros up to W), k < kc: one sliver */
static AVX512 void pack(const float *src, int64_t ld, int64_t ks, int64_t w, int64_t kc, int W,
                        float *out) {
    if (ld == 1 && w == W) { /* contiguous along the sliver's width: straight copies */
        for (int64_t k = 0; k < kc; k++)
            for (int v = 0; v < W; v += 16) {
                __mmask16 mk = W - v >= 16 ? 0xFFFF : (__mmask16)((1u << (W - v)) - 1);
                _mm512_mask_storeu_ps(out + k * W + v, mk,
                                      _mm512_maskz_loadu_ps(mk, src + k * ks + v));
            }
        return;
    }
    if (ks == 1 && w == W) {
        /* contiguous along k: 4 rows x 16 k at a time, transposed in registers */
        int64_t k16 = kc & ~(int64_t)15;
        for (int64_t i = 0; i < W; i += 4) {
            const float *r0 = src + i * ld;
            for (int64_t k = 0; k < k16; k += 16) {
                __m512 x0 = _mm512_loadu_ps(r0 + k), x1 = _mm512_loadu_ps(r0 + ld + k);
                __m512 x2 = _mm512_loadu_ps(r0 + 2 * ld + k);
                __m512 x3 = _mm512_loadu_ps(r0 + 3 * ld + k);
                __m512 t0 = _mm512_unpacklo_ps(x0, x1), t1 = _mm512_unpackhi_ps(x0, x1);
                __m512 t2 = _mm512_unpacklo_ps(x2, x3), t3 = _mm512_unpackhi_ps(x2, x3);
                /* u_j, 128-bit lane l: rows i..i+3 at k + 4l + j */
                __m512 u0 = _mm512_shuffle_ps(t0, t2, 0x44), u1 = _mm512_shuffle_ps(t0, t2, 0xEE);
                __m512 u2 = _mm512_shuffle_ps(t1, t3, 0x44), u3 = _mm512_shuffle_ps(t1, t3, 0xEE);
                float *o = out + k * W + i;
#define ST4(U, J)                                                          \
    _mm_storeu_ps(o + (J) * W, _mm512_castps512_ps128(U));                 \
    _mm_storeu_ps(o + (4 + (J)) * W, _mm512_extractf32x4_ps(U, 1));        \
    _mm_storeu_ps(o + (8 + (J)) * W, _mm512_extractf32x4_ps(U, 2));        \
    _mm_storeu_ps(o + (12 + (J)) * W, _mm512_extractf32x4_ps(U, 3));
                ST4(u0, 0) ST4(u1, 1) ST4(u2, 2) ST4(u3, 3)
#undef ST4
            }
            for (int64_t k = k16; k < kc; k++)
                for (int j = 0; j < 4; j++) out[k * W + i + j] = r0[j * ld + k];
        }
        return;
    }
    for (int64_t k = 0; k < kc; k++) {
        for (int64_t i = 0; i < w; i++) out[k * W + i] = src[i * ld + k * ks];
        for (int64_t i = w; i < W; i++) out[k * W + i] = 0.0f;
    }
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* split n into near-equal blocks of at most cap, rounded up to a multiple of unit */
static int64_t block(int64_t n, int64_t cap, int64_t unit) {
    int64_t nb = cdiv(n, cap);
    int64_t b = cdiv(cdiv(n, nb), unit) * unit;
    return b < cap ? b : cap;
}

typedef struct {
    int64_t m, n, k, sam, sak, sbk, sbn, ldc;
    const float *a, *b;
    float *c;
    float alpha, beta;
    float *Bp;
    int64_t ncb, kcb;
} sg_args;

/* The whole product, run by each of T threads (t = this one). B's block is packed by all
   threads together; each thread packs the A rows it needs into its own buffer Ap (MC_MAX x kcb)
   and computes its own tiles: a range of rows, or, when there are too few rows to go round, a
   range of columns. Two barriers per B block, none when T == 1. */
static AVX512 void sg_run(const sg_args *g, int t, int T, float *Ap) {
    int64_t m = g->m, msl_all = cdiv(m, MR);
    int by_rows = T == 1 || msl_all >= 2 * T || msl_all >= cdiv(g->n, NR);
    int64_t r_lo = 0, r_hi = m;
    if (by_rows && T > 1) { /* equal shares; a share's last sliver may be partial */
        r_lo = m * t / T;
        r_hi = m * (t + 1) / T;
    }
    int64_t mcb = r_hi > r_lo ? block(r_hi - r_lo, MC_MAX, MR) : MR;
    for (int64_t jc = 0; jc < g->n; jc += g->ncb) {
        int64_t nc = g->n - jc < g->ncb ? g->n - jc : g->ncb;
        int64_t nsl = cdiv(nc, NR);
        int64_t j_lo = by_rows ? 0 : nsl * t / T, j_hi = by_rows ? nsl : nsl * (t + 1) / T;
        for (int64_t pc = 0; pc < g->k; pc += g->kcb) {
            int64_t kc = g->k - pc < g->kcb ? g->k - pc : g->kcb;
            float be = pc == 0 ? g->beta : 1.0f;
            for (int64_t s = t; s < nsl; s += T) {
                int64_t j0 = s * NR;
                pack(g->b + pc * g->sbk + (jc + j0) * g->sbn, g->sbn, g->sbk,
                     nc - j0 < NR ? nc - j0 : NR, kc, NR, g->Bp + j0 * kc);
            }
            if (T > 1) {
#pragma omp barrier
            }
            for (int64_t ic = r_lo; ic < r_hi && j_lo < j_hi; ic += mcb) {
                int64_t mc = r_hi - ic < mcb ? r_hi - ic : mcb;
                for (int64_t i0 = 0; i0 < mc; i0 += MR)
                    pack(g->a + (ic + i0) * g->sam + pc * g->sak, g->sam, g->sak,
                         mc - i0 < MR ? mc - i0 : MR, kc, MR, Ap + i0 * kc);
                for (int64_t ir = 0; ir < mc; ir += MR) {
                    int64_t mr = mc - ir < MR ? mc - ir : MR;
                    kern_fn kf = kerns[mr];
                    for (int64_t js = j_lo; js < j_hi; js++) {
                        int64_t jr = js * NR, nr = nc - jr < NR ? nc - jr : NR;
                        __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
                        __mmask16 m1 = nr >= 32 ? 0xFFFF
                                       : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
                        kf(kc, Ap + ir * kc, g->Bp + jr * kc,
                           g->c + (ic + ir) * g->ldc + jc + jr, g->ldc, g->alpha, be, m0, m1);
                    }
                }
            }
            /* before the next B block overwrites this one (the region's end joins the last) */
            if (T > 1 && (pc + kc < g->k || jc + nc < g->n)) {
#pragma omp barrier
            }
        }
    }
}

static int have_avx512 = -1;

int fm_sgemm_available(void) {
    if (have_avx512 < 0) {
        __builtin_cpu_init();
        have_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
    }
    return have_avx512;
}

int fm_sgemm(int64_t m, int64_t n, int64_t k, double alpha, intptr_t a, int64_t sam, int64_t sak,
             intptr_t b, int64_t sbk, int64_t sbn, double beta, intptr_t c, int64_t ldc,
             int nthreads) {
    if (!fm_sgemm_available()) return FM_ERR_OP;
    if (m < 0 || n < 0 || k < 0) return FM_ERR_ARG;
    if (m == 0 || n == 0 || k == 0) return FM_ERR_ARG; /* the caller handles these */
    sg_args g = {m, n, k, sam, sak, sbk, sbn, ldc, (const float *)a, (const float *)b,
                 (float *)c, (float)alpha, (float)beta, NULL, 0, 0};
    g.kcb = block(k, KC_MAX, 4);
    g.ncb = block(n, NC_MAX, NR);
    int64_t abytes = MC_MAX * g.kcb * 4, bbytes = cdiv(g.ncb, NR) * NR * g.kcb * 4;
    g.Bp = (float *)fm_alloc(bbytes);
    if (!g.Bp) return FM_ERR_NOMEM;
    int rc = FM_OK;
    if (nthreads > 1) {
#pragma omp parallel num_threads(nthreads)
        {
            /* a thread without its A buffer still takes part in the barriers, computing nothing */
            float *Ap = (float *)fm_alloc(abytes);
            sg_args mine = g;
            if (!Ap) {
                mine.m = 0;
#pragma omp atomic write
                rc = FM_ERR_NOMEM;
            }
            sg_run(&mine, omp_get_thread_num(), omp_get_num_threads(), Ap);
            if (Ap) fm_free((intptr_t)Ap, abytes);
        }
    } else {
        float *Ap = (float *)fm_alloc(abytes);
        if (Ap) {
            sg_run(&g, 0, 1, Ap);
            fm_free((intptr_t)Ap, abytes);
        } else {
            rc = FM_ERR_NOMEM;
        }
    }
    fm_free((intptr_t)g.Bp, bbytes);
    return rc;
}

#else /* not x86-64 GCC/Clang: BLAS does everything */

int fm_sgemm_available(void) { return 0; }

int fm_sgemm(int64_t m, int64_t n, int64_t k, double alpha, intptr_t a, int64_t sam, int64_t sak,
             intptr_t b, int64_t sbk, int64_t sbn, double beta, intptr_t c, int64_t ldc,
             int nthreads) {
    (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)sam, (void)sak, (void)b, (void)sbk;
    (void)sbn, (void)beta, (void)c, (void)ldc, (void)nthreads;
    return FM_ERR_OP;
}
#endif
