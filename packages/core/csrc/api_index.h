/* Indexing kernels (index.c): advanced-index gather/scatter, nonzero, boolean-mask select/put.
 *
 * Advanced indexing over an N-d iteration space `shape` (the result of the index op):
 * - `k` index arrays of int64; idx[j] is the address of array j and sidx[j*ndim + d] its ELEMENT
 *   stride along result dim d (0 where the array is broadcast).
 * - the indexed tensor is given by a base address and per-result-dim strides (0 along the dims
 *   the index arrays produce); index j then moves it by wrap(value) * istride[j] elements, where
 *   isize[j] is the size of the indexed dimension (values in [-isize, isize) are valid and
 *   negative ones wrap).
 * A bad index stops the kernel with FM_ERR_INDEX and bad[0] = j (which array), bad[1] = value.
 */

/* out[p] = src[p + sum_j wrap(idx_j[p]) * istride[j]] for every p in shape */
int fm_index_gather(int dtype, int ndim, const int64_t *shape,
                    intptr_t out, const int64_t *sout,
                    intptr_t src, const int64_t *ssrc,
                    int k, const intptr_t *idx, const int64_t *sidx,
                    const int64_t *isize, const int64_t *istride, int64_t *bad);

/* dst[p + sum_j wrap(idx_j[p]) * istride[j]] = val[p]   (or += when accumulate != 0).
   Every index is checked before anything is written; with duplicate indices the last write in
   row-major order of `shape` wins (accumulate adds them all). */
int fm_index_scatter(int dtype, int ndim, const int64_t *shape,
                     intptr_t dst, const int64_t *sdst,
                     intptr_t val, const int64_t *sval,
                     int k, const intptr_t *idx, const int64_t *sidx,
                     const int64_t *isize, const int64_t *istride,
                     int accumulate, int64_t *bad);

/* number of nonzero elements (NaN counts as nonzero, -0.0 as zero) */
int fm_nonzero_count(int dtype, int ndim, const int64_t *shape, intptr_t x, const int64_t *sx,
                     int64_t *count);

/* coordinates of the nonzero elements in row-major order: coordinate d of the i-th one goes to
   out[i * srow + d * scol] (int64). At most cap rows are written; FM_ERR_VALUE if x holds more. */
int fm_nonzero(int dtype, int ndim, const int64_t *shape, intptr_t x, const int64_t *sx,
               intptr_t out, int64_t srow, int64_t scol, int64_t cap, int64_t *count);

/* out[i] = the i-th element of src (row-major) whose mask byte is nonzero; out is contiguous,
   at most cap elements (FM_ERR_VALUE if more are selected); *count = the number written. */
int fm_masked_select(int dtype, int ndim, const int64_t *shape,
                     intptr_t out, int64_t cap,
                     intptr_t src, const int64_t *ssrc,
                     intptr_t mask, const int64_t *smask, int64_t *count);

/* the i-th selected element of dst (row-major, mask byte nonzero) = val[i * sval]; val holds
   nval elements, FM_ERR_VALUE if more are selected; *count = the number written. With
   sval == 0 every selected element gets val[0] (nval and *count are not used). */
int fm_masked_put(int dtype, int ndim, const int64_t *shape,
                  intptr_t dst, const int64_t *sdst,
                  intptr_t mask, const int64_t *smask,
                  intptr_t val, int64_t nval, int64_t sval, int64_t *count);
