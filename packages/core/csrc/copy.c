/* Strided copy with casting between every pair of dtypes; fill; single-element reads. */
#include "dtypes.h"

/* copy_<from>_<to>: one inner loop per (source, destination) pair */
#define DEF_COPY(TO, TOK, FROM, KIND)                                                       \
    FM_CLONES static void copy_##FROM##_##TO(int64_t n, char **p, const int64_t *s,         \
                                              const void *ctx) {                           \
        (void)ctx;                                                                          \
        char *o = p[0];                                                                     \
        const char *in = p[1];                                                              \
        if (s[0] == (int64_t)sizeof(ct_##TO) && s[1] == (int64_t)sizeof(ct_##FROM)) {       \
            ct_##TO *FM_RESTRICT oo = (ct_##TO *)o;                                         \
            const ct_##FROM *FM_RESTRICT ii = (const ct_##FROM *)in;                        \
            for (int64_t k = 0; k < n; k++) ST##KIND##_##TO(&oo[k], LD##KIND##_##FROM(&ii[k])); \
            return;                                                                         \
        }                                                                                   \
        for (int64_t k = 0; k < n; k++, o += s[0], in += s[1])                              \
            ST##KIND##_##TO(o, LD##KIND##_##FROM(in));                                      \
    }

#define COPY_ROW(FROM, KIND)                                                                \
    DEF_COPY(b, I, FROM, KIND) DEF_COPY(u8, I, FROM, KIND) DEF_COPY(i8, I, FROM, KIND)      \
    DEF_COPY(i16, I, FROM, KIND) DEF_COPY(i32, I, FROM, KIND) DEF_COPY(i64, I, FROM, KIND)  \
    DEF_COPY(f16, F, FROM, KIND) DEF_COPY(bf16, F, FROM, KIND) DEF_COPY(f32, F, FROM, KIND) \
    DEF_COPY(f64, F, FROM, KIND) DEF_COPY(u16, I, FROM, KIND) DEF_COPY(u32, I, FROM, KIND)  \
    DEF_COPY(u64, I, FROM, KIND)

/* (kind U, uint64, sources load with LDU_u64 and store with STU_<to>) */
FM_ALL_DTYPES(COPY_ROW)

#define COPY_ENTRY(FROM) [CODE_##FROM] = FM_TABLE(copy_##FROM##_),

/* indexed [from][to] */
static const fm_inner_fn copy_table[FM_NDTYPES][FM_NDTYPES] = {
    COPY_ENTRY(b) COPY_ENTRY(u8) COPY_ENTRY(i8) COPY_ENTRY(i16) COPY_ENTRY(i32)
    COPY_ENTRY(i64) COPY_ENTRY(f16) COPY_ENTRY(bf16) COPY_ENTRY(f32) COPY_ENTRY(f64)
    COPY_ENTRY(u16) COPY_ENTRY(u32) COPY_ENTRY(u64)};

/* same-dtype copies move bytes: one loop per element size */
#define DEF_MOVE(BITS)                                                                      \
    FM_CLONES static void move_##BITS(int64_t n, char **p, const int64_t *s, const void *ctx) { \
        (void)ctx;                                                                          \
        if (s[0] == BITS / 8 && s[1] == BITS / 8) {                                         \
            memcpy(p[0], p[1], (size_t)n * (BITS / 8));                                     \
            return;                                                                         \
        }                                                                                   \
        char *o = p[0];                                                                     \
        const char *in = p[1];                                                              \
        for (int64_t k = 0; k < n; k++, o += s[0], in += s[1])                              \
            *(uint##BITS##_t *)o = *(const uint##BITS##_t *)in;                             \
    }
DEF_MOVE(8)
DEF_MOVE(16)
DEF_MOVE(32)
DEF_MOVE(64)

FM_CLONES static void move_128(int64_t n, char **p, const int64_t *s, const void *ctx) {
    (void)ctx;
    if (s[0] == 16 && s[1] == 16) {
        memcpy(p[0], p[1], (size_t)n * 16);
        return;
    }
    char *o = p[0];
    const char *in = p[1];
    for (int64_t k = 0; k < n; k++, o += s[0], in += s[1]) *(fm_b128 *)o = *(const fm_b128 *)in;
}

static fm_inner_fn move_for(int itemsize) {
    switch (itemsize) {
        case 1: return move_8;
        case 2: return move_16;
        case 4: return move_32;
        case 16: return move_128;
        default: return move_64;
    }
}

/* ---- casts to and from complex (PyTorch's rules: real -> complex has imaginary part 0,
   complex -> real keeps the real part, complex -> bool is true when either part is nonzero) */

#define DEF_TOCX(FROM, KIND)                                                                \
    static void c64_from_##FROM(int64_t n, char **p, const int64_t *s, const void *ctx) {  \
        (void)ctx;                                                                          \
        char *o = p[0];                                                                     \
        const char *in = p[1];                                                              \
        for (int64_t k = 0; k < n; k++, o += s[0], in += s[1]) {                            \
            ((float *)o)[0] = (float)LDD_##KIND(FROM, in);                                  \
            ((float *)o)[1] = 0.0f;                                                         \
        }                                                                                   \
    }                                                                                       \
    static void c128_from_##FROM(int64_t n, char **p, const int64_t *s, const void *ctx) { \
        (void)ctx;                                                                          \
        char *o = p[0];                                                                     \
        const char *in = p[1];                                                              \
        for (int64_t k = 0; k < n; k++, o += s[0], in += s[1]) {                            \
            ((double *)o)[0] = LDD_##KIND(FROM, in);                                        \
            ((double *)o)[1] = 0.0;                                                         \
        }                                                                                   \
    }                                                                                       \
    static void FROM##_from_c64(int64_t n, char **p, const int64_t *s, const void *ctx) {  \
        (void)ctx;                                                                          \
        char *o = p[0];                                                                     \
        const char *in = p[1];                                                              \
        for (int64_t k = 0; k < n; k++, o += s[0], in += s[1])                              \
            STF_##FROM(o, (double)((const float *)in)[0]);                                  \
    }                                                                                       \
    static void FROM##_from_c128(int64_t n, char **p, const int64_t *s, const void *ctx) { \
        (void)ctx;                                                                          \
        char *o = p[0];                                                                     \
        const char *in = p[1];                                                              \
        for (int64_t k = 0; k < n; k++, o += s[0], in += s[1])                              \
            STF_##FROM(o, ((const double *)in)[0]);                                         \
    }
FM_ALL_DTYPES(DEF_TOCX)

static void b_from_cx(int64_t n, char **p, const int64_t *s, const void *ctx) {
    int wide = ctx != NULL;
    char *o = p[0];
    const char *in = p[1];
    for (int64_t k = 0; k < n; k++, o += s[0], in += s[1]) {
        double re = wide ? ((const double *)in)[0] : ((const float *)in)[0];
        double im = wide ? ((const double *)in)[1] : ((const float *)in)[1];
        *(uint8_t *)o = (uint8_t)(re != 0 || im != 0);
    }
}

static void c64_from_c128(int64_t n, char **p, const int64_t *s, const void *ctx) {
    (void)ctx;
    char *o = p[0];
    const char *in = p[1];
    for (int64_t k = 0; k < n; k++, o += s[0], in += s[1]) {
        ((float *)o)[0] = (float)((const double *)in)[0];
        ((float *)o)[1] = (float)((const double *)in)[1];
    }
}

static void c128_from_c64(int64_t n, char **p, const int64_t *s, const void *ctx) {
    (void)ctx;
    char *o = p[0];
    const char *in = p[1];
    for (int64_t k = 0; k < n; k++, o += s[0], in += s[1]) {
        ((double *)o)[0] = ((const float *)in)[0];
        ((double *)o)[1] = ((const float *)in)[1];
    }
}

#define CX_ROW(T) T##_from_c64, T##_from_c128
static const fm_inner_fn from_cx_table[FM_NDTYPES][2] = {
    [FM_BOOL] = {b_from_cx, b_from_cx}, [FM_UINT8] = {CX_ROW(u8)}, [FM_INT8] = {CX_ROW(i8)},
    [FM_INT16] = {CX_ROW(i16)}, [FM_INT32] = {CX_ROW(i32)}, [FM_INT64] = {CX_ROW(i64)},
    [FM_FLOAT16] = {CX_ROW(f16)}, [FM_BFLOAT16] = {CX_ROW(bf16)}, [FM_FLOAT32] = {CX_ROW(f32)},
    [FM_FLOAT64] = {CX_ROW(f64)}, [FM_UINT16] = {CX_ROW(u16)}, [FM_UINT32] = {CX_ROW(u32)},
    [FM_UINT64] = {CX_ROW(u64)}};
#define TO_ROW(T) c64_from_##T, c128_from_##T
static const fm_inner_fn to_cx_table[FM_NDTYPES][2] = {
    [FM_BOOL] = {TO_ROW(b)}, [FM_UINT8] = {TO_ROW(u8)}, [FM_INT8] = {TO_ROW(i8)},
    [FM_INT16] = {TO_ROW(i16)}, [FM_INT32] = {TO_ROW(i32)}, [FM_INT64] = {TO_ROW(i64)},
    [FM_FLOAT16] = {TO_ROW(f16)}, [FM_BFLOAT16] = {TO_ROW(bf16)}, [FM_FLOAT32] = {TO_ROW(f32)},
    [FM_FLOAT64] = {TO_ROW(f64)}, [FM_UINT16] = {TO_ROW(u16)}, [FM_UINT32] = {TO_ROW(u32)},
    [FM_UINT64] = {TO_ROW(u64)}};

/* the inner loop casting dtype_in to dtype_out (both valid, different); *ctx is set for the
   complex -> bool loop, which reads either width */
static fm_inner_fn cast_fn(int dtype_out, int dtype_in, const void **ctx) {
    static const int wide = 1;
    *ctx = NULL;
    int cin = fm_is_complex(dtype_in), cout = fm_is_complex(dtype_out);
    if (cin && cout) return dtype_out == FM_COMPLEX64 ? c64_from_c128 : c128_from_c64;
    if (cout) return to_cx_table[dtype_in][dtype_out - FM_COMPLEX64];
    if (cin) {
        if (dtype_out == FM_BOOL && dtype_in == FM_COMPLEX128) *ctx = &wide;
        return from_cx_table[dtype_out][dtype_in - FM_COMPLEX64];
    }
    return copy_table[dtype_in][dtype_out];
}

int fm_copy(int dtype_out, int dtype_in, int ndim, const int64_t *shape, intptr_t out,
            const int64_t *sout, intptr_t in, const int64_t *sin) {
    if (!fm_dtype_any(dtype_out) || !fm_dtype_any(dtype_in)) return FM_ERR_DTYPE;
    char *base[2] = {(char *)out, (char *)in};
    const int64_t *st[2] = {sout, sin};
    int isz[2] = {fm_itemsize[dtype_out], fm_itemsize[dtype_in]};
    const void *ctx = NULL;
    fm_inner_fn fn = dtype_out == dtype_in ? move_for(isz[0]) : cast_fn(dtype_out, dtype_in, &ctx);
    return fm_iterate(2, ndim, shape, base, st, isz, fn, ctx);
}

int fm_copy_contig(int dtype_out, int dtype_in, int64_t n, intptr_t out, intptr_t in) {
    if (!fm_dtype_any(dtype_out) || !fm_dtype_any(dtype_in)) return FM_ERR_DTYPE;
    if (n < 0) return FM_ERR_ARG;
    if (n == 0) return FM_OK;
    char *base[2] = {(char *)out, (char *)in};
    int64_t s[2] = {fm_itemsize[dtype_out], fm_itemsize[dtype_in]};
    const void *ctx = NULL;
    fm_inner_fn fn = dtype_out == dtype_in ? move_for((int)s[0]) : cast_fn(dtype_out, dtype_in, &ctx);
    fn(n, base, s, ctx);
    return FM_OK;
}

/* ---- fill ---- */
#define DEF_FILL(BITS)                                                                      \
    FM_CLONES static void fill_##BITS(int64_t n, char **p, const int64_t *s, const void *ctx) { \
        uint##BITS##_t v;                                                                   \
        memcpy(&v, ctx, sizeof(v));                                                         \
        if (s[0] == BITS / 8) {                                                             \
            uint##BITS##_t *FM_RESTRICT o = (uint##BITS##_t *)p[0];                         \
            for (int64_t k = 0; k < n; k++) o[k] = v;                                       \
            return;                                                                         \
        }                                                                                   \
        char *o = p[0];                                                                     \
        for (int64_t k = 0; k < n; k++, o += s[0]) *(uint##BITS##_t *)o = v;                \
    }
DEF_FILL(8)
DEF_FILL(16)
DEF_FILL(32)
DEF_FILL(64)

/* convert a double or int64 into the bytes of one element of dtype */
static void scalar_bytes(int dtype, double fval, int64_t ival, int use_int, char *buf) {
#define SB_CASE(TAG, KIND, CODE)                                      \
    case CODE:                                                        \
        if (use_int) STI_##TAG(buf, ival); else STF_##TAG(buf, fval); \
        break;
    switch (dtype) {
        SB_CASE(b, I, FM_BOOL)
        SB_CASE(u8, I, FM_UINT8)
        SB_CASE(i8, I, FM_INT8)
        SB_CASE(i16, I, FM_INT16)
        SB_CASE(i32, I, FM_INT32)
        SB_CASE(i64, I, FM_INT64)
        SB_CASE(f16, F, FM_FLOAT16)
        SB_CASE(bf16, F, FM_BFLOAT16)
        SB_CASE(f32, F, FM_FLOAT32)
        SB_CASE(f64, F, FM_FLOAT64)
        SB_CASE(u16, I, FM_UINT16)
        SB_CASE(u32, I, FM_UINT32)
        SB_CASE(u64, I, FM_UINT64)
    }
#undef SB_CASE
}

int fm_fill(int dtype, int ndim, const int64_t *shape, intptr_t out, const int64_t *sout,
            double fval, int64_t ival, int use_int) {
    if (!fm_dtype_ok(dtype)) return FM_ERR_DTYPE;
    _Alignas(8) char buf[8] = {0};
    scalar_bytes(dtype, fval, ival, use_int, buf);
    int isz = fm_itemsize[dtype];
    fm_inner_fn fn = isz == 1 ? fill_8 : isz == 2 ? fill_16 : isz == 4 ? fill_32 : fill_64;
    char *base[1] = {(char *)out};
    const int64_t *st[1] = {sout};
    return fm_iterate(1, ndim, shape, base, st, &isz, fn, buf);
}

double fm_get_f64(int dtype, intptr_t ptr) {
    const char *p = (const char *)ptr;
    switch (dtype) {
        case FM_BOOL: case FM_UINT8: return (double)LDI_u8(p);
        case FM_INT8: return (double)LDI_i8(p);
        case FM_INT16: return (double)LDI_i16(p);
        case FM_INT32: return (double)LDI_i32(p);
        case FM_INT64: return (double)LDI_i64(p);
        case FM_FLOAT16: return LDF_f16(p);
        case FM_BFLOAT16: return LDF_bf16(p);
        case FM_FLOAT32: return LDF_f32(p);
        case FM_FLOAT64: return LDF_f64(p);
        case FM_UINT16: return (double)LDI_u16(p);
        case FM_UINT32: return (double)LDI_u32(p);
        case FM_UINT64: return (double)LDU_u64(p);
    }
    return 0.0;
}

int64_t fm_get_i64(int dtype, intptr_t ptr) {
    const char *p = (const char *)ptr;
    switch (dtype) {
        case FM_BOOL: case FM_UINT8: return LDI_u8(p);
        case FM_INT8: return LDI_i8(p);
        case FM_INT16: return LDI_i16(p);
        case FM_INT32: return LDI_i32(p);
        case FM_INT64: return LDI_i64(p);
        case FM_UINT16: return LDI_u16(p);
        case FM_UINT32: return LDI_u32(p);
        case FM_UINT64: return LDI_u64(p); /* the bits: callers read it back as unsigned */
        default: return fm_f2i(fm_get_f64(dtype, ptr));
    }
}

/* scalar_bytes is shared with the elementwise kernels */
void fm_scalar_bytes(int dtype, double fval, int64_t ival, int use_int, char *buf) {
    scalar_bytes(dtype, fval, ival, use_int, buf);
}
