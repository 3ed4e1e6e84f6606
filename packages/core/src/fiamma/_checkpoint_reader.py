"""Reading PyTorch checkpoints: the zip format (PyTorch >= 1.6) and the legacy stream format,
with map_location and zero-copy memory mapping. The pickle part goes through
``_unpickler.RestrictedUnpickler``; this module supplies the storages it asks for."""

import bisect
import io
import mmap as _mmap
import struct
import sys
import zipfile
import zlib

from fiamma._autograd_api import ops
from fiamma._backend.cpu import host_buffer, pin_buffer
from fiamma._storage import BorrowedStorage, Storage, device as _device
from fiamma._tensor import Tensor, _init
from fiamma._unpickler import RestrictedUnpickler, UnpicklingError

__all__ = ["load_from", "make_placer", "flat_tensor"]

_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001
# deflate emits at most 258 bytes per 2 bits of input (1032:1); a record declaring more than
# that is refused before any memory is allocated for it
_DEFLATE_MAX_RATIO = 1032


def flat_tensor(storage, dt, numel):
    """The typed-storage view: a contiguous 1-D tensor of ``numel`` elements over ``storage``."""
    t = object.__new__(Tensor)
    _init(t, storage, dt, (numel,), (1,), 0, True)
    return t


def _readinto(fp, ptr, nbytes, what):
    """Fill ``nbytes`` at ``ptr`` from ``fp`` (no intermediate copy)."""
    if nbytes == 0:
        return
    view = memoryview(host_buffer(ptr, nbytes))
    readinto = getattr(fp, "readinto", None)
    got = 0
    while got < nbytes:
        if readinto is not None:
            n = readinto(view[got:])
        else:
            chunk = fp.read(nbytes - got)
            n = len(chunk)
            view[got:got + n] = chunk
        if not n:
            raise RuntimeError(f"fiamma.load: {what}: the file ends {nbytes - got} bytes early "
                               "(truncated file?)")
        got += n


def _byteswap(flat):
    import numpy as np

    isz = flat._dtype.itemsize
    if isz > 1 and flat._numel:
        a = np.frombuffer(host_buffer(flat._ptr, flat._numel * isz), dtype=f"u{isz}")
        a.byteswap(inplace=True)


# ---- map_location ----------------------------------------------------------------------------

def _as_device(loc, what):
    try:
        return _device(loc)
    except (TypeError, ValueError):
        raise RuntimeError(f"fiamma.load: {what} {loc!r} is not a device fiamma supports; pass "
                           "map_location='cpu' to load the tensors on the CPU") from None


def _move(flat, dev, location, hint):
    if dev.type == "cpu":
        return flat
    try:
        return flat.to(dev)
    except RuntimeError as e:
        if hint:
            raise RuntimeError(f"{e} (the checkpoint was saved on {location}; pass "
                               "map_location='cpu' to load it on the CPU)") from None
        raise


def make_placer(map_location):
    """``place(flat_cpu_tensor, location) -> flat tensor`` implementing ``map_location``."""
    if map_location is None:
        return lambda flat, loc: _move(flat, _as_device(loc, "saved location"), loc, True)
    if not isinstance(map_location, (str, _device, dict)) and \
            isinstance(getattr(map_location, "type", None), str):
        map_location = str(map_location)  # e.g. a torch.device
    if isinstance(map_location, (str, _device)):
        dev = _as_device(map_location, "map_location")
        return lambda flat, loc: _move(flat, dev, loc, False)
    if isinstance(map_location, dict):
        table = {str(k): v for k, v in map_location.items()}

        def place(flat, loc):
            target = table.get(loc, loc)
            return _move(flat, _as_device(target, "map_location"), loc, target == loc)
        return place
    if callable(map_location):
        def place(flat, loc):
            out = map_location(flat, loc)
            if out is None:
                return _move(flat, _as_device(loc, "saved location"), loc, True)
            if hasattr(out, "untyped") and isinstance(getattr(out.untyped(), "_st", None),
                                                      Storage):
                out = out.untyped()._st  # a public UntypedStorage/TypedStorage
            if isinstance(out, Storage):
                out = flat_tensor(out, flat._dtype, out.nbytes // flat._dtype.itemsize)
            if not isinstance(out, Tensor) or out._dtype is not flat._dtype or \
                    len(out._shape) != 1 or not out._contig or out._numel < flat._numel:
                raise TypeError("fiamma.load: map_location must return None, a storage or "
                                "a 1-D contiguous tensor like the one it was given, got "
                                f"{type(out).__name__}")
            return out
        return place
    raise TypeError(f"fiamma.load: map_location must be None, a string, a device, a dict or a "
                    f"callable, got {type(map_location).__name__}")


# ---- format detection --------------------------------------------------------------------------

def load_from(fp, name, place, mmap, encoding, weights_only=True):
    try:
        fp.seek(fp.tell())
        seekable = True
    except (AttributeError, OSError, io.UnsupportedOperation):
        seekable = False
    if not seekable:
        if mmap:
            raise ValueError("fiamma.load: mmap=True needs a path or a real file")
        fp = io.BytesIO(fp.read())
    start = fp.tell()
    head = fp.read(512)
    fp.seek(start)
    if not isinstance(head, (bytes, bytearray)):
        raise TypeError(f"fiamma.load: {name} must be opened in binary mode ('rb')")
    if not head:
        raise RuntimeError(f"fiamma.load: {name} is empty")
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return _ZipReader(fp, name, place, mmap, encoding, weights_only).load()
    if len(head) >= 262 and head[257:262] == b"ustar":
        raise RuntimeError(f"fiamma.load: {name} is in PyTorch's tar format (PyTorch < 0.4), "
                           "which fiamma does not read; re-save it with a newer PyTorch")
    if len(head) > 9 and head[8:9] == b"{" and not head.startswith(b"\x80"):
        raise RuntimeError(f"fiamma.load: {name} looks like a safetensors file; read it with "
                           "fiamma.safetensors.load_file")
    if mmap:
        raise RuntimeError(f"fiamma.load: mmap=True needs PyTorch's zip format; {name} is in "
                           "the legacy format (torch.save with "
                           "_use_new_zipfile_serialization=False): load it without mmap")
    return _load_legacy(fp, name, place, encoding, weights_only)


# ---- zip format --------------------------------------------------------------------------------

class _ZipReader:
    def __init__(self, fp, name, place, mmap, encoding, weights_only=True):
        self.fp, self.name, self.place, self.encoding = fp, name, place, encoding
        self.weights_only = weights_only
        try:
            self.zf = zipfile.ZipFile(fp)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as e:
            raise RuntimeError(f"fiamma.load: {name}: not a readable zip checkpoint "
                               f"(truncated or corrupt file?): {e}") from None
        self.infos = {}
        for zi in self.zf.infolist():
            if zi.filename in self.infos:
                raise RuntimeError(f"fiamma.load: {name}: record {zi.filename} appears twice "
                                   "in the zip directory (corrupt file?)")
            self.infos[zi.filename] = zi
        pkls = [n for n in self.infos if n.endswith("/data.pkl") and n.count("/") == 1]
        if not pkls:
            raise RuntimeError(f"fiamma.load: {name} is a zip file but not a PyTorch checkpoint "
                               "(no <archive>/data.pkl record)")
        self.prefix = pkls[0][:-len("data.pkl")]
        if self.prefix + "constants.pkl" in self.infos:
            raise RuntimeError(f"fiamma.load: {name} is a TorchScript archive (torch.jit.save); "
                               "only checkpoints written by torch.save can be loaded")
        fp.seek(0, 2)
        self.file_size = fp.tell()
        # where each record must end: at the next record's local header (or the central
        # directory); a record whose data runs into another's overlaps it (a zip bomb's trick)
        starts = sorted({zi.header_offset for zi in self.infos.values()})
        central = getattr(self.zf, "start_dir", self.file_size)
        self.limit = {}
        for zi in self.infos.values():
            i = bisect.bisect_right(starts, zi.header_offset)
            self.limit[zi.filename] = min(starts[i] if i < len(starts) else central, central,
                                          self.file_size)
        order = self._small("byteorder", b"little").decode("ascii", "replace")
        if order not in ("little", "big"):
            raise RuntimeError(f"fiamma.load: {name}: unknown byteorder record {order!r}")
        self.swap = order != sys.byteorder
        self.map = None
        if mmap:
            if self.swap:
                raise RuntimeError(f"fiamma.load: {name} was saved on a {order}-endian machine; "
                                   "load it without mmap (the bytes must be swapped)")
            self.map = self._map_file()
        self.storages = {}

    def _small(self, rname, default):
        zi = self.infos.get(self.prefix + rname)
        if zi is None:
            return default
        if zi.file_size > 1 << 30:
            raise RuntimeError(f"fiamma.load: {self.name}: record {rname} is implausibly large "
                               f"({zi.file_size} bytes)")
        self._check_record(zi, rname, zi.file_size)
        try:
            with self.zf.open(zi) as src:
                data = src.read(zi.file_size + 1)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, RuntimeError,
                NotImplementedError, zlib.error) as e:
            raise RuntimeError(f"fiamma.load: {self.name}: can't read record {rname} "
                               f"(truncated or corrupt file?): {e}") from None
        if len(data) != zi.file_size:
            raise RuntimeError(f"fiamma.load: {self.name}: record {rname} declares "
                               f"{zi.file_size} bytes but holds {len(data)} (truncated or "
                               "corrupt file?)")
        return data

    def _check_record(self, zi, rname, need):
        """Refuse, before any memory is set aside for it, a record that can't hold ``need``
        bytes: a compression method PyTorch never writes, a declared size beyond what deflate
        can produce from the stored bytes, data reaching past the file or into the next
        record."""
        if zi.flag_bits & 1:
            raise RuntimeError(f"fiamma.load: {self.name}: record {rname} is encrypted")
        if zi.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise RuntimeError(f"fiamma.load: {self.name}: record {rname} uses zip compression "
                               f"method {zi.compress_type}; checkpoints are stored or deflated")
        if zi.compress_type == zipfile.ZIP_DEFLATED and \
                need > zi.compress_size * _DEFLATE_MAX_RATIO + 1024:
            raise RuntimeError(
                f"fiamma.load: {self.name}: record {rname} is {zi.compress_size} compressed bytes, "
                f"which can't inflate to the {need} bytes needed (corrupt file or zip bomb?)")
        if zi.header_offset + 30 > self.limit[zi.filename] or \
                zi.header_offset + 30 + zi.compress_size > self.limit[zi.filename]:
            raise RuntimeError(
                f"fiamma.load: {self.name}: record {rname} ({zi.compress_size} bytes at offset "
                f"{zi.header_offset}) reaches past the end of the file or into the next record "
                "(truncated or corrupt file?)")

    def _map_file(self):
        try:
            fileno = self.fp.fileno()
        except (AttributeError, OSError, io.UnsupportedOperation):
            raise ValueError("fiamma.load: mmap=True needs a path or a real file, not "
                             f"{type(self.fp).__name__}") from None
        mm = _mmap.mmap(fileno, 0, access=_mmap.ACCESS_COPY)  # private: writes stay in memory
        # the keepalive holds the mapping (and keeps it un-closable) while used
        return pin_buffer(mm)

    def _data_offset(self, zi, rname):
        self.fp.seek(zi.header_offset)
        h = self.fp.read(30)
        if len(h) != 30 or h[:4] != b"PK\x03\x04":
            raise RuntimeError(f"fiamma.load: {self.name}: bad local header for record {rname} "
                               "(corrupt file?)")
        method, = struct.unpack("<H", h[8:10])
        n, e = struct.unpack("<HH", h[26:30])
        fname = self.fp.read(n)
        want = zi.orig_filename.encode("utf-8" if zi.flag_bits & 0x800 else "cp437")
        if method != zi.compress_type or fname != want:
            raise RuntimeError(f"fiamma.load: {self.name}: the local header of record {rname} "
                               "disagrees with the zip directory (name or compression method; "
                               "corrupt file?)")
        off = zi.header_offset + 30 + n + e
        if zi.compress_size != zi.file_size:  # a stored record is its own bytes
            raise RuntimeError(f"fiamma.load: {self.name}: record {rname} claims {zi.file_size} "
                               f"bytes but stores {zi.compress_size} (corrupt file?)")
        if off + zi.compress_size > self.limit[zi.filename]:
            raise RuntimeError(f"fiamma.load: {self.name}: record {rname} reaches past the end "
                               "of the file or into the next record (truncated or corrupt "
                               "file?)")
        return off

    def _inflate_into(self, zi, rname, ptr, need):
        """Decompress record ``zi`` into ``need`` bytes at ``ptr``, never writing more, then
        check that the record holds exactly its declared size (and zipfile its CRC)."""
        try:
            with self.zf.open(zi) as src:
                _readinto(src, ptr, need, f"{self.name}: record {rname} (inflated)")
                extra = need
                while True:
                    chunk = src.read(1 << 20)
                    if not chunk:
                        break
                    extra += len(chunk)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError,
                zlib.error) as e:
            raise RuntimeError(f"fiamma.load: {self.name}: can't read record {rname}: "
                               f"{e}") from None
        if extra != zi.file_size:
            raise RuntimeError(f"fiamma.load: {self.name}: record {rname} declares "
                               f"{zi.file_size} bytes but inflates to {extra} (corrupt file?)")

    def load_storage(self, stype, key, location, numel, view):
        if view is not None:
            raise UnpicklingError("fiamma.load: storage views are only valid in the legacy "
                                  "format")
        dt = stype.dtype
        hit = self.storages.get(key)
        if hit is not None:
            if hit._dtype is not dt:
                raise UnpicklingError(f"fiamma.load: storage {key!r} is used as {hit._dtype} "
                                      f"and as {dt}")
            return hit
        rname = "data/" + key
        zi = self.infos.get(self.prefix + rname)
        if zi is None:
            raise RuntimeError(f"fiamma.load: {self.name} has no record {rname} for a storage "
                               "(truncated or corrupt file?)")
        need = numel * dt.itemsize
        if zi.file_size < need:
            raise RuntimeError(f"fiamma.load: {self.name}: record {rname} holds {zi.file_size} "
                               f"bytes, but its storage of {numel} {dt} elements needs {need}")
        self._check_record(zi, rname, need)
        stored = zi.compress_type == zipfile.ZIP_STORED
        if stored:
            off = self._data_offset(zi, rname)
        if self.map is not None and stored and (self.map[1] + off) % dt.itemsize == 0:
            st = BorrowedStorage(self.map[1] + off, need, self.map[0])
        else:
            st = Storage(need)
            if stored:
                self.fp.seek(off)
                _readinto(self.fp, st.ptr, need, f"{self.name}: record {rname}")
            else:  # a re-zipped (deflated) checkpoint
                self._inflate_into(zi, rname, st.ptr, need)
        flat = flat_tensor(st, dt, numel)
        if self.swap:
            _byteswap(flat)
        flat = self.place(flat, location)
        self.storages[key] = flat
        return flat

    def load(self):
        data = self._small("data.pkl", b"")
        up = RestrictedUnpickler(io.BytesIO(data), self.load_storage,
                                 weights_only=self.weights_only)
        up.encoding = self.encoding
        try:
            return up.load()
        except UnpicklingError as e:
            raise UnpicklingError(f"{e} [in {self.name}, record data.pkl]") from None


# ---- legacy format -----------------------------------------------------------------------------

def _no_storage(*args):
    raise UnpicklingError("fiamma.load: unexpected storage in the legacy header")


def _load_legacy(fp, name, place, encoding, weights_only=True):
    def small():
        up = RestrictedUnpickler(fp, _no_storage)
        up.encoding = encoding
        return up.load()

    try:
        magic = small()
    except UnpicklingError:
        magic = None
    if magic != _LEGACY_MAGIC:
        raise RuntimeError(f"fiamma.load: {name} is not a PyTorch checkpoint (neither the zip "
                           "format nor the legacy format's magic number)")
    proto = small()
    if proto != _LEGACY_PROTOCOL:
        raise RuntimeError(f"fiamma.load: {name}: unsupported legacy protocol version {proto!r}")
    info = small()
    if type(info) is not dict:
        raise RuntimeError(f"fiamma.load: {name}: malformed legacy header")
    little = info.get("little_endian", True)
    swap = bool(little) != (sys.byteorder == "little")

    roots = {}   # key -> the cpu flat tensor the storage's data is read into
    views = {}
    pos = fp.tell()
    fp.seek(0, 2)
    file_size = fp.tell()
    fp.seek(pos)

    def load_storage(stype, key, location, numel, view):
        dt = stype.dtype
        hit = roots.get(key)
        if hit is None:
            if numel * dt.itemsize > file_size:
                raise RuntimeError(f"fiamma.load: {name}: storage {key!r} of {numel} elements "
                                   f"is larger than the file ({file_size} bytes; corrupt file?)")
            flat = flat_tensor(Storage(numel * dt.itemsize), dt, numel)
            target = place(flat, location)
            if target._storage.device.type != "cpu" or target._dtype is not dt:
                raise RuntimeError("fiamma.load: legacy checkpoints load on the CPU only; load "
                                   "with map_location='cpu' and move the tensors afterwards")
            hit = roots[key] = target
        elif hit._dtype is not dt:
            raise UnpicklingError(f"fiamma.load: storage {key!r} is used as {hit._dtype} and "
                                  f"as {dt}")
        if view is None:
            return hit
        if type(view) is not tuple or len(view) != 3 or type(view[0]) is not str or \
                any(type(v) is not int or v < 0 for v in view[1:]):
            raise UnpicklingError(f"fiamma.load: malformed storage view {view!r:.100}")
        vkey, offset, size = view
        v = views.get(vkey)
        if v is None:
            if offset + size > hit._numel:
                raise UnpicklingError(f"fiamma.load: storage view {vkey!r} reaches past its "
                                      "storage")
            v = views[vkey] = hit._view((size,), (1,), hit._offset + offset, ops.load)
        return v

    up = RestrictedUnpickler(fp, load_storage, weights_only=weights_only)
    up.encoding = encoding
    up.data_later = True  # the storages' bytes follow the pickle
    try:
        obj = up.load()
    except UnpicklingError as e:
        raise UnpicklingError(f"{e} [in {name}, legacy format]") from None
    keys = small()
    if type(keys) is not list or any(type(k) is not str for k in keys):
        raise RuntimeError(f"fiamma.load: {name}: malformed storage key list")
    for key in keys:
        flat = roots.get(key)
        if flat is None:
            raise RuntimeError(f"fiamma.load: {name}: storage {key!r} is listed but never used")
        raw = fp.read(8)
        if len(raw) != 8:
            raise RuntimeError(f"fiamma.load: {name}: the file ends before storage {key!r} "
                               "(truncated file?)")
        count = struct.unpack("<q" if little else ">q", raw)[0]
        if count != flat._numel:
            raise RuntimeError(f"fiamma.load: {name}: storage {key!r} has {count} elements in "
                               f"the file, but the pickle says {flat._numel}")
        _readinto(fp, flat._ptr, count * flat._dtype.itemsize, f"storage {key!r}")
        if swap:
            _byteswap(flat)
    if len(keys) != len(roots):
        raise RuntimeError(f"fiamma.load: {name}: some storages have no data in the file")
    up.run_after_data()  # quantized tensors copy their integers now
    return obj

