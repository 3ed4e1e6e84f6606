"""fiamma.ao.quantization: stubs, FloatFunctional, conv/linear + batch-norm fusion."""
import numpy as np
import pytest

import fiamma
import fiamma.ao.nn.intrinsic as nni
import fiamma.ao.quantization as tq
from fiamma import nn
from fiamma.ao.nn.quantized import FloatFunctional


def _bn_stats(bn, rng):
    n = bn.num_features
    bn.running_mean.copy_(fiamma.tensor(rng.standard_normal(n).astype(np.float32)))
    bn.running_var.copy_(fiamma.tensor(rng.uniform(0.5, 2.0, n).astype(np.float32)))
    with fiamma.no_grad():
        bn.weight.copy_(fiamma.tensor(rng.uniform(0.5, 1.5, n).astype(np.float32)))
        bn.bias.copy_(fiamma.tensor(rng.standard_normal(n).astype(np.float32)))
    return bn


def _bn_ref(y, bn, axis=1):
    shape = [1] * y.ndim
    shape[axis] = -1
    m, v = (bn.running_mean.numpy().astype(np.float64).reshape(shape),
            bn.running_var.numpy().astype(np.float64).reshape(shape))
    g, b = (bn.weight.detach().numpy().astype(np.float64).reshape(shape),
            bn.bias.detach().numpy().astype(np.float64).reshape(shape))
    return (y - m) / np.sqrt(v + bn.eps) * g + b


@pytest.mark.parametrize("bias", [True, False])
def test_fuse_conv_bn_eval_matches_float64(bias):
    rng = np.random.default_rng(0)
    conv = nn.Conv2d(3, 5, 3, padding=1, bias=bias).eval()
    bn = _bn_stats(nn.BatchNorm2d(5), rng).eval()
    fused = nn.utils.fuse_conv_bn_eval(conv, bn)
    assert isinstance(fused, nn.Conv2d) and fused.bias is not None
    assert fused.bias.requires_grad is bias and fused.weight.requires_grad
    x = fiamma.tensor(rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
    ref = _bn_ref(conv(x).detach().numpy().astype(np.float64), bn)
    np.testing.assert_allclose(fused(x).detach().numpy(), ref, rtol=1e-5, atol=1e-5)
    assert conv.weight is not fused.weight  # the original conv is untouched


def test_fuse_convtranspose_and_linear_bn_eval():
    rng = np.random.default_rng(1)
    ct = nn.ConvTranspose2d(3, 4, 3, stride=2).eval()
    bn = _bn_stats(nn.BatchNorm2d(4), rng).eval()
    x = fiamma.tensor(rng.standard_normal((1, 3, 5, 5)).astype(np.float32))
    f = tq.fuse_convtranspose_bn(False, ct, bn)
    ref = _bn_ref(ct(x).detach().numpy().astype(np.float64), bn)
    np.testing.assert_allclose(f(x).detach().numpy(), ref, rtol=1e-5, atol=1e-5)
    lin = nn.Linear(6, 4).eval()
    bn1 = _bn_stats(nn.BatchNorm1d(4), rng).eval()
    x = fiamma.tensor(rng.standard_normal((3, 6)).astype(np.float32))
    f = nn.utils.fuse_linear_bn_eval(lin, bn1)
    ref = _bn_ref(lin(x).detach().numpy().astype(np.float64), bn1)
    np.testing.assert_allclose(f(x).detach().numpy(), ref, rtol=1e-5, atol=1e-5)


def test_fusion_errors():
    conv, bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)
    with pytest.raises(RuntimeError, match="eval"):
        nn.utils.fuse_conv_bn_eval(conv, bn)
    with pytest.raises(ValueError, match="statistics"):
        nn.utils.fuse_conv_bn_eval(nn.Conv2d(3, 4, 3).eval(), nn.BatchNorm2d(5).eval())
    with pytest.raises(ValueError, match="track_running_stats"):
        nn.utils.fuse_conv_bn_eval(conv.eval(), nn.BatchNorm2d(4, track_running_stats=False).eval())
    with pytest.raises(ValueError, match="same mode"):
        tq.fuse_conv_bn(False, nn.Conv2d(3, 4, 3).eval(), nn.BatchNorm2d(4))
    m = nn.Sequential(nn.Linear(3, 3), nn.Sigmoid())
    with pytest.raises(ValueError, match=r"cannot fuse modules \(Linear, Sigmoid\)"):
        tq.fuse_modules(m, ["0", "1"])
    with pytest.raises(AttributeError, match="no submodule 'nope'"):
        tq.fuse_modules(m, ["0", "nope"])
    with pytest.raises(TypeError, match="modules_to_fuse"):
        tq.fuse_modules(m, "0")
    with pytest.raises(NotImplementedError, match="QAT"):
        tq.fuse_modules_qat(nn.Sequential(nn.ConvTranspose2d(2, 2, 2), nn.BatchNorm2d(2)),
                            ["0", "1"])
    with pytest.raises(TypeError, match="expected modules"):
        nni.ConvReLU2d(nn.Conv1d(1, 1, 1), nn.ReLU())


def test_fuse_modules_eval_replaces_with_identity_and_keeps_function():
    rng = np.random.default_rng(2)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 4, 1),
                      nn.BatchNorm2d(4), nn.Conv2d(4, 4, 1), nn.ReLU(), nn.Flatten(),
                      nn.Linear(64, 8), nn.ReLU())
    _bn_stats(m[1], rng), _bn_stats(m[4], rng)
    m.eval()
    calls = []
    m[0].register_forward_pre_hook(lambda mod, inp: calls.append("pre"))
    m[2].register_forward_hook(lambda mod, inp, out: calls.append("post"))
    f = tq.fuse_modules(m, [["0", "1", "2"], ["3", "4"], ["5", "6"], ["8", "9"]])
    assert [type(c).__name__ for c in f] == [
        "ConvReLU2d", "Identity", "Identity", "Conv2d", "Identity", "ConvReLU2d", "Identity",
        "Flatten", "LinearReLU", "Identity"]
    assert type(m[0]) is nn.Conv2d  # not in place: the original is unchanged
    assert sorted(f.state_dict()) == ["0.0.bias", "0.0.weight", "3.bias", "3.weight",
                                      "5.0.bias", "5.0.weight", "8.0.bias", "8.0.weight"]
    x = fiamma.tensor(rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
    want = m(x).detach().numpy()
    calls.clear()
    np.testing.assert_allclose(f(x).detach().numpy(), want, rtol=1e-5, atol=1e-5)
    assert calls == ["pre", "post"]
    g = tq.fuse_modules(m, ["0", "1", "2"], inplace=True)
    assert g is m and type(m[0]) is nni.ConvReLU2d and not m[1].training


def test_fuse_modules_qat_keeps_batchnorm_modules():
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv1d(2, 2, 1))
    f = tq.fuse_modules_qat(m, ["0", "1", "2"])
    assert type(f[0]) is nni.ConvBnReLU2d and type(f[1]) is nn.Identity and f[1].training
    assert sorted(k for k in f.state_dict() if k.startswith("0.")) == [
        "0.0.bias", "0.0.weight", "0.1.bias", "0.1.num_batches_tracked", "0.1.running_mean",
        "0.1.running_var", "0.1.weight"]
    x = fiamma.randn(2, 3, 5, 5)
    np.testing.assert_allclose(f[0](x).detach().numpy(), m[2](m[1](m[0](x))).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    f2 = tq.fuse_modules_qat(nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)), ["0", "1"])
    assert type(f2[0]) is nni.LinearBn1d
    with pytest.raises(ValueError, match="affine"):
        tq.fuse_modules_qat(nn.Sequential(nn.Conv2d(1, 2, 1), nn.BatchNorm2d(2, affine=False)),
                            ["0", "1"])


def test_fuse_parametrized_module():
    from fiamma.nn.utils import parametrize

    class Double(nn.Module):
        def forward(self, w):
            return w * 2.0

    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU()).eval()
    parametrize.register_parametrization(m[0], "weight", Double())
    f = tq.fuse_modules(m, ["0", "1"])
    assert type(f[0]) is nni.LinearReLU
    x = fiamma.randn(2, 3)
    np.testing.assert_allclose(f(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-6)


def test_custom_fuser_mapping():
    def fuse_lin_sig(is_qat, lin, sig):
        return nn.Sequential(lin, sig)
    m = nn.Sequential(nn.Linear(3, 3), nn.Sigmoid())
    f = tq.fuse_modules(m, ["0", "1"], fuse_custom_config_dict={
        "additional_fuser_method_mapping": {(nn.Linear, nn.Sigmoid): fuse_lin_sig}})
    assert type(f[0]) is nn.Sequential and type(f[1]) is nn.Identity


def test_stubs_and_float_functional():
    x, y = fiamma.tensor([1.0, -2.0, 3.0]), fiamma.tensor([0.5, 0.5, -4.0])
    assert tq.QuantStub()(x) is x and tq.DeQuantStub()(x) is x
    assert tq.QuantStub(qconfig="q").qconfig == "q" and not hasattr(tq.QuantStub(), "qconfig")
    w = tq.QuantWrapper(nn.ReLU())
    assert list(dict(w.named_children())) == ["quant", "dequant", "module"]
    np.testing.assert_array_equal(w(x).numpy(), [1.0, 0.0, 3.0])
    f = FloatFunctional()
    assert f.state_dict() == {} or len(f.state_dict()) == 0
    np.testing.assert_array_equal(f.add(x, y).numpy(), [1.5, -1.5, -1.0])
    np.testing.assert_array_equal(f.add_relu(x, y).numpy(), [1.5, 0.0, 0.0])
    np.testing.assert_array_equal(f.mul(x, y).numpy(), [0.5, -1.0, -12.0])
    np.testing.assert_array_equal(f.add_scalar(x, 1.0).numpy(), [2.0, -1.0, 4.0])
    np.testing.assert_array_equal(f.mul_scalar(x, 2.0).numpy(), [2.0, -4.0, 6.0])
    np.testing.assert_array_equal(f.cat([x, y]).numpy(), [1.0, -2.0, 3.0, 0.5, 0.5, -4.0])
    assert float(f.matmul(x, y)) == pytest.approx(-12.5)
    with pytest.raises(RuntimeError, match="not intended"):
        f(x)
    assert nn.quantized.FloatFunctional is FloatFunctional
    import importlib
    assert importlib.import_module("fiamma.quantization") is tq and fiamma.ao.quantization is tq


def test_missing_quantization_names_fail_by_name():
    with pytest.raises(AttributeError, match="FX graph mode"):
        tq.prepare_fx  # noqa: B018
    with pytest.raises(AttributeError, match="not built yet"):
        nn.quantized.LayerNorm  # noqa: B018
    assert callable(tq.prepare) and nn.quantized.Conv2d.__name__ == "Conv2d"


@pytest.mark.parity
def test_parity_fuse_modules_with_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)

    def build(lib):
        n = lib.nn
        return n.Sequential(n.Conv2d(3, 4, 3), n.BatchNorm2d(4), n.ReLU(), n.Conv2d(4, 4, 1),
                            n.BatchNorm2d(4), n.Flatten(), n.Linear(64, 5), n.ReLU())
    t = build(torch)
    sd = {k: v.detach().numpy().copy() for k, v in t.state_dict().items()}
    for k in sd:
        if k.endswith(("running_var",)):
            sd[k] = rng.uniform(0.5, 2.0, sd[k].shape).astype(np.float32)
        elif k.endswith(("running_mean", "bias")) or ("1." in k and k.endswith("weight")):
            sd[k] = rng.standard_normal(sd[k].shape).astype(np.float32)
    t.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()})
    f = build(fiamma)
    f.load_state_dict({k: fiamma.tensor(v) for k, v in sd.items()})
    groups = [["0", "1", "2"], ["3", "4"], ["6", "7"]]
    tf = torch.ao.quantization.fuse_modules(t.eval(), groups)
    ff = tq.fuse_modules(f.eval(), groups)
    assert [type(c).__name__ for c in tf] == [type(c).__name__ for c in ff]
    tsd, fsd = tf.state_dict(), ff.state_dict()
    assert list(tsd) == list(fsd)
    for k in tsd:
        np.testing.assert_allclose(fsd[k].numpy(), tsd[k].numpy(), rtol=1e-5, atol=1e-6)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(ff(fiamma.tensor(x)).detach().numpy(),
                               tf(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    tq_ = torch.ao.quantization.fuse_modules_qat(build(torch).train(), groups[:2])
    fq = tq.fuse_modules_qat(build(fiamma).train(), groups[:2])
    assert list(tq_.state_dict()) == list(fq.state_dict())


def _q(x, scale=0.05, zp=128):
    return fiamma.quantize_per_tensor(fiamma.tensor(x), scale, zp, fiamma.quint8)


def test_activations_on_quantized_tensors():
    """F.relu6 / leaky_relu / hardtanh / threshold keep the input's qparams (values
    requantized); the activations PyTorch has no quantized kernel for raise by name."""
    from fiamma.nn import functional as F

    x = np.array([-7.0, -2.4, -0.5, -0.04, 0.0, 0.3, 1.2, 5.9, 6.4], np.float32)
    q = _q(x)
    dq = q.dequantize().numpy()
    cases = {
        "relu6": (F.relu6(q), np.clip(dq, 0, 6)),
        "leaky_relu": (F.leaky_relu(q, 0.1), np.where(dq > 0, dq, dq * np.float32(0.1))),
        "hardtanh": (F.hardtanh(q, -2.0, 0.5), np.clip(dq, -2.0, 0.5)),
        "threshold": (F.threshold(q, 0.1, -1.0), np.where(dq <= 0.1, -1.0, dq)),
    }
    for name, (got, want) in cases.items():
        assert got.q_scale() == 0.05 and got.q_zero_point() == 128, name
        want_q = np.clip(np.rint(want.astype(np.float32) * np.float32(20.0)) + 128, 0, 255)
        np.testing.assert_array_equal(got.int_repr().numpy(), want_q.astype(np.uint8),
                                      err_msg=name)
    assert nn.LeakyReLU(0.2)(q).q_scale() == 0.05
    for name in ("silu", "elu", "selu", "hardswish", "softplus", "mish", "logsigmoid"):
        with pytest.raises(NotImplementedError, match=f"^{name}: not implemented for quantized"):
            getattr(F, name)(q)


@pytest.mark.parity
def test_activations_on_quantized_tensors_equal_pytorch():
    torch = pytest.importorskip("torch")
    from fiamma.nn import functional as F

    x = np.random.default_rng(3).standard_normal(500).astype(np.float32) * 4
    q = _q(x, 0.04, 100)
    tq = torch.quantize_per_tensor(torch.tensor(x), 0.04, 100, torch.quint8)
    TF = torch.nn.functional
    for f, g in [(F.relu6, TF.relu6), (F.hardsigmoid, TF.hardsigmoid),
                 (lambda t: F.leaky_relu(t, 0.15), lambda t: TF.leaky_relu(t, 0.15)),
                 (lambda t: F.hardtanh(t, -1.5, 2.0), lambda t: TF.hardtanh(t, -1.5, 2.0)),
                 (lambda t: F.threshold(t, 0.2, 0.5), lambda t: TF.threshold(t, 0.2, 0.5))]:
        a, b = f(q), g(tq)
        assert (a.q_scale(), a.q_zero_point()) == (b.q_scale(), b.q_zero_point())
        np.testing.assert_array_equal(a.int_repr().numpy(), b.int_repr().numpy())
