"""fiamma.ao: QAT / weight-only quantized embeddings (float qparams, quint4x2), QAT LinearBn1d,
int8 Conv1d/Conv3d (and the fused ReLU ones): float64 references, gradients, convert, and
(parity) PyTorch's torch.ao with the same weights and qparams."""
import io

import numpy as np
import pytest

import fiamma
import fiamma.ao.nn.intrinsic as nni
import fiamma.ao.nn.intrinsic.qat as nniqat
import fiamma.ao.nn.intrinsic.quantized as nniq
import fiamma.ao.nn.qat as nnqat
import fiamma.ao.nn.quantized as nnq
import fiamma.ao.quantization as tq
from fiamma import nn


def _np(t):
    return t.detach().numpy()


def _float_qparams_ref(w, qmax):
    """float64 reference of the float-qparams row quantization (scale, zero point, ints)."""
    lo, hi = w.min(axis=1), w.max(axis=1)
    scale = (hi - lo) / qmax
    scale = np.where(scale > np.finfo(np.float32).eps, scale, 1.0)
    zp = -lo / scale
    q = np.clip(np.rint(w / scale[:, None] + zp[:, None]), 0, qmax)
    return scale, zp, q


# ---- quantized tensors with float qparams ------------------------------------------------------
@pytest.mark.parametrize("dtype,qmax", [(fiamma.quint8, 255), (fiamma.quint4x2, 15)])
def test_float_qparams_quantize_matches_float64_reference(dtype, qmax):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((7, 9)).astype(np.float32) * 2
    obs = (tq.default_float_qparams_observer if qmax == 255
           else tq.default_float_qparams_observer_4bit)()
    obs(fiamma.tensor(w))
    s, z = obs.calculate_qparams()
    assert s.dtype == fiamma.float32 and z.dtype == fiamma.float32
    rs, rz, rq = _float_qparams_ref(w.astype(np.float64), qmax)
    np.testing.assert_allclose(_np(s), rs, rtol=1e-6)
    np.testing.assert_allclose(_np(z), rz, rtol=1e-5, atol=1e-4)
    q = fiamma.quantize_per_channel(fiamma.tensor(w), s, z, 0, dtype)
    assert q.qscheme() is fiamma.per_channel_affine_float_qparams and q.dtype is dtype
    assert np.abs(_np(q.int_repr()).astype(np.int64) - rq).max() <= 1  # float32 vs float64 ties
    dq = _np(q.dequantize()).astype(np.float64)
    assert np.all(np.abs(dq - w) <= rs[:, None] / 2 + 1e-6)  # within half a step of the row
    assert q.q_per_channel_zero_points().dtype == fiamma.float32


def test_quint4x2_is_a_dtype_with_16_levels():
    q = fiamma.quantize_per_tensor(fiamma.tensor([-1.0, 0.0, 3.0, 100.0]), 0.5, 2,
                                   fiamma.quint4x2)
    assert q.int_repr().tolist() == [0, 2, 8, 15]
    buf = io.BytesIO()          # saved packed, two values a byte, as PyTorch
    fiamma.save({"q": q}, buf)
    buf.seek(0)
    assert fiamma.load(buf)["q"].int_repr().tolist() == [0, 2, 8, 15]


# ---- weight-only quantized embeddings -----------------------------------------------------------
def _qweight(rng, n, d, dtype):
    w = fiamma.tensor(rng.standard_normal((n, d)).astype(np.float32))
    obs = (tq.default_float_qparams_observer if dtype is fiamma.quint8
           else tq.default_float_qparams_observer_4bit)()
    obs(w)
    s, z = obs.calculate_qparams()
    return fiamma.quantize_per_channel(w, s, z, 0, dtype)


def _rows64(qw):
    """float64 values of the rows in fbgemm's representation (float16 scale/bias for 4-bit)."""
    q = _np(qw.int_repr()).astype(np.float64)
    s = _np(qw.q_per_channel_scales()).astype(np.float32)
    b = (-(_np(qw.q_per_channel_zero_points()).astype(np.float32) * s)).astype(np.float32)
    if qw.dtype is fiamma.quint4x2:
        s, b = s.astype(np.float16), b.astype(np.float16)
    return s.astype(np.float64)[:, None] * q + b.astype(np.float64)[:, None]


@pytest.mark.parametrize("dtype", [fiamma.quint8, fiamma.quint4x2])
def test_quantized_embedding_matches_float64_reference(dtype):
    rng = np.random.default_rng(1)
    qw = _qweight(rng, 20, 8, dtype)
    m = nnq.Embedding(20, 8, dtype=dtype)
    m.set_weight(qw)
    idx = rng.integers(0, 20, (3, 5))
    out = m(fiamma.tensor(idx))
    assert out.dtype == fiamma.float32 and tuple(out.shape) == (3, 5, 8)
    np.testing.assert_allclose(_np(out), _rows64(qw)[idx], rtol=1e-6, atol=1e-6)
    tol = 1e-6 if dtype is fiamma.quint8 else 2e-2  # 4-bit rows: float16 scale and bias
    np.testing.assert_allclose(_np(out), _np(qw.dequantize())[idx], atol=tol)
    with pytest.raises(IndexError, match="out of range"):
        m(fiamma.tensor([20]))
    with pytest.raises(TypeError, match="integer"):
        m(fiamma.tensor([1.0]))


@pytest.mark.parametrize("dtype", [fiamma.quint8, fiamma.quint4x2])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_quantized_embedding_bag_matches_float64_reference(dtype, mode):
    rng = np.random.default_rng(2)
    qw = _qweight(rng, 30, 6, dtype)
    rows = _rows64(qw)
    m = nnq.EmbeddingBag(30, 6, mode=mode, dtype=dtype)
    m.set_weight(qw)
    idx = rng.integers(0, 30, 11)
    offsets = [0, 4, 4, 9]  # an empty bag
    out = _np(m(fiamma.tensor(idx), fiamma.tensor(offsets)))
    bounds = offsets + [len(idx)]
    red = {"sum": np.sum, "mean": np.mean, "max": np.max}[mode]
    ref = np.stack([red(rows[idx[a:b]], axis=0) if b > a else np.zeros(6)
                    for a, b in zip(bounds[:-1], bounds[1:])])
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    # 2-d input: one bag per row; include_last_offset: the last offset ends the last bag
    out2 = _np(m(fiamma.tensor(idx[:10].reshape(2, 5))))
    np.testing.assert_allclose(out2, np.stack([red(rows[idx[:5]], 0), red(rows[idx[5:10]], 0)]),
                               rtol=1e-5, atol=1e-5)
    m.include_last_offset = True
    out3 = _np(m(fiamma.tensor(idx), fiamma.tensor([0, 4, 11])))
    np.testing.assert_allclose(out3, np.stack([red(rows[idx[:4]], 0), red(rows[idx[4:]], 0)]),
                               rtol=1e-5, atol=1e-5)


def test_quantized_embedding_bag_per_sample_weights_and_errors():
    rng = np.random.default_rng(3)
    qw = _qweight(rng, 10, 4, fiamma.quint8)
    m = nnq.EmbeddingBag(10, 4)
    m.set_weight(qw)
    idx, w = np.array([1, 2, 3, 9]), rng.random(4).astype(np.float32)
    out = _np(m(fiamma.tensor(idx), fiamma.tensor([0, 2]), fiamma.tensor(w)))
    rows = _rows64(qw)
    ref = np.stack([(rows[idx[:2]] * w[:2, None]).sum(0), (rows[idx[2:]] * w[2:, None]).sum(0)])
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="offsets"):
        m(fiamma.tensor(idx), fiamma.tensor([1, 2]))
    with pytest.raises(ValueError, match="per_sample_weights"):
        m(fiamma.tensor(idx), fiamma.tensor([0]), fiamma.tensor(w[:3]))
    m.mode = "mean"
    with pytest.raises(NotImplementedError, match="per_sample_weights"):
        m(fiamma.tensor(idx), fiamma.tensor([0]), fiamma.tensor(w))
    with pytest.raises(TypeError, match="float qparams"):
        m.set_weight(fiamma.quantize_per_tensor(fiamma.zeros(10, 4), 0.1, 0, fiamma.quint8))


@pytest.mark.parametrize("cls", [nn.Embedding, nn.EmbeddingBag])
def test_post_training_embedding_convert_and_state_dict(cls):
    fiamma.manual_seed(0)
    m = nn.Sequential(cls(12, 5))
    m[0].qconfig = tq.float_qparams_weight_only_qconfig
    tq.prepare(m, inplace=True)
    q = tq.convert(m)
    want = nnq.Embedding if cls is nn.Embedding else nnq.EmbeddingBag
    assert type(q[0]) is want
    assert sorted(q.state_dict()) == ["0._packed_params._packed_weight", "0._packed_params.dtype"]
    qw = q[0].weight()
    np.testing.assert_allclose(_np(qw.dequantize()), _np(m[0].weight),
                               atol=float(qw.q_per_channel_scales().max()) / 2 + 1e-6)
    fresh = want(12, 5)
    fresh.load_state_dict(q[0].state_dict())
    assert fresh.weight().equal(qw)
    assert "QuantizedEmbedding" in repr(q)
    bad = nn.Sequential(cls(4, 3))
    bad.qconfig = tq.default_qconfig
    tq.prepare(bad, inplace=True)
    with pytest.raises(AssertionError, match="float_qparams"):
        tq.convert(bad)


# ---- QAT embeddings ------------------------------------------------------------------------------
def test_qat_embedding_fake_quantizes_rows_and_passes_gradients():
    fiamma.manual_seed(1)
    emb = nnqat.Embedding(9, 4, qconfig=tq.default_embedding_qat_qconfig)
    w = _np(emb.weight).astype(np.float64)
    idx = np.array([[1, 2, 2], [8, 0, 1]])
    out = emb(fiamma.tensor(idx))
    s, z, q = _float_qparams_ref(w, 255)
    ref = ((q - z[:, None]) * s[:, None])[idx]
    np.testing.assert_allclose(_np(out), ref, atol=1e-5)
    assert emb.weight_fake_quant.zero_point.dtype == fiamma.float32
    out.sum().backward()
    counts = np.bincount(idx.reshape(-1), minlength=9).astype(np.float32)
    np.testing.assert_allclose(_np(emb.weight.grad), np.repeat(counts[:, None], 4, 1))
    with pytest.raises(AssertionError, match="per_channel_affine_float_qparams"):
        nnqat.Embedding(3, 2, qconfig=tq.default_qat_qconfig)
    with pytest.raises(AssertionError, match="qconfig"):
        nnqat.EmbeddingBag(3, 2)


def test_embedding_prepare_qat_train_convert():
    fiamma.manual_seed(2)
    m = nn.Sequential(nn.EmbeddingBag(16, 6, mode="sum"), nn.Linear(6, 1))
    m[0].qconfig = tq.default_embedding_qat_qconfig_4bit
    tq.prepare_qat(m, mapping=tq.get_embedding_qat_module_mappings(), inplace=True)
    assert type(m[0]) is nnqat.EmbeddingBag and type(m[1]) is nn.Linear
    opt_params = [p for p in m.parameters()]
    idx, off = fiamma.tensor([1, 5, 7, 3, 3, 15]), fiamma.tensor([0, 2, 5])
    for _ in range(3):
        for p in opt_params:
            p.grad = None
        loss = m[1](m[0](idx, off)).pow(2).mean()
        loss.backward()
        assert m[0].weight.grad is not None and float(m[0].weight.grad.abs().sum()) > 0
        with fiamma.no_grad():
            for p in opt_params:
                p -= 0.1 * p.grad
    m.eval()
    qat_out = _np(m[0](idx, off))
    q = tq.convert(m, mapping=tq.get_embedding_static_quant_module_mappings())
    assert type(q[0]) is nnq.EmbeddingBag and q[0].weight().dtype is fiamma.quint4x2
    # the int4 model computes what QAT simulated (up to the float16 row scale/bias)
    np.testing.assert_allclose(_np(q[0](idx, off)), qat_out, atol=2e-2)
    assert sorted(q[0].state_dict()) == ["_packed_params._packed_weight", "_packed_params.dtype"]


# ---- LinearBn1d ---------------------------------------------------------------------------------
def _linear_bn():
    fiamma.manual_seed(3)
    m = nn.Sequential(tq.QuantStub(), nn.Linear(5, 4), nn.BatchNorm1d(4), tq.DeQuantStub())
    with fiamma.no_grad():
        m[2].weight.uniform_(0.5, 1.5)
        m[2].bias.uniform_(-0.5, 0.5)
    return m


def test_linear_bn_fuse_qat_matches_float64_without_fake_quant():
    m = _linear_bn().double().train()
    ref = _linear_bn().double().train()
    f = tq.fuse_modules_qat(m, [["1", "2"]])
    assert type(f[1]) is nni.LinearBn1d
    f.qconfig = tq.get_default_qat_qconfig("x86")
    tq.prepare_qat(f, inplace=True)
    assert type(f[1]) is nniqat.LinearBn1d and type(f[1].bn) is nn.BatchNorm1d
    assert sorted(k for k in f[1].state_dict() if "fake_quant" not in k
                  and "post_process" not in k) == [
        "bias", "bn.bias", "bn.num_batches_tracked", "bn.running_mean", "bn.running_var",
        "bn.weight", "weight"]
    f.apply(tq.disable_fake_quant)
    x = fiamma.randn(8, 5, dtype=fiamma.float64)
    w = fiamma.randn(8, 4, dtype=fiamma.float64)
    y, yr = f(x), ref(x)
    np.testing.assert_allclose(_np(y), _np(yr), atol=1e-12)
    np.testing.assert_allclose(_np(f[1].bn.running_mean), _np(ref[2].running_mean), atol=1e-12)
    (y * w).sum().backward()
    (yr * w).sum().backward()
    np.testing.assert_allclose(_np(f[1].weight.grad), _np(ref[1].weight.grad), atol=1e-10)
    np.testing.assert_allclose(_np(f[1].bias.grad), _np(ref[1].bias.grad), atol=1e-10)
    np.testing.assert_allclose(_np(f[1].bn.weight.grad), _np(ref[2].weight.grad), atol=1e-10)
    np.testing.assert_allclose(_np(f[1].bn.bias.grad), _np(ref[2].bias.grad), atol=1e-10)


def test_linear_bn_qat_gradient_through_fake_quant_and_convert():
    f = tq.fuse_modules_qat(_linear_bn().train(), [["1", "2"]])
    f.qconfig = tq.get_default_qat_qconfig("qnnpack")
    tq.prepare_qat(f, inplace=True)
    x = fiamma.randn(16, 5)
    for _ in range(3):
        f(x)
    lin = f[1]
    lin.zero_grad()
    f(x).sum().backward()
    assert lin.weight.grad is not None and np.isfinite(_np(lin.weight.grad)).all()
    f.eval()
    f.apply(nniqat.freeze_bn_stats)
    y = _np(f(x))
    q = tq.convert(f)
    assert type(q[1]) is nnq.Linear
    out_scale = q[1].scale
    assert np.abs(_np(q(x)) - y).max() <= 2.01 * out_scale
    folded = lin.to_float()
    assert type(folded) is nn.Linear


# ---- int8 Conv1d / Conv3d -----------------------------------------------------------------------
def _q_in(shape, rng, scale=0.05, zp=60):
    x = rng.standard_normal(shape).astype(np.float32)
    return fiamma.quantize_per_tensor(fiamma.tensor(x), scale, zp, fiamma.quint8)


def _q_weight(shape, rng, per_channel=True):
    w = rng.standard_normal(shape).astype(np.float32) * 0.3
    if per_channel:
        s = np.abs(w).reshape(shape[0], -1).max(1) / 127
        return fiamma.quantize_per_channel(fiamma.tensor(w), fiamma.tensor(s),
                                           fiamma.zeros(shape[0], dtype=fiamma.int64), 0,
                                           fiamma.qint8)
    return fiamma.quantize_per_tensor(fiamma.tensor(w), float(np.abs(w).max() / 127), 0,
                                      fiamma.qint8)


def _conv64(nd, x, w, b, stride, padding, dilation, groups):
    conv = {1: fiamma.conv1d, 3: fiamma.conv3d}[nd]
    return _np(conv(x.dequantize().double(), w.dequantize().double(),
                    fiamma.tensor(b).double(), stride, padding, dilation, groups))


@pytest.mark.parametrize("nd,cls,relu", [(1, nnq.Conv1d, False), (1, nniq.ConvReLU1d, True),
                                         (3, nnq.Conv3d, False), (3, nniq.ConvReLU3d, True)])
@pytest.mark.parametrize("per_channel", [True, False])
def test_int8_conv_nd_within_one_quantum_of_float64(nd, cls, relu, per_channel):
    rng = np.random.default_rng(nd)
    spatial = (9,) if nd == 1 else (4, 5, 6)
    x = _q_in((2, 4) + spatial, rng)
    w = _q_weight((6, 2) + (3,) * nd, rng, per_channel)
    b = rng.standard_normal(6).astype(np.float32) * 0.1
    m = cls(4, 6, 3, stride=2 if nd == 1 else (1, 2, 1), padding=1, dilation=1, groups=2)
    m.set_weight_bias(w, fiamma.tensor(b))
    m.scale, m.zero_point = 0.04, 70
    out = m(x)
    ref = _conv64(nd, x, w, b, m.stride, m.padding, m.dilation, 2)
    if relu:
        ref = np.maximum(ref, 0)
    ref_q = np.clip(np.rint(ref / 0.04) + 70, 0, 255)
    assert out.dtype is fiamma.quint8 and tuple(out.shape) == ref.shape
    assert np.abs(_np(out.int_repr()).astype(np.int64) - ref_q).max() <= 1
    assert sorted(m.state_dict()) == ["bias", "scale", "weight", "zero_point"]


def test_int8_conv1d_equals_conv2d_of_height_one():
    rng = np.random.default_rng(5)
    x = _q_in((2, 3, 10), rng)
    w = _q_weight((4, 3, 3), rng)
    b = fiamma.tensor(rng.standard_normal(4).astype(np.float32))
    c1, c2 = nnq.Conv1d(3, 4, 3, padding=1), nnq.Conv2d(3, 4, (1, 3), padding=(0, 1))
    c1.set_weight_bias(w, b)
    w2 = fiamma.quantize_per_channel(w.dequantize().reshape(4, 3, 1, 3),
                                     w.q_per_channel_scales(), w.q_per_channel_zero_points(), 0,
                                     fiamma.qint8)
    c2.set_weight_bias(w2, b)
    c1.scale = c2.scale = 0.03
    x2 = fiamma.quantize_per_tensor(x.dequantize().reshape(2, 3, 1, 10), 0.05, 60,
                                    fiamma.quint8)
    assert np.array_equal(_np(c1(x).int_repr()), _np(c2(x2).int_repr()).reshape(2, 4, 10))
    with pytest.raises(ValueError, match="3-d"):
        c1(x2)


@pytest.mark.parametrize("nd", [1, 3])
def test_conv_nd_post_training_and_qat_convert(nd):
    fiamma.manual_seed(4)
    conv, bn = (nn.Conv1d, nn.BatchNorm1d) if nd == 1 else (nn.Conv3d, nn.BatchNorm3d)
    shape = (2, 3, 8) if nd == 1 else (2, 3, 4, 4, 4)
    m = nn.Sequential(tq.QuantStub(), conv(3, 4, 3, padding=1), nn.ReLU(), conv(4, 2, 1),
                      tq.DeQuantStub()).eval()
    m.qconfig = tq.get_default_qconfig("x86")
    f = tq.fuse_modules(m, [["1", "2"]])
    tq.prepare(f, inplace=True)
    x = fiamma.randn(*shape)
    ref = _np(f(x))
    q = tq.convert(f)
    assert type(q[1]).__name__ == f"ConvReLU{nd}d" and type(q[3]) is (
        nnq.Conv1d if nd == 1 else nnq.Conv3d)
    assert np.abs(_np(q(x)) - ref).max() <= 3 * q[3].scale
    # QAT: conv + bn + relu fused, trained a step, converted
    t = nn.Sequential(tq.QuantStub(), conv(3, 4, 3), bn(4), nn.ReLU(), tq.DeQuantStub()).train()
    t.qconfig = tq.get_default_qat_qconfig("x86")
    tq.fuse_modules_qat(t, [["1", "2", "3"]], inplace=True)
    tq.prepare_qat(t, inplace=True)
    t(x).sum().backward()
    assert t[1].weight.grad is not None
    t.eval()
    y = _np(t(x))
    qt = tq.convert(t)
    assert type(qt[1]) is (nniq.ConvReLU1d if nd == 1 else nniq.ConvReLU3d)
    assert np.abs(_np(qt(x)) - y).max() <= 3 * qt[1].scale


# ---- parity with PyTorch ------------------------------------------------------------------
@pytest.mark.parity
@pytest.mark.parametrize("dtype_name", ["quint8", "quint4x2"])
def test_parity_quantized_embeddings_bit_equal(dtype_name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    w = rng.standard_normal((40, 16)).astype(np.float32)
    tdt, fdt = getattr(torch, dtype_name), getattr(fiamma, dtype_name)
    tobs = (torch.ao.quantization.default_float_qparams_observer if dtype_name == "quint8"
            else torch.ao.quantization.default_float_qparams_observer_4bit)()
    fobs = (tq.default_float_qparams_observer if dtype_name == "quint8"
            else tq.default_float_qparams_observer_4bit)()
    tobs(torch.from_numpy(w))
    fobs(fiamma.tensor(w))
    ts, tz = tobs.calculate_qparams()
    fs, fz = fobs.calculate_qparams()
    np.testing.assert_array_equal(_np(fs), ts.numpy())
    np.testing.assert_array_equal(_np(fz), tz.numpy())
    tw = torch.quantize_per_channel(torch.from_numpy(w), ts, tz, 0, tdt)
    fw = fiamma.quantize_per_channel(fiamma.tensor(w), fs, fz, 0, fdt)
    np.testing.assert_array_equal(_np(fw.dequantize()), tw.dequantize().numpy())
    te, fe = torch.ao.nn.quantized.Embedding(40, 16, dtype=tdt), nnq.Embedding(40, 16, dtype=fdt)
    te.set_weight(tw)
    fe.set_weight(fw)
    idx = rng.integers(0, 40, 25)
    np.testing.assert_array_equal(_np(fe(fiamma.tensor(idx))), te(torch.from_numpy(idx)).numpy())
    assert sorted(fe.state_dict()) == sorted(te.state_dict())
    tb, fb = (torch.ao.nn.quantized.EmbeddingBag(40, 16, dtype=tdt, include_last_offset=True),
              nnq.EmbeddingBag(40, 16, dtype=fdt, include_last_offset=True))
    tb.set_weight(tw)
    fb.set_weight(fw)
    off = np.array([0, 3, 3, 12, 25])
    psw = rng.random(25).astype(np.float32)
    for args in ((idx, off), (idx, off, psw)):
        to = tb(*[torch.from_numpy(a) for a in args]).numpy()
        fo = _np(fb(*[fiamma.tensor(a) for a in args]))
        np.testing.assert_array_equal(fo, to)
    assert sorted(fb.state_dict()) == sorted(tb.state_dict())


@pytest.mark.parity
def test_parity_qat_embedding_forward_grad_and_convert():
    torch = pytest.importorskip("torch")
    import torch.ao.quantization as ttq
    rng = np.random.default_rng(7)
    w = rng.standard_normal((12, 8)).astype(np.float32)
    tm = torch.nn.EmbeddingBag(12, 8, mode="mean")
    fm = nn.EmbeddingBag(12, 8, mode="mean")
    with torch.no_grad():
        tm.weight.copy_(torch.from_numpy(w))
    fm.weight = nn.Parameter(fiamma.tensor(w))
    tm.qconfig, fm.qconfig = ttq.default_embedding_qat_qconfig, tq.default_embedding_qat_qconfig
    tq_m = torch.ao.nn.qat.EmbeddingBag.from_float(tm)
    fq_m = nnqat.EmbeddingBag.from_float(fm)
    idx, off = rng.integers(0, 12, 10), np.array([0, 4, 7])
    to = tq_m(torch.from_numpy(idx), torch.from_numpy(off))
    fo = fq_m(fiamma.tensor(idx), fiamma.tensor(off))
    np.testing.assert_allclose(_np(fo), to.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(_np(fq_m.weight_fake_quant.zero_point),
                                  tq_m.weight_fake_quant.zero_point.numpy())
    (to * torch.arange(8.0)).sum().backward()
    (fo * fiamma.arange(8.0)).sum().backward()
    np.testing.assert_allclose(_np(fq_m.weight.grad), tq_m.weight.grad.numpy(), atol=1e-6)
    assert sorted(fq_m.state_dict()) == sorted(tq_m.state_dict())
    tcv = torch.ao.nn.quantized.EmbeddingBag.from_float(tq_m)
    fcv = nnq.EmbeddingBag.from_float(fq_m)
    np.testing.assert_array_equal(_np(fcv.weight().int_repr()), tcv.weight().int_repr().numpy())
    np.testing.assert_array_equal(_np(fcv.weight().q_per_channel_zero_points()),
                                  tcv.weight().q_per_channel_zero_points().numpy())


@pytest.mark.parity
def test_parity_qat_linear_bn_forward_grad_convert():
    torch = pytest.importorskip("torch")
    import torch.ao.quantization as ttq
    rng = np.random.default_rng(8)

    def build(lib, q):
        m = lib.nn.Sequential(q.QuantStub(), lib.nn.Linear(6, 5), lib.nn.BatchNorm1d(5),
                              q.DeQuantStub())
        return m.train()
    tm, fm = build(torch, ttq), build(fiamma, tq)
    state = {"1.weight": rng.standard_normal((5, 6)), "1.bias": rng.standard_normal(5),
             "2.weight": rng.uniform(0.5, 1.5, 5), "2.bias": rng.standard_normal(5)}
    tm.load_state_dict({k: torch.tensor(v, dtype=torch.float32) for k, v in state.items()},
                       strict=False)
    fm.load_state_dict({k: fiamma.tensor(v.astype(np.float32)) for k, v in state.items()},
                       strict=False)
    tm.qconfig = ttq.get_default_qat_qconfig("x86")
    fm.qconfig = tq.get_default_qat_qconfig("x86")
    ttq.fuse_modules_qat(tm, [["1", "2"]], inplace=True)
    tq.fuse_modules_qat(fm, [["1", "2"]], inplace=True)
    ttq.prepare_qat(tm, inplace=True)
    tq.prepare_qat(fm, inplace=True)
    assert type(fm[1]).__name__ == type(tm[1]).__name__ == "LinearBn1d"
    assert sorted(fm.state_dict()) == sorted(tm.state_dict())
    for step in range(3):
        x = rng.standard_normal((16, 6)).astype(np.float32)
        to, fo = tm(torch.from_numpy(x)), fm(fiamma.tensor(x))
        # the output fake-quantizer's grid: values agree within one step of it
        step_ = float(tm[1].activation_post_process.scale)
        assert np.abs(_np(fo) - to.detach().numpy()).max() <= 1.01 * step_, step
    tm.zero_grad()
    fm.zero_grad()
    (to * to).sum().backward()
    (fo * fo).sum().backward()
    for name in ("weight", "bias"):
        np.testing.assert_allclose(_np(getattr(fm[1], name).grad),
                                   getattr(tm[1], name).grad.numpy(), rtol=1e-3, atol=1e-3)
    tm.eval()
    fm.eval()
    tc, fc = ttq.convert(tm), tq.convert(fm)
    assert type(fc[1]).__name__ == type(tc[1]).__name__ == "Linear"
    np.testing.assert_array_equal(_np(fc[1].weight().int_repr()),
                                  tc[1].weight().int_repr().numpy())
    x = rng.standard_normal((4, 6)).astype(np.float32)
    assert np.abs(_np(fc(fiamma.tensor(x))) - tc(torch.from_numpy(x)).numpy()).max() <= \
        1.01 * float(tc[1].scale)


@pytest.mark.parity
@pytest.mark.parametrize("nd,name,relu", [(1, "Conv1d", False), (1, "ConvReLU1d", True),
                                          (3, "Conv3d", False), (3, "ConvReLU3d", True)])
def test_parity_int8_conv_nd_bit_equal(nd, name, relu):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    spatial = (11,) if nd == 1 else (4, 5, 5)
    xf = rng.standard_normal((2, 4) + spatial).astype(np.float32)
    w = rng.standard_normal((6, 4) + (3,) * nd).astype(np.float32) * 0.3
    b = rng.standard_normal(6).astype(np.float32) * 0.1
    s = (np.abs(w).reshape(6, -1).max(1) / 127).astype(np.float64)
    tmod_ns = torch.ao.nn.intrinsic.quantized if relu else torch.ao.nn.quantized
    fmod_ns = nniq if relu else nnq
    kw = dict(stride=2, padding=1)
    tm, fm = getattr(tmod_ns, name)(4, 6, 3, **kw), getattr(fmod_ns, name)(4, 6, 3, **kw)
    tw = torch.quantize_per_channel(torch.from_numpy(w), torch.from_numpy(s),
                                    torch.zeros(6, dtype=torch.long), 0, torch.qint8)
    fw = fiamma.quantize_per_channel(fiamma.tensor(w), fiamma.tensor(s),
                                     fiamma.zeros(6, dtype=fiamma.int64), 0, fiamma.qint8)
    tm.set_weight_bias(tw, torch.from_numpy(b))
    fm.set_weight_bias(fw, fiamma.tensor(b))
    tm.scale, tm.zero_point = 0.03, 64
    fm.scale, fm.zero_point = 0.03, 64
    # 7-bit activations (x86's reduce_range): fbgemm's int16 pair sums cannot saturate
    tx = torch.quantize_per_tensor(torch.from_numpy(xf), 0.05, 64, torch.quint8)
    tx = torch.quantize_per_tensor(tx.dequantize().clamp(-3.2, 3.15), 0.05, 64, torch.quint8)
    fx = fiamma.quantize_per_tensor(fiamma.tensor(tx.dequantize().numpy()), 0.05, 64,
                                    fiamma.quint8)
    to, fo = tm(tx).int_repr().numpy().astype(np.int64), _np(fm(fx).int_repr()).astype(np.int64)
    assert np.abs(to - fo).max() <= 1 and (to == fo).mean() > 0.99
    assert sorted(fm.state_dict()) == sorted(tm.state_dict())


@pytest.mark.parity
def test_parity_quantized_embedding_checkpoints_load_both_ways(tmp_path):
    torch = pytest.importorskip("torch")
    import torch.ao.quantization as ttq
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.EmbeddingBag(10, 4, mode="sum"))
    tm[0].qconfig = ttq.float_qparams_weight_only_qconfig
    ttq.prepare(tm, inplace=True)
    ttq.convert(tm, inplace=True)
    torch.save(tm.state_dict(), tmp_path / "t.pt")
    fm = nn.Sequential(nnq.EmbeddingBag(10, 4))
    fm.load_state_dict(fiamma.load(tmp_path / "t.pt"))
    idx, off = np.array([1, 2, 9, 0]), np.array([0, 1])
    np.testing.assert_array_equal(_np(fm[0](fiamma.tensor(idx), fiamma.tensor(off))),
                                  tm[0](torch.from_numpy(idx), torch.from_numpy(off)).numpy())
    fiamma.save(fm.state_dict(), tmp_path / "f.pt")
    back = torch.load(tmp_path / "f.pt", weights_only=True)
    assert back["0._packed_params._packed_weight"].qscheme() is \
        torch.per_channel_affine_float_qparams
    assert torch.equal(back["0._packed_params._packed_weight"].dequantize(),
                       tm[0].weight().dequantize())


@pytest.mark.parity
@pytest.mark.parametrize("nd", [1, 3])
def test_parity_qat_conv_bn_nd_to_int8(nd):
    torch = pytest.importorskip("torch")
    import torch.ao.quantization as ttq
    rng = np.random.default_rng(10 + nd)

    def build(lib, q):
        n = lib.nn
        conv, bn = getattr(n, f"Conv{nd}d"), getattr(n, f"BatchNorm{nd}d")
        return n.Sequential(q.QuantStub(), conv(3, 4, 3, padding=1), bn(4), n.ReLU(),
                            conv(4, 2, 1), bn(2), q.DeQuantStub()).train()
    tm, fm = build(torch, ttq), build(fiamma, tq)
    fm.load_state_dict({k: fiamma.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    tm.qconfig = ttq.get_default_qat_qconfig("x86")
    fm.qconfig = tq.get_default_qat_qconfig("x86")
    groups = [["1", "2", "3"], ["4", "5"]]
    ttq.fuse_modules_qat(tm, groups, inplace=True)
    tq.fuse_modules_qat(fm, groups, inplace=True)
    ttq.prepare_qat(tm, inplace=True)
    tq.prepare_qat(fm, inplace=True)
    shape = (4, 3, 10) if nd == 1 else (2, 3, 4, 5, 5)
    for _ in range(2):
        x = rng.standard_normal(shape).astype(np.float32)
        tm(torch.from_numpy(x))
        fm(fiamma.tensor(x))
    tm.eval()
    fm.eval()
    tc, fc = ttq.convert(tm), tq.convert(fm)
    assert [type(m).__name__ for m in fc] == [type(m).__name__ for m in tc]
    assert sorted(fc.state_dict()) == sorted(tc.state_dict())
    for i in (1, 4):
        np.testing.assert_array_equal(_np(fc[i].weight().int_repr()),
                                      tc[i].weight().int_repr().numpy())
        assert fc[i].scale == pytest.approx(float(tc[i].scale), rel=1e-5)
    x = rng.standard_normal(shape).astype(np.float32)
    diff = np.abs(_np(fc(fiamma.tensor(x))) - tc(torch.from_numpy(x)).numpy())
    assert diff.max() <= 1.01 * float(tc[4].scale)
