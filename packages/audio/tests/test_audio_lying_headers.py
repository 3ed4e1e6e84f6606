"""Audio files whose headers lie about their length are read by what they hold: a FLAC claiming
2**36 - 1 samples fails with an error naming the file (not a 256 GiB MemoryError), a WAV whose
data chunk claims 4 GiB loads the samples really there."""

import struct

import numpy as np
import pytest

import fiamma.audio

sf = pytest.importorskip("soundfile")


def _tone(n=4000):
    return (np.sin(np.arange(n) / 10) * 0.5).astype(np.float32)


def test_wav_data_chunk_claiming_4gib(tmp_path):
    p = tmp_path / "a.wav"
    sf.write(p, _tone(), 16000, subtype="PCM_16")
    raw = bytearray(p.read_bytes())
    struct.pack_into("<I", raw, raw.index(b"data") + 4, 0xFFFFFFF0)
    p.write_bytes(bytes(raw))
    wav, sr = fiamma.audio.load(p)
    assert tuple(wav.shape) == (1, 4000) and sr == 16000


def test_flac_claiming_2_to_36_samples(tmp_path):
    if "FLAC" not in sf.available_formats():
        pytest.skip("libsndfile without FLAC")
    p = tmp_path / "a.flac"
    sf.write(p, _tone(), 16000)
    raw = bytearray(p.read_bytes())
    # STREAMINFO follows 'fLaC' and its 4-byte block header; total samples: its low 36 bits
    # of the 8 bytes at 10..17
    v = int.from_bytes(raw[18:26], "big") | (2**36 - 1)
    raw[18:26] = v.to_bytes(8, "big")
    p.write_bytes(bytes(raw))
    try:
        wav, _ = fiamma.audio.load(p)
    except fiamma.audio.AudioIOError as e:
        assert "a.flac" in str(e)
    else:
        assert wav.shape[1] <= 4000 * 2
