"""fiamma.vision.models.detection: the box coder, matcher, sampler, anchors and transform
against hand-computed values; a small Faster R-CNN end to end in eval and training (losses,
gradients); and (marked ``parity``) fasterrcnn_resnet50_fpn against torchvision with the same
weights: detections in eval, losses and every gradient in training."""
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
from fiamma.vision.models.detection.image_list import ImageList
from fiamma.vision.ops import MultiScaleRoIAlign


def test_box_coder_encode_decode_by_hand():
    coder = U.BoxCoder((10.0, 10.0, 5.0, 5.0))
    ref = fiamma.tensor([[0., 0., 10., 20.]], dtype=fiamma.float64)       # proposal
    gt = fiamma.tensor([[2., 4., 14., 20.]], dtype=fiamma.float64)
    t = coder.encode_single(gt, ref).numpy()[0]
    # centres (5, 10) -> (8, 12), sizes (10, 20) -> (12, 16)
    want = [10 * 3 / 10, 10 * 2 / 20, 5 * math.log(12 / 10), 5 * math.log(16 / 20)]
    np.testing.assert_allclose(t, want, rtol=1e-12)
    back = coder.decode(fiamma.tensor([want], dtype=fiamma.float64), [ref]).numpy()
    np.testing.assert_allclose(back.reshape(-1), gt.numpy()[0], atol=1e-12)
    # per-image lists and the clamp of dw/dh
    parts = coder.encode([gt, gt], [ref, ref])
    assert len(parts) == 2 and tuple(parts[1].shape) == (1, 4)
    big = coder.decode_single(fiamma.tensor([[0., 0., 1e3, 0.]], dtype=fiamma.float64), ref)
    assert abs(big[0, 2].item() - big[0, 0].item() - 10 * 1000 / 16) < 1e-9



def test_box_coder_decode_no_boxes():
    # (0, k, 4) as for any count: the box predictor's classes survive an image whose proposals
    # are all removed, so postprocess_detections returns no detections (was: a (0, 4k) tensor
    # that clip_boxes_to_image refused)
    coder = U.BoxCoder((10.0, 10.0, 5.0, 5.0))
    pred = coder.decode(fiamma.zeros(0, 12), [fiamma.zeros(0, 4)])
    assert tuple(pred.shape) == (0, 3, 4)
    assert tuple(coder.decode(fiamma.zeros(2, 12), [fiamma.zeros(2, 4)]).shape) == (2, 3, 4)

def test_matcher_thresholds_and_low_quality():
    q = fiamma.tensor([[0.9, 0.5, 0.1, 0.2],
                       [0.1, 0.6, 0.2, 0.25]])
    assert U.Matcher(0.7, 0.3)(q).tolist() == [0, -2, -1, -1]
    # gt 1's best prediction (0.6 at column 1) is kept; so is gt 0's (column 0)
    assert U.Matcher(0.7, 0.3, allow_low_quality_matches=True)(q).tolist() == [0, 1, -1, -1]
    with pytest.raises(ValueError, match="ground-truth"):
        U.Matcher(0.7, 0.3)(fiamma.zeros((0, 3)))
    with pytest.raises(ValueError, match="low_threshold"):
        U.Matcher(0.3, 0.7)


def test_sampler_counts_and_labels():
    fiamma.manual_seed(0)
    m = fiamma.tensor([1, 0, -1, 2, 1, 0, 0, 0, 0, 3])
    pos, neg = U.BalancedPositiveNegativeSampler(6, 0.25)([m])
    p, n = pos[0].numpy().astype(bool), neg[0].numpy().astype(bool)
    assert p.sum() == 1 and n.sum() == 5
    assert (m.numpy()[p] >= 1).all() and (m.numpy()[n] == 0).all()
    pos, neg = U.BalancedPositiveNegativeSampler(100, 0.5)([m])
    assert pos[0].sum().item() == 4 and neg[0].sum().item() == 5


def test_anchor_generator_by_hand():
    ag = D.AnchorGenerator(((32,), (64,)), ((0.5, 1.0, 2.0),) * 2)
    assert ag.num_anchors_per_location() == [3, 3]
    # ratio 0.5: h = 32*sqrt(.5), w = 32/sqrt(.5) -> (-23, -11, 23, 11) rounded
    np.testing.assert_array_equal(ag.cell_anchors[0].numpy(),
                                  [[-23, -11, 23, 11], [-16, -16, 16, 16], [-11, -23, 11, 23]])
    il = ImageList(fiamma.zeros(2, 3, 64, 96), [(60, 90), (64, 96)])
    anchors = ag(il, [fiamma.zeros(2, 4, 8, 12), fiamma.zeros(2, 4, 4, 6)])
    assert len(anchors) == 2 and tuple(anchors[0].shape) == ((8 * 12 + 4 * 6) * 3, 4)
    a = anchors[0].numpy()
    # level 0 stride 8: the position (y=1, x=2) holds anchors shifted by (16, 8)
    np.testing.assert_array_equal(a[(1 * 12 + 2) * 3 + 1], [16 - 16, 8 - 16, 16 + 16, 8 + 16])
    # level 1 stride 16 starts after level 0
    np.testing.assert_array_equal(a[8 * 12 * 3 + 3 + 1], [16 - 32, -32, 16 + 32, 32])
    with pytest.raises(ValueError, match="feature maps"):
        ag(il, [fiamma.zeros(2, 4, 8, 12)])


def test_transform_resize_pad_and_boxes():
    t = D.GeneralizedRCNNTransform(64, 100, [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]).eval()
    img = fiamma.full((3, 40, 50), 0.75)
    boxes = fiamma.tensor([[10., 4., 30., 20.]])
    il, targets = t([img, fiamma.full((3, 20, 80), 0.75)],
                    [{"boxes": boxes, "labels": fiamma.tensor([1])},
                     {"boxes": boxes, "labels": fiamma.tensor([1])}])
    # 40x50 -> scale min(64/40, 100/50) = 1.6 -> 64x80; 20x80 -> scale 1.25 -> 25x100
    assert il.image_sizes == [(64, 80), (25, 100)]
    assert tuple(il.tensors.shape) == (2, 3, 64, 128)          # padded to multiples of 32
    np.testing.assert_allclose(il.tensors[0, :, :64, :80].numpy(), 1.0, atol=1e-6)
    assert il.tensors[0, :, :, 80:].abs().max().item() == 0.0
    np.testing.assert_allclose(targets[0]["boxes"].numpy(), [[16., 6.4, 48., 32.]], rtol=1e-6)
    np.testing.assert_allclose(targets[1]["boxes"].numpy(), [[12.5, 5., 37.5, 25.]], rtol=1e-6)
    assert boxes.tolist() == [[10., 4., 30., 20.]]              # inputs untouched
    out = t.postprocess([{"boxes": fiamma.tensor([[16., 6.4, 48., 32.]])}], [(64, 80)],
                        [(40, 50)])
    np.testing.assert_allclose(out[0]["boxes"].numpy(), [[10., 4., 30., 20.]], rtol=1e-6)
    with pytest.raises(TypeError, match="floating"):
        t([fiamma.zeros(3, 8, 8, dtype=fiamma.uint8)])
    with pytest.raises(ValueError, match="3d"):
        t([fiamma.zeros(8, 8)])


class _TinyBackbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=4, padding=1)
        self.out_channels = 8

    def forward(self, x):
        return fiamma.relu(self.conv(x))


def _tiny_model(**kw):
    fiamma.manual_seed(0)
    return D.FasterRCNN(
        _TinyBackbone(), num_classes=3, min_size=64, max_size=96,
        rpn_anchor_generator=D.AnchorGenerator(((16, 32),), ((0.5, 1.0, 2.0),)),
        box_roi_pool=MultiScaleRoIAlign(["0"], 7, 2), **kw)


def test_small_faster_rcnn_eval_and_train():
    m = _tiny_model(box_score_thresh=0.0).eval()
    imgs = [fiamma.rand(3, 48, 64), fiamma.rand(3, 64, 40)]
    with fiamma.no_grad():
        out = m(imgs)
    assert len(out) == 2
    for o, img in zip(out, imgs):
        assert set(o) == {"boxes", "labels", "scores"}
        b = o["boxes"].numpy()
        assert b.shape[1] == 4 and len(b) <= 100
        h, w = img.shape[-2:]
        assert (b[:, 0] >= 0).all() and (b[:, 2] <= w + 1e-4).all() and (b[:, 3] <= h + 1e-4).all()
        assert set(o["labels"].tolist()) <= {1, 2} and o["labels"].dtype == fiamma.int64
        s = o["scores"].numpy()
        assert (np.diff(s[o["labels"].numpy() == 1]) <= 0).all() or len(s) < 2
    m.train()
    targets = [{"boxes": fiamma.tensor([[4., 6., 30., 40.]]), "labels": fiamma.tensor([1])},
               {"boxes": fiamma.tensor([[2., 2., 20., 30.], [10., 20., 38., 60.]]),
                "labels": fiamma.tensor([2, 1])}]
    losses = m(imgs, targets)
    assert set(losses) == {"loss_classifier", "loss_box_reg", "loss_objectness",
                           "loss_rpn_box_reg"}
    total = sum(losses.values())
    assert math.isfinite(total.item())
    total.backward()
    for name in ("backbone.conv.weight", "rpn.head.cls_logits.weight",
                 "roi_heads.box_predictor.cls_score.weight", "roi_heads.box_head.fc6.weight"):
        g = dict(m.named_parameters())[name].grad
        assert g is not None and g.abs().sum().item() > 0, name
    # an image without boxes trains too (all anchors negative)
    m.zero_grad()
    empty = [{"boxes": fiamma.zeros((0, 4)), "labels": fiamma.zeros((0,), dtype=fiamma.int64)}]
    losses = m(imgs[:1], empty)
    assert losses["loss_box_reg"].item() == 0.0 and losses["loss_rpn_box_reg"].item() == 0.0


def test_faster_rcnn_errors():
    m = _tiny_model().train()
    img = [fiamma.rand(3, 32, 32)]
    with pytest.raises(ValueError, match="targets"):
        m(img)
    with pytest.raises(ValueError, match="positive height and width"):
        m(img, [{"boxes": fiamma.tensor([[5., 5., 5., 9.]]), "labels": fiamma.tensor([1])}])
    with pytest.raises(ValueError, match="shape"):
        m(img, [{"boxes": fiamma.tensor([1., 2., 3., 4.]), "labels": fiamma.tensor([1])}])
    with pytest.raises(TypeError, match="int64"):
        m(img, [{"boxes": fiamma.tensor([[1., 2., 9., 9.]]),
                 "labels": fiamma.tensor([1], dtype=fiamma.int32)}])
    with pytest.raises(ValueError, match="num_classes"):
        D.FasterRCNN(_TinyBackbone())
    with pytest.raises(ValueError, match="out_channels"):
        D.FasterRCNN(nn.Identity(), num_classes=2)
    with pytest.raises(ValueError, match="num_classes"):
        D.fasterrcnn_resnet50_fpn(weights="DEFAULT", num_classes=3)


def test_weights_meta_and_registry():
    from fiamma.vision import models
    w = D.FasterRCNN_ResNet50_FPN_Weights.DEFAULT
    assert w is D.FasterRCNN_ResNet50_FPN_Weights.COCO_V1
    assert len(w.meta["categories"]) == 91 and w.meta["num_params"] == 41755286
    assert w.url.endswith("fasterrcnn_resnet50_fpn_coco-258fb6c6.pth")
    out = w.transforms()(fiamma.full((3, 2, 2), 255, dtype=fiamma.uint8))
    assert out.dtype == fiamma.float32 and out.max().item() == 1.0
    assert "fasterrcnn_resnet50_fpn" in models.list_models()
    assert models.get_model_weights("fasterrcnn_resnet50_fpn_v2") is \
        D.FasterRCNN_ResNet50_FPN_V2_Weights


@pytest.mark.parametrize("builder,n", [("fasterrcnn_resnet50_fpn", 41755286),
                                       ("fasterrcnn_resnet50_fpn_v2", 43712278),
                                       ("retinanet_resnet50_fpn", 34014999),
                                       ("retinanet_resnet50_fpn_v2", 38198935)])
def test_num_params_equal_meta(builder, n):
    m = getattr(D, builder)(weights=None, weights_backbone=None)
    count = sum(p.numel() for p in m.parameters())
    if not builder.endswith("_v2"):
        # the meta counts the pretrained model, whose ResNet has FrozenBatchNorm2d (buffers);
        # built without weights it has trainable BatchNorm2d
        count -= sum(p.numel() for mod in m.backbone.body.modules()
                     if isinstance(mod, nn.BatchNorm2d) for p in mod.parameters())
    assert count == n


def _compare_with_torchvision(torch, tm, fm, imgs, boxes, labels):
    # eval: detections equal
    tm, fm, to, fo = eval_with_same_weights(torch, tm, fm, imgs)
    for a, b in zip(to, fo):
        assert_same_detections(a, b)
    # training: losses and every gradient equal
    tm.train()
    fm.train()
    tl = tm([torch.from_numpy(i) for i in imgs],
            [{"boxes": torch.from_numpy(b), "labels": torch.from_numpy(lab)}
             for b, lab in zip(boxes, labels)])
    fl = fm([fiamma.from_numpy(i) for i in imgs],
            [{"boxes": fiamma.from_numpy(b), "labels": fiamma.from_numpy(lab)}
             for b, lab in zip(boxes, labels)])
    # PyTorch's BCE-with-logits of float64 logits against the float32 RPN labels is off the
    # float64 value by ~1e-8 relative (fiamma's is exact), hence not 1e-12; the zero-in-exact-
    # arithmetic gradients (a batch-norm bias whose output reaches the loss only through another
    # training-mode batch norm) are up to ~1e-4 of the largest in MobileNetV3's first blocks
    assert_same_training_step(tl, fl, tm, fm, loss_rtol=1e-6)


_BIG = 10 ** 6      # sample every anchor/proposal, so the losses do not depend on the RNG


def _sample():
    rs = np.random.RandomState(0)
    imgs = [rs.rand(3, 60, 76), rs.rand(3, 70, 54)]
    boxes = [np.array([[10., 12., 60., 50.], [30., 5., 70., 40.]]),
             np.array([[5., 8., 40., 60.]])]
    return imgs, boxes, [np.array([1, 3]), np.array([2])]


@pytest.mark.parity
def test_faster_rcnn_resnet18_fpn_matches_torchvision():
    torch = pytest.importorskip("torch")
    tvd = pytest.importorskip("torchvision.models.detection")
    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone as tv_rfb
    from torchvision.models.detection.faster_rcnn import (
        FastRCNNPredictor as TvPred,
        TwoMLPHead as TvHead,
    )

    from fiamma.vision.models.detection.backbone_utils import resnet_fpn_backbone
    torch.manual_seed(0)
    kw = dict(min_size=64, max_size=96, rpn_batch_size_per_image=_BIG,
              box_batch_size_per_image=_BIG, rpn_pre_nms_top_n_test=100,
              rpn_post_nms_top_n_test=40, rpn_pre_nms_top_n_train=100,
              rpn_post_nms_top_n_train=40)
    tm = tvd.FasterRCNN(tv_rfb(backbone_name="resnet18", weights=None,
                               norm_layer=torch.nn.BatchNorm2d, trainable_layers=5),
                        box_head=TvHead(256 * 49, 64), box_predictor=TvPred(64, 4), **kw)
    fm = D.FasterRCNN(resnet_fpn_backbone(backbone_name="resnet18", weights=None,
                                          norm_layer=nn.BatchNorm2d, trainable_layers=5),
                      box_head=D.TwoMLPHead(256 * 49, 64), box_predictor=D.FastRCNNPredictor(64, 4),
                      **kw)
    _compare_with_torchvision(torch, tm, fm, *_sample())


@pytest.mark.parity
@pytest.mark.slow
@pytest.mark.parametrize("builder", ["fasterrcnn_resnet50_fpn", "fasterrcnn_resnet50_fpn_v2"])
def test_faster_rcnn_builders_match_torchvision(builder):
    torch = pytest.importorskip("torch")
    tvd = pytest.importorskip("torchvision.models.detection")
    torch.manual_seed(0)
    kw = dict(weights=None, weights_backbone=None, num_classes=4, min_size=64, max_size=96,
              rpn_batch_size_per_image=_BIG, box_batch_size_per_image=_BIG)
    _compare_with_torchvision(torch, getattr(tvd, builder)(**kw), getattr(D, builder)(**kw),
                              *_sample())


def test_small_retinanet_eval_and_train():
    fiamma.manual_seed(0)
    m = D.RetinaNet(_TinyBackbone(), num_classes=3, min_size=64, max_size=96,
                    anchor_generator=D.AnchorGenerator(((16, 32),), ((0.5, 1.0, 2.0),)),
                    score_thresh=0.0).eval()
    imgs = [fiamma.rand(3, 48, 64), fiamma.rand(3, 64, 40)]
    with fiamma.no_grad():
        out = m(imgs)
    assert [set(o) for o in out] == [{"boxes", "labels", "scores"}] * 2
    assert set(out[0]["labels"].tolist()) <= {0, 1, 2} and len(out[0]["boxes"]) <= 300
    m.train()
    targets = [{"boxes": fiamma.tensor([[4., 6., 30., 40.]]), "labels": fiamma.tensor([1])},
               {"boxes": fiamma.zeros((0, 4)), "labels": fiamma.zeros((0,), dtype=fiamma.int64)}]
    losses = m(imgs, targets)
    assert set(losses) == {"classification", "bbox_regression"}
    sum(losses.values()).backward()
    g = m.head.classification_head.cls_logits.weight.grad
    assert g is not None and g.abs().sum().item() > 0


@pytest.mark.parity
@pytest.mark.parametrize("v2", [False, True])
def test_retinanet_resnet18_fpn_matches_torchvision(v2):
    torch = pytest.importorskip("torch")
    tvd = pytest.importorskip("torchvision.models.detection")
    from functools import partial

    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone as tv_rfb
    from torchvision.models.detection.retinanet import RetinaNetHead as TvHead
    from torchvision.ops.feature_pyramid_network import LastLevelP6P7 as TvP6P7

    from fiamma.vision.models.detection.backbone_utils import resnet_fpn_backbone
    from fiamma.vision.ops import LastLevelP6P7
    torch.manual_seed(0)
    kw = dict(num_classes=4, min_size=64, max_size=96, topk_candidates=100, score_thresh=0.005)
    bkw = dict(backbone_name="resnet18", weights=None, trainable_layers=5,
               returned_layers=[2, 3, 4])
    tb = tv_rfb(norm_layer=torch.nn.BatchNorm2d, extra_blocks=TvP6P7(256, 256), **bkw)
    fb = resnet_fpn_backbone(norm_layer=nn.BatchNorm2d, extra_blocks=LastLevelP6P7(256, 256),
                             **bkw)
    if v2:
        th = TvHead(256, 9, 4, norm_layer=partial(torch.nn.GroupNorm, 32))
        th.regression_head._loss_type = "giou"
        fh = D.RetinaNetHead(256, 9, 4, norm_layer=partial(nn.GroupNorm, 32))
        fh.regression_head._loss_type = "giou"
        kw_t, kw_f = dict(kw, head=th), dict(kw, head=fh)
    else:
        kw_t = kw_f = kw
    tm = tvd.RetinaNet(tb, **kw_t)
    fm = D.RetinaNet(fb, **kw_f)
    _compare_with_torchvision(torch, tm, fm, *_sample())


@pytest.mark.parametrize("builder", ["fasterrcnn_mobilenet_v3_large_fpn",
                                     "fasterrcnn_mobilenet_v3_large_320_fpn"])
def test_mobilenet_v3_builders(builder):
    enum = models_get_weights(builder)
    assert enum.DEFAULT.meta["num_params"] == 19386354
    m = getattr(D, builder)(weights=None, weights_backbone=None)
    count = sum(p.numel() for p in m.parameters())
    # the meta counts the pretrained model (FrozenBatchNorm2d in the MobileNet)
    count -= sum(p.numel() for mod in m.backbone.body.modules()
                 if isinstance(mod, nn.BatchNorm2d) for p in mod.parameters())
    assert count == 19386354
    assert m.rpn.score_thresh == 0.05
    if builder.endswith("320_fpn"):
        assert (m.transform.min_size, m.transform.max_size) == ((320,), 640)
        assert m.rpn._pre_nms_top_n["testing"] == 150
    # weights= a state dict builds the same model without the backbone download
    sd = m.state_dict()
    m2 = getattr(D, builder)(weights=sd, num_classes=91)
    k = "backbone.fpn.layer_blocks.0.0.weight"
    np.testing.assert_array_equal(m2.state_dict()[k].numpy(), sd[k].numpy())
    with pytest.raises(ValueError, match="Trainable"):
        getattr(D, builder)(weights=None, weights_backbone="DEFAULT", trainable_backbone_layers=7)
    with pytest.raises(ValueError, match="num_classes"):
        getattr(D, builder)(weights="DEFAULT", num_classes=5)


def models_get_weights(name):
    from fiamma.vision import models
    assert name in models.list_models()
    return models.get_model_weights(name)


@pytest.mark.parity
def test_mobilenet_v3_fpn_faster_rcnn_matches_torchvision():
    # the builders' backbone (mobilenet_backbone with FPN) and anchors, with a small box head
    torch = pytest.importorskip("torch")
    tvd = pytest.importorskip("torchvision.models.detection")
    from torchvision.models.detection import faster_rcnn as tfr
    from torchvision.models.detection.backbone_utils import mobilenet_backbone as tmb

    from fiamma.vision.models.detection.backbone_utils import mobilenet_backbone
    torch.manual_seed(0)
    bkw = dict(backbone_name="mobilenet_v3_large", weights=None, fpn=True, trainable_layers=6)
    sizes, ratios = ((32, 64, 128, 256, 512),) * 3, ((0.5, 1.0, 2.0),) * 3
    kw = dict(min_size=96, max_size=128, rpn_batch_size_per_image=_BIG,
              box_batch_size_per_image=_BIG)
    tm = tvd.FasterRCNN(tmb(norm_layer=torch.nn.BatchNorm2d, **bkw),
                        rpn_anchor_generator=tvd.anchor_utils.AnchorGenerator(sizes, ratios),
                        box_head=tfr.TwoMLPHead(256 * 49, 64),
                        box_predictor=tfr.FastRCNNPredictor(64, 4), **kw)
    fm = D.FasterRCNN(mobilenet_backbone(norm_layer=nn.BatchNorm2d, **bkw),
                      rpn_anchor_generator=D.AnchorGenerator(sizes, ratios),
                      box_head=D.TwoMLPHead(256 * 49, 64),
                      box_predictor=D.FastRCNNPredictor(64, 4), **kw)
    _compare_with_torchvision(torch, tm, fm, *_sample())


@pytest.mark.parity
@pytest.mark.slow
@pytest.mark.parametrize("builder", ["fasterrcnn_mobilenet_v3_large_fpn",
                                     "fasterrcnn_mobilenet_v3_large_320_fpn"])
def test_mobilenet_v3_builders_match_torchvision(builder):
    torch = pytest.importorskip("torch")
    tvd = pytest.importorskip("torchvision.models.detection")
    torch.manual_seed(0)
    kw = dict(weights=None, weights_backbone=None, num_classes=4, min_size=96, max_size=128,
              rpn_batch_size_per_image=_BIG, box_batch_size_per_image=_BIG,
              rpn_score_thresh=0.0)
    _compare_with_torchvision(torch, getattr(tvd, builder)(**kw), getattr(D, builder)(**kw),
                              *_sample())
