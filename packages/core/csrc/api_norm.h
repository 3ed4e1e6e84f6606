/* Normalisation kernels (norm.c): batch norm over (N, C, S) and row norms (layer, group, RMS).
 * cffi cdef rules: plain declarations and integer #defines only.
 *
 * dtype is FM_FLOAT32 or FM_FLOAT64 (the 16-bit floats are computed in float32 by the caller);
 * every array has that dtype. Strides are in ELEMENTS. Optional arrays are 0 when absent.
 *
 * Batch norm: x is (N, C, S) with strides xs[3]; y, gx are contiguous (N, C, S); w, b, mean,
 * invstd, gw, gb are contiguous (C). training: statistics of the batch (biased variance),
 * written to mean/invstd, and the running stats (strided (C)) are updated with momentum and the
 * unbiased variance; else mean/invstd are computed from the running stats (required).
 *
 * Row norms: x is (M, K) with row stride sx and unit inner stride; y, gx contiguous (M, K). Row r
 * is normalised over its K elements (rms=1: by the root mean square, no centring); mean (M, only
 * without rms) and rstd (M) are written by the forward and read by the backward. The affine
 * index of element k of row r is (r % G) * P + k / Sp with K == P * Sp (layer norm: G=1, P=K,
 * Sp=1; group norm: G=groups, P=C/groups, Sp=spatial size); w, b, gw, gb have G*P elements.
 */

int fm_batch_norm_fwd(int dtype, int64_t N, int64_t C, int64_t S, intptr_t x,
                      const int64_t *xs, intptr_t y, intptr_t w, intptr_t b, intptr_t mean,
                      intptr_t invstd, intptr_t rmean, int64_t srm, intptr_t rvar, int64_t srv,
                      int training, double momentum, double eps);
int fm_batch_norm_bwd(int dtype, int64_t N, int64_t C, int64_t S, intptr_t g,
                      const int64_t *gs, intptr_t x, const int64_t *xs, intptr_t w,
                      intptr_t mean, intptr_t invstd, int training, intptr_t gx, intptr_t gw,
                      intptr_t gb);
int fm_row_norm_fwd(int dtype, int rms, int64_t M, int64_t K, intptr_t x, int64_t sx,
                    intptr_t y, intptr_t w, intptr_t b, int64_t G, int64_t P, int64_t Sp,
                    intptr_t mean, intptr_t rstd, double eps);
int fm_row_norm_bwd(int dtype, int rms, int64_t M, int64_t K, intptr_t g, int64_t sg,
                    intptr_t x, int64_t sx, intptr_t w, int64_t G, int64_t P, int64_t Sp,
                    intptr_t mean, intptr_t rstd, intptr_t gx, intptr_t gw, intptr_t gb);
