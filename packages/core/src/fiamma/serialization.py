"""``fiamma.save`` / ``fiamma.load``: PyTorch's checkpoint files, read and written without PyTorch.

``save`` writes PyTorch's zip format (what ``torch.save`` writes since 1.6), so ``torch.load``
(with its default ``weights_only=True``) reads the file. ``load`` reads that format and the
legacy one (``_use_new_zipfile_serialization=False``, PyTorch < 1.6) through a restricted
unpickler: only tensors, storages, OrderedDict and plain containers are rebuilt, plus instances of
the classes allowlisted with ``add_safe_globals`` / ``safe_globals`` (PyTorch 2.6's weights-only
rules); any other global in the file is refused with ``pickle.UnpicklingError`` naming it, so
loading never runs code from the file. Every size and offset the file gives is checked against
the bytes it holds before memory is touched.

Importing this module is cheap: the pickle and zip machinery is imported on the first call.
"""

import os
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Optional, Union

if TYPE_CHECKING:
    from fiamma._storage import device
    from fiamma._storage_api import UntypedStorage

__all__ = ["save", "load", "add_safe_globals", "safe_globals", "get_safe_globals",
           "clear_safe_globals", "DEFAULT_PROTOCOL"]

DEFAULT_PROTOCOL = 2    # the pickle protocol ``save`` writes with unless told (as PyTorch)

# the annotation aliases typed code imports from ``torch.serialization`` (Pyro's param store
# annotates ``load(map_location: MAP_LOCATION)``); a storage is fiamma's ``UntypedStorage``
FILE_LIKE = Union[str, os.PathLike, IO[bytes]]
MAP_LOCATION = Optional[Union[Callable[["UntypedStorage", str], "UntypedStorage"],
                              "device", str, dict]]
DEFAULT_PROTOCOL = 2

_ALIGN = 64             # data records start at a multiple of this in the file (as PyTorch)
_FORMAT_VERSION = b"3\n"


# ---- the allowlist (torch.serialization.add_safe_globals) ----------------------------------

_safe_globals = {}  # "module.qualname" -> the object (what the unpickler looks up)
_entries = {}       # "module.qualname" -> the entry as the user gave it


def _global_name(obj):
    if isinstance(obj, tuple):
        if len(obj) != 2 or not isinstance(obj[1], str):
            raise TypeError("add_safe_globals: expected an object or an (object, "
                            f"'module.name') pair, got {obj!r:.80}")
        return obj[1], obj[0]
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        raise TypeError(f"add_safe_globals: {obj!r:.80} has no module and name to be found by "
                        "in a file; pass (object, 'module.name')")
    return f"{module}.{qualname}", obj


def _named(entries):
    if not isinstance(entries, (list, tuple, set)):
        raise TypeError(f"add_safe_globals: expected a list, got {type(entries).__name__}")
    return [(_global_name(g), g) for g in entries]


def add_safe_globals(safe_globals):
    """Allow ``fiamma.load`` to rebuild these classes (and reference these functions) from a
    file, as ``torch.serialization.add_safe_globals``. An allowlisted class is created with
    ``cls.__new__(cls, *args)`` and its state set with ``__setstate__`` (or its ``__dict__``
    updated); an allowlisted callable may be called by the file with arguments from the file:
    allowlist only what you trust. Entries are objects (found in a file by their
    ``module.qualname``) or ``(object, "module.name")`` pairs (a class saved under another name).

    >>> import fiamma, collections
    >>> Point = collections.namedtuple("Point", "x y")
    >>> fiamma.serialization.add_safe_globals([(Point, "mymod.Point")])
    >>> fiamma.serialization.get_safe_globals() == [(Point, "mymod.Point")]
    True
    >>> fiamma.serialization.clear_safe_globals()
    """
    for (name, obj), entry in _named(safe_globals):
        _safe_globals[name] = obj
        _entries[name] = entry


def get_safe_globals():
    """The allowlisted globals, as they were given to :func:`add_safe_globals`."""
    return list(_entries.values())


def clear_safe_globals():
    """Forget every allowlisted global."""
    _safe_globals.clear()
    _entries.clear()


class safe_globals:
    """Context manager: ``add_safe_globals(safe_globals)`` inside the block only.

    >>> import fiamma, collections
    >>> P = collections.namedtuple("P", "x")
    >>> with fiamma.serialization.safe_globals([(P, "m.P")]):
    ...     fiamma.serialization.get_safe_globals() == [(P, "m.P")]
    True
    """

    def __init__(self, safe_globals):
        self._named = _named(safe_globals)
        self._saved = None

    def __enter__(self):
        self._saved = dict(_safe_globals), dict(_entries)
        for (name, obj), entry in self._named:
            _safe_globals[name] = obj
            _entries[name] = entry
        return self

    def __exit__(self, *exc):
        for table, saved in zip((_safe_globals, _entries), self._saved):
            table.clear()
            table.update(saved)
        return False


# ---- save ------------------------------------------------------------------------------------

def save(obj, f, pickle_module=None, pickle_protocol=DEFAULT_PROTOCOL,
         _use_new_zipfile_serialization=True, _disable_byteorder_record=False):
    """Save ``obj`` (tensors in nested dicts, lists, tuples, numbers, strings, ...) to ``f`` in
    PyTorch's zip checkpoint format.

    ``f`` is a path (the file is written under a temporary name in the same folder, flushed to
    disk and renamed over ``f``, so an interrupted save leaves any old file intact) or a binary
    file object. Tensors that share a storage (views) are saved once and share it again after
    loading. Tensors, dict, OrderedDict, list, tuple, set, numbers, None, str, bytes,
    fiamma.dtype, fiamma.device and fiamma.Size are written the way PyTorch writes them, so a
    plain ``torch.load`` reads them; any other object (a whole ``nn.Module``) is written as
    pickle writes it: its class by name and its state (``fiamma.load`` rebuilds it only when
    the class is allowlisted with ``fiamma.serialization.add_safe_globals``). ``nn.Parameter``
    is written as PyTorch writes a parameter. ``pickle_module`` may only be the standard
    ``pickle`` module (the pickle is written by fiamma); ``_disable_byteorder_record`` is
    accepted and ignored (the byte-order record is always written, as PyTorch does by default).

    >>> import fiamma, io
    >>> buf = io.BytesIO()
    >>> fiamma.save({"w": fiamma.ones(2, 3), "step": 10}, buf)
    >>> _ = buf.seek(0); fiamma.load(buf)["w"].shape
    fiamma.Size([2, 3])
    """
    if pickle_module is not None and getattr(pickle_module, "__name__", None) != "pickle":
        raise ValueError(f"fiamma.save: pickle_module must be the standard pickle module (fiamma "
                         f"writes the pickle itself), got {pickle_module!r:.80}")
    if not _use_new_zipfile_serialization:
        raise ValueError("fiamma.save: _use_new_zipfile_serialization=False (PyTorch < 1.6's "
                         "legacy format) is not written; fiamma.load reads it, fiamma.save "
                         "writes the zip format")
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
    synced to disk; on an exception the temporary file is removed and ``path`` is untouched.

    The temporary file is ``.<name>.<pid>.<8 hex digits>.tmp`` in the same folder, and its
    writer holds an exclusive ``flock`` on it while writing. A writer that was killed (SIGKILL,
    power loss) cannot remove its temporary file, so each new write to ``path`` first removes
    the temporaries of ``path`` whose process is gone: the pid in the name is not running here
    and no process holds the lock (the kernel drops a dead process's locks)."""

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
        remove_stale_temporaries(self.path)
        fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                     0o666)
        if _fcntl is not None:
            try:
                _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
            except OSError:
                pass  # a file system without locks: the pid test alone guards it
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


try:
    import fcntl as _fcntl
except ImportError:  # Windows
    _fcntl = None


def _pid_alive(pid):
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # another user's process (or no way to tell): keep its file
    return True


def remove_stale_temporaries(path):
    """Remove the temporary files that writers of ``path`` killed mid-write left behind
    (``.<name>.<pid>.<hex>.tmp`` whose process is gone and whose lock is free). Returns the
    paths removed."""
    folder, base = os.path.split(os.path.abspath(path))
    prefix = f".{base}."
    removed = []
    if os.name != "posix":  # no pid probe without side effects (os.kill(pid, 0) is Ctrl-C there)
        return removed
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(".tmp")]
    except OSError:
        return removed
    for n in names:
        parts = n[len(prefix):-len(".tmp")].split(".")
        if len(parts) != 2 or not parts[0].isdigit() or len(parts[1]) != 8 or \
                any(c not in "0123456789abcdef" for c in parts[1]):
            continue
        if _pid_alive(int(parts[0])):
            continue
        victim = os.path.join(folder, n)
        try:
            fd = os.open(victim, os.O_RDONLY)
        except OSError:
            continue
        try:
            if _fcntl is not None:
                try:
                    _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a live writer (another host, or a reused pid) holds it
                except OSError:
                    pass
            try:
                os.unlink(victim)
                removed.append(victim)
            except OSError:
                pass
        finally:
            os.close(fd)
    return removed


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
    and the classes allowlisted with :func:`add_safe_globals` / :class:`safe_globals` (an
    allowlisted class is made with ``cls.__new__`` and its ``__setstate__`` or ``__dict__``,
    as PyTorch's ``weights_only=True`` loader does), and refuses any other global with
    ``pickle.UnpicklingError`` naming it and saying how to allowlist it. ``weights_only``
    defaults to True as in PyTorch >= 2.6. ``weights_only=False`` says the file is trusted: it
    then loads as pickle (and PyTorch) would, importing any global it names (PyTorch's
    ``torch.*`` module names read as fiamma's) and running its reducers; only use it for files
    you trust.

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

    weights_only = weights_only is None or bool(weights_only)
    placer = R.make_placer(map_location)
    if isinstance(f, (str, bytes, os.PathLike)):
        path = os.fsdecode(f)
        with open(path, "rb") as fp:
            return R.load_from(fp, path, placer, mmap, encoding, weights_only)
    if not hasattr(f, "read"):
        raise TypeError(f"fiamma.load: f must be a path or a binary file object, got "
                        f"{type(f).__name__}")
    return R.load_from(f, getattr(f, "name", "<file object>"), placer, mmap, encoding,
                       weights_only)
