"""The checkpoint-reader fuzz suite: crafted and randomly mutated files in every format fiamma
reads (zip stored and deflated, legacy, tar, safetensors), each loaded in a child process so
that a crash is a failed test. Every file is either loaded with every tensor inside its memory
or refused with a Python exception that names the record or tensor and what is wrong.

Deterministic: the random cases come from fixed seeds.
"""

import io
import os
import random
import struct
import warnings
import zipfile
import zlib

import numpy as np
import pytest
from checkpoint_craft import (
    LEGACY_HEAD,
    checkpoint_zip,
    legacy_file,
    p_global,
    p_int,
    p_str,
    p_tuple,
    patch_zip,
    run_in_child,
    safetensors_file,
    storage_pid,
    tar_file,
    tensor_pickle,
    zip_bytes,
)

import fiamma
import fiamma.safetensors as st
from fiamma._pickler import CheckpointPickler

F32 = np.arange(1024, dtype=np.float32).tobytes()  # 4096 bytes


def one_tensor(numel=1024, offset=0, size=(1024,), stride=(1,), key="0"):
    return tensor_pickle({"x": (key, numel, offset, size, stride)})


def _deflated_short(declared):
    """Defect 1: data/0 is 16 bytes deflated, but both headers declare ``declared`` bytes."""
    raw = checkpoint_zip(one_tensor(numel=declared // 4, size=(declared // 4,)),
                         {"0": b"\x01" * 16}, zipfile.ZIP_DEFLATED)
    return patch_zip(raw, "archive/data/0", file_size=declared)


def _unseekable_zip():
    """A valid checkpoint whose records carry data descriptors (written to a pipe)."""
    class Pipe:
        def __init__(self):
            self.parts = []

        def write(self, b):
            self.parts.append(bytes(b))
            return len(b)

        def flush(self):
            pass

    p = Pipe()
    with zipfile.ZipFile(p, "w") as z:
        for name, data in (("data.pkl", one_tensor()), ("byteorder", b"little"),
                           ("data/0", F32)):
            with z.open("archive/" + name, "w") as w:
                w.write(data)
    return b"".join(p.parts)


def _local_name_mismatch():
    raw = bytearray(checkpoint_zip(one_tensor(), {"0": F32}))
    i = raw.index(b"archive/data/0")  # the first occurrence: the local header
    raw[i + len("archive/data/") ] = ord("9")
    return bytes(raw)


def _overlapping():
    raw = checkpoint_zip(tensor_pickle({"a": ("0", 16, 0, (16,), (1,)),
                                        "b": ("1", 16, 0, (16,), (1,))}),
                         {"0": F32[:64], "1": F32[:64]})
    return patch_zip(raw, "archive/data/0", file_size=4096, compress_size=4096)


def _duplicate():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name it writes
        return zip_bytes([("data.pkl", one_tensor()), ("data/0", F32), ("data/0", F32)])


def _legacy(payload, storages):
    return legacy_file(payload, storages)


def _legacy_view(offset, size):
    pid = (b"(" + p_str("storage") + p_global("torch", "FloatStorage") + p_str("0")
           + p_str("cpu") + p_int(16) + p_tuple([p_str("v"), p_int(offset), p_int(size)])
           + b"tQ")
    payload = (b"\x80\x02" + p_global("torch._utils", "_rebuild_tensor_v2") + b"(" + pid
               + p_int(0) + p_tuple([p_int(size)]) + p_tuple([p_int(1)]) + b"\x89"
               + p_global("collections", "OrderedDict") + b")RtR.")
    return _legacy(payload, [("0", 16, F32[:64])])


def _gadget(body):
    return checkpoint_zip(b"\x80\x02" + body + b".", {"0": F32})


def _st(header, data=b""):
    return safetensors_file(header, data)


BIG = 2**62
# id -> (file bytes, reader, kwargs, what the error must say (a regex), or None: loads)
TARGETED = {
    # defect 1: a deflated record shorter than declared (both load paths)
    "inflate short 4096": (_deflated_short(4096), "load", {}, r"record data/0.*early"),
    "inflate short 4096 mmap": (_deflated_short(4096), "load", {"mmap": True},
                                r"record data/0.*early"),
    "inflate short 200MiB": (_deflated_short(200 << 20), "load", {},
                             r"record data/0 is \d+ compressed bytes.*can't inflate"),
    "inflate short stream": (_deflated_short(4096), "load_stream", {}, r"record data/0"),
    # defect 2 and its relatives: layouts beyond int64 / negative / past the storage
    "size (0, 2**62, 2**62)": (checkpoint_zip(one_tensor(size=(0, BIG, BIG), stride=(1, 1, 1)),
                                              {"0": F32}), "load", {},
                               r"storage '0'.*\(0, 4611686018427387904, 4611686018427387904\)"
                               r".*int64"),
    "size (2**32, 2**32)": (checkpoint_zip(one_tensor(size=(2**32, 2**32), stride=(1, 1)),
                                           {"0": F32}), "load", {}, r"storage '0'.*int64"),
    "size 2**64": (checkpoint_zip(one_tensor(size=(0, 2**64), stride=(1, 1)), {"0": F32}),
                   "load", {}, r"storage '0'.*18446744073709551616.*2\*\*63-1"),
    "negative size": (checkpoint_zip(one_tensor(size=(-1,)), {"0": F32}), "load", {},
                      r"storage '0'.*size must hold non-negative"),
    "negative stride": (checkpoint_zip(one_tensor(size=(4,), stride=(-1,)), {"0": F32}),
                        "load", {}, r"storage '0'.*stride must hold non-negative"),
    "negative offset": (checkpoint_zip(one_tensor(offset=-1), {"0": F32}), "load", {},
                        r"storage '0'.*invalid storage offset -1"),
    "offset 2**63": (checkpoint_zip(one_tensor(offset=2**63, size=(0,)), {"0": F32}), "load",
                     {}, r"storage '0'.*offset 9223372036854775808"),
    "stride past storage": (checkpoint_zip(one_tensor(size=(2,), stride=(BIG,)), {"0": F32}),
                            "load", {}, r"storage '0'.*reaches past its storage of 1024"),
    "view past storage": (checkpoint_zip(one_tensor(offset=1000, size=(25,)), {"0": F32}),
                          "load", {}, r"reaches past its storage"),
    "numel 2**64": (checkpoint_zip(one_tensor(numel=2**64, size=(1,)), {"0": F32}), "load", {},
                    r"record data/0 holds 4096 bytes.*needs"),
    "record shorter than storage": (checkpoint_zip(one_tensor(), {"0": F32[:16]}), "load", {},
                                    r"record data/0 holds 16 bytes"),
    # zip structure
    "stored record past the end": (patch_zip(checkpoint_zip(one_tensor(numel=4, size=(4,)),
                                                            {"0": F32[:16]}),
                                             "archive/data/0", file_size=1 << 20,
                                             compress_size=1 << 20),
                                   "load", {}, r"record data/0.*past the end"),
    "overlapping records": (_overlapping(), "load", {}, r"record data/0.*next record"),
    "overlapping records mmap": (_overlapping(), "load", {"mmap": True},
                                 r"record data/0.*next record"),
    "header offset past the end": (patch_zip(checkpoint_zip(one_tensor(), {"0": F32}),
                                             "archive/data/0", header_offset=2**32 - 1,
                                             local=False),
                                   "load", {}, r"record data/0.*past the end"),
    "local name differs": (_local_name_mismatch(), "load", {},
                           r"local header of record data/0 disagrees"),
    "local method differs": (patch_zip(checkpoint_zip(one_tensor(), {"0": F32}),
                                       "archive/data/0", method=8, central=False),
                             "load", {}, r"record data/0 disagrees"),
    "encrypted": (patch_zip(checkpoint_zip(one_tensor(), {"0": F32}), "archive/data/0",
                            flags=1), "load", {}, r"record data/0 is encrypted"),
    "bzip2": (patch_zip(checkpoint_zip(one_tensor(), {"0": F32}), "archive/data/0", method=12),
              "load", {}, r"record data/0 uses zip compression method 12"),
    "duplicate record": (_duplicate(), "load", {}, r"archive/data/0 appears twice"),
    "data descriptors": (_unseekable_zip(), "load", {}, None),
    "data descriptors mmap": (_unseekable_zip(), "load", {"mmap": True}, None),
    "data.pkl bomb": (patch_zip(zip_bytes([("data.pkl", b"\x00" * 64)], zipfile.ZIP_DEFLATED),
                                "archive/data.pkl", file_size=1 << 30),
                      "load", {}, r"record data.pkl.*can't inflate"),
    "pickle asks 2**40 bytes": (checkpoint_zip(b"\x80\x04\x8e" + struct.pack("<Q", 2**40),
                                               {}), "load", {},
                                r"pickle data ends early.*record data.pkl"),
    # legacy
    "legacy truncated data": (_legacy(one_tensor(numel=16, size=(16,)), [("0", 16, F32[:20])]),
                              "load", {}, r"storage '0'.*ends 44 bytes early"),
    "legacy count lies": (_legacy(one_tensor(numel=16, size=(16,)), [("0", 99, F32[:64])]),
                          "load", {}, r"storage '0' has 99 elements in the file, but the pickle "
                          "says 16"),
    "legacy numel huge": (_legacy(one_tensor(numel=2**62, size=(1,)), [("0", 1, F32[:4])]),
                          "load", {}, r"storage '0' of 4611686018427387904 elements is larger "
                          "than the file"),
    "legacy view past storage": (_legacy_view(10, 7), "load", {},
                                 r"storage view 'v' reaches past its storage"),
    "legacy size overflow": (_legacy(one_tensor(numel=16, size=(0, BIG, BIG), stride=(1, 1, 1)),
                                     [("0", 16, F32[:64])]), "load", {},
                             r"storage '0'.*int64"),
    "legacy pickle asks 2**40": (LEGACY_HEAD + b"\x80\x04\x8e" + struct.pack("<Q", 2**40),
                                 "load", {}, r"asks for 1099511627776 bytes"),
    "tar format": (tar_file(), "load", {}, r"tar format"),
    # safetensors
    "st [0, 2**70]": (_st({"x": {"dtype": "F32", "shape": [0, 2**70], "data_offsets": [0, 0]}}),
                      "safetensors", {}, r"tensor 'x': shape \[0, 1180591620717411303424\].*"
                      "int64"),
    "st [0, 2**70] bytes": (_st({"x": {"dtype": "F32", "shape": [0, 2**70],
                                       "data_offsets": [0, 0]}}),
                            "safetensors_bytes", {}, r"tensor 'x': shape"),
    "st [2**32, 2**32]": (_st({"x": {"dtype": "U8", "shape": [2**32, 2**32],
                                     "data_offsets": [0, 2**64]}}),
                          "safetensors", {}, r"tensor 'x'.*int64"),
    "st negative dim": (_st({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}},
                            b"\x00" * 4), "safetensors", {}, r"tensor 'x': shape must be"),
    "st header past end": (struct.pack("<Q", 4096) + b"{}", "safetensors", {},
                           r"header of 4096 bytes runs past the end"),
    "st header 2**64-1": (struct.pack("<Q", 2**64 - 1) + b"{}", "safetensors", {},
                          r"exceeds the limit"),
    "st offsets out of range": (_st({"x": {"dtype": "F32", "shape": [4],
                                           "data_offsets": [0, 2**40]}}, b"\x00" * 16),
                                "safetensors", {}, r"tensor 'x'.*outside the 16 data bytes"),
    "st offsets overlap": (_st({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                "y": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}},
                               b"\x00" * 16), "safetensors", {}, r"tensor 'y' overlaps"),
    "st size mismatch": (_st({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}},
                             b"\x00" * 8), "safetensors", {}, r"tensor 'x'.*needs 12 bytes"),
    "st unknown dtype": (_st({"x": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 1]}},
                             b"\x00"), "safetensors", {}, r"tensor 'x': unknown dtype 'Q9'"),
    # pickle gadgets: refused by name
    "os.system": (_gadget(p_global("os", "system") + p_str("touch pwned") + b"\x85R"),
                  "load", {}, r"global os.system.*add_safe_globals"),
    "posix.system": (_gadget(p_global("posix", "system") + p_str("touch pwned") + b"\x85R"),
                     "load", {}, r"global posix.system"),
    "INST os.system": (_gadget(b"(" + p_str("touch pwned") + b"ios\nsystem\n"), "load", {},
                       r"INST of os.system"),
    "STACK_GLOBAL eval": (_gadget(b"\x8c\x08builtins\x8c\x04eval\x93" + p_str("1") + b"\x85R"),
                          "load", {}, r"global builtins.eval"),
    "subprocess.Popen": (_gadget(p_global("subprocess", "Popen") + b"]" + p_str("true")
                                 + b"a\x85R"), "load", {}, r"global subprocess.Popen"),
    "getattr": (_gadget(p_global("builtins", "getattr") + p_global("collections", "OrderedDict")
                        + p_str("fromkeys") + b"\x86R"), "load", {}, r"global builtins.getattr"),
    "object via NEWOBJ": (_gadget(p_global("builtins", "object") + b")\x81"), "load", {},
                          r"global builtins.object"),
    "copyreg._reconstructor": (_gadget(p_global("copyreg", "_reconstructor")), "load", {},
                               r"global copyreg._reconstructor"),
    "fiamma.load itself": (_gadget(p_global("fiamma.serialization", "load")), "load", {},
                           r"global fiamma.serialization.load"),
    "torch whole module": (_gadget(p_global("torch.nn.modules.linear", "Linear") + b")\x81"),
                           "load", {}, r"global torch.nn.modules.linear.Linear.*state_dict"),
    "fiamma module not allowlisted": (_gadget(p_global("fiamma.nn.modules.linear", "Linear")),
                                      "load", {}, r"fiamma.nn.modules.linear.Linear.*"
                                      r"add_safe_globals\(\[Linear\]\)"),
    "OBJ on OrderedDict": (_gadget(b"(" + p_global("collections", "OrderedDict") + b"o"),
                           "load", {}, r"OBJ on <class 'collections.OrderedDict'>"),
    "BUILD a tensor": (_gadget(p_global("torch._utils", "_rebuild_tensor_v2") + b"("
                               + storage_pid("0", 1024) + p_int(0) + p_tuple([p_int(4)])
                               + p_tuple([p_int(1)]) + b"\x89" + p_global("collections",
                                                                          "OrderedDict")
                               + b")RtR" + b"N}" + p_str("_ptr") + p_int(0) + b"s\x86b"),
                       "load", {}, r"refusing to set the state of a Tensor"),
    "BUILD slot state on OrderedDict": (_gadget(p_global("collections", "OrderedDict") + b")R"
                                                + b"N}" + p_str("__class__") + p_int(1)
                                                + b"s\x86b"),
                                        "load", {}, r"refusing to set the state of a "
                                        "OrderedDict"),
    "REDUCE a storage type": (_gadget(p_global("torch", "FloatStorage") + b")R"), "load", {},
                              r"refusing to call torch.FloatStorage"),
    "persistent id with a global": (_gadget(b"(" + p_str("storage") + p_global("os", "system")
                                            + p_str("0") + p_str("cpu") + p_int(1) + b"tQ"),
                                    "load", {}, r"global os.system"),
}


def _write(folder, cases):
    out = []
    for i, (cid, (data, reader, kw, _)) in enumerate(cases.items()):
        path = os.path.join(folder, f"case{i}.bin")
        with open(path, "wb") as f:
            f.write(data)
        out.append({"id": cid, "reader": reader, "path": path, **kw})
    return out


def test_crafted_files_are_refused_by_name(tmp_path):
    results = run_in_child(_write(str(tmp_path), TARGETED), str(tmp_path))
    bad = []
    for cid, (_, _, _, expect) in TARGETED.items():
        r = results[cid]
        if expect is None:
            if not r["ok"]:
                bad.append(f"{cid}: should load, got {r['type']}: {r['msg']}")
        elif r["ok"]:
            bad.append(f"{cid}: loaded, should be refused ({expect})")
        elif r["type"] not in ("RuntimeError", "UnpicklingError", "SafetensorError") or \
                not __import__("re").search(expect, r["msg"]):
            bad.append(f"{cid}: {r['type']}: {r['msg']}\n    expected {expect}")
    assert not bad, "\n".join(bad)
    assert not (tmp_path / "pwned").exists()


# ---- random mutations --------------------------------------------------------------------------

INTERESTING = [0, 1, 2, 3, 4, 7, 8, 15, 16, 255, 256, 1023, 1024, 4095, 4096, 2**31 - 1, 2**31,
               2**32 - 1, 2**32, 2**62, 2**63 - 1, 2**63, 2**64, 2**70, -1, -(2**63)]


def _fixed_serialization_id(raw):
    """The same bytes on every run (save writes a random serialization id), for determinism."""
    raw = bytearray(raw)
    name = b"archive/.data/serialization_id"
    loc, cen = raw.index(name) - 30, raw.rindex(name) - 46
    n, e = struct.unpack_from("<HH", raw, loc + 26)
    start = loc + 30 + n + e
    raw[start:start + 40] = b"0" * 40
    struct.pack_into("<I", raw, loc + 14, zlib.crc32(b"0" * 40))
    struct.pack_into("<I", raw, cen + 16, zlib.crc32(b"0" * 40))
    return bytes(raw)


def _base_files():
    a = fiamma.arange(24, dtype=fiamma.float32).reshape(2, 3, 4)
    obj = {"a": a, "b": a[:, 1], "c": a.transpose(0, 2), "i": fiamma.arange(5),
           "h": fiamma.ones(3, dtype=fiamma.bfloat16), "e": fiamma.zeros(0, 3),
           "s": fiamma.tensor(2.5), "meta": [1, "x", 2.5, (3, None)]}
    buf = io.BytesIO()
    fiamma.save(obj, buf)
    stored = _fixed_serialization_id(buf.getvalue())
    deflated = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(stored)) as zin, \
            zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as zout:
        for zi in zin.infolist():
            zout.writestr(zi.filename, zin.read(zi))
    storages = {}

    def sid(t):
        e = storages.setdefault(id(t._storage), (str(len(storages)), t))
        return e[0], "cpu", t._storage.nbytes // t._dtype.itemsize

    payload = CheckpointPickler(2, sid).dump(obj)
    legacy = legacy_file(payload, [(k, t._storage.nbytes // t._dtype.itemsize,
                                    bytes(t.contiguous().numpy().tobytes()) if
                                    t._dtype is not fiamma.bfloat16 else
                                    bytes(t.view(fiamma.int16).numpy().tobytes()))
                                   for k, t in storages.values()])
    safet = st.save({"a": a, "i": fiamma.arange(5), "h": fiamma.ones(3, dtype=fiamma.bfloat16),
                     "e": fiamma.zeros(0, 3)}, metadata={"k": "v"})
    return {"zip": stored, "zip deflated": deflated.getvalue(), "legacy": legacy,
            "safetensors": safet}


def _mutate(rng, raw):
    raw = bytearray(raw)
    kind = rng.randrange(4)
    if kind == 0:
        return bytes(raw[:rng.randrange(len(raw))]), "truncated"
    if kind == 1:
        for _ in range(rng.randint(1, 8)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return bytes(raw), "bytes flipped"
    if kind == 2:  # a lying 2/4/8-byte number at a random place
        width = rng.choice((2, 4, 8))
        i = rng.randrange(max(1, len(raw) - width))
        v = rng.choice(INTERESTING) % (1 << (8 * width))
        raw[i:i + width] = v.to_bytes(width, "little")
        return bytes(raw), "number poked"
    # a zip header field (every local or central header), or the safetensors header length
    fields = [(i + o, w) for i in _find_all(raw, b"PK\x03\x04")
              for o, w in ((6, 2), (8, 2), (18, 4), (22, 4), (26, 2), (28, 2))]
    fields += [(i + o, w) for i in _find_all(raw, b"PK\x01\x02")
               for o, w in ((8, 2), (10, 2), (20, 4), (24, 4), (28, 2), (42, 4))]
    fields += [(i + o, w) for i in _find_all(raw, b"PK\x05\x06") for o, w in ((12, 4), (16, 4))]
    if not fields:
        fields = [(0, 8)]
    i, w = rng.choice(fields)
    raw[i:i + w] = (rng.choice(INTERESTING) % (1 << (8 * w))).to_bytes(w, "little")
    return bytes(raw), "header field poked"


def _find_all(raw, sig):
    out, i = [], raw.find(sig)
    while i >= 0:
        out.append(i)
        i = raw.find(sig, i + 1)
    return out


def _lying_pickle(rng):
    """A well-formed file whose tensor records lie: numel, offset, sizes and strides drawn from
    interesting values against a record of random length."""
    ndim = rng.randint(0, 3)
    pick = lambda: rng.choice(INTERESTING) if rng.random() < 0.5 else rng.randint(0, 40)  # noqa
    rec = {"key": "0", "numel": pick(), "offset": pick(),
           "size": [pick() for _ in range(ndim)], "stride": [pick() for _ in range(ndim)]}
    nbytes = rng.choice([0, 4, 16, 64, 160, 4096])
    payload = tensor_pickle({"x": (rec["key"], rec["numel"], rec["offset"], tuple(rec["size"]),
                                   tuple(rec["stride"]))})
    data = bytes(rng.randrange(256) for _ in range(nbytes))
    fmt = rng.choice(("zip", "zip deflated", "legacy"))
    if fmt == "legacy":
        count = rec["numel"] if rng.random() < 0.7 else pick()
        return legacy_file(payload, [("0", count % 2**63, data)]), fmt
    method = zipfile.ZIP_DEFLATED if fmt == "zip deflated" else zipfile.ZIP_STORED
    return checkpoint_zip(payload, {"0": data}, method), fmt


def _lying_safetensors(rng):
    pick = lambda: rng.choice(INTERESTING) if rng.random() < 0.4 else rng.randint(0, 12)  # noqa
    header = {}
    for name in "xy"[:rng.randint(1, 2)]:
        header[name] = {"dtype": rng.choice(["F32", "I64", "U8", "BF16", "F64", "BOOL", "X"]),
                        "shape": [pick() for _ in range(rng.randint(0, 3))],
                        "data_offsets": [pick(), pick()]}
    return safetensors_file(header, bytes(rng.randrange(256) for _ in range(rng.choice(
        [0, 8, 16, 48])))), "safetensors"


def _fuzz_cases(folder, seed, n):
    rng = random.Random(seed)
    bases = _base_files()
    cases = []
    for i in range(n):
        r = rng.random()
        if r < 0.55:
            fmt = rng.choice(list(bases))
            data, how = _mutate(rng, bases[fmt])
        elif r < 0.85:
            (data, fmt), how = _lying_pickle(rng), "lying tensor record"
        else:
            (data, fmt), how = _lying_safetensors(rng), "lying header"
        path = os.path.join(folder, f"fuzz{i}.bin")
        with open(path, "wb") as f:
            f.write(data)
        reader = "safetensors" if fmt == "safetensors" else "load"
        kw = {"mmap": True} if fmt == "zip" and rng.random() < 0.3 else {}
        cases.append({"id": f"{seed}/{i} {fmt} {how}", "reader": reader, "path": path, **kw})
    return cases


@pytest.mark.parametrize("seed", [1, 2])
def test_random_corruptions_load_or_are_refused_cleanly(tmp_path, seed):
    cases = _fuzz_cases(str(tmp_path), seed, 400)
    results = run_in_child(cases, str(tmp_path))
    bad, refused = [], 0
    for c in cases:
        r = results[c["id"]]
        if r["ok"]:
            continue
        refused += 1
        prefix = "safetensors" if c["reader"] == "safetensors" else "fiamma.load"
        if r["type"] not in ("RuntimeError", "UnpicklingError", "SafetensorError") or \
                not r["msg"].startswith(prefix):
            bad.append(f"{c['id']}: {r['type']}: {r['msg'][:300]}")
    assert not bad, "\n".join(bad[:20])
    assert refused > len(cases) // 3  # the mutations do reach the checks


# ---- zip bombs: bounded memory -----------------------------------------------------------------

def test_zip_bombs_cost_no_memory_beyond_the_tensor(tmp_path):
    zeros = b"\x00" * (64 << 20)
    # a record inflating far beyond what its tensor needs: only the tensor's bytes are kept
    bomb_pickle = one_tensor(numel=1024, size=(1024,))
    cases = {
        "declares 4 GiB from 1 KiB": (patch_zip(checkpoint_zip(
            one_tensor(numel=1 << 30, size=(1 << 30,)), {"0": b"\x00" * 1024},
            zipfile.ZIP_DEFLATED), "archive/data/0", file_size=2**32 - 1), "load", {},
            r"can't inflate"),
        "64 MiB of zeros for 4 KiB": (checkpoint_zip(bomb_pickle, {"0": zeros},
                                                     zipfile.ZIP_DEFLATED), "load", {}, None),
        "a real 64 MiB tensor, deflated": (checkpoint_zip(
            one_tensor(numel=16 << 20, size=(16 << 20,)), {"0": zeros}, zipfile.ZIP_DEFLATED),
            "load", {}, None),
    }
    assert len(cases["a real 64 MiB tensor, deflated"][0]) < 1 << 20  # ratio ~1000:1
    results = run_in_child(_write(str(tmp_path), cases), str(tmp_path))
    rss = [results[c]["maxrss_kb"] for c in cases]
    assert not results["declares 4 GiB from 1 KiB"]["ok"]
    assert results["64 MiB of zeros for 4 KiB"]["ok"] and \
        results["a real 64 MiB tensor, deflated"]["ok"]
    # the refusal and the 4 KiB tensor grow the peak by little; the 64 MiB tensor by about its
    # own size (not twice: the record is inflated straight into the tensor)
    assert rss[1] - rss[0] < 16 << 10, rss
    assert rss[2] - rss[1] < 96 << 10, rss


def test_regression_defect1_heap_bytes_never_reach_a_tensor(tmp_path):
    # before the fix, this file loaded and the tensor held 4080 bytes of the heap
    p = tmp_path / "short.pt"
    p.write_bytes(_deflated_short(4096))
    for mm in (False, True):
        with pytest.raises(RuntimeError, match="record data/0.*early"):
            fiamma.load(p, mmap=mm)


def test_regression_defect2_sizes_beyond_int64(tmp_path):
    p = tmp_path / "z.pt"
    p.write_bytes(checkpoint_zip(one_tensor(size=(0, BIG, BIG), stride=(1, 1, 1)), {"0": F32}))
    with pytest.raises(Exception, match=r"\(0, 4611686018427387904, 4611686018427387904\)"):
        fiamma.load(p)
    raw = _st({"w": {"dtype": "F32", "shape": [0, 2**70], "data_offsets": [0, 0]}})
    with pytest.raises(st.SafetensorError,
                       match=r"tensor 'w': shape \[0, 1180591620717411303424\]"):
        st.load(raw)
    # crc of a record is still checked when fiamma inflates it itself
    good = bytearray(checkpoint_zip(one_tensor(), {"0": F32}, zipfile.ZIP_DEFLATED))
    cen = good.rindex(b"archive/data/0") - 46  # the central header: the CRC zipfile checks
    struct.pack_into("<I", good, cen + 16, zlib.crc32(b"nope"))
    p.write_bytes(bytes(good))
    with pytest.raises(RuntimeError, match="record data/0.*CRC"):
        fiamma.load(p)
