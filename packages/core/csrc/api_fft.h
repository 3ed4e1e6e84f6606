/* Short-time Fourier transform kernel (fft.c): frames of a real signal, windowed, through a
 * mixed-radix FFT, written straight into the spectrogram layout. float32 and float64.
 *
 * x: (B, L) contiguous signal rows. Frame t covers padded samples [t*hop, t*hop + n_fft); the
 * padded signal is x with `pad` samples added on both sides by pad_mode (FM_STFT_PAD_*; reflect
 * needs pad < L). window: n_fft values (already zero-padded to n_fft), or 0 for all ones.
 * n_freq = n_fft/2 + 1 when onesided, else n_fft. Each value is multiplied by `scale`.
 *
 * mode FM_STFT_COMPLEX: out (B, n_freq, n_frames, 2) contiguous (real, imag) pairs.
 * mode FM_STFT_POWER:   out (B, n_freq, n_frames) contiguous, |X|^2 (scale applied before).
 *
 * Errors: FM_ERR_DTYPE; FM_ERR_ARG (sizes, mode, pad mode, reflect pad >= L); FM_ERR_INDEX (a
 * frame that reaches past the padded signal); FM_ERR_NOMEM.
 */
#define FM_STFT_COMPLEX 0
#define FM_STFT_POWER 1

#define FM_STFT_PAD_CONSTANT 0
#define FM_STFT_PAD_REFLECT 1
#define FM_STFT_PAD_REPLICATE 2
#define FM_STFT_PAD_CIRCULAR 3

int fm_stft(int dtype, int mode, int64_t B, int64_t L, intptr_t x, int64_t n_fft, int64_t hop,
            int64_t n_frames, int64_t pad, int pad_mode, intptr_t window, int onesided,
            double scale, intptr_t out);

/* The largest prime factor fm_stft handles at full speed (radix 2, 3, 4, 5 butterflies; other
 * primes use an O(p^2) butterfly): n_fft (or n_fft/2 when even) with a larger prime factor is
 * better left to a Bluestein FFT. */
int64_t fm_fft_largest_factor(int64_t n);
