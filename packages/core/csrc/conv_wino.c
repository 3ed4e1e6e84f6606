/* Winograd F(2x2, 3x3) for float32 2-D 3x3 stride-1 convolutions (called by fm_conv for FWD,
 * BWD_DATA and BWD_WEIGHT; see api_conv.h for when it is taken).
 *
 * Why: im2col + GEMM does 9 multiply-adds per output and input channel; F(2x2, 3x3) does 16 per
 * 2x2 output tile, 2.25x fewer, at the price of linear transforms of the input tiles and the
 * outputs (adds only, linear in the data, cheap next to the GEMMs once channels reach a few
 * dozen). With U = G g G^T per (output, input channel) pair, V = B^T d B per 4x4 input patch
 * (patches overlap by 2) and M[xi] = U[xi] @ V[xi] for each of the 16 positions xi of the 4x4
 * transformed tile, the outputs are Y = A^T M A (2x2 per tile).
 *
 * Layout: tiles are numbered over (image, tile row, tile column) and processed in chunks of nt
 * tiles; a chunk's V (16 x C x nt) and M (16 x K x nt) stay in cache while 16 GEMMs (fm_sgemm,
 * one thread each) run over them. With many chunks, threads take whole chunks (no two write the
 * same output, nothing synchronises after the weight transform); with few (small images, small
 * batch) they share each chunk: input channels for the input transform, output channels for the
 * products and the output transform, two barriers per chunk. The input transform stages the
 * rows a chunk needs zero-padded (so its inner loop never checks bounds) and runs 16 tiles per
 * step with AVX-512 across tile rows; the output transform runs over the whole chunk (a plain
 * loop the compiler vectorises) and copies row pieces out. fm_sgemm needs AVX-512, so without
 * it the path is never taken and im2col does the work.
 *
 * The transposed direction (BWD_DATA, stride 1) is the same computation: a forward convolution of
 * the gradient with the weight flipped in both taps and in/out channels swapped, padding 2 - pad.
 * The gradient by weight runs the transposed algorithm: with dM = A dY A^T per tile (dY the 2x2
 * output gradient), dU[xi] = sum over tiles of dM[xi] V[xi]^T (16 products reducing over the
 * tiles, accumulated chunk by chunk), and dw = G^T dU G per weight pair.
 */
#include <omp.h>

#include "fiamma.h"
#include "dtypes.h"
#include "api_matmul.h"
#include "api_conv.h"

/* one call, as a forward convolution: x (N, C, H, W) -> y (N, K, OH, OW); output (oy, ox) reads
   x rows oy + r - ph and columns ox + s - pw (r, s < 3), zeros outside */
typedef struct {
    int64_t N, C, K, H, W, OH, OW, ph, pw, TH, TW, ntiles, nt;
    const float *x, *bias;
    float *y, *U;
    int64_t uam, uak; /* strides of U[xi] as the K x C matrix of the products */
} wn_t;

static int wino_on = 1;
static int64_t wino_tiles = 0; /* 0: chosen per call */

int fm_conv_set_winograd(int on) {
    int prev = wino_on;
    if (on >= 0) wino_on = on > 2 ? 2 : on;
    return prev;
}

int64_t fm_conv_set_winograd_tiles(int64_t tiles) {
    int64_t prev = wino_tiles;
    if (tiles >= 0) wino_tiles = tiles;
    return prev;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))

/* u[xi * us + i] = (G g G^T)[xi] for i < cnt, where the 3x3 taps g of i are at w + i * si
   (reversed when flip) */
static void wt_rows_c(const float *FM_RESTRICT w, int64_t si, int64_t cnt, int flip,
                      float *FM_RESTRICT u, int64_t us) {
    for (int64_t i = 0; i < cnt; i++) {
        const float *g = w + i * si;
        float t[9], a[4][3];
        for (int e = 0; e < 9; e++) t[e] = g[flip ? 8 - e : e];
        for (int c = 0; c < 3; c++) {
            a[0][c] = t[c];
            a[1][c] = 0.5f * (t[c] + t[3 + c] + t[6 + c]);
            a[2][c] = 0.5f * (t[c] - t[3 + c] + t[6 + c]);
            a[3][c] = t[6 + c];
        }
        for (int r = 0; r < 4; r++) {
            u[(4 * r) * us + i] = a[r][0];
            u[(4 * r + 1) * us + i] = 0.5f * (a[r][0] + a[r][1] + a[r][2]);
            u[(4 * r + 2) * us + i] = 0.5f * (a[r][0] - a[r][1] + a[r][2]);
            u[(4 * r + 3) * us + i] = a[r][2];
        }
    }
}

/* V = B^T d B for 16 "virtual" tiles per block b: tile jv = ty (TW + 1) + tx of a staged image
   (its 4x4 patch: rows E, O, E + Wp, O + Wp, columns 2 jv .. 2 jv + 3; the stride-2 columns come
   from two loads and a permute). masks[b] marks the real tiles (the dummy one per tile row and
   those outside the chunk are dropped); the real ones are stored compressed, v[xi * vs + i] */
static AVX512 void in_virt(int64_t nblk, const float *E, const float *O, int64_t Wp,
                           const uint16_t *masks, float *v, int64_t vs) {
    const __m512i ev =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    const float *p[4] = {E, O, E + Wp, O + Wp};
    int64_t pos = 0;
    for (int64_t b = 0; b < nblk; b++) {
        const __mmask16 mk = (__mmask16)masks[b];
        if (!mk) continue;
        __m512 h[4][4];
        for (int q = 0; q < 4; q++) {
            const float *s = p[q] + 32 * b;
            __m512 lo = _mm512_loadu_ps(s), hi = _mm512_loadu_ps(s + 16);
            __m512 lo2 = _mm512_loadu_ps(s + 2), hi2 = _mm512_loadu_ps(s + 18);
            __m512 e0 = _mm512_permutex2var_ps(lo, ev, hi);
            __m512 e1 = _mm512_permutex2var_ps(lo, od, hi);
            __m512 e2 = _mm512_permutex2var_ps(lo2, ev, hi2);
            __m512 e3 = _mm512_permutex2var_ps(lo2, od, hi2);
            h[q][0] = _mm512_sub_ps(e0, e2), h[q][1] = _mm512_add_ps(e1, e2);
            h[q][2] = _mm512_sub_ps(e2, e1), h[q][3] = _mm512_sub_ps(e1, e3);
        }
        const int cnt = __builtin_popcount(mk);
        const __mmask16 sm = (__mmask16)((1u << cnt) - 1);
        float *o = v + pos;
#define ST(i, x) _mm512_mask_storeu_ps(o + (i) * vs, sm, _mm512_maskz_compress_ps(mk, x))
        for (int c = 0; c < 4; c++) {
            ST(c, _mm512_sub_ps(h[0][c], h[2][c]));
            ST(4 + c, _mm512_add_ps(h[1][c], h[2][c]));
            ST(8 + c, _mm512_sub_ps(h[2][c], h[1][c]));
            ST(12 + c, _mm512_sub_ps(h[1][c], h[3][c]));
        }
#undef ST
        pos += cnt;
    }
}

/* wt_rows_c for taps stored one after another (si = 9), 16 indices per step (gathers) */
static AVX512 void wt_rows(const float *w, int64_t cnt, int flip, float *u, int64_t us) {
    const int64_t si = 9;
    const __m512i idx = _mm512_setr_epi32(0, 9, 18, 27, 36, 45, 54, 63, 72, 81, 90, 99, 108, 117,
                                          126, 135);
    const __m512 half = _mm512_set1_ps(0.5f);
    int64_t i = 0;
    for (; i + 16 <= cnt; i += 16) {
        const float *g = w + i * si;
        __m512 t[9], a[4][3];
        for (int e = 0; e < 9; e++) t[e] = _mm512_i32gather_ps(idx, g + (flip ? 8 - e : e), 4);
        for (int c = 0; c < 3; c++) {
            a[0][c] = t[c];
            const __m512 ac = _mm512_add_ps(t[c], t[6 + c]);
            a[1][c] = _mm512_mul_ps(half, _mm512_add_ps(ac, t[3 + c]));
            a[2][c] = _mm512_mul_ps(half, _mm512_sub_ps(ac, t[3 + c]));
            a[3][c] = t[6 + c];
        }
        for (int r = 0; r < 4; r++) {
            __m512 s = _mm512_add_ps(a[r][0], a[r][2]);
            _mm512_storeu_ps(u + (4 * r) * us + i, a[r][0]);
            const __m512 u1 = _mm512_mul_ps(half, _mm512_add_ps(s, a[r][1]));
            const __m512 u2 = _mm512_mul_ps(half, _mm512_sub_ps(s, a[r][1]));
            _mm512_storeu_ps(u + (4 * r + 1) * us + i, u1);
            _mm512_storeu_ps(u + (4 * r + 2) * us + i, u2);
            _mm512_storeu_ps(u + (4 * r + 3) * us + i, a[r][2]);
        }
    }
    if (i < cnt) wt_rows_c(w + i * si, si, cnt - i, flip, u + i, us);
}

/* outputs of one segment for one output channel: m[xi * ms + j] -> the 2x2 tile j, as rows
   o0 (y00, y01 of each tile) and o1 (y10, y11) interleaved, plus bias */
FM_CLONES static void out_seg(int64_t seg, const float *FM_RESTRICT m, int64_t ms, float bias,
                              float *FM_RESTRICT o0, float *FM_RESTRICT o1) {
    for (int64_t j = 0; j < seg; j++) {
        float s[2][4];
        for (int q = 0; q < 4; q++) {
            const float m0 = m[q * ms + j], m1 = m[(4 + q) * ms + j];
            const float m2 = m[(8 + q) * ms + j], m3 = m[(12 + q) * ms + j];
            s[0][q] = m0 + m1 + m2;
            s[1][q] = m1 - m2 - m3;
        }
        o0[2 * j] = s[0][0] + s[0][1] + s[0][2] + bias;
        o0[2 * j + 1] = s[0][1] - s[0][2] - s[0][3] + bias;
        o1[2 * j] = s[1][0] + s[1][1] + s[1][2] + bias;
        o1[2 * j + 1] = s[1][1] - s[1][2] - s[1][3] + bias;
    }
}

/* rows of a staged plane: a chunk of nt tiles spans at most (TW - 1 + nt - 1) / TW + 1 tile
   rows, and one more row (plus 80 values) covers what the last block's loads read past them */
static int64_t in_rows(const wn_t *P) {
    int64_t r = (P->TW + P->nt - 2) / P->TW + 1;
    return (r < P->TH ? r : P->TH) + 2;
}

static int64_t in_floats(const wn_t *P) {
    return 2 * (in_rows(P) * (2 * P->TW + 2) + 80) + (in_rows(P) * (P->TW + 1)) / 16 + 4;
}

/* Input transform: per image and channel, the rows the chunk needs are staged zero-padded into
   even rows (E) and odd rows (O), Wp = 2 TW + 2 wide, so one stride-2 sweep covers several tile
   rows (in_virt) with no bounds checks, at the cost of one dummy tile per tile row. sc: scratch
   of in_floats(P) floats */
static void in_chunk(const wn_t *P, int64_t t0, int64_t t1, int64_t c0, int64_t c1, float *V,
                     float *sc) {
    const int64_t C = P->C, nt = P->nt, TW = P->TW, tpi = P->TH * TW, Wp = 2 * TW + 2;
    const int64_t plane = in_rows(P) * Wp + 80;
    float *E = sc, *O = sc + plane;
    uint16_t *masks = (uint16_t *)(sc + 2 * plane);
    for (int64_t t = t0; t < t1;) {
        const int64_t n = t / tpi, a = t % tpi, e = tpi < a + (t1 - t) ? tpi : a + (t1 - t);
        const int64_t ty0 = a / TW, ty1 = (e - 1) / TW;
        const int64_t j0 = a % TW, j1 = (ty1 - ty0) * (TW + 1) + (e - 1) % TW + 1;
        const int64_t nblk = (j1 - j0 + 15) / 16, nrow = 2 * (ty1 - ty0) + 4;
        for (int64_t b = 0; b < nblk; b++) {
            unsigned m = 0;
            for (int l = 0; l < 16; l++) {
                const int64_t j = j0 + 16 * b + l;
                if (j < j1 && j % (TW + 1) != TW) m |= 1u << l;
            }
            masks[b] = (uint16_t)m;
        }
        for (int64_t c = c0; c < c1; c++) {
            const float *img = P->x + (n * C + c) * P->H * P->W;
            for (int64_t r = 0; r < nrow; r++) {
                float *d = (r & 1 ? O : E) + (r >> 1) * Wp;
                const int64_t iy = 2 * ty0 - P->ph + r;
                const int64_t lo = P->pw, hi = P->W + P->pw < Wp ? P->W + P->pw : Wp;
                if (iy < 0 || iy >= P->H || lo >= hi) {
                    memset(d, 0, Wp * sizeof(float));
                    continue;
                }
                for (int64_t i = 0; i < lo && i < Wp; i++) d[i] = 0.0f;
                memcpy(d + lo, img + iy * P->W, (hi - lo) * sizeof(float));
                for (int64_t i = hi; i < Wp; i++) d[i] = 0.0f;
            }
            in_virt(nblk, E + 2 * j0, O + 2 * j0, Wp, masks, V + c * nt + (t - t0), C * nt);
        }
        t += e - a;
    }
}

static int gemm_chunk(const wn_t *P, int64_t nc, int64_t k0, int64_t k1, const float *V,
                      float *M) {
    const int64_t C = P->C, K = P->K, nt = P->nt;
    for (int xi = 0; xi < 16 && k1 > k0; xi++) {
        int rc = fm_sgemm(k1 - k0, nc, C, 1.0,
                          (intptr_t)(P->U + xi * K * C + k0 * P->uam), P->uam, P->uak,
                          (intptr_t)(V + xi * C * nt), nt, 1, 0.0,
                          (intptr_t)(M + (xi * K + k0) * nt), nt, 1);
        if (rc) return rc;
    }
    return FM_OK;
}

static void out_chunk(const wn_t *P, int64_t t0, int64_t t1, int64_t k0, int64_t k1,
                      const float *M, float *o0, float *o1) {
    const int64_t K = P->K, nt = P->nt, tpi = P->TH * P->TW, nc = t1 - t0;
    for (int64_t k = k0; k < k1; k++) {
        /* all tiles of the chunk at once (full vectors also for narrow images), then row
           pieces to their places */
        out_seg(nc, M + k * nt, K * nt, P->bias ? P->bias[k] : 0.0f, o0, o1);
        for (int64_t t = t0; t < t1;) {
            const int64_t n = t / tpi, ty = (t % tpi) / P->TW, tx = t % P->TW;
            const int64_t seg = P->TW - tx < t1 - t ? P->TW - tx : t1 - t;
            const int64_t oy = 2 * ty, ox = 2 * tx;
            const int64_t w = P->OW - ox < 2 * seg ? P->OW - ox : 2 * seg;
            float *y = P->y + ((n * K + k) * P->OH + oy) * P->OW + ox;
            memcpy(y, o0 + 2 * (t - t0), w * sizeof(float));
            if (oy + 1 < P->OH) memcpy(y + P->OW, o1 + 2 * (t - t0), w * sizeof(float));
            t += seg;
        }
    }
}

/* ---- gradient by weight: dU[xi] = sum over tiles of dM[xi] V[xi]^T, dM = A dY A^T per tile (dY
   the 2x2 output gradient, zero past the edges), then dw = G^T dU G per weight pair */

/* dM of nc tiles for one output channel from their gradient rows g0 (dy00, dy01 per tile) and
   g1 (dy10, dy11): m[xi * ms + j]; 16 tiles per step, the pairs split by permutes */
static AVX512 void gout_seg(int64_t nc, const float *g0, const float *g1, float *m, int64_t ms) {
    const __m512i ev =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t j = 0; j < nc; j += 16) {
        const int64_t r = nc - j < 16 ? nc - j : 16;
        const __mmask16 m_lo = (__mmask16)(r >= 8 ? 0xFFFF : (1u << (2 * r)) - 1);
        const __mmask16 m_hi =
            (__mmask16)(r <= 8 ? 0 : r == 16 ? 0xFFFF : (1u << (2 * r - 16)) - 1);
        const __m512 x0 = _mm512_maskz_loadu_ps(m_lo, g0 + 2 * j);
        const __m512 x1 = _mm512_maskz_loadu_ps(m_hi, g0 + 2 * j + 16);
        const __m512 y0 = _mm512_maskz_loadu_ps(m_lo, g1 + 2 * j);
        const __m512 y1 = _mm512_maskz_loadu_ps(m_hi, g1 + 2 * j + 16);
        const __m512 a0 = _mm512_permutex2var_ps(x0, ev, x1);
        const __m512 a1 = _mm512_permutex2var_ps(x0, od, x1);
        const __m512 b0 = _mm512_permutex2var_ps(y0, ev, y1);
        const __m512 b1 = _mm512_permutex2var_ps(y0, od, y1);
        /* rows of A d: d0, d0 + d1, d0 - d1, -d1; then the same on the columns */
        const __m512 row[4][2] = {{a0, a1},
                                  {_mm512_add_ps(a0, b0), _mm512_add_ps(a1, b1)},
                                  {_mm512_sub_ps(a0, b0), _mm512_sub_ps(a1, b1)},
                                  {_mm512_sub_ps(zero, b0), _mm512_sub_ps(zero, b1)}};
        const __mmask16 sm = (__mmask16)((1u << r) - 1);
        float *o = m + j;
        for (int i = 0; i < 4; i++) {
            _mm512_mask_storeu_ps(o + (4 * i) * ms, sm, row[i][0]);
            _mm512_mask_storeu_ps(o + (4 * i + 1) * ms, sm, _mm512_add_ps(row[i][0], row[i][1]));
            _mm512_mask_storeu_ps(o + (4 * i + 2) * ms, sm, _mm512_sub_ps(row[i][0], row[i][1]));
            _mm512_mask_storeu_ps(o + (4 * i + 3) * ms, sm, _mm512_sub_ps(zero, row[i][1]));
        }
    }
}

/* dM (16 x K x nt) of the tiles [t0, t1) for output channels [k0, k1); g0, g1: 2 nt floats */
static void gout_chunk(const wn_t *P, const float *gy, int64_t t0, int64_t t1, int64_t k0,
                       int64_t k1, float *M, float *g0, float *g1) {
    const int64_t K = P->K, nt = P->nt, tpi = P->TH * P->TW, nc = t1 - t0;
    for (int64_t k = k0; k < k1; k++) {
        for (int64_t t = t0; t < t1;) {
            const int64_t n = t / tpi, ty = (t % tpi) / P->TW, tx = t % P->TW;
            const int64_t seg = P->TW - tx < t1 - t ? P->TW - tx : t1 - t;
            const int64_t oy = 2 * ty, ox = 2 * tx;
            const int64_t w = P->OW - ox < 2 * seg ? P->OW - ox : 2 * seg;
            const float *y = gy + ((n * K + k) * P->OH + oy) * P->OW + ox;
            float *d0 = g0 + 2 * (t - t0), *d1 = g1 + 2 * (t - t0);
            memcpy(d0, y, w * sizeof(float));
            for (int64_t i = w; i < 2 * seg; i++) d0[i] = 0.0f;
            if (oy + 1 < P->OH) {
                memcpy(d1, y + P->OW, w * sizeof(float));
                for (int64_t i = w; i < 2 * seg; i++) d1[i] = 0.0f;
            } else {
                for (int64_t i = 0; i < 2 * seg; i++) d1[i] = 0.0f;
            }
            t += seg;
        }
        gout_seg(nc, g0, g1, M + k * nt, K * nt);
    }
}

/* dw[k][c] (K, C, 3, 3) = G^T dU[xi][k][c] G for k in [k0, k1); 16 c per step (contiguous
   loads, scattered stores), the rest one by one */
static AVX512 void wt_back(const wn_t *P, const float *dU, int64_t k0, int64_t k1, float *dw) {
    const int64_t KC = P->K * P->C, C = P->C;
    const __m512i idx = _mm512_setr_epi32(0, 9, 18, 27, 36, 45, 54, 63, 72, 81, 90, 99, 108, 117,
                                          126, 135);
    const __m512 half = _mm512_set1_ps(0.5f);
    for (int64_t k = k0; k < k1; k++) {
        int64_t c = 0;
        for (; c + 16 <= C; c += 16) {
            __m512 u[16], z[3][4];
            for (int xi = 0; xi < 16; xi++) u[xi] = _mm512_loadu_ps(dU + xi * KC + k * C + c);
            for (int j = 0; j < 4; j++) {
                const __m512 h = _mm512_mul_ps(half, _mm512_add_ps(u[4 + j], u[8 + j]));
                z[0][j] = _mm512_add_ps(u[j], h);
                z[1][j] = _mm512_mul_ps(half, _mm512_sub_ps(u[4 + j], u[8 + j]));
                z[2][j] = _mm512_add_ps(h, u[12 + j]);
            }
            float *o = dw + (k * C + c) * 9;
            for (int i = 0; i < 3; i++) {
                const __m512 h = _mm512_mul_ps(half, _mm512_add_ps(z[i][1], z[i][2]));
                const __m512 d1 = _mm512_mul_ps(half, _mm512_sub_ps(z[i][1], z[i][2]));
                _mm512_i32scatter_ps(o + 3 * i, idx, _mm512_add_ps(z[i][0], h), 4);
                _mm512_i32scatter_ps(o + 3 * i + 1, idx, d1, 4);
                _mm512_i32scatter_ps(o + 3 * i + 2, idx, _mm512_add_ps(h, z[i][3]), 4);
            }
        }
        for (; c < C; c++) {
            float u[16], z[3][4];
            for (int xi = 0; xi < 16; xi++) u[xi] = dU[xi * KC + k * C + c];
            for (int j = 0; j < 4; j++) {
                const float h = 0.5f * (u[4 + j] + u[8 + j]);
                z[0][j] = u[j] + h;
                z[1][j] = 0.5f * (u[4 + j] - u[8 + j]);
                z[2][j] = h + u[12 + j];
            }
            float *o = dw + (k * C + c) * 9;
            for (int i = 0; i < 3; i++) {
                const float h = 0.5f * (z[i][1] + z[i][2]);
                o[3 * i] = z[i][0] + h;
                o[3 * i + 1] = 0.5f * (z[i][1] - z[i][2]);
                o[3 * i + 2] = h + z[i][3];
            }
        }
    }
}

/* BWD_WEIGHT: x = P->x (N, C, H, W), gy (N, K, OH, OW) -> dw (K, C, 3, 3). Threads take whole
   chunks into their own dU (summed at the end) or, with few chunks, share each chunk (output
   channels for the products, so every thread owns rows of one dU) */
static int wino_wgrad(wn_t *P, int T, int64_t nchunk, int share, const float *gy, float *dw) {
    const int64_t C = P->C, K = P->K, nt = P->nt, KC = K * C;
    const int64_t ubytes = 16 * KC * 4, vbytes = 16 * C * nt * 4, mbytes = 16 * K * nt * 4;
    const int64_t so = in_floats(P), sbytes = (so + 4 * nt) * 4;
    const int nacc = share ? 1 : T;
    float *acc[64] = {0}, *Vs = NULL, *Ms = NULL;
    int started[64] = {0}, rc = FM_OK;
    for (int t = 0; t < nacc; t++)
        if (!(acc[t] = (float *)fm_alloc(ubytes))) rc = FM_ERR_NOMEM;
    if (share && (!(Vs = (float *)fm_alloc(vbytes)) || !(Ms = (float *)fm_alloc(mbytes))))
        rc = FM_ERR_NOMEM;
    if (!rc) {
#pragma omp parallel num_threads(T) if (T > 1)
        {
            const int tn = omp_get_num_threads(), ti = omp_get_thread_num();
            float *V = share ? Vs : (float *)fm_alloc(vbytes);
            float *M = share ? Ms : (float *)fm_alloc(mbytes);
            float *sc = (float *)fm_alloc(sbytes);
            if (!V || !M || !sc) __atomic_store_n(&rc, FM_ERR_NOMEM, __ATOMIC_RELAXED);
#pragma omp barrier
            if (share) {
                const int64_t c0 = C * ti / tn, c1 = C * (ti + 1) / tn;
                const int64_t k0 = K * ti / tn, k1 = K * (ti + 1) / tn;
                for (int64_t q = 0; q < nchunk; q++) {
                    const int64_t t0 = q * nt, t1 = t0 + nt < P->ntiles ? t0 + nt : P->ntiles;
                    const int ok = !__atomic_load_n(&rc, __ATOMIC_RELAXED);
                    if (ok) {
                        in_chunk(P, t0, t1, c0, c1, V, sc);
                        gout_chunk(P, gy, t0, t1, k0, k1, M, sc + so, sc + so + 2 * nt);
                    }
#pragma omp barrier
                    for (int xi = 0; xi < 16 && ok && k1 > k0; xi++) {
                        int r = fm_sgemm(k1 - k0, C, t1 - t0, 1.0,
                                         (intptr_t)(M + (xi * K + k0) * nt), nt, 1,
                                         (intptr_t)(V + xi * C * nt), 1, nt, q ? 1.0 : 0.0,
                                         (intptr_t)(acc[0] + xi * KC + k0 * C), C, 1);
                        if (r) __atomic_store_n(&rc, r, __ATOMIC_RELAXED);
                    }
#pragma omp barrier
                }
            } else {
                for (int64_t q = ti; q < nchunk && V && M && sc; q += tn) {
                    if (__atomic_load_n(&rc, __ATOMIC_RELAXED)) break;
                    const int64_t t0 = q * nt, t1 = t0 + nt < P->ntiles ? t0 + nt : P->ntiles;
                    in_chunk(P, t0, t1, 0, C, V, sc);
                    gout_chunk(P, gy, t0, t1, 0, K, M, sc + so, sc + so + 2 * nt);
                    for (int xi = 0; xi < 16; xi++) {
                        int r = fm_sgemm(K, C, t1 - t0, 1.0, (intptr_t)(M + xi * K * nt), nt, 1,
                                         (intptr_t)(V + xi * C * nt), 1, nt,
                                         started[ti] ? 1.0 : 0.0,
                                         (intptr_t)(acc[ti] + xi * KC), C, 1);
                        if (r) __atomic_store_n(&rc, r, __ATOMIC_RELAXED);
                    }
                    started[ti] = 1;
                }
                if (V) fm_free((intptr_t)V, vbytes);
                if (M) fm_free((intptr_t)M, mbytes);
            }
            if (sc) fm_free((intptr_t)sc, sbytes);
        }
    }
    if (!rc) {
        if (share) started[0] = 1;
        float *s = acc[0];
        if (!started[0]) memset(s, 0, ubytes);
        for (int t = 1; t < nacc; t++)
            if (started[t])
                for (int64_t i = 0; i < 16 * KC; i++) s[i] += acc[t][i];
        wt_back(P, s, 0, K, dw);
    }
    for (int t = 0; t < nacc; t++)
        if (acc[t]) fm_free((intptr_t)acc[t], ubytes);
    if (Vs) fm_free((intptr_t)Vs, vbytes);
    if (Ms) fm_free((intptr_t)Ms, mbytes);
    return rc;
}

/* Returns -1 when the call is not for this path (fm_conv goes on with im2col), else a status.
   B, S, K, st, pd, dl: the 3-D geometry of fm_conv (leading dims 1 for 2-D) */
int fm__conv_winograd(int mode, int dt, int nd, int64_t n, int64_t cb, int64_t cs,
                      int64_t groups, const int64_t *B, const int64_t *S, const int64_t *K,
                      const int64_t *st, const int64_t *pd, const int64_t *dl, const char *a,
                      const char *b, const char *bias, char *out) {
    if (!wino_on || dt != FM_FLOAT32 || nd != 2 || groups != 1 || n < 1 || !fm_sgemm_available())
        return -1;
    if (mode != FM_CONV_FWD && mode != FM_CONV_BWD_DATA && mode != FM_CONV_BWD_WEIGHT) return -1;
    for (int i = 1; i < 3; i++)
        if (K[i] != 3 || st[i] != 1 || dl[i] != 1 || pd[i] > 2) return -1;
    wn_t P;
    memset(&P, 0, sizeof(P));
    const int fwd = mode != FM_CONV_BWD_DATA; /* BWD_WEIGHT: the forward's geometry */
    P.N = n, P.C = fwd ? cb : cs, P.K = fwd ? cs : cb;
    P.H = fwd ? B[1] : S[1], P.W = fwd ? B[2] : S[2];
    P.OH = fwd ? S[1] : B[1], P.OW = fwd ? S[2] : B[2];
    P.ph = fwd ? pd[1] : 2 - pd[1], P.pw = fwd ? pd[2] : 2 - pd[2];
    P.TH = (P.OH + 1) / 2, P.TW = (P.OW + 1) / 2, P.ntiles = n * P.TH * P.TW;
    /* Worth it only where it saves enough multiplies. Few input channels: the input transform
       costs more than the multiplies it saves (3 -> 64 ran 2.9x slower, 8 -> 32 1.2x; 32 -> 8
       was 0.6x). Few tiles (small images, small batch): building U, 16 values per weight pair,
       and the transforms cost about as much as 16 tiles' multiplies while U fits in L2, 40 once
       it does not (measured at batch 1..64, 2x2 to 224x224 images, 16 to 512 channels). */
    const int64_t saved = 9 * n * P.OH * P.OW - 16 * P.ntiles; /* per weight pair */
    const int64_t ucost = 64 * P.K * P.C <= ((int64_t)1 << 20) ? 16 : 40;
    if (wino_on == 1 && (P.C < 16 || P.K < 8 || saved < 16 * ucost)) return -1;
    P.x = (const float *)a, P.y = (float *)out, P.bias = (const float *)bias;
    /* U[xi] keeps the weight's order, so the transform reads it straight: FWD w (K, C, 3, 3)
       gives U[xi] K x C; BWD_DATA w (C, K, 3, 3) (taps flipped) gives C x K, read transposed */
    P.uam = fwd ? P.C : 1, P.uak = fwd ? 1 : P.K;
    const int64_t no = fwd ? P.K : P.C, ni = fwd ? P.C : P.K;
    const int64_t ubytes = 16 * P.K * P.C * 4;
    const double work = 2.0 * 16 * (double)P.K * P.C * P.ntiles;
    int T = fm_par_threads(work, 4e6);
    if (T > 64) T = 64;
    /* chunk: 128 tiles (measured best of 64..512 on ResNet's layers: V, 16 x C x 128 values,
       stays in L2 up to 128 channels), more for many output channels (every chunk's products
       read all of U again) */
    int64_t nt = (P.K / 2 + 31) / 32 * 32;
    if (nt < 128) nt = 128;
    if (wino_tiles > 0) nt = wino_tiles;
    if (nt > P.ntiles) nt = P.ntiles;
    /* many chunks: each thread takes whole chunks (no synchronisation); few: the threads share
       every chunk, input channels for the input transform, output channels for the rest */
    int64_t nchunk = (P.ntiles + nt - 1) / nt;
    const int share = T > 1 && nchunk < 4 * T;
    P.nt = nt;
    if (mode == FM_CONV_BWD_WEIGHT)
        return wino_wgrad(&P, T, nchunk, share, (const float *)b, (float *)out);
    P.U = (float *)fm_alloc(ubytes);
    if (!P.U) return FM_ERR_NOMEM;
    const int64_t vbytes = 16 * P.C * nt * 4, mbytes = 16 * P.K * nt * 4;
    const int64_t so = in_floats(&P); /* the output rows follow the input transform's */
    const int64_t sbytes = (so + 4 * nt) * 4;
    float *Vs = share ? (float *)fm_alloc(vbytes) : NULL;
    float *Ms = share ? (float *)fm_alloc(mbytes) : NULL;
    int rc = share && (!Vs || !Ms) ? FM_ERR_NOMEM : FM_OK;
#pragma omp parallel num_threads(T) if (T > 1)
    {
        const int tn = omp_get_num_threads(), ti = omp_get_thread_num();
        for (int64_t o = no * ti / tn; o < no * (ti + 1) / tn; o++)
            wt_rows((const float *)b + o * ni * 9, ni, !fwd, P.U + o * ni, P.K * P.C);
        float *V = share ? Vs : (float *)fm_alloc(vbytes);
        float *M = share ? Ms : (float *)fm_alloc(mbytes);
        float *sc = (float *)fm_alloc(sbytes);
        if (!V || !M || !sc) __atomic_store_n(&rc, FM_ERR_NOMEM, __ATOMIC_RELAXED);
#pragma omp barrier
        if (share) {
            const int64_t c0 = P.C * ti / tn, c1 = P.C * (ti + 1) / tn;
            const int64_t k0 = P.K * ti / tn, k1 = P.K * (ti + 1) / tn;
            for (int64_t q = 0; q < nchunk; q++) {
                const int64_t t0 = q * nt, t1 = t0 + nt < P.ntiles ? t0 + nt : P.ntiles;
                /* every thread passes every barrier, also after a failure */
                const int ok = !__atomic_load_n(&rc, __ATOMIC_RELAXED);
                if (ok) in_chunk(&P, t0, t1, c0, c1, V, sc);
#pragma omp barrier
                int r = ok ? gemm_chunk(&P, t1 - t0, k0, k1, V, M) : FM_OK;
                if (r) __atomic_store_n(&rc, r, __ATOMIC_RELAXED);
                if (ok && !r) out_chunk(&P, t0, t1, k0, k1, M, sc + so, sc + so + 2 * nt);
#pragma omp barrier
            }
        } else {
            for (int64_t q = ti; q < nchunk && V && M && sc; q += tn) {
                if (__atomic_load_n(&rc, __ATOMIC_RELAXED)) break;
                const int64_t t0 = q * nt, t1 = t0 + nt < P.ntiles ? t0 + nt : P.ntiles;
                in_chunk(&P, t0, t1, 0, P.C, V, sc);
                int r = gemm_chunk(&P, t1 - t0, 0, P.K, V, M);
                if (r) __atomic_store_n(&rc, r, __ATOMIC_RELAXED);
                else out_chunk(&P, t0, t1, 0, P.K, M, sc + so, sc + so + 2 * nt);
            }
            if (V) fm_free((intptr_t)V, vbytes);
            if (M) fm_free((intptr_t)M, mbytes);
        }
        if (sc) fm_free((intptr_t)sc, sbytes);
    }
    if (Vs) fm_free((intptr_t)Vs, vbytes);
    if (Ms) fm_free((intptr_t)Ms, mbytes);
    fm_free((intptr_t)P.U, ubytes);
    return rc;
}

#else /* not x86-64 GCC/Clang: no fm_sgemm, so im2col does everything */

int fm__conv_winograd(int mode, int dt, int nd, int64_t n, int64_t cb, int64_t cs,
                      int64_t groups, const int64_t *B, const int64_t *S, const int64_t *K,
                      const int64_t *st, const int64_t *pd, const int64_t *dl, const char *a,
                      const char *b, const char *bias, char *out) {
    (void)mode, (void)dt, (void)nd, (void)n, (void)cb, (void)cs, (void)groups, (void)B, (void)S;
    (void)K, (void)st, (void)pd, (void)dl, (void)a, (void)b, (void)bias, (void)out;
    return -1;
}
#endif
