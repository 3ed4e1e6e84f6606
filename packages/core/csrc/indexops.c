/* Index-op kernels: the dim-wise gather/scatter family, bincount, histc (see api_indexops.h).
 *
 * fm_ixop drops size-1 dims, merges dims every operand steps through as one, and drives an inner
 * loop per (mode, dtype) with an odometer. Inner loops have a branch for an index constant along
 * the inner dim (index_select/index_copy rows: one check, then a row copy) and a typed branch for
 * contiguous result and index where the checks of a block of indices run first, so the moves
 * themselves compile to vector gathers. Large calls split the iteration space across OpenMP
 * threads along a dim that moves the indexed operand, keeping scatters race-free and ordered.
 */
#include <omp.h>
#include <pthread.h>

#include "dtypes.h"
#include "api_indexops.h"

#define XO_PAR_MIN 65536 /* elements before a second thread pays for waking it */
#define XO_BLOCK 256
#define XO_PF 16 /* prefetch distance in elements */
#define XO_PF_SPAN (1 << 18)

typedef struct {
    int64_t isize, ibs; /* size of the indexed dim, its stride in BYTES */
    int wrap;
    int pf; /* the indexed dim spans more than the caches keep close: prefetch */
    int64_t bad;
    int64_t rowbytes; /* > 0: a 2-d gather of contiguous rows of this size (xo_gather_rows) */
} xo_ctx;

/* n elements; a/b/ip: operand pointers; sa/sb/si: their BYTE strides along the inner dim */
typedef int (*xo_loop)(int64_t n, char *a, int64_t sa, char *b, int64_t sb, const char *ip,
                       int64_t si, xo_ctx *c);

/* v: the checked (and wrapped) index at ip; returns from the loop on a bad one */
#define XO_LOAD(v, ip)                                                                        \
    int64_t v = *(const int64_t *)(ip);                                                       \
    if (v < 0 && wrap) v += isz;                                                              \
    if ((uint64_t)v >= (uint64_t)isz) {                                                       \
        c->bad = *(const int64_t *)(ip);                                                      \
        return FM_ERR_INDEX;                                                                  \
    }

/* whether all n contiguous indices at ip are in range (after wrapping) */
static inline int xo_block_ok(const int64_t *ip, int64_t n, int64_t isz, int wrap) {
    uint64_t badacc = 0;
    if (wrap) {
        for (int64_t e = 0; e < n; e++) {
            int64_t v = ip[e] + (ip[e] < 0 ? isz : 0);
            badacc |= (uint64_t)v >= (uint64_t)isz;
        }
    } else {
        for (int64_t e = 0; e < n; e++) badacc |= (uint64_t)ip[e] >= (uint64_t)isz;
    }
    return badacc == 0;
}

/* GATHER: a <- b[v]; otherwise b[v] <- OP(b[v], a). MOVE(dst, src) moves one element; BYTES > 0:
   plain move of that size (memcpy rows); T: the storage type for the typed gather branch. */
#define DEF_XO(NAME, MOVE, GATHER, BYTES, T)                                                  \
    FM_CLONES static int NAME(int64_t n, char *a, int64_t sa, char *b, int64_t sb,           \
                              const char *ip, int64_t si, xo_ctx *c) {                        \
        const int64_t isz = c->isize, ibs = c->ibs;                                           \
        const int wrap = c->wrap, pf = c->pf;                                                 \
        if (si == 0) {                                                                        \
            XO_LOAD(v, ip)                                                                    \
            b += v * ibs;                                                                     \
            if (BYTES && sa == BYTES && sb == BYTES) {                                        \
                if (GATHER) memcpy(a, b, (size_t)(n * BYTES));                                \
                else memmove(b, a, (size_t)(n * BYTES));                                      \
                return FM_OK;                                                                 \
            }                                                                                 \
            for (int64_t e = 0; e < n; e++, a += sa, b += sb) {                               \
                if (GATHER) { MOVE(a, b); } else { MOVE(b, a); }                              \
            }                                                                                 \
            return FM_OK;                                                                     \
        }                                                                                     \
        if (GATHER && BYTES && sa == BYTES && si == 8 && isz > 0) {                           \
            /* one pass, stopping at a bad index (the checked loops below report it); a      \
               branch-free select here made the loop 3x slower (vector gathers) */          \
            T *FM_RESTRICT ao = (T *)a;                                                       \
            const T *bo = (const T *)b;                                                       \
            const int64_t *iv = (const int64_t *)ip;                                          \
            const int64_t sbe = sb / (BYTES ? BYTES : 1), ibe = ibs / (BYTES ? BYTES : 1);    \
            int64_t e = 0;                                                                    \
            if (!pf) {                                                                        \
                if (sbe == 0 && ibe == 1 && !wrap) { /* along a contiguous last dim */        \
                    for (; e < n; e++) {                                                      \
                        const int64_t v = iv[e];                                              \
                        if ((uint64_t)v >= (uint64_t)isz) break;                              \
                        ao[e] = bo[v];                                                        \
                    }                                                                         \
                } else if (sbe == 0 && !wrap) {                                               \
                    for (; e < n; e++) {                                                      \
                        const int64_t v = iv[e];                                              \
                        if ((uint64_t)v >= (uint64_t)isz) break;                              \
                        ao[e] = bo[v * ibe];                                                  \
                    }                                                                         \
                } else {                                                                      \
                    for (; e < n; e++) {                                                      \
                        int64_t v = iv[e];                                                    \
                        if (wrap) v += v < 0 ? isz : 0;                                       \
                        if ((uint64_t)v >= (uint64_t)isz) break;                              \
                        ao[e] = bo[e * sbe + v * ibe];                                        \
                    }                                                                         \
                }                                                                             \
            } else { /* random reads are latency bound: prefetch XO_PF ahead */               \
                const int64_t epf = n - XO_PF;                                                \
                for (; e < n; e++) {                                                          \
                    if (e < epf)                                                              \
                        __builtin_prefetch(bo + (e + XO_PF) * sbe + iv[e + XO_PF] * ibe);     \
                    int64_t v = iv[e];                                                        \
                    if (wrap) v += v < 0 ? isz : 0;                                           \
                    if ((uint64_t)v >= (uint64_t)isz) break;                                  \
                    ao[e] = bo[e * sbe + v * ibe];                                            \
                }                                                                             \
            }                                                                                 \
            const int badacc = e < n;                                                         \
            if (!badacc) return FM_OK;                                                        \
        } /* a bad index somewhere: the loops below find and report it */                     \
        if (!GATHER && sa == (int64_t)sizeof(T) && si == 8 && !pf) {                          \
            /* typed scatter over a contiguous index and values, stopping at a bad index */   \
            T *bo = (T *)b;                                                                   \
            const T *ao = (const T *)a;                                                       \
            const int64_t *iv = (const int64_t *)ip;                                          \
            const int64_t sbe = sb / (int64_t)sizeof(T), ibe = ibs / (int64_t)sizeof(T);      \
            int64_t e = 0;                                                                    \
            if (!wrap && sbe == 0 && ibe == 1) { /* scatter along a contiguous last dim */    \
                for (; e < n; e++) {                                                          \
                    const int64_t v = iv[e];                                                  \
                    if ((uint64_t)v >= (uint64_t)isz) break;                                  \
                    MOVE(bo + v, ao + e);                                                     \
                }                                                                             \
            } else {                                                                          \
                for (; e < n; e++) {                                                          \
                    int64_t v = iv[e];                                                        \
                    if (wrap) v += v < 0 ? isz : 0;                                           \
                    if ((uint64_t)v >= (uint64_t)isz) break;                                  \
                    MOVE(bo + e * sbe + v * ibe, ao + e);                                     \
                }                                                                             \
            }                                                                                 \
            if (e == n) return FM_OK;                                                         \
            a += e * sa;                                                                      \
            b += e * sb;                                                                      \
            ip += e * 8;                                                                      \
            n -= e;                                                                           \
        }                                                                                     \
        for (int64_t e = 0; e < n; e++, a += sa, b += sb, ip += si) {                         \
            if (pf && e + XO_PF < n)                                                          \
                __builtin_prefetch(b + XO_PF * sb + *(const int64_t *)(ip + XO_PF * si) * ibs); \
            XO_LOAD(v, ip)                                                                    \
            char *bb = b + v * ibs;                                                           \
            if (GATHER) { MOVE(a, bb); } else { MOVE(bb, a); }                                \
        }                                                                                     \
        return FM_OK;                                                                         \
    }

#define MOVE_8(d, s) (*(uint8_t *)(d) = *(const uint8_t *)(s))
#define MOVE_16(d, s) (*(uint16_t *)(d) = *(const uint16_t *)(s))
#define MOVE_32(d, s) (*(uint32_t *)(d) = *(const uint32_t *)(s))
#define MOVE_64(d, s) (*(uint64_t *)(d) = *(const uint64_t *)(s))

DEF_XO(xo_gather_8, MOVE_8, 1, 1, uint8_t)
DEF_XO(xo_gather_16, MOVE_16, 1, 2, uint16_t)
DEF_XO(xo_gather_32, MOVE_32, 1, 4, uint32_t)
DEF_XO(xo_gather_64, MOVE_64, 1, 8, uint64_t)
DEF_XO(xo_scatter_8, MOVE_8, 0, 1, uint8_t)
DEF_XO(xo_scatter_16, MOVE_16, 0, 2, uint16_t)
DEF_XO(xo_scatter_32, MOVE_32, 0, 4, uint32_t)
DEF_XO(xo_scatter_64, MOVE_64, 0, 8, uint64_t)

/* reductions in the compute type; integers through a wide unsigned type (wrap, no UB) */
typedef uint32_t wu_b, wu_u8, wu_i8, wu_i16, wu_i32;
typedef uint32_t wu_u16;
typedef uint64_t wu_i64, wu_u32, wu_u64;
#define ISNAN_I(x) 0
#define ISNAN_U(x) 0
#define ISNAN_F(x) ((x) != (x))

#define DEF_RED(T, KIND)                                                                      \
    static inline void add_##T(void *d, const void *s) {                                     \
        if (#KIND[0] == 'I') ST_##T(d, (cp_##T)((wu_##T##_or)LD_##T(d) + (wu_##T##_or)LD_##T(s))); \
        else ST_##T(d, LD_##T(d) + LD_##T(s));                                                \
    }                                                                                         \
    static inline void mul_##T(void *d, const void *s) {                                     \
        if (#KIND[0] == 'I') ST_##T(d, (cp_##T)((wu_##T##_or)LD_##T(d) * (wu_##T##_or)LD_##T(s))); \
        else ST_##T(d, LD_##T(d) * LD_##T(s));                                                \
    }                                                                                         \
    static inline void max_##T(void *d, const void *s) {                                     \
        cp_##T x = LD_##T(d), y = LD_##T(s);                                                  \
        if (!ISNAN_##KIND(x) && (ISNAN_##KIND(y) || y > x)) ST_##T(d, y);                     \
    }                                                                                         \
    static inline void min_##T(void *d, const void *s) {                                     \
        cp_##T x = LD_##T(d), y = LD_##T(s);                                                  \
        if (!ISNAN_##KIND(x) && (ISNAN_##KIND(y) || y < x)) ST_##T(d, y);                     \
    }                                                                                         \
    DEF_XO(xo_add_##T, add_##T, 0, 0, ct_##T)                                                 \
    DEF_XO(xo_mul_##T, mul_##T, 0, 0, ct_##T)                                                 \
    DEF_XO(xo_max_##T, max_##T, 0, 0, ct_##T)                                                 \
    DEF_XO(xo_min_##T, min_##T, 0, 0, ct_##T)

/* the unsigned type arithmetic runs in: wide for integers, the compute type for floats */
typedef wu_b wu_b_or;
typedef wu_u8 wu_u8_or;
typedef wu_i8 wu_i8_or;
typedef wu_i16 wu_i16_or;
typedef wu_i32 wu_i32_or;
typedef wu_i64 wu_i64_or;
typedef cp_f16 wu_f16_or;
typedef cp_bf16 wu_bf16_or;
typedef cp_f32 wu_f32_or;
typedef cp_f64 wu_f64_or;
typedef wu_u16 wu_u16_or;
typedef wu_u32 wu_u32_or;
typedef wu_u64 wu_u64_or;

FM_ALL_DTYPES(DEF_RED)

#define XO_ROW(T) {xo_add_##T, xo_mul_##T, xo_max_##T, xo_min_##T}
static const xo_loop red_table[FM_NDTYPES][4] = {
    [FM_BOOL] = XO_ROW(b), [FM_UINT8] = XO_ROW(u8), [FM_INT8] = XO_ROW(i8),
    [FM_INT16] = XO_ROW(i16), [FM_INT32] = XO_ROW(i32), [FM_INT64] = XO_ROW(i64),
    [FM_FLOAT16] = XO_ROW(f16), [FM_BFLOAT16] = XO_ROW(bf16), [FM_FLOAT32] = XO_ROW(f32),
    [FM_FLOAT64] = XO_ROW(f64), [FM_UINT16] = XO_ROW(u16), [FM_UINT32] = XO_ROW(u32),
    [FM_UINT64] = XO_ROW(u64)};

/* checks only (the pass before an in-place scatter writes) */
static int xo_check(int64_t n, char *a, int64_t sa, char *b, int64_t sb, const char *ip,
                    int64_t si, xo_ctx *c) {
    const int64_t isz = c->isize;
    const int wrap = c->wrap;
    if (si == 0) n = 1;
    for (int64_t e = 0; e < n; e++, ip += si) {
        XO_LOAD(v, ip)
        (void)v;
    }
    return FM_OK;
}

/* ---- iteration ------------------------------------------------------------------------------ */
typedef struct {
    int nd;
    int64_t sh[FM_MAX_DIMS + 1];
    int64_t st[3][FM_MAX_DIMS + 1]; /* BYTE strides of a, b, idx */
} xo_space;

/* Whole rows of a gather (index_select along a leading dim, x[idx] on rows): the index is
   constant along the inner dim, which a and b both step through contiguously; one tight loop
   over the rows instead of one inner-loop call per row (3x on 64-byte rows). */
static int xo_gather_rows(const xo_space *sp, char *pa, char *pb, char *pi, xo_ctx *c) {
    const int64_t rows = sp->sh[0], rb = c->rowbytes;
    const int64_t sa0 = sp->st[0][0], sb0 = sp->st[1][0], si0 = sp->st[2][0];
    const int64_t isz = c->isize, ibs = c->ibs;
    for (int64_t r = 0; r < rows; r++, pa += sa0, pb += sb0, pi += si0) {
        int64_t v = *(const int64_t *)pi;
        if (v < 0 && c->wrap) v += isz;
        if ((uint64_t)v >= (uint64_t)isz) {
            c->bad = *(const int64_t *)pi;
            return FM_ERR_INDEX;
        }
        if (c->pf && r + 4 < rows) {
            int64_t w = *(const int64_t *)(pi + 4 * si0);
            if (w < 0 && c->wrap) w += isz;
            if ((uint64_t)w < (uint64_t)isz) __builtin_prefetch(pb + 4 * sb0 + w * ibs);
        }
        memcpy(pa, pb + v * ibs, (size_t)rb);
    }
    return FM_OK;
}

static int xo_run(const xo_space *sp, char *pa, char *pb, char *pi, xo_loop fn, xo_ctx *c) {
    const int nd = sp->nd, inner = nd - 1;
    if (c->rowbytes) return xo_gather_rows(sp, pa, pb, pi, c);
    const int64_t n = sp->sh[inner];
    const int64_t sa = sp->st[0][inner], sb = sp->st[1][inner], si = sp->st[2][inner];
    int64_t pos[FM_MAX_DIMS + 1];
    for (int d = 0; d < nd; d++) pos[d] = 0;
    for (;;) {
        int rc = fn(n, pa, sa, pb, sb, pi, si, c);
        if (rc) return rc;
        int d = inner - 1;
        for (; d >= 0; d--) {
            pos[d]++;
            pa += sp->st[0][d];
            pb += sp->st[1][d];
            pi += sp->st[2][d];
            if (pos[d] < sp->sh[d]) break;
            pa -= sp->st[0][d] * sp->sh[d];
            pb -= sp->st[1][d] * sp->sh[d];
            pi -= sp->st[2][d] * sp->sh[d];
            pos[d] = 0;
        }
        if (d < 0) return FM_OK;
    }
}

/* libgomp's thread pool does not survive fork(): children run single-threaded */
static volatile int xo_forked = 0;
static void xo_mark_forked(void) { xo_forked = 1; }
__attribute__((constructor)) static void xo_register_atfork(void) {
    pthread_atfork(NULL, NULL, xo_mark_forked);
}

/* Run fn over the space, in blocks along dim `split` on several threads when it pays. */
static int xo_drive(const xo_space *sp, int64_t total, int split, char *pa, char *pb, char *pi,
                    xo_loop fn, xo_ctx *c, const char *init, int64_t init_bytes) {
    int nth = 1;
    if (split >= 0 && total >= XO_PAR_MIN && !xo_forked && sp->sh[split] > 1) {
        nth = omp_get_max_threads();
        if (nth < 1) nth = 1;
    }
    /* blocks along the outermost dim tile b's bytes: each block copies its slab of the
       initial values just before scattering into it (while it is in cache) */
    const int slabs = init && nth > 1 && split == 0 && sp->sh[0] * sp->st[1][0] == init_bytes;
    if (init && !slabs) memcpy(pb, init, (size_t)init_bytes);
    if (nth <= 1) return xo_run(sp, pa, pb, pi, fn, c);
    const int64_t len = sp->sh[split];
    int64_t nblk = 4 * (int64_t)nth;
    if (nblk > len) nblk = len;
    const int64_t per = (len + nblk - 1) / nblk;
    nblk = (len + per - 1) / per;
    int rc_all = FM_OK;
    int64_t bad_blk = INT64_MAX, bad_val = 0;
#pragma omp parallel for num_threads(nth) schedule(dynamic, 1)
    for (int64_t q = 0; q < nblk; q++) {
        int stop;
#pragma omp atomic read
        stop = rc_all;
        if (stop) continue;
        xo_space sub = *sp;
        const int64_t s0 = q * per, s1 = s0 + per < len ? s0 + per : len;
        sub.sh[split] = s1 - s0;
        xo_ctx cc = *c;
        if (slabs)
            memcpy(pb + s0 * sp->st[1][0], init + s0 * sp->st[1][0],
                   (size_t)((s1 - s0) * sp->st[1][0]));
        int rc = xo_run(&sub, pa + s0 * sp->st[0][split], pb + s0 * sp->st[1][split],
                        pi + s0 * sp->st[2][split], fn, &cc);
        if (rc) {
#pragma omp critical(xo_err)
            {
                if (q < bad_blk) {
                    bad_blk = q;
                    bad_val = cc.bad;
                    rc_all = rc;
                }
            }
        }
    }
    if (rc_all) c->bad = bad_val;
    return rc_all;
}

int fm_ixop(int mode, int dtype, int ndim, const int64_t *shape,
            intptr_t a, const int64_t *sa, intptr_t b, const int64_t *sb,
            intptr_t idx, const int64_t *sidx, int64_t isize, int64_t istride,
            int wrap, int precheck, int64_t *bad) {
    return fm_ixop_init(mode, dtype, ndim, shape, a, sa, b, sb, idx, sidx, isize, istride, wrap,
                        precheck, 0, 0, bad);
}

int fm_ixop_init(int mode, int dtype, int ndim, const int64_t *shape,
                 intptr_t a, const int64_t *sa, intptr_t b, const int64_t *sb,
                 intptr_t idx, const int64_t *sidx, int64_t isize, int64_t istride,
                 int wrap, int precheck, intptr_t init, int64_t init_bytes, int64_t *bad) {
    if (!fm_dtype_ok(dtype)) return FM_ERR_DTYPE;
    if (init && (mode == FM_IXOP_GATHER || precheck || init_bytes < 0)) return FM_ERR_ARG;
    if (ndim < 0 || ndim > FM_MAX_DIMS) return FM_ERR_NDIM;
    if (mode < FM_IXOP_GATHER || mode > FM_IXOP_MIN || isize < 0) return FM_ERR_ARG;
    const int isz = fm_itemsize[dtype];
    int64_t span = isize * istride * isz;
    xo_ctx c = {isize, istride * isz, wrap, span > XO_PF_SPAN || span < -XO_PF_SPAN, 0, 0};
    xo_space sp;
    int nd = 0;
    int64_t total = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return FM_ERR_ARG;
        if (shape[d] == 0) {
            if (init) memcpy((char *)b, (const char *)init, (size_t)init_bytes);
            return FM_OK;
        }
        total *= shape[d];
        if (shape[d] == 1) continue;
        sp.sh[nd] = shape[d];
        sp.st[0][nd] = sa[d] * isz;
        sp.st[1][nd] = sb[d] * isz;
        sp.st[2][nd] = sidx[d] * 8;
        nd++;
    }
    if (nd > 1) {
        int out = 0;
        for (int d = 1; d < nd; d++) {
            int merge = 1;
            for (int q = 0; q < 3; q++)
                if (sp.st[q][out] != sp.st[q][d] * sp.sh[d]) { merge = 0; break; }
            if (merge) {
                sp.sh[out] *= sp.sh[d];
            } else {
                out++;
                sp.sh[out] = sp.sh[d];
            }
            for (int q = 0; q < 3; q++) sp.st[q][out] = sp.st[q][d];
        }
        nd = out + 1;
    }
    if (nd == 0) {
        sp.sh[0] = 1;
        sp.st[0][0] = sp.st[1][0] = sp.st[2][0] = 0;
        nd = 1;
    }
    sp.nd = nd;
    /* threads split the outermost dim that moves b (two points of a scatter that differ
       there never meet in one element); a gather writes only its own result, so it splits
       the outermost dim (whole rows for index_select) */
    int split = -1;
    for (int d = 0; d < nd; d++)
        if ((mode == FM_IXOP_GATHER || sp.st[1][d] != 0) && sp.sh[d] >= 2) {
            split = d;
            break;
        }
    char *pa = (char *)a, *pb = (char *)b, *pi = (char *)idx;
    int rc;
    if (precheck && mode != FM_IXOP_GATHER) {
        rc = xo_drive(&sp, total, split, pa, pb, pi, xo_check, &c, NULL, 0);
        if (rc) goto fail;
    }
    xo_loop fn;
    if (mode == FM_IXOP_GATHER && nd == 2 && sp.st[2][1] == 0 && sp.st[0][1] == isz &&
        sp.st[1][1] == isz)
        c.rowbytes = sp.sh[1] * isz;
    if (mode == FM_IXOP_GATHER || mode == FM_IXOP_SCATTER) {
        static const xo_loop moves[2][4] = {
            {xo_gather_8, xo_gather_16, xo_gather_32, xo_gather_64},
            {xo_scatter_8, xo_scatter_16, xo_scatter_32, xo_scatter_64}};
        fn = moves[mode][isz == 1 ? 0 : isz == 2 ? 1 : isz == 4 ? 2 : 3];
    } else {
        fn = red_table[dtype][mode - FM_IXOP_ADD];
    }
    rc = xo_drive(&sp, total, split, pa, pb, pi, fn, &c, (const char *)init, init_bytes);
    if (rc) goto fail;
    return FM_OK;
fail:
    if (bad) *bad = c.bad;
    return rc;
}

/* ---- bincount --------------------------------------------------------------------------------- */
#define DEF_BINCOUNT(T, KIND)                                                                 \
    static int bincount_##T(int64_t n, const char *x, int64_t sx, int wdtype, const char *w, \
                            int64_t sw, char *out, int64_t nbins, int64_t *bad) {             \
        for (int64_t i = 0; i < n; i++, x += sx) {                                            \
            int64_t v = LDI_##T(x);                                                           \
            if ((uint64_t)v >= (uint64_t)nbins) {                                             \
                *bad = v;                                                                     \
                return FM_ERR_INDEX;                                                          \
            }                                                                                 \
            if (!w) ((int64_t *)out)[v]++;                                                    \
            else if (wdtype == FM_FLOAT32) ((float *)out)[v] += *(const float *)(w + i * sw); \
            else ((double *)out)[v] += *(const double *)(w + i * sw);                         \
        }                                                                                     \
        return FM_OK;                                                                         \
    }
DEF_BINCOUNT(u8, I)
DEF_BINCOUNT(u16, I)
DEF_BINCOUNT(u32, I)
DEF_BINCOUNT(u64, I)
DEF_BINCOUNT(i8, I)
DEF_BINCOUNT(i16, I)
DEF_BINCOUNT(i32, I)
DEF_BINCOUNT(i64, I)

int fm_bincount(int dtype, int64_t n, intptr_t x, int64_t sx, int wdtype, intptr_t w, int64_t sw,
                intptr_t out, int64_t nbins, int64_t *bad) {
    int64_t dummy;
    if (!bad) bad = &dummy;
    if (n < 0 || nbins < 0) return FM_ERR_ARG;
    if (w && wdtype != FM_FLOAT32 && wdtype != FM_FLOAT64) return FM_ERR_DTYPE;
    const int isz = dtype >= 0 && dtype < FM_NDTYPES ? fm_itemsize[dtype] : 0;
    const char *xp = (const char *)x, *wp = (const char *)w;
    char *op = (char *)out;
    const int64_t wsz = wdtype == FM_FLOAT32 ? 4 : 8;
    switch (dtype) {
        case FM_UINT8: return bincount_u8(n, xp, sx * isz, wdtype, wp, sw * wsz, op, nbins, bad);
        case FM_INT8: return bincount_i8(n, xp, sx * isz, wdtype, wp, sw * wsz, op, nbins, bad);
        case FM_INT16: return bincount_i16(n, xp, sx * isz, wdtype, wp, sw * wsz, op, nbins, bad);
        case FM_INT32: return bincount_i32(n, xp, sx * isz, wdtype, wp, sw * wsz, op, nbins, bad);
        case FM_INT64: return bincount_i64(n, xp, sx * isz, wdtype, wp, sw * wsz, op, nbins, bad);
        case FM_UINT16: return bincount_u16(n, xp, sx * isz, wdtype, wp, sw * wsz, op, nbins, bad);
        case FM_UINT32: return bincount_u32(n, xp, sx * isz, wdtype, wp, sw * wsz, op, nbins, bad);
        case FM_UINT64: return bincount_u64(n, xp, sx * isz, wdtype, wp, sw * wsz, op, nbins, bad);
        default: return FM_ERR_DTYPE;
    }
}

/* ---- histc -------------------------------------------------------------------------------- */
typedef struct {
    int64_t bins;
    double lo, hi, scale;
    const double *edges;
    int64_t *out;
} hist_ctx;

/* the bin of v by the linear formula, corrected against the edges (rounding can put a value
   next to an edge one bin off) */
static inline void hist_add(const hist_ctx *h, double v) {
    if (!(v >= h->lo && v <= h->hi)) return;
    int64_t pos = (int64_t)((v - h->lo) * h->scale);
    if (pos >= h->bins) pos = h->bins - 1;
    if (pos < 0) pos = 0;
    if (v < h->edges[pos] && pos > 0) pos--;
    else if (pos + 1 < h->bins && v >= h->edges[pos + 1]) pos++;
    h->out[pos]++;
}

#define DEF_HIST(T, KIND)                                                                     \
    static void hist_##T(int64_t n, char **p, const int64_t *s, const void *ctx) {           \
        const hist_ctx *h = (const hist_ctx *)ctx;                                            \
        const char *x = p[0];                                                                 \
        for (int64_t e = 0; e < n; e++, x += s[0]) hist_add(h, LDF_##T(x));                   \
    }
DEF_HIST(f16, F)
DEF_HIST(bf16, F)
DEF_HIST(f32, F)
DEF_HIST(f64, F)

int fm_histc(int dtype, int ndim, const int64_t *shape, intptr_t x, const int64_t *sx,
             int64_t bins, double lo, double hi, const double *edges, intptr_t out) {
    if (!fm_dtype_ok(dtype) || !fm_is_float(dtype)) return FM_ERR_DTYPE;
    if (bins <= 0 || !(hi > lo) || !edges || !out) return FM_ERR_ARG;
    static const fm_inner_fn fns[4] = {hist_f16, hist_bf16, hist_f32, hist_f64};
    hist_ctx h = {bins, lo, hi, (double)bins / (hi - lo), edges, (int64_t *)out};
    char *base[1] = {(char *)x};
    const int64_t *st[1] = {sx};
    int isz = fm_itemsize[dtype];
    return fm_iterate(1, ndim, shape, base, st, &isz, fns[dtype - FM_FLOAT16], &h);
}
