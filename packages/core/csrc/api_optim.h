/* ---- fused optimizer steps (optim.c) --------------------------------------------------------
 *
 * One call updates every tensor of a parameter group in place. Tensor i has numel[i] contiguous
 * elements of `dtype` (FM_FLOAT32 or FM_FLOAT64) at p[i], its gradient at g[i] and its state
 * buffers at the other pointer arrays (same dtype, contiguous). Scalars are per call except the
 * step count, which is per tensor (a parameter that had no gradient in some step lags behind).
 * flags: FM_OPT_MAXIMIZE, FM_OPT_AMSGRAD (vmax used), FM_OPT_DECOUPLED (AdamW weight decay),
 * FM_OPT_NESTEROV, FM_OPT_FIRST (SGD: momentum buffers are initialised to the gradient).
 */
#define FM_OPT_MAXIMIZE 1
#define FM_OPT_AMSGRAD 2
#define FM_OPT_DECOUPLED 4
#define FM_OPT_NESTEROV 8
#define FM_OPT_FIRST 16

/* Adam / AdamW: m = lerp(m, g, 1 - b1); v = b2 v + (1 - b2) g^2;
   p -= lr / (1 - b1^t) * m / (sqrt(v or vmax) / sqrt(1 - b2^t) + eps) */
int fm_adam_step(int64_t ntensors, int dtype, const intptr_t *p, const intptr_t *g,
                 const intptr_t *m, const intptr_t *v, const intptr_t *vmax,
                 const int64_t *numel, const double *step, double lr, double beta1,
                 double beta2, double eps, double weight_decay, int flags);

/* SGD: g += wd p; b = momentum b + (1 - dampening) g (b = g where FM_OPT_FIRST);
   g = g + momentum b (Nesterov) or b; p -= lr g. buf may be NULL when momentum == 0. */
int fm_sgd_step(int64_t ntensors, int dtype, const intptr_t *p, const intptr_t *g,
                const intptr_t *buf, const int64_t *numel, double lr, double momentum,
                double dampening, double weight_decay, int flags);
