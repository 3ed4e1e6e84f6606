/* stft in C: windowed frames of a real signal through a mixed-radix FFT (radix 2, 3, 4, 5 and
 * a generic odd-prime butterfly), NL frames at a time in SIMD lanes, written straight into the
 * (freq, frames[, 2]) layout, or as |X|^2 for power spectrograms. Threads split over blocks of
 * frames, which write disjoint output columns. See fft_impl.h for the algorithm. */
#include <omp.h>
#include <stdlib.h>

#include "fiamma.h"
#include "api_fft.h"

/* Vectors pass between always-inline helpers only; no ABI is crossed. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#define ST float
#define NL 16
#define F(name) name##_f32
#include "fft_impl.h"
#undef ST
#undef NL
#undef F
#define ST double
#define NL 8
#define F(name) name##_f64
#include "fft_impl.h"
#undef ST
#undef NL
#undef F

int64_t fm_fft_largest_factor(int64_t n) {
    int64_t best = 1;
    if (n < 1) return 0;
    for (int64_t f = 2; f * f <= n; f += (f == 2 ? 1 : 2))
        while (n % f == 0) {
            best = f;
            n /= f;
        }
    return n > 1 ? n : best;
}

int fm_stft(int dtype, int mode, int64_t B, int64_t L, intptr_t x, int64_t n_fft, int64_t hop,
            int64_t n_frames, int64_t pad, int pad_mode, intptr_t window, int onesided,
            double scale, intptr_t out) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (mode != FM_STFT_COMPLEX && mode != FM_STFT_POWER) return FM_ERR_ARG;
    if (pad_mode < FM_STFT_PAD_CONSTANT || pad_mode > FM_STFT_PAD_CIRCULAR) return FM_ERR_ARG;
    if (B < 0 || L < 0 || n_fft < 1 || hop < 1 || n_frames < 0 || pad < 0) return FM_ERR_ARG;
    if (B == 0 || n_frames == 0) return FM_OK;
    if (L < 1) return FM_ERR_ARG;
    if (pad_mode == FM_STFT_PAD_REFLECT && pad >= L) return FM_ERR_ARG;
    /* every frame inside the padded signal */
    if ((n_frames - 1) > (L + 2 * pad - n_fft) / hop || L + 2 * pad < n_fft) return FM_ERR_INDEX;
    if (dtype == FM_FLOAT32)
        return run_f32(mode, B, L, (const float *)x, n_fft, hop, n_frames, pad, pad_mode,
                       (const float *)window, onesided, scale, (float *)out);
    return run_f64(mode, B, L, (const double *)x, n_fft, hop, n_frames, pad, pad_mode,
                   (const double *)window, onesided, scale, (double *)out);
}
