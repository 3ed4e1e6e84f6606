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
/* Pointwise activations with parameters (nn.functional's compositions, one pass each).
 * kind: FM_ACT_*; p0..p2 its parameters (unused ones ignored):
 *   SILU          y = x / (1 + e^-x)                  gx = g s (1 + x (1 - s)), s = sigmoid(x)
 *   LEAKY_RELU    y = x > 0 ? x : p0 x               gx = x > 0 ? g : p0 g
 *   ELU           y = x > 0 ? p1 x : p0 p1 expm1(p2 x)
 *                 gx = x > 0 ? p1 g : g p2 p0 p1 e^(p2 x)   (alpha, scale, input_scale: SELU, CELU)
 *   HARDSWISH     y = x min(max(x + 3, 0), 6) / 6     gx = x <= -3 ? 0 : x < 3 ? g (x/3 + 1/2) : g
 *   HARDSIGMOID   y = min(max(x + 3, 0), 6) / 6       gx = -3 < x < 3 ? g / 6 : 0
 *   SOFTPLUS      y = p0 x > p1 ? x : log1p(e^(p0 x)) / p0   gx = p0 x > p1 ? g : g z / (z + 1),
 *                 z = e^(p0 x)   (beta, threshold)
 *   MISH          y = x tanh(log1p(e^x))              gx = g (t + x s (1 - t^2)), t = tanh(sp)
 *   SIGMOID       backward only, x is the forward's OUTPUT y: gx = g (1 - y) y
 *   LOG_SIGMOID   y = min(x, 0) - log1p(e^-|x|)      gx = g (x < 0 ? 1 - z/(1+z) : z/(1+z)),
 *                 z = e^-|x|
 *   HARDTANH      y = clamp(x, p0, p1) (NaN stays)   gx = x <= p0 || x >= p1 ? 0 : g
 *   SOFTSHRINK    y = x > p0 ? x - p0 : x < -p0 ? x + p0 : 0 x     gx = -p0 <= x <= p0 ? 0 : g
 *   HARDSHRINK    y = -p0 <= x <= p0 ? 0 : x         gx = -p0 <= x <= p0 ? 0 : g
 *   THRESHOLD     y = x <= p0 ? p1 : x               gx = x <= p0 ? 0 : g
 *   TANH          backward only, x is the forward's OUTPUT y: gx = g (1 - y^2)
 * NaN inputs give NaN results and gradients as PyTorch's kernels do. dtype FM_FLOAT32 or
 * FM_FLOAT64 (FM_ERR_DTYPE otherwise: the caller widens); contiguous arrays of n elements; y may
 * alias x and gx may alias g. Unknown kind: FM_ERR_OP. */
#define FM_ACT_SILU 0
#define FM_ACT_LEAKY_RELU 1
#define FM_ACT_ELU 2
#define FM_ACT_HARDSWISH 3
#define FM_ACT_HARDSIGMOID 4
#define FM_ACT_SOFTPLUS 5
#define FM_ACT_MISH 6
#define FM_ACT_SIGMOID 7
#define FM_ACT_LOG_SIGMOID 8
#define FM_ACT_HARDTANH 9
#define FM_ACT_SOFTSHRINK 10
#define FM_ACT_HARDSHRINK 11
#define FM_ACT_THRESHOLD 12
#define FM_ACT_TANH 13

int fm_act_fwd(int dtype, int kind, int64_t n, intptr_t x, intptr_t y, double p0, double p1,
               double p2);
int fm_act_bwd(int dtype, int kind, int64_t n, intptr_t g, intptr_t x, intptr_t gx, double p0,
               double p1, double p2);
