"""fiamma.vision.ops.roi_align against a direct float64 loop over sampling points (written
here), its input gradient against finite differences, and (marked ``parity``) torchvision."""
import math

import numpy as np
import pytest

import fiamma
from fiamma.vision.ops import RoIAlign, roi_align


def _bilinear(f, y, x):
    h, w = f.shape
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return 0.0
    y, x = max(y, 0.0), max(x, 0.0)
    yl, xl = int(y), int(x)
    if yl >= h - 1:
        yh = yl = h - 1
        y = float(yl)
    else:
        yh = yl + 1
    if xl >= w - 1:
        xh = xl = w - 1
        x = float(xl)
    else:
        xh = xl + 1
    ly, lx = y - yl, x - xl
    return ((1 - ly) * (1 - lx) * f[yl, xl] + (1 - ly) * lx * f[yl, xh]
            + ly * (1 - lx) * f[yh, xl] + ly * lx * f[yh, xh])


def _ref(x, rois, out, scale, ratio, aligned):
    k = len(rois)
    c = x.shape[1]
    res = np.zeros((k, c, out, out))
    off = 0.5 if aligned else 0.0
    for j, (b, x1, y1, x2, y2) in enumerate(rois):
        x1, y1, x2, y2 = x1 * scale - off, y1 * scale - off, x2 * scale - off, y2 * scale - off
        rw, rh = x2 - x1, y2 - y1
        if not aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        gh = ratio if ratio > 0 else math.ceil(rh / out)
        gw = ratio if ratio > 0 else math.ceil(rw / out)
        for ch in range(c):
            for i in range(out):
                for q in range(out):
                    acc = 0.0
                    for sy in range(gh):
                        for sx in range(gw):
                            yy = y1 + i * rh / out + (sy + 0.5) * rh / out / gh
                            xx = x1 + q * rw / out + (sx + 0.5) * rw / out / gw
                            acc += _bilinear(x[int(b), ch], yy, xx)
                    res[j, ch, i, q] = acc / max(gh * gw, 1)
    return res


def _data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 9, 11))
    rois = np.array([[0, 1.2, 0.5, 7.9, 6.1], [1, -2.0, -1.5, 4.0, 3.0], [0, 3.0, 2.0, 3.4, 2.2],
                     [1, 6.0, 4.0, 14.0, 12.0], [1, 0.0, 0.0, 10.0, 8.0]])
    return x, rois


@pytest.mark.parametrize("scale,ratio,aligned", [(1.0, -1, False), (1.0, 2, True),
                                                  (0.5, -1, True), (0.75, 3, False)])
def test_roi_align_vs_loop(scale, ratio, aligned):
    x, rois = _data()
    out = roi_align(fiamma.from_numpy(x), fiamma.from_numpy(rois), 3, scale, ratio, aligned)
    np.testing.assert_allclose(out.numpy(), _ref(x, rois, 3, scale, ratio, aligned),
                               rtol=1e-12, atol=1e-12)


def test_roi_align_list_boxes_module_and_errors():
    x, rois = _data()
    lst = [fiamma.from_numpy(rois[rois[:, 0] == i, 1:].copy()) for i in range(2)]
    m = RoIAlign(2, 1.0, 2, aligned=True)
    got = m(fiamma.from_numpy(x), lst).numpy()
    order = np.concatenate([np.nonzero(rois[:, 0] == i)[0] for i in range(2)])
    np.testing.assert_allclose(got, _ref(x, rois[order], 2, 1.0, 2, True), rtol=1e-12,
                               atol=1e-12)
    assert "RoIAlign(output_size=2" in repr(m)
    with pytest.raises(IndexError, match="roi_align"):
        roi_align(fiamma.from_numpy(x), fiamma.tensor([[5.0, 0, 0, 1, 1]],
                                                      dtype=fiamma.float64), 2)
    with pytest.raises(ValueError, match="roi_align"):
        roi_align(fiamma.from_numpy(x), fiamma.zeros((2, 4)), 2)
    e = roi_align(fiamma.from_numpy(x), fiamma.zeros((0, 5), dtype=fiamma.float64), (2, 3))
    assert tuple(e.shape) == (0, 3, 2, 3)


def test_roi_align_gradient_numerical():
    x, rois = _data(1)
    xt = fiamma.from_numpy(x.copy()).requires_grad_()
    g = np.random.default_rng(2).standard_normal((len(rois), 3, 2, 2))
    (roi_align(xt, fiamma.from_numpy(rois), 2, 1.0, 2, True) * fiamma.from_numpy(g)).sum() \
        .backward()
    # the output is linear in x: the gradient is the transposed map applied to g
    num = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        e = np.zeros_like(x)
        e[idx] = 1.0
        num[idx] = (_ref(e, rois, 2, 1.0, 2, True) * g).sum()
    np.testing.assert_allclose(xt.grad.numpy(), num, rtol=1e-10, atol=1e-12)


@pytest.mark.parity
@pytest.mark.parametrize("aligned", [False, True])
def test_roi_align_matches_torchvision(aligned):
    torch = pytest.importorskip("torch")
    try:
        import torchvision.ops as TO
    except Exception:
        pytest.skip("torchvision is not installed")
    x, rois = _data(3)
    xt = torch.from_numpy(x).requires_grad_()
    ref = TO.roi_align(xt, torch.from_numpy(rois), (3, 2), 0.8, -1, aligned)
    ref.sum().backward()
    xf = fiamma.from_numpy(x.copy()).requires_grad_()
    out = roi_align(xf, fiamma.from_numpy(rois), (3, 2), 0.8, -1, aligned)
    out.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(xf.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------- FPN and pooler

def test_fpn_top_down_vs_numpy():
    from collections import OrderedDict

    from fiamma.vision.ops import FeaturePyramidNetwork, LastLevelMaxPool, LastLevelP6P7
    fpn = FeaturePyramidNetwork([2, 3], 2, extra_blocks=LastLevelMaxPool()).double()
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((1, 2, 4, 4)), rng.standard_normal((1, 3, 2, 2))
    out = fpn(OrderedDict(a=fiamma.from_numpy(a), b=fiamma.from_numpy(b)))
    assert list(out) == ["a", "b", "pool"]
    sd = {k: v.detach().numpy() for k, v in fpn.state_dict().items()}

    def conv1(x, i):
        return np.einsum("oc,nchw->nohw", sd[f"inner_blocks.{i}.0.weight"][:, :, 0, 0], x) \
            + sd[f"inner_blocks.{i}.0.bias"][None, :, None, None]

    def conv3(x, i):
        w, bias = sd[f"layer_blocks.{i}.0.weight"], sd[f"layer_blocks.{i}.0.bias"]
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        h, wd = x.shape[2:]
        y = np.zeros((1, w.shape[0], h, wd))
        for dy in range(3):
            for dx in range(3):
                y += np.einsum("oc,nchw->nohw", w[:, :, dy, dx], xp[:, :, dy:dy + h, dx:dx + wd])
        return y + bias[None, :, None, None]

    inner_b = conv1(b, 1)
    inner_a = conv1(a, 0) + inner_b.repeat(2, axis=2).repeat(2, axis=3)
    np.testing.assert_allclose(out["b"].detach().numpy(), conv3(inner_b, 1), rtol=1e-10)
    np.testing.assert_allclose(out["a"].detach().numpy(), conv3(inner_a, 0), rtol=1e-10)
    np.testing.assert_allclose(out["pool"].detach().numpy(), conv3(inner_b, 1)[:, :, ::2, ::2])
    p67 = FeaturePyramidNetwork([2, 3], 2, extra_blocks=LastLevelP6P7(3, 2))
    out = p67(OrderedDict(a=fiamma.randn(1, 2, 16, 16), b=fiamma.randn(1, 3, 8, 8)))
    assert [tuple(v.shape) for v in out.values()] == [(1, 2, 16, 16), (1, 2, 8, 8),
                                                      (1, 2, 4, 4), (1, 2, 2, 2)]
    with pytest.raises(TypeError, match="extra_blocks"):
        FeaturePyramidNetwork([2], 2, extra_blocks=object())


def test_multiscale_roi_align_levels():
    from collections import OrderedDict

    from fiamma.vision.ops import MultiScaleRoIAlign
    rng = np.random.default_rng(1)
    f0, f1 = rng.standard_normal((1, 2, 32, 32)), rng.standard_normal((1, 2, 16, 16))
    boxes = np.array([[0., 0., 20., 20.], [10., 10., 120., 120.], [5., 5., 60., 40.]])
    pool = MultiScaleRoIAlign(["p0", "p1"], 2, 2, canonical_scale=50, canonical_level=3)
    out = pool(OrderedDict(p0=fiamma.from_numpy(f0), p1=fiamma.from_numpy(f1)),
               [fiamma.from_numpy(boxes)], [(64, 64)])
    assert pool.scales == [0.5, 0.25]
    s = np.sqrt((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]))
    lv = np.clip(np.floor(3 + np.log2(s / 50) + 1e-6), 1, 2).astype(int) - 1
    rois = np.concatenate([np.zeros((3, 1)), boxes], 1)
    for j in range(3):
        f, sc = (f0, 0.5) if lv[j] == 0 else (f1, 0.25)
        np.testing.assert_allclose(out[j:j + 1].numpy(), _ref(f, rois[j:j + 1], 2, sc, 2, False),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parity
def test_fpn_and_multiscale_match_torchvision():
    torch = pytest.importorskip("torch")
    try:
        import torchvision.ops as TO
        from torchvision.ops.feature_pyramid_network import LastLevelMaxPool as TLast
    except Exception:
        pytest.skip("torchvision is not installed")
    from collections import OrderedDict

    from fiamma.vision.ops import FeaturePyramidNetwork, LastLevelMaxPool, MultiScaleRoIAlign
    torch.manual_seed(0)
    t = TO.FeaturePyramidNetwork([4, 6, 8], 5, extra_blocks=TLast())
    f = FeaturePyramidNetwork([4, 6, 8], 5, extra_blocks=LastLevelMaxPool())
    assert list(t.state_dict()) == list(f.state_dict())
    f.load_state_dict({k: fiamma.from_numpy(v.numpy().copy()) for k, v in
                       t.state_dict().items()})
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((2, c, s, s)).astype(np.float32) for c, s in
          ((4, 32), (6, 16), (8, 8))]
    with torch.no_grad():
        tout = t(OrderedDict((str(i), torch.from_numpy(x)) for i, x in enumerate(xs)))
    fout = f(OrderedDict((str(i), fiamma.from_numpy(x)) for i, x in enumerate(xs)))
    for k in tout:
        np.testing.assert_allclose(fout[k].detach().numpy(), tout[k].numpy(), rtol=1e-5,
                                   atol=1e-5)
    boxes = [np.array([[0., 0., 40., 40.], [10., 10., 120., 100.], [3., 3., 9., 12.]]),
             np.array([[30., 20., 127., 127.]])]
    tp = TO.MultiScaleRoIAlign(["0", "1", "2"], 3, 2)
    fp = MultiScaleRoIAlign(["0", "1", "2"], 3, 2)
    feats = {k: tout[k].numpy() for k in ("0", "1", "2")}     # one width, as an FPN gives
    ref = tp(OrderedDict((k, torch.from_numpy(v)) for k, v in feats.items()),
             [torch.from_numpy(b.astype(np.float32)) for b in boxes], [(128, 128)] * 2)
    got = fp(OrderedDict((k, fiamma.from_numpy(v)) for k, v in feats.items()),
             [fiamma.from_numpy(b.astype(np.float32)) for b in boxes], [(128, 128)] * 2)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
