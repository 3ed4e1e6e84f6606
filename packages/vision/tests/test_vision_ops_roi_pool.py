"""roi_pool, ps_roi_align and ps_roi_pool against direct float64 loops written here, their
input gradients against finite differences, and (marked ``parity``) torchvision."""
import math

import numpy as np
import pytest

import fiamma
from fiamma.vision.ops import PSRoIAlign, PSRoIPool, RoIPool, ps_roi_align, ps_roi_pool, roi_pool


def _cround(v):
    return math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1)


def _int_bins(start, length, n, size, top):
    out = []
    for i in range(n):
        lo = math.floor(i * length / n) + start
        hi = math.ceil((i + 1) * length / n) + start
        out.append((min(max(lo, 0), top), min(max(hi, 0), top)))
    return out


def _ref_roi_pool(x, rois, out, scale):
    k, c = len(rois), x.shape[1]
    res = np.zeros((k, c, out, out))
    for j, (b, x1, y1, x2, y2) in enumerate(rois):
        sx, sy, ex, ey = (_cround(v * scale) for v in (x1, y1, x2, y2))
        rw, rh = max(ex - sx + 1, 1), max(ey - sy + 1, 1)
        for i, (ylo, yhi) in enumerate(_int_bins(sy, rh, out, x.shape[2], x.shape[2])):
            for q, (xlo, xhi) in enumerate(_int_bins(sx, rw, out, x.shape[3], x.shape[3])):
                if yhi > ylo and xhi > xlo:
                    res[j, :, i, q] = x[int(b), :, ylo:yhi, xlo:xhi].max(axis=(1, 2))
    return res


def _ref_ps_roi_pool(x, rois, out, scale):
    k, c = len(rois), x.shape[1] // (out * out)
    h, w = x.shape[2:]
    res = np.zeros((k, c, out, out))
    for j, (b, x1, y1, x2, y2) in enumerate(rois):
        sx, sy, ex, ey = (_cround(v * scale) for v in (x1, y1, x2, y2))
        rw, rh = max(ex - sx, 1), max(ey - sy, 1)
        for i, (ylo, yhi) in enumerate(_int_bins(sy, rh, out, h, h - 1)):
            for q, (xlo, xhi) in enumerate(_int_bins(sx, rw, out, w, w - 1)):
                if yhi > ylo and xhi > xlo:
                    for co in range(c):
                        res[j, co, i, q] = x[int(b), (co * out + i) * out + q,
                                             ylo:yhi, xlo:xhi].mean()
    return res


def _bilinear(f, y, x):
    h, w = f.shape
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return 0.0
    y, x = max(y, 0.0), max(x, 0.0)
    yl, xl = int(y), int(x)
    yh, xh = yl + 1, xl + 1
    if yl >= h - 1:
        yh = yl = h - 1
        y = float(yl)
    if xl >= w - 1:
        xh = xl = w - 1
        x = float(xl)
    ly, lx = y - yl, x - xl
    return ((1 - ly) * (1 - lx) * f[yl, xl] + (1 - ly) * lx * f[yl, xh]
            + ly * (1 - lx) * f[yh, xl] + ly * lx * f[yh, xh])


def _ref_ps_roi_align(x, rois, out, scale, ratio):
    k, c = len(rois), x.shape[1] // (out * out)
    res = np.zeros((k, c, out, out))
    for j, (b, x1, y1, x2, y2) in enumerate(rois):
        x1, y1, x2, y2 = (v * scale - 0.5 for v in (x1, y1, x2, y2))
        rw, rh = x2 - x1, y2 - y1
        gh = ratio if ratio > 0 else math.ceil(rh / out)
        gw = ratio if ratio > 0 else math.ceil(rw / out)
        for co in range(c):
            for i in range(out):
                for q in range(out):
                    f = x[int(b), (co * out + i) * out + q]
                    acc = sum(_bilinear(f, y1 + i * rh / out + (sy + 0.5) * rh / out / gh,
                                        x1 + q * rw / out + (sx + 0.5) * rw / out / gw)
                              for sy in range(gh) for sx in range(gw))
                    res[j, co, i, q] = acc / max(gh * gw, 1)
    return res


def _data(channels, seed=0):
    rs = np.random.RandomState(seed)
    x = rs.randn(2, channels, 11, 13)
    b = np.concatenate([rs.randint(0, 2, (9, 1)), rs.rand(9, 2) * 12, rs.rand(9, 2) * 9], 1)
    b[:, 3:] += b[:, 1:3]
    b[0, 3:] = b[0, 1:3] + 0.2          # a tiny box
    b[1, 1:] = [-3.0, -2.0, 20.0, 30.0]  # a box past the map
    return x, b


@pytest.mark.parametrize("scale", [1.0, 0.5, 0.75])
def test_roi_pool_vs_loop(scale):
    x, b = _data(3)
    got = roi_pool(fiamma.from_numpy(x), fiamma.from_numpy(b), 3, scale).numpy()
    np.testing.assert_allclose(got, _ref_roi_pool(x, b, 3, scale), atol=1e-12)


@pytest.mark.parametrize("scale", [1.0, 0.5, 0.75])
def test_ps_roi_pool_vs_loop(scale):
    x, b = _data(2 * 9)
    got = ps_roi_pool(fiamma.from_numpy(x), fiamma.from_numpy(b), 3, scale).numpy()
    np.testing.assert_allclose(got, _ref_ps_roi_pool(x, b, 3, scale), atol=1e-12)


@pytest.mark.parametrize("scale,ratio", [(1.0, -1), (0.5, 2), (0.75, 0)])
def test_ps_roi_align_vs_loop(scale, ratio):
    x, b = _data(2 * 4)
    got = ps_roi_align(fiamma.from_numpy(x), fiamma.from_numpy(b), 2, scale, ratio).numpy()
    np.testing.assert_allclose(got, _ref_ps_roi_align(x, b, 2, scale, ratio), atol=1e-12)


def _numgrad(fn, x, eps=1e-6):
    g = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (fn(xp) - fn(xm)) / (2 * eps)
    return g


@pytest.mark.parametrize("op,channels", [(roi_pool, 2), (ps_roi_pool, 8), (ps_roi_align, 8)])
def test_input_gradient_numerical(op, channels):
    rs = np.random.RandomState(1)
    x = rs.randn(1, channels, 6, 7)
    b = np.array([[0, 0.5, 1.2, 5.1, 4.7], [0, 2.0, 0.3, 6.4, 5.5]])
    wgt = rs.randn(2, channels // (1 if op is roi_pool else 4), 2, 2)

    def f(xn):
        return float((op(fiamma.from_numpy(xn), fiamma.from_numpy(b), 2).numpy() * wgt).sum())

    xt = fiamma.from_numpy(x.copy()).requires_grad_()
    (op(xt, fiamma.from_numpy(b), 2) * fiamma.from_numpy(wgt)).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), _numgrad(f, x), atol=1e-6)


@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_ps_roi_pool_gradient_at_the_last_row_and_column(scale):
    # boxes whose last bins reach or pass the map's bottom/right edge: the forward pools up to
    # row/column size - 2 there (torchvision's rule), so the exact gradient is zero on the
    # last row and column and equals the numerical one everywhere
    rs = np.random.RandomState(2)
    x = rs.randn(2, 9, 6, 7)
    b = np.array([[0, 0.0, 0.0, 7.0, 6.0], [1, 2.6, 1.4, 6.6, 5.6], [0, 3.0, 2.0, 30.0, 20.0],
                  [1, -4.0, -3.0, 6.0, 5.0], [0, 5.6, 4.6, 9.0, 9.0]])
    b[:, 1:] /= scale
    wgt = rs.randn(len(b), 1, 3, 3)

    def f(xn):
        return float((ps_roi_pool(fiamma.from_numpy(xn), fiamma.from_numpy(b), 3, scale).numpy()
                      * wgt).sum())

    xt = fiamma.from_numpy(x.copy()).requires_grad_()
    (ps_roi_pool(xt, fiamma.from_numpy(b), 3, scale) * fiamma.from_numpy(wgt)).sum().backward()
    g = xt.grad.numpy()
    np.testing.assert_allclose(g, _numgrad(f, x), atol=1e-6)
    assert not g[:, :, -1, :].any() and not g[:, :, :, -1].any()
    assert g[:, :, -2, :].any() and g[:, :, :, -2].any()     # the bins do reach the edge


@pytest.mark.parametrize("op,channels,args", [(roi_pool, 2, ()), (ps_roi_align, 8, (-1,)),
                                               (ps_roi_align, 8, (2,))])
def test_gradient_at_the_last_row_and_column(op, channels, args):
    # roi_pool and ps_roi_align read the last row/column (unlike ps_roi_pool): boxes reaching
    # or passing the bottom/right edge give it a gradient, equal to the numerical one
    rs = np.random.RandomState(3)
    x = rs.randn(1, channels, 6, 7)
    b = np.array([[0, 0.0, 0.0, 7.0, 6.0], [0, 2.6, 1.4, 6.6, 5.6], [0, 3.0, 2.0, 30.0, 20.0]])
    wgt = rs.randn(len(b), channels // (1 if op is roi_pool else 4), 2, 2)

    def f(xn):
        return float((op(fiamma.from_numpy(xn), fiamma.from_numpy(b), 2, 1.0, *args).numpy()
                      * wgt).sum())

    xt = fiamma.from_numpy(x.copy()).requires_grad_()
    (op(xt, fiamma.from_numpy(b), 2, 1.0, *args) * fiamma.from_numpy(wgt)).sum().backward()
    g = xt.grad.numpy()
    np.testing.assert_allclose(g, _numgrad(f, x), atol=1e-6)
    assert g[:, :, -1, :].any() and g[:, :, :, -1].any()


def test_ps_roi_align_zero_size_box_is_zero():
    x = fiamma.from_numpy(np.random.RandomState(6).randn(1, 8, 6, 7))
    b = fiamma.tensor([[0, 2.0, 3.0, 2.0, 3.0], [0, 1.0, 1.0, 4.0, 1.0]], dtype=fiamma.float64)
    assert not ps_roi_align(x, b, 2, 1.0, -1).numpy().any()
    assert ps_roi_align(x, b, 2, 1.0, 2).numpy().any()   # fixed samples: bilinear values


def _vjp_of_linear(fn, x, w):
    """sum(fn(x) * w)'s gradient for an fn linear in x, from fn on each unit input (float64:
    exact up to rounding, whatever fn's own backward does)."""
    g = np.zeros(x.size)
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = 1.0
        g[i] = float((fn(e.reshape(x.shape)) * w).sum())
    return g.reshape(x.shape)


def test_modules_lists_and_errors():
    x = fiamma.rand(2, 8, 6, 6)
    boxes = [fiamma.tensor([[0., 0., 4., 4.]]), fiamma.tensor([[1., 1., 5., 5.], [0., 0., 2., 3.]])]
    assert tuple(RoIPool(2, 1.0)(x, boxes).shape) == (3, 8, 2, 2)
    assert tuple(PSRoIPool(2, 1.0)(x, boxes).shape) == (3, 2, 2, 2)
    assert tuple(PSRoIAlign(2, 1.0, 2)(x, boxes).shape) == (3, 2, 2, 2)
    assert "sampling_ratio=2" in repr(PSRoIAlign(2, 1.0, 2))
    assert tuple(roi_pool(x, fiamma.zeros((0, 5)), 2).shape) == (0, 8, 2, 2)
    with pytest.raises(ValueError, match="multiple"):
        ps_roi_align(fiamma.rand(1, 6, 4, 4), [fiamma.tensor([[0., 0., 2., 2.]])], 2)
    with pytest.raises(ValueError, match="multiple"):
        ps_roi_pool(fiamma.rand(1, 6, 4, 4), [fiamma.tensor([[0., 0., 2., 2.]])], 2)
    with pytest.raises(IndexError, match="batch indices"):
        roi_pool(x, fiamma.tensor([[5., 0., 0., 2., 2.]]), 2)
    with pytest.raises(ValueError, match="4-d"):
        roi_pool(fiamma.rand(8, 6, 6), boxes, 2)


@pytest.mark.parity
@pytest.mark.parametrize("name,channels,args", [("roi_pool", 3, ()), ("ps_roi_pool", 18, ()),
                                                ("ps_roi_align", 18, (-1,)),
                                                ("ps_roi_align", 18, (2,))])
def test_matches_torchvision(name, channels, args):
    torch = pytest.importorskip("torch")
    tvops = pytest.importorskip("torchvision.ops")
    x, b = _data(channels, seed=3)
    for scale in (1.0, 0.5):
        xt = torch.from_numpy(x).requires_grad_()
        want = getattr(tvops, name)(xt, torch.from_numpy(b), 3, scale, *args)
        xf = fiamma.from_numpy(x.copy()).requires_grad_()
        got = getattr(__import__("fiamma.vision.ops", fromlist=[name]), name)(
            xf, fiamma.from_numpy(b), 3, scale, *args)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), atol=1e-12)
        w = np.random.RandomState(4).randn(*want.shape)
        (want * torch.from_numpy(w)).sum().backward()
        (got * fiamma.from_numpy(w)).sum().backward()
        if name == "ps_roi_pool":
            continue    # its gradient: test_ps_roi_pool_gradient_matches_torchvision_forward
        np.testing.assert_allclose(xf.grad.numpy(), xt.grad.numpy(), atol=1e-12)


@pytest.mark.parity
def test_ps_roi_pool_gradient_matches_torchvision_forward():
    # torchvision's ps_roi_pool backward clips the bins to [0, size] while its forward clips
    # them to [0, size - 1]: for a bin that reaches the last row/column its backward is not
    # the derivative of its forward (it spreads the gradient over the last row/column too,
    # divided by the larger area). fiamma's gradient is the derivative of the shared forward:
    # equal to torchvision's backward for bins inside the map, and to the exact vector-Jacobian
    # product of torchvision's forward everywhere
    torch = pytest.importorskip("torch")
    tvops = pytest.importorskip("torchvision.ops")
    rs = np.random.RandomState(5)
    x = rs.randn(1, 8, 6, 7)
    inside = np.array([[0, 0.0, 0.0, 4.0, 3.0], [0, 1.4, 0.6, 5.2, 4.4]])
    edge = np.array([[0, 0.0, 0.0, 7.0, 6.0], [0, 2.6, 1.4, 6.6, 5.6], [0, -2.0, 1.0, 20.0, 9.0]])
    for b in (inside, edge):
        w = rs.randn(len(b), 2, 2, 2)
        xt = torch.from_numpy(x.copy()).requires_grad_()
        (tvops.ps_roi_pool(xt, torch.from_numpy(b), 2) * torch.from_numpy(w)).sum().backward()
        xf = fiamma.from_numpy(x.copy()).requires_grad_()
        (ps_roi_pool(xf, fiamma.from_numpy(b), 2) * fiamma.from_numpy(w)).sum().backward()
        exact = _vjp_of_linear(
            lambda e: tvops.ps_roi_pool(torch.from_numpy(e), torch.from_numpy(b), 2).numpy(), x, w)
        np.testing.assert_allclose(xf.grad.numpy(), exact, atol=1e-12)
        if b is inside:
            np.testing.assert_allclose(xf.grad.numpy(), xt.grad.numpy(), atol=1e-12)
