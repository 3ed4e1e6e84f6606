"""Audio file I/O: ``load``, ``save``, ``info`` and ``stream`` (torchaudio's API) over libsndfile.

libsndfile (shipped inside the ``soundfile`` wheel) decodes WAV, FLAC, OGG/Vorbis, OGG/Opus and MP3
(what this build supports is probed at run time with ``soundfile.available_formats()``); the decoded
NumPy buffer is wrapped as a fiamma tensor without a copy.

>>> import fiamma, fiamma.audio, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "tone.wav")
>>> fiamma.audio.save(path, fiamma.zeros(1, 160), 16000)
>>> wav, sr = fiamma.audio.load(path)
>>> tuple(wav.shape), sr
((1, 160), 16000)
"""

import os

import numpy as np

import fiamma
from fiamma.utils.files import temp_file_beside

__all__ = ["load", "save", "info", "stream", "AudioMetaData", "AudioStream", "AudioIOError"]


class AudioIOError(RuntimeError):
    """A file could not be read or written; the message names the file and libsndfile's reason."""


def _sf():
    # soundfile loads libsndfile (a few ms): import it on first use so `import fiamma.audio` is fast
    import soundfile
    return soundfile


class AudioMetaData:
    """What ``info`` returns (torchaudio.AudioMetaData's fields). A plain class rather than a
    dataclass: importing dataclasses would double ``import fiamma.audio``'s time."""

    __slots__ = ("sample_rate", "num_frames", "num_channels", "bits_per_sample", "encoding")

    def __init__(self, sample_rate, num_frames, num_channels, bits_per_sample, encoding):
        self.sample_rate, self.num_frames, self.num_channels = sample_rate, num_frames, num_channels
        self.bits_per_sample, self.encoding = bits_per_sample, encoding

    def _fields(self):
        return tuple(getattr(self, k) for k in self.__slots__)

    def __eq__(self, other):
        return isinstance(other, AudioMetaData) and self._fields() == other._fields()

    __hash__ = None

    def __repr__(self):
        args = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"AudioMetaData({args})"


# format names a user may pass (or a file extension) -> (libsndfile format, default subtype or None)
_FORMATS = {
    "wav": ("WAV", None), "wave": ("WAV", None), "flac": ("FLAC", None), "ogg": ("OGG", "VORBIS"),
    "vorbis": ("OGG", "VORBIS"), "opus": ("OGG", "OPUS"), "mp3": ("MP3", "MPEG_LAYER_III"),
    "sph": ("NIST", None), "aiff": ("AIFF", None), "aif": ("AIFF", None), "au": ("AU", None),
    "caf": ("CAF", None), "w64": ("W64", None), "rf64": ("RF64", None),
}

_BITS = {"PCM_S8": 8, "PCM_U8": 8, "PCM_16": 16, "PCM_24": 24, "PCM_32": 32, "FLOAT": 32,
         "DOUBLE": 64, "ULAW": 8, "ALAW": 8}
_ENCODING = {"PCM_S8": "PCM_S", "PCM_16": "PCM_S", "PCM_24": "PCM_S", "PCM_32": "PCM_S",
             "PCM_U8": "PCM_U", "FLOAT": "PCM_F", "DOUBLE": "PCM_F", "ULAW": "ULAW",
             "ALAW": "ALAW", "VORBIS": "VORBIS", "OPUS": "OPUS", "MPEG_LAYER_III": "MP3",
             "MPEG_LAYER_I": "MP3", "MPEG_LAYER_II": "MP3"}


def _name(f):
    if isinstance(f, (str, os.PathLike)):
        return os.fspath(f)
    return getattr(f, "name", None) or f"<{type(f).__name__} object>"


def _open(op, path, format=None):
    """Open for reading; every failure becomes an error naming the file and the reason."""
    sf = _sf()
    name = _name(path)
    if isinstance(path, (str, os.PathLike)) and not os.path.exists(path):
        raise FileNotFoundError(f"fiamma.audio.{op}: no such file: '{name}'")
    kw = {}
    if format is not None:
        fmt = _FORMATS.get(format.lower(), (format.upper(), None))[0]
        # libsndfile only needs the container for headerless data; it detects the rest itself
        if fmt == "RAW":
            kw["format"] = fmt
    try:
        return sf.SoundFile(path, "r", **kw)
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError) as e:
        raise AudioIOError(f"fiamma.audio.{op}: cannot read '{name}': {e}") from None


def _read_dtype(f, normalize):
    """The NumPy dtype to decode into and the dtype of the returned tensor (torchaudio's rules)."""
    if normalize or f.format not in ("WAV", "WAVEX", "RF64", "W64"):
        return "float32", None
    sub = f.subtype
    if sub == "PCM_16":
        return "int16", None
    if sub in ("PCM_24", "PCM_32"):
        return "int32", None  # 24-bit samples come left-aligned in int32 (torchaudio's way)
    if sub == "PCM_U8":
        return "int16", "uint8"
    if sub == "DOUBLE":
        return "float64", None
    return "float32", None


def _to_tensor(arr, final, channels_first):
    if final == "uint8":  # libsndfile has no uint8 read: int16 holds the sample << 8
        arr = ((arr.astype(np.int32) >> 8) + 128).astype(np.uint8)
    t = fiamma.from_numpy(arr)
    return t.T if channels_first else t


def load(uri, frame_offset=0, num_frames=-1, normalize=True, channels_first=True, format=None,
         buffer_size=4096, backend=None):
    """Load an audio file into a tensor: returns ``(waveform, sample_rate)``.

    ``waveform`` is ``(channels, frames)`` (``(frames, channels)`` if ``channels_first=False``).
    With ``normalize=True`` it is float32 in [-1, 1]; with ``normalize=False`` an integer-encoded
    WAV keeps its PCM type (int16, int32 for 24/32-bit (left-aligned), uint8), as torchaudio does.
    ``frame_offset``/``num_frames`` read a slice without decoding the rest of the file (formats
    that cannot seek are decoded up to the offset).

    >>> wav, sr = fiamma.audio.load("a.flac", frame_offset=16000, num_frames=8000)  # doctest: +SKIP
    """
    frame_offset, num_frames = int(frame_offset), int(num_frames)
    if frame_offset < 0:
        raise ValueError(f"fiamma.audio.load: frame_offset must be >= 0, got {frame_offset}")
    if num_frames < -1:
        raise ValueError(f"fiamma.audio.load: num_frames must be -1 or >= 0, got {num_frames}")
    name = _name(uri)
    with _open("load", uri, format) as f:
        dtype, final = _read_dtype(f, normalize)
        try:
            if frame_offset:
                if f.seekable():
                    f.seek(min(frame_offset, f.frames))
                else:
                    f.read(frame_offset, dtype=dtype)
            want = f.frames - (f.tell() if f.seekable() else frame_offset) \
                if num_frames < 0 else num_frames
            if _implausible(uri, f, want):
                arr = _read_blocks(f, num_frames, dtype)
            else:
                arr = f.read(num_frames, dtype=dtype, always_2d=True)
        except (_sf().LibsndfileError, RuntimeError) as e:
            raise AudioIOError(f"fiamma.audio.load: cannot decode '{name}': {e}") from None
        sr = f.samplerate
    return _to_tensor(arr, final, channels_first), sr


# No codec libsndfile reads stores more than a few hundred samples per byte (FLAC's constant
# subframes of silence come nearest); a header claiming more than this lies about its length
_MAX_SAMPLES_PER_BYTE = 4096


def _implausible(uri, f, frames):
    """A frame count that the file's size can't hold (a lying header): such a file is read in
    blocks, so memory follows the samples really there, not the header's claim."""
    if frames * f.channels <= 1 << 22:
        return False
    try:
        size = os.path.getsize(uri) if isinstance(uri, (str, os.PathLike)) else None
    except OSError:
        size = None
    return size is None or frames * f.channels > _MAX_SAMPLES_PER_BYTE * max(size, 1)


def _read_blocks(f, num_frames, dtype):
    parts, got = [], 0
    while num_frames < 0 or got < num_frames:
        n = 1 << 16 if num_frames < 0 else min(1 << 16, num_frames - got)
        block = f.read(n, dtype=dtype, always_2d=True)
        if not len(block):
            break
        parts.append(block)
        got += len(block)
        if len(block) < n:
            break
    if not parts:
        return np.zeros((0, f.channels), dtype)
    return np.concatenate(parts)


def info(uri, format=None, buffer_size=4096, backend=None):
    """Metadata of an audio file without decoding it: an ``AudioMetaData``.

    >>> fiamma.audio.info("speech.flac")  # doctest: +SKIP
    AudioMetaData(sample_rate=16000, num_frames=960000, num_channels=1, bits_per_sample=16,
                  encoding='FLAC')
    """
    with _open("info", uri, format) as f:
        sub = f.subtype
        enc = "FLAC" if f.format == "FLAC" else _ENCODING.get(sub, "UNKNOWN")
        return AudioMetaData(f.samplerate, f.frames, f.channels, _BITS.get(sub, 0), enc)


def _subtype(op, fmt, dtype, encoding, bits):
    """torchaudio's (encoding, bits_per_sample) -> libsndfile subtype for the container ``fmt``."""
    bad = ValueError(f"fiamma.audio.{op}: {fmt} cannot store encoding={encoding!r} with "
                     f"bits_per_sample={bits!r}")
    if fmt in ("WAV", "WAVEX", "RF64", "W64", "AIFF", "AU", "CAF", "NIST"):
        if encoding is None:
            if bits is None:
                return {"uint8": "PCM_U8", "int16": "PCM_16", "int32": "PCM_32",
                        "float64": "DOUBLE"}.get(dtype, "FLOAT")
            if bits == 8:
                return "PCM_U8"
            if bits in (16, 24, 32):
                return f"PCM_{bits}"
            raise bad
        if encoding == "PCM_S":
            if bits in (None, 16, 24, 32):
                return f"PCM_{bits or 32}"
            raise bad
        if encoding == "PCM_U":
            if bits in (None, 8):
                return "PCM_U8"
            raise bad
        if encoding == "PCM_F":
            if bits in (None, 32, 64):
                return "DOUBLE" if bits == 64 else "FLOAT"
            raise bad
        if encoding in ("ULAW", "ALAW"):
            if bits in (None, 8):
                return encoding
            raise bad
        raise ValueError(f"fiamma.audio.{op}: unknown encoding {encoding!r}; expected one of "
                         "'PCM_S', 'PCM_U', 'PCM_F', 'ULAW', 'ALAW'")
    if fmt == "FLAC":
        if encoding not in (None, "PCM_S", "FLAC"):
            raise bad
        sub = {None: "PCM_16", 8: "PCM_S8", 16: "PCM_16", 24: "PCM_24"}.get(bits)
        if sub is None:
            raise bad
        return sub
    return None





def save(uri, src, sample_rate, channels_first=True, format=None, encoding=None,
         bits_per_sample=None, buffer_size=4096, backend=None, compression=None):
    """Write ``src`` (``(channels, frames)``, or ``(frames, channels)`` if not channels_first).

    The container comes from ``format`` or the file extension (wav, flac, ogg/vorbis, opus, mp3,
    ...); ``encoding`` ("PCM_S", "PCM_U", "PCM_F", "ULAW", "ALAW") and ``bits_per_sample`` choose
    the sample encoding as in torchaudio (defaults follow the tensor's dtype for WAV: float32 ->
    32-bit float, int16 -> PCM_16, ...). Paths are written to a temporary name and renamed, so an
    interrupted save leaves no partial file.

    >>> fiamma.audio.save("out.flac", wav, 16000, bits_per_sample=24)  # doctest: +SKIP
    """
    sf = _sf()
    name = _name(uri)
    if not isinstance(src, fiamma.Tensor):
        raise TypeError(f"fiamma.audio.save: src must be a fiamma.Tensor, got {type(src).__name__}")
    if src.dim() not in (1, 2):
        raise ValueError(f"fiamma.audio.save: src must be 1-D or 2-D (channels, frames), got "
                         f"shape {tuple(src.shape)}")
    if format is None:
        if not isinstance(uri, (str, os.PathLike)):
            raise ValueError("fiamma.audio.save: format= is required when writing to a file object")
        format = os.path.splitext(name)[1][1:]
    key = format.lower()
    fmt, sub = _FORMATS.get(key, (format.upper(), None))
    avail = sf.available_formats()
    if fmt not in avail:
        raise ValueError(f"fiamma.audio.save: format {format!r} ('{name}') is not supported by "
                         f"this libsndfile; available: {sorted(avail)}")
    arr = src.detach().cpu().numpy() if hasattr(src, "detach") else src.numpy()
    if arr.ndim == 1:
        arr = arr[None, :] if channels_first else arr[:, None]
    if channels_first:
        arr = arr.T
    dtype = str(arr.dtype)
    if dtype == "uint8":
        arr = (arr.astype(np.float32) - 128.0) / 128.0
    elif dtype not in ("int16", "int32", "float32", "float64"):
        arr = arr.astype(np.float32)
    if sub is None:
        sub = _subtype("save", fmt, dtype, encoding, bits_per_sample)
    if sub is not None and sub not in sf.available_subtypes(fmt):
        raise ValueError(f"fiamma.audio.save: encoding {sub} is not available for {fmt} in this "
                         f"libsndfile; available: {sorted(sf.available_subtypes(fmt))}")
    arr = np.ascontiguousarray(arr)
    kw = {}
    if compression is not None and fmt in ("FLAC", "OGG", "MP3"):
        # libsndfile takes a level in [0, 1]; FLAC levels 0..8 (torchaudio's) are scaled to it
        c = float(compression)
        c = c / 8 if fmt == "FLAC" and c > 1 else c
        if not 0 <= c <= 1:
            raise ValueError(f"fiamma.audio.save: compression must be in [0, 1] (or 0..8 for "
                             f"FLAC), got {compression}")
        kw["compression_level"] = c
    if not isinstance(uri, (str, os.PathLike)):
        try:
            sf.write(uri, arr, int(sample_rate), subtype=sub, format=fmt, **kw)
        except (sf.LibsndfileError, RuntimeError, TypeError, ValueError) as e:
            raise AudioIOError(f"fiamma.audio.save: cannot write '{name}': {e}") from None
        return
    fd, tmp = temp_file_beside(name, os.path.splitext(name)[1])
    os.close(fd)
    try:
        sf.write(tmp, arr, int(sample_rate), subtype=sub, format=fmt, **kw)
        os.replace(tmp, name)
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError) as e:
        raise AudioIOError(f"fiamma.audio.save: cannot write '{name}': {e}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class AudioStream:
    """Iterator over fixed-size chunks of a file, decoding one chunk at a time (a small
    ``torchaudio.io.StreamReader``). Each chunk is ``(channels, frames_per_chunk)``; the last
    may be shorter. ``sample_rate``, ``num_channels`` and ``num_frames`` describe the source.

    >>> for chunk in fiamma.audio.stream("long.flac", frames_per_chunk=16000):  # doctest: +SKIP
    ...     process(chunk)
    """

    def __init__(self, uri, frames_per_chunk, frame_offset=0, num_frames=-1, normalize=True,
                 channels_first=True, format=None):
        if int(frames_per_chunk) <= 0:
            raise ValueError("fiamma.audio.stream: frames_per_chunk must be > 0, got "
                             f"{frames_per_chunk}")
        self._uri, self._fmt = uri, format
        self.frames_per_chunk = int(frames_per_chunk)
        self._offset, self._limit = int(frame_offset), int(num_frames)
        self._normalize, self._cf = normalize, channels_first
        self._file = _open("stream", uri, format)  # opened now so a bad file fails here
        f = self._file
        self.sample_rate, self.num_channels, self.num_frames = f.samplerate, f.channels, f.frames

    def __iter__(self):
        f, self._file = self._file, None
        if f is None or f.closed:
            f = _open("stream", self._uri, self._fmt)
        with f:
            dtype, final = _read_dtype(f, self._normalize)
            if self._offset:
                if f.seekable():
                    f.seek(min(self._offset, f.frames))
                else:
                    f.read(self._offset, dtype=dtype)
            left = self._limit
            # frames still in the file (as libsndfile counts them); reading into a preallocated
            # buffer spares soundfile's per-read seeks to find out the same
            avail = max(f.frames - min(self._offset, f.frames), 0)
            while left != 0:
                n = self.frames_per_chunk if left < 0 else min(left, self.frames_per_chunk)
                n = min(n, avail) if avail > 0 else n
                try:
                    arr = f.read(n, dtype=dtype, always_2d=True,
                                 out=np.empty((n, f.channels), dtype))
                    avail -= arr.shape[0]
                except (_sf().LibsndfileError, RuntimeError) as e:
                    raise AudioIOError(f"fiamma.audio.stream: cannot decode '{_name(self._uri)}'"
                                       f": {e}") from None
                if arr.shape[0] == 0:
                    return
                yield _to_tensor(arr, final, self._cf)
                if left > 0:
                    left -= arr.shape[0]
                if arr.shape[0] < n:
                    return


def stream(uri, frames_per_chunk, frame_offset=0, num_frames=-1, normalize=True,
           channels_first=True, format=None):
    """Chunks of a (long) file without loading it whole: an iterable ``AudioStream``."""
    return AudioStream(uri, frames_per_chunk, frame_offset, num_frames, normalize,
                       channels_first, format)
