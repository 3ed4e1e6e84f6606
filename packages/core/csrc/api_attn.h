/* Fused scaled dot-product attention (attn.c): forward and backward without the (L, S) score
 * matrix ever being a tensor. cffi cdef rules: plain declarations and integer #defines only.
 *
 * dtype is FM_FLOAT32 or FM_FLOAT64 for every float operand. Shapes: q (B, H, L, E), k (B, Hk,
 * S, E), v (B, Hk, S, Ev), out and g (B, H, L, Ev), lse (B, H, L) contiguous; H a multiple of
 * Hk (query head h reads key/value head h / (H / Hk): grouped-query attention). qs, ks, vs, os
 * and gs hold each operand's element strides for (batch, head, row); its columns are
 * contiguous. With s_ij = scale * q_i . k_j + mask_ij (rows of one batch and head):
 * fm_attn_fwd: out_i = sum_j d_ij p_ij v_j with p_ij = exp(s_ij - lse_i), lse_i = log sum_j
 *   exp(s_ij), d the dropout multipliers (drop: contiguous (B, H, L, S) of dtype, or 0 for
 *   none). A row whose scores are all -inf gets out 0 and lse -inf (PyTorch's safe softmax).
 * fm_attn_bwd: the gradients of out (incoming g) w.r.t. q, k and v into contiguous gq (q's
 *   shape), gk, gv (k's and v's shapes; any of the three may be 0: not computed), from lse.
 * mkind: FM_ATTN_NONE; FM_ATTN_CAUSAL (top-left: row i sees columns j <= i); FM_ATTN_ADD (mask
 *   of dtype added to the scores) or FM_ATTN_BOOL (mask of bool: false drops the position),
 *   read at mask + b*ms[0] + h*ms[1] + i*ms[2] + j*ms[3] (zero strides broadcast).
 * Errors: FM_ERR_DTYPE, FM_ERR_ARG (sizes, strides, mask kind), FM_ERR_NOMEM. */

#define FM_ATTN_NONE 0
#define FM_ATTN_CAUSAL 1
#define FM_ATTN_ADD 2
#define FM_ATTN_BOOL 3

int fm_attn_fwd(int dtype, int64_t B, int64_t H, int64_t Hk, int64_t L, int64_t S, int64_t E,
                int64_t Ev, double scale, intptr_t q, const int64_t *qs, intptr_t k,
                const int64_t *ks, intptr_t v, const int64_t *vs, int mkind, intptr_t mask,
                const int64_t *ms, intptr_t drop, intptr_t out, const int64_t *os, intptr_t lse);
int fm_attn_bwd(int dtype, int64_t B, int64_t H, int64_t Hk, int64_t L, int64_t S, int64_t E,
                int64_t Ev, double scale, intptr_t q, const int64_t *qs, intptr_t k,
                const int64_t *ks, intptr_t v, const int64_t *vs, int mkind, intptr_t mask,
                const int64_t *ms, intptr_t drop, intptr_t g, const int64_t *gs, intptr_t lse,
                intptr_t gq, intptr_t gk, intptr_t gv);
/* rows per block of the kernels (tests and benchmarks; 0 = the default); returns the previous */
int64_t fm_attn_set_block(int64_t rows);
