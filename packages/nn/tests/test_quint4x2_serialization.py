"""``fiamma.save`` / ``fiamma.load`` of 4-bit quantized tensors (``fiamma.quint4x2``) in
PyTorch's layout: a ``torch.QUInt4x2Storage`` of the values two a byte (the first in the low
nibble), the tensor contiguous from the storage's start; round trips exact, and (parity)
files of either library load in the other, quantized EmbeddingBag state dicts included."""
import io
import pickle
import warnings
import zipfile

import numpy as np
import pytest

import fiamma
import fiamma.ao.nn.quantized as nnq
import fiamma.ao.quantization as tq


def _np(t):
    return t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)


def _roundtrip(obj):
    buf = io.BytesIO()
    fiamma.save(obj, buf)
    buf.seek(0)
    return fiamma.load(buf), buf.getvalue()


def _records(data):
    z = zipfile.ZipFile(io.BytesIO(data))
    return {n.split("/", 1)[1]: z.read(n) for n in z.namelist()}


def _same_q(a, b):
    assert a.dtype is b.dtype and a.qscheme() is b.qscheme()
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(_np(a.int_repr()), _np(b.int_repr()))
    if a.qscheme() is fiamma.per_tensor_affine:
        assert (a.q_scale(), a.q_zero_point()) == (b.q_scale(), b.q_zero_point())
    else:
        assert a.q_per_channel_axis() == b.q_per_channel_axis()
        for fa, fb in ((a.q_per_channel_scales, b.q_per_channel_scales),
                       (a.q_per_channel_zero_points, b.q_per_channel_zero_points)):
            assert fa().dtype == fb().dtype
            np.testing.assert_array_equal(_np(fa()), _np(fb()))
    np.testing.assert_array_equal(_np(a.dequantize()), _np(b.dequantize()))


def _per_channel_4bit(rng, n, d):
    w = fiamma.tensor(rng.standard_normal((n, d)).astype(np.float32))
    obs = tq.default_float_qparams_observer_4bit()
    obs(w)
    s, z = obs.calculate_qparams()
    return fiamma.quantize_per_channel(w, s, z, 0, fiamma.quint4x2)


def test_packed_layout_hand_computed():
    q = fiamma.quantize_per_tensor(fiamma.tensor([0.0, 0.5, 1.0, 7.0, 3.5]), 0.5, 1,
                                   fiamma.quint4x2)
    assert q.int_repr().tolist() == [1, 2, 3, 15, 8]
    out, data = _roundtrip(q)
    _same_q(out, q)
    rec = _records(data)
    assert rec["data/0"] == bytes([0x21, 0xF3, 0x08])     # low nibble first, odd count padded
    ops = [(op.name, arg) for op, arg, _ in __import__("pickletools").genops(rec["data.pkl"])]
    assert ("GLOBAL", "torch QUInt4x2Storage") in ops
    assert ("GLOBAL", "torch._utils _rebuild_qtensor") in ops
    # storage of 3 (packed bytes); the tensor keeps its logical size (5,) and stride (1,)
    ints = [a for n, a in ops if n in ("BININT1", "BININT")]
    assert ints[:4] == [3, 0, 5, 1]


def test_round_trips_are_exact():
    rng = np.random.default_rng(0)
    pc = _per_channel_4bit(rng, 7, 5)                    # 35 values: an odd count
    pt = fiamma.quantize_per_tensor(fiamma.tensor(rng.standard_normal((3, 3)).astype(
        np.float32)), 0.25, 7, fiamma.quint4x2)
    tr = pt.transpose(0, 1)                              # saved as its contiguous values
    q8 = fiamma.quantize_per_tensor(fiamma.tensor([0.5, 1.0]), 0.5, 0, fiamma.quint8)
    out, _ = _roundtrip({"pc": pc, "pt": pt, "tr": tr, "q8": q8, "dt": fiamma.quint4x2})
    _same_q(out["pc"], pc)
    _same_q(out["pt"], pt)
    _same_q(out["tr"], tr)
    _same_q(out["q8"], q8)
    assert out["dt"] is fiamma.quint4x2


@pytest.mark.parametrize("kw", [dict(mmap=True), dict(weights_only=False)])
def test_file_round_trip_mapped_and_trusted(tmp_path, kw):
    q = _per_channel_4bit(np.random.default_rng(5), 3, 5)
    fiamma.save({"q": q, "w": fiamma.ones(3)}, str(tmp_path / "q.pt"))
    out = fiamma.load(str(tmp_path / "q.pt"), **kw)
    _same_q(out["q"], q)
    assert out["w"].tolist() == [1.0, 1.0, 1.0]


def test_quantized_embedding_bag_4bit_state_dict_round_trip():
    rng = np.random.default_rng(1)
    f = fiamma.nn.EmbeddingBag(11, 6, mode="sum")
    f.qconfig = tq.float_qparams_weight_only_qconfig_4bit
    m = nnq.EmbeddingBag.from_float(f)
    sd, _ = _roundtrip(m.state_dict())
    assert sd["_packed_params.dtype"] is fiamma.quint4x2
    m2 = nnq.EmbeddingBag(11, 6, mode="sum", dtype=fiamma.quint4x2)
    m2.load_state_dict(sd)
    _same_q(m2.weight(), m.weight())
    idx, off = fiamma.tensor(rng.integers(0, 11, 9)), fiamma.tensor([0, 4, 4])
    np.testing.assert_array_equal(_np(m2(idx, off)), _np(m(idx, off)))


class _Fake4bit:
    """Writes a quint4x2 record with a chosen layout (to check what load refuses)."""

    def __init__(self, packed, layout):
        self.packed, self.layout = packed, layout

    def __fiamma_qtensor__(self):
        return (self.packed, "QUInt4x2Storage",
                (fiamma.per_tensor_affine, 0.5, 0), self.layout)


@pytest.mark.parametrize("layout,match", [((0, (2, 3), (1, 2)), "only contiguous"),
                                          ((1, (2,), (1,)), "only contiguous"),
                                          ((0, (3, 3), (3, 1)), "needs 5 packed bytes")])
def test_load_refuses_layouts_it_cannot_read(layout, match):
    buf = io.BytesIO()
    fiamma.save({"q": _Fake4bit(fiamma.tensor([1, 2, 3, 4], dtype=fiamma.uint8), layout)}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match=match):
        fiamma.load(buf)


def test_out_of_range_values_are_refused_on_save():
    from fiamma.nn._qtensor import QTensor
    q = QTensor(fiamma.tensor([3, 16], dtype=fiamma.uint8), fiamma.quint4x2,
                fiamma.per_tensor_affine, 1.0, 0)
    with pytest.raises(ValueError, match=r"quint4x2: values must be in \[0, 15\], got 16"):
        fiamma.save(q, io.BytesIO())


# ---------------------------------------------------------------- beside PyTorch

def _torch():
    torch = pytest.importorskip("torch")
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    return torch


def _torch_4bit_bag(torch, n=9, d=6, seed=0):
    import torch.ao.nn.quantized as tnnq
    import torch.ao.quantization as ttq
    torch.manual_seed(seed)
    f = torch.nn.EmbeddingBag(n, d, mode="sum")
    f.qconfig = ttq.float_qparams_weight_only_qconfig_4bit
    return tnnq.EmbeddingBag.from_float(f)


def _same_as_torch(fq, tq_):
    import torch
    assert fq.dtype.name == str(tq_.dtype).split(".")[-1] == "quint4x2"
    assert tuple(fq.shape) == tuple(tq_.shape)
    np.testing.assert_array_equal(_np(fq.dequantize()), tq_.dequantize().numpy())
    if tq_.qscheme() == torch.per_tensor_affine:
        assert fq.qscheme() is fiamma.per_tensor_affine
        assert (fq.q_scale(), fq.q_zero_point()) == (tq_.q_scale(), tq_.q_zero_point())
    else:
        assert fq.qscheme() is fiamma.per_channel_affine_float_qparams
        np.testing.assert_array_equal(_np(fq.q_per_channel_scales()),
                                      tq_.q_per_channel_scales().numpy())
        np.testing.assert_array_equal(_np(fq.q_per_channel_zero_points()),
                                      tq_.q_per_channel_zero_points().numpy())


@pytest.mark.parity
def test_torch_embedding_bag_4bit_state_dict_loads_in_fiamma_and_back():
    torch = _torch()
    tm = _torch_4bit_bag(torch)
    buf = io.BytesIO()
    torch.save(tm.state_dict(), buf)
    buf.seek(0)
    sd = fiamma.load(buf)
    assert sd["_packed_params.dtype"] is fiamma.quint4x2
    _same_as_torch(sd["_packed_params._packed_weight"], tm.weight())
    fm = nnq.EmbeddingBag(9, 6, mode="sum", dtype=fiamma.quint4x2)
    fm.load_state_dict(sd)
    rng = np.random.default_rng(2)
    idx, off = rng.integers(0, 9, 12), np.array([0, 5, 5, 9])
    np.testing.assert_array_equal(_np(fm(fiamma.tensor(idx), fiamma.tensor(off))),
                                  tm(torch.from_numpy(idx), torch.from_numpy(off)).numpy())
    # fiamma's file, read by torch.load (weights_only=True), into a torch module
    out = io.BytesIO()
    fiamma.save(fm.state_dict(), out)
    out.seek(0)
    tsd = torch.load(out)
    w, tw = tsd["_packed_params._packed_weight"], tm.weight()
    assert w.dtype == torch.quint4x2 and w.qscheme() == torch.per_channel_affine_float_qparams
    assert torch.equal(w.int_repr(), tw.int_repr()) and torch.equal(w.dequantize(),
                                                                     tw.dequantize())
    assert torch.equal(w.q_per_channel_scales(), tw.q_per_channel_scales())
    assert torch.equal(w.q_per_channel_zero_points(), tw.q_per_channel_zero_points())
    import torch.ao.nn.quantized as tnnq
    tm2 = tnnq.EmbeddingBag(9, 6, mode="sum", dtype=torch.quint4x2)
    tm2.load_state_dict(tsd)
    assert torch.equal(tm2(torch.from_numpy(idx), torch.from_numpy(off)),
                       tm(torch.from_numpy(idx), torch.from_numpy(off)))
    # the packed bytes fiamma writes are torch's
    buf.seek(0)
    out.seek(0)
    trec, frec = _records(buf.getvalue()), _records(out.getvalue())
    key = [k for k in frec if k.startswith("data/") and len(frec[k]) == 27]
    assert len(key) == 1 and frec[key[0]] in trec.values()


@pytest.mark.parity
@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (7,)])
def test_per_tensor_quint4x2_both_ways(shape):
    torch = _torch()
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    tq_ = torch.quantize_per_tensor(torch.from_numpy(x), 0.3, 6, torch.quint4x2)
    fq = fiamma.quantize_per_tensor(fiamma.tensor(x), 0.3, 6, fiamma.quint4x2)
    np.testing.assert_array_equal(_np(fq.dequantize()), tq_.dequantize().numpy())
    buf = io.BytesIO()
    torch.save({"q": tq_}, buf)
    buf.seek(0)
    _same_as_torch(fiamma.load(buf)["q"], tq_)
    buf = io.BytesIO()
    fiamma.save({"q": fq}, buf)
    buf.seek(0)
    back = torch.load(buf)["q"]
    assert back.dtype == torch.quint4x2 and back.qscheme() == torch.per_tensor_affine
    assert (back.q_scale(), back.q_zero_point()) == (0.3, 6)
    assert torch.equal(back.dequantize(), tq_.dequantize())


@pytest.mark.parity
def test_torch_quint4x2_view_is_refused_with_a_clear_error():
    torch = _torch()
    q = torch.quantize_per_tensor(torch.arange(9.).reshape(3, 3) * 0.1, 0.1, 1,
                                  torch.quint4x2)
    buf = io.BytesIO()
    torch.save(q[1:], buf)       # PyTorch writes the view at offset 3 of the packed storage
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="only contiguous ones from offset 0"):
        fiamma.load(buf)


@pytest.mark.parity
@pytest.mark.parametrize("dtype_name", ["quint8", "qint8", "quint4x2"])
def test_torch_legacy_format_quantized_tensors_load(dtype_name):
    # the legacy format stores the bytes after the pickle: the integers must be read then
    torch = _torch()
    dt = getattr(torch, dtype_name)
    x = torch.arange(9.).reshape(3, 3) * 0.1
    pt = torch.quantize_per_tensor(x, 0.1, 1, dt)
    if dtype_name == "quint4x2":
        pc = torch.quantize_per_channel(x, torch.tensor([0.1, 0.2, 0.05]),
                                        torch.tensor([1.5, 0.0, 2.0]), 0, dt)
    else:
        pc = torch.quantize_per_channel(x, torch.tensor([0.1, 0.2, 0.05], dtype=torch.float64),
                                        torch.tensor([1, 0, 2]), 1, dt)
    buf = io.BytesIO()
    torch.save({"pt": pt, "pc": pc}, buf, _use_new_zipfile_serialization=False)
    buf.seek(0)
    out = fiamma.load(buf)
    for k, tq_ in (("pt", pt), ("pc", pc)):
        fq = out[k]
        assert fq.dtype is getattr(fiamma, dtype_name)
        np.testing.assert_allclose(_np(fq.dequantize()), tq_.dequantize().numpy(), rtol=0,
                                   atol=1e-7)
        if dtype_name != "quint4x2":    # PyTorch's int_repr of a 4-bit tensor is packed
            np.testing.assert_array_equal(_np(fq.int_repr()), tq_.int_repr().numpy())
