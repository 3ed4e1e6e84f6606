/* Per-dtype load/store helpers shared by the kernels.
 *
 * Every real dtype has a short tag (b u8 i8 i16 i32 i64 f16 bf16 f32 f64 u16 u32 u64), a C storage
 * type ct_<tag>,
 * a compute type cp_<tag> (float for the 16-bit floats, the storage type otherwise), and macros:
 *   LDI_<tag>(p) / LDF_<tag>(p)   load the element at p as int64 / double (for casting)
 *   STI_<tag>(p, v) / STF_<tag>(p, v)   store an int64 / double value with C casting rules
 *   LD_<tag>(p) / ST_<tag>(p, v)   load/store in the compute type (the fast path for kernels)
 * uint64 is of kind U: LDU_u64 loads it as uint64 and STU_<tag>(p, v) stores a uint64 into any
 * dtype (through int64 bits for the integers, as an unsigned value for the floats), since its
 * values above INT64_MAX do not survive the int64 route of kind I. LDI_u64 gives its int64 bits.
 */
#ifndef FIAMMA_DTYPES_H
#define FIAMMA_DTYPES_H

#include "fiamma.h"

typedef uint8_t ct_b;
typedef uint8_t ct_u8;
typedef int8_t ct_i8;
typedef int16_t ct_i16;
typedef int32_t ct_i32;
typedef int64_t ct_i64;
typedef uint16_t ct_u16;
typedef uint32_t ct_u32;
typedef uint64_t ct_u64;
typedef fm_f16 ct_f16;
typedef fm_bf16 ct_bf16;
typedef float ct_f32;
typedef double ct_f64;

typedef uint8_t cp_b;
typedef uint8_t cp_u8;
typedef int8_t cp_i8;
typedef int16_t cp_i16;
typedef int32_t cp_i32;
typedef int64_t cp_i64;
typedef uint32_t cp_u16; /* (uint16 * uint16 would multiply as int and overflow) */
typedef uint32_t cp_u32;
typedef uint64_t cp_u64;
typedef float cp_f16;
typedef float cp_bf16;
typedef float cp_f32;
typedef double cp_f64;

/* the X-macro of all real dtypes: X(tag, kind) with kind I (integer-like), U (uint64) or F
   (floating) */
#define FM_ALL_DTYPES(X) \
    X(b, I) X(u8, I) X(i8, I) X(i16, I) X(i32, I) X(i64, I) X(f16, F) X(bf16, F) X(f32, F)    \
    X(f64, F) X(u16, I) X(u32, I) X(u64, U)

/* the dtype code of each tag, and a table indexed by dtype code with one entry P##tag per real
   dtype (complex entries NULL) */
#define CODE_b FM_BOOL
#define CODE_u8 FM_UINT8
#define CODE_i8 FM_INT8
#define CODE_i16 FM_INT16
#define CODE_i32 FM_INT32
#define CODE_i64 FM_INT64
#define CODE_f16 FM_FLOAT16
#define CODE_bf16 FM_BFLOAT16
#define CODE_f32 FM_FLOAT32
#define CODE_f64 FM_FLOAT64
#define CODE_u16 FM_UINT16
#define CODE_u32 FM_UINT32
#define CODE_u64 FM_UINT64
#define FM_TABLE(P)                                                                           \
    {[FM_BOOL] = P##b, [FM_UINT8] = P##u8, [FM_INT8] = P##i8, [FM_INT16] = P##i16,            \
     [FM_INT32] = P##i32, [FM_INT64] = P##i64, [FM_FLOAT16] = P##f16, [FM_BFLOAT16] = P##bf16, \
     [FM_FLOAT32] = P##f32, [FM_FLOAT64] = P##f64, [FM_UINT16] = P##u16, [FM_UINT32] = P##u32,  \
     [FM_UINT64] = P##u64}

#define LDI_b(p) ((int64_t) * (const uint8_t *)(p))
#define LDI_u8(p) ((int64_t) * (const uint8_t *)(p))
#define LDI_i8(p) ((int64_t) * (const int8_t *)(p))
#define LDI_i16(p) ((int64_t) * (const int16_t *)(p))
#define LDI_i32(p) ((int64_t) * (const int32_t *)(p))
#define LDI_i64(p) (*(const int64_t *)(p))
#define LDI_u16(p) ((int64_t) * (const uint16_t *)(p))
#define LDI_u32(p) ((int64_t) * (const uint32_t *)(p))
#define LDI_u64(p) ((int64_t) * (const uint64_t *)(p))
#define LDU_u64(p) (*(const uint64_t *)(p))

#define LDF_f16(p) ((double)*(const fm_f16 *)(p))
#define LDF_bf16(p) ((double)fm_bf16_to_f32(*(const fm_bf16 *)(p)))
#define LDF_f32(p) ((double)*(const float *)(p))
#define LDF_f64(p) (*(const double *)(p))

/* float -> integer: truncate toward zero through int64 (wraps for narrow types, like PyTorch) */
static inline int64_t fm_f2i(double v) {
    if (v != v) return 0;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

/* float -> uint64: values from 2^63 up convert as unsigned (saturating at 2^64 - 1); below
   that through fm_f2i (negative values wrap, like the narrower unsigned types) */
static inline uint64_t fm_f2u(double v) {
    if (v >= 18446744073709551615.0) return UINT64_MAX;
    if (v >= 9223372036854775808.0) return (uint64_t)v;
    return (uint64_t)fm_f2i(v);
}

#define STI_b(p, v) (*(uint8_t *)(p) = (uint8_t)((v) != 0))
#define STI_u8(p, v) (*(uint8_t *)(p) = (uint8_t)(v))
#define STI_i8(p, v) (*(int8_t *)(p) = (int8_t)(v))
#define STI_i16(p, v) (*(int16_t *)(p) = (int16_t)(v))
#define STI_i32(p, v) (*(int32_t *)(p) = (int32_t)(v))
#define STI_i64(p, v) (*(int64_t *)(p) = (int64_t)(v))
#define STI_u16(p, v) (*(uint16_t *)(p) = (uint16_t)(v))
#define STI_u32(p, v) (*(uint32_t *)(p) = (uint32_t)(v))
#define STI_u64(p, v) (*(uint64_t *)(p) = (uint64_t)(v))
#define STI_f16(p, v) (*(fm_f16 *)(p) = (fm_f16)(float)(v))
#define STI_bf16(p, v) (*(fm_bf16 *)(p) = fm_f32_to_bf16((float)(v)))
#define STI_f32(p, v) (*(float *)(p) = (float)(v))
#define STI_f64(p, v) (*(double *)(p) = (double)(v))

#define STF_b(p, v) (*(uint8_t *)(p) = (uint8_t)((v) != 0))
#define STF_u8(p, v) (*(uint8_t *)(p) = (uint8_t)fm_f2i(v))
#define STF_i8(p, v) (*(int8_t *)(p) = (int8_t)fm_f2i(v))
#define STF_i16(p, v) (*(int16_t *)(p) = (int16_t)fm_f2i(v))
#define STF_i32(p, v) (*(int32_t *)(p) = (int32_t)fm_f2i(v))
#define STF_i64(p, v) (*(int64_t *)(p) = fm_f2i(v))
#define STF_u16(p, v) (*(uint16_t *)(p) = (uint16_t)fm_f2i(v))
#define STF_u32(p, v) (*(uint32_t *)(p) = (uint32_t)fm_f2i(v))
#define STF_u64(p, v) (*(uint64_t *)(p) = fm_f2u(v))
#define STF_f16(p, v) (*(fm_f16 *)(p) = (fm_f16)(v))
#define STF_bf16(p, v) (*(fm_bf16 *)(p) = fm_f32_to_bf16((float)(v)))
#define STF_f32(p, v) (*(float *)(p) = (float)(v))
#define STF_f64(p, v) (*(double *)(p) = (double)(v))

/* store a uint64 value (kind U) */
#define STU_b(p, v) STI_b(p, v)
#define STU_u8(p, v) STI_u8(p, v)
#define STU_i8(p, v) STI_i8(p, v)
#define STU_i16(p, v) STI_i16(p, v)
#define STU_i32(p, v) STI_i32(p, v)
#define STU_i64(p, v) STI_i64(p, v)
#define STU_u16(p, v) STI_u16(p, v)
#define STU_u32(p, v) STI_u32(p, v)
#define STU_u64(p, v) STI_u64(p, v)
#define STU_f16(p, v) (*(fm_f16 *)(p) = (fm_f16)(float)(uint64_t)(v))
#define STU_bf16(p, v) (*(fm_bf16 *)(p) = fm_f32_to_bf16((float)(uint64_t)(v)))
#define STU_f32(p, v) (*(float *)(p) = (float)(uint64_t)(v))
#define STU_f64(p, v) (*(double *)(p) = (double)(uint64_t)(v))
/* the double value of an element, for kind I, U and F tags */
#define LDD_I(TAG, p) ((double)LDI_##TAG(p))
#define LDD_U(TAG, p) ((double)LDU_##TAG(p))
#define LDD_F(TAG, p) LDF_##TAG(p)

/* compute-type load/store */
#define LD_b(p) (*(const uint8_t *)(p))
#define LD_u8(p) (*(const uint8_t *)(p))
#define LD_i8(p) (*(const int8_t *)(p))
#define LD_i16(p) (*(const int16_t *)(p))
#define LD_i32(p) (*(const int32_t *)(p))
#define LD_i64(p) (*(const int64_t *)(p))
#define LD_u16(p) (*(const uint16_t *)(p))
#define LD_u32(p) (*(const uint32_t *)(p))
#define LD_u64(p) (*(const uint64_t *)(p))
#define LD_f16(p) ((float)*(const fm_f16 *)(p))
#define LD_bf16(p) (fm_bf16_to_f32(*(const fm_bf16 *)(p)))
#define LD_f32(p) (*(const float *)(p))
#define LD_f64(p) (*(const double *)(p))

#define ST_b(p, v) (*(uint8_t *)(p) = (uint8_t)((v) != 0))
#define ST_u8(p, v) (*(uint8_t *)(p) = (uint8_t)(v))
#define ST_i8(p, v) (*(int8_t *)(p) = (int8_t)(v))
#define ST_i16(p, v) (*(int16_t *)(p) = (int16_t)(v))
#define ST_i32(p, v) (*(int32_t *)(p) = (int32_t)(v))
#define ST_i64(p, v) (*(int64_t *)(p) = (int64_t)(v))
#define ST_u16(p, v) (*(uint16_t *)(p) = (uint16_t)(v))
#define ST_u32(p, v) (*(uint32_t *)(p) = (uint32_t)(v))
#define ST_u64(p, v) (*(uint64_t *)(p) = (uint64_t)(v))
#define ST_f16(p, v) (*(fm_f16 *)(p) = (fm_f16)(v))
#define ST_bf16(p, v) (*(fm_bf16 *)(p) = fm_f32_to_bf16((float)(v)))
#define ST_f32(p, v) (*(float *)(p) = (float)(v))
#define ST_f64(p, v) (*(double *)(p) = (double)(v))

#endif
