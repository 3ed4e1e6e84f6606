/* fiamma-core C API: the declarations cffi sees (cdef) and the C sources include.
 *
 * This file must stay parseable by cffi's cdef: plain declarations and integer #defines only,
 * no #include, no #if, no macros with arguments.
 *
 * Conventions
 * - Data pointers travel as intptr_t (a Python int on the Python side: cheapest to pass).
 * - Shapes and strides are int64_t arrays; strides are in ELEMENTS of the operand's dtype.
 * - Every function that can fail returns an int status (FM_OK == 0); Python turns it into an
 *   exception naming the op. C never touches Python objects.
 * - dtype codes are the FM_* dtype constants below (same order as fiamma's dtype.code).
 */

#define FM_MAX_DIMS 64

/* dtype codes */
#define FM_BOOL 0
#define FM_UINT8 1
#define FM_INT8 2
#define FM_INT16 3
#define FM_INT32 4
#define FM_INT64 5
#define FM_FLOAT16 6
#define FM_BFLOAT16 7
#define FM_FLOAT32 8
#define FM_FLOAT64 9
#define FM_COMPLEX64 10
#define FM_COMPLEX128 11
#define FM_UINT16 12
#define FM_UINT32 13
#define FM_UINT64 14
#define FM_NDTYPES 15

/* status codes */
#define FM_OK 0
#define FM_ERR_NOMEM 1
#define FM_ERR_DTYPE 2
#define FM_ERR_NDIM 3
#define FM_ERR_INDEX 4
#define FM_ERR_ARG 5
#define FM_ERR_OP 6
#define FM_ERR_VALUE 7

/* ---- allocator (alloc.c) ------------------------------------------------------------------ */
intptr_t fm_alloc(int64_t nbytes);          /* 64-byte aligned; 0 on failure */
intptr_t fm_alloc_zeroed(int64_t nbytes);
void fm_free(intptr_t ptr, int64_t nbytes);
/* out[0] bytes in use, out[1] bytes cached, out[2] peak in use, out[3] cache hits,
   out[4] cache misses, out[5] cache limit */
void fm_alloc_stats(int64_t *out);
void fm_alloc_set_cache_limit(int64_t nbytes);
void fm_alloc_empty_cache(void);
void fm_alloc_reset_peak(void);

/* ---- strided copy with casting, fill (copy.c) --------------------------------------------- */
int fm_copy(int dtype_out, int dtype_in, int ndim, const int64_t *shape,
            intptr_t out, const int64_t *sout, intptr_t in, const int64_t *sin);
int fm_copy_contig(int dtype_out, int dtype_in, int64_t n, intptr_t out, intptr_t in);
/* fill with a value given as double (floats) or int64 (ints/bool): use_int selects */
int fm_fill(int dtype, int ndim, const int64_t *shape, intptr_t out, const int64_t *sout,
            double fval, int64_t ival, int use_int);
/* read one element as double / int64 (for .item()) */
double fm_get_f64(int dtype, intptr_t ptr);
int64_t fm_get_i64(int dtype, intptr_t ptr);

/* ---- elementwise (elementwise.c) ---------------------------------------------------------- */
/* Binary ops: a and b have dtype `dtype`; the output dtype is `dtype` for arithmetic ops and
   bool for comparisons (see FM_BIN_* codes, and fm_binary_out_dtype). */
int fm_binary_out_dtype(int op, int dtype);
/* The binary op over strided, broadcast operands: out = op(a, b) over `shape`, computed in
   `dtype` (strides in elements, zero along broadcast dims). a == 0 (or b == 0) means that operand
   is the Python scalar sf (floating dtypes) / si (integer dtypes and bool) converted to dtype in
   C and read with stride 0 (its strides are ignored, may be NULL). p0..p2: the parameters of
   FM_BIN_ADD_ALPHA (a + p0 * b) and FM_BIN_ISCLOSE (rtol, atol, equal_nan); 0 otherwise. */
int fm_binary(int op, int dtype, int ndim, const int64_t *shape,
              intptr_t out, const int64_t *sout,
              intptr_t a, const int64_t *sa,
              intptr_t b, const int64_t *sb,
              double sf, int64_t si, double p0, double p1, double p2);
/* fm_binary's specialisations for n contiguous elements without parameters (the operator fast
   paths: no iterator, no shape or stride arrays; measured in docs/architecture.md): two tensor
   operands, and a tensor and a number (a == 0 or b == 0, as in fm_binary) */
int fm_binary_contig(int op, int dtype, int64_t n, intptr_t out, intptr_t a, intptr_t b);
int fm_binary_scalar_contig(int op, int dtype, int64_t n, intptr_t out, intptr_t a, intptr_t b,
                            double sf, int64_t si);

int fm_unary_out_dtype(int op, int dtype);
/* p0..p2: op parameters (e.g. clamp bounds, nan_to_num replacements) */
int fm_unary(int op, int dtype, int ndim, const int64_t *shape,
             intptr_t out, const int64_t *sout, intptr_t a, const int64_t *sa,
             double p0, double p1, double p2);
int fm_unary_contig(int op, int dtype, int64_t n, intptr_t out, intptr_t a);

/* op codes (FM_BIN_*, FM_UN_*, FM_TER_*) and the ternary / parametrised entry points are in
   api_elementwise.h */
