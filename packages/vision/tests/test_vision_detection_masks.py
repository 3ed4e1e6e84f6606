"""Mask R-CNN and Keypoint R-CNN (fiamma.vision.models.detection): the mask/keypoint target,
loss and decoding functions against hand-computed values; small models end to end in eval and
training; and (marked ``parity``) the same models against torchvision with the same weights in
float64: detections with masks/keypoints in eval, losses and every gradient in training."""
import math
from collections import OrderedDict

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
from fiamma.vision.models.detection import roi_heads as R
from fiamma.vision.ops import MultiScaleRoIAlign

_BIG = 10 ** 6      # sample every anchor/proposal, so the losses do not depend on the RNG


def test_keypoints_to_heatmap_by_hand():
    rois = fiamma.tensor([[10., 20., 30., 60.]], dtype=fiamma.float64)
    # x: 10 -> cell 0; 29.9 -> floor(19.9 * 4 / 20) = 3; 30 (right edge) -> 3; 5 -> outside
    kps = fiamma.tensor([[[10., 20., 1.], [29.9, 59., 2.], [30., 60., 1.], [5., 30., 1.],
                          [15., 30., 0.]]], dtype=fiamma.float64)
    hm, valid = R.keypoints_to_heatmap(kps, rois, 4)
    # y: 20 -> 0; 59 -> floor(39 * 4 / 40) = 3; 60 (bottom edge) -> 3; 30 -> 1
    assert valid.tolist() == [[1, 1, 1, 0, 0]]
    assert hm.tolist() == [[0, 3 * 4 + 3, 3 * 4 + 3, 0, 0]]
    assert hm.dtype == fiamma.int64


def test_heatmaps_to_keypoints_peak():
    maps = fiamma.zeros((1, 2, 8, 8), dtype=fiamma.float64)
    maps[0, 0, 2, 5] = 10.0
    maps[0, 1, 7, 0] = 3.0
    rois = fiamma.tensor([[4., 6., 20., 22.]], dtype=fiamma.float64)   # 16 x 16 pixels
    xy, scores = R.heatmaps_to_keypoints(maps, rois)
    assert tuple(xy.shape) == (1, 2, 3) and tuple(scores.shape) == (1, 2)
    # the 8x8 map is resized to 16x16; the peak of cell (2, 5) lands on pixels 4-5 / 10-11
    x, y = xy[0, 0, 0].item(), xy[0, 0, 1].item()
    assert 4 + 10 <= x <= 4 + 12 and 6 + 4 <= y <= 6 + 6
    assert xy[0, :, 2].tolist() == [1.0, 1.0]
    assert scores[0, 0].item() > 5.0 and scores[0, 1].item() > 1.0
    empty_xy, empty_s = R.heatmaps_to_keypoints(maps[:0], rois[:0])
    assert tuple(empty_xy.shape) == (0, 2, 3) and tuple(empty_s.shape) == (0, 2)


def test_paste_masks_in_image_by_hand():
    # a constant mask pastes as a filled (expanded) box, zero elsewhere
    out = R.paste_masks_in_image(fiamma.ones(2, 1, 28, 28, dtype=fiamma.float64),
                                 fiamma.tensor([[2., 3., 10., 12.], [-5., -5., 4., 3.]],
                                               dtype=fiamma.float64), (16, 20))
    assert tuple(out.shape) == (2, 1, 16, 20) and out.dtype == fiamma.float64
    o = out.numpy()[:, 0]
    # box 0 grows by 30/28 about its centre (6, 7.5): int(1.71, 2.68, 10.29, 12.32) = (1, 2, 10, 12)
    assert (o[0, :2].max(), o[0, 13:].max(), o[0, :, :1].max(), o[0, :, 11:].max()) == (0,) * 4
    np.testing.assert_allclose(o[0, 4:11, 3:9], 1.0)
    # box 1 is cut at the image's top-left corner
    assert o[1, 0, 0] > 0.5 and o[1, 6:].max() == 0 and o[1, :, 6:].max() == 0
    assert tuple(R.paste_masks_in_image(fiamma.zeros(0, 1, 28, 28), fiamma.zeros(0, 4),
                                        (5, 6)).shape) == (0, 1, 5, 6)


def test_mask_and_keypoint_losses_by_hand():
    # one positive proposal on gt mask 0 of class 2: BCE of its class-2 logits
    masks = fiamma.zeros((1, 8, 8), dtype=fiamma.uint8)
    masks[0, :, :4] = 1
    props = fiamma.tensor([[0., 0., 8., 8.]], dtype=fiamma.float64)
    logits = fiamma.zeros((1, 3, 2, 2), dtype=fiamma.float64)
    logits[0, 2] = 4.0
    loss = R.maskrcnn_loss(logits, [props], [masks], [fiamma.tensor([2])],
                           [fiamma.tensor([0])])
    # RoIAlign targets: the left bins sample x = 0.5, 1.5, 2.5, 3.5, the last half on the
    # mask's edge -> 0.875; the right bins 0. BCE(x, t) = t log(1+e^-x) + (1-t) log(1+e^x)
    t = 0.875
    left = t * math.log1p(math.exp(-4)) + (1 - t) * math.log1p(math.exp(4))
    want = (2 * left + 2 * math.log1p(math.exp(4))) / 4
    assert abs(loss.item() - want) < 1e-12
    empty = R.maskrcnn_loss(logits[:0].requires_grad_(), [props[:0]], [masks],
                            [fiamma.tensor([2])], [fiamma.zeros((0,), dtype=fiamma.int64)])
    assert empty.item() == 0.0 and empty.requires_grad
    # keypoints: one visible keypoint in cell (1, 0) of a 2x2 heatmap
    kl = fiamma.zeros((1, 2, 2, 2), dtype=fiamma.float64)
    kl[0, 0, 1, 0] = 2.0
    kps = fiamma.tensor([[[1., 6., 1.], [0., 0., 0.]]])
    loss = R.keypointrcnn_loss(kl, [props], [kps], [fiamma.tensor([0])])
    want = -(2.0 - math.log(math.exp(2.0) + 3))
    assert abs(loss.item() - want) < 1e-12
    with pytest.raises(ValueError, match="height and width"):
        R.keypointrcnn_loss(fiamma.zeros((1, 2, 2, 3)), [props], [kps], [fiamma.tensor([0])])


class _TinyBackbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=4, padding=1)
        self.out_channels = 8

    def forward(self, x):
        return fiamma.relu(self.conv(x))


def _tiny_kw():
    return dict(min_size=64, max_size=96, box_score_thresh=0.0, box_detections_per_img=8,
                rpn_anchor_generator=D.AnchorGenerator(((16, 32),), ((0.5, 1.0, 2.0),)),
                box_roi_pool=MultiScaleRoIAlign(["0"], 7, 2))


def _targets(with_masks=False, with_kps=False, sizes=((48, 64), (64, 40))):
    boxes = [fiamma.tensor([[4., 6., 30., 40.]]),
             fiamma.tensor([[2., 2., 20., 30.], [10., 20., 38., 60.]])]
    labels = [fiamma.tensor([1]), fiamma.tensor([2, 1])]
    out = []
    for b, lab, (h, w) in zip(boxes, labels, sizes):
        t = {"boxes": b, "labels": lab}
        if with_masks:
            m = np.zeros((len(b), h, w), np.uint8)
            for i, (x1, y1, x2, y2) in enumerate(b.numpy().astype(int)):
                m[i, y1:y2, x1:(x1 + x2) // 2] = 1
            t["masks"] = fiamma.from_numpy(m)
        if with_kps:
            bb = b.numpy()
            k = np.stack([(bb[:, 0] + bb[:, 2]) / 2, (bb[:, 1] + bb[:, 3]) / 2,
                          np.full(len(bb), 2.0)], axis=1)[:, None]
            k = np.concatenate([k, k * [1, 1, 0], k - [1, 1, 0]], axis=1)
            t["keypoints"] = fiamma.from_numpy(k.astype(np.float32))
        out.append(t)
    return out


def test_small_mask_rcnn_eval_and_train():
    fiamma.manual_seed(0)
    m = D.MaskRCNN(_TinyBackbone(), num_classes=None, box_predictor=D.FastRCNNPredictor(1024, 3),
                   mask_roi_pool=MultiScaleRoIAlign(["0"], 14, 2),
                   mask_head=D.MaskRCNNHeads(8, (8, 8), 1),
                   mask_predictor=D.MaskRCNNPredictor(8, 8, 3), **_tiny_kw())
    imgs = [fiamma.rand(3, 48, 64), fiamma.rand(3, 64, 40)]
    m.eval()
    with fiamma.no_grad():
        out = m(imgs)
    for o, img in zip(out, imgs):
        assert set(o) == {"boxes", "labels", "scores", "masks"}
        n = len(o["boxes"])
        assert 0 < n <= 8 and tuple(o["masks"].shape) == (n, 1) + tuple(img.shape[-2:])
        mk = o["masks"].numpy()
        assert mk.min() >= 0 and mk.max() <= 1
    m.train()
    losses = m(imgs, _targets(with_masks=True))
    assert set(losses) == {"loss_classifier", "loss_box_reg", "loss_objectness",
                           "loss_rpn_box_reg", "loss_mask"}
    sum(losses.values()).backward()
    g = m.roi_heads.mask_predictor.mask_fcn_logits.weight.grad
    assert g is not None and g.abs().sum().item() > 0
    with pytest.raises(ValueError, match="masks"):
        m(imgs, _targets())
    empty = [{"boxes": fiamma.zeros((0, 4)), "labels": fiamma.zeros((0,), dtype=fiamma.int64),
              "masks": fiamma.zeros((0, 48, 64), dtype=fiamma.uint8)}]
    assert m(imgs[:1], empty)["loss_mask"].item() == 0.0


def test_small_keypoint_rcnn_eval_and_train():
    fiamma.manual_seed(0)
    m = D.KeypointRCNN(_TinyBackbone(), num_classes=3,
                       keypoint_roi_pool=MultiScaleRoIAlign(["0"], 14, 2),
                       keypoint_head=D.KeypointRCNNHeads(8, (8, 8)),
                       keypoint_predictor=D.KeypointRCNNPredictor(8, 3), **_tiny_kw())
    imgs = [fiamma.rand(3, 48, 64), fiamma.rand(3, 64, 40)]
    m.eval()
    with fiamma.no_grad():
        out = m(imgs)
    for o, img in zip(out, imgs):
        assert set(o) == {"boxes", "labels", "scores", "keypoints", "keypoints_scores"}
        n = len(o["boxes"])
        assert tuple(o["keypoints"].shape) == (n, 3, 3)
        assert tuple(o["keypoints_scores"].shape) == (n, 3)
        kp, b = o["keypoints"].numpy(), o["boxes"].numpy()
        # each keypoint lies in its box (heatmap cells map inside the RoI)
        assert (kp[..., 0] >= b[:, :1] - 1e-4).all() and (kp[..., 0] <= b[:, 2:3] + 1).all()
    m.train()
    losses = m(imgs, _targets(with_kps=True))
    assert "loss_keypoint" in losses and math.isfinite(losses["loss_keypoint"].item())
    sum(losses.values()).backward()
    g = m.roi_heads.keypoint_predictor.kps_score_lowres.weight.grad
    assert g is not None and g.abs().sum().item() > 0
    with pytest.raises(ValueError, match="keypoints"):
        m(imgs, _targets())
    bad = _targets(with_kps=True)
    bad[0]["keypoints"] = bad[0]["keypoints"].to(fiamma.int64)
    with pytest.raises(TypeError, match="keypoints"):
        m(imgs, bad)


def test_builders_errors_weights_and_registry(tmp_path):
    from fiamma.vision import models
    for name, enum in [("maskrcnn_resnet50_fpn", D.MaskRCNN_ResNet50_FPN_Weights),
                       ("maskrcnn_resnet50_fpn_v2", D.MaskRCNN_ResNet50_FPN_V2_Weights),
                       ("keypointrcnn_resnet50_fpn", D.KeypointRCNN_ResNet50_FPN_Weights)]:
        assert name in models.list_models()
        assert models.get_model_weights(name) is enum
    w = D.KeypointRCNN_ResNet50_FPN_Weights.DEFAULT
    assert w is D.KeypointRCNN_ResNet50_FPN_Weights.COCO_V1
    assert len(w.meta["keypoint_names"]) == 17 and w.meta["categories"] == ["no person",
                                                                            "person"]
    assert D.MaskRCNN_ResNet50_FPN_Weights.COCO_V1.meta["num_params"] == 44401393
    with pytest.raises(ValueError, match="num_keypoints"):
        D.keypointrcnn_resnet50_fpn(weights="DEFAULT", num_keypoints=5)
    with pytest.raises(ValueError, match="num_classes"):
        D.maskrcnn_resnet50_fpn(weights="COCO_V1", num_classes=3)
    with pytest.raises(TypeError, match="MaskRCNN_ResNet50_FPN_Weights"):
        D.maskrcnn_resnet50_fpn(weights=3)
    with pytest.raises(FileNotFoundError, match="no weights file"):
        D.maskrcnn_resnet50_fpn_v2(weights=str(tmp_path / "missing.pth"))
    with pytest.raises(TypeError, match="mask_roi_pool"):
        D.MaskRCNN(_TinyBackbone(), num_classes=2, mask_roi_pool=nn.Identity())
    with pytest.raises(ValueError, match="num_keypoints"):
        D.KeypointRCNN(_TinyBackbone(), num_classes=2, num_keypoints=3,
                       keypoint_predictor=D.KeypointRCNNPredictor(8, 3))


def test_mask_heads_load_version1_keys():
    heads = D.MaskRCNNHeads(4, (5, 6), 1)
    old = OrderedDict((f"mask_fcn{i + 1}.{k}", v) for i, blk in enumerate(heads)
                      for k, v in blk[0].state_dict().items())
    fiamma.manual_seed(1)
    fresh = D.MaskRCNNHeads(4, (5, 6), 1)
    old._metadata = OrderedDict({"": {"version": 1}})
    fresh.load_state_dict(old)
    np.testing.assert_array_equal(fresh[1][0].weight.detach().numpy(),
                                  heads[1][0].weight.detach().numpy())


@pytest.mark.parametrize("builder,n", [("maskrcnn_resnet50_fpn", 44401393),
                                       ("maskrcnn_resnet50_fpn_v2", 46359409),
                                       ("keypointrcnn_resnet50_fpn", 59137258)])
def test_num_params_equal_meta_and_state_dict_weights(builder, n):
    m = getattr(D, builder)(weights=None, weights_backbone=None)
    count = sum(p.numel() for p in m.parameters())
    if not builder.endswith("_v2"):
        # the meta counts the pretrained model, whose ResNet has FrozenBatchNorm2d (buffers)
        count -= sum(p.numel() for mod in m.backbone.body.modules()
                     if isinstance(mod, nn.BatchNorm2d) for p in mod.parameters())
    assert count == n
    if builder == "keypointrcnn_resnet50_fpn":
        # weights= a state dict: the whole model loads from it, no backbone download
        sd = m.state_dict()
        m2 = getattr(D, builder)(weights=sd)
        k = "roi_heads.keypoint_predictor.kps_score_lowres.weight"
        np.testing.assert_array_equal(m2.state_dict()[k].numpy(), sd[k].numpy())


# ---------------------------------------------------------------- parity with torchvision

def _to_torch(torch, t):
    return {k: torch.from_numpy(np.ascontiguousarray(v.numpy())) for k, v in t.items()}


def _compare(torch, tm, fm, imgs, targets, extra):
    """Same weights (copied by key from torchvision's random init), float64: eval detections
    (and the ``extra`` outputs) equal; training losses and every gradient equal."""
    tm, fm, to, fo = eval_with_same_weights(torch, tm, fm, imgs)
    for a, b in zip(to, fo):
        assert set(a) == set(b)
        assert_same_detections(a, b)
        for k, tol in extra.items():
            # torchvision decodes keypoints in float32 whatever the model's dtype
            np.testing.assert_allclose(b[k].numpy(), a[k].numpy().astype(np.float64),
                                       rtol=tol, atol=tol, err_msg=k)
    tm.train()
    fm.train()
    tl = tm([torch.from_numpy(i) for i in imgs], [_to_torch(torch, t) for t in targets])
    fl = fm([fiamma.from_numpy(i) for i in imgs], targets)
    # PyTorch's BCE-with-logits of float64 logits against float32 RPN labels is ~1e-8 off; the
    # keypoint predictor's bias has a zero gradient in exact arithmetic (each heatmap's
    # softmax-minus-one-hot sums to zero)
    assert_same_training_step(tl, fl, tm, fm, loss_rtol=1e-6)


def _sample(with_masks=False, with_kps=False):
    rs = np.random.RandomState(0)
    imgs = [rs.rand(3, 60, 76), rs.rand(3, 70, 54)]
    boxes = [np.array([[10., 12., 60., 50.], [30., 5., 70., 40.]]),
             np.array([[5., 8., 40., 60.]])]
    labels = [np.array([1, 3]), np.array([2])]
    targets = []
    for img, b, lab in zip(imgs, boxes, labels):
        t = {"boxes": fiamma.from_numpy(b), "labels": fiamma.from_numpy(lab)}
        h, w = img.shape[1:]
        if with_masks:
            yy, xx = np.mgrid[:h, :w]
            m = np.stack([((xx - (x1 + x2) / 2) ** 2 / ((x2 - x1) / 2) ** 2
                           + (yy - (y1 + y2) / 2) ** 2 / ((y2 - y1) / 2) ** 2 <= 1)
                          for x1, y1, x2, y2 in b]).astype(np.uint8)
            t["masks"] = fiamma.from_numpy(m)
        if with_kps:
            k = rs.uniform(0, 1, (len(b), 4, 2)) * (b[:, None, 2:] - b[:, None, :2]) \
                + b[:, None, :2]
            vis = rs.randint(0, 3, (len(b), 4, 1))
            t["keypoints"] = fiamma.from_numpy(np.concatenate([k, vis], -1).astype(np.float32))
        targets.append(t)
    return imgs, targets


def _r18_backbones(torch):
    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone as tv_rfb

    from fiamma.vision.models.detection.backbone_utils import resnet_fpn_backbone
    kw = dict(backbone_name="resnet18", weights=None, trainable_layers=5)
    return (tv_rfb(norm_layer=torch.nn.BatchNorm2d, **kw),
            resnet_fpn_backbone(norm_layer=nn.BatchNorm2d, **kw))


def _box_heads(torch, mod):
    """A small box head (64 features) and its predictor for 4 classes."""
    if torch is not None:
        from torchvision.models.detection import faster_rcnn as mod
    return dict(box_head=mod.TwoMLPHead(256 * 49, 64),
                box_predictor=mod.FastRCNNPredictor(64, 4))


_KW = dict(min_size=64, max_size=96, rpn_batch_size_per_image=_BIG,
           box_batch_size_per_image=_BIG, rpn_pre_nms_top_n_test=100, rpn_post_nms_top_n_test=40,
           rpn_pre_nms_top_n_train=100, rpn_post_nms_top_n_train=40, box_detections_per_img=12)


@pytest.mark.parity
def test_functions_match_torchvision():
    torch = pytest.importorskip("torch")
    tr = pytest.importorskip("torchvision.models.detection.roi_heads")
    rs = np.random.RandomState(3)
    masks = rs.rand(6, 1, 28, 28)
    xy = rs.uniform(-10, 50, (6, 2))
    boxes = np.concatenate([xy, xy + rs.uniform(1, 40, (6, 2))], 1)
    want = tr.paste_masks_in_image(torch.from_numpy(masks), torch.from_numpy(boxes), (45, 52))
    got = R.paste_masks_in_image(fiamma.from_numpy(masks), fiamma.from_numpy(boxes), (45, 52))
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12)
    maps = rs.randn(6, 5, 56, 56)
    txy, ts = tr.heatmaps_to_keypoints(torch.from_numpy(maps), torch.from_numpy(boxes))
    fxy, fs = R.heatmaps_to_keypoints(fiamma.from_numpy(maps), fiamma.from_numpy(boxes))
    np.testing.assert_allclose(fxy.numpy(), txy.numpy(), rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(fs.numpy(), ts.numpy(), rtol=1e-6)
    kps = np.concatenate([rs.uniform(-10, 90, (6, 5, 2)), rs.randint(0, 3, (6, 5, 1))], -1)
    kps[0, 0, :2] = boxes[0, 2:]                      # on the right/bottom edge
    th, tv = tr.keypoints_to_heatmap(torch.from_numpy(kps), torch.from_numpy(boxes), 56)
    fh, fv = R.keypoints_to_heatmap(fiamma.from_numpy(kps), fiamma.from_numpy(boxes), 56)
    np.testing.assert_array_equal(fh.numpy(), th.numpy())
    np.testing.assert_array_equal(fv.numpy(), tv.numpy())
    gt = (rs.rand(3, 40, 60) > 0.5).astype(np.uint8)
    idx = np.array([0, 2, 1, 1, 0, 2])
    tp = tr.project_masks_on_boxes(torch.from_numpy(gt), torch.from_numpy(boxes),
                                   torch.from_numpy(idx), 28)
    fp = R.project_masks_on_boxes(fiamma.from_numpy(gt), fiamma.from_numpy(boxes),
                                  fiamma.from_numpy(idx), 28)
    np.testing.assert_allclose(fp.numpy(), tp.numpy(), atol=1e-12)


@pytest.mark.parity
def test_mask_rcnn_resnet18_fpn_matches_torchvision():
    torch = pytest.importorskip("torch")
    tvd = pytest.importorskip("torchvision.models.detection")
    from torchvision.models.detection.mask_rcnn import MaskRCNNHeads as TvHeads
    torch.manual_seed(0)
    tb, fb = _r18_backbones(torch)
    tm = tvd.MaskRCNN(tb, mask_head=TvHeads(256, (16, 16), 1),
                      mask_predictor=tvd.mask_rcnn.MaskRCNNPredictor(16, 16, 4),
                      **_box_heads(torch, tvd), **_KW)
    fm = D.MaskRCNN(fb, mask_head=D.MaskRCNNHeads(256, (16, 16), 1),
                    mask_predictor=D.MaskRCNNPredictor(16, 16, 4), **_box_heads(None, D),
                    **_KW)
    _compare(torch, tm, fm, *_sample(with_masks=True), {"masks": 1e-9})


@pytest.mark.parity
def test_keypoint_rcnn_resnet18_fpn_matches_torchvision():
    torch = pytest.importorskip("torch")
    tvd = pytest.importorskip("torchvision.models.detection")
    from torchvision.models.detection import keypoint_rcnn as tk
    torch.manual_seed(0)
    tb, fb = _r18_backbones(torch)
    tm = tvd.KeypointRCNN(tb, keypoint_head=tk.KeypointRCNNHeads(256, (16, 16)),
                          keypoint_predictor=tk.KeypointRCNNPredictor(16, 4),
                          **_box_heads(torch, tvd), **_KW)
    fm = D.KeypointRCNN(fb, keypoint_head=D.KeypointRCNNHeads(256, (16, 16)),
                        keypoint_predictor=D.KeypointRCNNPredictor(16, 4), **_box_heads(None, D),
                        **_KW)
    _compare(torch, tm, fm, *_sample(with_kps=True),
             {"keypoints": 1e-5, "keypoints_scores": 1e-6})


@pytest.mark.parity
@pytest.mark.slow
@pytest.mark.parametrize("builder", ["maskrcnn_resnet50_fpn", "maskrcnn_resnet50_fpn_v2",
                                     "keypointrcnn_resnet50_fpn"])
def test_builders_match_torchvision(builder):
    torch = pytest.importorskip("torch")
    tvd = pytest.importorskip("torchvision.models.detection")
    torch.manual_seed(0)
    kw = dict(weights=None, weights_backbone=None, num_classes=4, **_KW)
    kp = builder.startswith("keypoint")
    if kp:
        kw["num_keypoints"] = 4
    extra = ({"keypoints": 1e-5, "keypoints_scores": 1e-6} if kp else {"masks": 1e-9})
    _compare(torch, getattr(tvd, builder)(**kw), getattr(D, builder)(**kw),
             *_sample(with_masks=not kp, with_kps=kp), extra)
