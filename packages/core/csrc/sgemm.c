/* float32 GEMM with an AVX-512 micro-kernel, for CPUs that have it (fm_sgemm, see api_matmul.h).
 *
 * Why not only OpenBLAS: on this project's reference machine (Sapphire Rapids) OpenBLAS runs its
 * Skylake-X sgemm at about 80% of what PyTorch's MKL reaches for 128..1024-sized products; this
 * kernel closes most of that gap. Other dtypes, other CPUs and vector shapes stay on OpenBLAS.
 *
 * Structure (Goto/BLIS): C is row-major, so the micro-kernel keeps a 12 x 32 tile of C in 24
 * zmm registers, one row per register pair; per step k it loads 32 values of a packed row of B
 * and broadcasts 12 values of A (24 FMAs to 14 loads). Blocks: B is packed KC x NC at a time
 * (sized for L2); a 12 x KC sliver of A stays in L1 while the 32-wide slivers of B stream past
 * it. A contiguous along k (row-major) is read in place; any other A is packed MC x KC.
 * Packing reads any strides (transposed operands need no copy beforehand; k-contiguous ones are
 * transposed 16 x 16 in registers); partial tiles at the edges use masked stores, fewer rows
 * and a 16-wide kernel. C with few columns is computed transposed (fm_sgemm).
 * Threads (OpenMP) each compute their own rectangle of C with their own packing (sg_grid).
 */
#include <stdlib.h>
#include <omp.h>

#include "dtypes.h"
#include "api_matmul.h"
#include "gemm_plan.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define MR 12
#define NR 32
#define KC_MAX 400 /* measured: 2 blocks of 392 beat 4 of 196 for k = 784 (x @ W.t(), 2 threads) */
#define MC_MAX 384
#define NC_MAX 1024

#define AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))

/* C[r x 32] (masks m0/m1 select the valid columns) = alpha * A.B + beta * C, with B the packed
   kc x NR sliver and A either the packed kc x MR sliver (lda = 1, ka = MR) or R rows of A read
   where they are (lda = A's row stride, ka = 1: row-major A needs no packing); H: only the
   first 16 columns (half the FMAs for a sliver at C's edge). R and H are compile-time
   constants after inlining */
static inline __attribute__((always_inline)) AVX512 void
kern_t(const int R, const int H, int64_t kc, const float *Ap, const int64_t lda, const int64_t ka,
       const float *Bp, float *C, int64_t ldc, float alpha, float beta, const float *bias,
       __mmask16 m0, __mmask16 m1) {
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) c0[i] = c1[i] = _mm512_setzero_ps();
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) { /* C's tile, read or written at the end */
        _mm_prefetch((const char *)(C + i * ldc), _MM_HINT_T0);
        if (!H) _mm_prefetch((const char *)(C + i * ldc + 16), _MM_HINT_T0);
    }
    for (int64_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_load_ps(Bp), b1 = H ? b0 : _mm512_load_ps(Bp + 16);
        _mm_prefetch((const char *)(Bp + 16 * NR), _MM_HINT_T0); /* both lines of a row */
        if (!H) _mm_prefetch((const char *)(Bp + 16 * NR + 16), _MM_HINT_T0);
#pragma GCC unroll 12
        for (int i = 0; i < R; i++) {
            __m512 a = _mm512_set1_ps(Ap[i * lda]);
            c0[i] = _mm512_fmadd_ps(a, b0, c0[i]);
            if (!H) c1[i] = _mm512_fmadd_ps(a, b1, c1[i]);
        }
        Ap += ka;
        Bp += NR;
    }
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    /* a bias row (a linear layer's) is added here instead of being copied into C first */
    __m512 bias0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
    __m512 bias1 = bias && !H ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
        float *p = C + i * ldc;
        __m512 r0 = bias ? _mm512_fmadd_ps(va, c0[i], bias0) : _mm512_mul_ps(va, c0[i]);
        if (beta != 0.0f) r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, p), r0);
        _mm512_mask_storeu_ps(p, m0, r0);
        if (!H) {
            __m512 r1 = bias ? _mm512_fmadd_ps(va, c1[i], bias1) : _mm512_mul_ps(va, c1[i]);
            if (beta != 0.0f) r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, p + 16), r1);
            _mm512_mask_storeu_ps(p + 16, m1, r1);
        }
    }
}

typedef void (*kern_fn)(int64_t, const float *, int64_t, const float *, float *, int64_t, float,
                        float, const float *, __mmask16, __mmask16);
#define KERN1(NAME, R, H, LDA, KA)                                                            \
    static AVX512 void NAME(int64_t kc, const float *Ap, int64_t lda, const float *Bp,          \
                            float *C, int64_t ldc, float al, float be, const float *bias,       \
                            __mmask16 m0, __mmask16 m1) {                                       \
        (void)lda;                                                                              \
        kern_t(R, H, kc, Ap, LDA, KA, Bp, C, ldc, al, be, bias, m0, m1);                        \
    }
/* packed A / A read in place, 32 / 16 columns */
#define KERN(R)                                                                                \
    KERN1(kern_##R, R, 0, 1, MR) KERN1(kdir_##R, R, 0, lda, 1)                                 \
    KERN1(khalf_##R, R, 1, 1, MR) KERN1(kdirhalf_##R, R, 1, lda, 1)
KERN(1) KERN(2) KERN(3) KERN(4) KERN(5) KERN(6) KERN(7) KERN(8) KERN(9) KERN(10) KERN(11)
KERN(12)
#define KTAB(P) {NULL, P##1, P##2, P##3, P##4, P##5, P##6, P##7, P##8, P##9, P##10, P##11, P##12}
static const kern_fn kerns[4][MR + 1] = {KTAB(kern_), KTAB(kdir_), KTAB(khalf_), KTAB(kdirhalf_)};

/* a sliver from rows that are contiguous along k (A row-major, or B = W.t()): 16 rows x 16 k
   at a time transposed in registers, so that each k's row of the sliver is one store */
static AVX512 void pack_tk(const float *src, int64_t ld, int64_t w, int64_t kc, int W,
                           float *out) {
    int64_t k16 = kc & ~(int64_t)15;
    for (int h = 0; h < W; h += 16) {
        const float *r = src + h * ld;
        int64_t rows = w - h < 0 ? 0 : w - h > 16 ? 16 : w - h;
        __mmask16 ms = W - h >= 16 ? 0xFFFF : (__mmask16)((1u << (W - h)) - 1);
        for (int64_t k = 0; k < k16; k += 16) {
            __m512 x[16], t[16];
            for (int i = 0; i < 16; i++) {
                if (i < rows) {
                    x[i] = _mm512_loadu_ps(r + i * ld + k);
                    _mm_prefetch((const char *)(r + i * ld + k + 32), _MM_HINT_T0);
                } else {
                    x[i] = _mm512_setzero_ps();
                }
            }
            for (int i = 0; i < 16; i += 2) {
                t[i] = _mm512_unpacklo_ps(x[i], x[i + 1]);
                t[i + 1] = _mm512_unpackhi_ps(x[i], x[i + 1]);
            }
            /* x[4g + j], 128-bit lane l: rows 4g..4g+3 at k + 4l + j */
            for (int g = 0; g < 4; g++) {
                __m512 a0 = t[4 * g], a1 = t[4 * g + 1], a2 = t[4 * g + 2], a3 = t[4 * g + 3];
                x[4 * g] = _mm512_shuffle_ps(a0, a2, 0x44);
                x[4 * g + 1] = _mm512_shuffle_ps(a0, a2, 0xEE);
                x[4 * g + 2] = _mm512_shuffle_ps(a1, a3, 0x44);
                x[4 * g + 3] = _mm512_shuffle_ps(a1, a3, 0xEE);
            }
            /* 4 x 4 transpose of the 128-bit lanes of x[j], x[4 + j], x[8 + j], x[12 + j] */
            for (int j = 0; j < 4; j++) {
                __m512 p0 = _mm512_shuffle_f32x4(x[j], x[4 + j], 0x44);
                __m512 p1 = _mm512_shuffle_f32x4(x[j], x[4 + j], 0xEE);
                __m512 p2 = _mm512_shuffle_f32x4(x[8 + j], x[12 + j], 0x44);
                __m512 p3 = _mm512_shuffle_f32x4(x[8 + j], x[12 + j], 0xEE);
                float *o = out + (k + j) * W + h;
                _mm512_mask_storeu_ps(o, ms, _mm512_shuffle_f32x4(p0, p2, 0x88));
                _mm512_mask_storeu_ps(o + 4 * W, ms, _mm512_shuffle_f32x4(p0, p2, 0xDD));
                _mm512_mask_storeu_ps(o + 8 * W, ms, _mm512_shuffle_f32x4(p1, p3, 0x88));
                _mm512_mask_storeu_ps(o + 12 * W, ms, _mm512_shuffle_f32x4(p1, p3, 0xDD));
            }
        }
        int64_t hw = W - h < 16 ? W - h : 16;
        for (int64_t k = k16; k < kc; k++)
            for (int i = 0; i < hw; i++) out[k * W + h + i] = i < rows ? r[i * ld + k] : 0.0f;
    }
}

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
        pack_tk(src, ld, w, kc, W, out);
        return;
    }
    for (int64_t k = 0; k < kc; k++) {
        for (int64_t i = 0; i < w; i++) out[k * W + i] = src[i * ld + k * ks];
        for (int64_t i = w; i < W; i++) out[k * W + i] = 0.0f;
    }
}

/* the B block (kc x nc, rows sk apart, columns sn apart) as NR-wide slivers, zero-padded */
static AVX512 void pack_b(const float *src, int64_t sk, int64_t sn, int64_t nc, int64_t kc,
                          float *out) {
    if (sn != 1) {
        for (int64_t j = 0; j < nc; j += NR)
            pack(src + j * sn, sn, sk, nc - j < NR ? nc - j : NR, kc, NR, out + j * kc);
        return;
    }
    /* row-major B: row by row, so that the reads stream along whole rows */
    int64_t nfull = nc / NR, rest = nc - nfull * NR;
    __mmask16 ml0 = rest >= 16 ? 0xFFFF : (__mmask16)((1u << rest) - 1);
    __mmask16 ml1 = rest > 16 ? (__mmask16)((1u << (rest - 16)) - 1) : 0;
    for (int64_t k = 0; k < kc; k++) {
        const float *r = src + k * sk;
        float *o = out + k * NR;
        for (int64_t s = 0; s < nfull; s++) {
            _mm512_store_ps(o + s * NR * kc, _mm512_loadu_ps(r + s * NR));
            _mm512_store_ps(o + s * NR * kc + 16, _mm512_loadu_ps(r + s * NR + 16));
        }
        if (rest) {
            _mm512_store_ps(o + nfull * NR * kc, _mm512_maskz_loadu_ps(ml0, r + nfull * NR));
            _mm512_store_ps(o + nfull * NR * kc + 16,
                            _mm512_maskz_loadu_ps(ml1, r + nfull * NR + 16));
        }
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
 * Each thread computes its own rectangle of C (a grid of T parts, see sg_grid) as a plain
 * single-threaded Goto loop: it packs the B block and the A blocks of its rectangle into its
 * own buffers, which stay in its own L2. There is no synchronisation between threads except the
 * end of the parallel region: measured on 2 cores, the shared packing with per-block waits the
 * threads did before cost more than packing the shared operand twice. */
typedef struct {
    int64_t m, n, k, sam, sak, sbk, sbn, ldc;
    const float *a, *b;
    float *c;
    float alpha, beta;
    const float *bias;           /* a row added to every row of C (or NULL), with beta 0 */
    int64_t kcb;                 /* k block (the same for every part) */
    int64_t tm, tn;              /* the grid of parts: tm row ranges x tn column ranges */
    int direct_a;                /* A row-major: the kernel reads it where it is, unpacked */
    int64_t abytes, bbytes;      /* per-thread buffer sizes */
    char *buf;                   /* T x (abytes + bbytes) */
    const float *bpre;           /* B packed beforehand (fm_sgemm_pack) or NULL */
    int64_t npad;                /* with bpre: n rounded up to NR */
} sg_job;

/* C[i0:i1, j0:j1] on one thread */
static AVX512 void sg_part(const sg_job *J, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                           float *Ap, float *Bp) {
    int64_t ncb = block(j1 - j0, NC_MAX, NR), mcb = block(i1 - i0, MC_MAX, MR), kcb = J->kcb;
    for (int64_t jc = j0; jc < j1; jc += ncb) {
        int64_t nc = j1 - jc < ncb ? j1 - jc : ncb;
        for (int64_t pc = 0; pc < J->k; pc += kcb) {
            int64_t kc = J->k - pc < kcb ? J->k - pc : kcb;
            float be = pc == 0 ? J->beta : 1.0f;
            const float *bias = pc == 0 && J->bias ? J->bias + jc : NULL;
            if (J->bpre) /* k block pc of the prepacked B, from its sliver at column jc */
                Bp = (float *)J->bpre + pc * J->npad + jc * kc;
            else
                pack_b(J->b + pc * J->sbk + jc * J->sbn, J->sbk, J->sbn, nc, kc, Bp);
            for (int64_t ic = i0; ic < i1; ic += mcb) {
                int64_t mc = i1 - ic < mcb ? i1 - ic : mcb;
                if (!J->direct_a)
                    for (int64_t ii = 0; ii < mc; ii += MR)
                        pack(J->a + (ic + ii) * J->sam + pc * J->sak, J->sam, J->sak,
                             mc - ii < MR ? mc - ii : MR, kc, MR, Ap + ii * kc);
                for (int64_t ir = 0; ir < mc; ir += MR) {
                    int64_t mr = mc - ir < MR ? mc - ir : MR;
                    kern_fn kf = kerns[J->direct_a][mr], kh = kerns[2 + J->direct_a][mr];
                    const float *as = J->direct_a ? J->a + (ic + ir) * J->sam + pc : Ap + ir * kc;
                    for (int64_t jr = 0; jr < nc; jr += NR) {
                        int64_t nr = nc - jr < NR ? nc - jr : NR;
                        __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
                        __mmask16 m1 = nr >= 32 ? 0xFFFF
                                       : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
                        (nr <= 16 ? kh : kf)(kc, as, J->sam, Bp + jr * kc,
                                             J->c + (ic + ir) * J->ldc + jc + jr, J->ldc,
                                             J->alpha, be, bias ? bias + jr : NULL, m0, m1);
                    }
                }
            }
        }
    }
}

/* part t of the grid: rows in MR slivers, columns in 16-wide halves of NR slivers (whole NR
   slivers with a prepacked B, whose slivers start at multiples of NR) */
static void sg_range(const sg_job *J, int64_t t, int64_t *i0, int64_t *i1, int64_t *j0,
                     int64_t *j1) {
    int64_t u = J->bpre ? NR : 16;
    int64_t r = t / J->tn, q = t % J->tn, msl = cdiv(J->m, MR), nh = cdiv(J->n, u);
    *i0 = msl * r / J->tm * MR, *i1 = msl * (r + 1) / J->tm * MR;
    *j0 = nh * q / J->tn * u, *j1 = nh * (q + 1) / J->tn * u;
    if (*i1 > J->m) *i1 = J->m;
    if (*j1 > J->n) *j1 = J->n;
}

static AVX512 void sg_thread(const sg_job *J, int64_t t) {
    int64_t i0, i1, j0, j1;
    sg_range(J, t, &i0, &i1, &j0, &j1);
    if (i0 >= i1 || j0 >= j1) return;
    if (!J->buf) { /* prepacked B and A read in place: no buffers */
        sg_part(J, i0, i1, j0, j1, NULL, NULL);
        return;
    }
    char *mine = J->buf + t * (J->abytes + J->bbytes);
    sg_part(J, i0, i1, j0, j1, (float *)mine, (float *)(mine + J->abytes));
}

/* the grid tm x tn (tm * tn <= T) with the least estimated time of the slowest part: its FMAs
   (whole 12 x 32 tiles, 32 lanes a cycle) plus its packing (every element of its A rows once
   per column block, of its B columns once; about a cycle per element) */
static void sg_grid(sg_job *J, int T) {
    int64_t msl = cdiv(J->m, MR), nsl = cdiv(J->n, NR);
    double best = -1;
    J->tm = J->tn = 1;
    for (int64_t tm = 1; tm <= T; tm++) {
        int64_t tn = T / tm;
        if (tm > msl || tn > nsl || (tm > 1 && tn > 1 && tm * tn != T)) continue;
        int64_t rows = cdiv(msl, tm) * MR, cols = cdiv(nsl, tn) * NR;
        double njc = (double)cdiv(cols, NC_MAX);
        double cost = (double)rows * cols * J->k / 32.0 +
                      ((double)rows * njc + cols) * J->k * 1.0;
        if (best < 0 || cost < best) best = cost, J->tm = tm, J->tn = tn;
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

static int sg_gemm(int64_t m, int64_t n, int64_t k, double alpha, intptr_t a, int64_t sam,
                   int64_t sak, intptr_t b, int64_t sbk, int64_t sbn, double beta, intptr_t c,
                   int64_t ldc, int T, const float *bias) {
    sg_job J;
    memset(&J, 0, sizeof(J));
    J.bias = bias;
    J.m = m, J.n = n, J.k = k, J.sam = sam, J.sak = sak, J.sbk = sbk, J.sbn = sbn, J.ldc = ldc;
    J.a = (const float *)a, J.b = (const float *)b, J.c = (float *)c;
    J.alpha = (float)alpha, J.beta = (float)beta;
    J.kcb = block(k, KC_MAX, 4);
    sg_grid(&J, T);
    /* A contiguous along k: the kernel broadcasts from A's rows directly. Packing them cost as
       much as it saved here, and with the columns split between threads every thread packed
       the same rows */
    J.direct_a = sak == 1;
    int64_t P = J.tm * J.tn;
    /* buffers for the largest part (block() never exceeds min(cap, n rounded up to its unit)) */
    int64_t rows = cdiv(cdiv(m, MR), J.tm) * MR, cols = (cdiv(cdiv(n, 16), J.tn) * 16);
    int64_t mcb = rows < MC_MAX ? rows : MC_MAX, ncb = cdiv(cols < NC_MAX ? cols : NC_MAX, NR) * NR;
    J.abytes = J.direct_a ? 0 : (mcb * J.kcb * 4 + 63) & ~(int64_t)63;
    J.bbytes = (ncb * J.kcb * 4 + 63) & ~(int64_t)63;
    int64_t total = P * (J.abytes + J.bbytes);
    J.buf = (char *)fm_alloc(total);
    if (!J.buf) return FM_ERR_NOMEM;
    if (P > 1) {
#pragma omp parallel for num_threads((int)P) schedule(static, 1)
        for (int64_t t = 0; t < P; t++) sg_thread(&J, t);
    } else {
        sg_thread(&J, 0);
    }
    fm_free((intptr_t)J.buf, total);
    return FM_OK;
}

int fm_sgemm(int64_t m, int64_t n, int64_t k, double alpha, intptr_t a, int64_t sam, int64_t sak,
             intptr_t b, int64_t sbk, int64_t sbn, double beta, intptr_t c, int64_t ldc,
             int nthreads) {
    if (!fm_sgemm_available()) return FM_ERR_OP;
    if (m <= 0 || n <= 0 || k <= 0) return FM_ERR_ARG; /* empty products: the caller's job */
    int T = nthreads < 1 ? 1 : nthreads > 64 ? 64 : nthreads;
    /* C with few columns (a classifier's logits: x @ W.t() with n = 10) wastes most of the
       32-wide tiles; C^T = B^T A^T fills them, computed into a scratch and transposed back */
    if (n < NR && cdiv(n, MR) * MR * cdiv(m, NR) * NR * 4 < cdiv(m, MR) * MR * NR * 3) {
        int64_t bytes = n * m * 4;
        float *t = (float *)fm_alloc(bytes);
        if (t) {
            int rc = sg_gemm(n, m, k, alpha, b, sbn, sbk, a, sak, sam, 0.0, (intptr_t)t, m, T,
                             NULL);
            float *C = (float *)c, be = (float)beta;
            if (rc == FM_OK)
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++)
                        C[i * ldc + j] = be == 0.0f ? t[j * m + i] : t[j * m + i] + be * C[i * ldc + j];
            fm_free((intptr_t)t, bytes);
            return rc;
        }
    }
    return sg_gemm(m, n, k, alpha, a, sam, sak, b, sbk, sbn, beta, c, ldc, T, NULL);
}

int fm_sgemm_bias(int64_t m, int64_t n, int64_t k, intptr_t a, int64_t sam, int64_t sak,
                  intptr_t b, int64_t sbk, int64_t sbn, intptr_t bias, intptr_t c, int64_t ldc,
                  int nthreads) {
    if (!fm_sgemm_available() || !bias) return FM_ERR_OP;
    if (m <= 0 || n <= 0 || k <= 0) return FM_ERR_ARG;
    /* C with few columns takes fm_sgemm's transposed path (bias copied into C by the caller) */
    if (n < NR) return FM_ERR_OP;
    int T = nthreads < 1 ? 1 : nthreads > 64 ? 64 : nthreads;
    return sg_gemm(m, n, k, 1.0, a, sam, sak, b, sbk, sbn, 0.0, c, ldc, T, (const float *)bias);
}

/* ---- a B operand packed once for many products (sgemm_packed.h) ------------------------- */
/* Layout: for each k block (kcb = block(k, KC_MAX, 4) rows, the last one shorter) the whole
   width as pack_b lays out a block: NR-wide slivers of kc x NR floats, zero-padded to
   npad = n rounded up to NR; block pc starts at pc * npad. */
int64_t fm_sgemm_packed_floats(int64_t k, int64_t n) { return k * cdiv(n, NR) * NR; }

int fm_sgemm_pack(int64_t k, int64_t n, intptr_t b, int64_t sbk, int64_t sbn, intptr_t out) {
    if (!fm_sgemm_available()) return FM_ERR_OP;
    if (k <= 0 || n <= 0) return FM_ERR_ARG;
    int64_t kcb = block(k, KC_MAX, 4), npad = cdiv(n, NR) * NR;
    for (int64_t pc = 0; pc < k; pc += kcb) {
        int64_t kc = k - pc < kcb ? k - pc : kcb;
        pack_b((const float *)b + pc * sbk, sbk, sbn, n, kc, (float *)out + pc * npad);
    }
    return FM_OK;
}

int fm_sgemm_packed(int64_t m, int64_t n, int64_t k, intptr_t a, int64_t sam, intptr_t bp,
                    double beta, intptr_t c, int64_t ldc, int nthreads) {
    if (!fm_sgemm_available()) return FM_ERR_OP;
    if (m <= 0 || n <= 0 || k <= 0) return FM_ERR_ARG;
    int T = nthreads < 1 ? 1 : nthreads > 64 ? 64 : nthreads;
    sg_job J;
    memset(&J, 0, sizeof(J));
    J.m = m, J.n = n, J.k = k, J.sam = sam, J.sak = 1, J.ldc = ldc;
    J.a = (const float *)a, J.c = (float *)c, J.bpre = (const float *)bp;
    J.npad = cdiv(n, NR) * NR;
    J.alpha = 1.0f, J.beta = (float)beta;
    J.kcb = block(k, KC_MAX, 4);
    J.direct_a = 1;
    sg_grid(&J, T);
    int64_t P = J.tm * J.tn;
    if (P > 1) {
#pragma omp parallel for num_threads((int)P) schedule(static, 1)
        for (int64_t t = 0; t < P; t++) sg_thread(&J, t);
    } else {
        sg_thread(&J, 0);
    }
    return FM_OK;
}

#else /* not x86-64 GCC/Clang: BLAS does everything */

int64_t fm_sgemm_packed_floats(int64_t k, int64_t n) { (void)k, (void)n; return 0; }
int fm_sgemm_pack(int64_t k, int64_t n, intptr_t b, int64_t sbk, int64_t sbn, intptr_t out) {
    (void)k, (void)n, (void)b, (void)sbk, (void)sbn, (void)out;
    return FM_ERR_OP;
}
int fm_sgemm_packed(int64_t m, int64_t n, int64_t k, intptr_t a, int64_t sam, intptr_t bp,
                    double beta, intptr_t c, int64_t ldc, int nthreads) {
    (void)m, (void)n, (void)k, (void)a, (void)sam, (void)bp, (void)beta, (void)c, (void)ldc;
    (void)nthreads;
    return FM_ERR_OP;
}

int fm_sgemm_bias(int64_t m, int64_t n, int64_t k, intptr_t a, int64_t sam, int64_t sak,
                  intptr_t b, int64_t sbk, int64_t sbn, intptr_t bias, intptr_t c, int64_t ldc,
                  int nthreads) {
    (void)m, (void)n, (void)k, (void)a, (void)sam, (void)sak, (void)b, (void)sbk, (void)sbn;
    (void)bias, (void)c, (void)ldc, (void)nthreads;
    return FM_ERR_OP;
}

int fm_sgemm_available(void) { return 0; }

int fm_sgemm(int64_t m, int64_t n, int64_t k, double alpha, intptr_t a, int64_t sam, int64_t sak,
             intptr_t b, int64_t sbk, int64_t sbn, double beta, intptr_t c, int64_t ldc,
             int nthreads) {
    (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)sam, (void)sak, (void)b, (void)sbk;
    (void)sbn, (void)beta, (void)c, (void)ldc, (void)nthreads;
    return FM_ERR_OP;
}
#endif
