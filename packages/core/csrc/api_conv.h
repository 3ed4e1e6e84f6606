/* ---- convolution (conv.c) -------------------------------------------------------------------
 *
 * Every convolution op is one of five modes over the same geometry. A convolution maps a "big"
 * image (N, cb, big[0..nd)) to a "small" one (N, cs, small[0..nd)) with a weight of shape
 * (cs, cb / groups, k[0..nd)): small[i] = (big[i] + 2 pad[i] - dil[i] (k[i] - 1) - 1) / stride[i]
 * + 1 (the caller computes it; positions falling outside the big image read zeros and their
 * writes are dropped, so any positive shapes are memory-safe). All tensors are contiguous.
 *   FM_CONV_FWD:      a = big input, b = weight, bias (0: none, else cs values) -> out small
 *   FM_CONV_BWD_DATA: a = small input, b = weight, bias (0 or cb values) -> out big (this is the
 *                     transposed convolution, and the gradient of FM_CONV_FWD by its input)
 *   FM_CONV_BWD_WEIGHT: a = big input, b = small gradient -> out weight (summed over the batch)
 *   FM_CONV_IM2COL:   a = big input (groups 1, cs unused) -> out (N, cb * prod(k), prod(small))
 *   FM_CONV_COL2IM:   a = columns (N, cb * prod(k), prod(small)) -> out big (sums overlaps)
 * float32 (fiamma's sgemm, threads over images) and float64 (BLAS); FM_ERR_DTYPE otherwise.
 */
#define FM_CONV_FWD 0
#define FM_CONV_BWD_DATA 1
#define FM_CONV_BWD_WEIGHT 2
#define FM_CONV_IM2COL 3
#define FM_CONV_COL2IM 4

int fm_conv(int mode, int dtype, int nd, int64_t n, int64_t cb, int64_t cs, int64_t groups,
            const int64_t *big, const int64_t *small, const int64_t *k, const int64_t *stride,
            const int64_t *pad, const int64_t *dil, intptr_t a, intptr_t b, intptr_t bias,
            intptr_t out);

/* Elements of the column slice built per product (tuning; returns the previous value). */
int64_t fm_conv_set_chunk(int64_t elems);

/* Depthwise convolutions (groups == input channels, at most 8 outputs per group) take direct
   loops unless turned off (on = 0; 1 turns them back on, -1 only asks); returns the previous. */
int fm_conv_set_depthwise(int on);

/* float32 2-D 3x3 stride-1 dilation-1 convolutions with padding <= 2 and groups 1 take Winograd
   F(2x2, 3x3) (conv_wino.c) for FWD, BWD_DATA and BWD_WEIGHT where it is faster: at least 16
   input and 8 output channels and enough output tiles. on: 1 so (the default), 0 never, 2 for
   every such convolution whatever its size (for tests), -1 only asks; returns the previous. */
int fm_conv_set_winograd(int on);
/* Tiles per Winograd chunk (0: chosen per call; tuning; returns the previous value). */
int64_t fm_conv_set_winograd_tiles(int64_t tiles);
