"""FCOS, SSD and SSDlite (fiamma.vision.models.detection): coders, matchers, anchors and
losses against hand-computed values; small models end to end; and (marked ``parity``) the
models against torchvision with the same weights in float64: detections in eval, losses and
every gradient in training."""
import math

import numpy as np
import pytest
from _detection_checks import (
    assert_same_detections,
    assert_same_training_step,
    eval_with_same_weights,
)

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
    tm, fm, to, fo = eval_with_same_weights(torch, tm, fm, imgs)
    for a, b in zip(to, fo):
        assert_same_detections(a, b)
    tm.train()
    fm.train()
    tl = tm([torch.from_numpy(i) for i in imgs],
            [{k: torch.from_numpy(v.numpy()) for k, v in t.items()} for t in targets])
    fl = fm([fiamma.from_numpy(i) for i in imgs], targets)
    assert_same_training_step(tl, fl, tm, fm, loss_rtol=1e-9, grad_atol=grad_rtol)


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


# ---------------------------------------------------------------- SSD / SSDlite

def test_default_box_generator_by_hand():
    from fiamma.vision.models.detection.image_list import ImageList
    g = D.DefaultBoxGenerator([[2]], scales=[0.5, 0.8], steps=[16])
    assert g.num_anchors_per_location() == [4]
    boxes = g(ImageList(fiamma.zeros(2, 3, 32, 32), [(32, 32)] * 2),
              [fiamma.zeros(2, 8, 2, 2)])
    assert len(boxes) == 2 and tuple(boxes[0].shape) == (2 * 2 * 4, 4)
    b = boxes[0].numpy()
    s1, r = math.sqrt(0.5 * 0.8) * 32, math.sqrt(2)
    # cell (0, 0) centred at (8, 8): 16x16, sqrt(s_k s_k+1) square, 2:1 and 1:2 boxes
    np.testing.assert_allclose(b[0], [0, 0, 16, 16], atol=1e-5)
    np.testing.assert_allclose(b[1], [8 - s1 / 2, 8 - s1 / 2, 8 + s1 / 2, 8 + s1 / 2],
                               atol=1e-5)
    np.testing.assert_allclose(b[2], [8 - 8 * r, 8 - 8 / r, 8 + 8 * r, 8 + 8 / r], atol=1e-5)
    np.testing.assert_allclose(b[3], [8 - 8 / r, 8 - 8 * r, 8 + 8 / r, 8 + 8 * r], atol=1e-5)
    # cell (0, 1) is centred at (24, 8)
    np.testing.assert_allclose(b[4], [16, 0, 32, 16], atol=1e-5)
    # default scales: min..max evenly, then 1.0
    assert D.DefaultBoxGenerator([[2]] * 3, 0.2, 0.8).scales == [0.2, 0.5, 0.8, 1.0]
    with pytest.raises(ValueError, match="same length"):
        D.DefaultBoxGenerator([[2]] * 3, steps=[8, 16])


class _TwoMaps(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, stride=4, padding=1)
        self.conv2 = nn.Conv2d(16, 8, 3, stride=2, padding=1)

    def forward(self, x):
        a = fiamma.relu(self.conv1(x))
        return {"0": a, "1": fiamma.relu(self.conv2(a))}


def _torch_two_maps(torch):
    class TwoMaps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 16, 3, stride=4, padding=1)
            self.conv2 = torch.nn.Conv2d(16, 8, 3, stride=2, padding=1)

        def forward(self, x):
            a = torch.relu(self.conv1(x))
            return {"0": a, "1": torch.relu(self.conv2(a))}
    return TwoMaps()


_SSD_KW = dict(num_classes=4, score_thresh=0.05, topk_candidates=50, detections_per_img=30)


def test_small_ssd_eval_and_train():
    fiamma.manual_seed(0)
    m = D.SSD(_TwoMaps(), D.DefaultBoxGenerator([[2], [2, 3]]), (64, 64), **_SSD_KW)
    # out_channels found by running the backbone once
    assert [h.in_channels for h in m.head.regression_head.module_list] == [16, 8]
    imgs = [fiamma.rand(3, 48, 64), fiamma.rand(3, 64, 40)]
    m.eval()
    with fiamma.no_grad():
        out = m(imgs)
    assert [set(o) for o in out] == [{"boxes", "labels", "scores"}] * 2
    b = out[1]["boxes"].numpy()
    assert len(b) <= 30 and (b[:, 2] <= 40 + 1e-4).all() and (b[:, 3] <= 64 + 1e-4).all()
    m.train()
    losses = m(imgs, _TARGETS)
    assert set(losses) == {"bbox_regression", "classification"}
    sum(losses.values()).backward()
    g = m.head.classification_head.module_list[1].weight.grad
    assert g is not None and g.abs().sum().item() > 0
    empty = [{"boxes": fiamma.zeros((0, 4)), "labels": fiamma.zeros((0,), dtype=fiamma.int64)}]
    losses = m(imgs[:1], empty)
    # no positive: no hard negatives either, so both losses are zero
    assert losses["bbox_regression"].item() == 0.0 and losses["classification"].item() == 0.0
    with pytest.raises(ValueError, match="aspect ratios"):
        D.SSD(_TwoMaps(), D.DefaultBoxGenerator([[2]]), (64, 64), num_classes=3)
    with pytest.raises(TypeError, match="DefaultBoxGenerator"):
        D.SSD(_TwoMaps(), D.AnchorGenerator(), (64, 64), num_classes=3)


@pytest.mark.parametrize("builder,n", [
    pytest.param("ssd300_vgg16", 35641826, marks=pytest.mark.slow),
    ("ssdlite320_mobilenet_v3_large", 3440060)])
def test_ssd_builders_meta_and_weights(builder, n):
    from fiamma.vision import models
    enum = models.get_model_weights(builder)
    assert enum.DEFAULT.meta["num_params"] == n
    m = getattr(D, builder)(weights=None, weights_backbone=None)
    assert sum(p.numel() for p in m.parameters()) == n
    assert m.transform.fixed_size == ((300, 300) if builder == "ssd300_vgg16" else (320, 320))
    with pytest.warns(UserWarning, match="fixed"):
        m2 = getattr(D, builder)(weights=m.state_dict(), size=(100, 100))
    k = "head.regression_head.module_list.0.weight" if builder == "ssd300_vgg16" else \
        "head.regression_head.module_list.0.1.weight"
    np.testing.assert_array_equal(m2.state_dict()[k].numpy(), m.state_dict()[k].numpy())
    with pytest.raises(ValueError, match="num_classes"):
        getattr(D, builder)(weights="DEFAULT", num_classes=3)


@pytest.mark.parity
def test_default_box_generator_matches_torchvision():
    torch = pytest.importorskip("torch")
    from torchvision.models.detection.anchor_utils import DefaultBoxGenerator as T
    from torchvision.models.detection.image_list import ImageList as TI

    from fiamma.vision.models.detection.image_list import ImageList as FI
    sizes = [(38, 38), (19, 19), (10, 10), (5, 5), (3, 3), (1, 1)]
    for args in (dict(aspect_ratios=[[2], [2, 3], [2, 3], [2, 3], [2], [2]],
                      scales=[0.07, 0.15, 0.33, 0.51, 0.69, 0.87, 1.05],
                      steps=[8, 16, 32, 64, 100, 300]),
                 dict(aspect_ratios=[[2, 3]] * 6, min_ratio=0.2, max_ratio=0.95)):
        for tdt, fdt in ((torch.float32, fiamma.float32), (torch.float64, fiamma.float64)):
            t = T(**args)(TI(torch.zeros(1, 3, 300, 300, dtype=tdt), [(300, 300)]),
                          [torch.zeros(1, 1, *s, dtype=tdt) for s in sizes])
            f = D.DefaultBoxGenerator(**args)(
                FI(fiamma.zeros(1, 3, 300, 300, dtype=fdt), [(300, 300)]),
                [fiamma.zeros(1, 1, *s, dtype=fdt) for s in sizes])
            assert f[0].dtype == fdt
            np.testing.assert_array_equal(f[0].numpy(), t[0].numpy())


@pytest.mark.parity
def test_small_ssd_matches_torchvision():
    torch = pytest.importorskip("torch")
    tvd = pytest.importorskip("torchvision.models.detection")
    torch.manual_seed(0)
    tm = tvd.ssd.SSD(_torch_two_maps(torch),
                 tvd.anchor_utils.DefaultBoxGenerator([[2], [2, 3]]), (64, 64), **_SSD_KW)
    fm = D.SSD(_TwoMaps(), D.DefaultBoxGenerator([[2], [2, 3]]), (64, 64), **_SSD_KW)
    _compare(torch, tm, fm, *_sample())


@pytest.mark.parity
@pytest.mark.slow
def test_ssdlite_builder_matches_torchvision():
    torch = pytest.importorskip("torch")
    tvd = pytest.importorskip("torchvision.models.detection")
    torch.manual_seed(0)
    kw = dict(weights=None, weights_backbone=None, num_classes=4, score_thresh=0.05,
              topk_candidates=50, detections_per_img=30)
    tm = tvd.ssdlite320_mobilenet_v3_large(**kw)
    # the builder's N(0, 0.03) init makes the deep maps (nearly) vanish in eval mode, which
    # leaves many anchors with tied scores whose NMS order is arbitrary: use He init
    for p in tm.parameters():
        if p.ndim > 1:
            torch.nn.init.kaiming_normal_(p)
    _compare(torch, tm, D.ssdlite320_mobilenet_v3_large(**kw), *_sample())


@pytest.mark.parity
@pytest.mark.slow
def test_ssd300_vgg16_builder_matches_torchvision():
    torch = pytest.importorskip("torch")
    tvd = pytest.importorskip("torchvision.models.detection")
    torch.manual_seed(0)
    kw = dict(weights=None, weights_backbone=None, num_classes=4, score_thresh=0.05,
              topk_candidates=50, detections_per_img=30)
    _compare(torch, tvd.ssd300_vgg16(**kw), D.ssd300_vgg16(**kw), *_sample())
