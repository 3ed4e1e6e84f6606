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
#include <sched.h>
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
    if (ld == 1) { /* contiguous along the sliver's width: straight (masked) copies */
        for (int v = 0; v < W; v += 16) {
            int64_t valid = w - v < 0 ? 0 : w - v > 16 ? 16 : w - v;
            __mmask16 ml = (__mmask16)((1u << valid) - 1);
            __mmask16 ms = W - v >= 16 ? 0xFFFF : (__mmask16)((1u << (W - v)) - 1);
            for (int64_t k = 0; k < kc; k++)
                _mm512_mask_storeu_ps(out + k * W + v, ms,
                                      _mm512_maskz_loadu_ps(ml, src + k * ks + v));
        }
        return;
    }
    if (ks == 1) {
        /* contiguous along k: 4 rows x 16 k at a time, transposed in registers; leftover
           rows one by one, missing rows as zeros */
        int64_t k16 = kc & ~(int64_t)15, w4 = w & ~(int64_t)3;
        for (int64_t i = 0; i < w4; i += 4) {
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
        for (int64_t k = 0; k < kc; k++) {
            for (int64_t i = w4; i < w; i++) out[k * W + i] = src[i * ld + k];
            for (int64_t i = w; i < W; i++) out[k * W + i] = 0.0f;
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

/* ---- the driver -------------------------------------------------------------------------
 * The product is a sequence of blocks (jc over n, pc over k). In each block the threads first
 * pack B's slivers and then compute work items, a row chunk times a column group of C; both are
 * handed out by atomic counters rather than split in advance, so that a thread the system
 * deschedules for a while holds the others up as little as possible (there are no barriers).
 * A thread packs the A rows of its item into its own buffer. B is double-buffered across
 * blocks; before refilling a buffer a thread waits until everyone is done with the block that
 * used it, and an item in a later k block waits for the same item of the previous one (it
 * accumulates into the same part of C). */
typedef struct {
    int64_t bclaim, bdone, iclaim; /* slivers claimed / packed, items claimed */
    char pad[40];
} blk_state;

typedef struct {
    int64_t m, n, k, sam, sak, sbk, sbn, ldc;
    const float *a, *b;
    float *c;
    float alpha, beta;
    int64_t ncb, kcb, nbj, nbp; /* block sizes and counts along n and k */
    int64_t chunk, nrc, ncg;    /* rows per chunk, row chunks, column groups per block */
    float *Bp[2];
    blk_state *blk;             /* per block */
    uint8_t *idone;             /* per block and item: finished */
    int64_t *progress;          /* per thread (8 apart): blocks finished */
    int T;
} sg_job;

static inline void spin_wait(int64_t *spins) {
    if (++*spins < 2000) {
        _mm_pause();
    } else {
        sched_yield(); /* the one we wait for may need this CPU */
    }
}

static AVX512 void sg_run(sg_job *J, int t, float *Ap) {
    const int T = J->T;
    int64_t nitems = J->nrc * J->ncg;
    for (int64_t bi = 0; bi < J->nbj * J->nbp; bi++) {
        int64_t jc = bi / J->nbp * J->ncb, pc = bi % J->nbp * J->kcb;
        int64_t nc = J->n - jc < J->ncb ? J->n - jc : J->ncb;
        int64_t kc = J->k - pc < J->kcb ? J->k - pc : J->kcb;
        int64_t nsl = cdiv(nc, NR);
        float *Bp = J->Bp[bi & 1];
        blk_state *st = &J->blk[bi];
        float be = pc == 0 ? J->beta : 1.0f;
        if (bi >= 2 && T > 1) { /* everyone done with block bi - 2, the last user of Bp */
            for (int u = 0; u < T; u++) {
                int64_t spins = 0;
                while (__atomic_load_n(&J->progress[8 * u], __ATOMIC_ACQUIRE) < bi - 1)
                    spin_wait(&spins);
            }
        }
        for (;;) {
            int64_t s = __atomic_fetch_add(&st->bclaim, 1, __ATOMIC_RELAXED);
            if (s >= nsl) break;
            int64_t j0 = s * NR;
            pack(J->b + pc * J->sbk + (jc + j0) * J->sbn, J->sbn, J->sbk,
                 nc - j0 < NR ? nc - j0 : NR, kc, NR, Bp + j0 * kc);
            __atomic_fetch_add(&st->bdone, 1, __ATOMIC_RELEASE);
        }
        {
            int64_t spins = 0;
            while (__atomic_load_n(&st->bdone, __ATOMIC_ACQUIRE) < nsl) spin_wait(&spins);
        }
        int64_t packed_rc = -1;
        for (;;) {
            int64_t it = __atomic_fetch_add(&st->iclaim, 1, __ATOMIC_RELAXED);
            if (it >= nitems) break;
            int64_t rc = it / J->ncg, cg = it % J->ncg;
            if (pc > 0 && T > 1) { /* the previous k block's part of this item is in C */
                int64_t spins = 0;
                while (!__atomic_load_n(&J->idone[(bi - 1) * nitems + it], __ATOMIC_ACQUIRE))
                    spin_wait(&spins);
            }
            int64_t ic = rc * J->chunk, mc = J->m - ic < J->chunk ? J->m - ic : J->chunk;
            if (rc != packed_rc) {
                for (int64_t i0 = 0; i0 < mc; i0 += MR)
                    pack(J->a + (ic + i0) * J->sam + pc * J->sak, J->sam, J->sak,
                         mc - i0 < MR ? mc - i0 : MR, kc, MR, Ap + i0 * kc);
                packed_rc = rc;
            }
            int64_t j_lo = nsl * cg / J->ncg, j_hi = nsl * (cg + 1) / J->ncg;
            for (int64_t ir = 0; ir < mc; ir += MR) {
                int64_t mr = mc - ir < MR ? mc - ir : MR;
                kern_fn kf = kerns[mr];
                for (int64_t js = j_lo; js < j_hi; js++) {
                    int64_t jr = js * NR, nr = nc - jr < NR ? nc - jr : NR;
                    __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
                    __mmask16 m1 = nr >= 32 ? 0xFFFF
                                   : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
                    kf(kc, Ap + ir * kc, Bp + jr * kc, J->c + (ic + ir) * J->ldc + jc + jr,
                       J->ldc, J->alpha, be, m0, m1);
                }
            }
            if (T > 1) __atomic_store_n(&J->idone[bi * nitems + it], 1, __ATOMIC_RELEASE);
        }
        if (T > 1) __atomic_store_n(&J->progress[8 * t], bi + 1, __ATOMIC_RELEASE);
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
    if (m <= 0 || n <= 0 || k <= 0) return FM_ERR_ARG; /* empty products: the caller's job */
    int T = nthreads < 1 ? 1 : nthreads > 64 ? 64 : nthreads;
    sg_job J;
    memset(&J, 0, sizeof(J));
    J.m = m, J.n = n, J.k = k, J.sam = sam, J.sak = sak, J.sbk = sbk, J.sbn = sbn, J.ldc = ldc;
    J.a = (const float *)a, J.b = (const float *)b, J.c = (float *)c;
    J.alpha = (float)alpha, J.beta = (float)beta;
    J.kcb = block(k, KC_MAX, 4);
    J.ncb = block(n, NC_MAX, NR);
    J.nbj = cdiv(n, J.ncb), J.nbp = cdiv(k, J.kcb);
    /* work items: about 8 per thread, row chunks first (each packs its A rows once); column
       groups only when there are too few rows to go round */
    int64_t msl = cdiv(m, MR), want = T > 1 ? 8 * T : 1;
    int64_t per = cdiv(msl, want);
    if (per * MR > MC_MAX) per = MC_MAX / MR;
    J.chunk = per * MR;
    J.nrc = cdiv(m, J.chunk);
    J.ncg = 1;
    if (J.nrc < want) {
        int64_t nsl_max = cdiv(J.ncb, NR);
        J.ncg = cdiv(want, J.nrc);
        if (J.ncg > nsl_max) J.ncg = nsl_max;
    }
    J.T = T;
    int64_t nblocks = J.nbj * J.nbp, nitems = J.nrc * J.ncg;
    int64_t bbytes = cdiv(J.ncb, NR) * NR * J.kcb * 4, abytes = J.chunk * J.kcb * 4;
    int64_t sbytes = nblocks * (int64_t)sizeof(blk_state) + T * 64 + (T > 1 ? nblocks * nitems : 0);
    int nb = T > 1 && nblocks > 1 ? 2 : 1;
    char *sync = (char *)fm_alloc_zeroed(sbytes);
    J.Bp[0] = (float *)fm_alloc(bbytes);
    J.Bp[1] = nb == 2 ? (float *)fm_alloc(bbytes) : J.Bp[0];
    int rc = FM_OK;
    if (!sync || !J.Bp[0] || !J.Bp[1]) {
        rc = FM_ERR_NOMEM;
        goto done;
    }
    J.blk = (blk_state *)sync;
    J.progress = (int64_t *)(sync + nblocks * sizeof(blk_state));
    J.idone = (uint8_t *)(sync + nblocks * sizeof(blk_state) + T * 64);
    if (T > 1) {
        /* every thread allocates its A buffer first: one that cannot makes the whole call fail
           before any work is handed out */
        int64_t ok = 0;
#pragma omp parallel num_threads(T)
        {
            float *Ap = (float *)fm_alloc(abytes);
            if (Ap) __atomic_fetch_add(&ok, 1, __ATOMIC_RELAXED);
#pragma omp barrier
            if (__atomic_load_n(&ok, __ATOMIC_RELAXED) == omp_get_num_threads()) {
#pragma omp single
                J.T = omp_get_num_threads(); /* the team may be smaller than asked */
                sg_run(&J, omp_get_thread_num(), Ap);
            }
            if (Ap) fm_free((intptr_t)Ap, abytes);
        }
        if (ok != J.T) rc = FM_ERR_NOMEM; /* then nobody computed anything */
    } else {
        float *Ap = (float *)fm_alloc(abytes);
        if (Ap) {
            sg_run(&J, 0, Ap);
            fm_free((intptr_t)Ap, abytes);
        } else {
            rc = FM_ERR_NOMEM;
        }
    }
done:
    if (sync) fm_free((intptr_t)sync, sbytes);
    if (J.Bp[1] && J.Bp[1] != J.Bp[0]) fm_free((intptr_t)J.Bp[1], bbytes);
    if (J.Bp[0]) fm_free((intptr_t)J.Bp[0], bbytes);
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
