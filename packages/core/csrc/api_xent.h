/* Fused cross entropy over class-index targets (xent.c): log_softmax and the negative log
 * likelihood in one pass over each row, forward and backward.
 * cffi cdef rules: plain declarations and integer #defines only.
 *
 * dtype is FM_FLOAT32 or FM_FLOAT64 for x (contiguous (n, c)), weight (c, or 0 for none),
 * loss, wt (n) and g; target is int64 (n). With w the weights (1 without), W = sum(w),
 * lse_i = log sum_j exp(x_ij), t = target[i], s = smoothing:
 * fm_xent_fwd: loss[i] = (1 - s) w[t] (lse_i - x_it) + s / c sum_j w[j] (lse_i - x_ij) and
 *   wt[i] = w[t]; a row whose target equals ignore_index gets loss 0 and wt 0. A target outside
 *   [0, c) that is not ignore_index: FM_ERR_INDEX (nothing else is guaranteed to be written).
 * fm_xent_bwd: gx[i, j] = a_i ((1 - s) w[t] + s W / c) p_ij - a_i ((1 - s) w[t] [j == t] +
 *   s w[j] / c), p_ij = exp(x_ij - lse_i), a_i = g[i * gs] * scale (gs 0: one g for all rows);
 *   0 on ignored rows. */

int fm_xent_fwd(int dtype, int64_t n, int64_t c, intptr_t x, intptr_t target, intptr_t weight,
                int64_t ignore_index, double smoothing, intptr_t loss, intptr_t wt);
int fm_xent_bwd(int dtype, int64_t n, int64_t c, intptr_t x, intptr_t target, intptr_t weight,
                int64_t ignore_index, double smoothing, intptr_t g, int64_t gs, double scale,
                intptr_t gx);
