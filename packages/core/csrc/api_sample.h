/* Resampling kernels (sample.c): upsampling (nearest, nearest-exact, linear, cubic) over 1-3
 * spatial dims and grid_sample (2-D: bilinear, nearest, bicubic; 3-D: bilinear, nearest), with
 * their backward. float32 and float64 only (Python casts the 16-bit floats).
 *
 * Tensors are (N, C, *spatial) with nsp spatial dims. The input x is strided (ELEMENT strides
 * xs[nsp + 2]); every other tensor (outputs, grad outputs, grids) is contiguous.
 *
 * fm_upsample: y (N, C, *osize) from x (N, C, *isize). scales[d] > 0 is the scale factor the
 * caller gave for dim d (used for the coordinate mapping as PyTorch does), else 0 (in/out).
 * fm_upsample_backward: gx (N, C, *isize, contiguous, overwritten) from gy (N, C, *osize).
 *
 * fm_grid_sample: y (N, C, *osize) from x and grid (N, *osize, nsp) (last dim: x, y[, z]).
 * fm_grid_sample_backward: gx (N, C, *isize, overwritten) and/or ggrid (like grid, overwritten)
 * from gy; pass 0 for an output that is not wanted.
 * Errors: FM_ERR_DTYPE, FM_ERR_ARG (bad nsp/mode/sizes), FM_ERR_NOMEM.
 */
#define FM_SAMPLE_NEAREST 0
#define FM_SAMPLE_NEAREST_EXACT 1
#define FM_SAMPLE_LINEAR 2
#define FM_SAMPLE_CUBIC 3

#define FM_PAD_ZEROS 0
#define FM_PAD_BORDER 1
#define FM_PAD_REFLECTION 2

int fm_upsample(int dtype, int mode, int align_corners, int nsp, int64_t n, int64_t c,
                const int64_t *isize, const int64_t *osize, const double *scales,
                intptr_t x, const int64_t *xs, intptr_t y);

int fm_upsample_backward(int dtype, int mode, int align_corners, int nsp, int64_t n, int64_t c,
                         const int64_t *isize, const int64_t *osize, const double *scales,
                         intptr_t gy, intptr_t gx);

int fm_grid_sample(int dtype, int nsp, int mode, int padding, int align_corners,
                   int64_t n, int64_t c, const int64_t *isize, const int64_t *osize,
                   intptr_t x, const int64_t *xs, intptr_t grid, intptr_t y);

int fm_grid_sample_backward(int dtype, int nsp, int mode, int padding, int align_corners,
                            int64_t n, int64_t c, const int64_t *isize, const int64_t *osize,
                            intptr_t gy, intptr_t x, const int64_t *xs, intptr_t grid,
                            intptr_t gx, intptr_t ggrid);
