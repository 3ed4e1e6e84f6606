/* Matrix products: C = alpha * (A @ B) + beta * C over a broadcast batch (see api_matmul.h).
 *
 * float32 products of some size run on fiamma's own AVX-512 kernel (sgemm.c) where the CPU has
 * it, on OpenMP threads; everything else floating goes to OpenBLAS (scipy-openblas32, symbols
 * prefixed scipy_cblas_). A strided operand is handed to BLAS as it is when it is row-major
 * (unit column stride) or column-major (unit row stride, passed transposed); only other layouts
 * (broadcast, stepped in both dims) are packed into a contiguous scratch buffer first. Vector
 * shapes use dot/gemv, which do not pack. float16/bfloat16 are converted to float32, multiplied
 * in float32 and rounded once. A batch of products is spread over the threads one product at a
 * time (own kernel), or goes to OpenBLAS's gemm_batch_strided where the OpenBLAS at hand has it
 * (looked up at run time: older releases lack it). Integers and bool are widened to int64 and
 * multiplied by a cache-blocked loop with wrapping arithmetic (as PyTorch's integer matmul
 * wraps). Dimensions above the BLAS limit (32-bit sizes) use a portable loop that accumulates
 * in double.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "dtypes.h"
#include "api_matmul.h"
#include "gemm_plan.h"

static int64_t blas_limit = INT_MAX;

#define OWN_MIN_WORK (100.0 * 100.0 * 100.0)
#define OWN_THIN_MIN_WORK (400.0 * 1000.0)
/* measured (best of 400, quiet machine): 2 threads win 1.2x at 96^3, 1.3x at 128 x 512 x 10 */
#define OWN_THREADS_MIN_WORK (600.0 * 1000.0)

int64_t fm_matmul_set_blas_limit(int64_t limit) {
    int64_t prev = blas_limit;
    blas_limit = limit < 0 ? 0 : (limit > INT_MAX ? INT_MAX : limit);
    return prev;
}

int fm_blas_get_num_threads(void) { return scipy_openblas_get_num_threads(); }

/* the one knob for every parallel kernel: OpenBLAS's threads, fiamma's OpenMP team sizes (the
   calling thread's setting, as OpenMP keeps it per thread) */
void fm_blas_set_num_threads(int n) {
    n = n < 1 ? 1 : n;
    scipy_openblas_set_num_threads(n);
    omp_set_num_threads(n);
}

/* ---- gemm_batch_strided, looked up in the loaded OpenBLAS ---------------------------------- */
typedef void (*sgemm_bs_fn)(int, int, int, int, int, int, float, const float *, int, int,
                            const float *, int, int, float, float *, int, int, int);
typedef void (*dgemm_bs_fn)(int, int, int, int, int, int, double, const double *, int, int,
                            const double *, int, int, double, double *, int, int, int);
static sgemm_bs_fn sgemm_bs;
static dgemm_bs_fn dgemm_bs;
static pthread_once_t bs_once = PTHREAD_ONCE_INIT;

static void bs_lookup(void) {
    Dl_info info;
    if (!dladdr((void *)scipy_cblas_sgemm, &info) || !info.dli_fname) return;
    void *h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (!h) return;
    sgemm_bs = (sgemm_bs_fn)dlsym(h, "scipy_cblas_sgemm_batch_strided");
    dgemm_bs = (dgemm_bs_fn)dlsym(h, "scipy_cblas_dgemm_batch_strided");
    if (!sgemm_bs || !dgemm_bs) sgemm_bs = NULL, dgemm_bs = NULL;
    /* the handle stays open: the library is in use for the life of the process anyway */
}

/* ---- fiamma's own float32 kernel (sgemm.c) where the CPU has AVX-512 --------------------- */
/* Small products stay on OpenBLAS, whose unpacked small-matrix kernels win there; so do
   products with a dimension too thin to fill the 12 x 32 register tile. C with 8..31 columns
   and many rows (a classifier's logits) is computed as C^T = B^T A^T by the kernel (sgemm.c),
   measured faster than OpenBLAS from about 128 x 512 x 10. */
static int own_sgemm(int64_t m, int64_t n, int64_t k) {
    double work = (double)m * (double)n * (double)k;
    if (k < 8 || !fm_sgemm_available()) return 0;
    if (m >= 8 && n >= 32) return work >= OWN_MIN_WORK;
    return n >= 8 && m >= 64 && work >= OWN_THIN_MIN_WORK;
}

/* libgomp's thread pool does not survive fork(): a child process (a data-loader worker) that
   entered an OpenMP region would hang, so after a fork the own kernel runs on one thread */
static volatile int forked;
static void on_fork_child(void) { forked = 1; }
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void fork_register(void) { pthread_atfork(NULL, NULL, on_fork_child); }

/* threads for one product: OpenBLAS's setting (the one knob), once the work pays for waking them */
static int own_threads(int64_t m, int64_t n, int64_t k) {
    pthread_once(&fork_once, fork_register);
    if (forked || (double)m * (double)n * (double)k < OWN_THREADS_MIN_WORK) return 1;
    int nt = scipy_openblas_get_num_threads();
    return nt > 1 ? nt : 1;
}

/* ---- a product with a fixed right operand, for loops (gemm_plan.h) ---------------------- */
int fm_gemm_plan_init(fm_gemm_plan *p, int dtype, int64_t m, int64_t n, int64_t k,
                      const void *b, int64_t sbk, int64_t sbn) {
    memset(p, 0, sizeof(*p));
    if ((dtype != FM_FLOAT32 && dtype != FM_FLOAT64) || m < 1 || n < 1 || k < 1) return FM_ERR_ARG;
    if (sbn != 1 && sbk != 1) return FM_ERR_ARG;
    if (m > blas_limit || n > blas_limit || k > blas_limit || sbk > blas_limit || sbn > blas_limit)
        return FM_ERR_ARG;
    p->dtype = dtype, p->m = m, p->n = n, p->k = k, p->b = b, p->sbk = sbk, p->sbn = sbn;
    p->nthreads = 1;
    if (dtype == FM_FLOAT32 && own_sgemm(m, n, k)) {
        int64_t bytes = fm_sgemm_packed_floats(k, n) * 4;
        float *buf = bytes > 0 ? (float *)fm_alloc(bytes) : NULL;
        if (!buf) return FM_ERR_NOMEM;
        if (fm_sgemm_pack(k, n, (intptr_t)b, sbk, sbn, (intptr_t)buf) != FM_OK) {
            fm_free((intptr_t)buf, bytes);
        } else {
            p->packed = buf, p->packed_bytes = bytes;
            p->nthreads = own_threads(m, n, k);
        }
    }
    return FM_OK;
}

int fm_gemm_plan_run(const fm_gemm_plan *p, const void *a, int64_t lda, double beta, void *c,
                     int64_t ldc) {
    if (p->packed)
        return fm_sgemm_packed(p->m, p->n, p->k, (intptr_t)a, lda, (intptr_t)p->packed, beta,
                               (intptr_t)c, ldc, p->nthreads);
    int tb = p->sbn == 1 ? 0 : 1;
    CBLAS_TRANSPOSE tr = tb ? CblasTrans : CblasNoTrans;
    int64_t ldb = tb ? p->sbn : p->sbk;
    if (ldb < (tb ? p->k : p->n)) ldb = tb ? p->k : p->n; /* a single row or column: any ld */
    if (p->dtype == FM_FLOAT32)
        scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, tr, (int)p->m, (int)p->n, (int)p->k, 1.0f,
                          (const float *)a, (int)lda, (const float *)p->b, (int)ldb,
                          (float)beta, (float *)c, (int)ldc);
    else
        scipy_cblas_dgemm(CblasRowMajor, CblasNoTrans, tr, (int)p->m, (int)p->n, (int)p->k, 1.0,
                          (const double *)a, (int)lda, (const double *)p->b, (int)ldb, beta,
                          (double *)c, (int)ldc);
    return FM_OK;
}

void fm_gemm_plan_free(fm_gemm_plan *p) {
    if (p->packed) fm_free((intptr_t)p->packed, p->packed_bytes);
    p->packed = NULL;
}

/* C (m x n, unit column stride, row stride scm) = A @ B + bias (n contiguous floats): the own
   kernel adds the bias as it stores C; otherwise the bias rows are written into C and the
   product accumulated onto them (beta = 1), one call from Python either way */
int fm_mm_bias_f32(int64_t m, int64_t n, int64_t k, intptr_t c, int64_t scm, intptr_t a,
                   int64_t sam, int64_t sak, intptr_t b, int64_t sbk, int64_t sbn, intptr_t bias) {
    if (m <= 0 || n <= 0 || k <= 0 || scm < n) return FM_ERR_OP;
    if (own_sgemm(m, n, k)) {
        int rc = fm_sgemm_bias(m, n, k, a, sam, sak, b, sbk, sbn, bias, c, scm,
                               own_threads(m, n, k));
        if (rc != FM_ERR_OP) return rc; /* else a layout the kernel's bias store lacks */
    }
    float *cp = (float *)c;
    for (int64_t i = 0; i < m; i++) memcpy(cp + i * scm, (const float *)bias, (size_t)n * 4);
    return fm_mm(FM_FLOAT32, m, n, k, c, scm, 1, a, sam, sak, b, sbk, sbn, 1.0, 1.0, 1, 1);
}

int fm_par_threads(double work, double min_work) {
    pthread_once(&fork_once, fork_register);
    if (forked || work < min_work) return 1;
    int nt = scipy_openblas_get_num_threads();
    return nt > 1 ? nt : 1;
}

/* ---- per-call state: the parameters and scratch buffers reused across the batch ---------- */
#define NSLOTS 6
enum { S_A, S_B, S_C, S_A32, S_B32, S_C32 };

typedef struct {
    int dtype;
    int64_t m, n, k;
    double alpha, beta;
    int64_t ialpha, ibeta;
    char *buf[NSLOTS];
    int64_t cap[NSLOTS];
} mm_ctx;

static char *scratch(mm_ctx *x, int slot, int64_t nbytes) {
    if (nbytes < 64) nbytes = 64;
    if (x->cap[slot] >= nbytes) return x->buf[slot];
    if (x->buf[slot]) fm_free((intptr_t)x->buf[slot], x->cap[slot]);
    x->buf[slot] = (char *)fm_alloc(nbytes);
    x->cap[slot] = x->buf[slot] ? nbytes : 0;
    return x->buf[slot];
}

static void scratch_release(mm_ctx *x) {
    for (int i = 0; i < NSLOTS; i++)
        if (x->buf[i]) fm_free((intptr_t)x->buf[i], x->cap[i]);
}

/* strided rows x cols (dtype `from`) <-> row-major buffer (dtype `to`), casting */
static int pack(int to, int from, char *dst, const char *src, int64_t rows, int64_t cols,
                int64_t sr, int64_t sc) {
    int64_t shape[2] = {rows, cols}, sdst[2] = {cols, 1}, ssrc[2] = {sr, sc};
    return fm_copy(to, from, 2, shape, (intptr_t)dst, sdst, (intptr_t)src, ssrc);
}

static int unpack(int to, int from, char *dst, const char *src, int64_t rows, int64_t cols,
                  int64_t sr, int64_t sc) {
    int64_t shape[2] = {rows, cols}, sdst[2] = {sr, sc}, ssrc[2] = {cols, 1};
    return fm_copy(to, from, 2, shape, (intptr_t)dst, sdst, (intptr_t)src, ssrc);
}

/* C = beta * C over a strided m x n block (beta == 0 writes zeros, whatever C held) */
static int scale_c(mm_ctx *x, char *c, int64_t scm, int64_t scn) {
    int dt = x->dtype, isz = fm_itemsize[dt];
    int64_t m = x->m, n = x->n;
    int zero = fm_is_float(dt) ? x->beta == 0.0 : x->ibeta == 0;
    if (zero) {
        int64_t shape[2] = {m, n}, st[2] = {scm, scn};
        return fm_fill(dt, 2, shape, (intptr_t)c, st, 0.0, 0, 1);
    }
    if (fm_is_float(dt) ? x->beta == 1.0 : x->ibeta == 1) return FM_OK;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            char *p = c + (i * scm + j * scn) * isz;
            if (fm_is_float(dt)) {
                double v = fm_get_f64(dt, (intptr_t)p);
                fm_scalar_bytes(dt, x->beta * v, 0, 0, p);
            } else {
                uint64_t v = (uint64_t)fm_get_i64(dt, (intptr_t)p) * (uint64_t)x->ibeta;
                fm_scalar_bytes(dt, 0.0, (int64_t)v, 1, p);
            }
        }
    return FM_OK;
}

/* ---- BLAS layouts ----------------------------------------------------------------------- */
/* Can a rows x cols matrix with strides (sr, sc) go to row-major BLAS as it is? Sets *trans
   (0: row-major with leading dimension *ld, 1: column-major, i.e. its transpose is row-major). */
static int blas_layout(int64_t rows, int64_t cols, int64_t sr, int64_t sc, int *trans,
                       int64_t *ld) {
    int64_t r1 = rows > 1 ? rows : 1, c1 = cols > 1 ? cols : 1;
    int64_t srr = rows == 1 ? c1 : sr, scr = cols == 1 ? 1 : sc;
    if (scr == 1 && srr >= c1 && srr <= blas_limit) {
        *trans = 0;
        *ld = srr;
        return 1;
    }
    int64_t srt = rows == 1 ? 1 : sr, sct = cols == 1 ? r1 : sc;
    if (srt == 1 && sct >= r1 && sct <= blas_limit) {
        *trans = 1;
        *ld = sct;
        return 1;
    }
    return 0;
}

/* a vector's increment for BLAS, or 0 when it cannot be passed as it is */
static int64_t blas_inc(int64_t len, int64_t stride) {
    if (len <= 1) return 1;
    if (stride <= 0 || stride > blas_limit) return 0; /* BLAS reads negative ones from the end */
    return stride;
}

#define CT(t) ((t) ? CblasTrans : CblasNoTrans)

/* float32/float64 product through BLAS; every dimension is within blas_limit */
static int blas_mm(mm_ctx *x, int dt, char *c, int64_t scm, int64_t scn, const char *a,
                   int64_t sam, int64_t sak, const char *b, int64_t sbk, int64_t sbn) {
    int64_t m = x->m, n = x->n, k = x->k;
    int isz = fm_itemsize[dt], f32 = dt == FM_FLOAT32;
    double alpha = x->alpha, beta = x->beta;
    int rc;

    if (m == 1 && n == 1) {
        int64_t inca = blas_inc(k, sak), incb = blas_inc(k, sbk);
        if (!inca || !incb) { /* a broadcast vector: make it contiguous */
            char *p = scratch(x, S_B, k * isz);
            if (!p) return FM_ERR_NOMEM;
            if (!inca) {
                if ((rc = pack(dt, dt, p, a, k, 1, sak, 1))) return rc;
                a = p, inca = 1;
            }
            if (!incb) {
                char *q = scratch(x, S_A, k * isz);
                if (!q) return FM_ERR_NOMEM;
                if ((rc = pack(dt, dt, q, b, k, 1, sbk, 1))) return rc;
                b = q, incb = 1;
            }
        }
        double d = f32 ? (double)scipy_cblas_sdot((int)k, (const float *)a, (int)inca,
                                                  (const float *)b, (int)incb)
                       : scipy_cblas_ddot((int)k, (const double *)a, (int)inca,
                                          (const double *)b, (int)incb);
        d *= alpha;
        if (beta != 0.0) d += beta * fm_get_f64(dt, (intptr_t)c);
        fm_scalar_bytes(dt, d, 0, 0, c);
        return FM_OK;
    }
    if (n == 1 || m == 1) {
        /* matrix times vector: the output is a vector of length m (n == 1) or n (m == 1) */
        int64_t len = n == 1 ? m : n, incy = blas_inc(len, n == 1 ? scm : scn);
        int64_t incx = n == 1 ? blas_inc(k, sbk) : blas_inc(k, sak);
        const char *xv = n == 1 ? b : a;
        if (!incx) { /* a broadcast vector: make it contiguous */
            char *p = scratch(x, S_B, k * isz);
            if (!p) return FM_ERR_NOMEM;
            if ((rc = pack(dt, dt, p, xv, k, 1, n == 1 ? sbk : sak, 1))) return rc;
            xv = p;
            incx = 1;
        }
        if (!incy) return FM_ERR_ARG; /* an output with stride 0: Python never passes one */
        /* the matrix: A (m x k) when n == 1, B (k x n) when m == 1 */
        const char *mat = n == 1 ? a : b;
        int64_t rows = n == 1 ? m : k, cols = n == 1 ? k : n;
        int64_t sr = n == 1 ? sam : sbk, sc = n == 1 ? sak : sbn;
        int t;
        int64_t ld;
        if (!blas_layout(rows, cols, sr, sc, &t, &ld)) {
            char *p = scratch(x, S_A, rows * cols * isz);
            if (!p) return FM_ERR_NOMEM;
            if ((rc = pack(dt, dt, p, mat, rows, cols, sr, sc))) return rc;
            mat = p;
            t = 0;
            ld = cols > 1 ? cols : 1;
        }
        /* y = M x (n == 1) or y = M^T x (m == 1); a column-major M is a transposed row-major */
        int tr = (n == 1 ? 0 : 1) ^ t;
        int64_t R = t ? cols : rows, Cc = t ? rows : cols;
        if (f32)
            scipy_cblas_sgemv(CblasRowMajor, CT(tr), (int)R, (int)Cc, (float)alpha,
                              (const float *)mat, (int)ld, (const float *)xv, (int)incx,
                              (float)beta, (float *)c, (int)incy);
        else
            scipy_cblas_dgemv(CblasRowMajor, CT(tr), (int)R, (int)Cc, alpha, (const double *)mat,
                              (int)ld, (const double *)xv, (int)incx, beta, (double *)c,
                              (int)incy);
        return FM_OK;
    }

    if (f32 && own_sgemm(m, n, k)) {
        int nt = own_threads(m, n, k);
        if (scn == 1 && scm >= n)
            return fm_sgemm(m, n, k, alpha, (intptr_t)a, sam, sak, (intptr_t)b, sbk, sbn, beta,
                            (intptr_t)c, scm, nt);
        if (scm == 1 && scn >= m) /* column-major C: C^T = B^T A^T */
            return fm_sgemm(n, m, k, alpha, (intptr_t)b, sbn, sbk, (intptr_t)a, sak, sam, beta,
                            (intptr_t)c, scn, nt);
    }
    int ta, tb, tc;
    int64_t lda, ldb, ldc;
    char *cc = c;
    if (!blas_layout(m, k, sam, sak, &ta, &lda)) {
        char *p = scratch(x, S_A, m * k * isz);
        if (!p) return FM_ERR_NOMEM;
        if ((rc = pack(dt, dt, p, a, m, k, sam, sak))) return rc;
        a = p, ta = 0, lda = k;
    }
    if (!blas_layout(k, n, sbk, sbn, &tb, &ldb)) {
        char *p = scratch(x, S_B, k * n * isz);
        if (!p) return FM_ERR_NOMEM;
        if ((rc = pack(dt, dt, p, b, k, n, sbk, sbn))) return rc;
        b = p, tb = 0, ldb = n;
    }
    int cpacked = 0;
    if (!blas_layout(m, n, scm, scn, &tc, &ldc)) {
        cc = scratch(x, S_C, m * n * isz);
        if (!cc) return FM_ERR_NOMEM;
        if (beta != 0.0 && (rc = pack(dt, dt, cc, c, m, n, scm, scn))) return rc;
        tc = 0, ldc = n, cpacked = 1;
    }
    if (tc) {
        /* C is column-major: compute C^T = B^T A^T, which is row-major */
        const char *tmp = a;
        a = b, b = tmp;
        int tt = ta;
        ta = !tb, tb = !tt;
        int64_t tl = lda;
        lda = ldb, ldb = tl;
        int64_t tm = m;
        m = n, n = tm;
    }
    if (f32)
        scipy_cblas_sgemm(CblasRowMajor, CT(ta), CT(tb), (int)m, (int)n, (int)k, (float)alpha,
                          (const float *)a, (int)lda, (const float *)b, (int)ldb, (float)beta,
                          (float *)cc, (int)ldc);
    else
        scipy_cblas_dgemm(CblasRowMajor, CT(ta), CT(tb), (int)m, (int)n, (int)k, alpha,
                          (const double *)a, (int)lda, (const double *)b, (int)ldb, beta,
                          (double *)cc, (int)ldc);
    if (cpacked) return unpack(dt, dt, c, cc, x->m, x->n, scm, scn);
    return FM_OK;
}

/* ---- integers and bool: int64 accumulation, blocked for cache ---------------------------- */
#define KB 128
#define NB 256

/* acc (m x n) = A (m x k) @ B (k x n), all row-major int64, wrapping on overflow */
FM_CLONES static void imm_kernel(int64_t m, int64_t n, int64_t k, const int64_t *FM_RESTRICT a,
                                 const int64_t *FM_RESTRICT b, uint64_t *FM_RESTRICT acc) {
    memset(acc, 0, (size_t)(m * n) * sizeof(uint64_t));
    for (int64_t j0 = 0; j0 < n; j0 += NB) {
        int64_t j1 = j0 + NB < n ? j0 + NB : n;
        for (int64_t k0 = 0; k0 < k; k0 += KB) {
            int64_t k1 = k0 + KB < k ? k0 + KB : k;
            for (int64_t i = 0; i < m; i++) {
                uint64_t *FM_RESTRICT row = acc + i * n;
                for (int64_t kk = k0; kk < k1; kk++) {
                    uint64_t av = (uint64_t)a[i * k + kk];
                    if (!av) continue;
                    const uint64_t *FM_RESTRICT brow = (const uint64_t *)b + kk * n;
                    for (int64_t j = j0; j < j1; j++) row[j] += av * brow[j];
                }
            }
        }
    }
}

static int int_mm(mm_ctx *x, char *c, int64_t scm, int64_t scn, const char *a, int64_t sam,
                  int64_t sak, const char *b, int64_t sbk, int64_t sbn) {
    int dt = x->dtype, rc;
    int64_t m = x->m, n = x->n, k = x->k;
    int64_t *pa = (int64_t *)scratch(x, S_A, m * k * 8);
    int64_t *pb = (int64_t *)scratch(x, S_B, k * n * 8);
    uint64_t *acc = (uint64_t *)scratch(x, S_C, m * n * 8);
    if (!pa || !pb || !acc) return FM_ERR_NOMEM;
    if ((rc = pack(FM_INT64, dt, (char *)pa, a, m, k, sam, sak))) return rc;
    if ((rc = pack(FM_INT64, dt, (char *)pb, b, k, n, sbk, sbn))) return rc;
    imm_kernel(m, n, k, pa, pb, acc);
    uint64_t al = (uint64_t)x->ialpha, be = (uint64_t)x->ibeta;
    if (be) {
        /* the old C, widened to int64 */
        int64_t *old = (int64_t *)scratch(x, S_A32, m * n * 8);
        if (!old) return FM_ERR_NOMEM;
        if ((rc = pack(FM_INT64, dt, (char *)old, c, m, n, scm, scn))) return rc;
        for (int64_t i = 0; i < m * n; i++) acc[i] = al * acc[i] + be * (uint64_t)old[i];
    } else if (al != 1) {
        for (int64_t i = 0; i < m * n; i++) acc[i] *= al;
    }
    return unpack(dt, FM_INT64, c, (const char *)acc, m, n, scm, scn);
}

/* ---- the portable loop (dimensions beyond BLAS's 32-bit sizes), double accumulation ------ */
static int slow_mm(mm_ctx *x, char *c, int64_t scm, int64_t scn, const char *a, int64_t sam,
                   int64_t sak, const char *b, int64_t sbk, int64_t sbn) {
    int dt = x->dtype, isz = fm_itemsize[dt];
    for (int64_t i = 0; i < x->m; i++)
        for (int64_t j = 0; j < x->n; j++) {
            double s = 0.0;
            for (int64_t l = 0; l < x->k; l++)
                s += fm_get_f64(dt, (intptr_t)(a + (i * sam + l * sak) * isz)) *
                     fm_get_f64(dt, (intptr_t)(b + (l * sbk + j * sbn) * isz));
            char *p = c + (i * scm + j * scn) * isz;
            double v = x->alpha * s;
            if (x->beta != 0.0) v += x->beta * fm_get_f64(dt, (intptr_t)p);
            fm_scalar_bytes(dt, v, 0, 0, p);
        }
    return FM_OK;
}

/* ---- one product ------------------------------------------------------------------------ */
static int mm_one(mm_ctx *x, char *c, int64_t scm, int64_t scn, const char *a, int64_t sam,
                  int64_t sak, const char *b, int64_t sbk, int64_t sbn) {
    int dt = x->dtype, rc;
    int64_t m = x->m, n = x->n, k = x->k;
    if (m == 0 || n == 0) return FM_OK;
    int isf = fm_is_float(dt);
    if (k == 0 || (isf ? x->alpha == 0.0 : x->ialpha == 0)) return scale_c(x, c, scm, scn);
    if (!isf) return int_mm(x, c, scm, scn, a, sam, sak, b, sbk, sbn);
    if (m > blas_limit || n > blas_limit || k > blas_limit)
        return slow_mm(x, c, scm, scn, a, sam, sak, b, sbk, sbn);
    if (dt == FM_FLOAT32 || dt == FM_FLOAT64)
        return blas_mm(x, dt, c, scm, scn, a, sam, sak, b, sbk, sbn);
    /* float16/bfloat16: float32 copies, sgemm, one rounding back */
    char *pa = scratch(x, S_A32, m * k * 4), *pb = scratch(x, S_B32, k * n * 4);
    char *pc = scratch(x, S_C32, m * n * 4);
    if (!pa || !pb || !pc) return FM_ERR_NOMEM;
    if ((rc = pack(FM_FLOAT32, dt, pa, a, m, k, sam, sak))) return rc;
    if ((rc = pack(FM_FLOAT32, dt, pb, b, k, n, sbk, sbn))) return rc;
    if (x->beta != 0.0 && (rc = pack(FM_FLOAT32, dt, pc, c, m, n, scm, scn))) return rc;
    if ((rc = blas_mm(x, FM_FLOAT32, pc, n, 1, pa, k, 1, pb, n, 1))) return rc;
    return unpack(dt, FM_FLOAT32, c, pc, m, n, scm, scn);
}

#define BATCH_THREADS_MIN (64.0 * 64.0 * 64.0)

/* ---- a batch through gemm_batch_strided -------------------------------------------------- */
/* Returns -1 when the operands do not suit it (the caller then loops over mm_one). The batch is
   coalesced: sh[nd] and strides st[C, A, B][nd]; the innermost batch dim is the BLAS batch. */
static int batch_strided(int dt, int nd, const int64_t *sh, int64_t st[3][FM_MAX_DIMS],
                         int64_t m, int64_t n, int64_t k, char *c, int64_t scm, int64_t scn,
                         const char *a, int64_t sam, int64_t sak, const char *b, int64_t sbk,
                         int64_t sbn, double alpha, double beta) {
    int ta, tb, tc;
    int64_t lda, ldb, ldc;
    if (!blas_layout(m, k, sam, sak, &ta, &lda) || !blas_layout(k, n, sbk, sbn, &tb, &ldb) ||
        !blas_layout(m, n, scm, scn, &tc, &ldc))
        return -1;
    int in = nd - 1;
    int64_t bsc = st[0][in], bsa = st[1][in], bsb = st[2][in], cnt = sh[in];
    if (cnt > INT_MAX || bsc <= 0 || bsc > INT_MAX || bsa < 0 || bsa > INT_MAX || bsb < 0 ||
        bsb > INT_MAX)
        return -1;
    if (tc) { /* column-major C: C^T = B^T A^T */
        const char *tp = a;
        a = b, b = tp;
        int tt = ta;
        ta = !tb, tb = !tt;
        int64_t tl = lda;
        lda = ldb, ldb = tl;
        tl = bsa, bsa = bsb, bsb = tl;
        tl = m, m = n, n = tl;
    }
    int isz = fm_itemsize[dt];
    int64_t idx[FM_MAX_DIMS] = {0};
    /* the outer batch dims index C, A, B: keep their strides apart from the swap above */
    int sa_i = tc ? 2 : 1, sb_i = tc ? 1 : 2;
    for (;;) {
        if (dt == FM_FLOAT32)
            sgemm_bs(CblasRowMajor, CT(ta), CT(tb), (int)m, (int)n, (int)k, (float)alpha,
                     (const float *)a, (int)lda, (int)bsa, (const float *)b, (int)ldb, (int)bsb,
                     (float)beta, (float *)c, (int)ldc, (int)bsc, (int)cnt);
        else
            dgemm_bs(CblasRowMajor, CT(ta), CT(tb), (int)m, (int)n, (int)k, alpha,
                     (const double *)a, (int)lda, (int)bsa, (const double *)b, (int)ldb,
                     (int)bsb, beta, (double *)c, (int)ldc, (int)bsc, (int)cnt);
        int d = in - 1;
        for (; d >= 0; d--) {
            idx[d]++;
            c += st[0][d] * isz, a += st[sa_i][d] * isz, b += st[sb_i][d] * isz;
            if (idx[d] < sh[d]) break;
            c -= st[0][d] * sh[d] * isz, a -= st[sa_i][d] * sh[d] * isz;
            b -= st[sb_i][d] * sh[d] * isz;
            idx[d] = 0;
        }
        if (d < 0) break;
    }
    return FM_OK;
}

/* ---- a float32 batch on the own kernel, the products spread over nt threads -------------- */
static int own_item(int64_t it, int nd, const int64_t *sh, int64_t st[3][FM_MAX_DIMS], int64_t m,
                    int64_t n, int64_t k, char *c, int64_t scm, int64_t scn, const char *a,
                    int64_t sam, int64_t sak, const char *b, int64_t sbk, int64_t sbn,
                    double alpha, double beta) {
    int64_t oc = 0, oa = 0, ob = 0;
    for (int d = nd - 1; d >= 0; d--) {
        int64_t i = it % sh[d];
        it /= sh[d];
        oc += i * st[0][d], oa += i * st[1][d], ob += i * st[2][d];
    }
    intptr_t pc = (intptr_t)(c + oc * 4), pa = (intptr_t)(a + oa * 4), pb = (intptr_t)(b + ob * 4);
    if (scn == 1 && scm >= n)
        return fm_sgemm(m, n, k, alpha, pa, sam, sak, pb, sbk, sbn, beta, pc, scm, 1);
    return fm_sgemm(n, m, k, alpha, pb, sbn, sbk, pa, sak, sam, beta, pc, scn, 1);
}

static int own_batch(int nt, int nd, const int64_t *sh, int64_t st[3][FM_MAX_DIMS], int64_t total,
                     int64_t m, int64_t n, int64_t k, char *c, int64_t scm, int64_t scn,
                     const char *a, int64_t sam, int64_t sak, const char *b, int64_t sbk,
                     int64_t sbn, double alpha, double beta) {
    int err = FM_OK;
    if (nt > 1) {
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
        for (int64_t it = 0; it < total; it++) {
            int r = own_item(it, nd, sh, st, m, n, k, c, scm, scn, a, sam, sak, b, sbk, sbn,
                             alpha, beta);
            if (r) {
#pragma omp atomic write
                err = r;
            }
        }
        return err;
    }
    for (int64_t it = 0; it < total && !err; it++)
        err = own_item(it, nd, sh, st, m, n, k, c, scm, scn, a, sam, sak, b, sbk, sbn, alpha,
                       beta);
    return err;
}

/* ---- entry points ----------------------------------------------------------------------- */
static int check_args(int dtype, int64_t m, int64_t n, int64_t k) {
    if (!fm_dtype_ok(dtype)) return FM_ERR_DTYPE;
    if (m < 0 || n < 0 || k < 0) return FM_ERR_ARG;
    return FM_OK;
}

static void ctx_init(mm_ctx *x, int dtype, int64_t m, int64_t n, int64_t k, double alpha,
                     double beta, int64_t ialpha, int64_t ibeta) {
    memset(x, 0, sizeof(*x));
    x->dtype = dtype;
    x->m = m, x->n = n, x->k = k;
    x->alpha = alpha, x->beta = beta, x->ialpha = ialpha, x->ibeta = ibeta;
}

int fm_mm(int dtype, int64_t m, int64_t n, int64_t k, intptr_t c, int64_t scm, int64_t scn,
          intptr_t a, int64_t sam, int64_t sak, intptr_t b, int64_t sbk, int64_t sbn,
          double alpha, double beta, int64_t ialpha, int64_t ibeta) {
    int rc = check_args(dtype, m, n, k);
    if (rc) return rc;
    mm_ctx x;
    ctx_init(&x, dtype, m, n, k, alpha, beta, ialpha, ibeta);
    rc = mm_one(&x, (char *)c, scm, scn, (const char *)a, sam, sak, (const char *)b, sbk, sbn);
    scratch_release(&x);
    return rc;
}

int fm_matmul(int dtype, int nbatch, const int64_t *bshape, int64_t m, int64_t n, int64_t k,
              intptr_t c, const int64_t *sc, intptr_t a, const int64_t *sa, intptr_t b,
              const int64_t *sb, double alpha, double beta, int64_t ialpha, int64_t ibeta) {
    int rc = check_args(dtype, m, n, k);
    if (rc) return rc;
    if (nbatch < 0 || nbatch > FM_MAX_DIMS) return FM_ERR_NDIM;
    /* drop size-1 batch dims and merge dims that all three operands step through as one */
    int64_t sh[FM_MAX_DIMS], st[3][FM_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < nbatch; d++) {
        if (bshape[d] < 0) return FM_ERR_ARG;
        if (bshape[d] == 0) return FM_OK;
        if (bshape[d] == 1) continue;
        if (nd && st[0][nd - 1] == sc[d] * bshape[d] && st[1][nd - 1] == sa[d] * bshape[d] &&
            st[2][nd - 1] == sb[d] * bshape[d]) {
            sh[nd - 1] *= bshape[d];
            st[0][nd - 1] = sc[d], st[1][nd - 1] = sa[d], st[2][nd - 1] = sb[d];
            continue;
        }
        sh[nd] = bshape[d];
        st[0][nd] = sc[d], st[1][nd] = sa[d], st[2][nd] = sb[d];
        nd++;
    }
    const int64_t scm = sc[nbatch], scn = sc[nbatch + 1], sam = sa[nbatch], sak = sa[nbatch + 1];
    const int64_t sbk = sb[nbatch], sbn = sb[nbatch + 1];
    /* B shared by the whole batch and A, C stacked by rows: one product of batch*m rows */
    if (nd == 1 && st[2][0] == 0 && (m == 1 || (st[1][0] == m * sam && st[0][0] == m * scm))) {
        mm_ctx x;
        ctx_init(&x, dtype, sh[0] * m, n, k, alpha, beta, ialpha, ibeta);
        rc = mm_one(&x, (char *)c, m == 1 ? st[0][0] : scm, scn, (const char *)a,
                    m == 1 ? st[1][0] : sam, sak, (const char *)b, sbk, sbn);
        scratch_release(&x);
        return rc;
    }
    if (dtype == FM_FLOAT32 && nd >= 1 && alpha != 0.0 && own_sgemm(m, n, k) &&
        ((scn == 1 && scm >= n) || (scm == 1 && scn >= m))) {
        int64_t total = 1;
        for (int d = 0; d < nd; d++) total *= sh[d];
        int nt = own_threads(m, n, k * total);
        /* many products: one per thread at a time; few big ones: each one split */
        if (nt == 1 || total >= 4 * nt || own_threads(m, n, k) == 1)
            return own_batch(nt, nd, sh, st, total, m, n, k, (char *)c, scm, scn,
                             (const char *)a, sam, sak, (const char *)b, sbk, sbn, alpha, beta);
    }
    /* a batch big enough to be worth OpenBLAS's threads (waking them costs microseconds) */
    if ((dtype == FM_FLOAT32 || dtype == FM_FLOAT64) && nd >= 1 && m > 1 && n > 1 && k > 0 &&
        alpha != 0.0 && m <= blas_limit && n <= blas_limit && k <= blas_limit &&
        (double)m * (double)n * (double)k * (double)sh[nd - 1] >= BATCH_THREADS_MIN) {
        pthread_once(&bs_once, bs_lookup);
        if (sgemm_bs) {
            rc = batch_strided(dtype, nd, sh, st, m, n, k, (char *)c, scm, scn, (const char *)a,
                               sam, sak, (const char *)b, sbk, sbn, alpha, beta);
            if (rc != -1) return rc;
        }
    }
    mm_ctx x;
    ctx_init(&x, dtype, m, n, k, alpha, beta, ialpha, ibeta);
    int isz = fm_itemsize[dtype];
    int64_t idx[FM_MAX_DIMS] = {0};
    char *pc = (char *)c;
    const char *pa = (const char *)a, *pb = (const char *)b;
    for (;;) {
        rc = mm_one(&x, pc, scm, scn, pa, sam, sak, pb, sbk, sbn);
        if (rc) break;
        int d = nd - 1;
        for (; d >= 0; d--) {
            idx[d]++;
            pc += st[0][d] * isz, pa += st[1][d] * isz, pb += st[2][d] * isz;
            if (idx[d] < sh[d]) break;
            pc -= st[0][d] * sh[d] * isz, pa -= st[1][d] * sh[d] * isz;
            pb -= st[2][d] * sh[d] * isz;
            idx[d] = 0;
        }
        if (d < 0) break;
    }
    scratch_release(&x);
    return rc;
}
