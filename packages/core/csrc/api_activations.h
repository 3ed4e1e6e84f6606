/* Fused activation kernels (activations.c): GELU forward and backward in one pass each.
 * cffi cdef rules: plain declarations and integer #defines only.
 *
 * dtype is FM_FLOAT32 or FM_FLOAT64 (other float dtypes are computed in float32 by the caller);
 * all arrays are contiguous with n elements of that dtype. approximate: FM_GELU_NONE (x Phi(x),
 * Phi the normal CDF) or FM_GELU_TANH (PyTorch's tanh approximation).
 * fm_gelu_fwd: y = gelu(x).  fm_gelu_bwd: gx = g * gelu'(x).
 * Limits: gelu(+inf) = +inf, gelu(-inf) = -0 (the limits), gelu'(+inf) = 1, gelu'(-inf) = 0. */

#define FM_GELU_NONE 0
#define FM_GELU_TANH 1

int fm_gelu_fwd(int dtype, int approximate, int64_t n, intptr_t x, intptr_t y);
int fm_gelu_bwd(int dtype, int approximate, int64_t n, intptr_t g, intptr_t x, intptr_t gx);
/* fm_gelu_fwd_grad: y = gelu(x) and d = gelu'(x) in one pass (the d of fm_gelu_bwd: g * d is
 * its gx bit for bit); float32, exact form only (FM_ERR_OP otherwise). */
int fm_gelu_fwd_grad(int dtype, int approximate, int64_t n, intptr_t x, intptr_t y, intptr_t d);
/* fm_relu_bwd: gx = y > 0 ? g : 0 (ReLU's backward from its forward output y; a NaN y passes no
 * gradient, as the comparison-and-where composition); float32/float64 (FM_ERR_DTYPE otherwise,
 * the caller composes). Contiguous arrays of n elements; gx may alias g. */
int fm_relu_bwd(int dtype, int64_t n, intptr_t g, intptr_t y, intptr_t gx);
