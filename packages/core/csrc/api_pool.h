/* Pooling kernels (pool.c): max / average / adaptive pooling over 1-3 spatial dims and their
 * backward, on CONTIGUOUS planes (Python makes inputs contiguous). float32 and float64 only
 * (Python computes float16/bfloat16 through float32).
 *
 * Every kernel works on `nplanes` planes (N*C); a plane is a D x H x W block (1-d and 2-d pools
 * pass 1 for the leading sizes). isz[3] are the input sizes, osz[3] the output sizes.
 * Windows, per spatial dim:
 * - regular (adaptive == 0): output o covers taps o*s - p + j*d, j < k (avg: d == 1);
 * - adaptive (adaptive != 0): o covers [floor(o*in/out), ceil((o+1)*in/out)); k, s, p, d unused.
 * Max pools write the value and the flat per-plane index (d*H*W + h*W + w) of the maximum (the
 * first one; a NaN wins, as in PyTorch); idx == 0 skips the indices. Avg pools divide by divisor_override when > 0, else by
 * the window size counting padding (count_include_pad) or only the input elements.
 */
int fm_pool_max(int dtype, int adaptive, int64_t nplanes, const int64_t *isz,
                const int64_t *osz, const int64_t *k, const int64_t *s, const int64_t *p,
                const int64_t *d, intptr_t in, intptr_t out, intptr_t idx);
int fm_pool_avg(int dtype, int adaptive, int64_t nplanes, const int64_t *isz,
                const int64_t *osz, const int64_t *k, const int64_t *s, const int64_t *p,
                int count_include_pad, int64_t divisor_override, intptr_t in, intptr_t out);
/* gin (isz planes, fully written) = the adjoint of fm_pool_avg applied to gout (osz planes) */
int fm_pool_avg_backward(int dtype, int adaptive, int64_t nplanes, const int64_t *isz,
                         const int64_t *osz, const int64_t *k, const int64_t *s,
                         const int64_t *p, int count_include_pad, int64_t divisor_override,
                         intptr_t gout, intptr_t gin);
/* dst planes of dsize elements (fully written: zeros elsewhere) get src[j] at idx[j] for the
 * ssize elements of each src plane: accumulate != 0 adds (max-pool backward), else writes
 * (max_unpool). An index outside [0, dsize) returns FM_ERR_INDEX with it in *bad. */
int fm_pool_scatter(int dtype, int accumulate, int64_t nplanes, int64_t ssize, int64_t dsize,
                    intptr_t src, intptr_t idx, intptr_t dst, int64_t *bad);
