/* Internal header for fiamma-core's C sources: types, dtype helpers, the strided iterator. */
#ifndef FIAMMA_H
#define FIAMMA_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <math.h>

#include "fiamma_api.h"

/* Hot loops are compiled for several ISA levels and picked at load time (ifunc), so one wheel
   runs everywhere and still uses AVX2/AVX-512 where the machine has it. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FM_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FM_CLONES
#endif

#define FM_RESTRICT __restrict__

typedef uint8_t fm_bool;
typedef _Float16 fm_f16;
typedef uint16_t fm_bf16;

static inline float fm_bf16_to_f32(fm_bf16 v) {
    uint32_t u = ((uint32_t)v) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline fm_bf16 fm_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (fm_bf16)((u >> 16) | 0x0040u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (fm_bf16)(u >> 16);
}

static const int fm_itemsize[FM_NDTYPES] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16, 2, 4, 8};

/* The real dtypes: what every arithmetic table covers (complex entries of tables sized
   FM_NDTYPES are NULL/0), so an op that checks fm_dtype_ok rejects complex with FM_ERR_DTYPE.
   The unsigned uint16/uint32/uint64 (codes after complex) are real. */
static inline int fm_dtype_ok(int dt) {
    return (dt >= 0 && dt < FM_COMPLEX64) || (dt >= FM_UINT16 && dt < FM_NDTYPES);
}
static inline int fm_is_complex(int dt) { return dt == FM_COMPLEX64 || dt == FM_COMPLEX128; }
/* every dtype, complex included: for the kernels that only move bytes (copy, gather, masks) */
static inline int fm_dtype_any(int dt) { return dt >= 0 && dt < FM_NDTYPES; }
/* 16 bytes moved as one element (complex128); 8-byte aligned like its parts */
typedef struct { uint64_t lo, hi; } fm_b128;
static inline int fm_is_float(int dt) { return dt >= FM_FLOAT16 && dt < FM_UINT16; }

/* ---- strided N-d iteration ----------------------------------------------------------------
   An inner loop gets n elements, the operands' base pointers and their BYTE strides along the
   innermost (coalesced) dimension. `ctx` carries op parameters. */
typedef void (*fm_inner_fn)(int64_t n, char **ptrs, const int64_t *strides, const void *ctx);

#define FM_MAX_OPERANDS 8

/* Iterate `nops` operands of the given shape. strides[k] are ELEMENT strides of operand k and
   itemsizes[k] its element size. Dimensions of size 1 are dropped and adjacent dimensions that
   are contiguous for every operand are merged before the loop. Returns FM_OK or an error. */
int fm_iterate(int nops, int ndim, const int64_t *shape, char **base,
               const int64_t *const *strides, const int *itemsizes,
               fm_inner_fn fn, const void *ctx);

/* bytes of one element of dtype holding fval (or ival when use_int), into buf[8] */
void fm_scalar_bytes(int dtype, double fval, int64_t ival, int use_int, char *buf);

/* number of elements, or -1 if ndim/shape is invalid */
int64_t fm_numel(int ndim, const int64_t *shape);

/* Threads for an OpenMP region doing `work` units (e.g. multiply-adds or elements): 1 below
   `min_work`, in a forked child (libgomp's pool does not survive fork) or when OpenBLAS is set
   to one thread; else OpenBLAS's thread count (the one knob users set, torch.set_num_threads
   style). Defined in matmul.c. */
int fm_par_threads(double work, double min_work);

#endif
