"""fiamma.safetensors: round trips, zero-copy memory-mapped loading, the reference library's
files both ways, and validation of malformed files."""

import json
import os
import struct

import numpy as np
import pytest
from conftest import ALL_DTYPES, LAYOUTS, dtype_id, make_pair, shapes
from hypothesis import HealthCheck, given, settings, strategies as st

import fiamma
from fiamma import _storage, safetensors as sf
from fiamma.safetensors import SafetensorError

try:
    import safetensors.numpy as ref_np
except ImportError:
    ref_np = None

try:
    import safetensors.torch as ref_pt
    import torch
except ImportError:
    torch = ref_pt = None


def raw(t):
    if t.dtype is fiamma.bfloat16:
        t = t.contiguous().view(fiamma.int16)
    return np.array(t.numpy(), copy=True)


def assert_same(a, b):
    assert a.dtype is b.dtype and a.shape == b.shape
    x, y = raw(a), raw(b)
    assert x.shape == y.shape and x.tobytes() == y.tobytes()


def build(header, data=b"", pad_to=None):
    """A safetensors file from a header dict (or raw header bytes) and data bytes."""
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


# ---- round trips -----------------------------------------------------------------------------

@pytest.mark.parametrize("dt", ALL_DTYPES, ids=dtype_id)
@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=shapes(max_dims=3), layout=st.sampled_from(LAYOUTS), seed=st.integers(0, 99))
def test_roundtrip_bytes_every_dtype_and_layout(dt, shape, layout, seed):
    t, _ = make_pair(shape, dt, np.random.default_rng(seed), layout)
    back = sf.load(sf.save({"t": t, "u8": fiamma.ones(3, dtype=fiamma.uint8)}))
    assert_same(back["t"], t)
    assert back["t"].is_contiguous()


def test_file_roundtrip_is_memory_mapped(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {dt.name: make_pair((3, 5), dt, rng, "transposed")[0] for dt in ALL_DTYPES}
    tensors["scalar"] = fiamma.tensor(2.5, dtype=fiamma.float64)
    tensors["empty"] = fiamma.zeros(0, 7, dtype=fiamma.int16)
    path = tmp_path / "m.safetensors"
    sf.save_file(tensors, path, metadata={"format": "pt", "step": "7"})
    raw_bytes = path.read_bytes()
    n = struct.unpack("<Q", raw_bytes[:8])[0]
    assert (8 + n) % 8 == 0  # the data starts 8-aligned
    back = sf.load_file(path)
    assert set(back) == set(tensors)
    for k, t in tensors.items():
        assert_same(back[k], t)
        assert isinstance(back[k]._storage, _storage.BorrowedStorage)
        assert back[k].data_ptr() % back[k].element_size() == 0
    back["float32"].fill_(0.0)  # a private mapping: the file does not change
    assert path.read_bytes() == raw_bytes
    with sf.safe_open(path, framework="pt") as f:
        assert f.keys() == sorted(tensors)
        assert f.metadata() == {"format": "pt", "step": "7"}
        assert_same(f.get_tensor("int64"), tensors["int64"])
        with pytest.raises(SafetensorError, match="no tensor named 'nope'"):
            f.get_tensor("nope")
    with sf.safe_open(path, framework="np") as f:
        a = f.get_tensor("float16")
        assert isinstance(a, np.ndarray) and np.array_equal(a, tensors["float16"].numpy())
        with pytest.raises(TypeError, match="bfloat16"):
            f.get_tensor("bfloat16")
    with pytest.raises(ValueError, match="framework"):
        sf.safe_open(path, framework="jax")


def test_no_metadata_and_empty_dict(tmp_path):
    path = tmp_path / "e.safetensors"
    sf.save_file({}, path)
    assert sf.load_file(path) == {}
    with sf.safe_open(path) as f:
        assert f.metadata() is None and f.keys() == []
    assert sf.load(sf.save({})) == {}


def test_bad_arguments(tmp_path):
    with pytest.raises(TypeError, match="dict"):
        sf.save([fiamma.ones(1)])
    with pytest.raises(TypeError, match="not a fiamma tensor"):
        sf.save({"a": np.ones(2)})
    with pytest.raises(TypeError, match="names must be str"):
        sf.save({1: fiamma.ones(1)})
    with pytest.raises(TypeError, match="metadata"):
        sf.save({"a": fiamma.ones(1)}, metadata={"k": 1})
    with pytest.raises(SafetensorError, match="reserved"):
        sf.save({"__metadata__": fiamma.ones(1)})
    with pytest.raises(TypeError, match="bytes"):
        sf.load("not bytes")
    path = tmp_path / "a.safetensors"
    sf.save_file({"a": fiamma.ones(2)}, path)
    with pytest.raises(RuntimeError, match="CUDA"):
        sf.load_file(path, device="cuda")
    with pytest.raises(FileNotFoundError):
        sf.load_file(tmp_path / "missing.safetensors")


def test_interrupted_save_file_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "w.safetensors"
    sf.save_file({"a": fiamma.ones(2)}, path)
    old = path.read_bytes()
    calls = []
    real = sf._bytes_of

    def failing(t, n):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(t, n)

    monkeypatch.setattr(sf, "_bytes_of", failing)
    with pytest.raises(OSError, match="disk full"):
        sf.save_file({"a": fiamma.zeros(2), "b": fiamma.zeros(100)}, path)
    assert path.read_bytes() == old and os.listdir(tmp_path) == ["w.safetensors"]


def test_unaligned_offsets_are_copied():
    # a writer that does not align: an int8 first puts the float32 at offset 1
    h = {"a": {"dtype": "I8", "shape": [1], "data_offsets": [0, 1]},
         "b": {"dtype": "F32", "shape": [2], "data_offsets": [1, 9]}}
    data = build(h, b"\x05" + np.array([1.5, -2.0], np.float32).tobytes())
    back = sf.load(data)
    assert back["a"].tolist() == [5] and back["b"].tolist() == [1.5, -2.0]


def test_unaligned_file_is_copied_not_viewed(tmp_path):
    h = {"a": {"dtype": "I8", "shape": [1], "data_offsets": [0, 1]},
         "b": {"dtype": "F64", "shape": [1], "data_offsets": [1, 9]}}
    path = tmp_path / "u.safetensors"
    path.write_bytes(build(h, b"\x01" + np.array([3.25]).tobytes()))
    back = sf.load_file(path)
    assert back["b"].tolist() == [3.25] and back["b"].data_ptr() % 8 == 0


# ---- the reference implementation ------------------------------------------------------------

@pytest.mark.skipif(ref_np is None, reason="the safetensors package is not installed")
def test_reference_numpy_files_both_ways(tmp_path):
    rng = np.random.default_rng(3)
    arrays = {"f32": rng.standard_normal((4, 3)).astype(np.float32),
              "i64": rng.integers(-9, 9, (5,)), "b": rng.integers(0, 2, (2, 2)).astype(bool),
              "h": rng.standard_normal(3).astype(np.float16), "u8": np.arange(4, dtype=np.uint8),
              "empty": np.zeros((0, 2), np.int32), "scalar": np.array(2.0)}
    ref_np.save_file(arrays, str(tmp_path / "ref.safetensors"), metadata={"k": "v"})
    back = sf.load_file(tmp_path / "ref.safetensors")
    for k, a in arrays.items():
        assert back[k].shape == a.shape and np.array_equal(back[k].numpy(), a)
    with sf.safe_open(tmp_path / "ref.safetensors") as f:
        assert f.metadata() == {"k": "v"}
    sf.save_file({k: fiamma.from_numpy(a) for k, a in arrays.items()},
                 tmp_path / "ours.safetensors", metadata={"x": "y"})
    theirs = ref_np.load_file(str(tmp_path / "ours.safetensors"))
    for k, a in arrays.items():
        assert theirs[k].dtype == a.dtype and np.array_equal(theirs[k], a)
    assert ref_np.load(sf.save({"a": fiamma.arange(3)}))["a"].tolist() == [0, 1, 2]


@pytest.mark.skipif(ref_pt is None, reason="safetensors.torch (and PyTorch) not installed")
def test_reference_torch_files_bfloat16(tmp_path):
    t = torch.randn(3, 4).to(torch.bfloat16)
    ref_pt.save_file({"w": t}, str(tmp_path / "bf.safetensors"))
    back = sf.load_file(tmp_path / "bf.safetensors")
    assert back["w"].dtype is fiamma.bfloat16
    assert raw(back["w"]).tobytes() == t.view(torch.int16).numpy().tobytes()
    sf.save_file({"w": back["w"]}, tmp_path / "bf2.safetensors")
    assert torch.equal(ref_pt.load_file(str(tmp_path / "bf2.safetensors"))["w"], t)


# ---- malformed files -------------------------------------------------------------------------

F32 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
BAD_FILES = {
    "empty file": (b"", "too small"),
    "short file": (b"\x01\x00", "too small"),
    "header too big": (struct.pack("<Q", 10**12) + b"{}", "exceeds the limit"),
    "header past end": (struct.pack("<Q", 100) + b"{}", "runs past the end"),
    "not json": (build(b"{nope"), "invalid JSON"),
    "json array": (build(b"[1, 2]"), "not a JSON object"),
    "deep json": (build(b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"), "invalid JSON"),
    "bad utf8": (build(b'{"\xff": 1}'), "invalid JSON"),
    "duplicate key": (build(b'{"a": ' + json.dumps(F32).encode() + b', "a": '
                            + json.dumps(F32).encode() + b"}", b"\x00" * 8), "appears twice"),
    "unknown dtype": (build({"a": dict(F32, dtype="F33")}, b"\x00" * 8), "unknown dtype"),
    "unsupported dtype": (build({"a": dict(F32, dtype="F8_E4M3", shape=[8])}, b"\x00" * 8),
                          "no fiamma equivalent"),
    "negative shape": (build({"a": dict(F32, shape=[-2])}, b"\x00" * 8), "shape must be"),
    "float shape": (build({"a": dict(F32, shape=[2.0])}, b"\x00" * 8), "shape must be"),
    "bool shape": (build({"a": dict(F32, shape=[True, 2])}, b"\x00" * 8), "shape must be"),
    "offsets reversed": (build({"a": dict(F32, data_offsets=[8, 0])}, b"\x00" * 8),
                         "outside"),
    "offsets past data": (build({"a": dict(F32, data_offsets=[0, 16])}, b"\x00" * 8),
                          "outside"),
    "size mismatch": (build({"a": dict(F32, shape=[3])}, b"\x00" * 8), "needs 12 bytes"),
    "overlap": (build({"a": F32, "b": dict(F32, data_offsets=[4, 12])}, b"\x00" * 12),
                "overlaps"),
    "gap": (build({"a": dict(F32, data_offsets=[4, 12])}, b"\x00" * 12), "gap"),
    "trailing bytes": (build({"a": F32}, b"\x00" * 12), "not described"),
    "missing key": (build({"a": {"dtype": "F32", "shape": [2]}}, b"\x00" * 8), "exactly the keys"),
    "extra key": (build({"a": dict(F32, extra=1)}, b"\x00" * 8), "exactly the keys"),
    "entry not a dict": (build({"a": [1, 2]}, b""), "exactly the keys"),
    "offsets wrong type": (build({"a": dict(F32, data_offsets="0-8")}, b"\x00" * 8),
                           "data_offsets must be"),
    "metadata not str": (build({"__metadata__": {"k": 1}}), "__metadata__ must map"),
    "truncated data": (build({"a": F32}, b"\x00" * 5), "outside"),
}


@pytest.mark.parametrize("what", sorted(BAD_FILES))
def test_malformed_files_raise_clear_errors(tmp_path, what):
    data, message = BAD_FILES[what]
    with pytest.raises(SafetensorError, match=message):
        sf.load(data)
    path = tmp_path / "bad.safetensors"
    path.write_bytes(data)
    with pytest.raises(SafetensorError, match=message):
        sf.load_file(path)


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_random_corruption_never_crashes(data):
    good = bytearray(sf.save({"a": fiamma.arange(6, dtype=fiamma.float32).reshape(2, 3),
                              "b": fiamma.ones(4, dtype=fiamma.int16)}, metadata={"m": "x"}))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(good) - 1))
        good[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(good)))
    try:
        out = sf.load(bytes(good[:cut]))
    except SafetensorError:
        return
    for t in out.values():  # whatever loads is a valid, readable tensor
        t.tolist()
