/* Per-dtype load/store helpers shared by the kernels.
 *
 * Every dtype has a short tag (b u8 i8 i16 i32 i64 f16 bf16 f32 f64), a C storage type ct_<tag>,
 * a compute type cp_<tag> (float for the 16-bit floats, the storage type otherwise), and macros:
 *   LDI_<tag>(p) / LDF_<tag>(p)   load the element at p as int64 / double (for casting)
 *   STI_<tag>(p, v) / STF_<tag>(p, v)   store an int64 / double value with C casting rules
 *   LD_<tag>(p) / ST_<tag>(p, v)   load/store in the compute type (the fast path for kernels)
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
typedef float cp_f16;
typedef float cp_bf16;
typedef float cp_f32;
typedef double cp_f64;

/* the X-macro of all dtypes: X(tag, kind) with kind I (integer-like) or F (floating) */
#define FM_ALL_DTYPES(X) \
    X(b, I) X(u8, I) X(i8, I) X(i16, I) X(i32, I) X(i64, I) X(f16, F) X(bf16, F) X(f32, F) X(f64, F)

#define LDI_b(p) ((int64_t) * (const uint8_t *)(p))
#define LDI_u8(p) ((int64_t) * (const uint8_t *)(p))
#define LDI_i8(p) ((int64_t) * (const int8_t *)(p))
#define LDI_i16(p) ((int64_t) * (const int16_t *)(p))
#define LDI_i32(p) ((int64_t) * (const int32_t *)(p))
#define LDI_i64(p) (*(const int64_t *)(p))

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

#define STI_b(p, v) (*(uint8_t *)(p) = (uint8_t)((v) != 0))
#define STI_u8(p, v) (*(uint8_t *)(p) = (uint8_t)(v))
#define STI_i8(p, v) (*(int8_t *)(p) = (int8_t)(v))
#define STI_i16(p, v) (*(int16_t *)(p) = (int16_t)(v))
#define STI_i32(p, v) (*(int32_t *)(p) = (int32_t)(v))
#define STI_i64(p, v) (*(int64_t *)(p) = (int64_t)(v))
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
#define STF_f16(p, v) (*(fm_f16 *)(p) = (fm_f16)(v))
#define STF_bf16(p, v) (*(fm_bf16 *)(p) = fm_f32_to_bf16((float)(v)))
#define STF_f32(p, v) (*(float *)(p) = (float)(v))
#define STF_f64(p, v) (*(double *)(p) = (double)(v))

/* compute-type load/store */
#define LD_b(p) (*(const uint8_t *)(p))
#define LD_u8(p) (*(const uint8_t *)(p))
#define LD_i8(p) (*(const int8_t *)(p))
#define LD_i16(p) (*(const int16_t *)(p))
#define LD_i32(p) (*(const int32_t *)(p))
#define LD_i64(p) (*(const int64_t *)(p))
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
#define ST_f16(p, v) (*(fm_f16 *)(p) = (fm_f16)(v))
#define ST_bf16(p, v) (*(fm_bf16 *)(p) = fm_f32_to_bf16((float)(v)))
#define ST_f32(p, v) (*(float *)(p) = (float)(v))
#define ST_f64(p, v) (*(double *)(p) = (double)(v))

#endif
