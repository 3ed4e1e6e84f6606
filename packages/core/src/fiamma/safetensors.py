"""The safetensors format, read and written natively (no code in the file, nothing to trust).

Layout: an 8-byte little-endian header size N, N bytes of JSON (``{"name": {"dtype": "F32",
"shape": [2, 3], "data_offsets": [begin, end]}, ..., "__metadata__": {"k": "v"}}``), then the
tensors' bytes, little-endian and C-contiguous, with offsets counted from the end of the header.
Every header is checked (types, dtype codes, offsets inside the data, sizes matching the shapes,
no overlaps and no gaps) and a malformed file raises ``SafetensorError`` saying what is wrong.

>>> import fiamma, fiamma.safetensors as st
>>> data = st.save({"w": fiamma.ones(2, 2)}, metadata={"format": "pt"})
>>> st.load(data)["w"].sum().item()
4.0
"""

import json
import mmap as _mmap
import os
import struct
import sys

from fiamma import _dtype as D
from fiamma._backend.cpu import host_buffer, host_memmove, pin_buffer
from fiamma._storage import BorrowedStorage, Storage
from fiamma._tensor import Tensor, _init, contiguous_strides

__all__ = ["save_file", "load_file", "save", "load", "safe_open", "SafetensorError"]

MAX_HEADER_SIZE = 100_000_000
_INT64_MAX = (1 << 63) - 1

_CODES = {D.bool: "BOOL", D.uint8: "U8", D.int8: "I8", D.int16: "I16", D.int32: "I32",
          D.int64: "I64", D.float16: "F16", D.bfloat16: "BF16", D.float32: "F32",
          D.float64: "F64", D.complex64: "C64", D.uint16: "U16", D.uint32: "U32",
          D.uint64: "U64"}
_DTYPES = {v: k for k, v in _CODES.items()}
_OTHER_CODES = {"F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "F6_E2M3",
                "F6_E3M2", "E8M0"}


class SafetensorError(ValueError):
    """A malformed safetensors file or an invalid argument."""


# ---- writing ---------------------------------------------------------------------------------

def _check_tensors(tensors, metadata):
    if not isinstance(tensors, dict):
        raise TypeError(f"safetensors: expected a dict of name -> tensor, got "
                        f"{type(tensors).__name__}")
    for k, v in tensors.items():
        if not isinstance(k, str):
            raise TypeError(f"safetensors: tensor names must be str, got {k!r}")
        if k == "__metadata__":
            raise SafetensorError("safetensors: '__metadata__' is reserved, not a tensor name")
        if not isinstance(v, Tensor):
            raise TypeError(f"safetensors: {k!r} is a {type(v).__name__}, not a fiamma tensor")
        if v._dtype not in _CODES:
            raise TypeError(f"safetensors: {k!r} has dtype {v._dtype}, which the safetensors "
                            "format has no code for (complex64 is C64; complex128 has none)")
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("safetensors: metadata must be a dict of str -> str")


def _layout(tensors, metadata):
    """(header bytes, [(tensor, nbytes)]) with the data start 8-aligned and each tensor aligned
    to its element size (widest elements first)."""
    order = sorted(tensors, key=lambda k: (-tensors[k]._dtype.itemsize, k))
    header, parts, pos = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = dict(metadata)
    for k in order:
        t = tensors[k]
        if t._storage.device.type != "cpu":
            t = t.cpu()
        if not t._contig:
            t = t.contiguous()
        n = t._numel * t._dtype.itemsize
        header[k] = {"dtype": _CODES[t._dtype], "shape": list(t._shape),
                     "data_offsets": [pos, pos + n]}
        parts.append((t, n))
        pos += n
    raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw, parts


def _bytes_of(t, n):
    if sys.byteorder != "little":
        raise NotImplementedError("safetensors: writing on a big-endian machine")
    return host_buffer(t._ptr, n)


def save(tensors, metadata=None):
    """The safetensors bytes of ``tensors`` (a dict of name -> tensor) and optional ``metadata``
    (a dict of str -> str). Non-contiguous tensors are written as their values; tensors sharing
    memory are written once each."""
    _check_tensors(tensors, metadata)
    head, parts = _layout(tensors, metadata)
    return head + b"".join(bytes(_bytes_of(t, n)) for t, n in parts)


def save_file(tensors, filename, metadata=None):
    """Write ``tensors`` to ``filename`` atomically (temporary file, fsync, rename).

    >>> import fiamma, fiamma.safetensors as st, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
    >>> st.save_file({"bias": fiamma.zeros(3)}, path)
    >>> st.load_file(path)["bias"].tolist()
    [0.0, 0.0, 0.0]
    """
    from fiamma.serialization import atomic_write

    _check_tensors(tensors, metadata)
    head, parts = _layout(tensors, metadata)
    with atomic_write(os.fspath(filename)) as fp:
        fp.write(head)
        for t, n in parts:
            fp.write(_bytes_of(t, n))


# ---- reading ---------------------------------------------------------------------------------

def _parse(buf, size, name):
    """Validate the header of a safetensors buffer: (data start, {name: (dtype, shape, begin,
    end)} in file order, metadata or None)."""
    if size < 8:
        raise SafetensorError(f"safetensors: {name}: file too small ({size} bytes) to hold a "
                              "header")
    n = struct.unpack("<Q", bytes(buf[:8]))[0]
    if n > MAX_HEADER_SIZE:
        raise SafetensorError(f"safetensors: {name}: header size {n} exceeds the limit "
                              f"{MAX_HEADER_SIZE}")
    if 8 + n > size:
        raise SafetensorError(f"safetensors: {name}: header of {n} bytes runs past the end of "
                              f"the file ({size} bytes; truncated?)")
    raw = bytes(buf[8:8 + n])
    if not raw.startswith(b"{"):
        raise SafetensorError(f"safetensors: {name}: the header is not a JSON object")

    def no_duplicates(pairs):
        d = {}
        for k, v in pairs:
            if k in d:
                raise SafetensorError(f"safetensors: {name}: key {k!r} appears twice in the "
                                      "header")
            d[k] = v
        return d

    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=no_duplicates)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        if isinstance(e, SafetensorError):
            raise
        raise SafetensorError(f"safetensors: {name}: invalid JSON header: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorError(f"safetensors: {name}: the header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict) and all(
            isinstance(v, str) for v in metadata.values())):
        raise SafetensorError(f"safetensors: {name}: __metadata__ must map str to str")
    data_len = size - 8 - n
    entries = {}
    for key, info in header.items():
        where = f"safetensors: {name}: tensor {key!r}"
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise SafetensorError(f"{where}: expected exactly the keys dtype, shape, "
                                  f"data_offsets, got {info!r:.100}")
        code, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        dt = _DTYPES.get(code)
        if dt is None:
            if code in _OTHER_CODES:
                raise SafetensorError(f"{where}: dtype {code} has no fiamma equivalent")
            raise SafetensorError(f"{where}: unknown dtype {code!r}")
        if not isinstance(shape, list) or len(shape) > 64 or not all(
                type(s) is int and s >= 0 for s in shape):
            raise SafetensorError(f"{where}: shape must be a list of non-negative ints, got "
                                  f"{shape!r:.100}")
        if not isinstance(offs, list) or len(offs) != 2 or not all(
                type(o) is int and o >= 0 for o in offs):
            raise SafetensorError(f"{where}: data_offsets must be [begin, end], got "
                                  f"{offs!r:.100}")
        numel = span = 1
        for s in shape:
            numel *= s
            span *= s or 1
        if span * dt.itemsize > _INT64_MAX:
            raise SafetensorError(f"{where}: shape {shape} has more elements than an int64 can "
                                  "count (even with a zero dimension, PyTorch refuses it)")
        begin, end = offs
        if begin > end or end > data_len:
            raise SafetensorError(f"{where}: data_offsets {offs} outside the {data_len} data "
                                  "bytes (truncated file?)")
        if (end - begin) != numel * dt.itemsize:
            raise SafetensorError(f"{where}: shape {shape} of {code} needs "
                                  f"{numel * dt.itemsize} bytes, data_offsets give {end - begin}")
        entries[key] = (dt, tuple(shape), begin, end)
    pos = 0
    for key, (_, _, begin, end) in sorted(entries.items(), key=lambda kv: kv[1][2:]):
        if begin != pos:
            what = "overlaps the previous tensor" if begin < pos else f"leaves a gap at {pos}"
            raise SafetensorError(f"safetensors: {name}: tensor {key!r} {what}")
        pos = end
    if pos != data_len:
        raise SafetensorError(f"safetensors: {name}: {data_len - pos} bytes after the last "
                              "tensor are not described by the header")
    return 8 + n, entries, metadata


def _tensor(dt, shape, storage):
    t = object.__new__(Tensor)
    _init(t, storage, dt, shape, contiguous_strides(shape), 0, True)
    return t


def _copy_tensor(dt, shape, src_ptr, nbytes):
    st = Storage(nbytes)
    if nbytes:
        host_memmove(st.ptr, src_ptr, nbytes)
    return _tensor(dt, shape, st)


def _to_device(t, device):
    if device in ("cpu", None) or getattr(device, "type", None) == "cpu":
        return t
    return t.to(device)


class _Mapped:
    """A file mapped privately (copy-on-write) with its parsed header."""

    def __init__(self, filename):
        self.name = os.fspath(filename)
        with open(self.name, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 8:
                raise SafetensorError(f"safetensors: {self.name}: file too small ({size} bytes) "
                                      "to hold a header")
            mm = _mmap.mmap(f.fileno(), 0, access=_mmap.ACCESS_COPY)
        # buf keeps the mapping alive while tensors view it
        self.buf, self.base = pin_buffer(mm)
        self.start, self.entries, self.meta = _parse(mm, size, self.name)

    def tensor(self, key):
        dt, shape, begin, end = self.entries[key]
        ptr = self.base + self.start + begin
        if ptr % dt.itemsize:  # a writer that did not align: copy rather than view
            return _copy_tensor(dt, shape, ptr, end - begin)
        return _tensor(dt, shape, BorrowedStorage(ptr, end - begin, self.buf))


def load_file(filename, device="cpu"):
    """Load every tensor of a safetensors file, memory-mapped: the tensors view the file's pages
    (a private mapping: writing to a tensor never changes the file).

    >>> import fiamma, fiamma.safetensors as st, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "m.safetensors")
    >>> st.save_file({"a": fiamma.arange(4)}, path)
    >>> st.load_file(path)["a"].tolist()
    [0, 1, 2, 3]
    """
    m = _Mapped(filename)
    return {k: _to_device(m.tensor(k), device) for k in m.entries}


def load(data):
    """Tensors from safetensors bytes (copied into fiamma memory)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"safetensors.load: expected bytes, got {type(data).__name__}")
    mv = memoryview(data).cast("B")
    start, entries, _ = _parse(mv, mv.nbytes, "<bytes>")
    keep, base = pin_buffer(mv) if mv.nbytes else (None, 0)
    return {k: _copy_tensor(dt, shape, base + start + b, e - b)
            for k, (dt, shape, b, e) in entries.items()}


class safe_open:
    """Open a safetensors file lazily: ``keys()``, ``metadata()``, ``get_tensor(name)``.

    framework: 'pt' / 'fiamma' (fiamma tensors) or 'np' (NumPy arrays; not for bfloat16).

    >>> import fiamma, fiamma.safetensors as st, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "m.safetensors")
    >>> st.save_file({"a": fiamma.ones(2)}, path, metadata={"step": "3"})
    >>> with st.safe_open(path, framework="pt") as f:
    ...     f.keys(), f.metadata(), f.get_tensor("a").tolist()
    (['a'], {'step': '3'}, [1.0, 1.0])
    """

    def __init__(self, filename, framework="pt", device="cpu"):
        if framework not in ("pt", "torch", "pytorch", "fiamma", "np", "numpy"):
            raise ValueError(f"safe_open: framework must be 'pt', 'fiamma' or 'np', got "
                             f"{framework!r}")
        self.framework = "np" if framework in ("np", "numpy") else "pt"
        self.device = device
        self._m = _Mapped(filename)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def keys(self):
        return sorted(self._m.entries)

    def offset_keys(self):
        return sorted(self._m.entries, key=lambda k: self._m.entries[k][2])

    def metadata(self):
        return None if self._m.meta is None else dict(self._m.meta)

    def get_tensor(self, name):
        if name not in self._m.entries:
            raise SafetensorError(f"safe_open: no tensor named {name!r} in {self._m.name}")
        t = self._m.tensor(name)
        if self.framework == "np":
            if t._dtype is D.bfloat16:
                raise TypeError(f"safe_open: {name!r} is bfloat16, which NumPy has no dtype for; "
                                "use framework='pt'")
            return t.numpy()
        return _to_device(t, self.device)
