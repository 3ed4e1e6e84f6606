"""deform_conv2d / DeformConv2d against a direct float64 loop written here, ordinary
convolution (zero offsets), finite differences for every input, and (marked ``parity``)
torchvision."""
import math

import numpy as np
import pytest

import fiamma
import fiamma.nn.functional as F
from fiamma.vision.ops import DeformConv2d, deform_conv2d


def _bil(f, y, x):
    h, w = f.shape
    if y <= -1 or y >= h or x <= -1 or x >= w:
        return 0.0
    y0, x0 = math.floor(y), math.floor(x)
    ly, lx = y - y0, x - x0
    v = 0.0
    for yy, wy in ((y0, 1 - ly), (y0 + 1, ly)):
        for xx, wx in ((x0, 1 - lx), (x0 + 1, lx)):
            if 0 <= yy < h and 0 <= xx < w:
                v += wy * wx * f[yy, xx]
    return v


def _ref(x, off, wgt, bias, stride, pad, dil, mask):
    n, cin, h, w = x.shape
    cout, cin_g, kh, kw = wgt.shape
    groups, k = cin // cin_g, kh * kw
    og = off.shape[1] // (2 * k)
    ho, wo = off.shape[2:]
    out = np.zeros((n, cout, ho, wo))
    for b in range(n):
        for co in range(cout):
            g = co // (cout // groups)
            for oy in range(ho):
                for ox in range(wo):
                    acc = bias[co]
                    for ci in range(cin_g):
                        c = g * cin_g + ci
                        o = c // (cin // og)
                        for i in range(kh):
                            for j in range(kw):
                                t = i * kw + j
                                dy = off[b, o * 2 * k + 2 * t, oy, ox]
                                dx = off[b, o * 2 * k + 2 * t + 1, oy, ox]
                                v = _bil(x[b, c], oy * stride - pad + i * dil + dy,
                                         ox * stride - pad + j * dil + dx)
                                if mask is not None:
                                    v *= mask[b, o * k + t, oy, ox]
                                acc += wgt[co, ci, i, j] * v
                    out[b, co, oy, ox] = acc
    return out


CASES = [  # cin, cout, offset groups, groups, stride, padding, dilation, mask
    (2, 3, 1, 1, 1, 1, 1, False),
    (4, 2, 2, 2, 2, 1, 2, True),
    (3, 2, 3, 1, 1, 0, 1, True),
]


def _case(cin, cout, og, groups, stride, pad, dil, use_mask, seed=0):
    rs = np.random.RandomState(seed)
    x = rs.randn(2, cin, 6, 7)
    wgt = rs.randn(cout, cin // groups, 3, 3)
    bias = rs.randn(cout)
    ho = (6 + 2 * pad - (dil * 2 + 1)) // stride + 1
    wo = (7 + 2 * pad - (dil * 2 + 1)) // stride + 1
    off = rs.randn(2, 2 * og * 9, ho, wo) * 1.5
    mask = rs.rand(2, og * 9, ho, wo) if use_mask else None
    return x, off, wgt, bias, mask


@pytest.mark.parametrize("case", CASES)
def test_deform_conv2d_vs_loop(case):
    x, off, wgt, bias, mask = _case(*case)
    stride, pad, dil = case[4:7]
    got = deform_conv2d(fiamma.from_numpy(x), fiamma.from_numpy(off), fiamma.from_numpy(wgt),
                        fiamma.from_numpy(bias), stride=stride, padding=pad, dilation=dil,
                        mask=None if mask is None else fiamma.from_numpy(mask))
    np.testing.assert_allclose(got.numpy(), _ref(x, off, wgt, bias, stride, pad, dil, mask),
                               atol=1e-12)


def test_zero_offsets_is_convolution_and_integer_offsets_shift():
    rs = np.random.RandomState(1)
    x = fiamma.from_numpy(rs.randn(1, 4, 8, 8))
    w = fiamma.from_numpy(rs.randn(6, 2, 3, 3))
    off = fiamma.zeros(1, 18, 4, 4, dtype=fiamma.float64)
    got = deform_conv2d(x, off, w, stride=2, padding=1)
    want = F.conv2d(x, w, stride=2, padding=1, groups=2)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12)
    # every tap moved by (+1, +1) equals the convolution of the input shifted by one pixel
    w1 = fiamma.from_numpy(rs.randn(3, 4, 3, 3))
    off = fiamma.ones(1, 18, 6, 6, dtype=fiamma.float64)
    got = deform_conv2d(x, off, w1)
    shifted = F.pad(x[:, :, 1:, 1:], (0, 1, 0, 1))
    np.testing.assert_allclose(got.numpy(), F.conv2d(shifted, w1).numpy(), atol=1e-12)


def _numgrad(fn, a, eps=1e-6):
    g = np.zeros_like(a)
    it = np.nditer(a, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        p, m = a.copy(), a.copy()
        p[i] += eps
        m[i] -= eps
        g[i] = (fn(p) - fn(m)) / (2 * eps)
    return g


def test_gradients_numerical():
    rs = np.random.RandomState(2)
    x = rs.randn(1, 2, 4, 4)
    w = rs.randn(2, 2, 2, 2)
    b = rs.randn(2)
    off = rs.rand(1, 8, 3, 3) * 0.8 + 0.1          # away from integer kinks
    m = rs.rand(1, 4, 3, 3)
    gw = rs.randn(1, 2, 3, 3)
    arrays = [x, off, w, b, m]

    def f(*arrs):
        xx, oo, ww, bb, mm = (fiamma.from_numpy(a) for a in arrs)
        return float((deform_conv2d(xx, oo, ww, bb, mask=mm).numpy() * gw).sum())

    ts = [fiamma.from_numpy(a.copy()).requires_grad_() for a in arrays]
    (deform_conv2d(ts[0], ts[1], ts[2], ts[3], mask=ts[4]) * fiamma.from_numpy(gw)).sum() \
        .backward()
    for i, a in enumerate(arrays):
        num = _numgrad(lambda v, i=i: f(*[v if j == i else arrays[j] for j in range(5)]), a)
        np.testing.assert_allclose(ts[i].grad.numpy(), num, atol=1e-6, err_msg=str(i))


def test_module_and_errors():
    fiamma.manual_seed(0)
    m = DeformConv2d(4, 6, 3, padding=1, groups=2)
    assert tuple(m.weight.shape) == (6, 2, 3, 3) and tuple(m.bias.shape) == (6,)
    y = m(fiamma.rand(2, 4, 5, 5), fiamma.zeros(2, 18, 5, 5))
    assert tuple(y.shape) == (2, 6, 5, 5)
    assert "groups=2" in repr(m) and DeformConv2d(2, 2, 3, bias=False).bias is None
    x, w = fiamma.rand(1, 4, 5, 5), fiamma.rand(2, 4, 3, 3)
    with pytest.raises(ValueError, match="offset should have shape"):
        deform_conv2d(x, fiamma.zeros(1, 18, 5, 5), w)
    with pytest.raises(ValueError, match="multiple of 2"):
        deform_conv2d(x, fiamma.zeros(1, 17, 3, 3), w)
    with pytest.raises(ValueError, match="mask should have shape"):
        deform_conv2d(x, fiamma.zeros(1, 18, 3, 3), w, mask=fiamma.ones(1, 8, 3, 3))
    with pytest.raises(ValueError, match="weight.shape"):
        deform_conv2d(x, fiamma.zeros(1, 18, 3, 3), fiamma.rand(2, 3, 3, 3))
    with pytest.raises(ValueError, match="offset groups"):
        deform_conv2d(fiamma.rand(1, 4, 5, 5), fiamma.zeros(1, 54, 3, 3), w)
    with pytest.raises(ValueError, match="in_channels"):
        DeformConv2d(3, 4, 3, groups=2)


@pytest.mark.parity
@pytest.mark.parametrize("case", CASES)
def test_matches_torchvision(case):
    torch = pytest.importorskip("torch")
    tvops = pytest.importorskip("torchvision.ops")
    x, off, wgt, bias, mask = _case(*case, seed=5)
    stride, pad, dil = case[4:7]
    arrays = [x, off, wgt, bias] + ([mask] if mask is not None else [])
    tt = [torch.from_numpy(a).requires_grad_() for a in arrays]
    ft = [fiamma.from_numpy(a.copy()).requires_grad_() for a in arrays]
    kw = dict(stride=stride, padding=pad, dilation=dil)
    want = tvops.deform_conv2d(*tt[:4], mask=tt[4] if mask is not None else None, **kw)
    got = deform_conv2d(*ft[:4], mask=ft[4] if mask is not None else None, **kw)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), atol=1e-12)
    g = np.random.RandomState(6).randn(*want.shape)
    (want * torch.from_numpy(g)).sum().backward()
    (got * fiamma.from_numpy(g)).sum().backward()
    for a, b in zip(tt, ft):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), atol=1e-11)
