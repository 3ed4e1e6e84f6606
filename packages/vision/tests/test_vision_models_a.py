"""fiamma.vision.models (ResNet family, VGG, AlexNet, SqueezeNet, DenseNet): builders, parameter
counts and state_dict keys as torchvision's, the weights API (names, DEFAULT, local files,
download from a local HTTP server with hash checks), the ImageClassification preset, the
classify command line, and (parity) a PyTorch ResNet-18 checkpoint giving the same logits."""
import functools
import hashlib
import http.server
import os
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
from PIL import Image

import fiamma
from fiamma.vision import models as M
from fiamma.vision.models._api import resolve_weights
from fiamma.vision.transforms import functional as F
from fiamma.vision.transforms._presets import ImageClassification

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

OURS = ["alexnet", "densenet121", "densenet161", "densenet169", "densenet201", "resnet18",
        "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d", "resnext101_32x8d",
        "resnext101_64x4d", "wide_resnet50_2", "wide_resnet101_2", "squeezenet1_0",
        "squeezenet1_1", "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19",
        "vgg19_bn"]

# torchvision's documented parameter counts (weights meta "num_params")
NUM_PARAMS = {"resnet18": 11689512, "resnet34": 21797672, "resnet50": 25557032,
              "resnet101": 44549160, "resnet152": 60192808, "resnext50_32x4d": 25028904,
              "resnext101_32x8d": 88791336, "resnext101_64x4d": 83455272,
              "wide_resnet50_2": 68883240, "wide_resnet101_2": 126886696,
              "vgg11": 132863336, "vgg11_bn": 132868840, "vgg13": 133047848,
              "vgg13_bn": 133053736, "vgg16": 138357544, "vgg16_bn": 138365992,
              "vgg19": 143667240, "vgg19_bn": 143678248, "alexnet": 61100840,
              "squeezenet1_0": 1248424, "squeezenet1_1": 1235496, "densenet121": 7978856,
              "densenet161": 28681000, "densenet169": 14149480, "densenet201": 20013928}


def _nparams(model):
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", OURS)
def test_builder_params_and_output_shape(name):
    fiamma.manual_seed(0)
    model = M.get_model(name)
    assert _nparams(model) == NUM_PARAMS[name]
    assert M.get_model_weights(name).DEFAULT.meta["num_params"] == NUM_PARAMS[name]
    model.eval()
    with fiamma.no_grad():
        out = model(fiamma.randn(2, 3, 64, 64))
    assert tuple(out.shape) == (2, 1000)
    assert np.isfinite(out.numpy()).all()


@pytest.mark.parametrize("name", ["resnet18", "squeezenet1_1", "densenet121",
                                  "alexnet"])
def test_num_classes_and_train_mode_backward(name):
    model = M.get_model(name, num_classes=7)
    x = fiamma.randn(2, 3, 64, 64)
    out = model(x)
    assert tuple(out.shape) == (2, 7)
    out.sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_registry_lists_every_model():
    names = M.list_models()
    assert set(OURS) <= set(names)
    assert M.list_models(include="resnet*") == sorted(n for n in names if n.startswith("resnet"))
    assert "vgg16" not in M.list_models(exclude="vgg*")
    assert M.list_models(module=M.resnet) == sorted(
        ["resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d",
         "resnext101_32x8d", "resnext101_64x4d", "wide_resnet50_2", "wide_resnet101_2"])
    assert M.get_model_builder("ResNet18") is M.resnet18
    with pytest.raises(ValueError, match="unknown model"):
        M.get_model("resnet19")


def test_weights_enums_and_default():
    assert M.get_model_weights("resnet50") is M.ResNet50_Weights
    assert M.get_model_weights(M.vgg16) is M.VGG16_Weights
    w = M.get_weight("ResNet50_Weights.IMAGENET1K_V2")
    assert w is M.ResNet50_Weights.IMAGENET1K_V2 is M.ResNet50_Weights.DEFAULT
    assert M.ResNet50_Weights.verify("DEFAULT") is w
    assert resolve_weights(M.ResNet50_Weights, "ResNet50_Weights.DEFAULT") is w
    assert M.ResNet18_Weights.DEFAULT is M.ResNet18_Weights.IMAGENET1K_V1
    assert w.url == "https://download.pytorch.org/models/resnet50-11ad3fa6.pth"
    assert M.ResNet50_Weights.IMAGENET1K_V1.url.endswith("resnet50-0676ba61.pth")
    assert w.meta["_metrics"]["ImageNet-1K"] == {"acc@1": 80.858, "acc@5": 95.434}
    assert M.ResNet50_Weights.IMAGENET1K_V1.meta["_metrics"]["ImageNet-1K"]["acc@1"] == 76.130
    assert len(w.meta["categories"]) == 1000 and w.meta["categories"][0] == "tench"
    assert w.meta["min_size"] == (1, 1)
    assert M.AlexNet_Weights.DEFAULT.meta["min_size"] == (63, 63)
    assert M.VGG16_Weights.IMAGENET1K_FEATURES.meta["categories"] is None
    tf = w.transforms()
    assert isinstance(tf, ImageClassification)
    assert tf.crop_size == [224] and tf.resize_size == [232]
    assert M.ResNet50_Weights.IMAGENET1K_V1.transforms().resize_size == [256]
    with pytest.raises(ValueError, match="no weights named"):
        M.resnet18(weights="IMAGENET1K_V9")
    with pytest.raises(FileNotFoundError):
        M.resnet18(weights="/nonexistent/resnet18.pth")
    every = [M.get_model_weights(n) for n in OURS]
    for cls in every:
        for member in cls:
            assert member.url.startswith("https://download.pytorch.org/models/")
            assert member.meta["_docs"] and "acc@1" in member.meta["_metrics"]["ImageNet-1K"]


# state_dict keys as torchvision names them (checked against torchvision's module layout)
KNOWN_KEYS = {
    "resnet18": (122, ["conv1.weight", "bn1.num_batches_tracked", "layer1.0.conv2.weight",
                       "layer2.0.downsample.0.weight", "layer2.0.downsample.1.running_var",
                       "layer4.1.bn2.bias", "fc.weight", "fc.bias"]),
    "resnet50": (320, ["layer1.0.conv3.weight", "layer1.0.downsample.1.weight",
                       "layer3.5.bn3.running_mean", "layer4.2.conv3.weight", "fc.weight"]),
    "vgg16": (32, ["features.0.weight", "features.28.bias", "classifier.0.weight",
                   "classifier.3.weight", "classifier.6.bias"]),
    "vgg16_bn": (32 + 13 * 5, ["features.1.running_mean", "features.40.weight",
                               "features.41.num_batches_tracked", "classifier.6.weight"]),
    "alexnet": (16, ["features.0.weight", "features.3.weight", "features.10.bias",
                     "classifier.1.weight", "classifier.4.weight", "classifier.6.bias"]),
    "squeezenet1_0": (52, ["features.0.weight", "features.3.squeeze.weight",
                           "features.12.expand3x3.bias", "classifier.1.weight"]),
    "squeezenet1_1": (52, ["features.0.weight", "features.3.expand1x1.weight",
                           "features.12.expand3x3.weight", "classifier.1.bias"]),
    "densenet121": (None, ["features.conv0.weight", "features.norm0.running_mean",
                           "features.denseblock1.denselayer1.norm1.weight",
                           "features.denseblock1.denselayer6.conv2.weight",
                           "features.transition1.conv.weight",
                           "features.denseblock4.denselayer16.norm2.running_var",
                           "features.norm5.bias", "classifier.weight"]),
}


@pytest.mark.parametrize("name", sorted(KNOWN_KEYS))
def test_state_dict_keys(name):
    count, keys = KNOWN_KEYS[name]
    sd = M.get_model(name).state_dict()
    if count is not None:
        assert len(sd) == count
    for k in keys:
        assert k in sd, k
    assert not any("denselayer" in k and ".norm.1" in k for k in sd)


def test_init_as_torchvision():
    fiamma.manual_seed(0)
    r = M.resnet50(zero_init_residual=True)
    assert float(r.layer1[0].bn3.weight.abs().sum()) == 0.0
    assert float(r.layer1[0].bn1.weight.sum()) == 64.0
    w = r.layer3[0].conv2.weight.detach().numpy()  # kaiming normal, fan_out, relu
    fan_out = w.shape[0] * w.shape[2] * w.shape[3]
    assert abs(w.std() / np.sqrt(2.0 / fan_out) - 1) < 0.05
    v = M.vgg11()
    lw = v.classifier[0].weight.detach().numpy()
    assert abs(lw.std() / 0.01 - 1) < 0.05 and float(v.classifier[0].bias.abs().sum()) == 0
    s = M.squeezenet1_0()
    assert abs(s.classifier[1].weight.detach().numpy().std() / 0.01 - 1) < 0.1
    d = M.densenet121()
    assert float(d.classifier.bias.abs().sum()) == 0.0


# --- weights from files and from a server ------------------------------------------------

def _random_squeezenet_sd():
    fiamma.manual_seed(1)
    model = M.squeezenet1_1().eval()
    return model, model.state_dict()


def _logits(model, seed=0):
    x = fiamma.from_numpy(np.random.default_rng(seed).standard_normal((1, 3, 64, 64))
                          .astype(np.float32))
    with fiamma.no_grad():
        return model.eval()(x).numpy()


def test_load_local_fiamma_checkpoint(tmp_path):
    model, sd = _random_squeezenet_sd()
    path = tmp_path / "sq.pth"
    fiamma.save(sd, str(path))
    for w in (str(path), path):
        loaded = M.squeezenet1_1(weights=w)
        np.testing.assert_array_equal(_logits(loaded), _logits(model))
    loaded = M.get_model("squeezenet1_1", weights=str(path))
    np.testing.assert_array_equal(_logits(loaded), _logits(model))
    with pytest.raises((RuntimeError, KeyError, ValueError)):
        M.squeezenet1_0(weights=str(path))        # other architecture: keys/shapes differ


def test_legacy_pretrained_flag(tmp_path, monkeypatch):
    model, sd = _random_squeezenet_sd()
    path = tmp_path / "sq.pth"
    fiamma.save(sd, str(path))
    monkeypatch.setattr(M.SqueezeNet1_1_Weights.IMAGENET1K_V1.value, "url", path.as_uri())
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        loaded = M.squeezenet1_1(pretrained=True)
    # torchvision's two warnings, word for word
    assert [str(x.message) for x in w] == [
        "The parameter 'pretrained' is deprecated since 0.13 and may be removed in the future, "
        "please use 'weights' instead.",
        "Arguments other than a weight enum or `None` for 'weights' are deprecated since 0.13 "
        "and may be removed in the future. The current behavior is equivalent to passing "
        "`weights=SqueezeNet1_1_Weights.IMAGENET1K_V1`. You can also use "
        "`weights=SqueezeNet1_1_Weights.DEFAULT` to get the most up-to-date weights."]
    np.testing.assert_array_equal(_logits(loaded), _logits(model))
    with pytest.warns(UserWarning, match="equivalent to passing `weights=None`.$"):
        fresh = M.squeezenet1_1(pretrained=False)
    assert not np.array_equal(_logits(fresh), _logits(model))
    with pytest.raises(ValueError, match="num_classes"):
        M.squeezenet1_1(weights=M.SqueezeNet1_1_Weights.IMAGENET1K_V1, num_classes=10)


def test_densenet_old_style_keys(tmp_path):
    fiamma.manual_seed(2)
    model = M.densenet121().eval()
    old = {}
    for k, v in model.state_dict().items():
        if "denselayer" in k and k.endswith("num_batches_tracked"):
            continue                      # the published files predate this buffer
        for part in ("norm1", "conv1", "norm2", "conv2"):
            if "denselayer" in k and f".{part}." in k:
                k = k.replace(f".{part}.", f".{part[:-1]}.{part[-1]}.")
        old[k] = v
    assert "features.denseblock1.denselayer1.norm.1.weight" in old
    path = tmp_path / "dn.pth"
    fiamma.save(old, str(path))
    np.testing.assert_array_equal(_logits(M.densenet121(weights=path)), _logits(model))


class _Server:
    """Serves files from a directory on 127.0.0.1 (a stand-in for download.pytorch.org)."""

    def __init__(self, root):
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
        handler.log_message = lambda *a: None
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    s = _Server(root)
    s.root = root
    yield s
    s.close()


def test_download_hash_ok_and_corrupt(server, tmp_path, monkeypatch):
    monkeypatch.setenv("FIAMMA_HOME", str(tmp_path / "home"))
    model, sd = _random_squeezenet_sd()
    plain = server.root / "plain.pth"
    fiamma.save(sd, str(plain))
    digest = hashlib.sha256(plain.read_bytes()).hexdigest()
    good = server.root / f"squeezenet1_1-{digest[:8]}.pth"
    bad = server.root / "squeezenet1_1-deadbeef.pth"
    good.write_bytes(plain.read_bytes())
    bad.write_bytes(plain.read_bytes())

    # the builder's own path: weights="DEFAULT" downloads, checks the name's hash prefix, loads
    member = M.SqueezeNet1_1_Weights.IMAGENET1K_V1
    monkeypatch.setattr(member.value, "url", f"{server.url}/{good.name}")
    loaded = M.squeezenet1_1(weights="DEFAULT", progress=False)
    np.testing.assert_array_equal(_logits(loaded), _logits(model))
    cached = tmp_path / "home" / "hub" / "checkpoints" / good.name
    assert cached.is_file()

    # corrupt: the file does not match the hash in its name -> error, nothing left behind
    monkeypatch.setattr(member.value, "url", f"{server.url}/{bad.name}")
    with pytest.raises(RuntimeError, match="sha256"):
        M.squeezenet1_1(weights=member, progress=False)
    assert not (cached.parent / bad.name).exists()

    # full sha256 given: a wrong digest fails, the right one passes
    d = tmp_path / "d"
    sd2 = M.load_state_dict_from_url(f"{server.url}/plain.pth", model_dir=str(d),
                                     progress=False, check_hash=True, sha256=digest)
    assert set(sd2) == set(sd)
    with pytest.raises(RuntimeError, match="corrupt"):
        M.load_state_dict_from_url(f"{server.url}/{bad.name}", model_dir=str(d / "x"),
                                   progress=False, check_hash=True, sha256="0" * 64)


def test_cached_file_used_as_is(tmp_path, monkeypatch):
    # as torch.hub: a file already in the cache is loaded without re-hashing or downloading
    # (the hash is checked on download); e.g. SRGAN scripts given locally made vgg19 weights
    monkeypatch.setenv("FIAMMA_HOME", str(tmp_path / "home"))
    model, sd = _random_squeezenet_sd()
    cache = tmp_path / "home" / "hub" / "checkpoints"
    cache.mkdir(parents=True)
    member = M.SqueezeNet1_1_Weights.IMAGENET1K_V1
    name = member.url.rsplit("/", 1)[-1]
    fiamma.save(sd, str(cache / name))           # not the published bytes: its hash differs
    monkeypatch.setattr(member.value, "url", "http://127.0.0.1:9/" + name)   # unreachable
    loaded = M.squeezenet1_1(weights=member, progress=False)
    np.testing.assert_array_equal(_logits(loaded), _logits(model))
    assert (cache / name).is_file()


# --- the preset --------------------------------------------------------------------------

MEAN = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
STD = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]


def _ref_crop_norm(a, crop):
    """Center crop (torchvision's rounding) + [0, 1] + normalise, in NumPy; a is (C, H, W)."""
    h, w = a.shape[-2:]
    top, left = int(round((h - crop) / 2.0)), int(round((w - crop) / 2.0))
    a = a[:, top:top + crop, left:left + crop].astype(np.float32) / 255.0
    return (a - MEAN) / STD


def test_preset_without_resize_matches_numpy():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (3, 32, 45), dtype=np.uint8)     # shorter side already 32
    tf = ImageClassification(crop_size=24, resize_size=32)
    out = tf(fiamma.from_numpy(a))
    assert out.dtype == fiamma.float32 and tuple(out.shape) == (3, 24, 24)
    np.testing.assert_allclose(out.numpy(), _ref_crop_norm(a, 24), rtol=1e-5, atol=1e-6)
    pil = Image.fromarray(np.ascontiguousarray(a.transpose(1, 2, 0)))
    np.testing.assert_allclose(tf(pil).numpy(), _ref_crop_norm(a, 24), rtol=1e-5, atol=1e-6)
    batch = tf(fiamma.from_numpy(np.stack([a, a])))
    assert tuple(batch.shape) == (2, 3, 24, 24)


def test_preset_with_resize_matches_numpy():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, (3, 50, 70), dtype=np.uint8)
    tf = ImageClassification(crop_size=16, resize_size=20)
    out = tf(fiamma.from_numpy(a)).numpy()
    resized = F.resize(fiamma.from_numpy(a), [20], antialias=True).numpy()
    assert resized.shape == (3, 20, 28)
    np.testing.assert_allclose(out, _ref_crop_norm(resized, 16), rtol=1e-5, atol=1e-6)
    # a float image in [0, 1] gives the same (up to the uint8 rounding of the resize)
    outf = tf(fiamma.from_numpy(a.astype(np.float32) / 255)).numpy()
    assert np.abs(outf - out).max() < 2.5 / 255 / 0.224
    assert "crop_size=[16]" in repr(tf) and "resize_size=[20]" in repr(tf)
    assert "InterpolationMode.BILINEAR" in repr(tf)


# --- the command line --------------------------------------------------------------------

@pytest.fixture
def ckpt_and_images(tmp_path):
    fiamma.manual_seed(3)
    model = M.squeezenet1_1()
    path = tmp_path / "tiny.pth"
    fiamma.save(model.state_dict(), str(path))
    rng = np.random.default_rng(0)
    imgs = []
    for i, size in enumerate([(40, 60), (80, 50)]):
        p = tmp_path / f"img{i}.png"
        Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8)).save(p)
        imgs.append(p)
    return model, path, imgs


def test_classify_main(ckpt_and_images, capsys):
    from fiamma.vision import classify
    model, path, imgs = ckpt_and_images
    rc = classify.main([str(p) for p in imgs] + ["--model", "squeezenet1_1", "--weights",
                                                  str(path), "--topk", "3"])
    assert rc == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{imgs[0]}:" and lines[4] == f"{imgs[1]}:" and len(lines) == 8
    # the expected top-3 from the model itself, labels from the weights' meta
    cats = M.SqueezeNet1_1_Weights.DEFAULT.meta["categories"]
    tf = M.SqueezeNet1_1_Weights.DEFAULT.transforms()
    x = fiamma.stack([tf(Image.open(p).convert("RGB")) for p in imgs])
    with fiamma.no_grad():
        probs = fiamma.softmax(model.eval()(x), dim=1).numpy()
    for b in range(2):
        order = np.argsort(-probs[b])[:3]
        for j, idx in enumerate(order):
            prob, label = lines[1 + 4 * b + j].split(None, 1)
            assert label == cats[idx]
            assert abs(float(prob) - probs[b, idx]) < 1e-4


def test_classify_errors(ckpt_and_images, capsys, tmp_path):
    from fiamma.vision import classify
    _, path, imgs = ckpt_and_images
    with pytest.raises(SystemExit):
        classify.main([str(tmp_path / "missing.png"), "--weights", str(path)])
    assert classify.main([str(imgs[0]), "--model", "squeezenet1_1", "--weights",
                          "IMAGENET1K_V7"]) == 1
    assert "no weights named" in capsys.readouterr().err


def test_classify_module_entry_point(ckpt_and_images):
    _, path, imgs = ckpt_and_images
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-m", "fiamma.vision.classify", str(imgs[0]),
                        "--model", "squeezenet1_1", "--weights", str(path), "--topk", "2"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 3


# --- parity with PyTorch (a torchvision-architecture ResNet written with torch.nn) ----------

def _torch_resnet(block_kind, layers, num_classes=1000, groups=1, width_per_group=64):
    tnn = torch.nn

    class Block(tnn.Module):
        def __init__(self, inplanes, planes, stride, downsample):
            super().__init__()
            if block_kind == "basic":
                self.conv1 = tnn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
                self.bn1 = tnn.BatchNorm2d(planes)
                self.conv2 = tnn.Conv2d(planes, planes, 3, 1, 1, bias=False)
                self.bn2 = tnn.BatchNorm2d(planes)
            else:
                width = int(planes * (width_per_group / 64.0)) * groups
                self.conv1 = tnn.Conv2d(inplanes, width, 1, bias=False)
                self.bn1 = tnn.BatchNorm2d(width)
                self.conv2 = tnn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False)
                self.bn2 = tnn.BatchNorm2d(width)
                self.conv3 = tnn.Conv2d(width, planes * 4, 1, bias=False)
                self.bn3 = tnn.BatchNorm2d(planes * 4)
            self.relu = tnn.ReLU(inplace=True)
            self.downsample = downsample

        def forward(self, x):
            idt = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            if block_kind == "basic":
                out = self.bn2(self.conv2(out))
            else:
                out = self.relu(self.bn2(self.conv2(out)))
                out = self.bn3(self.conv3(out))
            return self.relu(out + idt)

    exp = 1 if block_kind == "basic" else 4

    class Net(tnn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = tnn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = tnn.BatchNorm2d(64)
            self.relu = tnn.ReLU(inplace=True)
            self.maxpool = tnn.MaxPool2d(3, 2, 1)
            inplanes = 64
            for i, (planes, n) in enumerate(zip([64, 128, 256, 512], layers)):
                stride = 1 if i == 0 else 2
                blocks = []
                for j in range(n):
                    ds = None
                    if j == 0 and (stride != 1 or inplanes != planes * exp):
                        ds = tnn.Sequential(tnn.Conv2d(inplanes, planes * exp, 1, stride,
                                                       bias=False),
                                            tnn.BatchNorm2d(planes * exp))
                    blocks.append(Block(inplanes, planes, stride if j == 0 else 1, ds))
                    inplanes = planes * exp
                setattr(self, f"layer{i + 1}", tnn.Sequential(*blocks))
            self.avgpool = tnn.AdaptiveAvgPool2d((1, 1))
            self.fc = tnn.Linear(512 * exp, num_classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return Net()


def _randomise_bn_torch(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)


@pytest.mark.parity
@needs_torch
def test_parity_resnet18_torch_checkpoint(tmp_path):
    torch.manual_seed(0)
    tmodel = _torch_resnet("basic", [2, 2, 2, 2]).eval()
    _randomise_bn_torch(tmodel, 0)
    path = tmp_path / "resnet18-torch.pth"
    torch.save(tmodel.state_dict(), str(path))
    ours = M.resnet18(weights=str(path)).eval()
    assert list(ours.state_dict()) == list(tmodel.state_dict())
    x = np.random.default_rng(0).standard_normal((2, 3, 96, 96)).astype(np.float32)
    with torch.no_grad():
        ref = tmodel(torch.from_numpy(x)).numpy()
    with fiamma.no_grad():
        out = ours(fiamma.from_numpy(x)).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("name,kind,layers,kw", [
    ("resnet50", "bottleneck", [3, 4, 6, 3], {}),
    ("resnext50_32x4d", "bottleneck", [3, 4, 6, 3], {"groups": 32, "width_per_group": 4}),
])
def test_parity_bottleneck_keys_shapes_and_logits(name, kind, layers, kw):
    torch.manual_seed(1)
    tmodel = _torch_resnet(kind, layers, **kw).eval()
    _randomise_bn_torch(tmodel, 1)
    tsd = tmodel.state_dict()
    ours = M.get_model(name).eval()
    osd = ours.state_dict()
    assert list(osd) == list(tsd)
    assert all(tuple(osd[k].shape) == tuple(tsd[k].shape) for k in tsd)
    ours.load_state_dict({k: fiamma.from_numpy(v.numpy().copy()) for k, v in tsd.items()})
    x = np.random.default_rng(1).standard_normal((1, 3, 64, 64)).astype(np.float32)
    with torch.no_grad():
        ref = tmodel(torch.from_numpy(x)).numpy()
    with fiamma.no_grad():
        out = ours(fiamma.from_numpy(x)).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
