"""``fiamma.save`` / ``fiamma.load``: PyTorch's checkpoint files, read and written without PyTorch.

``save`` writes PyTorch's zip format (what ``torch.save`` writes since 1.6), so ``torch.load``
(with its default ``weights_only=True``) reads the file. ``load`` reads that format and the
legacy one (``_use_new_zipfile_serialization=False``, PyTorch < 1.6) through a restricted
unpickler: only tensors, storages, OrderedDict and plain containers are rebuilt; any other global
in the file is refused with ``pickle.UnpicklingError``, so loading never runs code from the file.

Importing this module is cheap: the pickle and zip machinery is imported on the first call.
"""

import os

__all__ = ["save", "load"]

_ALIGN = 64             # data records start at a multiple of this in the file (as PyTorch)
_FORMAT_VERSION = b"3\n"


# ---- save ------------------------------------------------------------------------------------

def save(obj, f, pickle_protocol=2):
    """Save ``obj`` (tensors in nested dicts, lists, tuples, numbers, strings, ...) to ``f`` in
    PyTorch's zip checkpoint format.

    ``f`` is a path (the file is written under a temporary name in the same folder, flushed to
    disk and renamed over ``f``, so an interrupted save leaves any old file intact) or a binary
    file object. Tensors that share a storage (views) are saved once and share it again after
    loading. Supported objects: tensors, dict, OrderedDict, list, tuple, set, int, float,
    complex, bool, None, str, bytes, fiamma.dtype, fiamma.device, fiamma.Size.

    >>> import fiamma, io
    >>> buf = io.BytesIO()
    >>> fiamma.save({"w": fiamma.ones(2, 3), "step": 10}, buf)
    >>> _ = buf.seek(0); fiamma.load(buf)["w"].shape
    fiamma.Size([2, 3])
    """
    payload, storages = _pickle(obj, pickle_protocol)
    if isinstance(f, (str, bytes, os.PathLike)):
        path = os.fsdecode(f)
        with atomic_write(path) as fp:
            _write_zip(fp, _archive_name(path), payload, storages)
    elif hasattr(f, "write"):
        _write_zip(f, "archive", payload, storages)
    else:
        raise TypeError(f"fiamma.save: f must be a path or a binary file object, got "
                        f"{type(f).__name__}")


class atomic_write:
    """Context manager giving a binary file that replaces ``path`` only once fully written and
    synced to disk; on an exception the temporary file is removed and ``path`` is untouched."""

    def __init__(self, path):
        if os.path.islink(path):
            path = os.path.realpath(path)  # write through a link, as open() would
        self.path = path
        folder, base = os.path.split(os.path.abspath(path))
        self.tmp = os.path.join(folder, f".{base}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        self.fp = None

    def __enter__(self):
        folder = os.path.dirname(self.tmp)
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"cannot write {self.path}: folder {folder} does not exist")
        fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                     0o666)
        self.fp = os.fdopen(fd, "wb")
        return self.fp

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.fp.flush()
                os.fsync(self.fp.fileno())
            self.fp.close()
            if exc_type is None:
                os.replace(self.tmp, self.path)
                _fsync_dir(os.path.dirname(os.path.abspath(self.path)))
        except BaseException:
            _unlink(self.tmp)
            raise
        if exc_type is not None:
            _unlink(self.tmp)
        return False


def _unlink(p):
    try:
        os.unlink(p)
    except OSError:
        pass


def _fsync_dir(folder):
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _archive_name(path):
    name = os.path.splitext(os.path.basename(path))[0]
    if not name or not name.isprintable() or not name.isascii():
        return "archive"
    return name


def _pickle(obj, protocol):
    from fiamma._pickler import CheckpointPickler

    storages = {}  # id(storage) -> [key, storage, dtype, tensor]

    def storage_id(t):
        st = t._storage
        entry = storages.get(id(st))
        if entry is None:
            entry = storages[id(st)] = [str(len(storages)), st, t._dtype, t]
        elif entry[2] is not t._dtype:
            raise RuntimeError(
                f"fiamma.save: two tensors view the same storage as different dtypes "
                f"({entry[2]} and {t._dtype}); PyTorch's format can't hold that: save a .clone() "
                "of one of them")
        dev = st.device
        location = "cpu" if dev.type == "cpu" else f"{dev.type}:{dev.index or 0}"
        return entry[0], location, st.nbytes // t._dtype.itemsize

    payload = CheckpointPickler(protocol, storage_id).dump(obj)
    return payload, list(storages.values())


def _storage_bytes(st, dt):
    """A buffer over the storage's bytes (a whole number of elements), on the CPU."""
    from fiamma._backend.cpu import host_buffer
    from fiamma._tensor import Tensor, _init

    numel = st.nbytes // dt.itemsize
    if st.device.type != "cpu":
        flat = object.__new__(Tensor)
        _init(flat, st, dt, (numel,), (1,), 0, True)
        st = flat.cpu()._storage
    return host_buffer(st.ptr, numel * dt.itemsize), st


def _write_zip(fp, name, payload, storages):
    import struct
    import sys
    import zipfile

    def record(zf, rname, data):
        size = memoryview(data).nbytes
        zi = zipfile.ZipInfo(f"{name}/{rname}", date_time=(1980, 1, 1, 0, 0, 0))
        zi.compress_type = zipfile.ZIP_STORED
        zi.file_size = size
        zip64 = size * 1.05 > zipfile.ZIP64_LIMIT  # zipfile's own rule for the zip64 header
        header = 30 + len(zi.filename.encode("utf-8")) + 4 + (20 if zip64 else 0)
        pad = -(zf.fp.tell() + header) % _ALIGN
        zi.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
        with zf.open(zi, "w", force_zip64=zip64) as w:
            w.write(data)

    with zipfile.ZipFile(fp, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        record(zf, "data.pkl", payload)
        record(zf, ".format_version", b"1")
        record(zf, ".storage_alignment", str(_ALIGN).encode())
        record(zf, "byteorder", sys.byteorder.encode())
        for key, st, dt, _ in storages:
            buf, _keep = _storage_bytes(st, dt)
            record(zf, f"data/{key}", buf)
        record(zf, "version", _FORMAT_VERSION)
        serial = int.from_bytes(os.urandom(17), "little") % 10**40
        record(zf, ".data/serialization_id", f"{serial:040d}".encode())


# ---- load ------------------------------------------------------------------------------------

def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=False,
         **pickle_load_args):
    """Load an object saved by ``fiamma.save`` or ``torch.save`` (zip or legacy format).

    Loading never executes code from the file: a restricted unpickler rebuilds tensors,
    storages, OrderedDict, plain containers, numbers, strings, bytes, dtypes, devices and sizes,
    and refuses any other global with ``pickle.UnpicklingError`` naming it. ``weights_only`` is
    accepted for compatibility; fiamma always loads this way (``weights_only=False`` does not
    allow more).

    map_location: None (where the file says: 'cpu'; a CUDA location needs CUDA), a device or
    string (every tensor there), a dict mapping saved locations to new ones, or a callable
    ``(storage, location) -> storage or None`` where ``storage`` is a flat 1-D CPU tensor.
    mmap: map the file (zip format, stored entries) and view its bytes without copying; the
    mapping is private, so writing to a tensor never changes the file.
    Tensors saved with requires_grad=True get it back only when fiamma-autograd is installed
    (without it they load as plain tensors).

    >>> import fiamma, io
    >>> buf = io.BytesIO()
    >>> fiamma.save([fiamma.arange(3)], buf)
    >>> _ = buf.seek(0); fiamma.load(buf, map_location="cpu")[0].tolist()
    [0, 1, 2]
    """
    if pickle_module is not None:
        raise TypeError("fiamma.load: pickle_module is not supported (fiamma always uses its "
                        "own restricted unpickler)")
    unknown = set(pickle_load_args) - {"encoding"}
    if unknown:
        raise TypeError(f"fiamma.load: unexpected keyword argument {sorted(unknown)[0]!r}")
    encoding = pickle_load_args.get("encoding", "utf-8")
    from fiamma import _checkpoint_reader as R

    placer = R.make_placer(map_location)
    if isinstance(f, (str, bytes, os.PathLike)):
        path = os.fsdecode(f)
        with open(path, "rb") as fp:
            return R.load_from(fp, path, placer, mmap, encoding)
    if not hasattr(f, "read"):
        raise TypeError(f"fiamma.load: f must be a path or a binary file object, got "
                        f"{type(f).__name__}")
    return R.load_from(f, getattr(f, "name", "<file object>"), placer, mmap, encoding)
