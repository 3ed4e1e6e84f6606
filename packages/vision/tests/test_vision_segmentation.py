"""fiamma.vision.models.segmentation: FCN, DeepLabV3 and LR-ASPP built as torchvision builds
them (parameter counts equal to the weights' meta, head layouts, output dict), the weights
rules of the builders, IntermediateLayerGetter, and (marked ``parity``) state-dict keys and
outputs equal to torchvision's with the same weights."""

import numpy as np
import pytest
from _tv_import import tv_import

import fiamma
from fiamma.vision import models as M
from fiamma.vision.models import segmentation as S
from fiamma.vision.models._utils import IntermediateLayerGetter

try:
    import torch
except ImportError:
    torch = None

_BUILDERS = ["fcn_resnet50", "fcn_resnet101", "deeplabv3_resnet50", "deeplabv3_resnet101",
             "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"]


def _nparams(m):
    return sum(p.numel() for p in m.parameters())


def _build(name, **kw):
    return getattr(S, name)(weights=None, weights_backbone=None, **kw)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if "101" in n else n
                                  for n in _BUILDERS])
def test_num_params_equal_weights_meta(name):
    aux = {} if name.startswith("lraspp") else {"aux_loss": True}
    m = _build(name, **aux)
    enum = M.get_model_weights(name)
    assert _nparams(m) == enum.DEFAULT.meta["num_params"]
    assert len(enum.DEFAULT.meta["categories"]) == 21
    assert enum.DEFAULT.meta["categories"][0] == "__background__"


def test_registry_lists_segmentation_models():
    assert M.list_models(module=S) == sorted(_BUILDERS)
    assert M.get_model_weights("fcn_resnet50") is S.FCN_ResNet50_Weights
    assert (M.get_weight("DeepLabV3_ResNet50_Weights.COCO_WITH_VOC_LABELS_V1")
            is S.DeepLabV3_ResNet50_Weights.COCO_WITH_VOC_LABELS_V1)


@pytest.mark.parametrize("name", ["deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large",
                                  "fcn_resnet50"])
def test_outputs_at_input_size(name):
    aux = {} if name.startswith("lraspp") else {"aux_loss": True}
    m = _build(name, num_classes=5, **aux).eval()
    with fiamma.no_grad():
        out = m(fiamma.randn(2, 3, 45, 37))
    assert list(out) == (["out"] if name.startswith("lraspp") else ["out", "aux"])
    for v in out.values():
        assert tuple(v.shape) == (2, 5, 45, 37)
        assert np.isfinite(v.numpy()).all()


def test_train_step_has_gradients():
    m = _build("lraspp_mobilenet_v3_large", num_classes=3).train()
    out = m(fiamma.randn(2, 3, 32, 32))["out"]
    target = fiamma.randint(0, 3, (2, 32, 32))
    loss = fiamma.nn.functional.cross_entropy(out, target)
    loss.backward()
    grads = [p.grad for p in m.parameters() if p.requires_grad]
    assert all(g is not None for g in grads)
    assert float(m.classifier.low_classifier.weight.grad.abs().sum()) > 0


def test_builder_weight_rules():
    with pytest.raises(NotImplementedError, match="auxiliary"):
        S.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, aux_loss=True)
    with pytest.raises(ValueError, match="num_classes"):
        S.fcn_resnet50(weights="DEFAULT", num_classes=3)
    with pytest.raises(ValueError, match="aux_loss"):
        S.fcn_resnet50(weights="DEFAULT", aux_loss=False)
    with pytest.raises(TypeError, match="unexpected"):
        S.deeplabv3_resnet50(weights=None, weights_backbone=None, bogus=1)
    with pytest.raises(ValueError, match="no weights named"):
        S.fcn_resnet50(weights="IMAGENET1K_V1")
    assert S.FCN_ResNet50_Weights.DEFAULT.url.endswith("fcn_resnet50_coco-1167a1af.pth")
    m = _build("fcn_resnet50")
    assert m.aux_classifier is None and m.classifier[4].out_channels == 21


def test_heads_layout():
    m = _build("deeplabv3_resnet50", aux_loss=True)
    aspp = m.classifier[0]
    rates = [c[0].dilation for c in aspp.convs[1:4]]
    assert [tuple(r) if isinstance(r, (tuple, list)) else (r, r) for r in rates] == \
        [(12, 12), (24, 24), (36, 36)]
    assert aspp.project[0].in_channels == 5 * 256
    assert m.aux_classifier[0].in_channels == 1024
    # the dilated backbone keeps output stride 8
    assert tuple(m.backbone(fiamma.zeros(1, 3, 64, 64))["out"].shape) == (1, 2048, 8, 8)
    mb = _build("deeplabv3_mobilenet_v3_large", aux_loss=True)
    assert list(mb.backbone.return_layers) == ["16", "4"]
    assert mb.aux_classifier[0].in_channels == 40


def test_semantic_segmentation_preset():
    tf = S.DeepLabV3_ResNet50_Weights.DEFAULT.transforms()
    img = fiamma.randint(0, 256, (3, 40, 60)).to(fiamma.uint8)
    out = tf(img)
    assert out.dtype == fiamma.float32 and tuple(out.shape) == (3, 520, 780)
    assert "resize_size=[520]" in repr(tf)


def test_intermediate_layer_getter():
    net = fiamma.nn.Sequential(fiamma.nn.Linear(3, 4), fiamma.nn.ReLU(), fiamma.nn.Linear(4, 2),
                               fiamma.nn.Linear(2, 7))
    body = IntermediateLayerGetter(net, {"0": "a", "2": "b"})
    assert list(body) == ["0", "1", "2"]        # children after the last one are dropped
    x = fiamma.randn(5, 3)
    out = body(x)
    assert list(out) == ["a", "b"]
    np.testing.assert_allclose(out["b"].detach().numpy(),
                               net[2](net[1](net[0](x))).detach().numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="not direct children"):
        IntermediateLayerGetter(net, {"9": "x"})


# ---------------------------------------------------------------------------- parity

def _torchvision_segmentation():
    return None if torch is None else tv_import("torchvision.models.segmentation")

@pytest.mark.parity
@pytest.mark.parametrize("name", _BUILDERS)
def test_state_dict_keys_equal_torchvision(name):
    TS = _torchvision_segmentation()
    if TS is None:
        pytest.skip("torchvision is not installed")
    for aux in ([None] if name.startswith("lraspp") else [None, True]):
        kw = {} if aux is None else {"aux_loss": aux}
        sd = _build(name, **kw).state_dict()
        tsd = getattr(TS, name)(weights=None, weights_backbone=None, **kw).state_dict()
        assert list(sd) == list(tsd)
        assert all(tuple(sd[k].shape) == tuple(tsd[k].shape) for k in sd)


@pytest.mark.parity
@pytest.mark.parametrize("name", ["fcn_resnet50", "deeplabv3_resnet50",
                                  "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"])
def test_same_outputs_as_torchvision(name):
    TS = _torchvision_segmentation()
    if TS is None:
        pytest.skip("torchvision is not installed")
    aux = {} if name.startswith("lraspp") else {"aux_loss": True}
    torch.manual_seed(0)
    t = getattr(TS, name)(weights=None, weights_backbone=None, num_classes=4, **aux)
    with torch.no_grad():
        for mod in t.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.normal_(0, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
    t.eval()
    m = _build(name, num_classes=4, **aux).eval()
    m.load_state_dict({k: fiamma.from_numpy(v.numpy().copy()) for k, v in t.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((1, 3, 61, 53)).astype(np.float32)
    with torch.no_grad():
        ref = t(torch.from_numpy(x))
    with fiamma.no_grad():
        out = m(fiamma.from_numpy(x))
    assert list(out) == list(ref)
    for k in ref:
        np.testing.assert_allclose(out[k].numpy(), ref[k].numpy(), rtol=1e-3, atol=1e-4)
