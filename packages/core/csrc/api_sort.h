/* Sorting and searching (sort.c). cffi cdef rules: plain declarations and integer #defines only.
 *
 * The dim-wise kernels take the input's shape and element strides, the dimension `dim` they work
 * along, and two outputs: values (the input's dtype; 0 to skip) and indices (int64; 0 to skip),
 * each with its own element strides given with the input's ndim. An output's extent along `dim`
 * is the op's (n for sort, k for topk, 1 for the selections: the stride there is ignored).
 * Order everywhere: NaN is larger than every number (NaNs equal among themselves), -0.0 == 0.0,
 * ties keep the input order (stable). Lanes longer than 2^32 - 1 elements return FM_ERR_ARG.
 */

int fm_sort(int dtype, int ndim, const int64_t *shape, intptr_t in, const int64_t *sin, int dim,
            int descending, intptr_t vout, const int64_t *svout, intptr_t iout,
            const int64_t *siout);

/* the k largest (largest=1) or smallest along dim, in sorted order; 0 <= k <= shape[dim] */
int fm_topk(int dtype, int ndim, const int64_t *shape, intptr_t in, const int64_t *sin, int dim,
            int64_t k, int largest, intptr_t vout, const int64_t *svout, intptr_t iout,
            const int64_t *siout);

/* one element per lane: KTH the k-th smallest (0-based) of the stable order, MEDIAN the lower
   median (the first NaN if the lane has one), NANMEDIAN the lower median of the non-NaN values,
   MODE the smallest of the most frequent values (NaNs all distinct) with its last index */
#define FM_SEL_KTH 0
#define FM_SEL_MEDIAN 1
#define FM_SEL_NANMEDIAN 2
#define FM_SEL_MODE 3
int fm_select(int mode, int dtype, int ndim, const int64_t *shape, intptr_t in,
              const int64_t *sin, int dim, int64_t k, intptr_t vout, const int64_t *svout,
              intptr_t iout, const int64_t *siout);

/* running max (ismin=0) / min along dim with the index of the last extreme; NaN propagates */
int fm_cumext(int ismin, int dtype, int ndim, const int64_t *shape, intptr_t in,
              const int64_t *sin, int dim, intptr_t vout, const int64_t *svout, intptr_t iout,
              const int64_t *siout);

/* Binary search of `nval` values per lane (contiguous, lane stride val_ls elements) in sorted
   sequences of nseq elements (contiguous, lane stride seq_ls; 0 = one sequence for all lanes),
   same dtype, IEEE comparisons like PyTorch. `sorter` (int64, lane stride sorter_ls, or 0)
   gives the sorted order; an entry outside [0, nseq) returns FM_ERR_INDEX with it in *bad.
   out: int64 or (out_int32) int32, contiguous, nlanes * nval. */
int fm_searchsorted(int dtype, int64_t nlanes, int64_t nseq, intptr_t seq, int64_t seq_ls,
                    intptr_t sorter, int64_t sorter_ls, int64_t nval, intptr_t vals,
                    int64_t val_ls, int right, int out_int32, intptr_t out, int64_t *bad);

/* Groups of equal consecutive rows (m elements each, contiguous) of `data`, visited in the order
   `order` (int64 row numbers, or 0: 0..n-1). NaNs are never equal. Writes, per group g, first[g]
   (the data row of its first member), counts[g] (or 0 to skip), and per visited row r
   inverse[pos[r]] = g where pos = `origpos` (int64, or 0: r itself; inverse 0 to skip).
   *ngroups receives the number of groups. An order or origpos entry outside [0, n) returns
   FM_ERR_INDEX with it in *ngroups. */
int fm_unique_runs(int dtype, int64_t n, int64_t m, intptr_t data, intptr_t order,
                   intptr_t origpos, intptr_t first, intptr_t inverse, intptr_t counts,
                   int64_t *ngroups);

/* the stable lexicographic order of n rows of m contiguous elements into perm (int64) */
int fm_sort_rows(int dtype, int64_t n, int64_t m, intptr_t data, intptr_t perm);
