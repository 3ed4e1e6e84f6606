"""Crafted checkpoint files for the reader fuzz suite: zip records with lying headers, pickles
written opcode by opcode, the legacy and tar formats, safetensors headers, and a child-process
runner that loads many files and reports each result (a crash loses one case, not the run).

    from checkpoint_craft import run_in_child, zip_bytes, patch_zip, tensor_pickle, ...
"""

import io
import json
import os
import pickle
import struct
import subprocess
import sys
import tarfile
import zipfile

# ---- pickles -----------------------------------------------------------------------------------


def p_str(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def p_global(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def p_int(v):
    """Any Python int as LONG1 (so that lying sizes beyond int64 can be written)."""
    n = (v.bit_length() + 8) // 8
    return b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)


def p_tuple(items):
    return b"(" + b"".join(items) + b"t"


def storage_pid(key, numel, stype="FloatStorage"):
    return (b"(" + p_str("storage") + p_global("torch", stype) + p_str(key) + p_str("cpu")
            + p_int(numel) + b"tQ")


def tensor_pickle(tensors, stype="FloatStorage"):
    """A data.pkl holding ``{name: tensor}`` where each tensor is ``(key, numel, offset, size,
    stride)``: whatever numbers the caller gives, true or not."""
    out = b"\x80\x02}("
    for name, (key, numel, offset, size, stride) in tensors.items():
        out += (p_str(name) + p_global("torch._utils", "_rebuild_tensor_v2") + b"("
                + storage_pid(key, numel, stype) + p_int(offset)
                + p_tuple(p_int(s) for s in size) + p_tuple(p_int(s) for s in stride)
                + b"\x89" + p_global("collections", "OrderedDict") + b")RtR")
    return out + b"u."


# ---- zip ---------------------------------------------------------------------------------------


def zip_bytes(records, method=zipfile.ZIP_STORED, prefix="archive/"):
    """A zip of ``[(name, data)]`` (names under ``prefix``), each record stored or deflated."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in records:
            z.writestr(zipfile.ZipInfo(prefix + name, (1980, 1, 1, 0, 0, 0)), data,
                       compress_type=method)
    return buf.getvalue()


def checkpoint_zip(payload, data, method=zipfile.ZIP_STORED):
    """A zip checkpoint: ``payload`` as data.pkl and ``data`` ({key: bytes}) as data/<key>."""
    recs = [("data.pkl", payload), ("byteorder", b"little")]
    recs += [(f"data/{k}", v) for k, v in data.items()]
    return zip_bytes(recs + [("version", b"3\n")], method)


def _headers(raw, name):
    """(local header offset, central header offset) of record ``name`` in zip bytes."""
    n = name.encode()
    loc = -1
    i = 0
    while True:
        i = raw.find(b"PK\x03\x04", i)
        if i < 0:
            break
        ln = struct.unpack_from("<H", raw, i + 26)[0]
        if raw[i + 30:i + 30 + ln] == n:
            loc = i
            break
        i += 4
    cen = -1
    i = 0
    while True:
        i = raw.find(b"PK\x01\x02", i)
        if i < 0:
            break
        ln = struct.unpack_from("<H", raw, i + 28)[0]
        if raw[i + 46:i + 46 + ln] == n:
            cen = i
            break
        i += 4
    assert loc >= 0 and cen >= 0, name
    return loc, cen


def patch_zip(raw, name, *, file_size=None, compress_size=None, header_offset=None,
              method=None, flags=None, local=True, central=True):
    """Rewrite fields of record ``name`` in its local and/or central header."""
    raw = bytearray(raw)
    loc, cen = _headers(bytes(raw), name)
    if local:
        for off, v, fmt in ((18, compress_size, "<I"), (22, file_size, "<I"),
                            (8, method, "<H"), (6, flags, "<H")):
            if v is not None:
                struct.pack_into(fmt, raw, loc + off, v)
    if central:
        for off, v, fmt in ((20, compress_size, "<I"), (24, file_size, "<I"),
                            (42, header_offset, "<I"), (10, method, "<H"), (8, flags, "<H")):
            if v is not None:
                struct.pack_into(fmt, raw, cen + off, v)
    return bytes(raw)


# ---- legacy, tar -------------------------------------------------------------------------------

LEGACY_HEAD = b"".join(pickle.dumps(h, protocol=2) for h in (
    0x1950A86A20F9469CFC6C, 1001, {"protocol_version": 1001, "little_endian": True,
                                   "type_sizes": {"short": 2, "int": 4, "long": 4}}))


def legacy_file(payload, storages):
    """The legacy format: header pickles, ``payload``, the key list, then each storage as a
    count and its bytes (``storages``: [(key, count, bytes)], counts as the caller says)."""
    out = LEGACY_HEAD + payload + pickle.dumps([k for k, _, _ in storages], protocol=2)
    for _, count, data in storages:
        out += struct.pack("<q", count) + data
    return out


def tar_file():
    """PyTorch's pre-0.4 tar format (fiamma refuses it by name)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in (("sys_info", b"x"), ("pickle", b"y"), ("tensors", b"z"),
                           ("storages", b"w")):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


# ---- safetensors -------------------------------------------------------------------------------


def safetensors_file(header, data, pad=True):
    raw = json.dumps(header).encode()
    if pad:
        raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + data


# ---- the child ---------------------------------------------------------------------------------

_CHILD = r"""
import json, pickle, resource, sys
import fiamma, fiamma.safetensors as st
from fiamma import Tensor

def inside(t):
    # the bytes the tensor can reach lie inside its storage (an over-read need not crash)
    if not t._numel:
        return
    last = t._offset + sum((n - 1) * s for n, s in zip(t._shape, t._stride))
    assert t._offset >= 0 and (last + 1) * t._dtype.itemsize <= t._storage.nbytes, (
        t._shape, t._stride, t._offset, t._storage.nbytes)
    t.contiguous().sum()  # touch every element

def walk(o, depth=0):
    if isinstance(o, Tensor):
        inside(o)
    elif isinstance(o, dict):
        for v in o.values():
            walk(v, depth + 1)
    elif isinstance(o, (list, tuple, set)):
        for v in o:
            walk(v, depth + 1)

def run(c):
    r = c["reader"]
    if r == "load":
        return fiamma.load(c["path"], mmap=c.get("mmap", False))
    if r == "load_stream":
        with open(c["path"], "rb") as f:
            return fiamma.load(f)
    if r == "safetensors":
        return st.load_file(c["path"])
    if r == "safetensors_bytes":
        with open(c["path"], "rb") as f:
            return st.load(f.read())
    raise ValueError(r)

cases = json.load(open(sys.argv[1]))
with open(sys.argv[2], "w") as out:
    for c in cases:
        out.write(json.dumps({"start": c["id"]}) + "\n")
        out.flush()
        try:
            walk(run(c))
            res = {"ok": True}
        except AssertionError as e:
            res = {"ok": False, "type": "ESCAPE", "msg": f"a tensor reaches outside its "
                   f"storage: {e}"}
        except Exception as e:
            res = {"ok": False, "type": type(e).__name__, "msg": str(e)[:1000]}
        res["id"] = c["id"]
        res["maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out.write(json.dumps(res) + "\n")
        out.flush()
"""


def run_in_child(cases, folder, timeout=120):
    """Load every case (dicts with id, reader, path, ...) in one child process; return {id:
    result}. A crash or a hang of the child fails naming the case it was on."""
    spec = os.path.join(folder, "cases.json")
    report = os.path.join(folder, "report.jsonl")
    with open(spec, "w") as f:
        json.dump(cases, f)
    proc = subprocess.run([sys.executable, "-c", _CHILD, spec, report], capture_output=True,
                          text=True, timeout=timeout, cwd=folder)
    results, current = {}, None
    with open(report) as f:
        for line in f:
            d = json.loads(line)
            if "start" in d:
                current = d["start"]
            else:
                results[d["id"]] = d
                current = None
    if proc.returncode != 0 or current is not None:
        raise AssertionError(f"the loading child died (rc {proc.returncode}) on case "
                             f"{current!r}:\n{proc.stderr[-3000:]}")
    return results
