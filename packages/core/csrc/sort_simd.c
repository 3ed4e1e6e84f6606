/* Sorting bare 32-bit keys with AVX-512 (sort_simd.h): the values-only sort of long lanes
 * (msort), where no index has to travel with the keys.
 *
 * A quicksort whose partition step handles 16 keys per instruction: each vector is compared with
 * the pivot, and the keys below it are compressed to the left end of the array (in place: the
 * write position never passes the read position) while the others are compressed into scratch
 * and copied back after the pass. Pieces of up to 128 keys are sorted in registers by a bitonic
 * network (up to 8 vectors: every vector sorted, then sorted runs merged pairwise). The pivot is
 * the median of 16 evenly spaced samples; a pivot equal to the smallest key splits off the run
 * of keys equal to it instead, so many equal keys cost no extra passes, and too many unbalanced
 * splits (adversarial input) hand the piece to an LSD radix sort. Large pieces become OpenMP
 * tasks, so two threads share the work once the first partitions are done.
 */
#include <string.h>
#include <omp.h>

#include "fiamma.h"
#include "api_matmul.h"
#include "sort_simd.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,popcnt")))
#define INL static inline __attribute__((always_inline)) AVX512
#define SMALL 128           /* pieces of up to this many keys: the in-register network */
#define TASK_MIN (1 << 15)  /* pieces from this size become tasks */

static const int32_t REV_IDX[16] = {15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0};

/* the lanes in the order lane ^ j, j = 1 << (lg - 1): in-lane and 128-bit-block shuffles, no
   index vectors */
INL __m512i swap_lanes(__m512i v, const int lg) {
    switch (lg) {
    case 1: return _mm512_shuffle_epi32(v, _MM_PERM_CDAB);
    case 2: return _mm512_shuffle_epi32(v, _MM_PERM_BADC);
    case 3: return _mm512_shuffle_i32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1));
    default: return _mm512_shuffle_i32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2));
    }
}

/* one compare-exchange stage: every lane meets lane ^ j; lanes in `hi` keep the larger key */
INL __m512i cx(__m512i v, const int lg, __mmask16 hi) {
    __m512i p = swap_lanes(v, lg);
    return _mm512_mask_mov_epi32(_mm512_min_epu32(v, p), hi, _mm512_max_epu32(v, p));
}

/* bitonic sort of the 16 lanes (masks: lane i keeps the max where bit j of i differs from bit k
   of i, k the size of the blocks being sorted, j the distance compared) */
INL __m512i sort16(__m512i v) {
    v = cx(v, 1, 0x6666);
    v = cx(v, 2, 0x3c3c);
    v = cx(v, 1, 0x5a5a);
    v = cx(v, 3, 0x0ff0);
    v = cx(v, 2, 0x33cc);
    v = cx(v, 1, 0x55aa);
    v = cx(v, 4, 0xff00);
    v = cx(v, 3, 0xf0f0);
    v = cx(v, 2, 0xcccc);
    v = cx(v, 1, 0xaaaa);
    return v;
}

/* a bitonic vector into ascending order */
INL __m512i merge16(__m512i v) {
    v = cx(v, 4, 0xff00);
    v = cx(v, 3, 0xf0f0);
    v = cx(v, 2, 0xcccc);
    v = cx(v, 1, 0xaaaa);
    return v;
}

/* N (a power of two up to 8) vectors sorted as one sequence of 16 N keys */
INL void sort_vectors(__m512i *v, const int N) {
    const __m512i rev = _mm512_loadu_si512(REV_IDX);
#pragma GCC unroll 8
    for (int i = 0; i < N; i++) v[i] = sort16(v[i]);
#pragma GCC unroll 4
    for (int w = 1; w < N; w *= 2) {       /* sorted runs of w vectors, merged in pairs */
#pragma GCC unroll 4
        for (int b = 0; b < N; b += 2 * w) {
            __m512i lo[8], hi[8];
#pragma GCC unroll 4
            for (int i = 0; i < w; i++) { /* the first run against the second one reversed */
                __m512i x = v[b + i], y = _mm512_permutexvar_epi32(rev, v[b + 2 * w - 1 - i]);
                lo[i] = _mm512_min_epu32(x, y);
                hi[i] = _mm512_max_epu32(x, y);
            }
#pragma GCC unroll 4
            for (int i = 0; i < w; i++) {
                v[b + i] = lo[i];
                v[b + w + i] = hi[i];
            }
#pragma GCC unroll 4
            for (int s = w / 2; s >= 1; s /= 2) /* each half is bitonic: merge it */
#pragma GCC unroll 4
                for (int j = b; j < b + 2 * w; j += 2 * s)
#pragma GCC unroll 4
                    for (int t = 0; t < s; t++) {
                        __m512i x = v[j + t], y = v[j + t + s];
                        v[j + t] = _mm512_min_epu32(x, y);
                        v[j + t + s] = _mm512_max_epu32(x, y);
                    }
#pragma GCC unroll 8
            for (int i = 0; i < 2 * w; i++) v[b + i] = merge16(v[b + i]);
        }
    }
}

static AVX512 void small_sort(uint32_t *a, int64_t n) {
    if (n < 2) return;
    __m512i v[8];
    const __m512i top = _mm512_set1_epi32(-1); /* padding sorts last */
    int nv = (int)((n + 15) / 16), N = nv <= 1 ? 1 : nv <= 2 ? 2 : nv <= 4 ? 4 : 8;
    for (int i = 0; i < N; i++) {
        int64_t valid = n - 16 * (int64_t)i;
        __mmask16 m = valid >= 16 ? 0xFFFF : valid <= 0 ? 0 : (__mmask16)((1u << valid) - 1);
        v[i] = _mm512_mask_loadu_epi32(top, m, a + 16 * i);
    }
    switch (N) {
    case 1: sort_vectors(v, 1); break;
    case 2: sort_vectors(v, 2); break;
    case 4: sort_vectors(v, 4); break;
    default: sort_vectors(v, 8); break;
    }
    for (int i = 0; i < nv; i++) {
        int64_t valid = n - 16 * (int64_t)i;
        __mmask16 m = valid >= 16 ? 0xFFFF : (__mmask16)((1u << valid) - 1);
        _mm512_mask_storeu_epi32(a + 16 * i, m, v[i]);
    }
}

/* keys < pivot (le: <= pivot) to the front, the others to the back, in place; returns the
   count of the front part. The first and last vectors are held in registers, which leaves 16
   free slots; each step reads the next vector from whichever end has less free room left, so
   the compressed writes at the two ends never reach keys not yet read. */
INL __mmask16 below(__m512i v, __m512i pv, int le) {
    return le ? _mm512_cmple_epu32_mask(v, pv) : _mm512_cmplt_epu32_mask(v, pv);
}

INL void put(uint32_t *a, int64_t *l, int64_t *r, __m512i v, __mmask16 m) {
    int c = __builtin_popcount((unsigned)m);
    _mm512_mask_compressstoreu_epi32(a + *l, m, v);
    *l += c;
    *r -= 16 - c;
    _mm512_mask_compressstoreu_epi32(a + *r, (__mmask16)~m, v);
}

#define PU 4 /* vectors read per step at one end */
static AVX512 int64_t partition(uint32_t *a, int64_t n, uint32_t pivot, int le) {
    const __m512i pv = _mm512_set1_epi32((int)pivot);
    /* a head that is not a whole number of vectors: partitioned by swaps first */
    int64_t h = n & 15, l = 0;
    for (int64_t i = 0; i < h; i++) {
        uint32_t x = a[i];
        if (le ? x <= pivot : x < pivot) {
            a[i] = a[l];
            a[l++] = x;
        }
    }
    /* a[l..h) hold back-part keys: kept aside, they go into the gap between the parts at the
       end, and their slots are free for the front part's writes */
    int64_t nb = h - l;
    uint32_t spill[16];
    memcpy(spill, a + l, (size_t)nb * sizeof(uint32_t));
    /* the vector part a[h..n) (a multiple of 16 keys, at least 128): PU vectors from each end
       held in registers leave 16 PU free slots at each end */
    __m512i hl[PU], hr[PU];
    for (int u = 0; u < PU; u++) {
        hl[u] = _mm512_loadu_si512(a + h + 16 * u);
        hr[u] = _mm512_loadu_si512(a + n - 16 * (PU - u));
    }
    int64_t rl = h + 16 * PU, rr = n - 16 * PU; /* unread: [rl, rr) */
    int64_t wl = l, wr = n;                     /* front part grows up, back part down */
    while (rr - rl >= 16 * PU) {
        /* read PU vectors at the end with less free room (both keep >= 16 PU after it) */
        __m512i v[PU];
        if (rl - wl <= wr - rr) {
            for (int u = 0; u < PU; u++) v[u] = _mm512_loadu_si512(a + rl + 16 * u);
            rl += 16 * PU;
        } else {
            rr -= 16 * PU;
            for (int u = 0; u < PU; u++) v[u] = _mm512_loadu_si512(a + rr + 16 * u);
        }
        for (int u = 0; u < PU; u++) put(a, &wl, &wr, v[u], below(v[u], pv, le));
    }
    while (rl < rr) {
        __m512i v;
        if (rl - wl <= wr - rr) {
            v = _mm512_loadu_si512(a + rl);
            rl += 16;
        } else {
            rr -= 16;
            v = _mm512_loadu_si512(a + rr);
        }
        put(a, &wl, &wr, v, below(v, pv, le));
    }
    for (int u = 0; u < PU; u++) {
        put(a, &wl, &wr, hl[u], below(hl[u], pv, le));
        put(a, &wl, &wr, hr[u], below(hr[u], pv, le));
    }
    memcpy(a + wl, spill, (size_t)nb * sizeof(uint32_t));
    return wl;
}

static AVX512 uint32_t pick_pivot(const uint32_t *a, int64_t n) {
    uint32_t s[16];
    int64_t step = n / 16;
    for (int i = 0; i < 16; i++) s[i] = a[i * step + step / 2];
    __m512i v = sort16(_mm512_loadu_si512(s));
    _mm512_storeu_si512(s, v);
    return s[8];
}

/* the fallback for pieces whose pivots kept missing: LSD radix, 8-bit digits, through tmp */
static void radix_u32(uint32_t *a, int64_t n, uint32_t *tmp) {
    uint32_t cnt[4][256];
    memset(cnt, 0, sizeof cnt);
    for (int64_t i = 0; i < n; i++)
        for (int p = 0; p < 4; p++) cnt[p][(a[i] >> 8 * p) & 255]++;
    uint32_t *src = a, *dst = tmp;
    for (int p = 0; p < 4; p++) {
        uint32_t sum = 0;
        for (int d = 0; d < 256; d++) {
            uint32_t t = cnt[p][d];
            cnt[p][d] = sum;
            sum += t;
        }
        for (int64_t i = 0; i < n; i++) dst[cnt[p][(src[i] >> 8 * p) & 255]++] = src[i];
        uint32_t *t = src;
        src = dst;
        dst = t;
    }
    /* four passes: the result is back in a */
}

static AVX512 void qs(uint32_t *a, int64_t n, uint32_t *tmp, int depth, int par) {
    while (n > SMALL) {
        if (depth-- <= 0) {
            radix_u32(a, n, tmp);
            return;
        }
        uint32_t p = pick_pivot(a, n);
        int64_t k = partition(a, n, p, 0);
        if (k == 0) { /* p is the smallest key: its run is in place, sort what is above it */
            k = partition(a, n, p, 1);
            a += k, tmp += k, n -= k;
            continue;
        }
        /* the smaller side separately (a task if big), the larger one in this loop */
        uint32_t *sa = a, *st = tmp;
        int64_t sn = k;
        if (k <= n - k) {
            a += k, tmp += k, n -= k;
        } else {
            sa = a + k, st = tmp + k, sn = n - k;
            n = k;
        }
        if (par && sn >= TASK_MIN) {
#pragma omp task firstprivate(sa, st, sn, depth)
            qs(sa, sn, st, depth, 1);
        } else {
            qs(sa, sn, st, depth, par);
        }
    }
    small_sort(a, n);
}

/* the same AVX-512 subsets as the sgemm kernel (F, VL, DQ, BW): one CPU check for both */
int fm_sort_u32_available(void) { return fm_sgemm_available(); }

int fm_sort_u32(uint32_t *a, int64_t n, int nthreads) {
    if (!fm_sort_u32_available()) return FM_ERR_OP;
    if (n < 2) return FM_OK;
    uint32_t *tmp = (uint32_t *)fm_alloc(n * (int64_t)sizeof(uint32_t));
    if (!tmp) return FM_ERR_NOMEM;
    int depth = 8;
    for (int64_t m = n; m > 1; m >>= 1) depth += 2; /* 2 log2(n) + 8 splits before radix */
    if (nthreads > 1 && n >= 2 * TASK_MIN) {
#pragma omp parallel num_threads(nthreads)
#pragma omp single nowait
        qs(a, n, tmp, depth, 1);
    } else {
        qs(a, n, tmp, depth, 0);
    }
    fm_free((intptr_t)tmp, n * (int64_t)sizeof(uint32_t));
    return FM_OK;
}

#else /* not x86-64 GCC/Clang: the radix paths in sort.c do everything */

int fm_sort_u32_available(void) { return 0; }

int fm_sort_u32(uint32_t *a, int64_t n, int nthreads) {
    (void)a, (void)n, (void)nthreads;
    return FM_ERR_OP;
}
#endif
