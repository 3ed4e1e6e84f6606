"""``fiamma.PyTorchFileReader``: PyTorch's reader of the records of a ``torch.save`` zip
archive (``data.pkl``, ``data/0``, ``byteorder``, ...), by record name without the archive's
top folder.

>>> import io, fiamma
>>> buf = io.BytesIO(); fiamma.save({"w": fiamma.arange(3.0)}, buf)
>>> r = fiamma.PyTorchFileReader(buf)
>>> r.has_record("data.pkl"), r.get_storage_from_record("data/0", 3, fiamma.float32).tolist()
(True, [0.0, 1.0, 2.0])
"""

import os
import zipfile

__all__ = ["PyTorchFileReader"]


class PyTorchFileReader:
    """The records of a PyTorch zip checkpoint: a path or a binary file object."""

    def __init__(self, file):
        what = os.fspath(file) if isinstance(file, (str, os.PathLike)) else "file object"
        try:
            self._zip = zipfile.ZipFile(file)
        except (zipfile.BadZipFile, OSError) as e:
            raise RuntimeError(f"PyTorchFileReader: {what} is not a readable zip archive "
                               f"(a torch.save file of PyTorch >= 1.6): {e}") from None
        names = self._zip.namelist()
        pkls = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
        if not pkls:
            raise RuntimeError(f"PyTorchFileReader: {what} has no <archive>/data.pkl record "
                               "(not a torch.save archive)")
        self._prefix = pkls[0][: -len("data.pkl")]
        self._names = {n[len(self._prefix):] for n in names if n.startswith(self._prefix)}

    def get_all_records(self):
        return sorted(self._names)

    def has_record(self, name):
        return name in self._names

    def get_record(self, name):
        """The bytes of record ``name``."""
        if name not in self._names:
            raise RuntimeError(f"PyTorchFileReader.get_record: no record {name!r} in the "
                               f"archive (records: {self.get_all_records()})")
        return self._zip.read(self._prefix + name)

    def get_storage_from_record(self, name, numel, dtype):
        """Record ``name`` as a 1-D tensor of ``numel`` elements of ``dtype``."""
        import fiamma

        data = bytearray(self.get_record(name))
        need = numel * dtype.itemsize
        if len(data) < need:
            raise RuntimeError(f"PyTorchFileReader.get_storage_from_record: record {name!r} "
                               f"holds {len(data)} bytes, {numel} elements of {dtype} need "
                               f"{need}")
        return fiamma.frombuffer(data, dtype=dtype, count=numel).clone()

    def get_record_offset(self, name):
        """Where record ``name``'s bytes start in the archive file."""
        info = self._zip.getinfo(self._prefix + name)
        # the local header: 30 bytes, then the file name and the extra field
        self._zip.fp.seek(info.header_offset + 26)
        head = self._zip.fp.read(4)
        return info.header_offset + 30 + int.from_bytes(head[:2], "little") + int.from_bytes(
            head[2:], "little")
