/* Range fills for arange, linspace and logspace, one loop per dtype.
 *
 * Floating results are computed in double and rounded once to the output dtype. Integer aranges
 * step in int64 (wrapping, never overflowing in C) and narrow on store. linspace follows
 * PyTorch's symmetric formula, so the first value is exactly start and the last exactly end;
 * its float32 and float64 fills reproduce PyTorch's rounding too (see linspace_f32_exact).
 */
/* No implicit a*b+c -> fma contraction: it happens only on the FMA-capable clones, so
   results would differ between machines. Explicit fma() calls are exact everywhere. */
#pragma GCC optimize("fp-contract=off")
#include "dtypes.h"
#include "api_random.h"

#define DEF_ARANGE_F(T)                                                                     \
    FM_CLONES static void arange_##T(int64_t n, char *o, double start, double step,         \
                                     int64_t istart, int64_t istep) {                       \
        (void)istart; (void)istep;                                                          \
        ct_##T *FM_RESTRICT out = (ct_##T *)o;                                              \
        for (int64_t i = 0; i < n; i++) STF_##T(&out[i], start + step * (double)i);         \
    }
#define DEF_ARANGE_I(T)                                                                     \
    FM_CLONES static void arange_##T(int64_t n, char *o, double start, double step,         \
                                     int64_t istart, int64_t istep) {                       \
        (void)start; (void)step;                                                            \
        ct_##T *FM_RESTRICT out = (ct_##T *)o;                                              \
        const uint64_t s0 = (uint64_t)istart, d = (uint64_t)istep;                          \
        for (int64_t i = 0; i < n; i++) STI_##T(&out[i], (int64_t)(s0 + d * (uint64_t)i));  \
    }
#define DEF_ARANGE_U(T) DEF_ARANGE_I(T)
#define DEF_ARANGE_X(T, K) DEF_ARANGE_##K(T)
FM_ALL_DTYPES(DEF_ARANGE_X)

#define DEF_LINSPACE(T, K)                                                                  \
    FM_CLONES static void linspace_##T(int64_t n, char *o, double start, double end,        \
                                       double step) {                                       \
        ct_##T *FM_RESTRICT out = (ct_##T *)o;                                              \
        const int64_t half = n / 2;                                                         \
        for (int64_t i = 0; i < half; i++) STF_##T(&out[i], start + step * (double)i);      \
        for (int64_t i = half; i < n; i++)                                                  \
            STF_##T(&out[i], end - step * (double)(n - 1 - i));                             \
    }
FM_ALL_DTYPES(DEF_LINSPACE)

/* float32 and float64 follow PyTorch's CPU kernel bit for bit: the step is computed in the
   output type and each value is one fused multiply-add in it (start + step*i for the first
   half, end - step*(n-1-i) for the rest), which is what PyTorch's x86 builds compute. */
static void linspace_f32_exact(int64_t n, char *o, double start, double end) {
    float *FM_RESTRICT out = (float *)o;
    const float s = (float)start, e = (float)end, step = n > 1 ? (e - s) / (float)(n - 1) : 0.0f;
    const int64_t half = n / 2;
    for (int64_t i = 0; i < half; i++) out[i] = fmaf(step, (float)i, s);
    for (int64_t i = half; i < n; i++) out[i] = fmaf(-step, (float)(n - 1 - i), e);
}

static void linspace_f64_exact(int64_t n, char *o, double start, double end) {
    double *FM_RESTRICT out = (double *)o;
    const double step = n > 1 ? (end - start) / (double)(n - 1) : 0.0;
    const int64_t half = n / 2;
    for (int64_t i = 0; i < half; i++) out[i] = fma(step, (double)i, start);
    for (int64_t i = half; i < n; i++) out[i] = fma(-step, (double)(n - 1 - i), end);
}

#define DEF_LOGSPACE(T, K)                                                                  \
    static void logspace_##T(int64_t n, char *o, double start, double end, double step,     \
                             double base) {                                                 \
        ct_##T *out = (ct_##T *)o;                                                          \
        const int64_t half = n / 2;                                                         \
        for (int64_t i = 0; i < half; i++) STF_##T(&out[i], pow(base, start + step * (double)i)); \
        for (int64_t i = half; i < n; i++)                                                  \
            STF_##T(&out[i], pow(base, end - step * (double)(n - 1 - i)));                  \
    }
FM_ALL_DTYPES(DEF_LOGSPACE)

typedef void (*arange_fn)(int64_t, char *, double, double, int64_t, int64_t);
typedef void (*linspace_fn)(int64_t, char *, double, double, double);
typedef void (*logspace_fn)(int64_t, char *, double, double, double, double);

/* bool has no ranges (as in PyTorch): its entries are cleared by the entry points */
static const arange_fn arange_table[FM_NDTYPES] = FM_TABLE(arange_);
static const linspace_fn linspace_table[FM_NDTYPES] = FM_TABLE(linspace_);
static const logspace_fn logspace_table[FM_NDTYPES] = FM_TABLE(logspace_);

int fm_arange(int dtype, int64_t n, intptr_t out, double start, double step, int64_t istart,
              int64_t istep) {
    if (!fm_dtype_ok(dtype) || dtype == FM_BOOL || !arange_table[dtype]) return FM_ERR_DTYPE;
    if (n < 0) return FM_ERR_ARG;
    arange_table[dtype](n, (char *)out, start, step, istart, istep);
    return FM_OK;
}

/* integer linspace works from start and end converted to the dtype first (as PyTorch does) */
static double to_dtype_value(int dtype, double x) {
    if (fm_is_float(dtype)) return x;
    _Alignas(8) char buf[8];
    fm_scalar_bytes(dtype, x, 0, 0, buf);
    if (dtype == FM_UINT64) return (double)(uint64_t)fm_get_i64(dtype, (intptr_t)buf);
    return (double)fm_get_i64(dtype, (intptr_t)buf);
}

int fm_linspace(int dtype, int64_t n, intptr_t out, double start, double end) {
    if (!fm_dtype_ok(dtype) || dtype == FM_BOOL || !linspace_table[dtype]) return FM_ERR_DTYPE;
    if (n < 0) return FM_ERR_ARG;
    start = to_dtype_value(dtype, start);
    end = to_dtype_value(dtype, end);
    if (n == 1) end = start;
    if (dtype == FM_FLOAT32) {
        linspace_f32_exact(n, (char *)out, start, end);
        return FM_OK;
    }
    if (dtype == FM_FLOAT64) {
        linspace_f64_exact(n, (char *)out, start, end);
        return FM_OK;
    }
    double step = n > 1 ? (end - start) / (double)(n - 1) : 0.0;
    if (n == 1) end = start;
    linspace_table[dtype](n, (char *)out, start, end, step);
    return FM_OK;
}

int fm_logspace(int dtype, int64_t n, intptr_t out, double start, double end, double base) {
    if (!fm_dtype_ok(dtype) || dtype == FM_BOOL || !logspace_table[dtype]) return FM_ERR_DTYPE;
    if (n < 0) return FM_ERR_ARG;
    double step = n > 1 ? (end - start) / (double)(n - 1) : 0.0;
    if (n == 1) end = start;
    logspace_table[dtype](n, (char *)out, start, end, step, base);
    return FM_OK;
}
