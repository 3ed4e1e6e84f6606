/* Sparse compressed (CSR) kernels (sparse.c): the products behind CSR @ dense and its gradients.
 *
 * A CSR matrix of m rows is given by crow (m + 1 int64 offsets), col (nnz int64 column
 * indices) and vals (nnz elements of dtype, FM_FLOAT32 or FM_FLOAT64; other dtypes give
 * FM_ERR_DTYPE and the caller composes the product of dense ops). Dense operands and results
 * are C-contiguous row-major matrices. Every kernel checks the structure before it reads or
 * writes anything through it: crow[0] == 0, crow non-decreasing, crow[m] == nnz and every
 * column in [0, k) (k: the sparse matrix's column count); a violation returns FM_ERR_INDEX with
 * bad[0] = 0 (crow) or 1 (col) and bad[1] = the position, nothing written.
 */

/* out (m x n) = S (m x k) @ d (k x n) */
int fm_csr_mm(int dtype, int64_t m, int64_t k, int64_t n, int64_t nnz, const int64_t *crow,
              const int64_t *col, intptr_t vals, intptr_t d, intptr_t out, int64_t *bad);

/* out (k x n) = S^T @ d, S (m x k), d (m x n) */
int fm_csr_mm_t(int dtype, int64_t m, int64_t k, int64_t n, int64_t nnz, const int64_t *crow,
                const int64_t *col, intptr_t vals, intptr_t d, intptr_t out, int64_t *bad);

/* out[p] = dot(a[row(p)], b[col(p)]) for every stored entry p: a (m x n), b (k x n), out (nnz) */
int fm_csr_sddmm(int dtype, int64_t m, int64_t k, int64_t n, int64_t nnz, const int64_t *crow,
                 const int64_t *col, intptr_t a, intptr_t b, intptr_t out, int64_t *bad);
