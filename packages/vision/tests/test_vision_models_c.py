"""GoogLeNet, Inception v3, MNASNet, RegNet, ConvNeXt and EfficientNetV2: every builder builds
and runs at a small size with the right output shape, parameter counts equal the weights'
``meta["num_params"]``, the weights enums and builder options behave as torchvision's, and
(marked ``parity``) the same weights give the same outputs, losses and gradients as
torchvision's."""
import warnings

import numpy as np
import pytest

import fiamma
from fiamma.vision import models as M
from fiamma.vision.models.convnext import LayerNorm2d
from fiamma.vision.models.regnet import BlockParams

SMALL = ["googlenet", "inception_v3", "mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3",
         "regnet_y_400mf", "regnet_y_800mf", "regnet_y_1_6gf", "regnet_x_400mf",
         "regnet_x_800mf", "regnet_x_1_6gf", "efficientnet_v2_s", "convnext_tiny"]
LARGE = ["regnet_y_3_2gf", "regnet_y_8gf", "regnet_y_16gf", "regnet_y_32gf", "regnet_x_3_2gf",
         "regnet_x_8gf", "regnet_x_16gf", "regnet_x_32gf", "convnext_small", "convnext_base",
         "efficientnet_v2_m"]
HUGE = ["regnet_y_128gf", "convnext_large", "efficientnet_v2_l"]


def _nparams(m):
    return sum(p.numel() for p in m.parameters())


def _plain(name, **kw):
    """The architecture meta["num_params"] counts: GoogLeNet without its auxiliary heads,
    Inception v3 with its one (as torchvision's figures)."""
    if name in ("googlenet", "inception_v3"):
        kw.setdefault("aux_logits", name == "inception_v3")
        kw.setdefault("init_weights", True)
    return M.get_model(name, **kw)


def _size(name):
    return 75 if name == "inception_v3" else 32


@pytest.mark.parametrize("name", SMALL)
def test_small_builders_num_params_and_forward(name):
    m = _plain(name)
    assert _nparams(m) == M.get_model_weights(name).DEFAULT.meta["num_params"]
    m.eval()
    s = _size(name)
    with fiamma.no_grad():
        out = m(fiamma.randn(1, 3, s, s))
    assert tuple(out.shape) == (1, 1000)
    assert np.isfinite(out.numpy()).all()


@pytest.mark.slow
@pytest.mark.parametrize("name", LARGE)
def test_large_builders_num_params(name):
    m = _plain(name)
    assert _nparams(m) == M.get_model_weights(name).DEFAULT.meta["num_params"]


@pytest.mark.parametrize("name", SMALL)
def test_small_num_classes_forward(name):
    m = _plain(name, num_classes=3).eval()
    s = _size(name)
    with fiamma.no_grad():
        assert tuple(m(fiamma.randn(2, 3, s, s)).shape) == (2, 3)


def test_registry_and_enums():
    names = set(M.list_models())
    for n in SMALL + LARGE + HUGE:
        assert n in names
        E = M.get_model_weights(n)
        d = E.DEFAULT
        assert len(d.meta["categories"]) == 1000
        assert d.url.startswith("https://download.pytorch.org/models/")
        assert "acc@1" in d.meta["_metrics"]["ImageNet-1K"]
    assert M.RegNet_Y_400MF_Weights.DEFAULT is M.RegNet_Y_400MF_Weights.IMAGENET1K_V2
    assert M.RegNet_Y_128GF_Weights.DEFAULT is M.RegNet_Y_128GF_Weights.IMAGENET1K_SWAG_E2E_V1
    assert "IMAGENET1K_V1" not in M.RegNet_Y_128GF_Weights.__members__
    t = M.RegNet_Y_16GF_Weights.IMAGENET1K_SWAG_E2E_V1.transforms()
    assert list(t.crop_size) == [384]
    t = M.EfficientNet_V2_L_Weights.DEFAULT.transforms()
    assert list(t.mean) == [0.5, 0.5, 0.5] and list(t.crop_size) == [480]
    t = M.ConvNeXt_Tiny_Weights.DEFAULT.transforms()
    assert list(t.resize_size) == [236] and list(t.crop_size) == [224]
    assert M.get_weight("MNASNet1_3_Weights.IMAGENET1K_V1").meta["num_params"] == 6282256


def test_regnet_block_params_quantisation():
    p = BlockParams.from_init_params(depth=16, w_0=48, w_a=27.89, w_m=2.09, group_width=8,
                                     se_ratio=0.25)
    assert p.depths == [1, 3, 6, 6] and p.widths == [48, 104, 208, 440]
    assert p.group_widths == [8, 8, 8, 8]
    with pytest.raises(ValueError, match="RegNet"):
        BlockParams.from_init_params(depth=4, w_0=12, w_a=1.0, w_m=2.0, group_width=8)


def test_layernorm2d_vs_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 3, 4))
    ln = LayerNorm2d(5, eps=1e-6).double()
    w, b = rng.standard_normal(5), rng.standard_normal(5)
    ln.weight.data = fiamma.from_numpy(w.copy())
    ln.bias.data = fiamma.from_numpy(b.copy())
    out = ln(fiamma.from_numpy(x)).detach().numpy()
    mu = x.mean(1, keepdims=True)
    var = x.var(1, keepdims=True)
    ref = (x - mu) / np.sqrt(var + 1e-6) * w[:, None, None] + b[:, None, None]
    np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="LayerNorm2d"):
        ln(fiamma.randn(5, 3, 4, dtype=fiamma.float64))


def test_googlenet_inception_train_outputs_and_aux():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        g = M.googlenet(num_classes=4)
    out = g.train()(fiamma.randn(2, 3, 64, 64))
    assert type(out).__name__ == "GoogLeNetOutputs"
    assert [tuple(o.shape) for o in out] == [(2, 4)] * 3
    assert tuple(g.eval()(fiamma.randn(1, 3, 64, 64)).shape) == (1, 4)
    aux = M.inception.InceptionAux(768, 4)      # needs the 17x17 grid of a 299x299 input
    assert tuple(aux(fiamma.randn(2, 768, 17, 17)).shape) == (2, 4)
    inc = M.inception_v3(num_classes=4, init_weights=True)
    with pytest.raises(ValueError, match="Inception3"):
        inc(fiamma.randn(1, 3, 60, 60))


def test_googlenet_local_checkpoint_drops_aux(tmp_path):
    src = M.googlenet(num_classes=5, init_weights=True)     # with aux heads
    path = tmp_path / "g.safetensors"
    path = tmp_path / "g.pt"
    fiamma.save(src.state_dict(), str(path))
    m = M.googlenet(weights=str(path), num_classes=5, aux_logits=False)
    assert m.aux1 is None and m.aux2 is None
    np.testing.assert_array_equal(m.fc.weight.detach().numpy(), src.fc.weight.detach().numpy())
    m2 = M.googlenet(weights=str(path), num_classes=5)
    assert m2.aux1 is not None


def test_efficientnet_v2_layout_and_checkpoint(tmp_path):
    m = M.efficientnet_v2_s(num_classes=3)
    assert type(m.features[1][0]).__name__ == "FusedMBConv"
    assert type(m.features[4][0]).__name__ == "MBConv"
    assert m.features[0][1].eps == 1e-3
    path = tmp_path / "v2.pt"
    fiamma.save(m.state_dict(), str(path))
    m2 = M.efficientnet_v2_s(weights=str(path), num_classes=3).eval()
    x = fiamma.randn(1, 3, 32, 32)
    with fiamma.no_grad():
        np.testing.assert_array_equal(m2(x).numpy(), m.eval()(x).numpy())


def test_weights_num_classes_conflict():
    with pytest.raises(ValueError, match="num_classes"):
        M.convnext_tiny(weights="DEFAULT", num_classes=10)


@pytest.mark.slow
def test_inception_train_outputs_at_299():
    inc = M.inception_v3(num_classes=4, init_weights=True).train()
    out = inc(fiamma.randn(2, 3, 299, 299))
    assert type(out).__name__ == "InceptionOutputs" and tuple(out.aux_logits.shape) == (2, 4)


# ---------------------------------------------------------------------------- parity

def _torchvision():
    try:
        import torch
        import torchvision.models as TM
    except Exception:
        return None, None
    return torch, TM


# name: (input size, extra kwargs that switch off randomness in train mode); the sizes keep
# at least 2x2 pixels at the last batch-normalised stage, since batch statistics of two
# values per channel amplify rounding differences without bound
PARITY = {
    "googlenet": (64, {"aux_logits": True, "init_weights": True, "dropout": 0.0,
                       "dropout_aux": 0.0}),
    "inception_v3": (80, {"aux_logits": False, "init_weights": True, "dropout": 0.0}),
    "mnasnet0_5": (64, {"dropout": 0.0}),
    "regnet_y_400mf": (64, {}),
    "regnet_x_400mf": (64, {}),
    "efficientnet_v2_s": (64, {"dropout": 0.0, "stochastic_depth_prob": 0.0}),
    "convnext_tiny": (32, {"stochastic_depth_prob": 0.0}),
}


@pytest.mark.parity
@pytest.mark.parametrize("name", sorted(PARITY))
def test_same_outputs_losses_and_gradients_as_torchvision(name):
    torch, TM = _torchvision()
    if TM is None:
        pytest.skip("torchvision is not installed")
    size, kw = PARITY[name]
    kw = dict(kw, num_classes=7)
    torch.manual_seed(0)
    t = getattr(TM, name)(**kw)
    with torch.no_grad():   # non-trivial statistics and heads, as in a trained checkpoint
        for mod in t.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.normal_(0, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.normal_(0, 0.1)
            elif isinstance(mod, torch.nn.Linear):
                mod.weight.normal_(0, 0.05)
    m = M.get_model(name, **kw)
    ts = t.state_dict()
    assert list(ts) == list(m.state_dict())
    assert _nparams(m) == sum(p.numel() for p in t.parameters())
    m.load_state_dict({k: fiamma.from_numpy(v.numpy().copy()) for k, v in ts.items()})
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, size, size)).astype(np.float32)
    y = np.array([1, 5])
    t.eval()
    m.eval()
    with torch.no_grad():
        ref = t(torch.from_numpy(x)).numpy()
    with fiamma.no_grad():
        out = m(fiamma.from_numpy(x)).numpy()
    scale = max(1.0, np.abs(ref).max())
    np.testing.assert_allclose(out / scale, ref / scale, rtol=1e-4, atol=1e-5)

    # training in float64: batch statistics over a few pixels amplify float32 rounding
    # (checked: in float32 deep gradients differ by several percent in both directions)
    t.double().train()
    m.double().train()
    x = x.astype(np.float64)
    tout = t(torch.from_numpy(x))
    fout = m(fiamma.from_numpy(x))
    if name == "googlenet":
        tloss = sum(torch.nn.functional.cross_entropy(o, torch.from_numpy(y)) for o in tout)
        floss = sum(fiamma.nn.functional.cross_entropy(o, fiamma.from_numpy(y)) for o in fout)
    else:
        tloss = torch.nn.functional.cross_entropy(tout, torch.from_numpy(y))
        floss = fiamma.nn.functional.cross_entropy(fout, fiamma.from_numpy(y))
    tloss.backward()
    floss.backward()
    np.testing.assert_allclose(floss.item(), tloss.item(), rtol=1e-7)
    fparams = dict(m.named_parameters())
    # parameters whose gradient vanishes mathematically (a bias before a train-mode batch
    # norm) carry only rounding noise: compare on the scale of the largest gradient
    gmax = max(np.abs(p.grad.numpy()).max() for p in t.parameters())
    for k, p in t.named_parameters():
        np.testing.assert_allclose(fparams[k].grad.numpy(), p.grad.numpy(), rtol=1e-6,
                                   atol=1e-7 * gmax, err_msg=k)
    for k, v in t.state_dict().items():     # batch statistics updated alike
        if "running" in k:
            np.testing.assert_allclose(m.state_dict()[k].numpy(), v.numpy(), rtol=1e-7,
                                       atol=1e-7 * np.abs(v.numpy()).max(), err_msg=k)


@pytest.mark.parity
def test_regnet_block_params_equal_torchvision():
    torch, TM = _torchvision()
    if TM is None:
        pytest.skip("torchvision is not installed")
    from torchvision.models import regnet as TR

    from fiamma.vision.models import regnet as R
    for name, (d, w0, wa, wm, g, se) in R._PARAMS.items():
        a = TR.BlockParams.from_init_params(depth=d, w_0=w0, w_a=wa, w_m=wm, group_width=g,
                                            se_ratio=se)
        b = BlockParams.from_init_params(depth=d, w_0=w0, w_a=wa, w_m=wm, group_width=g,
                                         se_ratio=se)
        for attr in ("depths", "widths", "group_widths", "bottleneck_multipliers", "strides",
                     "se_ratio"):
            assert getattr(a, attr) == getattr(b, attr), (name, attr)


@pytest.mark.parity
@pytest.mark.parametrize("name", SMALL + LARGE + HUGE)
def test_weights_meta_equal_torchvision(name):
    torch, TM = _torchvision()
    if TM is None:
        pytest.skip("torchvision is not installed")
    tE = TM.get_model_weights(name)
    fE = M.get_model_weights(name)
    assert list(tE.__members__) == list(fE.__members__)
    for k in tE.__members__:
        tw, fw = tE[k], fE[k]
        assert tw.url == fw.url
        for key in ("num_params", "min_size", "recipe", "_metrics", "_ops", "_file_size",
                    "categories"):
            assert tw.meta.get(key) == fw.meta.get(key), (k, key)
        tt, ft = tw.transforms(), fw.transforms()
        for attr in ("crop_size", "resize_size", "mean", "std"):
            assert list(getattr(tt, attr)) == list(getattr(ft, attr)), (k, attr)
        assert tt.interpolation.name == ft.interpolation.name


@pytest.mark.parity
def test_googlenet_training_outputs_match_torchvision_field_by_field():
    """aux_logits2 is the head after inception4d, aux_logits1 the one after 4a (torchvision's
    float GoogLeNet; its quantizable one swaps them)."""
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    t = torchvision.models.googlenet(weights=None, aux_logits=True, init_weights=True,
                                     num_classes=10, dropout=0.0, dropout_aux=0.0).train()
    from fiamma.vision.models import googlenet

    f = googlenet(weights=None, aux_logits=True, init_weights=True, num_classes=10,
                  dropout=0.0, dropout_aux=0.0).train()
    f.load_state_dict({k: fiamma.from_numpy(v.detach().numpy().copy())
                       for k, v in t.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 3, 96, 96)).astype(np.float32)
    ot, of = t(torch.from_numpy(x)), f(fiamma.from_numpy(x))
    for name in ("logits", "aux_logits2", "aux_logits1"):
        np.testing.assert_allclose(getattr(of, name).detach().numpy(),
                                   getattr(ot, name).detach().numpy(), rtol=1e-4, atol=1e-4)
