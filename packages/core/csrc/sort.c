/* Sorting and searching: sort, topk, k-th value / median / mode, cummax / cummin, searchsorted,
 * the run detection behind unique.
 *
 * Every element is mapped to an order-preserving unsigned key (floats: sign-flipped bits, with
 * -0.0 folded onto 0.0 and every NaN onto the largest key, so NaN sorts last like PyTorch and the
 * sort needs no float compares). Keys of dtypes up to 32 bits are packed with the element's lane
 * index into one uint64 (key << 32 | index): sorting those words by their key bits with a stable
 * LSD radix sort gives the stable order, and the index rides along for free. 64-bit dtypes sort
 * (key, index) pairs held in two arrays.
 *
 * A long lane (>= SORT_BIG elements) is sorted most-significant digit first: one pass scatters
 * the words into buckets by their top 11 key bits (all threads, each its slice), then each bucket
 * is small enough to be radix-sorted in cache and written out right away (buckets handed to
 * threads dynamically). Shorter lanes are sorted one per thread.
 * Lanes not contiguous in memory are copied to a buffer first; results are written with the
 * outputs' own strides.
 */
#include <pthread.h>
#include <stdlib.h>
#include <omp.h>

#include "dtypes.h"
#include "api_sort.h"
#include "sort_simd.h"

#define SORT_INSERTION 40        /* up to this length: no radix passes (64-bit keys: insertion) */
#define SORT_RANK 40             /* packed words of 9 up to this: rank sort, fewer: insertion */
#define SORT_BIG (1 << 16)       /* lanes from this length: MSD first pass, threads in the lane */
#define SORT_PAR_MIN (1 << 15)   /* elements in all: below this, never use threads */
#define TOPK_BS 32               /* topk: block size of the block maxima */
#define TOPK_SMALL 64            /* topk by a running threshold for k up to this (and n >= 4k) */

/* libgomp's thread pool does not survive fork(): a forked child runs single-threaded */
static volatile int sort_forked = 0;
static void sort_mark_forked(void) { sort_forked = 1; }
__attribute__((constructor)) static void sort_register_atfork(void) {
    pthread_atfork(NULL, NULL, sort_mark_forked);
}

static int sort_threads(int64_t work, int64_t tasks) {
    if (work < SORT_PAR_MIN || tasks < 2 || sort_forked) return 1;
    int n = omp_get_max_threads();
    if (n > tasks) n = (int)tasks;
    return n > 1 ? n : 1;
}

/* ---- keys ------------------------------------------------------------------------------------ */

static inline uint32_t key_b(const void *p) { return *(const uint8_t *)p; }
static inline uint32_t key_u8(const void *p) { return *(const uint8_t *)p; }
static inline uint32_t key_i8(const void *p) { return (uint8_t)*(const int8_t *)p ^ 0x80u; }
static inline uint32_t key_i16(const void *p) { return (uint16_t)*(const int16_t *)p ^ 0x8000u; }
static inline uint32_t key_i32(const void *p) {
    return (uint32_t)*(const int32_t *)p ^ 0x80000000u;
}
static inline uint64_t key_i64(const void *p) {
    return (uint64_t)*(const int64_t *)p ^ 0x8000000000000000ull;
}
static inline uint32_t key_u16(const void *p) { return *(const uint16_t *)p; }
static inline uint32_t key_u32(const void *p) { return *(const uint32_t *)p; }
static inline uint64_t key_u64(const void *p) { return *(const uint64_t *)p; }
/* floats, branch-free so the key loops vectorise */
static inline uint32_t key_f16(const void *p) {
    uint32_t u = *(const uint16_t *)p;
    u = u == 0x8000u ? 0u : u;
    uint32_t k = u ^ ((u >> 15) ? 0xffffu : 0x8000u);
    return (u & 0x7fffu) > 0x7c00u ? 0xffffu : k;
}
static inline uint32_t key_bf16(const void *p) {
    uint32_t u = *(const uint16_t *)p;
    u = u == 0x8000u ? 0u : u;
    uint32_t k = u ^ ((u >> 15) ? 0xffffu : 0x8000u);
    return (u & 0x7fffu) > 0x7f80u ? 0xffffu : k;
}
static inline uint32_t key_f32(const void *p) {
    uint32_t u = *(const uint32_t *)p;
    u = u == 0x80000000u ? 0u : u;
    uint32_t k = u ^ ((uint32_t)((int32_t)u >> 31) | 0x80000000u);
    return (u & 0x7fffffffu) > 0x7f800000u ? 0xffffffffu : k;
}
static inline uint64_t key_f64(const void *p) {
    uint64_t u = *(const uint64_t *)p;
    u = u == 0x8000000000000000ull ? 0u : u;
    uint64_t k = u ^ ((uint64_t)((int64_t)u >> 63) | 0x8000000000000000ull);
    return (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull ? ~0ull : k;
}

static const int key_bits[FM_NDTYPES] = {8, 8, 8, 16, 32, 64, 16, 16, 32, 64, 0, 0, 16, 32, 64};

/* the key NaN maps to (floats), or 0 (no NaN in the dtype) */
static uint64_t nan_key(int dt) {
    if (!fm_is_float(dt)) return 0;
    return key_bits[dt] == 64 ? ~0ull : ((1ull << key_bits[dt]) - 1);
}

static uint64_t key_at(int dt, const char *p) {
    switch (dt) {
    case FM_BOOL: return key_b(p);
    case FM_UINT8: return key_u8(p);
    case FM_INT8: return key_i8(p);
    case FM_INT16: return key_i16(p);
    case FM_INT32: return key_i32(p);
    case FM_INT64: return key_i64(p);
    case FM_FLOAT16: return key_f16(p);
    case FM_BFLOAT16: return key_bf16(p);
    case FM_FLOAT32: return key_f32(p);
    case FM_UINT16: return key_u16(p);
    case FM_UINT32: return key_u32(p);
    case FM_UINT64: return key_u64(p);
    default: return key_f64(p);
    }
}

/* words[i] = (key ^ xm) << 32 | (i + off) for the dtypes of up to 32 bits; returns whether the
   keys lost information (a -0.0 or a NaN: values must then be read back from the input) */
typedef int (*pack_fn)(const char *src, int64_t n, uint32_t xm, uint64_t *w, int64_t off);
#define LOSSY_INT(p) 0
#define LOSSY_F16(p) ((*(const uint16_t *)(p) == 0x8000u) | ((*(const uint16_t *)(p) & 0x7fffu) > 0x7c00u))
#define LOSSY_BF16(p) ((*(const uint16_t *)(p) == 0x8000u) | ((*(const uint16_t *)(p) & 0x7fffu) > 0x7f80u))
#define LOSSY_F32(p) ((*(const uint32_t *)(p) == 0x80000000u) | ((*(const uint32_t *)(p) & 0x7fffffffu) > 0x7f800000u))
#define DEF_PACK(tag, LOSSY)                                                                    \
    static FM_CLONES int pack_##tag(const char *FM_RESTRICT src, int64_t n, uint32_t xm,        \
                                    uint64_t *FM_RESTRICT w, int64_t off) {                     \
        const ct_##tag *x = (const ct_##tag *)src;                                              \
        int lossy = 0;                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                       \
            w[i] = (uint64_t)(key_##tag(x + i) ^ xm) << 32 | (uint64_t)(i + off);               \
            lossy |= LOSSY(x + i);                                                              \
        }                                                                                       \
        return lossy;                                                                           \
    }
DEF_PACK(b, LOSSY_INT)
DEF_PACK(u8, LOSSY_INT)
DEF_PACK(i8, LOSSY_INT)
DEF_PACK(i16, LOSSY_INT)
DEF_PACK(i32, LOSSY_INT)
DEF_PACK(f16, LOSSY_F16)
DEF_PACK(bf16, LOSSY_BF16)
DEF_PACK(f32, LOSSY_F32)
DEF_PACK(u16, LOSSY_INT)
DEF_PACK(u32, LOSSY_INT)
static const pack_fn pack_table[FM_NDTYPES] = {pack_b, pack_u8, pack_i8, pack_i16, pack_i32, NULL,
                                               pack_f16, pack_bf16, pack_f32, NULL,
                                               [FM_UINT16] = pack_u16, [FM_UINT32] = pack_u32};

/* the inverse of the key maps (exact where pack reported no loss): values straight from the
   sorted words, without reading the input again at random places */
#define INV_b(k) ((uint8_t)(k))
#define INV_u8(k) ((uint8_t)(k))
#define INV_i8(k) ((uint8_t)((k) ^ 0x80u))
#define INV_i16(k) ((uint16_t)((k) ^ 0x8000u))
#define INV_i32(k) ((uint32_t)((k) ^ 0x80000000u))
#define INV_f16(k) ((uint16_t)(((k) & 0x8000u) ? (k) ^ 0x8000u : ~(k)))
#define INV_bf16(k) INV_f16(k)
#define INV_u16(k) ((uint16_t)(k))
#define INV_u32(k) ((uint32_t)(k))
#define INV_f32(k) ((uint32_t)(((k) & 0x80000000u) ? (k) ^ 0x80000000u : ~(k)))
typedef void (*unpack_fn)(const uint64_t *w, int64_t cnt, uint32_t xm, uint32_t kadd, char *vo,
                          int64_t vs);
#define DEF_UNPACK(tag, T)                                                                      \
    static FM_CLONES void unpack_##tag(const uint64_t *w, int64_t cnt, uint32_t xm,             \
                                       uint32_t kadd, char *vo, int64_t vs) {                   \
        if (vs == (int64_t)sizeof(T)) {                                                         \
            T *o = (T *)vo;                                                                     \
            for (int64_t j = 0; j < cnt; j++) {                                                 \
                uint32_t k = ((uint32_t)(w[j] >> 32) + kadd) ^ xm;                              \
                o[j] = (T)INV_##tag(k);                                                         \
            }                                                                                   \
        } else {                                                                                \
            for (int64_t j = 0; j < cnt; j++) {                                                 \
                uint32_t k = ((uint32_t)(w[j] >> 32) + kadd) ^ xm;                              \
                *(T *)(vo + j * vs) = (T)INV_##tag(k);                                          \
            }                                                                                   \
        }                                                                                       \
    }
DEF_UNPACK(b, uint8_t)
DEF_UNPACK(u8, uint8_t)
DEF_UNPACK(i8, uint8_t)
DEF_UNPACK(i16, uint16_t)
DEF_UNPACK(i32, uint32_t)
DEF_UNPACK(f16, uint16_t)
DEF_UNPACK(bf16, uint16_t)
DEF_UNPACK(f32, uint32_t)
DEF_UNPACK(u16, uint16_t)
DEF_UNPACK(u32, uint32_t)
static const unpack_fn unpack_table[FM_NDTYPES] = {unpack_b, unpack_u8, unpack_i8, unpack_i16,
                                                   unpack_i32, NULL, unpack_f16, unpack_bf16,
                                                   unpack_f32, NULL, [FM_UINT16] = unpack_u16,
                                                   [FM_UINT32] = unpack_u32};

/* ---- radix sorts ------------------------------------------------------------------------------ */

/* Stable sort of packed words by bits [32, 32 + kb); a and b hold n words; the result is in the
   returned one of the two. */
/* Small arrays of distinct words: each word's rank is the number of smaller ones (branch-free
   compares that vectorise, unlike insertion sort's unpredictable branches); result in b. */
static FM_CLONES void rank_sort(const uint64_t *a, uint64_t *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint64_t v = a[i];
        int64_t r = 0;
        for (int64_t j = 0; j < n; j++) r += a[j] < v;
        b[r] = v;
    }
}

static uint64_t *radix_packed(uint64_t *a, uint64_t *b, int64_t n, int kb) {
    if (n <= SORT_RANK && n > 8) {
        rank_sort(a, b, n);
        return b;
    }
    if (n <= SORT_INSERTION) {
        for (int64_t i = 1; i < n; i++) { /* whole words: the index breaks ties */
            uint64_t v = a[i];
            int64_t j = i;
            while (j > 0 && a[j - 1] > v) {
                a[j] = a[j - 1];
                j--;
            }
            a[j] = v;
        }
        return a;
    }
    /* 8-bit digits at most: 256 output streams per pass stay in L1 (11-bit digits, one pass
       fewer, measured no faster here) */
    int passes = (kb + 7) / 8;
    int D = (kb + passes - 1) / passes;
    uint32_t mask = (1u << D) - 1;
    uint32_t cnt[4][256];
    memset(cnt, 0, sizeof cnt[0] * (size_t)passes);
    if (passes == 3) {
        for (int64_t i = 0; i < n; i++) {
            uint32_t k = (uint32_t)(a[i] >> 32);
            cnt[0][k & mask]++;
            cnt[1][(k >> D) & mask]++;
            cnt[2][(k >> 2 * D) & mask]++;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            uint32_t k = (uint32_t)(a[i] >> 32);
            for (int p = 0; p < passes; p++) cnt[p][(k >> p * D) & mask]++;
        }
    }
    uint64_t *src = a, *dst = b;
    for (int p = 0; p < passes; p++) {
        uint32_t *c = cnt[p];
        int sh = 32 + p * D;
        if (c[(src[0] >> sh) & mask] == (uint32_t)n) continue; /* one digit value: nothing to do */
        uint32_t sum = 0;
        for (uint32_t j = 0; j <= mask; j++) {
            uint32_t t = c[j];
            c[j] = sum;
            sum += t;
        }
        for (int64_t i = 0; i < n; i++) {
            uint64_t v = src[i];
            dst[c[(v >> sh) & mask]++] = v;
        }
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    return src;
}

/* Stable sort of (key, index) pairs by the 64-bit key; the result is in (*k, *ix). */
static void radix_kv(uint64_t **k, uint32_t **ix, uint64_t *k2, uint32_t *ix2, int64_t n,
                     uint32_t *cnt /* 8 * 256 */) {
    uint64_t *ka = *k;
    uint32_t *ia = *ix;
    if (n <= SORT_INSERTION) {
        for (int64_t i = 1; i < n; i++) {
            uint64_t v = ka[i];
            uint32_t w = ia[i];
            int64_t j = i;
            while (j > 0 && ka[j - 1] > v) {
                ka[j] = ka[j - 1];
                ia[j] = ia[j - 1];
                j--;
            }
            ka[j] = v;
            ia[j] = w;
        }
        return;
    }
    memset(cnt, 0, 8 * 256 * sizeof(uint32_t));
    for (int64_t i = 0; i < n; i++) {
        uint64_t v = ka[i];
        for (int p = 0; p < 8; p++) cnt[p * 256 + ((v >> 8 * p) & 255)]++;
    }
    uint64_t *kb = k2;
    uint32_t *ib = ix2;
    for (int p = 0; p < 8; p++) {
        uint32_t *c = cnt + p * 256;
        if (c[(ka[0] >> 8 * p) & 255] == (uint32_t)n) continue;
        uint32_t sum = 0;
        for (int j = 0; j < 256; j++) {
            uint32_t t = c[j];
            c[j] = sum;
            sum += t;
        }
        for (int64_t i = 0; i < n; i++) {
            uint64_t v = ka[i];
            uint32_t d = c[(v >> 8 * p) & 255]++;
            kb[d] = v;
            ib[d] = ia[i];
        }
        uint64_t *t = ka;
        ka = kb;
        kb = t;
        uint32_t *u = ia;
        ia = ib;
        ib = u;
    }
    *k = ka;
    *ix = ia;
}

/* ---- one lane ----------------------------------------------------------------------------------
   A sorted lane: either packed words (w) or pairs (k, ix). */
typedef struct {
    const uint64_t *w;
    const uint64_t *k;
    const uint32_t *ix;
    int dt;       /* for the packed words: dtype, */
    int exact;    /* whether the keys map back to the values exactly, */
    uint32_t xm;  /* and the mask the keys were flipped with, */
    uint32_t kadd; /* after the packed keys were lowered by this */
} sorted_t;

static inline uint32_t s_idx(const sorted_t *s, int64_t i) {
    return s->w ? (uint32_t)s->w[i] : s->ix[i];
}
static inline uint64_t s_key(const sorted_t *s, int64_t i) {
    return s->w ? s->w[i] >> 32 : s->k[i];
}

/* scratch for one lane of n elements: 2 * 8n (words or keys) + 2 * 4n (indices) + n * itemsize
   (a copy of a strided lane) */
static size_t scratch_bytes(int64_t n, int isz) {
    return (size_t)n * (16 + 8 + (size_t)isz) + 256;
}

static sorted_t sort_lane(int dt, const char *src, int64_t n, int desc, char *scr) {
    sorted_t s = {NULL, NULL, NULL, dt, 0, 0, 0};
    int kb = key_bits[dt];
    uint64_t *a = (uint64_t *)scr, *b = a + n;
    if (kb <= 32) {
        uint32_t xm = desc ? (uint32_t)((1ull << kb) - 1) : 0u;
        s.exact = !pack_table[dt](src, n, xm, a, 0);
        s.xm = xm;
        s.w = radix_packed(a, b, n, kb);
        return s;
    }
    uint32_t *ia = (uint32_t *)(b + n), *ib = ia + n;
    uint64_t xm = desc ? ~0ull : 0ull;
    for (int64_t i = 0; i < n; i++) {
        a[i] = (dt == FM_INT64    ? key_i64(src + 8 * i)
                : dt == FM_UINT64 ? key_u64(src + 8 * i)
                                  : key_f64(src + 8 * i)) ^ xm;
        ia[i] = (uint32_t)i;
    }
    uint32_t cnt[8 * 256];
    uint64_t *k = a;
    uint32_t *ix = ia;
    radix_kv(&k, &ix, b, ib, n, cnt);
    s.k = k;
    s.ix = ix;
    return s;
}

/* write sorted positions [p0, p0 + cnt): values src[idx] and indices (byte strides) */
static void write_sorted(int isz, const char *src, const sorted_t *s, int64_t s0, int64_t p0,
                         int64_t cnt, char *vo, int64_t vs, char *io, int64_t is) {
    if (io) {
        if (is == 8) {
            int64_t *o = (int64_t *)io + p0;
            if (s->w)
                for (int64_t j = 0; j < cnt; j++) o[j] = (uint32_t)s->w[s0 + j];
            else
                for (int64_t j = 0; j < cnt; j++) o[j] = s->ix[s0 + j];
        } else {
            for (int64_t j = 0; j < cnt; j++) *(int64_t *)(io + (p0 + j) * is) = s_idx(s, s0 + j);
        }
    }
    if (!vo) return;
    char *o = vo + p0 * vs;
    if (s->w && s->exact) {
        unpack_table[s->dt](s->w + s0, cnt, s->xm, s->kadd, o, vs);
        return;
    }
#define GATHER(T)                                                                               \
    for (int64_t j = 0; j < cnt; j++)                                                           \
        *(T *)(o + j * vs) = ((const T *)src)[s_idx(s, s0 + j)];
    switch (isz) {
    case 1: GATHER(uint8_t) break;
    case 2: GATHER(uint16_t) break;
    case 4: GATHER(uint32_t) break;
    default: GATHER(uint64_t) break;
    }
#undef GATHER
}

/* ---- lanes --------------------------------------------------------------------------------- */

typedef struct {
    int nd;
    int64_t n, nlanes;
    int64_t sh[FM_MAX_DIMS];
    int64_t st[3][FM_MAX_DIMS]; /* element strides of in, values out, indices out */
    int64_t ls[3];              /* their strides along the lane */
} lanes_t;

static int lanes_init(lanes_t *L, int ndim, const int64_t *shape, const int64_t *s0,
                      const int64_t *s1, const int64_t *s2, int dim) {
    if (ndim < 1 || ndim > FM_MAX_DIMS) return FM_ERR_NDIM;
    if (dim < 0 || dim >= ndim) return FM_ERR_ARG;
    const int64_t *ss[3] = {s0, s1, s2};
    L->nd = 0;
    L->nlanes = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return FM_ERR_ARG;
        if (d == dim) {
            L->n = shape[d];
            for (int k = 0; k < 3; k++) L->ls[k] = ss[k] ? ss[k][d] : 0;
            continue;
        }
        if (shape[d] == 1) continue;
        L->sh[L->nd] = shape[d];
        for (int k = 0; k < 3; k++) L->st[k][L->nd] = ss[k] ? ss[k][d] : 0;
        L->nd++;
        L->nlanes *= shape[d];
    }
    if (L->n > (int64_t)UINT32_MAX) return FM_ERR_ARG;
    return FM_OK;
}

static void lane_seek(const lanes_t *L, int64_t l, int64_t off[3]) {
    off[0] = off[1] = off[2] = 0;
    for (int d = L->nd - 1; d >= 0; d--) {
        int64_t i = l % L->sh[d];
        l /= L->sh[d];
        for (int k = 0; k < 3; k++) off[k] += i * L->st[k][d];
    }
}

/* the lane as contiguous memory: in place, or copied into buf */
static const char *lane_src(const char *p, int64_t n, int64_t stride, int isz, char *buf) {
    if (stride == 1 || n <= 1) return p;
    int64_t bs = stride * isz;
    switch (isz) {
    case 1: for (int64_t i = 0; i < n; i++) buf[i] = p[i * bs]; break;
    case 2: for (int64_t i = 0; i < n; i++) ((uint16_t *)buf)[i] = *(const uint16_t *)(p + i * bs);
        break;
    case 4: for (int64_t i = 0; i < n; i++) ((uint32_t *)buf)[i] = *(const uint32_t *)(p + i * bs);
        break;
    default: for (int64_t i = 0; i < n; i++) ((uint64_t *)buf)[i] = *(const uint64_t *)(p + i * bs);
    }
    return buf;
}

typedef struct {
    int op; /* 0 sort, 1 topk, 2 select */
    int dt, isz, flag; /* flag: descending / largest / selection mode */
    int64_t k;
    const char *in;
    char *vo, *io;
} job_t;

static void topk_lane(const job_t *J, const char *src, int64_t n, char *scr, char *vo,
                      int64_t vs, char *io, int64_t is);
static void select_lane(const job_t *J, const char *src, int64_t n, char *scr, char *vo,
                        char *io);

static void run_lane(const job_t *J, const lanes_t *L, int64_t l, char *scr) {
    int64_t off[3];
    lane_seek(L, l, off);
    int isz = J->isz;
    int64_t n = L->n;
    char *copy = scr + (size_t)n * 24 + 128;
    const char *src = lane_src(J->in + off[0] * isz, n, L->ls[0], isz, copy);
    char *vo = J->vo ? J->vo + off[1] * isz : NULL;
    char *io = J->io ? J->io + off[2] * 8 : NULL;
    if (J->op == 0) {
        sorted_t s = sort_lane(J->dt, src, n, J->flag, scr);
        write_sorted(isz, src, &s, 0, 0, n, vo, L->ls[1] * isz, io, L->ls[2] * 8);
    } else if (J->op == 1) {
        topk_lane(J, src, n, scr, vo, L->ls[1] * isz, io, L->ls[2] * 8);
    } else {
        select_lane(J, src, n, scr, vo, io);
    }
}

static int run_lanes(const job_t *J, const lanes_t *L) {
    int64_t n = L->n;
    size_t sb = scratch_bytes(n, J->isz);
    int nth = sort_threads(n * L->nlanes, L->nlanes);
    if (nth <= 1) {
        char *scr = (char *)fm_alloc((int64_t)sb);
        if (!scr) return FM_ERR_NOMEM;
        for (int64_t l = 0; l < L->nlanes; l++) run_lane(J, L, l, scr);
        fm_free((intptr_t)scr, (int64_t)sb);
        return FM_OK;
    }
    int err = 0;
    int64_t chunk = L->nlanes / (16 * nth);
    if (chunk < 1) chunk = 1;
#pragma omp parallel num_threads(nth)
    {
        char *scr = (char *)fm_alloc((int64_t)sb);
        if (!scr) err = 1;
#pragma omp for schedule(dynamic, chunk)
        for (int64_t l = 0; l < L->nlanes; l++)
            if (scr) run_lane(J, L, l, scr);
        if (scr) fm_free((intptr_t)scr, (int64_t)sb);
    }
    return err ? FM_ERR_NOMEM : FM_OK;
}

/* The MSD pass of a long lane, straight from the input (no packed copy: the words are built as
   they are scattered). The digit is the top bits of key - kmin over the keys' actual range
   [kmin, kmax] (a first pass finds it): float keys of typical data share their top bits (rand()'s
   values in [0, 1) all have sign 0 and exponents just below 127), and a digit from the key's own
   top bits would put half of them into a handful of buckets. Then a histogram of the digit (4
   interleaved counters, so runs of equal digits do not wait on each other), then the scatter of
   words (key - kmin) << 32 | index into the buckets. */
typedef int (*range_fn)(const char *src, int64_t lo, int64_t hi, uint32_t xm, uint32_t *mm);
typedef void (*hist_fn)(const char *src, int64_t lo, int64_t hi, uint32_t xm, uint32_t kmin,
                        int sh, uint32_t *c4, int nb);
typedef void (*scat_fn)(const char *src, int64_t lo, int64_t hi, uint32_t xm, uint32_t kmin,
                        int sh, uint32_t *c, uint64_t *b);
#define MSD_BLK 512
#define DEF_MSD(tag, LOSSY)                                                                     \
    static FM_CLONES int keys_##tag(const ct_##tag *FM_RESTRICT x, int64_t m, uint32_t xm,      \
                                    uint32_t *FM_RESTRICT kb) {                                 \
        int lossy = 0;                                                                          \
        for (int64_t j = 0; j < m; j++) {                                                       \
            kb[j] = key_##tag(x + j) ^ xm;                                                      \
            lossy |= LOSSY(x + j);                                                              \
        }                                                                                       \
        return lossy;                                                                           \
    }                                                                                           \
    static FM_CLONES int range_##tag(const char *src, int64_t lo, int64_t hi, uint32_t xm,     \
                                     uint32_t *mm) {                                            \
        const ct_##tag *x = (const ct_##tag *)src;                                              \
        uint32_t mn = ~0u, mx = 0;                                                              \
        int lossy = 0;                                                                          \
        for (int64_t i = lo; i < hi; i++) {                                                     \
            uint32_t k = key_##tag(x + i) ^ xm;                                                 \
            mn = k < mn ? k : mn;                                                               \
            mx = k > mx ? k : mx;                                                               \
            lossy |= LOSSY(x + i);                                                              \
        }                                                                                       \
        mm[0] = mn;                                                                             \
        mm[1] = mx;                                                                             \
        return lossy;                                                                           \
    }                                                                                           \
    static void hist_##tag(const char *src, int64_t lo, int64_t hi, uint32_t xm, uint32_t kmin, \
                           int sh, uint32_t *c4, int nb) {                                      \
        const ct_##tag *x = (const ct_##tag *)src;                                              \
        uint32_t kb[MSD_BLK];                                                                   \
        for (int64_t i = lo; i < hi; i += MSD_BLK) {                                            \
            int64_t m = hi - i < MSD_BLK ? hi - i : MSD_BLK, j = 0;                             \
            keys_##tag(x + i, m, xm, kb);                                                       \
            for (; j + 4 <= m; j += 4) {                                                        \
                c4[(kb[j] - kmin) >> sh]++;                                                     \
                c4[nb + ((kb[j + 1] - kmin) >> sh)]++;                                          \
                c4[2 * nb + ((kb[j + 2] - kmin) >> sh)]++;                                      \
                c4[3 * nb + ((kb[j + 3] - kmin) >> sh)]++;                                      \
            }                                                                                   \
            for (; j < m; j++) c4[(kb[j] - kmin) >> sh]++;                                      \
        }                                                                                       \
    }                                                                                           \
    static void scat_##tag(const char *src, int64_t lo, int64_t hi, uint32_t xm, uint32_t kmin, \
                           int sh, uint32_t *c, uint64_t *b) {                                  \
        const ct_##tag *x = (const ct_##tag *)src;                                              \
        uint32_t kb[MSD_BLK];                                                                   \
        for (int64_t i = lo; i < hi; i += MSD_BLK) {                                            \
            int64_t m = hi - i < MSD_BLK ? hi - i : MSD_BLK;                                    \
            keys_##tag(x + i, m, xm, kb);                                                       \
            for (int64_t j = 0; j < m; j++) {                                                   \
                uint32_t k = kb[j] - kmin;                                                      \
                b[c[k >> sh]++] = (uint64_t)k << 32 | (uint64_t)(i + j);                        \
            }                                                                                   \
        }                                                                                       \
    }
DEF_MSD(i16, LOSSY_INT)
DEF_MSD(i32, LOSSY_INT)
DEF_MSD(f16, LOSSY_F16)
DEF_MSD(bf16, LOSSY_BF16)
DEF_MSD(f32, LOSSY_F32)
DEF_MSD(u16, LOSSY_INT)
DEF_MSD(u32, LOSSY_INT)
static const range_fn range_table[FM_NDTYPES] = {[FM_INT16] = range_i16, [FM_INT32] = range_i32,
                                                 [FM_FLOAT16] = range_f16,
                                                 [FM_BFLOAT16] = range_bf16,
                                                 [FM_FLOAT32] = range_f32,
                                                 [FM_UINT16] = range_u16,
                                                 [FM_UINT32] = range_u32};
static const hist_fn hist_table[FM_NDTYPES] = {[FM_INT16] = hist_i16, [FM_INT32] = hist_i32,
                                               [FM_FLOAT16] = hist_f16,
                                               [FM_BFLOAT16] = hist_bf16,
                                               [FM_FLOAT32] = hist_f32,
                                               [FM_UINT16] = hist_u16, [FM_UINT32] = hist_u32};
static const scat_fn scat_table[FM_NDTYPES] = {[FM_INT16] = scat_i16, [FM_INT32] = scat_i32,
                                               [FM_FLOAT16] = scat_f16,
                                               [FM_BFLOAT16] = scat_bf16,
                                               [FM_FLOAT32] = scat_f32,
                                               [FM_UINT16] = scat_u16, [FM_UINT32] = scat_u32};

/* One long lane of a dtype of 16 or 32 bits: the key range, the MSD pass on the top digit of
   key - kmin, then each bucket sorted (in cache) on the bits below the digit and written by
   whichever thread takes it. */
static int sort_big(int dt, const char *src, int64_t n, int desc, char *vo, int64_t vs,
                    char *io, int64_t is) {
    int kb = key_bits[dt];
    const int D0 = kb == 32 ? 11 : 8, nb = 1 << D0;
    uint32_t xm = desc ? (uint32_t)((1ull << kb) - 1) : 0u;
    size_t wb = (size_t)n * 16;
    uint64_t *a = (uint64_t *)fm_alloc((int64_t)wb);
    if (!a) return FM_ERR_NOMEM;
    uint64_t *b = a + n;
    int nth = sort_forked ? 1 : omp_get_max_threads();
    if (nth < 1) nth = 1;
    if (nth > 256) nth = 256;
    uint32_t *cnt = calloc((size_t)nth * nb * 4 + nb + 1, sizeof(uint32_t));
    if (!cnt) {
        fm_free((intptr_t)a, (int64_t)wb);
        return FM_ERR_NOMEM;
    }
    uint32_t *start = cnt + (size_t)nth * nb * 4; /* nb + 1 bucket bounds */
    uint32_t mm[256][2];
    range_fn range = range_table[dt];
    hist_fn hist = hist_table[dt];
    scat_fn scat = scat_table[dt];
    int lossy = 0, sh = 0;
    uint32_t kmin = 0;
#pragma omp parallel num_threads(nth) if (nth > 1)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
        uint32_t *c = cnt + (size_t)t * nb * 4;
        if (range(src, lo, hi, xm, mm[t])) {
#pragma omp atomic write
            lossy = 1;
        }
#pragma omp barrier
#pragma omp single
        {
            uint32_t mn = ~0u, mx = 0;
            for (int q = 0; q < nt; q++) {
                mn = mm[q][0] < mn ? mm[q][0] : mn;
                mx = mm[q][1] > mx ? mm[q][1] : mx;
            }
            int bits = 0;
            for (uint32_t r = mx - mn; r; r >>= 1) bits++;
            kmin = mn;
            sh = bits > D0 ? bits - D0 : 0;
        }
        hist(src, lo, hi, xm, kmin, sh, c, nb);
        for (int d = 0; d < nb; d++) c[d] += c[nb + d] + c[2 * nb + d] + c[3 * nb + d];
#pragma omp barrier
#pragma omp single
        {
            uint32_t sum = 0;
            for (int d = 0; d < nb; d++) {
                start[d] = sum;
                for (int q = 0; q < nt; q++) {
                    uint32_t v = cnt[(size_t)q * nb * 4 + d];
                    cnt[(size_t)q * nb * 4 + d] = sum;
                    sum += v;
                }
            }
            start[nb] = sum;
        }
        scat(src, lo, hi, xm, kmin, sh, c, b);
#pragma omp barrier
#pragma omp for schedule(dynamic, 1)
        for (int d = 0; d < nb; d++) {
            int64_t s0 = start[d], m = (int64_t)start[d + 1] - s0;
            if (m == 0) continue;
            const uint64_t *w = sh ? radix_packed(b + s0, a + s0, m, sh) : b + s0;
            sorted_t s = {w, NULL, NULL, dt, !lossy, xm, kmin};
            write_sorted(fm_itemsize[dt], src, &s, 0, s0, m, vo, vs, io, is);
        }
    }
    free(cnt);
    fm_free((intptr_t)a, (int64_t)wb);
    return FM_OK;
}

/* Values only (no indices asked for), one long lane of a dtype of 16 or 32 bits: the bare keys
   sorted by the AVX-512 quicksort (sort_simd.c), then mapped back to values. Equal keys are equal
   values, so the order among them does not matter, except where the key map loses information
   (-0.0 folded onto 0.0, NaN payloads): then this returns SIMD_LOSSY before sorting, and the
   caller takes the stable path. */
#define SIMD_LOSSY 1000
#define SIMD_PAR_MIN (1 << 16)
typedef int (*keys_fn)(const char *src, int64_t m, uint32_t xm, uint32_t *k);
#define DEF_KEYS32(tag)                                                                         \
    static int keys32_##tag(const char *src, int64_t m, uint32_t xm, uint32_t *k) {            \
        return keys_##tag((const ct_##tag *)src, m, xm, k);                                     \
    }
DEF_KEYS32(i16)
DEF_KEYS32(i32)
DEF_KEYS32(f16)
DEF_KEYS32(bf16)
DEF_KEYS32(f32)
DEF_KEYS32(u16)
DEF_KEYS32(u32)
static const keys_fn keys32_table[FM_NDTYPES] = {
    [FM_INT16] = keys32_i16, [FM_INT32] = keys32_i32, [FM_FLOAT16] = keys32_f16,
    [FM_BFLOAT16] = keys32_bf16, [FM_FLOAT32] = keys32_f32, [FM_UINT16] = keys32_u16,
    [FM_UINT32] = keys32_u32};
typedef void (*inv32_fn)(const uint32_t *k, int64_t m, uint32_t xm, char *vo, int64_t vs);
#define DEF_INV32(tag, T)                                                                       \
    static FM_CLONES void inv32_##tag(const uint32_t *FM_RESTRICT k, int64_t m, uint32_t xm,    \
                                      char *vo, int64_t vs) {                                   \
        if (vs == (int64_t)sizeof(T)) {                                                         \
            T *o = (T *)vo;                                                                     \
            for (int64_t j = 0; j < m; j++) {                                                   \
                uint32_t v = k[j] ^ xm;                                                         \
                o[j] = (T)INV_##tag(v);                                                         \
            }                                                                                   \
        } else {                                                                                \
            for (int64_t j = 0; j < m; j++) {                                                   \
                uint32_t v = k[j] ^ xm;                                                         \
                *(T *)(vo + j * vs) = (T)INV_##tag(v);                                          \
            }                                                                                   \
        }                                                                                       \
    }
DEF_INV32(i16, uint16_t)
DEF_INV32(i32, uint32_t)
DEF_INV32(f16, uint16_t)
DEF_INV32(bf16, uint16_t)
DEF_INV32(f32, uint32_t)
DEF_INV32(u16, uint16_t)
DEF_INV32(u32, uint32_t)
static const inv32_fn inv32_table[FM_NDTYPES] = {
    [FM_INT16] = inv32_i16, [FM_INT32] = inv32_i32, [FM_FLOAT16] = inv32_f16,
    [FM_BFLOAT16] = inv32_bf16, [FM_FLOAT32] = inv32_f32, [FM_UINT16] = inv32_u16,
    [FM_UINT32] = inv32_u32};

static int sort_values_simd(int dt, const char *src, int64_t n, int desc, char *vo, int64_t vs) {
    int kb = key_bits[dt], isz = fm_itemsize[dt];
    uint32_t xm = desc ? (uint32_t)((1ull << kb) - 1) : 0u;
    /* the keys go straight into the output when it is a contiguous 4-byte lane */
    int inplace = isz == 4 && vs == 4 && ((uintptr_t)vo & 3) == 0;
    uint32_t *k = inplace ? (uint32_t *)vo : (uint32_t *)fm_alloc(n * 4);
    if (!k) return FM_ERR_NOMEM;
    int nth = sort_forked ? 1 : omp_get_max_threads();
    if (nth < 1 || n < SIMD_PAR_MIN) nth = 1;
    keys_fn keys = keys32_table[dt];
    int lossy = 0, rc = FM_OK;
    if (nth > 1) {
#pragma omp parallel num_threads(nth) reduction(| : lossy)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
            lossy |= keys(src + lo * isz, hi - lo, xm, k + lo);
        }
    } else {
        lossy = keys(src, n, xm, k);
    }
    if (lossy) {
        rc = SIMD_LOSSY;
        goto done;
    }
    rc = fm_sort_u32(k, n, nth);
    if (rc) goto done;
    inv32_fn inv = inv32_table[dt];
    if (nth > 1) {
#pragma omp parallel num_threads(nth)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
            inv(k + lo, hi - lo, xm, vo + lo * vs, vs);
        }
    } else {
        inv(k, n, xm, vo, vs);
    }
done:
    if (!inplace) fm_free((intptr_t)k, n * 4);
    return rc;
}

int fm_sort(int dtype, int ndim, const int64_t *shape, intptr_t in, const int64_t *sin, int dim,
            int descending, intptr_t vout, const int64_t *svout, intptr_t iout,
            const int64_t *siout) {
    if (!fm_dtype_ok(dtype)) return FM_ERR_DTYPE;
    lanes_t L;
    int rc = lanes_init(&L, ndim, shape, sin, svout, siout, dim);
    if (rc) return rc;
    if (L.n == 0 || L.nlanes == 0) return FM_OK;
    job_t J = {0, dtype, fm_itemsize[dtype], descending != 0, 0, (const char *)in,
               (char *)vout, (char *)iout};
    int kb = key_bits[dtype];
    if (L.n >= SORT_BIG && kb >= 16 && kb <= 32) {
        int isz = J.isz;
        char *buf = NULL;
        if (L.ls[0] != 1) {
            buf = (char *)fm_alloc(L.n * isz);
            if (!buf) return FM_ERR_NOMEM;
        }
        for (int64_t l = 0; l < L.nlanes && !rc; l++) {
            int64_t off[3];
            lane_seek(&L, l, off);
            const char *src = lane_src(J.in + off[0] * isz, L.n, L.ls[0], isz, buf);
            rc = SIMD_LOSSY;
            if (!J.io && J.vo && fm_sort_u32_available())
                rc = sort_values_simd(dtype, src, L.n, J.flag, J.vo + off[1] * isz,
                                      L.ls[1] * isz);
            if (rc == SIMD_LOSSY)
                rc = sort_big(dtype, src, L.n, J.flag, J.vo ? J.vo + off[1] * isz : NULL,
                              L.ls[1] * isz, J.io ? J.io + off[2] * 8 : NULL, L.ls[2] * 8);
        }
        if (buf) fm_free((intptr_t)buf, L.n * isz);
        return rc;
    }
    return run_lanes(&J, &L);
}

/* ---- topk -------------------------------------------------------------------------------------
   Small k: keep the k best (key, index) in a list sorted best first; an element enters only when
   its key beats the k-th (so earlier elements win ties, as in a stable sort). First the keys
   and the maximum of every block of TOPK_BS are computed (vectorised); the k-th largest block
   maximum is a lower bound of the answer's k-th key (k elements from distinct blocks reach it),
   so only elements at or above it are candidates, and whole blocks below it are skipped with a
   vector compare. On typical data a few dozen elements per lane reach the scalar list code. */
#define DEF_TOPK(tag, KT)                                                                       \
    static FM_CLONES void topk_keys_##tag(const char *FM_RESTRICT src, int64_t n, KT xm,        \
                                          KT *FM_RESTRICT keys, KT *FM_RESTRICT mx) {           \
        const ct_##tag *x = (const ct_##tag *)src;                                              \
        int64_t nb = n / TOPK_BS;                                                               \
        for (int64_t b = 0; b < nb; b++) {                                                      \
            KT m = 0;                                                                           \
            for (int j = 0; j < TOPK_BS; j++) {                                                 \
                KT v = key_##tag(x + b * TOPK_BS + j) ^ xm;                                     \
                keys[b * TOPK_BS + j] = v;                                                      \
                m = v > m ? v : m;                                                              \
            }                                                                                   \
            mx[b] = m;                                                                          \
        }                                                                                       \
        for (int64_t i = nb * TOPK_BS; i < n; i++) keys[i] = key_##tag(x + i) ^ xm;             \
    }                                                                                           \
    static void topk_small_##tag(const char *src, int64_t n, int64_t k, KT xm, KT *kk,          \
                                 uint32_t *ii, char *scr) {                                     \
        KT *keys = (KT *)scr, *mx = keys + n;                                                   \
        int64_t nb = n / TOPK_BS, cnt = 0;                                                      \
        topk_keys_##tag(src, n, xm, keys, mx);                                                  \
        KT gate = 0; /* candidates: keys >= gate */                                             \
        if (nb >= k) { /* the k-th largest block maximum */                                     \
            for (int64_t b = 0; b < nb; b++) {                                                  \
                KT v = mx[b];                                                                   \
                if (cnt == k && v <= kk[k - 1]) continue;                                       \
                int64_t p = cnt < k ? cnt++ : k - 1;                                            \
                while (p > 0 && kk[p - 1] < v) {                                                \
                    kk[p] = kk[p - 1];                                                          \
                    p--;                                                                        \
                }                                                                               \
                kk[p] = v;                                                                      \
            }                                                                                   \
            gate = cnt == k ? kk[k - 1] : 0;                                                    \
            cnt = 0;                                                                            \
        }                                                                                       \
        for (int64_t i = 0; i < n; i += TOPK_BS) {                                              \
            int64_t m = n - i < TOPK_BS ? n - i : TOPK_BS;                                      \
            const KT *kb = keys + i;                                                            \
            int any = 0;                                                                        \
            if (m == TOPK_BS) {                                                                 \
                for (int j = 0; j < TOPK_BS; j++) any |= kb[j] >= gate;                         \
            } else {                                                                            \
                for (int j = 0; j < m; j++) any |= kb[j] >= gate;                               \
            }                                                                                   \
            if (!any) continue;                                                                 \
            for (int j = 0; j < m; j++) {                                                       \
                KT v = kb[j];                                                                   \
                if (v < gate) continue;                                                         \
                int64_t p = cnt < k ? cnt++ : k - 1;                                            \
                while (p > 0 && kk[p - 1] < v) {                                                \
                    kk[p] = kk[p - 1];                                                          \
                    ii[p] = ii[p - 1];                                                          \
                    p--;                                                                        \
                }                                                                               \
                kk[p] = v;                                                                      \
                ii[p] = (uint32_t)(i + j);                                                      \
                if (cnt == k) { /* full: from now on only keys beating the k-th */              \
                    if (kk[k - 1] == (KT)~(KT)0) return;                                        \
                    gate = kk[k - 1] + 1 > gate ? kk[k - 1] + 1 : gate;                         \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    }
DEF_TOPK(b, uint32_t)
DEF_TOPK(u8, uint32_t)
DEF_TOPK(i8, uint32_t)
DEF_TOPK(i16, uint32_t)
DEF_TOPK(i32, uint32_t)
DEF_TOPK(i64, uint64_t)
DEF_TOPK(f16, uint32_t)
DEF_TOPK(bf16, uint32_t)
DEF_TOPK(f32, uint32_t)
DEF_TOPK(f64, uint64_t)
DEF_TOPK(u16, uint32_t)
DEF_TOPK(u32, uint32_t)
DEF_TOPK(u64, uint64_t)

static void topk_lane(const job_t *J, const char *src, int64_t n, char *scr, char *vo,
                      int64_t vs, char *io, int64_t is) {
    int64_t k = J->k;
    int dt = J->dt, kb = key_bits[dt];
    if (k == 0) return;
    if (k <= TOPK_SMALL && n >= 4 * k) {
        uint64_t kk[TOPK_SMALL];
        uint32_t k32[TOPK_SMALL], ii[TOPK_SMALL];
        /* "largest" keeps the biggest keys; smallest: the biggest complemented keys */
        uint64_t xm = J->flag ? 0 : (kb == 64 ? ~0ull : (1ull << kb) - 1);
        switch (dt) {
        case FM_BOOL: topk_small_b(src, n, k, (uint32_t)xm, k32, ii, scr); break;
        case FM_UINT8: topk_small_u8(src, n, k, (uint32_t)xm, k32, ii, scr); break;
        case FM_INT8: topk_small_i8(src, n, k, (uint32_t)xm, k32, ii, scr); break;
        case FM_INT16: topk_small_i16(src, n, k, (uint32_t)xm, k32, ii, scr); break;
        case FM_INT32: topk_small_i32(src, n, k, (uint32_t)xm, k32, ii, scr); break;
        case FM_INT64: topk_small_i64(src, n, k, xm, kk, ii, scr); break;
        case FM_FLOAT16: topk_small_f16(src, n, k, (uint32_t)xm, k32, ii, scr); break;
        case FM_BFLOAT16: topk_small_bf16(src, n, k, (uint32_t)xm, k32, ii, scr); break;
        case FM_FLOAT32: topk_small_f32(src, n, k, (uint32_t)xm, k32, ii, scr); break;
        case FM_UINT16: topk_small_u16(src, n, k, (uint32_t)xm, k32, ii, scr); break;
        case FM_UINT32: topk_small_u32(src, n, k, (uint32_t)xm, k32, ii, scr); break;
        case FM_UINT64: topk_small_u64(src, n, k, xm, kk, ii, scr); break;
        default: topk_small_f64(src, n, k, xm, kk, ii, scr); break;
        }
        sorted_t s = {NULL, NULL, ii, dt, 0, 0, 0};
        write_sorted(J->isz, src, &s, 0, 0, k, vo, vs, io, is);
        return;
    }
    sorted_t s = sort_lane(dt, src, n, J->flag, scr);
    write_sorted(J->isz, src, &s, 0, 0, k, vo, vs, io, is);
}

int fm_topk(int dtype, int ndim, const int64_t *shape, intptr_t in, const int64_t *sin, int dim,
            int64_t k, int largest, intptr_t vout, const int64_t *svout, intptr_t iout,
            const int64_t *siout) {
    if (!fm_dtype_ok(dtype)) return FM_ERR_DTYPE;
    lanes_t L;
    int rc = lanes_init(&L, ndim, shape, sin, svout, siout, dim);
    if (rc) return rc;
    if (k < 0 || k > L.n) return FM_ERR_INDEX;
    if (k == 0 || L.nlanes == 0) return FM_OK;
    job_t J = {1, dtype, fm_itemsize[dtype], largest != 0, k, (const char *)in, (char *)vout,
               (char *)iout};
    return run_lanes(&J, &L);
}

/* ---- k-th value, median, mode ----------------------------------------------------------------- */

static void select_lane(const job_t *J, const char *src, int64_t n, char *scr, char *vo,
                        char *io) {
    int dt = J->dt;
    sorted_t s = sort_lane(dt, src, n, 0, scr);
    uint64_t nk = nan_key(dt);
    int64_t pos = 0;
    /* position of the first NaN in the sorted lane (n if none) */
    int64_t fn = n;
    if (J->flag != FM_SEL_KTH && nk && s_key(&s, n - 1) == nk) {
        int64_t lo = 0, hi = n - 1;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (s_key(&s, mid) == nk) hi = mid;
            else lo = mid + 1;
        }
        fn = lo;
    }
    uint32_t idx;
    switch (J->flag) {
    case FM_SEL_KTH: pos = J->k; break;
    case FM_SEL_MEDIAN: pos = fn < n ? fn : (n - 1) / 2; break;
    case FM_SEL_NANMEDIAN: pos = fn > 0 ? (fn - 1) / 2 : 0; break;
    default: { /* mode: the longest run of equal keys, NaNs never equal; ties: the first run */
        int64_t best = 0, bestlen = 0, r = 0;
        while (r < n) {
            uint64_t kr = s_key(&s, r);
            int64_t e = r + 1;
            if (!(nk && kr == nk))
                while (e < n && s_key(&s, e) == kr) e++;
            if (e - r > bestlen) {
                bestlen = e - r;
                best = e - 1;
            }
            r = e;
        }
        pos = best;
    }
    }
    idx = s_idx(&s, pos);
    if (io) *(int64_t *)io = idx;
    if (vo) memcpy(vo, src + (size_t)idx * J->isz, J->isz);
}

int fm_select(int mode, int dtype, int ndim, const int64_t *shape, intptr_t in,
              const int64_t *sin, int dim, int64_t k, intptr_t vout, const int64_t *svout,
              intptr_t iout, const int64_t *siout) {
    if (!fm_dtype_ok(dtype)) return FM_ERR_DTYPE;
    if (mode < 0 || mode > FM_SEL_MODE) return FM_ERR_OP;
    lanes_t L;
    int rc = lanes_init(&L, ndim, shape, sin, svout, siout, dim);
    if (rc) return rc;
    if (L.nlanes == 0) return FM_OK;
    if (L.n == 0) return FM_ERR_VALUE;
    if (mode == FM_SEL_KTH && (k < 0 || k >= L.n)) return FM_ERR_INDEX;
    job_t J = {2, dtype, fm_itemsize[dtype], mode, k, (const char *)in, (char *)vout,
               (char *)iout};
    return run_lanes(&J, &L);
}

/* ---- cummax / cummin -------------------------------------------------------------------------- */

#define DEF_CUM(tag)                                                                            \
    static void cum_##tag(int ismin, const char *x, int64_t n, int64_t xs, char *vo,           \
                          int64_t vs, char *io, int64_t is) {                                  \
        const char *bp = x;                                                                     \
        cp_##tag best = LD_##tag(x);                                                            \
        int64_t bi = 0;                                                                         \
        for (int64_t i = 0; i < n; i++) {                                                       \
            const char *p = x + i * xs;                                                         \
            cp_##tag v = LD_##tag(p);                                                           \
            int upd = (ismin ? v <= best : v >= best) || v != v;                                \
            if (upd) {                                                                          \
                best = v;                                                                       \
                bp = p;                                                                         \
                bi = i;                                                                         \
            }                                                                                   \
            if (vo) memcpy(vo + i * vs, bp, sizeof(ct_##tag));                                  \
            if (io) *(int64_t *)(io + i * is) = bi;                                             \
        }                                                                                       \
    }
DEF_CUM(b)
DEF_CUM(u8)
DEF_CUM(i8)
DEF_CUM(i16)
DEF_CUM(i32)
DEF_CUM(i64)
DEF_CUM(f16)
DEF_CUM(bf16)
DEF_CUM(f32)
DEF_CUM(f64)
DEF_CUM(u16)
DEF_CUM(u32)
DEF_CUM(u64)
typedef void (*cum_fn)(int, const char *, int64_t, int64_t, char *, int64_t, char *, int64_t);
static const cum_fn cum_table[FM_NDTYPES] = FM_TABLE(cum_);

int fm_cumext(int ismin, int dtype, int ndim, const int64_t *shape, intptr_t in,
              const int64_t *sin, int dim, intptr_t vout, const int64_t *svout, intptr_t iout,
              const int64_t *siout) {
    if (!fm_dtype_ok(dtype)) return FM_ERR_DTYPE;
    lanes_t L;
    int rc = lanes_init(&L, ndim, shape, sin, svout, siout, dim);
    if (rc) return rc;
    if (L.n == 0) return FM_OK;
    int isz = fm_itemsize[dtype];
    for (int64_t l = 0; l < L.nlanes; l++) {
        int64_t off[3];
        lane_seek(&L, l, off);
        cum_table[dtype](ismin != 0, (const char *)in + off[0] * isz, L.n, L.ls[0] * isz,
                         vout ? (char *)vout + off[1] * isz : NULL, L.ls[1] * isz,
                         iout ? (char *)iout + off[2] * 8 : NULL, L.ls[2] * 8);
    }
    return FM_OK;
}

/* ---- searchsorted ----------------------------------------------------------------------------- */

#define DEF_SS(tag)                                                                             \
    static void ss_##tag(const char *seq, const int64_t *sorter, int64_t nseq, const char *vals, \
                         int64_t nval, int right, int o32, char *out) {                         \
        const ct_##tag *q = (const ct_##tag *)seq;                                              \
        for (int64_t j = 0; j < nval; j++) {                                                    \
            cp_##tag v = LD_##tag((const ct_##tag *)vals + j);                                  \
            int64_t lo = 0, hi = nseq;                                                          \
            while (lo < hi) {                                                                   \
                int64_t mid = lo + ((hi - lo) >> 1);                                            \
                cp_##tag m = LD_##tag(q + (sorter ? sorter[mid] : mid));                        \
                if (right ? !(m > v) : !(m >= v)) lo = mid + 1;                                 \
                else hi = mid;                                                                  \
            }                                                                                   \
            if (o32) ((int32_t *)out)[j] = (int32_t)lo;                                         \
            else ((int64_t *)out)[j] = lo;                                                      \
        }                                                                                       \
    }
DEF_SS(b)
DEF_SS(u8)
DEF_SS(i8)
DEF_SS(i16)
DEF_SS(i32)
DEF_SS(i64)
DEF_SS(f16)
DEF_SS(bf16)
DEF_SS(f32)
DEF_SS(f64)
DEF_SS(u16)
DEF_SS(u32)
DEF_SS(u64)
typedef void (*ss_fn)(const char *, const int64_t *, int64_t, const char *, int64_t, int, int,
                      char *);
static const ss_fn ss_table[FM_NDTYPES] = FM_TABLE(ss_);

int fm_searchsorted(int dtype, int64_t nlanes, int64_t nseq, intptr_t seq, int64_t seq_ls,
                    intptr_t sorter, int64_t sorter_ls, int64_t nval, intptr_t vals,
                    int64_t val_ls, int right, int out_int32, intptr_t out, int64_t *bad) {
    if (!fm_dtype_ok(dtype)) return FM_ERR_DTYPE;
    if (nlanes < 0 || nseq < 0 || nval < 0) return FM_ERR_ARG;
    int isz = fm_itemsize[dtype];
    const int64_t *so = (const int64_t *)sorter;
    if (so) {
        int64_t nsl = sorter_ls ? nlanes : (nlanes ? 1 : 0);
        for (int64_t l = 0; l < nsl; l++)
            for (int64_t i = 0; i < nseq; i++) {
                int64_t v = so[l * sorter_ls + i];
                if (v < 0 || v >= nseq) {
                    *bad = v;
                    return FM_ERR_INDEX;
                }
            }
    }
    int osz = out_int32 ? 4 : 8;
    for (int64_t l = 0; l < nlanes; l++)
        ss_table[dtype]((const char *)seq + l * seq_ls * isz, so ? so + l * sorter_ls : NULL,
                        nseq, (const char *)vals + l * val_ls * isz, nval, right != 0,
                        out_int32 != 0, (char *)out + l * nval * osz);
    return FM_OK;
}

/* ---- unique ----------------------------------------------------------------------------------- */

static int rows_equal(int dt, int isz, uint64_t nk, const char *a, const char *b, int64_t m) {
    for (int64_t j = 0; j < m; j++) {
        uint64_t ka = key_at(dt, a + j * isz);
        if (ka != key_at(dt, b + j * isz) || (nk && ka == nk)) return 0;
    }
    return 1;
}

int fm_unique_runs(int dtype, int64_t n, int64_t m, intptr_t data, intptr_t order,
                   intptr_t origpos, intptr_t first, intptr_t inverse, intptr_t counts,
                   int64_t *ngroups) {
    if (!fm_dtype_ok(dtype)) return FM_ERR_DTYPE;
    if (n < 0 || m < 0) return FM_ERR_ARG;
    int isz = fm_itemsize[dtype];
    uint64_t nk = nan_key(dtype);
    const char *d = (const char *)data;
    const int64_t *ord = (const int64_t *)order, *pos = (const int64_t *)origpos;
    int64_t *fi = (int64_t *)first, *inv = (int64_t *)inverse, *cn = (int64_t *)counts;
    int64_t g = -1;
    if (m == 1 && !ord) { /* one value per row, already in order: keys compared in a typed loop */
#define RUNS1(tag)                                                                              \
    {                                                                                           \
        const ct_##tag *x = (const ct_##tag *)d;                                                \
        uint64_t kp = 0;                                                                        \
        for (int64_t r = 0; r < n; r++) {                                                       \
            uint64_t k = key_##tag(x + r);                                                      \
            if (r == 0 || k != kp || (nk && k == nk)) {                                         \
                g++;                                                                            \
                fi[g] = r;                                                                      \
                if (cn) cn[g] = 0;                                                              \
                kp = k;                                                                         \
            }                                                                                   \
            if (cn) cn[g]++;                                                                    \
            if (inv) {                                                                          \
                int64_t at = pos ? pos[r] : r;                                                  \
                if (at < 0 || at >= n) {                                                        \
                    *ngroups = at;                                                              \
                    return FM_ERR_INDEX;                                                        \
                }                                                                               \
                inv[at] = g;                                                                    \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
    break;
        switch (dtype) {
        case FM_BOOL: RUNS1(b)
        case FM_UINT8: RUNS1(u8)
        case FM_INT8: RUNS1(i8)
        case FM_INT16: RUNS1(i16)
        case FM_INT32: RUNS1(i32)
        case FM_INT64: RUNS1(i64)
        case FM_FLOAT16: RUNS1(f16)
        case FM_BFLOAT16: RUNS1(bf16)
        case FM_FLOAT32: RUNS1(f32)
        case FM_UINT16: RUNS1(u16)
        case FM_UINT32: RUNS1(u32)
        case FM_UINT64: RUNS1(u64)
        default: RUNS1(f64)
        }
#undef RUNS1
        *ngroups = g + 1;
        return FM_OK;
    }
    const char *prev = NULL;
    for (int64_t r = 0; r < n; r++) {
        int64_t row = ord ? ord[r] : r;
        if (row < 0 || row >= n) {
            *ngroups = row;
            return FM_ERR_INDEX;
        }
        const char *p = d + row * m * isz;
        if (!prev || !rows_equal(dtype, isz, nk, prev, p, m)) {
            g++;
            fi[g] = row;
            if (cn) cn[g] = 0;
            prev = p;
        }
        if (cn) cn[g]++;
        if (inv) {
            int64_t at = pos ? pos[r] : r;
            if (at < 0 || at >= n) {
                *ngroups = at;
                return FM_ERR_INDEX;
            }
            inv[at] = g;
        }
    }
    *ngroups = g + 1;
    return FM_OK;
}

static int rows_less(int dt, int isz, const char *a, const char *b, int64_t m) {
    for (int64_t j = 0; j < m; j++) {
        uint64_t ka = key_at(dt, a + j * isz), kb = key_at(dt, b + j * isz);
        if (ka != kb) return ka < kb;
    }
    return 0;
}

int fm_sort_rows(int dtype, int64_t n, int64_t m, intptr_t data, intptr_t perm) {
    if (!fm_dtype_ok(dtype)) return FM_ERR_DTYPE;
    if (n < 0 || m < 0) return FM_ERR_ARG;
    int isz = fm_itemsize[dtype];
    const char *d = (const char *)data;
    int64_t *p = (int64_t *)perm;
    for (int64_t i = 0; i < n; i++) p[i] = i;
    if (n < 2) return FM_OK;
    int64_t *t = malloc((size_t)n * sizeof(int64_t));
    if (!t) return FM_ERR_NOMEM;
    /* bottom-up merge sort: stable */
    int64_t *src = p, *dst = t;
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                if (rows_less(dtype, isz, d + src[j] * m * isz, d + src[i] * m * isz, m))
                    dst[o++] = src[j++];
                else
                    dst[o++] = src[i++];
            }
            while (i < mid) dst[o++] = src[i++];
            while (j < hi) dst[o++] = src[j++];
        }
        int64_t *x = src;
        src = dst;
        dst = x;
    }
    if (src != p) memcpy(p, src, (size_t)n * sizeof(int64_t));
    free(t);
    return FM_OK;
}
