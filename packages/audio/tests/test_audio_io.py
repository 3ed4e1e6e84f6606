"""fiamma.audio.load/save/info/stream against soundfile's own reads and the written data."""

import io
import os

import numpy as np
import pytest
import soundfile as sf

import fiamma
import fiamma.audio as A

SR = 16000
rng = np.random.default_rng(0)


def _signal(channels=2, frames=4000, sr=SR):
    t = np.arange(frames) / sr
    x = np.stack([0.5 * np.sin(2 * np.pi * (300 + 200 * c) * t) for c in range(channels)])
    return (x + 0.05 * rng.standard_normal(x.shape)).clip(-0.99, 0.99).astype(np.float32)


# (extension, encoding, bits, subtype libsndfile should report, tolerance vs the float data)
WAV_CASES = [
    ("wav", "PCM_S", 16, "PCM_16", 2 ** -15),
    ("wav", "PCM_S", 24, "PCM_24", 2 ** -23),
    ("wav", "PCM_S", 32, "PCM_32", 1e-7),
    ("wav", "PCM_U", 8, "PCM_U8", 2 ** -7),
    ("wav", "PCM_F", 32, "FLOAT", 0.0),
    ("wav", "PCM_F", 64, "DOUBLE", 0.0),
    ("wav", "ULAW", 8, "ULAW", 0.04),
    ("wav", "ALAW", 8, "ALAW", 0.04),
    ("flac", None, 16, "PCM_16", 2 ** -15),
    ("flac", None, 24, "PCM_24", 2 ** -23),
    ("flac", None, 8, "PCM_S8", 2 ** -7),
]
LOSSY = [("ogg", "VORBIS", "OGG"), ("opus", "OPUS", "OGG"), ("mp3", "MPEG_LAYER_III", "MP3")]


def _supported(fmt, sub):
    return fmt in sf.available_formats() and sub in sf.available_subtypes(fmt)


@pytest.mark.parametrize("ext,enc,bits,sub,tol", WAV_CASES)
def test_lossless_round_trip(tmp_path, ext, enc, bits, sub, tol):
    fmt = "WAV" if ext == "wav" else "FLAC"
    if not _supported(fmt, sub):
        pytest.skip(f"{fmt}/{sub} not in this libsndfile")
    x = _signal()
    path = tmp_path / f"a.{ext}"
    A.save(path, fiamma.from_numpy(x), SR, encoding=enc, bits_per_sample=bits)
    assert sf.info(str(path)).subtype == sub
    wav, sr = A.load(path)
    assert sr == SR and wav.dtype == fiamma.float32 and tuple(wav.shape) == x.shape
    ref, _ = sf.read(str(path), dtype="float32", always_2d=True)
    np.testing.assert_array_equal(wav.numpy(), ref.T)
    # within the encoding's precision of what was written (quantisation to nearest or floor)
    assert np.abs(wav.numpy() - x).max() <= 2 * tol + 1e-7
    meta = A.info(path)
    assert (meta.sample_rate, meta.num_frames, meta.num_channels) == (SR, x.shape[1], 2)
    assert meta.bits_per_sample == bits
    assert meta.encoding == ("FLAC" if ext == "flac" else enc)


@pytest.mark.parametrize("ext,sub,fmt", LOSSY)
def test_lossy_round_trip(tmp_path, ext, sub, fmt):
    if not _supported(fmt, sub):
        pytest.skip(f"{fmt}/{sub} not in this libsndfile")
    sr = 48000 if ext == "opus" else SR
    x = _signal(channels=1, frames=sr, sr=sr)
    path = tmp_path / f"a.{ext}"
    A.save(path, fiamma.from_numpy(x), sr)
    wav, got_sr = A.load(path)
    ref, _ = sf.read(str(path), dtype="float32", always_2d=True)
    assert got_sr == sr
    # the MP3 decoder is not bit-reproducible across opens (1 ulp)
    np.testing.assert_allclose(wav.numpy(), ref.T, rtol=0, atol=1e-6)
    # lossy codecs keep the tone: correlation with the input (codec delay allowed for)
    y = wav.numpy()[0]
    best = max(np.corrcoef(x[0, :len(y) - d][:sr // 2], y[d:][:sr // 2])[0, 1]
               for d in range(0, 1200, 1))
    assert best > 0.9
    assert A.info(path).encoding == {"VORBIS": "VORBIS", "OPUS": "OPUS"}.get(sub, "MP3")


@pytest.mark.parametrize("bits,dtype,shift", [(16, fiamma.int16, 0), (32, fiamma.int32, 0),
                                              (24, fiamma.int32, 8)])
def test_integer_read_without_normalize(tmp_path, bits, dtype, shift):
    x = _signal()
    path = tmp_path / "i.wav"
    A.save(path, fiamma.from_numpy(x), SR, encoding="PCM_S", bits_per_sample=bits)
    wav, _ = A.load(path, normalize=False)
    assert wav.dtype == dtype
    ref, _ = sf.read(str(path), dtype="int16" if bits == 16 else "int32", always_2d=True)
    np.testing.assert_array_equal(wav.numpy(), ref.T)
    if shift:
        assert (wav.numpy() & 0xFF == 0).all()  # 24-bit samples left-aligned


def test_uint8_read_and_int_save(tmp_path):
    x = _signal(channels=1)
    path = tmp_path / "u.wav"
    A.save(path, fiamma.from_numpy(x), SR, encoding="PCM_U", bits_per_sample=8)
    wav, _ = A.load(path, normalize=False)
    assert wav.dtype == fiamma.uint8
    f, _ = A.load(path)
    np.testing.assert_allclose((wav.numpy().astype(np.float32) - 128) / 128, f.numpy(), atol=1e-7)
    # int16 tensors are written bit-exactly as PCM_16 by default
    ints = (x * 32767).astype(np.int16)
    A.save(tmp_path / "s.wav", fiamma.from_numpy(ints), SR)
    back, _ = A.load(tmp_path / "s.wav", normalize=False)
    np.testing.assert_array_equal(back.numpy(), ints)
    # uint8 tensors round-trip through PCM_U8
    A.save(tmp_path / "u2.wav", wav, SR)
    back, _ = A.load(tmp_path / "u2.wav", normalize=False)
    np.testing.assert_array_equal(back.numpy(), wav.numpy())


def test_channels_last_and_1d(tmp_path):
    x = _signal(channels=3)
    A.save(tmp_path / "c.wav", fiamma.from_numpy(np.ascontiguousarray(x.T)), SR,
           channels_first=False)
    wav, _ = A.load(tmp_path / "c.wav", channels_first=False)
    np.testing.assert_array_equal(wav.numpy(), x.T)
    A.save(tmp_path / "m.wav", fiamma.from_numpy(x[0]), SR)
    wav, _ = A.load(tmp_path / "m.wav")
    assert tuple(wav.shape) == (1, x.shape[1])


@pytest.mark.parametrize("ext", ["wav", "flac", "ogg"])
def test_partial_reads_equal_slices(tmp_path, ext):
    x = _signal(frames=10000)
    path = tmp_path / f"p.{ext}"
    A.save(path, fiamma.from_numpy(x), SR)
    full, _ = A.load(path)
    for off, n in [(0, 100), (1234, 5000), (9990, -1), (9990, 100), (0, -1), (500, 0)]:
        part, _ = A.load(path, frame_offset=off, num_frames=n)
        end = None if n < 0 else off + n
        np.testing.assert_array_equal(part.numpy(), full.numpy()[:, off:end])


@pytest.mark.parametrize("ext", ["wav", "flac", "mp3"])
def test_stream_chunks_concatenate(tmp_path, ext):
    if ext == "mp3" and "MP3" not in sf.available_formats():
        pytest.skip("no MP3")
    x = _signal(frames=10007)
    path = tmp_path / f"s.{ext}"
    A.save(path, fiamma.from_numpy(x), SR)
    full, _ = A.load(path)
    s = A.stream(path, frames_per_chunk=1000)
    assert (s.sample_rate, s.num_channels) == (SR, 2)
    chunks = list(s)
    assert all(c.shape[-1] == 1000 for c in chunks[:-1]) and 0 < chunks[-1].shape[-1] <= 1000
    atol = 1e-6 if ext == "mp3" else 0  # the MP3 decoder is not bit-reproducible
    np.testing.assert_allclose(np.concatenate([c.numpy() for c in chunks], axis=1),
                               full.numpy(), rtol=0, atol=atol)
    part = list(A.stream(path, 999, frame_offset=500, num_frames=3000))
    np.testing.assert_allclose(np.concatenate([c.numpy() for c in part], axis=1),
                               full.numpy()[:, 500:3500], rtol=0, atol=atol)


def test_file_objects(tmp_path):
    x = _signal()
    buf = io.BytesIO()
    A.save(buf, fiamma.from_numpy(x), SR, format="flac")
    buf.seek(0)
    wav, sr = A.load(buf)
    assert sr == SR and np.abs(wav.numpy() - x).max() < 2 ** -14
    with pytest.raises(ValueError, match="format"):
        A.save(io.BytesIO(), fiamma.from_numpy(x), SR)


def test_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.wav"):
        A.load(tmp_path / "nope.wav")
    bad = tmp_path / "corrupt.wav"
    bad.write_bytes(b"RIFF\x10\x00\x00\x00WAVEjunkjunkjunk" + os.urandom(64))
    with pytest.raises(A.AudioIOError, match="corrupt.wav"):
        A.load(bad)
    with pytest.raises(A.AudioIOError, match="corrupt.wav"):
        A.info(bad)
    txt = tmp_path / "notes.txt"
    txt.write_text("not audio at all\n" * 10)
    with pytest.raises(A.AudioIOError, match="notes.txt"):
        A.load(txt)
    x = fiamma.zeros(1, 100)
    with pytest.raises(ValueError, match="xyz"):
        A.save(tmp_path / "a.xyz", x, SR)
    with pytest.raises(ValueError, match="bits_per_sample"):
        A.save(tmp_path / "a.wav", x, SR, encoding="PCM_S", bits_per_sample=8)
    with pytest.raises(ValueError, match="encoding"):
        A.save(tmp_path / "a.wav", x, SR, encoding="PCM_X")
    with pytest.raises(ValueError, match="shape"):
        A.save(tmp_path / "a.wav", fiamma.zeros(1, 2, 3), SR)
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")]


def test_save_is_atomic_on_failure(tmp_path):
    path = tmp_path / "keep.wav"
    A.save(path, fiamma.zeros(1, 100), SR)
    before = path.read_bytes()
    with pytest.raises(A.AudioIOError):  # opus at 44.1 kHz is refused by libsndfile
        A.save(tmp_path / "keep.opus", fiamma.zeros(1, 100), 44100)
    assert path.read_bytes() == before
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")]


def test_flac_compression_levels(tmp_path):
    x = _signal(frames=16000)
    sizes = []
    for level in (0, 8):
        path = tmp_path / f"c{level}.flac"
        A.save(path, fiamma.from_numpy(x), SR, compression=level)
        wav, _ = A.load(path)
        assert np.abs(wav.numpy() - x).max() <= 2 ** -15 + 1e-7
        sizes.append(path.stat().st_size)
    assert sizes[1] <= sizes[0]
    with pytest.raises(ValueError, match="compression"):
        A.save(tmp_path / "bad.flac", fiamma.from_numpy(x), SR, compression=9)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_save_file_mode_follows_umask(tmp_path):
    # torchaudio.save creates the file as open() does: mode 0666 less the umask, not 0600
    old = os.umask(0o022)
    try:
        A.save(tmp_path / "a.wav", fiamma.zeros(1, 100), SR)
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "a.wav").st_mode & 0o777 == 0o644
    assert os.listdir(tmp_path) == ["a.wav"]
