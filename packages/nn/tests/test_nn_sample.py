"""Resampling layers and functions: interpolate (every mode), grid_sample, affine_grid, the
shuffles and their modules. Gradients by float64 gradcheck; (parity session) values and
gradients against torch for every mode and option."""

import warnings
import zlib

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.autograd import gradcheck
from fiamma.nn import functional as F

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
has_area = hasattr(fiamma, "adaptive_avg_pool2d")


def _t(a, grad=False):
    t = fiamma.tensor(np.ascontiguousarray(a))
    return t.requires_grad_() if grad else t


# ---- float64 references and gradcheck ---------------------------------------------------------

def test_interpolate_nearest_and_linear_small_cases():
    x = _t(np.arange(6.0).reshape(1, 1, 2, 3))
    y = F.interpolate(x, scale_factor=2, mode="nearest")
    np.testing.assert_array_equal(y.numpy(), np.arange(6.0).reshape(2, 3).repeat(2, 0)
                                  .repeat(2, 1)[None, None])
    y = F.interpolate(_t([[[0.0, 1.0, 4.0]]]), size=5, mode="linear", align_corners=True)
    np.testing.assert_allclose(y.numpy()[0, 0], [0, 0.5, 1, 2.5, 4], rtol=1e-12)
    y = F.interpolate(x, size=(1, 1), mode="bilinear")  # downsampling: the centre
    np.testing.assert_allclose(y.item(), 2.5, rtol=1e-12)


@pytest.mark.parametrize("mode,ndim", [("nearest", 3), ("nearest-exact", 4), ("linear", 3),
                                       ("bilinear", 4), ("bicubic", 4), ("trilinear", 5)])
def test_interpolate_gradcheck(mode, ndim):
    rng = np.random.default_rng(ndim)
    shape = (2, 2) + (3, 4, 2)[:ndim - 2]
    x = _t(rng.standard_normal(shape), grad=True)
    ac = None if "nearest" in mode else True
    assert gradcheck(lambda t: F.interpolate(t, scale_factor=1.7, mode=mode, align_corners=ac),
                     (x,))
    assert gradcheck(lambda t: F.interpolate(t, size=(2, 3, 1)[:ndim - 2], mode=mode), (x,))


def test_grid_sample_affine_grid_gradcheck():
    rng = np.random.default_rng(3)
    x = _t(rng.standard_normal((2, 2, 4, 5)), grad=True)
    theta = _t(np.array([[[0.8, 0.3, 0.1], [-0.2, 0.9, 0.05]]] * 2)
               + 0.05 * rng.standard_normal((2, 2, 3)), grad=True)
    def f(t, th):
        grid = F.affine_grid(th, (2, 2, 3, 3), align_corners=False)
        return F.grid_sample(t, grid, padding_mode="border", align_corners=False)

    assert gradcheck(f, (x, theta))


def test_modules_and_repr():
    x = fiamma.ones(1, 2, 2, 2)
    assert nn.Upsample(scale_factor=2)(x).shape == (1, 2, 4, 4)
    assert nn.UpsamplingNearest2d(size=3)(x).shape == (1, 2, 3, 3)
    assert nn.UpsamplingBilinear2d(scale_factor=1.5)(x).shape == (1, 2, 3, 3)
    assert repr(nn.Upsample(size=(3, 4), mode="bilinear")) == \
        "Upsample(size=(3, 4), mode='bilinear')"
    assert repr(nn.Upsample(scale_factor=2)) == "Upsample(scale_factor=2.0, mode='nearest')"
    assert repr(nn.UpsamplingBilinear2d(scale_factor=2)) == \
        "UpsamplingBilinear2d(scale_factor=2.0, mode='bilinear')"
    assert repr(nn.PixelShuffle(3)) == "PixelShuffle(upscale_factor=3)"
    assert repr(nn.PixelUnshuffle(2)) == "PixelUnshuffle(downscale_factor=2)"
    assert repr(nn.ChannelShuffle(4)) == "ChannelShuffle(groups=4)"
    assert nn.Upsample(scale_factor=2).state_dict() == {}
    y = nn.PixelUnshuffle(2)(nn.PixelShuffle(2)(fiamma.arange(32.0).reshape(1, 8, 2, 2)))
    np.testing.assert_array_equal(y.numpy(), np.arange(32.0).reshape(1, 8, 2, 2))


def test_shuffles_against_numpy():
    a = np.arange(2 * 12 * 2 * 3, dtype=np.float64).reshape(2, 12, 2, 3)
    r = 2
    ref = a.reshape(2, 3, r, r, 2, 3).transpose(0, 1, 4, 2, 5, 3).reshape(2, 3, 4, 6)
    np.testing.assert_array_equal(F.pixel_shuffle(_t(a), r).numpy(), ref)
    ref = a.reshape(2, 3, 4, 2, 3).transpose(0, 2, 1, 3, 4).reshape(2, 12, 2, 3)
    np.testing.assert_array_equal(F.channel_shuffle(_t(a), 3).numpy(), ref)
    x = _t(np.random.default_rng(0).standard_normal((1, 8, 2, 2)), grad=True)
    assert gradcheck(lambda t: F.pixel_shuffle(t, 2), (x,))


def test_bad_arguments():
    x = fiamma.ones(1, 2, 3, 3)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=2, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(x, size=2, align_corners=True)
    with pytest.raises(ValueError, match="same number of spatial dimensions"):
        F.interpolate(x, size=(2, 2, 2))
    with pytest.raises(NotImplementedError, match="bilinear mode needs 4D"):
        F.interpolate(fiamma.ones(1, 2, 3), size=2, mode="bilinear")
    with pytest.raises(NotImplementedError, match="anti-alias option is restricted"):
        F.interpolate(x, size=2, mode="nearest", antialias=True)
    with pytest.raises(NotImplementedError, match="anti-alias option is restricted"):
        F.interpolate(fiamma.ones(1, 2, 3), size=2, mode="linear", antialias=True)
    with pytest.raises(NotImplementedError, match="antialias=True needs a floating"):
        F.interpolate(x.long(), size=2, mode="bilinear", antialias=True)
    with pytest.raises(ValueError, match="recompute_scale_factor is not meaningful"):
        F.interpolate(x, size=2, recompute_scale_factor=True)
    with pytest.raises(ValueError, match="expected mode"):
        F.grid_sample(x, fiamma.zeros(1, 2, 2, 2), mode="area")
    with pytest.raises(ValueError, match="expected padding_mode"):
        F.grid_sample(x, fiamma.zeros(1, 2, 2, 2), padding_mode="wrap")
    with pytest.raises(ValueError, match="grid_sampler.*grid of shape"):
        F.grid_sample(x, fiamma.zeros(1, 2, 2, 3))
    with pytest.raises(ValueError, match="Nx2x3"):
        F.affine_grid(fiamma.zeros(1, 3, 4), (1, 1, 2, 2))
    with pytest.raises(ValueError, match="pixel_shuffle.*divisible"):
        F.pixel_shuffle(fiamma.ones(1, 3, 2, 2), 2)
    with pytest.raises(ValueError, match="pixel_unshuffle.*divisible"):
        F.pixel_unshuffle(fiamma.ones(1, 3, 3, 2), 2)
    with pytest.raises(ValueError, match="channel_shuffle.*divisible"):
        F.channel_shuffle(fiamma.ones(1, 3, 2, 2), 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert F.upsample(x, scale_factor=2).shape == (1, 2, 6, 6)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("size", [(7, 10), (40, 50), (23, 12), (1, 31)])
def test_interpolate_antialias_matches_pillow(mode, size):
    # Pillow's resampling of float images is the antialiased definition PyTorch follows
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(11)
    img = rng.standard_normal((23, 31)).astype(np.float32)
    oh, ow = size
    ref = np.asarray(Image.fromarray(img, mode="F").resize(
        (ow, oh), Image.BILINEAR if mode == "bilinear" else Image.BICUBIC))
    x = fiamma.from_numpy(np.stack([img, 2 * img])[None])  # (1, 2, 23, 31)
    y = F.interpolate(x, size=size, mode=mode, antialias=True).numpy()
    np.testing.assert_allclose(y[0, 0], ref, rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(y[0, 1], 2 * ref, rtol=1e-5, atol=4e-5)


def test_interpolate_antialias_properties_and_gradcheck():
    rng = np.random.default_rng(12)
    # constant images stay constant (rows of weights sum to 1), at any size
    c = fiamma.full((2, 3, 11, 9), 2.5, dtype=fiamma.float64)
    for kw in (dict(size=(4, 5)), dict(size=(20, 3)), dict(scale_factor=0.4),
               dict(size=(1, 1), align_corners=True)):
        for mode in ("bilinear", "bicubic"):
            y = F.interpolate(c, mode=mode, antialias=True, **kw).numpy()
            np.testing.assert_allclose(y, 2.5, rtol=1e-12)
    # upscaling bilinear with antialias is plain bilinear away from the borders
    x = _t(rng.standard_normal((1, 1, 6, 6)))
    a = F.interpolate(x, size=(12, 12), mode="bilinear", antialias=True).numpy()
    b = F.interpolate(x, size=(12, 12), mode="bilinear").numpy()
    np.testing.assert_allclose(a[..., 1:-1, 1:-1], b[..., 1:-1, 1:-1], rtol=1e-12, atol=1e-12)
    for mode in ("bilinear", "bicubic"):
        for ac in (False, True):
            xx = fiamma.tensor(rng.standard_normal((1, 2, 5, 7))).requires_grad_()
            assert gradcheck(lambda t: F.interpolate(t, size=(3, 9), mode=mode,
                                                     align_corners=ac, antialias=True), (xx,))


@pytest.mark.skipif(not has_area, reason="fiamma.adaptive_avg_pool2d is not available")
def test_area_mode():
    x = _t(np.arange(16.0).reshape(1, 1, 4, 4))
    y = F.interpolate(x, scale_factor=0.5, mode="area")
    np.testing.assert_allclose(y.numpy()[0, 0], [[2.5, 4.5], [10.5, 12.5]], rtol=1e-12)


# ---- parity with torch --------------------------------------------------------------------

def _cmp(a, b, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)


def _noncontig(rng, shape):
    """A float32 array of ``shape`` whose last two dims are transposed in memory."""
    base = rng.standard_normal(shape[:-2] + (shape[-1], shape[-2])).astype(np.float32)
    return base.swapaxes(-1, -2)


def _pair(a):
    """The same data as a fiamma leaf (keeping a transposed layout) and a torch leaf."""
    ft = fiamma.tensor(np.ascontiguousarray(a.swapaxes(-1, -2))).transpose(-1, -2)
    ft = ft.detach().requires_grad_()
    tt = torch.tensor(np.ascontiguousarray(a)).requires_grad_()
    return ft, tt


def _both_grads(fy, ty, fx, tx, rng):
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.tensor(g))
    fy.backward(fiamma.tensor(g))
    for f, t in zip(fx, tx):
        _cmp(f.grad, t.grad)


INTERP_CASES = []
for _mode, _nd in [("nearest", 3), ("nearest", 4), ("nearest", 5), ("nearest-exact", 3),
                   ("nearest-exact", 4), ("nearest-exact", 5), ("linear", 3), ("bilinear", 4),
                   ("bicubic", 4), ("trilinear", 5)]:
    for _kw in [dict(size=7), dict(size=2), dict(scale_factor=1.7), dict(scale_factor=0.6),
                dict(scale_factor=2.0, recompute_scale_factor=True), dict(scale_factor=3)]:
        for _ac in ([None] if "nearest" in _mode else [False, True]):
            INTERP_CASES.append((_mode, _nd, _kw, _ac))


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("mode,nd,kw,ac", INTERP_CASES)
def test_interpolate_parity(mode, nd, kw, ac):
    rng = np.random.default_rng(zlib.crc32(f"{mode}{nd}{kw}".encode()))
    spatial = [(9,), (5, 6), (3, 4, 5)][nd - 3]
    batch = int(rng.integers(1, 3))
    fx, tx = _pair(_noncontig(rng, (batch, 3) + spatial))
    ty = torch.nn.functional.interpolate(tx, mode=mode, align_corners=ac, **kw)
    fy = F.interpolate(fx, mode=mode, align_corners=ac, **kw)
    assert tuple(fy.shape) == tuple(ty.shape)
    _cmp(fy, ty)
    _both_grads(fy, ty, [fx], [tx], rng)


AA_CASES = [(m, kw, ac) for m in ("bilinear", "bicubic")
            for kw in (dict(size=(4, 3)), dict(size=(13, 17)), dict(size=(1, 2)),
                       dict(scale_factor=0.37), dict(scale_factor=2.5),
                       dict(scale_factor=0.5, recompute_scale_factor=True))
            for ac in (False, True)]


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("mode,kw,ac", AA_CASES)
def test_interpolate_antialias_parity(mode, kw, ac):
    rng = np.random.default_rng(zlib.crc32(f"aa{mode}{kw}{ac}".encode()))
    fx, tx = _pair(_noncontig(rng, (2, 3, 11, 9)))
    ty = torch.nn.functional.interpolate(tx, mode=mode, align_corners=ac, antialias=True, **kw)
    fy = F.interpolate(fx, mode=mode, align_corners=ac, antialias=True, **kw)
    assert tuple(fy.shape) == tuple(ty.shape)
    _cmp(fy, ty)
    _both_grads(fy, ty, [fx], [tx], rng)


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_interpolate_empty_batch_and_modules_parity(mode):
    ac = None if mode == "nearest" else False
    x = np.zeros((0, 2, 3, 4), np.float32)
    ty = torch.nn.functional.interpolate(torch.tensor(x), scale_factor=2, mode=mode,
                                         align_corners=ac)
    fy = F.interpolate(fiamma.tensor(x), scale_factor=2, mode=mode, align_corners=ac)
    assert tuple(fy.shape) == tuple(ty.shape)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    for tm, fm in [(torch.nn.Upsample(scale_factor=1.5, mode="bilinear"),
                    nn.Upsample(scale_factor=1.5, mode="bilinear")),
                   (torch.nn.UpsamplingNearest2d(size=(7, 3)), nn.UpsamplingNearest2d(size=(7, 3))),
                   (torch.nn.UpsamplingBilinear2d(scale_factor=2),
                    nn.UpsamplingBilinear2d(scale_factor=2))]:
        assert repr(tm) == repr(fm)
        _cmp(fm(fiamma.tensor(a)), tm(torch.tensor(a)))


@pytest.mark.parity
@needs_torch
@pytest.mark.skipif(not has_area, reason="fiamma.adaptive_avg_pool2d is not available")
@pytest.mark.parametrize("nd,kw", [(3, dict(size=4)), (4, dict(scale_factor=0.5)),
                                   (5, dict(size=(2, 3, 2)))])
def test_interpolate_area_parity(nd, kw):
    rng = np.random.default_rng(nd)
    a = rng.standard_normal((2, 3) + (7, 8, 6)[:nd - 2]).astype(np.float32)
    fx, tx = _pair(a)
    ty = torch.nn.functional.interpolate(tx, mode="area", **kw)
    fy = F.interpolate(fx, mode="area", **kw)
    _cmp(fy, ty)
    _both_grads(fy, ty, [fx], [tx], rng)


GRID_CASES = [(nd, mode, pad, ac) for nd in (4, 5)
              for mode in (["bilinear", "nearest", "bicubic"] if nd == 4 else
                           ["bilinear", "nearest"])
              for pad in ("zeros", "border", "reflection") for ac in (False, True)]


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("nd,mode,pad,ac", GRID_CASES)
def test_grid_sample_parity(nd, mode, pad, ac):
    rng = np.random.default_rng(len(mode) + 7 * nd)
    spatial_in = (5, 7) if nd == 4 else (4, 5, 3)
    spatial_out = (3, 4) if nd == 4 else (2, 3, 4)
    fx, tx = _pair(_noncontig(rng, (2, 3) + spatial_in))
    g = rng.uniform(-1.3, 1.3, (2,) + spatial_out + (nd - 2,)).astype(np.float32)
    fg, tg = fiamma.tensor(g).requires_grad_(), torch.tensor(g).requires_grad_()
    ty = torch.nn.functional.grid_sample(tx, tg, mode=mode, padding_mode=pad, align_corners=ac)
    fy = F.grid_sample(fx, fg, mode=mode, padding_mode=pad, align_corners=ac)
    _cmp(fy, ty)
    _both_grads(fy, ty, [fx, fg], [tx, tg], rng)


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("nd", [4, 5])
@pytest.mark.parametrize("ac", [False, True])
def test_affine_grid_parity(nd, ac):
    rng = np.random.default_rng(nd)
    shape = (2, 3, 4, 5) if nd == 4 else (2, 3, 2, 4, 5)
    th = rng.standard_normal((2, nd - 2, nd - 1)).astype(np.float32)
    ft, tt = fiamma.tensor(th).requires_grad_(), torch.tensor(th).requires_grad_()
    ty = torch.nn.functional.affine_grid(tt, shape, align_corners=ac)
    fy = F.affine_grid(ft, shape, align_corners=ac)
    _cmp(fy, ty)
    _both_grads(fy, ty, [ft], [tt], rng)


@pytest.mark.parity
@needs_torch
def test_shuffle_modules_parity():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((2, 12, 4, 6)).astype(np.float32)
    for tm, fm in [(torch.nn.PixelShuffle(2), nn.PixelShuffle(2)),
                   (torch.nn.PixelUnshuffle(2), nn.PixelUnshuffle(2)),
                   (torch.nn.ChannelShuffle(3), nn.ChannelShuffle(3))]:
        assert repr(tm) == repr(fm)
        fx, tx = _pair(a)
        ty, fy = tm(tx), fm(fx)
        _cmp(fy, ty)
        _both_grads(fy, ty, [fx], [tx], rng)
