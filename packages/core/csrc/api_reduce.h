/* Reductions, softmax and cumulative scans (reduce.c). cffi cdef rules: plain declarations and
 * integer #defines only.
 *
 * fm_reduce reduces the dimensions of `in` whose bit is set in `rmask` (bit d = dimension d).
 * `out` has the input's ndim in its stride array `sout` (entries of reduced dimensions are
 * ignored, so a keepdim=False result passes any value there). The output dtype is
 * fm_reduce_out_dtype(op, dtype): the accumulator type for sums (int64 for bool/integers, float32
 * for the 16- and 32-bit floats, float64), the input dtype for max/min/argmax values, bool for
 * all/any, int64 for counts. `aux` is the second operand some ops need (else 0):
 *   VAR, STD, LSE: the per-output centre (mean, resp. max), dtype = the output dtype, read;
 *   ARGMAX, ARGMIN: the int64 indices, written (`out` = the values, may be 0 to skip them);
 *                   exactly one dimension may be reduced (the index counts along it).
 * `p`: the correction of VAR/STD, the order of NORMP. Ops without an identity (max, min,
 * argmax, inf-norms) return FM_ERR_VALUE for an empty reduction with a non-empty result.
 */

#define FM_RED_SUM 0
#define FM_RED_NANSUM 1
#define FM_RED_PROD 2
#define FM_RED_MEAN 3
#define FM_RED_MAX 4
#define FM_RED_MIN 5
#define FM_RED_ALL 6
#define FM_RED_ANY 7
#define FM_RED_COUNTNZ 8
#define FM_RED_NANCOUNT 9
#define FM_RED_NORM1 10
#define FM_RED_NORM2 11
#define FM_RED_NORMP 12
#define FM_RED_NORMINF 13
#define FM_RED_NORMNINF 14
#define FM_RED_NORM0 15
#define FM_RED_VAR 16
#define FM_RED_STD 17
#define FM_RED_LSE 18
#define FM_RED_ARGMAX 19
#define FM_RED_ARGMIN 20
#define FM_NRED 21

int fm_reduce_out_dtype(int op, int dtype);
int fm_reduce(int op, int dtype, int ndim, const int64_t *shape, intptr_t in,
              const int64_t *sin, uint64_t rmask, intptr_t out, const int64_t *sout,
              intptr_t aux, const int64_t *saux, double p);
/* full reduction of n contiguous elements into one output (the hot path of x.sum()) */
int fm_reduce_contig(int op, int dtype, int64_t n, intptr_t in, intptr_t out, double p);

/* softmax (log=0) or log_softmax (log=1) along `dim`; floating dtypes; out has the input's
   dtype and shape (any strides) */
int fm_softmax(int log, int dtype, int ndim, const int64_t *shape, intptr_t in,
               const int64_t *sin, intptr_t out, const int64_t *sout, int dim);

/* inclusive scans along `dim`; output dtype fm_scan_out_dtype (int64 for bool/integers) */
#define FM_SCAN_CUMSUM 0
#define FM_SCAN_CUMPROD 1
#define FM_NSCAN 2
int fm_scan_out_dtype(int op, int dtype);
int fm_scan(int op, int dtype, int ndim, const int64_t *shape, intptr_t in, const int64_t *sin,
            intptr_t out, const int64_t *sout, int dim);
