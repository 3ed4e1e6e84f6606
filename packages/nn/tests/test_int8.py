"""Int8 quantization: quantized tensors against float64 NumPy references, observers against
their formulas, the eager prepare/convert flow; parity with PyTorch (marked)."""
import copy
import io
import warnings

import numpy as np
import pytest

import fiamma
import fiamma.ao.quantization as tq
from fiamma import nn

warnings.filterwarnings("ignore", message="Please use quant_min")


def _ref_quant(x, scale, zp, lo, hi):
    return np.clip(np.rint(np.asarray(x, np.float64) / scale) + zp, lo, hi)


def test_quantize_per_tensor_matches_float64_reference():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(10000).astype(np.float32) * 3
    for dtype, zp, lo, hi in ((fiamma.quint8, 100, 0, 255), (fiamma.qint8, -3, -128, 127),
                              (fiamma.qint32, 7, -2 ** 31, 2 ** 31 - 1)):
        q = fiamma.quantize_per_tensor(fiamma.tensor(x), 0.037, zp, dtype)
        got = q.int_repr().numpy().astype(np.int64)
        ref = _ref_quant(x, 0.037, zp, lo, hi)
        assert q.dtype is dtype and q.is_quantized and q.qscheme() is fiamma.per_tensor_affine
        assert q.q_scale() == 0.037 and q.q_zero_point() == zp
        # float32 x * (1/scale) can land on the other side of a .5 tie than float64 x/scale
        assert np.abs(got - ref).max() <= 1 and (got == ref).mean() > 0.999
        deq = q.dequantize().numpy()
        np.testing.assert_allclose(deq, (got - zp) * np.float32(0.037), rtol=1e-6, atol=1e-6)


def test_round_half_to_even_and_clamp():
    q = fiamma.quantize_per_tensor(fiamma.tensor([0.5, 1.5, 2.5, -0.5, 1000.0, -1000.0]), 1.0,
                                   0, fiamma.qint8)
    assert q.int_repr().tolist() == [0, 2, 2, 0, 127, -128]


def test_quantize_per_channel():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((4, 3, 2)).astype(np.float32)
    scales = np.array([0.01, 0.02, 0.05, 0.1])
    zps = np.array([0, 1, -2, 3])
    q = fiamma.quantize_per_channel(fiamma.tensor(w), fiamma.tensor(scales), fiamma.tensor(zps),
                                    0, fiamma.qint8)
    ref = _ref_quant(w, scales[:, None, None], zps[:, None, None], -128, 127)
    got = q.int_repr().numpy()
    assert np.abs(got - ref).max() <= 1 and (got == ref).mean() > 0.99
    assert q.q_per_channel_axis() == 0
    np.testing.assert_array_equal(q.q_per_channel_scales().numpy(), scales)
    np.testing.assert_array_equal(q.q_per_channel_zero_points().numpy(), zps)
    with pytest.raises(RuntimeError, match="per-tensor"):
        q.q_scale()
    with pytest.raises(ValueError, match="expected 4 scales"):
        fiamma.quantize_per_channel(fiamma.tensor(w), fiamma.tensor(scales[:2]),
                                    fiamma.tensor(zps[:2]), 0, fiamma.qint8)


def test_quantize_errors():
    with pytest.raises(TypeError, match="quantized dtype"):
        fiamma.quantize_per_tensor(fiamma.ones(2), 0.1, 0, fiamma.int8)
    with pytest.raises(ValueError, match="zero_point 300"):
        fiamma.quantize_per_tensor(fiamma.ones(2), 0.1, 300, fiamma.quint8)
    with pytest.raises(ValueError, match="scale"):
        fiamma.quantize_per_tensor(fiamma.ones(2), 0.0, 0, fiamma.quint8)


def test_minmax_observer_formula():
    x = np.array([-1.5, 0.2, 3.0], np.float32)
    obs = tq.MinMaxObserver()
    obs(fiamma.tensor(x))
    scale, zp = obs.calculate_qparams()
    ref_scale = np.float32(4.5) / np.float32(255)
    assert float(scale[0]) == pytest.approx(float(ref_scale), rel=1e-7)
    assert int(zp[0]) == int(0 - np.rint(-1.5 / ref_scale))
    sym = tq.MinMaxObserver(dtype=fiamma.qint8, qscheme=fiamma.per_tensor_symmetric)
    sym(fiamma.tensor(x))
    s, z = sym.calculate_qparams()
    assert float(s[0]) == pytest.approx(3.0 / 127.5, rel=1e-6) and int(z[0]) == 0


def test_per_channel_observer_and_reduce_range():
    obs = tq.PerChannelMinMaxObserver(dtype=fiamma.qint8, qscheme=fiamma.per_channel_symmetric)
    obs(fiamma.tensor([[1.0, -2.0], [0.5, 0.25]]))
    s, z = obs.calculate_qparams()
    np.testing.assert_allclose(s.numpy(), [2.0 / 127.5, 0.5 / 127.5], rtol=1e-6)
    assert z.tolist() == [0, 0]
    assert tq.HistogramObserver(reduce_range=True).quant_max == 127


def _small(qconfig):
    m = nn.Sequential(tq.QuantStub(), nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(),
                      nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 4),
                      tq.DeQuantStub()).eval()
    tq.fuse_modules(m, [["1", "2"]], inplace=True)
    m.qconfig = qconfig
    return m


def test_prepare_convert_flow_close_to_float():
    fiamma.manual_seed(0)
    m = _small(tq.get_default_qconfig("x86"))
    x = fiamma.randn(8, 3, 12, 12)
    ref = m(x)
    tq.prepare(m, inplace=True)
    assert isinstance(m[1].activation_post_process, tq.HistogramObserver)
    m(x)
    tq.convert(m, inplace=True)
    assert type(m[1]).__name__ == "ConvReLU2d" and type(m[0]).__name__ == "Quantize"
    out = m(x)
    assert not hasattr(m[1], "qconfig")
    err = (out - ref).abs().max().item()
    assert err < 8 * m[6].scale  # a few output quanta
    # state dict round trip into a fresh converted model
    sd = m.state_dict()
    fresh = _small(tq.get_default_qconfig("x86"))
    tq.prepare(fresh, inplace=True)
    fresh(fiamma.randn(2, 3, 12, 12))
    tq.convert(fresh, inplace=True)
    fresh.load_state_dict(sd)
    assert fiamma.equal(fresh(x), out)


def test_convert_refuses_unsupported_module():
    m = nn.Sequential(tq.QuantStub(), nn.LayerNorm(4), tq.DeQuantStub()).eval()
    m.qconfig = tq.default_qconfig
    tq.prepare(m, inplace=True)
    m(fiamma.randn(1, 2, 4))
    with pytest.raises(NotImplementedError, match="LayerNorm"):
        tq.convert(m, inplace=True)


@pytest.mark.parity
def test_observers_match_torch():
    torch = pytest.importorskip("torch")
    import torch.ao.quantization as ttq
    rng = np.random.default_rng(3)
    batches = [rng.standard_normal((4, 8, 5, 5)).astype(np.float32) * s for s in (1, 2, 0.5)]
    batches[1] += 1.0
    cases = [("MinMaxObserver", {}), ("MovingAverageMinMaxObserver", {}),
             ("HistogramObserver", {"reduce_range": True}), ("HistogramObserver", {}),
             ("PerChannelMinMaxObserver", {"ch_axis": 1})]
    for name, kw in cases:
        t_obs, f_obs = getattr(ttq, name)(**kw), getattr(tq, name)(**kw)
        for b in batches:
            t_obs(torch.from_numpy(b))
            f_obs(fiamma.tensor(b))
        ts, tz = t_obs.calculate_qparams()
        fs, fz = f_obs.calculate_qparams()
        np.testing.assert_allclose(fs.numpy(), ts.numpy(), rtol=1e-6, err_msg=name)
        np.testing.assert_array_equal(fz.numpy(), tz.numpy(), err_msg=name)


@pytest.mark.parity
@pytest.mark.parametrize("backend", ["x86", "qnnpack"])
def test_small_cnn_flow_matches_torch(backend):
    torch = pytest.importorskip("torch")
    import torch.ao.quantization as ttq
    torch.manual_seed(0)
    tmod = torch.nn.Sequential(ttq.QuantStub(), torch.nn.Conv2d(3, 6, 3, padding=1),
                               torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                               torch.nn.Linear(6, 4), ttq.DeQuantStub()).eval()
    ttq.fuse_modules(tmod, [["1", "2"]], inplace=True)
    fmod = _small(tq.get_default_qconfig(backend))
    fmod.load_state_dict({k: fiamma.tensor(v.numpy()) for k, v in tmod.state_dict().items()})
    tmod.qconfig = ttq.get_default_qconfig(backend)
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = backend
    try:
        x = torch.randn(8, 3, 12, 12)
        ttq.prepare(tmod, inplace=True)
        tq.prepare(fmod, inplace=True)
        tmod(x)
        fmod(fiamma.tensor(x.numpy()))
        ttq.convert(tmod, inplace=True)
        tq.convert(fmod, inplace=True)
        for i in (1, 6):
            assert fmod[i].scale == pytest.approx(float(tmod[i].scale), rel=1e-6)
            assert fmod[i].zero_point == int(tmod[i].zero_point)
        assert float(fmod[0].scale[0]) == pytest.approx(float(tmod[0].scale[0]), rel=1e-6)
        to = tmod(x).numpy()
        fo = fmod(fiamma.tensor(x.numpy())).numpy()
        assert np.abs(to - fo).max() <= 1.01 * float(tmod[6].scale)
        # a torch-saved int8 state dict loads into fiamma's converted model
        buf = io.BytesIO()
        torch.save(tmod.state_dict(), buf)
        buf.seek(0)
        f2 = copy.deepcopy(fmod)
        f2.load_state_dict(fiamma.load(buf))
        np.testing.assert_allclose(f2(fiamma.tensor(x.numpy())).numpy(), to, atol=1e-6)
    finally:
        torch.backends.quantized.engine = old


def _converted():
    fiamma.manual_seed(1)
    m = _small(tq.get_default_qconfig("x86"))
    tq.prepare(m, inplace=True)
    m(fiamma.randn(4, 3, 12, 12))
    return tq.convert(m, inplace=True)


def test_save_load_quantized_state_dict(tmp_path):
    m = _converted()
    sd = m.state_dict()
    fiamma.save(sd, tmp_path / "q.pt")
    back = fiamma.load(tmp_path / "q.pt")
    assert back["1.weight"].equal(sd["1.weight"])
    assert back["1.weight"].qscheme() is fiamma.per_channel_affine
    w, b = back["6._packed_params._packed_params"]
    assert w.equal(sd["6._packed_params._packed_params"][0]) and back["6._packed_params.dtype"] \
        is fiamma.qint8
    q = fiamma.quantize_per_tensor(fiamma.randn(3, 4), 0.05, 3, fiamma.quint8)
    fiamma.save({"q": q}, tmp_path / "t.pt")
    assert fiamma.load(tmp_path / "t.pt")["q"].equal(q)
    fresh = _converted()
    fresh.load_state_dict(back)
    x = fiamma.randn(2, 3, 12, 12)
    assert fiamma.equal(fresh(x), m(x))


@pytest.mark.parity
def test_torch_loads_fiamma_saved_quantized_tensors(tmp_path):
    torch = pytest.importorskip("torch")
    m = _converted()
    fiamma.save(m.state_dict(), tmp_path / "q.pt")
    tsd = torch.load(tmp_path / "q.pt")
    w = tsd["1.weight"]
    assert w.dtype == torch.qint8 and w.qscheme() == torch.per_channel_affine
    np.testing.assert_array_equal(w.int_repr().numpy(), m[1].weight().int_repr().numpy())
    np.testing.assert_array_equal(w.q_per_channel_scales().numpy(),
                                  m[1].weight().q_per_channel_scales().numpy())
    assert float(tsd["1.scale"]) == pytest.approx(m[1].scale)


def test_fake_quantize_rounds_to_the_grid_with_straight_through_gradient():
    fq = tq.FakeQuantize(observer=tq.MovingAverageMinMaxObserver, quant_min=0, quant_max=255)
    x = fiamma.tensor([-1.0, -0.3, 0.0, 0.77, 2.0], requires_grad=True)
    y = fq(x)
    scale, zp = float(fq.scale[0]), int(fq.zero_point[0])
    ref = (np.clip(np.rint(x.detach().numpy() / scale) + zp, 0, 255) - zp) * scale
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-6, atol=1e-7)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(5, np.float32))
    fq.apply(tq.disable_fake_quant)
    assert fiamma.equal(fq(x.detach()), x.detach())
