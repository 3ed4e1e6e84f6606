/* Index-op kernels (indexops.c): the dim-wise gather/scatter family behind gather, scatter,
 * scatter_add, scatter_reduce, index_select, index_add, index_copy, index_fill, take_along_dim;
 * plus bincount and histc.
 *
 * fm_ixop runs over an N-d iteration space `shape` with three operands:
 * - `a`: the dense operand (gather: the result; scatter: the values, all-zero strides for one
 *   value), ELEMENT strides sa;
 * - `b`: the indexed tensor, ELEMENT strides sb per iteration dim (0 along the indexed dim);
 * - `idx`: int64 indices, ELEMENT strides sidx (0 where the index is broadcast).
 * At iteration point p, v = idx[p] must satisfy 0 <= v < isize (wrap != 0 first adds isize to a
 * negative v); the element it addresses is t = b[p] + v * istride. Then
 *   GATHER: a[p] = t;  SCATTER: t = a[p];  ADD/MUL/MAX/MIN: t = op(t, a[p])
 * (ADD on bool is logical or, MUL logical and; MAX/MIN propagate NaN; integers wrap).
 * Points are visited in row-major order of `shape` for every destination element, so with
 * duplicate indices the last write wins and accumulations run in index order (threads split the
 * work only along dims that move `b`, so two threads never touch one element).
 * A bad index returns FM_ERR_INDEX with the offending value in *bad. With precheck != 0 every
 * index is checked before anything is written (in-place ops leave their input untouched).
 */
#define FM_IXOP_GATHER 0
#define FM_IXOP_SCATTER 1
#define FM_IXOP_ADD 2
#define FM_IXOP_MUL 3
#define FM_IXOP_MAX 4
#define FM_IXOP_MIN 5

int fm_ixop(int mode, int dtype, int ndim, const int64_t *shape,
            intptr_t a, const int64_t *sa, intptr_t b, const int64_t *sb,
            intptr_t idx, const int64_t *sidx, int64_t isize, int64_t istride,
            int wrap, int precheck, int64_t *bad);

/* fm_ixop for a scatter into a fresh b that first holds a copy of init_bytes bytes at init
   (b and init contiguous, same layout): the copy is done slab by slab by the threads that
   scatter into each slab, while it is in cache (no precheck; not for GATHER). */
int fm_ixop_init(int mode, int dtype, int ndim, const int64_t *shape,
                 intptr_t a, const int64_t *sa, intptr_t b, const int64_t *sb,
                 intptr_t idx, const int64_t *sidx, int64_t isize, int64_t istride,
                 int wrap, int precheck, intptr_t init, int64_t init_bytes, int64_t *bad);

/* out[x[i]] += 1 (w == 0: out is int64) or += w[i] (out has wdtype, float32 or float64), for
   n elements of the integer tensor x (dtype uint8..int64, ELEMENT stride sx; w stride sw).
   out holds nbins zeroed elements; a value outside [0, nbins) gives FM_ERR_INDEX, *bad = it. */
int fm_bincount(int dtype, int64_t n, intptr_t x, int64_t sx, int wdtype, intptr_t w, int64_t sw,
                intptr_t out, int64_t nbins, int64_t *bad);

/* histogram of the floating tensor x into `bins` equal bins over [lo, hi] (edges: the bins + 1
   bin edges; elements outside [lo, hi] and NaN are ignored; hi falls into the last bin);
   out: bins int64 counts, zeroed by the caller. */
int fm_histc(int dtype, int ndim, const int64_t *shape, intptr_t x, const int64_t *sx,
             int64_t bins, double lo, double hi, const double *edges, intptr_t out);
