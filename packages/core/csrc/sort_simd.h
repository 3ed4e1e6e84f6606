/* AVX-512 sort of bare 32-bit keys (sort_simd.c), used by sort.c for values-only sorts. Not a
   cffi header (internal to the C library). */
#ifndef FIAMMA_SORT_SIMD_H
#define FIAMMA_SORT_SIMD_H
#include <stdint.h>

/* whether this CPU runs fm_sort_u32 */
int fm_sort_u32_available(void);
/* a[0..n) ascending (unsigned), on up to nthreads OpenMP threads; FM_OK, FM_ERR_NOMEM, or
   FM_ERR_OP where the CPU lacks AVX-512 */
int fm_sort_u32(uint32_t *a, int64_t n, int nthreads);

#endif
