"""Quantization-aware training without PyTorch: fake-quant values and gradient masks against
NumPy, the qparams rule on hand cases, the QAT conv-bn forward against a float64 reference,
freeze_bn_stats, prepare_qat/convert and the errors."""
import numpy as np
import pytest

import fiamma
import fiamma.ao.nn.intrinsic as nni
import fiamma.ao.nn.intrinsic.qat as nniqat
import fiamma.ao.nn.qat as nnqat
import fiamma.ao.quantization as tq
from fiamma import nn
from fiamma.ao.quantization import _fq_ops


def _ref_fq(x, s, z, lo, hi):
    q = np.rint(x * (np.float32(1) / np.float32(s))) + z
    return ((np.clip(q, lo, hi) - z) * np.float32(s)).astype(np.float32), (q >= lo) & (q <= hi)


def test_fake_quantize_per_tensor_values_and_masked_gradient():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(200) * 4).astype(np.float32)
    x[:4] = [0.05, 0.15, -0.25, 12.7]  # ties of x / 0.1 round to even
    t = fiamma.tensor(x, requires_grad=True)
    y = _fq_ops.fake_quantize_per_tensor_affine(t, 0.1, 10, 0, 60)
    ref, mask = _ref_fq(x, 0.1, 10, 0, 60)
    np.testing.assert_array_equal(y.detach().numpy(), ref)
    assert 0 < mask.sum() < mask.size  # both clipped and passed values
    g = rng.standard_normal(200).astype(np.float32)
    y.backward(fiamma.tensor(g))
    np.testing.assert_array_equal(t.grad.numpy(), np.where(mask, g, 0))


def test_fake_quantize_per_channel_values_and_masked_gradient():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((4, 3, 5)) * 2).astype(np.float32)
    s = np.array([0.05, 0.2, 0.5], np.float32)
    z = np.array([0, 3, -2], np.int32)
    t = fiamma.tensor(x, requires_grad=True)
    y = _fq_ops.fake_quantize_per_channel_affine(t, fiamma.tensor(s), fiamma.tensor(z), 1,
                                                 -8, 8)
    ref, mask = _ref_fq(x, s[None, :, None], z[None, :, None], -8, 8)
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=0, atol=1e-6)
    y.sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), mask.astype(np.float32))


def test_fake_quantize_errors():
    x = fiamma.randn(2, 3)
    with pytest.raises(RuntimeError, match="floating-point"):
        _fq_ops.fake_quantize_per_tensor_affine(fiamma.ones(3, dtype=fiamma.int64), 0.1, 0, 0,
                                                255)
    with pytest.raises(RuntimeError, match="quant_min"):
        _fq_ops.fake_quantize_per_tensor_affine(x, 0.1, 0, 10, 5)
    with pytest.raises(RuntimeError, match="zero_point"):
        _fq_ops.fake_quantize_per_tensor_affine(x, 0.1, 300, 0, 255)
    with pytest.raises(RuntimeError, match="axis 1"):
        _fq_ops.fake_quantize_per_channel_affine(x, fiamma.ones(2), fiamma.zeros(2), 1, 0, 255)
    with pytest.raises(IndexError, match="axis"):
        _fq_ops.fake_quantize_per_channel_affine(x, fiamma.ones(3), fiamma.zeros(3), 2, 0, 255)


def test_choose_qparams_hand_cases():
    # affine: [-1, 3] over 0..255: scale 4/255, zero point round(255/4) = 64
    s, z = _fq_ops.choose_qparams(-1.0, 3.0, 0, 255, False)
    assert s[0] == np.float32(4 / 255) and z[0] == 64
    # symmetric qint8: max(|-1| / 128, 3 / 127) = 3/127, zero point 0
    s, z = _fq_ops.choose_qparams(-1.0, 3.0, -128, 127, True)
    assert s[0] == np.float32(3 / 127) and z[0] == 0
    # an all-positive range includes 0; an empty one gets scale 0.1
    s, z = _fq_ops.choose_qparams(2.0, 4.0, 0, 255, False)
    assert s[0] == np.float32(4 / 255) and z[0] == 0
    s, z = _fq_ops.choose_qparams(0.0, 0.0, 0, 255, False)
    assert s[0] == np.float32(0.1) and z[0] == 0
    # a tiny range is widened to the smallest scale PyTorch allows
    s, z = _fq_ops.choose_qparams(-1e-6, 1e-6, 0, 255, False)
    assert s[0] == np.float32(6.1e-5)


def test_fused_fake_quant_switches_and_buffers():
    fq = tq.default_fused_act_fake_quant()
    assert fq.fake_quant_enabled.dtype == fiamma.int64 and fq.zero_point.dtype == fiamma.int32
    fq.disable_fake_quant()
    x = fiamma.tensor([0.0, 1.0, 2.0])
    assert fiamma.equal(fq(x), x) and float(fq.scale[0]) == 1.0  # qparams follow fake quant
    assert float(fq.activation_post_process.max_val) == 2.0
    fq.enable_fake_quant()
    fq.disable_observer()
    y = fq(fiamma.tensor([0.0, 1.0, 5.0]))
    assert float(fq.scale[0]) == pytest.approx(2 / 255) and y.tolist()[2] == 2.0
    fixed = tq.default_fixed_qparams_range_neg1to1_fake_quant()
    assert float(fixed.scale[0]) == 2 / 256 and int(fixed.zero_point[0]) == 128
    with pytest.raises(AssertionError, match="MovingAverageMinMaxObserver"):
        tq.FusedMovingAvgObsFakeQuantize(observer=tq.MinMaxObserver)


def _conv2d_f64(x, w, stride=1, pad=0):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out


@pytest.mark.parametrize("bias", [False, True])
def test_conv_bn_qat_forward_matches_float64_reference(bias):
    fiamma.manual_seed(0)
    conv, bn = nn.Conv2d(3, 4, 3, padding=1, bias=bias), nn.BatchNorm2d(4)
    bn.running_mean.copy_(fiamma.tensor([0.1, -0.2, 0.3, 0.0]))
    bn.running_var.copy_(fiamma.tensor([0.5, 2.0, 1.0, 1.5]))
    bn.weight.data.copy_(fiamma.tensor([0.5, 1.5, -1.0, 2.0]))
    fused = nni.ConvBnReLU2d(conv, bn, nn.ReLU())
    fused.qconfig = tq.get_default_qat_qconfig("qnnpack")
    m = nniqat.ConvBnReLU2d.from_float(fused)
    x = np.random.default_rng(2).standard_normal((2, 3, 5, 5)).astype(np.float32)
    y = m(fiamma.tensor(x)).detach().numpy()
    wfq = m.weight_fake_quant
    g = bn.weight.detach().numpy().astype(np.float64)
    rv = np.array([0.5, 2.0, 1.0, 1.5])
    sf = (g / np.sqrt(rv + bn.eps)).astype(np.float32)
    wscaled = conv.weight.detach().numpy() * sf[:, None, None, None]
    wq, _ = _ref_fq(wscaled, float(wfq.scale[0]), int(wfq.zero_point[0]), -128, 127)
    c = _conv2d_f64(x.astype(np.float64), wq.astype(np.float64), pad=1)
    c = c / sf.astype(np.float64)[None, :, None, None]
    if bias:
        c = c + conv.bias.detach().numpy().astype(np.float64)[None, :, None, None]
    mean, var = c.mean(axis=(0, 2, 3)), c.var(axis=(0, 2, 3))
    ref = (c - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + bn.eps)
    ref = np.maximum(ref * g[None, :, None, None], 0)  # beta = 0
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    # the training-mode batch norm updated its running mean with the batch mean
    np.testing.assert_allclose(m.bn.running_mean.numpy(),
                               0.9 * np.array([0.1, -0.2, 0.3, 0.0]) + 0.1 * mean, rtol=1e-4,
                               atol=1e-5)


def test_freeze_bn_stats_keeps_running_statistics():
    m = nniqat.ConvBn2d(3, 4, 3, qconfig=tq.default_qat_qconfig_v2)
    assert m.bn.training and not m.freeze_bn
    m(fiamma.randn(2, 3, 6, 6))
    m.apply(nniqat.freeze_bn_stats)
    assert m.freeze_bn and not m.bn.training
    before = m.bn.running_mean.clone()
    m.train()  # stays frozen
    assert m.training and not m.bn.training
    m(fiamma.randn(2, 3, 6, 6))
    assert fiamma.equal(m.bn.running_mean, before)
    m.apply(nniqat.update_bn_stats)
    m(fiamma.randn(2, 3, 6, 6))
    assert m.bn.training and not fiamma.equal(m.bn.running_mean, before)
    m.reset_running_stats()
    assert float(m.bn.running_mean.abs().sum()) == 0.0
    back = m.to_float()
    assert type(back) is nni.ConvBn2d and type(back[0]) is nn.Conv2d


def test_prepare_qat_swaps_modules_and_convert_gives_int8():
    m = nn.Sequential(tq.QuantStub(), nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                      nn.Conv2d(4, 4, 1), nn.Hardsigmoid(), nn.Flatten(), nn.Linear(64, 5),
                      nn.ReLU(), tq.DeQuantStub()).train()
    tq.fuse_modules_qat(m, [["1", "2", "3"], ["7", "8"]], inplace=True)
    m.qconfig = tq.get_default_qat_qconfig("x86")
    p = tq.prepare_qat(m)
    assert type(p[1]) is nniqat.ConvBnReLU2d and type(p[4]) is nnqat.Conv2d
    assert type(p[7]) is nniqat.LinearReLU
    assert type(p[5].activation_post_process) is tq.FixedQParamsFakeQuantize
    assert p[1].weight_fake_quant.is_per_channel
    x = fiamma.randn(4, 3, 6, 6)
    p(x).sum().backward()
    assert p[1].weight.grad is not None and p[1].bn.weight.grad is not None
    q = tq.convert(p.eval())
    assert [type(c).__name__ for c in q][:5] == ["Quantize", "ConvReLU2d", "Identity",
                                                 "Identity", "Conv2d"]
    assert type(q[7]).__name__ == "LinearReLU"
    out = q(x)
    ref = p(x)
    assert float((out - ref).abs().max()) <= 2 * q[7].scale + 1e-6
    # quantize_qat does the three steps
    r = tq.quantize_qat(m, lambda mod, data: mod(data), [x])
    assert type(r[1]).__name__ == "ConvReLU2d"


def test_qat_errors():
    with pytest.raises(AssertionError, match="qconfig"):
        nnqat.Linear(3, 2)
    with pytest.raises(AssertionError, match="qconfig"):
        nnqat.Conv2d.from_float(nn.Conv2d(3, 2, 1))
    with pytest.raises(AssertionError, match="only works for"):
        c = nn.Conv1d(3, 2, 1)
        c.qconfig = tq.default_qat_qconfig
        nnqat.Conv2d.from_float(c)
    with pytest.raises(AssertionError, match="training mode"):
        tq.prepare_qat(nn.Sequential(nn.Linear(2, 2)).eval())
    with pytest.raises(AssertionError, match="version"):
        tq.get_default_qat_qconfig("qnnpack", version=2)
