"""``torchaudio.functional.filtering``'s names (filters and SoX effects), for programs that import
that module directly; the functions are those of ``fiamma.audio.functional``."""

from fiamma.audio.functional._effects import (  # noqa: F401
    band_biquad,
    bass_biquad,
    contrast,
    dcshift,
    deemph_biquad,
    dither,
    equalizer_biquad,
    flanger,
    overdrive,
    phaser,
    riaa_biquad,
    treble_biquad,
    vad,
)
from fiamma.audio.functional._filtering import (  # noqa: F401
    allpass_biquad,
    bandpass_biquad,
    bandreject_biquad,
    biquad,
    filtfilt,
    gain,
    highpass_biquad,
    lfilter,
    lowpass_biquad,
)

__all__ = ["allpass_biquad", "band_biquad", "bandpass_biquad", "bandreject_biquad",
           "bass_biquad", "biquad", "contrast", "dcshift", "deemph_biquad", "dither",
           "equalizer_biquad", "filtfilt", "flanger", "gain", "highpass_biquad", "lfilter",
           "lowpass_biquad", "overdrive", "phaser", "riaa_biquad", "treble_biquad", "vad"]
