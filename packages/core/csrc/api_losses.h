/* Fused elementwise losses (losses.c): nn.functional's pointwise losses in one pass forward
 * (the elementwise loss, or its mean or sum) and one pass backward.
 * cffi cdef rules: plain declarations and integer #defines only.
 *
 * dtype is FM_FLOAT32 or FM_FLOAT64 (FM_ERR_DTYPE otherwise: the caller widens); x, t are
 * contiguous with n elements; w (NULL: none) and pw (NULL: none) are contiguous with wn / pn
 * elements, wn and pn dividing n: element i reads w[i % wn] and pw[i % pn] (a weight broadcast
 * along the leading dimensions). With d = x - t, p0 the kind's parameter:
 *   MSE          l = d^2                                 dx = 2 d             dt = -dx
 *   L1           l = |d|                                 dx = sign(d)         dt = -dx
 *   SMOOTH_L1    l = |d| < p0 ? d^2 / (2 p0) : |d| - p0/2   (p0 = beta > 0)
 *                dx = d < -p0 ? -1 : d > p0 ? 1 : d / p0                       dt = -dx
 *   HUBER        l = |d| <= p0 ? d^2 / 2 : p0 (|d| - p0/2)   (p0 = delta > 0)
 *                dx = d < -p0 ? -p0 : d > p0 ? p0 : d                          dt = -dx
 *   BCE          l = (t - 1) max(log1p(-x), -100) - t max(log x, -100)   (x, t in [0, 1])
 *                dx = (x - t) / max(x (1 - x), 1e-12f)
 *                dt = max(log1p(-x), -100) - max(log x, -100)
 *   BCE_LOGITS   l = (1 - t) x + lw sp(-x), lw = 1 + (pw - 1) t (1 without pw),
 *                sp(z) = max(z, 0) + log1p(e^-|z|)
 *                dx = lw sigmoid(x) - pw t (sigmoid(x) - t without pw)
 *                dt = (pw - 1) sp(-x) - x
 *   SOFT_MARGIN  l = sp(-t x)          dx = -t sigmoid(-t x)    dt = -x sigmoid(-t x)
 *   KL_DIV       l = xlogy(t, t) - t x (t log t, 0 where t = 0)   dx = -t
 *                dt = log t + 1 - x
 *   KL_DIV_LOG   l = e^t (t - x)        dx = -e^t      dt = e^t (t - x + 1)
 * and the loss (and both gradients) multiplied by w.
 * fm_loss_fwd: reduction FM_LOSS_NONE writes the n losses into y; FM_LOSS_MEAN / FM_LOSS_SUM
 *   writes their mean / sum into y[0] (summed in double; the mean of 0 elements is NaN). BCE
 *   returns FM_ERR_VALUE when an x or a t is outside [0, 1] or NaN (nothing written).
 * fm_loss_bwd: gx = c dx and gt = c dt (either NULL: not computed), c = g[i * gstep] * scale
 *   * w (gstep 0: g[0] for every element; scale 1/n for the mean's gradient). gx, gt
 *   contiguous n elements. Unknown kind: FM_ERR_OP. */

#define FM_LOSS_MSE 0
#define FM_LOSS_L1 1
#define FM_LOSS_SMOOTH_L1 2
#define FM_LOSS_HUBER 3
#define FM_LOSS_BCE 4
#define FM_LOSS_BCE_LOGITS 5
#define FM_LOSS_SOFT_MARGIN 6
#define FM_LOSS_KL_DIV 7
#define FM_LOSS_KL_DIV_LOG 8

#define FM_LOSS_NONE 0
#define FM_LOSS_MEAN 1
#define FM_LOSS_SUM 2

int fm_loss_fwd(int dtype, int kind, int reduction, int64_t n, intptr_t x, intptr_t t,
                intptr_t w, int64_t wn, intptr_t pw, int64_t pn, double p0, intptr_t y);
int fm_loss_bwd(int dtype, int kind, int64_t n, intptr_t g, int64_t gstep, double scale,
                intptr_t x, intptr_t t, intptr_t w, int64_t wn, intptr_t pw, int64_t pn,
                double p0, intptr_t gx, intptr_t gt);
