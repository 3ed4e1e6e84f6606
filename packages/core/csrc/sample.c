/* Resampling kernels: upsampling (nearest, nearest-exact, linear, cubic; 1-3 spatial dims) and
 * grid_sample (2-D bilinear/nearest/bicubic, 3-D bilinear/nearest) with their backward.
 * Coordinates follow PyTorch's conventions (align_corners, scale factors, A = -0.75 bicubic
 * with clamped borders, zeros/border/reflection padding), computed in the tensor's own float
 * type as PyTorch does, so results agree to rounding. Threads split over (batch, channel)
 * planes, which never write the same element. */
#include <omp.h>
#include <stdlib.h>

#include "fiamma.h"
#include "dtypes.h"
#include "api_sample.h"

/* Work (taps: output elements times interpolation taps) below which a kernel runs on one
   thread: ~50 us single-threaded here; below it waking a second thread cost more than it
   saved, and on a loaded machine far more. */
#define SAMPLE_PAR_MIN 262144.0

#define ST float
#define F(name) name##_f32
#include "sample_impl.h"
#undef ST
#undef F
#define ST double
#define F(name) name##_f64
#include "sample_impl.h"
#undef ST
#undef F

static int check_sizes(int nsp, int64_t n, int64_t c, const int64_t *isize,
                       const int64_t *osize) {
    if (nsp < 1 || nsp > 3 || n < 0 || c < 0) return FM_ERR_ARG;
    for (int d = 0; d < nsp; d++)
        if (isize[d] < 1 || osize[d] < 0) return FM_ERR_ARG;
    return FM_OK;
}

int fm_upsample(int dtype, int mode, int align_corners, int nsp, int64_t n, int64_t c,
                const int64_t *isize, const int64_t *osize, const double *scales,
                intptr_t x, const int64_t *xs, intptr_t y) {
    int rc = check_sizes(nsp, n, c, isize, osize);
    if (rc) return rc;
    if (mode < FM_SAMPLE_NEAREST || mode > FM_SAMPLE_CUBIC) return FM_ERR_OP;
    if (dtype == FM_FLOAT32)
        return upsample_f32(0, mode, align_corners, nsp, n, c, isize, osize, scales,
                            (float *)x, xs, (float *)y);
    if (dtype == FM_FLOAT64)
        return upsample_f64(0, mode, align_corners, nsp, n, c, isize, osize, scales,
                            (double *)x, xs, (double *)y);
    return FM_ERR_DTYPE;
}

int fm_upsample_backward(int dtype, int mode, int align_corners, int nsp, int64_t n, int64_t c,
                         const int64_t *isize, const int64_t *osize, const double *scales,
                         intptr_t gy, intptr_t gx) {
    int rc = check_sizes(nsp, n, c, isize, osize);
    if (rc) return rc;
    if (mode < FM_SAMPLE_NEAREST || mode > FM_SAMPLE_CUBIC) return FM_ERR_OP;
    int64_t xs[5] = {0, 0, 0, 0, 0};
    int64_t s = 1;
    for (int d = nsp - 1; d >= 0; d--) {
        xs[2 + d] = s;
        s *= isize[d];
    }
    xs[1] = s;
    xs[0] = s * c;
    if (dtype == FM_FLOAT32)
        return upsample_f32(1, mode, align_corners, nsp, n, c, isize, osize, scales,
                            (float *)gx, xs, (float *)gy);
    if (dtype == FM_FLOAT64)
        return upsample_f64(1, mode, align_corners, nsp, n, c, isize, osize, scales,
                            (double *)gx, xs, (double *)gy);
    return FM_ERR_DTYPE;
}

static int check_grid(int nsp, int mode, int padding) {
    if (nsp != 2 && nsp != 3) return FM_ERR_ARG;
    if (mode != FM_SAMPLE_NEAREST && mode != FM_SAMPLE_LINEAR && mode != FM_SAMPLE_CUBIC)
        return FM_ERR_OP;
    if (mode == FM_SAMPLE_CUBIC && nsp != 2) return FM_ERR_OP;
    if (padding < FM_PAD_ZEROS || padding > FM_PAD_REFLECTION) return FM_ERR_OP;
    return FM_OK;
}

int fm_grid_sample(int dtype, int nsp, int mode, int padding, int align_corners,
                   int64_t n, int64_t c, const int64_t *isize, const int64_t *osize,
                   intptr_t x, const int64_t *xs, intptr_t grid, intptr_t y) {
    int rc = check_grid(nsp, mode, padding);
    if (!rc) rc = check_sizes(nsp, n, c, isize, osize);
    if (rc) return rc;
    if (dtype == FM_FLOAT32)
        return grid_sample_f32(nsp, mode, padding, align_corners, n, c, isize, osize,
                               (const float *)x, xs, (const float *)grid, (float *)y);
    if (dtype == FM_FLOAT64)
        return grid_sample_f64(nsp, mode, padding, align_corners, n, c, isize, osize,
                               (const double *)x, xs, (const double *)grid, (double *)y);
    return FM_ERR_DTYPE;
}

int fm_grid_sample_backward(int dtype, int nsp, int mode, int padding, int align_corners,
                            int64_t n, int64_t c, const int64_t *isize, const int64_t *osize,
                            intptr_t gy, intptr_t x, const int64_t *xs, intptr_t grid,
                            intptr_t gx, intptr_t ggrid) {
    int rc = check_grid(nsp, mode, padding);
    if (!rc) rc = check_sizes(nsp, n, c, isize, osize);
    if (rc) return rc;
    if (dtype == FM_FLOAT32)
        return grid_sample_backward_f32(nsp, mode, padding, align_corners, n, c, isize, osize,
                                        (const float *)gy, (const float *)x, xs,
                                        (const float *)grid, (float *)gx, (float *)ggrid);
    if (dtype == FM_FLOAT64)
        return grid_sample_backward_f64(nsp, mode, padding, align_corners, n, c, isize, osize,
                                        (const double *)gy, (const double *)x, xs,
                                        (const double *)grid, (double *)gx, (double *)ggrid);
    return FM_ERR_DTYPE;
}
