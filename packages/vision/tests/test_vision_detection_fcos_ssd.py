"""FCOS, SSD and SSDlite (fiamma.vision.models.detection): coders, matchers, anchors and
losses against hand-computed values; small models end to end; and (marked ``parity``) the
models against torchvision with the same weights in float64: detections in eval, losses and
every gradient in training."""
import math

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.vision.models import detection as D
from fiamma.vision.models.detection import _utils as U


def test_box_linear_coder_by_hand():
    c = U.BoxLinearCoder(normalize_by_size=True)
    anchors = fiamma.tensor([[[0., 0., 8., 8.], [4., 4., 12., 20.]]], dtype=fiamma.float64)
    boxes = fiamma.tensor([[[1., 2., 9., 7.], [0., 0., 16., 16.]]], dtype=fiamma.float64)
    t = c.encode(anchors, boxes)
    # anchor 1: centre (8, 12), size 8 x 16: (8 - 0) / 8, (12 - 0) / 16, (16 - 8) / 8, 4 / 16
    np.testing.assert_allclose(t.numpy()[0, 1], [1.0, 0.75, 1.0, 0.25])
    np.testing.assert_allclose(c.decode(t, anchors).numpy(), boxes.numpy(), atol=1e-12)
    raw = U.BoxLinearCoder(normalize_by_size=False).encode(anchors, boxes)
    np.testing.assert_allclose(raw.numpy()[0, 0], [3., 2., 5., 3.])


def test_ssd_matcher_forces_best_prediction():
    q = fiamma.tensor([[0.9, 0.3, 0.1, 0.0], [0.2, 0.4, 0.3, 0.1]])
    assert U.SSDMatcher(0.5)(q).tolist() == [0, 1, -1, -1]


class _TinyBackbone(nn.Module):
    def __init__(self, levels=1):
        super().__init__()
        self.conv = nn.Conv2d(3, 32, 3, stride=8, padding=1)
        self.out_channels = 32

    def forward(self, x):
        return fiamma.relu(self.conv(x))


_TARGETS = [{"boxes": fiamma.tensor([[4., 6., 30., 40.]]), "labels": fiamma.tensor([1])},
            {"boxes": fiamma.tensor([[2., 2., 20., 30.], [10., 20., 38., 60.]]),
             "labels": fiamma.tensor([2, 1])}]


def test_small_fcos_eval_and_train():
    fiamma.manual_seed(0)
    m = D.FCOS(_TinyBackbone(), num_classes=3, min_size=64, max_size=96, score_thresh=0.0,
               anchor_generator=D.AnchorGenerator(((8,),), ((1.0,),)),
               head=D.FCOSHead(32, 1, 3, num_convs=1)).eval()
    imgs = [fiamma.rand(3, 48, 64), fiamma.rand(3, 64, 40)]
    with fiamma.no_grad():
        out = m(imgs)
    assert [set(o) for o in out] == [{"boxes", "labels", "scores"}] * 2
    assert set(out[0]["labels"].tolist()) <= {0, 1, 2} and 0 < len(out[0]["boxes"]) <= 100
    m.train()
    losses = m(imgs, _TARGETS)
    assert set(losses) == {"classification", "bbox_regression", "bbox_ctrness"}
    assert all(math.isfinite(v.item()) for v in losses.values())
    assert losses["bbox_regression"].item() > 0
    sum(losses.values()).backward()
    g = m.head.regression_head.bbox_ctrness.weight.grad
    assert g is not None and g.abs().sum().item() > 0
    empty = [{"boxes": fiamma.zeros((0, 4)), "labels": fiamma.zeros((0,), dtype=fiamma.int64)}]
    losses = m(imgs[:1], empty)
    assert losses["bbox_regression"].item() == 0.0 and losses["bbox_ctrness"].item() == 0.0
    with pytest.raises(ValueError, match="num_anchors_per_location"):
        D.FCOS(_TinyBackbone(), 3, anchor_generator=D.AnchorGenerator(((8, 16),), ((1.0,),)))
    with pytest.raises(ValueError, match="out_channels"):
        D.FCOS(nn.Identity(), 3)


def test_fcos_builder_meta_and_weights():
    from fiamma.vision import models
    assert models.get_model_weights("fcos_resnet50_fpn") is D.FCOS_ResNet50_FPN_Weights
    m = D.fcos_resnet50_fpn(weights=None, weights_backbone=None)
    count = sum(p.numel() for p in m.parameters())
    count -= sum(p.numel() for mod in m.backbone.body.modules()
                 if isinstance(mod, nn.BatchNorm2d) for p in mod.parameters())
    assert count == D.FCOS_ResNet50_FPN_Weights.COCO_V1.meta["num_params"] == 32269600
    m2 = D.fcos_resnet50_fpn(weights=m.state_dict())
    k = "head.regression_head.bbox_ctrness.weight"
    np.testing.assert_array_equal(m2.state_dict()[k].numpy(), m.state_dict()[k].numpy())
    with pytest.raises(ValueError, match="num_classes"):
        D.fcos_resnet50_fpn(weights="DEFAULT", num_classes=3)


# ---------------------------------------------------------------- parity with torchvision

def _compare(torch, tm, fm, imgs, targets, grad_rtol=1e-6):
    assert list(fm.state_dict()) == list(tm.state_dict())
    fm.load_state_dict({k: fiamma.from_numpy(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})
    fm, tm = fm.double(), tm.double()
    tm.eval()
    fm.eval()
    with torch.no_grad():
        to = tm([torch.from_numpy(i) for i in imgs])
    with fiamma.no_grad():
        fo = fm([fiamma.from_numpy(i) for i in imgs])
    for a, b in zip(to, fo):
        assert len(b["boxes"]) == len(a["boxes"]) > 0
        np.testing.assert_allclose(b["boxes"].numpy(), a["boxes"].numpy(), atol=1e-8)
        np.testing.assert_allclose(b["scores"].numpy(), a["scores"].numpy(), atol=1e-10)
        np.testing.assert_array_equal(b["labels"].numpy(), a["labels"].numpy())
    tm.train()
    fm.train()
    tl = tm([torch.from_numpy(i) for i in imgs],
            [{k: torch.from_numpy(v.numpy()) for k, v in t.items()} for t in targets])
    fl = fm([fiamma.from_numpy(i) for i in imgs], targets)
    assert set(tl) == set(fl)
    for k in tl:
        np.testing.assert_allclose(fl[k].item(), tl[k].item(), rtol=1e-9, err_msg=k)
    sum(tl.values()).backward()
    sum(fl.values()).backward()
    tg = {n: p.grad for n, p in tm.named_parameters() if p.grad is not None}
    fg = {n: p.grad for n, p in fm.named_parameters() if p.grad is not None}
    assert set(tg) == set(fg) and len(fg) > 10, set(tg) ^ set(fg)
    # gradients that are zero in exact arithmetic (a norm's shift followed by another
    # training-mode norm) are rounding noise in both libraries: only checked to be small
    gmax = max(g.abs().max().item() for g in tg.values())
    for n, g in tg.items():
        scale = max(g.abs().max().item(), 1e-12)
        if scale < 1e-3 * gmax:
            assert fg[n].abs().max().item() < 1e-3 * gmax, n
            continue
        np.testing.assert_allclose(fg[n].numpy() / scale, g.numpy() / scale, atol=grad_rtol,
                                   err_msg=n)


def _sample(size=(60, 76), size2=(70, 54)):
    rs = np.random.RandomState(0)
    imgs = [rs.rand(3, *size), rs.rand(3, *size2)]
    targets = [{"boxes": fiamma.tensor([[10., 12., 60., 50.], [30., 5., 70., 40.]],
                                       dtype=fiamma.float64), "labels": fiamma.tensor([1, 3])},
               {"boxes": fiamma.tensor([[5., 8., 40., 60.]], dtype=fiamma.float64),
                "labels": fiamma.tensor([2])}]
    return imgs, targets


@pytest.mark.parity
def test_fcos_resnet18_fpn_matches_torchvision():
    torch = pytest.importorskip("torch")
    tvd = pytest.importorskip("torchvision.models.detection")
    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone as tv_rfb
    from torchvision.ops.feature_pyramid_network import LastLevelP6P7 as TvP6P7

    from fiamma.vision.models.detection.backbone_utils import resnet_fpn_backbone
    from fiamma.vision.ops import LastLevelP6P7
    torch.manual_seed(0)
    bkw = dict(backbone_name="resnet18", weights=None, trainable_layers=5,
               returned_layers=[2, 3, 4])
    tb = tv_rfb(norm_layer=torch.nn.BatchNorm2d, extra_blocks=TvP6P7(256, 256), **bkw)
    fb = resnet_fpn_backbone(norm_layer=nn.BatchNorm2d, extra_blocks=LastLevelP6P7(256, 256),
                             **bkw)
    kw = dict(num_classes=4, min_size=64, max_size=96, score_thresh=0.05)
    th = tvd.fcos.FCOSHead(256, 1, 4, num_convs=2)
    fh = D.FCOSHead(256, 1, 4, num_convs=2)
    _compare(torch, tvd.FCOS(tb, head=th, **kw), D.FCOS(fb, head=fh, **kw), *_sample())


@pytest.mark.parity
@pytest.mark.slow
def test_fcos_builder_matches_torchvision():
    torch = pytest.importorskip("torch")
    tvd = pytest.importorskip("torchvision.models.detection")
    torch.manual_seed(0)
    kw = dict(weights=None, weights_backbone=None, num_classes=4, min_size=64, max_size=96,
              score_thresh=0.05)
    _compare(torch, tvd.fcos_resnet50_fpn(**kw), D.fcos_resnet50_fpn(**kw), *_sample())
