"""fiamma.vision.models.quantization: the float quantizable models (torchvision's
models.quantization with quantize=False), fuse_model, the int8 refusals, and (marked
``parity``) the same keys, parameter counts and outputs as torchvision's quantizable models."""

import numpy as np
import pytest
from _tv_import import tv_import

import fiamma
import fiamma.ao.nn.intrinsic as nni
from fiamma import nn
from fiamma.vision import models as M
from fiamma.vision.models import quantization as Q

# builder -> (input size, kwargs) small enough for CI
SMALL = {
    "resnet18": (32, {}),
    "resnet50": (32, {}),
    "mobilenet_v2": (32, {}),
    "mobilenet_v3_large": (32, {}),
    "shufflenet_v2_x0_5": (32, {}),
    "shufflenet_v2_x1_0": (32, {}),
    "googlenet": (32, {"init_weights": True, "aux_logits": False}),
    "inception_v3": (75, {"init_weights": False}),
}
ENUMS = {
    "resnet18": "ResNet18_QuantizedWeights", "resnet50": "ResNet50_QuantizedWeights",
    "resnext101_32x8d": "ResNeXt101_32X8D_QuantizedWeights",
    "resnext101_64x4d": "ResNeXt101_64X4D_QuantizedWeights",
    "mobilenet_v2": "MobileNet_V2_QuantizedWeights",
    "mobilenet_v3_large": "MobileNet_V3_Large_QuantizedWeights",
    "shufflenet_v2_x0_5": "ShuffleNet_V2_X0_5_QuantizedWeights",
    "shufflenet_v2_x1_0": "ShuffleNet_V2_X1_0_QuantizedWeights",
    "shufflenet_v2_x1_5": "ShuffleNet_V2_X1_5_QuantizedWeights",
    "shufflenet_v2_x2_0": "ShuffleNet_V2_X2_0_QuantizedWeights",
    "googlenet": "GoogLeNet_QuantizedWeights", "inception_v3": "Inception_V3_QuantizedWeights",
}


def _nparams(m):
    return sum(p.numel() for p in m.parameters())


def _randomise_bn(model, rng):
    for mod in model.modules():
        if isinstance(mod, nn.BatchNorm2d):
            n = mod.num_features
            mod.running_mean.copy_(fiamma.tensor(rng.normal(0, 0.1, n).astype(np.float32)))
            mod.running_var.copy_(fiamma.tensor(rng.uniform(0.5, 1.5, n).astype(np.float32)))
            with fiamma.no_grad():
                mod.weight.copy_(fiamma.tensor(rng.uniform(0.5, 1.5, n).astype(np.float32)))
                mod.bias.copy_(fiamma.tensor(rng.normal(0, 0.1, n).astype(np.float32)))


@pytest.mark.parametrize("name", sorted(SMALL))
def test_params_match_meta_and_fuse_model_keeps_outputs(name):
    size, kw = SMALL[name]
    m = getattr(Q, name)(**kw)
    enum = getattr(Q, ENUMS[name])
    assert _nparams(m) == enum.DEFAULT.meta["num_params"]
    assert isinstance(m.quant, fiamma.ao.quantization.QuantStub)
    assert not any(type(c) is nn.ReLU6 or (type(c) is nn.ReLU and c.inplace)
                   for c in m.modules())
    _randomise_bn(m, np.random.default_rng(0))
    m.eval()
    x = fiamma.randn(2, 3, size, size)
    with fiamma.no_grad():
        before = m(x).numpy()
        m.fuse_model()
        after = m(x).numpy()
    assert not any(isinstance(c, nn.BatchNorm2d) for c in m.modules())
    scale = max(1.0, np.abs(before).max())
    np.testing.assert_allclose(after / scale, before / scale, rtol=1e-4, atol=1e-5)


def test_fuse_model_in_training_mode_is_qat_fusion():
    m = Q.resnet18()
    m.fuse_model()  # training mode: QAT fusion keeps the batch norms inside the fused modules
    assert type(m.conv1) is nni.ConvBnReLU2d and type(m.bn1) is nn.Identity
    assert type(m.layer1[0].conv2) is nni.ConvBn2d
    assert type(m.layer2[0].downsample[0]) is nni.ConvBn2d
    e = Q.resnet18().eval()
    e.fuse_model()
    assert type(e.conv1) is nni.ConvReLU2d and type(e.layer1[0].conv2) is nn.Conv2d
    q = Q.resnet18().eval()
    q.fuse_model(is_qat=True)
    assert type(q.conv1) is nni.ConvBnReLU2d


def test_quantize_true_builds_int8_models_and_refuses_mismatches_clearly():
    m = Q.resnet18(quantize=True, num_classes=10)
    assert type(m.conv1).__name__ == "ConvReLU2d" and type(m.quant).__name__ == "Quantize"
    out = m(fiamma.rand(1, 3, 64, 64))
    assert out.shape == (1, 10) and out.dtype == fiamma.float32
    with pytest.raises(ValueError, match="quantize=True"):
        Q.mobilenet_v2(weights=Q.MobileNet_V2_QuantizedWeights.IMAGENET1K_QNNPACK_V1)
    with pytest.raises(ValueError, match="int8 weights"):
        Q.shufflenet_v2_x1_0(weights="ShuffleNet_V2_X1_0_QuantizedWeights.IMAGENET1K_FBGEMM_V1")
    with pytest.raises(ValueError, match="quantize=True"):
        Q.mobilenet_v3_large(weights="MobileNet_V3_Large_QuantizedWeights.IMAGENET1K_QNNPACK_V1")
    with pytest.raises(FileNotFoundError):
        Q.mobilenet_v3_large(weights="/nonexistent/mobilenet_v3_qat.pth", quantize=True)
    with pytest.raises(ValueError, match="groups"):
        Q.resnext101_32x8d(groups=4)


def test_mobilenet_v3_quantize_true_is_the_converted_qat_model(tmp_path):
    import fiamma.ao.quantization as tq
    m = Q.mobilenet_v3_large(quantize=True, num_classes=10)
    assert not m.training and type(m.quant).__name__ == "Quantize"
    assert type(m.features[0][0]).__name__ == "Conv2d" and m.features[0][0].weight().dtype == \
        fiamma.qint8
    assert type(m.features[4].block[2].fc1).__name__ == "ConvReLU2d"
    assert m(fiamma.rand(1, 3, 64, 64)).shape == (1, 10)
    # a QAT checkpoint (the state of the prepared model) loads by path or as a state dict
    qat = Q.mobilenet_v3_large(num_classes=10).train()
    qat.fuse_model(is_qat=True)
    qat.qconfig = tq.get_default_qat_qconfig("qnnpack")
    tq.prepare_qat(qat, inplace=True)
    qat(fiamma.rand(2, 3, 64, 64))
    fiamma.save(qat.state_dict(), tmp_path / "qat.pth")
    a = Q.mobilenet_v3_large(weights=str(tmp_path / "qat.pth"), quantize=True, num_classes=10)
    b = Q.mobilenet_v3_large(weights=qat.state_dict(), quantize=True, num_classes=10)
    ref = tq.convert(qat.eval())
    x = fiamma.rand(1, 3, 64, 64)
    assert fiamma.equal(a(x), ref(x)) and fiamma.equal(b(x), ref(x))
    with pytest.raises(ValueError, match="num_classes"):
        Q.mobilenet_v3_large(weights=Q.MobileNet_V3_Large_QuantizedWeights.DEFAULT,
                             quantize=True, num_classes=10)


def test_weights_enums_as_torchvision():
    w = Q.ResNet50_QuantizedWeights
    assert list(w.__members__) == ["IMAGENET1K_FBGEMM_V1", "IMAGENET1K_FBGEMM_V2", "DEFAULT"]
    assert w.DEFAULT is w.IMAGENET1K_FBGEMM_V2
    assert w.DEFAULT.url == "https://download.pytorch.org/models/quantized/resnet50_fbgemm-23753f79.pth"
    assert w.DEFAULT.meta["unquantized"] is M.ResNet50_Weights.IMAGENET1K_V2
    assert w.DEFAULT.meta["backend"] == "fbgemm" and len(w.DEFAULT.meta["categories"]) == 1000
    assert Q.MobileNet_V3_Large_QuantizedWeights.DEFAULT.meta["backend"] == "qnnpack"
    t = Q.Inception_V3_QuantizedWeights.DEFAULT.transforms()
    assert t.crop_size == [299] and t.resize_size == [342]
    assert M.get_model_weights("quantized_resnet18") is Q.ResNet18_QuantizedWeights
    assert type(M.get_model("quantized_shufflenet_v2_x0_5")) is Q.QuantizableShuffleNetV2


def test_float_weights_load_by_key_from_a_checkpoint(tmp_path):
    fiamma.manual_seed(0)
    ref = M.resnet18(num_classes=10)
    _randomise_bn(ref, np.random.default_rng(1))
    path = tmp_path / "resnet18.pth"
    fiamma.save(ref.state_dict(), path)
    m = Q.resnet18(weights=str(path), num_classes=10).eval()
    x = fiamma.randn(1, 3, 32, 32)
    with fiamma.no_grad():
        want = ref.eval()(x).numpy()
        np.testing.assert_allclose(m(x).numpy(), want, rtol=1e-5, atol=1e-5)
        m.fuse_model()
        np.testing.assert_allclose(m(x).numpy(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnext101_32x8d", "resnext101_64x4d", "shufflenet_v2_x1_5",
                                  "shufflenet_v2_x2_0"])
def test_large_builders_param_counts(name):
    m = getattr(Q, name)()
    assert _nparams(m) == getattr(Q, ENUMS[name]).DEFAULT.meta["num_params"]


# ---------------------------------------------------------------------------- parity

def _torchvision_quantization():
    torch = pytest.importorskip("torch")
    TQ = tv_import("torchvision.models.quantization")
    if TQ is None:
        pytest.skip("torchvision is not installed (or cannot be imported)")
    return torch, TQ

@pytest.mark.parity
@pytest.mark.parametrize("name", sorted(SMALL))
def test_parity_keys_params_outputs_and_fusion(name):
    torch, TQ = _torchvision_quantization()
    size, kw = SMALL[name]
    kw = dict(kw, num_classes=7)
    torch.manual_seed(0)
    t = getattr(TQ, name)(quantize=False, **kw)
    with torch.no_grad():
        for mod in t.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.normal_(0, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.normal_(0, 0.1)
            elif isinstance(mod, torch.nn.Linear):
                mod.weight.normal_(0, 0.05)
    m = getattr(Q, name)(quantize=False, **kw)
    assert type(m).__name__ == type(t).__name__
    ts = t.state_dict()
    assert list(ts) == list(m.state_dict())
    assert _nparams(m) == sum(p.numel() for p in t.parameters())
    m.load_state_dict({k: fiamma.from_numpy(v.numpy().copy()) for k, v in ts.items()})
    x = np.random.default_rng(1).standard_normal((2, 3, size, size)).astype(np.float32)
    t.eval()
    m.eval()
    for fused in (False, True):
        if fused:
            t.fuse_model()
            m.fuse_model()
            assert ([type(c).__name__ for c in t.modules()]
                    == [type(c).__name__ for c in m.modules()])
            ts = t.state_dict()
            assert list(ts) == list(m.state_dict())
            for k, v in ts.items():
                np.testing.assert_allclose(m.state_dict()[k].numpy(), v.numpy(), rtol=1e-5,
                                           atol=1e-6, err_msg=k)
        with torch.no_grad():
            ref = t(torch.from_numpy(x)).numpy()
        with fiamma.no_grad():
            out = m(fiamma.from_numpy(x)).numpy()
        scale = max(1.0, np.abs(ref).max())
        np.testing.assert_allclose(out / scale, ref / scale, rtol=1e-4, atol=1e-5)


@pytest.mark.parity
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_large", "shufflenet_v2_x0_5"])
def test_parity_qat_fusion_keys(name):
    torch, TQ = _torchvision_quantization()
    t = getattr(TQ, name)(quantize=False)
    m = getattr(Q, name)(quantize=False)
    t.fuse_model(is_qat=True)
    m.fuse_model(is_qat=True)
    assert list(t.state_dict()) == list(m.state_dict())
    assert [type(c).__name__ for c in t.modules()] == [type(c).__name__ for c in m.modules()]


@pytest.mark.parity
def test_parity_googlenet_training_outputs():
    torch, TQ = _torchvision_quantization()
    kw = {"num_classes": 5, "init_weights": True, "aux_logits": True, "dropout": 0.0,
          "dropout_aux": 0.0}
    torch.manual_seed(0)
    t = TQ.googlenet(**kw)
    m = Q.googlenet(**kw)
    m.load_state_dict({k: fiamma.from_numpy(v.numpy().copy()) for k, v in t.state_dict().items()})
    x = np.random.default_rng(2).standard_normal((2, 3, 64, 64)).astype(np.float32)
    ref = t(torch.from_numpy(x))
    out = m(fiamma.from_numpy(x))
    assert type(out).__name__ == type(ref).__name__ == "GoogLeNetOutputs"
    for a, b in zip(out, ref):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-3, atol=1e-4)
