"""fiamma.vision.ops box operations, NMS and detection losses against float64 loops written
here, numerical gradients, and (marked ``parity``) torchvision.ops."""
import math

import numpy as np
import pytest

import fiamma
from fiamma.vision import ops


def _boxes(n, seed, scale=50.0):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, scale, (n, 2))
    wh = rng.uniform(1, scale / 2, (n, 2))
    return np.concatenate([xy, xy + wh], 1)


def _t(a):
    return fiamma.from_numpy(np.ascontiguousarray(a))


def _iou_ref(a, b):
    out = np.zeros((len(a), len(b)))
    for i, p in enumerate(a):
        for j, q in enumerate(b):
            w = max(0.0, min(p[2], q[2]) - max(p[0], q[0]))
            h = max(0.0, min(p[3], q[3]) - max(p[1], q[1]))
            inter = w * h
            union = (p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - inter
            out[i, j] = inter / union
    return out


def _enclose(p, q):
    return min(p[0], q[0]), min(p[1], q[1]), max(p[2], q[2]), max(p[3], q[3])


def _giou_ref(a, b):
    iou = _iou_ref(a, b)
    out = np.zeros_like(iou)
    for i, p in enumerate(a):
        for j, q in enumerate(b):
            x1, y1, x2, y2 = _enclose(p, q)
            c = (x2 - x1) * (y2 - y1)
            w = max(0.0, min(p[2], q[2]) - max(p[0], q[0]))
            h = max(0.0, min(p[3], q[3]) - max(p[1], q[1]))
            union = (p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - w * h
            out[i, j] = iou[i, j] - (c - union) / c
    return out


def _diou_ciou_ref(a, b, eps=1e-7):
    iou = _iou_ref(a, b)
    d = np.zeros_like(iou)
    c = np.zeros_like(iou)
    for i, p in enumerate(a):
        for j, q in enumerate(b):
            x1, y1, x2, y2 = _enclose(p, q)
            diag = (x2 - x1) ** 2 + (y2 - y1) ** 2 + eps
            cd = ((p[0] + p[2]) / 2 - (q[0] + q[2]) / 2) ** 2 + \
                 ((p[1] + p[3]) / 2 - (q[1] + q[3]) / 2) ** 2
            d[i, j] = iou[i, j] - cd / diag
            v = 4 / math.pi ** 2 * (math.atan((q[2] - q[0]) / (q[3] - q[1]))
                                    - math.atan((p[2] - p[0]) / (p[3] - p[1]))) ** 2
            alpha = v / (1 - iou[i, j] + v + eps)
            c[i, j] = d[i, j] - alpha * v
    return d, c


def _nms_ref(b, s, thr):
    order = sorted(range(len(s)), key=lambda i: (-s[i], i))
    keep, dead = [], set()
    iou = _iou_ref(b, b)
    for i in order:
        if i in dead:
            continue
        keep.append(i)
        for j in order:
            if j not in dead and j != i and iou[i, j] > thr:
                dead.add(j)
    return keep


def test_iou_family_vs_loops():
    a, b = _boxes(7, 0), _boxes(5, 1)
    np.testing.assert_allclose(ops.box_iou(_t(a), _t(b)).numpy(), _iou_ref(a, b), rtol=1e-12)
    np.testing.assert_allclose(ops.generalized_box_iou(_t(a), _t(b)).numpy(), _giou_ref(a, b),
                               rtol=1e-12, atol=1e-14)
    d, c = _diou_ciou_ref(a, b)
    np.testing.assert_allclose(ops.distance_box_iou(_t(a), _t(b)).numpy(), d, rtol=1e-12,
                               atol=1e-14)
    np.testing.assert_allclose(ops.complete_box_iou(_t(a), _t(b)).numpy(), c, rtol=1e-12,
                               atol=1e-14)
    area = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    np.testing.assert_allclose(ops.box_area(_t(a)).numpy(), area, rtol=1e-12)
    ib = fiamma.tensor([[0, 0, 3, 4]], dtype=fiamma.int64)
    assert ops.box_area(ib).tolist() == [12]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nms_vs_greedy_loop(dtype):
    rng = np.random.default_rng(3)
    b = _boxes(200, 2, scale=100.0)
    s = rng.uniform(0, 1, 200)
    s[10] = s[20]       # a tie: lower index first
    for thr in (0.0, 0.3, 0.5, 0.9):
        keep = ops.nms(_t(b.astype(dtype)), _t(s.astype(dtype)), thr).tolist()
        ref = _nms_ref(b.astype(dtype).astype(np.float64), s.astype(dtype), thr)
        assert keep == ref, thr
    out = ops.nms(fiamma.zeros((0, 4)), fiamma.zeros(0), 0.5)
    assert out.dtype == fiamma.int64 and out.shape == (0,)


def test_nms_errors():
    with pytest.raises(ValueError, match="nms"):
        ops.nms(fiamma.zeros((3, 5)), fiamma.zeros(3), 0.5)
    with pytest.raises(ValueError, match="nms"):
        ops.nms(fiamma.zeros((3, 4)), fiamma.zeros(2), 0.5)
    with pytest.raises(TypeError, match="nms"):
        ops.nms(fiamma.zeros((3, 4), dtype=fiamma.int64), fiamma.zeros(3), 0.5)
    with pytest.raises(ValueError, match="NaN"):
        ops.nms(fiamma.zeros((2, 4)), fiamma.tensor([0.5, float("nan")]), 0.5)


def test_batched_nms_per_category():
    b = _boxes(60, 4)
    s = np.random.default_rng(5).uniform(0, 1, 60)
    cats = np.random.default_rng(6).integers(0, 3, 60)
    keep = ops.batched_nms(_t(b), _t(s), _t(cats), 0.4).tolist()
    ref = []
    for c in range(3):
        idx = np.where(cats == c)[0]
        ref += [int(idx[k]) for k in _nms_ref(b[idx], s[idx], 0.4)]
    ref.sort(key=lambda i: (-s[i], i))
    assert keep == ref
    assert ops.batched_nms(fiamma.zeros((0, 4)), fiamma.zeros(0),
                           fiamma.zeros(0, dtype=fiamma.int64), 0.5).shape == (0,)


def test_convert_clip_remove_masks():
    b = _boxes(6, 7)
    for fmt in ("xywh", "cxcywh"):
        there = ops.box_convert(_t(b), "xyxy", fmt)
        np.testing.assert_allclose(ops.box_convert(there, fmt, "xyxy").numpy(), b, rtol=1e-12)
    xywh = ops.box_convert(_t(b), "xyxy", "xywh").numpy()
    np.testing.assert_allclose(xywh[:, 2:], b[:, 2:] - b[:, :2], rtol=1e-12)
    cx = ops.box_convert(_t(b), "xyxy", "cxcywh").numpy()
    np.testing.assert_allclose(cx[:, :2], (b[:, :2] + b[:, 2:]) / 2, rtol=1e-12)
    with pytest.raises(ValueError, match="box_convert"):
        ops.box_convert(_t(b), "xyxy", "xywhr")
    c = ops.clip_boxes_to_image(_t(np.array([[-5.0, 3, 70, 90]])), (40, 60)).tolist()
    assert c == [[0.0, 3.0, 60.0, 40.0]]
    small = np.array([[0, 0, 1, 5], [0, 0, 5, 5], [0, 0, 5, 0.5]], dtype=np.float64)
    assert ops.remove_small_boxes(_t(small), 2.0).tolist() == [1]
    masks = np.zeros((2, 6, 7), dtype=np.uint8)
    masks[0, 1:4, 2:6] = 1
    masks[1, 5, 0] = 1
    assert ops.masks_to_boxes(_t(masks)).tolist() == [[2, 1, 5, 3], [0, 5, 0, 5]]
    masks[1] = 0
    with pytest.raises(ValueError, match="mask 1"):
        ops.masks_to_boxes(_t(masks))


def _pair_losses_ref(a, b, eps=1e-7):
    g, d, c = [], [], []
    for p, q in zip(a, b):
        iou = _iou_ref(p[None], q[None])[0, 0]
        x1, y1, x2, y2 = _enclose(p, q)
        area_c = (x2 - x1) * (y2 - y1)
        w = max(0.0, min(p[2], q[2]) - max(p[0], q[0]))
        h = max(0.0, min(p[3], q[3]) - max(p[1], q[1]))
        union = (p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - w * h
        iou = w * h / (union + eps)
        g.append(1 - (iou - (area_c - union) / (area_c + eps)))
        diag = (x2 - x1) ** 2 + (y2 - y1) ** 2 + eps
        cd = ((p[0] + p[2]) / 2 - (q[0] + q[2]) / 2) ** 2 + \
             ((p[1] + p[3]) / 2 - (q[1] + q[3]) / 2) ** 2
        d.append(1 - iou + cd / diag)
        v = 4 / math.pi ** 2 * (math.atan((q[2] - q[0]) / (q[3] - q[1]))
                                - math.atan((p[2] - p[0]) / (p[3] - p[1]))) ** 2
        c.append(d[-1] + v / (1 - iou + v + eps) * v)
    return np.array(g), np.array(d), np.array(c)


def test_box_losses_vs_loops_and_reductions():
    a, b = _boxes(9, 8), _boxes(9, 9)
    g, d, c = _pair_losses_ref(a, b)
    np.testing.assert_allclose(ops.generalized_box_iou_loss(_t(a), _t(b)).numpy(), g,
                               rtol=1e-12)
    np.testing.assert_allclose(ops.distance_box_iou_loss(_t(a), _t(b)).numpy(), d, rtol=1e-12)
    np.testing.assert_allclose(ops.complete_box_iou_loss(_t(a), _t(b)).numpy(), c, rtol=1e-12)
    np.testing.assert_allclose(
        ops.generalized_box_iou_loss(_t(a), _t(b), reduction="mean").item(), g.mean())
    np.testing.assert_allclose(
        ops.complete_box_iou_loss(_t(a), _t(b), reduction="sum").item(), c.sum())
    e = ops.generalized_box_iou_loss(fiamma.zeros((0, 4)), fiamma.zeros((0, 4)), "mean")
    assert e.item() == 0.0
    with pytest.raises(ValueError, match="reduction"):
        ops.distance_box_iou_loss(_t(a), _t(b), reduction="avg")


def test_sigmoid_focal_loss_vs_numpy():
    rng = np.random.default_rng(10)
    x = rng.standard_normal((4, 5))
    y = (rng.uniform(size=(4, 5)) > 0.5).astype(np.float64)
    p = 1 / (1 + np.exp(-x))
    ce = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    p_t = p * y + (1 - p) * (1 - y)
    ref = (0.25 * y + 0.75 * (1 - y)) * ce * (1 - p_t) ** 2
    np.testing.assert_allclose(ops.sigmoid_focal_loss(_t(x), _t(y)).numpy(), ref, rtol=1e-10)
    np.testing.assert_allclose(ops.sigmoid_focal_loss(_t(x), _t(y), alpha=-1, gamma=1,
                                                      reduction="sum").item(),
                               (ce * (1 - p_t)).sum(), rtol=1e-10)
    with pytest.raises(ValueError, match="sigmoid_focal_loss"):
        ops.sigmoid_focal_loss(_t(x), _t(y), reduction="bad")


def test_loss_gradients_numerical():
    a, b = _boxes(4, 11), _boxes(4, 12)
    for fn in (ops.generalized_box_iou_loss, ops.distance_box_iou_loss):
        x = _t(a.copy()).requires_grad_()
        fn(x, _t(b), reduction="sum").backward()
        num = np.zeros_like(a)
        h = 1e-6
        for idx in np.ndindex(*a.shape):
            ap, am = a.copy(), a.copy()
            ap[idx] += h
            am[idx] -= h
            num[idx] = (fn(_t(ap), _t(b), reduction="sum").item()
                        - fn(_t(am), _t(b), reduction="sum").item()) / (2 * h)
        np.testing.assert_allclose(x.grad.numpy(), num, rtol=1e-5, atol=1e-7)
    x = _t(a.copy()).requires_grad_()
    ops.box_iou(x, _t(b)).sum().backward()
    assert np.isfinite(x.grad.numpy()).all()


# ---------------------------------------------------------------------------- parity

@pytest.mark.parity
def test_box_ops_and_losses_match_torchvision():
    torch = pytest.importorskip("torch")
    try:
        import torchvision.ops as TO
    except Exception:
        pytest.skip("torchvision is not installed")
    a, b = _boxes(30, 20), _boxes(25, 21)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    for name in ("box_iou", "generalized_box_iou", "distance_box_iou", "complete_box_iou"):
        np.testing.assert_allclose(getattr(ops, name)(_t(a), _t(b)).numpy(),
                                   getattr(TO, name)(ta, tb).numpy(), rtol=1e-10, atol=1e-12)
    for name in ("generalized_box_iou_loss", "distance_box_iou_loss", "complete_box_iou_loss"):
        np.testing.assert_allclose(getattr(ops, name)(_t(a[:25]), _t(b)).numpy(),
                                   getattr(TO, name)(ta[:25], tb).numpy(), rtol=1e-10)
    x = np.random.default_rng(0).standard_normal((6, 3))
    y = (x > 0.3).astype(np.float64)
    np.testing.assert_allclose(ops.sigmoid_focal_loss(_t(x), _t(y), reduction="mean").item(),
                               TO.sigmoid_focal_loss(torch.from_numpy(x), torch.from_numpy(y),
                                                     reduction="mean").item(), rtol=1e-10)
    for fmt in ("xywh", "cxcywh"):
        np.testing.assert_allclose(ops.box_convert(_t(a), "xyxy", fmt).numpy(),
                                   TO.box_convert(ta, "xyxy", fmt).numpy(), rtol=1e-12)
    rng = np.random.default_rng(22)
    for dtype in (np.float32, np.float64):
        bb = _boxes(2000, 23, scale=300.0).astype(dtype)
        s = rng.uniform(0, 1, 2000).astype(dtype)
        cats = rng.integers(0, 5, 2000)
        for thr in (0.3, 0.7):
            assert ops.nms(_t(bb), _t(s), thr).tolist() == \
                TO.nms(torch.from_numpy(bb), torch.from_numpy(s), thr).tolist()
            assert ops.batched_nms(_t(bb), _t(s), _t(cats), thr).tolist() == \
                TO.batched_nms(torch.from_numpy(bb), torch.from_numpy(s),
                               torch.from_numpy(cats), thr).tolist()
    masks = (rng.uniform(size=(4, 9, 11)) > 0.8).astype(np.uint8)
    np.testing.assert_array_equal(ops.masks_to_boxes(_t(masks)).numpy(),
                                  TO.masks_to_boxes(torch.from_numpy(masks)).numpy())
