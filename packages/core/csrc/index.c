/* Indexing kernels: advanced-index gather/scatter, nonzero, boolean-mask select/put.
 *
 * Gather and scatter run over the result's iteration space with k int64 index operands (see
 * api_index.h). They have their own iterator (fm_iterate allows 8 operands and cannot stop
 * early): dims of size 1 are dropped and dims that every operand steps through as one are
 * merged, then an odometer drives an inner loop that returns a status. The inner loop has a
 * fast branch for the common case where the index values are constant along the inner
 * dimension (x[idx] over contiguous rows: one bounds check and a memcpy per row).
 */
#include "dims.h"
#include "dtypes.h"
#include "api_index.h"

#define IX_MAXOPS (FM_MAX_DIMS + 2)

typedef struct {
    int k;
    int64_t size[FM_MAX_DIMS];    /* size of the dimension index j selects in */
    int64_t bstride[FM_MAX_DIMS]; /* its stride in BYTES */
    int64_t bad_j, bad_v;         /* the first bad index: which array, which value */
} ix_ctx;

/* n elements; p[0]: dense operand (out / values), p[1]: the indexed tensor, p[2 + j]: index j;
   s: byte strides along the inner dimension */
typedef int (*ix_loop)(int64_t n, char **p, const int64_t *s, ix_ctx *c);

static int ix_iterate(int nops, int ndim, const int64_t *shape, char **base,
                      const int64_t *const *strides, const int *isz, ix_loop fn, ix_ctx *c) {
    if (ndim < 0 || ndim > FM_MAX_DIMS || nops < 2 || nops > IX_MAXOPS) return FM_ERR_ARG;
    int64_t sh[FM_MAX_DIMS + 1];
    /* byte strides, sized to the call: a fixed [IX_MAXOPS][FM_MAX_DIMS] table (34 KB of
       stack) made every small gather measurably slower */
    int64_t st[nops][ndim + 1];
    int nd = fm_collapse_dims(nops, ndim, shape, strides, isz, sh, &st[0][0], ndim + 1);
    if (nd == -2) return FM_ERR_ARG;
    if (nd == -1) return FM_OK;
    if (nd == 0) {
        sh[0] = 1;
        for (int q = 0; q < nops; q++) st[q][0] = 0;
        nd = 1;
    }
    int inner = nd - 1;
    int64_t istr[IX_MAXOPS];
    char *ptrs[IX_MAXOPS];
    for (int q = 0; q < nops; q++) {
        istr[q] = st[q][inner];
        ptrs[q] = base[q];
    }
    int64_t idx[FM_MAX_DIMS + 1];
    for (int d = 0; d < nd; d++) idx[d] = 0;
    for (;;) {
        int rc = fn(sh[inner], ptrs, istr, c);
        if (rc) return rc;
        int d = inner - 1;
        for (; d >= 0; d--) {
            idx[d]++;
            for (int q = 0; q < nops; q++) ptrs[q] += st[q][d];
            if (idx[d] < sh[d]) break;
            for (int q = 0; q < nops; q++) ptrs[q] -= st[q][d] * sh[d];
            idx[d] = 0;
        }
        if (d < 0) break;
    }
    return FM_OK;
}

/* byte offset into the indexed tensor for element e of the inner loop; 1 on a bad index */
static inline int ix_offset(ix_ctx *c, char **p, const int64_t *s, int64_t e, int64_t *off) {
    int64_t o = 0;
    for (int j = 0; j < c->k; j++) {
        int64_t v = *(const int64_t *)(p[2 + j] + e * s[2 + j]);
        int64_t n = c->size[j], w = v < 0 ? v + n : v;
        if (w < 0 || w >= n) {
            c->bad_j = j;
            c->bad_v = v;
            return 1;
        }
        o += w * c->bstride[j];
    }
    *off = o;
    return 0;
}

/* One inner loop per (direction, element move). MOVE(dst, src) moves one element; GATHER
   selects dst = dense operand (gather) or dst = indexed tensor (scatter); BYTES > 0 allows a
   memcpy when both sides are contiguous along the inner dimension. */
#define DEF_IX_LOOP(NAME, MOVE, GATHER, BYTES)                                                \
    FM_CLONES static int NAME(int64_t n, char **p, const int64_t *s, ix_ctx *c) {            \
        char *a = p[0], *b = p[1];                                                            \
        const int64_t sa = s[0], sb = s[1];                                                   \
        int uniform = 1;                                                                      \
        for (int j = 0; j < c->k; j++)                                                        \
            if (s[2 + j]) { uniform = 0; break; }                                             \
        if (uniform) {                                                                        \
            int64_t off;                                                                      \
            if (ix_offset(c, p, s, 0, &off)) return FM_ERR_INDEX;                             \
            b += off;                                                                         \
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
        if (c->k == 1) {                                                                      \
            const int64_t sz = c->size[0], bs = c->bstride[0], si = s[2];                     \
            const char *ip = p[2];                                                            \
            for (int64_t e = 0; e < n; e++, a += sa, b += sb, ip += si) {                     \
                int64_t v = *(const int64_t *)ip, w = v < 0 ? v + sz : v;                     \
                if (w < 0 || w >= sz) {                                                       \
                    c->bad_j = 0;                                                             \
                    c->bad_v = v;                                                             \
                    return FM_ERR_INDEX;                                                      \
                }                                                                             \
                char *bb = b + w * bs;                                                        \
                if (GATHER) { MOVE(a, bb); } else { MOVE(bb, a); }                            \
            }                                                                                 \
            return FM_OK;                                                                     \
        }                                                                                     \
        for (int64_t e = 0; e < n; e++, a += sa, b += sb) {                                   \
            int64_t off;                                                                      \
            if (ix_offset(c, p, s, e, &off)) return FM_ERR_INDEX;                             \
            char *bb = b + off;                                                               \
            if (GATHER) { MOVE(a, bb); } else { MOVE(bb, a); }                                \
        }                                                                                     \
        return FM_OK;                                                                         \
    }

#define MOVE_8(d, s) (*(uint8_t *)(d) = *(const uint8_t *)(s))
#define MOVE_16(d, s) (*(uint16_t *)(d) = *(const uint16_t *)(s))
#define MOVE_32(d, s) (*(uint32_t *)(d) = *(const uint32_t *)(s))
#define MOVE_64(d, s) (*(uint64_t *)(d) = *(const uint64_t *)(s))
#define MOVE_128(d, s) (*(fm_b128 *)(d) = *(const fm_b128 *)(s))

DEF_IX_LOOP(gather_8, MOVE_8, 1, 1)
DEF_IX_LOOP(gather_16, MOVE_16, 1, 2)
DEF_IX_LOOP(gather_32, MOVE_32, 1, 4)
DEF_IX_LOOP(gather_64, MOVE_64, 1, 8)
DEF_IX_LOOP(scatter_8, MOVE_8, 0, 1)
DEF_IX_LOOP(scatter_16, MOVE_16, 0, 2)
DEF_IX_LOOP(scatter_32, MOVE_32, 0, 4)
DEF_IX_LOOP(scatter_64, MOVE_64, 0, 8)
DEF_IX_LOOP(gather_128, MOVE_128, 1, 16)
DEF_IX_LOOP(scatter_128, MOVE_128, 0, 16)

/* accumulate: dst += src in the compute type of each dtype (bool: logical or) */
#define DEF_ACC(T, KIND)                                                                      \
    static inline void acc_move_##T(char *d, const char *s) { ST_##T(d, LD_##T(d) + LD_##T(s)); } \
    DEF_IX_LOOP(scatter_acc_##T, acc_move_##T, 0, 0)
FM_ALL_DTYPES(DEF_ACC)

static const ix_loop acc_table[FM_NDTYPES] = FM_TABLE(scatter_acc_);

/* checks the indices only (the pass before a scatter writes anything) */
static int check_loop(int64_t n, char **p, const int64_t *s, ix_ctx *c) {
    int uniform = 1;
    for (int j = 0; j < c->k; j++)
        if (s[2 + j]) { uniform = 0; break; }
    if (uniform) n = 1;
    for (int64_t e = 0; e < n; e++) {
        int64_t off;
        if (ix_offset(c, p, s, e, &off)) return FM_ERR_INDEX;
    }
    return FM_OK;
}

/* check every index, iterating only over the dims along which some index varies */
static int ix_check(int ndim, const int64_t *shape, int k, char **base, const int64_t *const *st,
                    const int *isz, ix_ctx *c) {
    int64_t sh2[FM_MAX_DIMS];
    int64_t zeros[FM_MAX_DIMS];
    int64_t s2[k > 0 ? k : 1][ndim > 0 ? ndim : 1];
    const int64_t *st2[IX_MAXOPS];
    int nd2 = 0;
    for (int d = 0; d < ndim; d++) {
        int varies = 0;
        for (int j = 0; j < k; j++)
            if (st[2 + j][d]) varies = 1;
        if (!varies) continue;
        if (shape[d] == 0) return FM_OK; /* no index at all */
        sh2[nd2] = shape[d];
        zeros[nd2] = 0;
        for (int j = 0; j < k; j++) s2[j][nd2] = st[2 + j][d];
        nd2++;
    }
    st2[0] = st2[1] = zeros;
    for (int j = 0; j < k; j++) st2[2 + j] = s2[j];
    return ix_iterate(k + 2, nd2, sh2, base, st2, isz, check_loop, c);
}

static ix_loop move_loop(int isz, int gather) {
    switch (isz) {
        case 1: return gather ? gather_8 : scatter_8;
        case 2: return gather ? gather_16 : scatter_16;
        case 4: return gather ? gather_32 : scatter_32;
        case 16: return gather ? gather_128 : scatter_128;
        default: return gather ? gather_64 : scatter_64;
    }
}

/* validate arguments and set up the operand tables shared by gather and scatter */
static int ix_setup(int dtype, int ndim, int k, const int64_t *isize, const int64_t *istride,
                    ix_ctx *c, int *isz) {
    if (!fm_dtype_any(dtype)) return FM_ERR_DTYPE;
    if (ndim < 0 || ndim > FM_MAX_DIMS) return FM_ERR_NDIM;
    if (k < 0 || k > FM_MAX_DIMS) return FM_ERR_ARG;
    c->k = k;
    c->bad_j = -1;
    c->bad_v = 0;
    isz[0] = isz[1] = fm_itemsize[dtype];
    for (int j = 0; j < k; j++) {
        if (isize[j] < 0) return FM_ERR_ARG;
        c->size[j] = isize[j];
        c->bstride[j] = istride[j] * fm_itemsize[dtype];
        isz[2 + j] = 8;
    }
    return FM_OK;
}

static int ix_run(int dtype, int ndim, const int64_t *shape, intptr_t dense, const int64_t *sdense,
                  intptr_t indexed, const int64_t *sindexed, int k, const intptr_t *idx,
                  const int64_t *sidx, const int64_t *isize, const int64_t *istride,
                  int mode, int64_t *bad) {
    ix_ctx c;
    int isz[IX_MAXOPS];
    if (mode == 2 && !fm_dtype_ok(dtype)) return FM_ERR_DTYPE; /* no complex accumulate */
    int rc = ix_setup(dtype, ndim, k, isize, istride, &c, isz);
    if (rc) return rc;
    char *base[IX_MAXOPS];
    const int64_t *st[IX_MAXOPS];
    base[0] = (char *)dense;
    st[0] = sdense;
    base[1] = (char *)indexed;
    st[1] = sindexed;
    for (int j = 0; j < k; j++) {
        base[2 + j] = (char *)idx[j];
        st[2 + j] = sidx + (int64_t)j * ndim;
    }
    int empty = 0;
    for (int d = 0; d < ndim; d++)
        if (shape[d] <= 0) empty = 1;
    if (mode != 0 || empty) { /* a scatter checks every index before it writes */
        rc = ix_check(ndim, shape, k, base, st, isz, &c);
        if (rc) goto fail;
    }
    if (empty) return FM_OK;
    ix_loop fn = mode == 0 ? move_loop(isz[0], 1)
                 : mode == 1 ? move_loop(isz[0], 0) : acc_table[dtype];
    rc = ix_iterate(k + 2, ndim, shape, base, st, isz, fn, &c);
    if (rc) goto fail;
    return FM_OK;
fail:
    if (bad) {
        bad[0] = c.bad_j;
        bad[1] = c.bad_v;
    }
    return rc;
}

int fm_index_gather(int dtype, int ndim, const int64_t *shape, intptr_t out,
                    const int64_t *sout, intptr_t src, const int64_t *ssrc, int k,
                    const intptr_t *idx, const int64_t *sidx, const int64_t *isize,
                    const int64_t *istride, int64_t *bad) {
    return ix_run(dtype, ndim, shape, out, sout, src, ssrc, k, idx, sidx, isize, istride, 0, bad);
}

int fm_index_scatter(int dtype, int ndim, const int64_t *shape, intptr_t dst,
                     const int64_t *sdst, intptr_t val, const int64_t *sval, int k,
                     const intptr_t *idx, const int64_t *sidx, const int64_t *isize,
                     const int64_t *istride, int accumulate, int64_t *bad) {
    return ix_run(dtype, ndim, shape, val, sval, dst, sdst, k, idx, sidx, isize, istride,
                  accumulate ? 2 : 1, bad);
}

/* ---- nonzero ------------------------------------------------------------------------------ */
/* NZ_<tag>(p): whether the element at p is nonzero (NaN is, -0.0 is not) */
#define NZ_b(p) (*(const uint8_t *)(p) != 0)
#define NZ_u8(p) (*(const uint8_t *)(p) != 0)
#define NZ_i8(p) (*(const int8_t *)(p) != 0)
#define NZ_i16(p) (*(const int16_t *)(p) != 0)
#define NZ_i32(p) (*(const int32_t *)(p) != 0)
#define NZ_i64(p) (*(const int64_t *)(p) != 0)
#define NZ_f16(p) ((*(const uint16_t *)(p) & 0x7fffu) != 0)
#define NZ_bf16(p) ((*(const uint16_t *)(p) & 0x7fffu) != 0)
#define NZ_f32(p) (*(const float *)(p) != 0.0f)
#define NZ_f64(p) (*(const double *)(p) != 0.0)
#define NZ_u16(p) (*(const uint16_t *)(p) != 0)
#define NZ_u32(p) (*(const uint32_t *)(p) != 0)
#define NZ_u64(p) (*(const uint64_t *)(p) != 0)

typedef struct {
    int64_t count;
} count_ctx;

#define DEF_COUNT(T, KIND)                                                                    \
    FM_CLONES static void count_##T(int64_t n, char **p, const int64_t *s, const void *ctx) { \
        int64_t acc = 0;                                                                      \
        const char *x = p[0];                                                                 \
        if (s[0] == (int64_t)sizeof(ct_##T)) {                                                \
            for (int64_t e = 0; e < n; e++) acc += NZ_##T(x + e * (int64_t)sizeof(ct_##T));   \
        } else {                                                                              \
            for (int64_t e = 0; e < n; e++, x += s[0]) acc += NZ_##T(x);                      \
        }                                                                                     \
        ((count_ctx *)ctx)->count += acc;                                                     \
    }
FM_ALL_DTYPES(DEF_COUNT)

static const fm_inner_fn count_table[FM_NDTYPES] = FM_TABLE(count_);

int fm_nonzero_count(int dtype, int ndim, const int64_t *shape, intptr_t x, const int64_t *sx,
                     int64_t *count) {
    if (!fm_dtype_ok(dtype)) return FM_ERR_DTYPE;
    count_ctx c = {0};
    char *base[1] = {(char *)x};
    const int64_t *st[1] = {sx};
    int isz = fm_itemsize[dtype];
    int rc = fm_iterate(1, ndim, shape, base, st, &isz, count_table[dtype], &c);
    if (count) *count = c.count;
    return rc;
}

/* row-major scan with coordinates: an odometer over the outer dims, the last dim inline */
#define DEF_NONZERO(T, KIND)                                                                  \
    static int nonzero_##T(int ndim, const int64_t *shape, const char *x, const int64_t *bs, \
                           int64_t *out, int64_t srow, int64_t scol, int64_t cap,            \
                           int64_t *count) {                                                  \
        int64_t pos[FM_MAX_DIMS];                                                             \
        int64_t found = 0;                                                                    \
        memset(pos, 0, sizeof(pos));                                                          \
        if (ndim == 0) {                                                                      \
            if (NZ_##T(x)) {                                                                  \
                if (cap < 1) return FM_ERR_VALUE;                                             \
                found = 1;                                                                    \
            }                                                                                 \
            *count = found;                                                                   \
            return FM_OK;                                                                     \
        }                                                                                     \
        for (int d = 0; d < ndim; d++)                                                        \
            if (shape[d] == 0) { *count = 0; return FM_OK; }                                  \
        const int last = ndim - 1;                                                            \
        const int64_t nl = shape[last], sl = bs[last];                                        \
        for (;;) {                                                                            \
            /* branch-free: write the last coordinate at every element, advance on a hit */   \
            const char *q = x;                                                                \
            const int64_t first = found;                                                      \
            int64_t *lastcol = out + last * scol;                                             \
            for (int64_t e = 0; e < nl; e++, q += sl) {                                       \
                if (found >= cap) {                                                           \
                    if (NZ_##T(q)) return FM_ERR_VALUE;                                       \
                    continue;                                                                 \
                }                                                                             \
                lastcol[found * srow] = e;                                                    \
                found += NZ_##T(q);                                                           \
            }                                                                                 \
            for (int64_t r = first; r < found; r++)                                           \
                for (int d = 0; d < last; d++) out[r * srow + d * scol] = pos[d];             \
            int d = last - 1;                                                                 \
            for (; d >= 0; d--) {                                                             \
                pos[d]++;                                                                     \
                x += bs[d];                                                                   \
                if (pos[d] < shape[d]) break;                                                 \
                x -= bs[d] * shape[d];                                                        \
                pos[d] = 0;                                                                   \
            }                                                                                 \
            if (d < 0) break;                                                                 \
        }                                                                                     \
        *count = found;                                                                       \
        return FM_OK;                                                                         \
    }
FM_ALL_DTYPES(DEF_NONZERO)

typedef int (*nonzero_fn)(int, const int64_t *, const char *, const int64_t *, int64_t *,
                          int64_t, int64_t, int64_t, int64_t *);
static const nonzero_fn nonzero_table[FM_NDTYPES] = FM_TABLE(nonzero_);

int fm_nonzero(int dtype, int ndim, const int64_t *shape, intptr_t x, const int64_t *sx,
               intptr_t out, int64_t srow, int64_t scol, int64_t cap, int64_t *count) {
    if (!fm_dtype_ok(dtype)) return FM_ERR_DTYPE;
    if (ndim < 0 || ndim > FM_MAX_DIMS) return FM_ERR_NDIM;
    int64_t bs[FM_MAX_DIMS], dummy;
    if (!count) count = &dummy;
    if (!out && cap > 0) return FM_ERR_ARG;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return FM_ERR_ARG;
        bs[d] = sx[d] * fm_itemsize[dtype];
    }
    *count = 0;
    return nonzero_table[dtype](ndim, shape, (const char *)x, bs, (int64_t *)out, srow, scol,
                                cap, count);
}

/* ---- boolean-mask select / put --------------------------------------------------------------- */
typedef struct {
    char *buf;     /* select: the output; put: the values */
    int64_t cap;   /* select: capacity; put: number of values (-1: unlimited) */
    int64_t sbuf;  /* put: byte stride of the values */
    int64_t count;
    int status;
} mask_ctx;

/* operands: p[0] the tensor, p[1] the mask. The loops are branch-free in the mask (a random
   mask would mispredict half the time): select writes every element at out[count] and advances
   count by the mask bit; the guard on count is only taken at the very end. */
#define DEF_MASK(BITS)                                                                        \
    FM_CLONES static void mselect_##BITS(int64_t n, char **p, const int64_t *s,              \
                                         const void *ctx_) {                                  \
        typedef uint##BITS##_t T;                                                             \
        mask_ctx *c = (mask_ctx *)ctx_;                                                       \
        if (c->status) return;                                                                \
        const char *x = p[0];                                                                 \
        const uint8_t *m = (const uint8_t *)p[1];                                             \
        T *o = (T *)c->buf;                                                                   \
        const int64_t cap = c->cap, sx = s[0], sm = s[1];                                     \
        int64_t cnt = c->count;                                                               \
        for (int64_t e = 0; e < n; e++, x += sx, m += sm) {                                   \
            if (cnt >= cap) {                                                                 \
                if (*m) { c->status = FM_ERR_VALUE; break; }                                  \
                continue;                                                                     \
            }                                                                                 \
            o[cnt] = *(const T *)x;                                                           \
            cnt += *m != 0;                                                                   \
        }                                                                                     \
        c->count = cnt;                                                                       \
    }                                                                                         \
    /* one value for every selected element: a blend the compiler vectorises */               \
    FM_CLONES static void mfill_##BITS(int64_t n, char **p, const int64_t *s,                \
                                       const void *ctx_) {                                    \
        typedef uint##BITS##_t T;                                                             \
        const mask_ctx *c = (const mask_ctx *)ctx_;                                           \
        const T v = *(const T *)c->buf;                                                       \
        if (s[0] == BITS / 8 && s[1] == 1) {                                                  \
            T *FM_RESTRICT x = (T *)p[0];                                                     \
            const uint8_t *FM_RESTRICT m = (const uint8_t *)p[1];                             \
            for (int64_t e = 0; e < n; e++) x[e] = m[e] ? v : x[e];                           \
            return;                                                                           \
        }                                                                                     \
        char *x = p[0];                                                                       \
        const uint8_t *m = (const uint8_t *)p[1];                                             \
        for (int64_t e = 0; e < n; e++, x += s[0], m += s[1])                                 \
            if (*m) *(T *)x = v;                                                              \
    }                                                                                         \
    FM_CLONES static void mput_##BITS(int64_t n, char **p, const int64_t *s,                 \
                                      const void *ctx_) {                                     \
        typedef uint##BITS##_t T;                                                             \
        mask_ctx *c = (mask_ctx *)ctx_;                                                       \
        if (c->status) return;                                                                \
        char *x = p[0];                                                                       \
        const uint8_t *m = (const uint8_t *)p[1];                                             \
        const char *val = c->buf;                                                             \
        const int64_t cap = c->cap, sv = c->sbuf, sx = s[0], sm = s[1];                       \
        int64_t cnt = c->count;                                                               \
        for (int64_t e = 0; e < n; e++, x += sx, m += sm) {                                   \
            if (cnt >= cap) {                                                                 \
                if (*m) { c->status = FM_ERR_VALUE; break; }                                  \
                continue;                                                                     \
            }                                                                                 \
            const int on = *m != 0;                                                           \
            const T cur = *(T *)x, nv = *(const T *)(val + cnt * sv);                          \
            *(T *)x = on ? nv : cur;                                                          \
            cnt += on;                                                                        \
        }                                                                                     \
        c->count = cnt;                                                                       \
    }
DEF_MASK(8)
DEF_MASK(16)
DEF_MASK(32)
DEF_MASK(64)
typedef fm_b128 uint128_t; /* complex128 moves as one 16-byte element */
DEF_MASK(128)

/* mode 0: select, 1: put, 2: fill with one value */
static int mask_run(int dtype, int ndim, const int64_t *shape, intptr_t x, const int64_t *sx,
                    intptr_t mask, const int64_t *smask, int mode, mask_ctx *c) {
    if (!fm_dtype_any(dtype)) return FM_ERR_DTYPE;
    int isz[2] = {fm_itemsize[dtype], 1};
    static const fm_inner_fn fns[3][5] = {
        {mselect_8, mselect_16, mselect_32, mselect_64, mselect_128},
        {mput_8, mput_16, mput_32, mput_64, mput_128},
        {mfill_8, mfill_16, mfill_32, mfill_64, mfill_128}};
    int w = isz[0] == 1 ? 0 : isz[0] == 2 ? 1 : isz[0] == 4 ? 2 : isz[0] == 8 ? 3 : 4;
    char *base[2] = {(char *)x, (char *)mask};
    const int64_t *st[2] = {sx, smask};
    int rc = fm_iterate(2, ndim, shape, base, st, isz, fns[mode][w], c);
    return rc ? rc : c->status;
}

int fm_masked_select(int dtype, int ndim, const int64_t *shape, intptr_t out, int64_t cap,
                     intptr_t src, const int64_t *ssrc, intptr_t mask, const int64_t *smask,
                     int64_t *count) {
    mask_ctx c = {(char *)out, cap, 0, 0, FM_OK};
    int rc = mask_run(dtype, ndim, shape, src, ssrc, mask, smask, 0, &c);
    if (count) *count = c.count;
    return rc;
}

int fm_masked_put(int dtype, int ndim, const int64_t *shape, intptr_t dst, const int64_t *sdst,
                  intptr_t mask, const int64_t *smask, intptr_t val, int64_t nval, int64_t sval,
                  int64_t *count) {
    if (!fm_dtype_any(dtype)) return FM_ERR_DTYPE;
    if (sval != 0 && nval < 0) return FM_ERR_ARG;
    mask_ctx c = {(char *)val, nval, sval * fm_itemsize[dtype], 0, FM_OK};
    int rc = mask_run(dtype, ndim, shape, dst, sdst, mask, smask, sval ? 1 : 2, &c);
    if (count) *count = c.count;
    return rc;
}
