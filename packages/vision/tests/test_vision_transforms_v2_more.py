"""transforms.v2's further transforms and functionals (colour, multi-crop, random resizes,
keypoints, noise, JPEG, conversions) against NumPy references and hand-computed cases, on
images, videos, PIL images, boxes, masks and keypoints."""
import warnings

import numpy as np
import pytest
from PIL import Image as PILImage, ImageOps

import fiamma
from fiamma.vision import tv_tensors as tv
from fiamma.vision.transforms import v2
from fiamma.vision.transforms.v2 import functional as F


def _img(seed=0, shape=(3, 9, 11)):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def _t(a):
    return fiamma.from_numpy(np.ascontiguousarray(a))


def _sample():
    img = tv.Image(_t(_img()))
    boxes = tv.BoundingBoxes([[1.0, 2.0, 5.0, 7.0], [0.0, 0.0, 10.0, 8.0]], format="XYXY",
                             canvas_size=(9, 11))
    mask = tv.Mask(_t((_img(1, (2, 9, 11)) > 128).astype(np.uint8)))
    kp = tv.KeyPoints([[1.0, 1.0], [10.0, 8.0]], canvas_size=(9, 11))
    return {"image": img, "boxes": boxes, "masks": mask, "kp": kp, "labels": fiamma.tensor([1, 2])}


# ---------------------------------------------------------------------------- colour kernels

def test_invert_posterize_solarize_numpy():
    a = _img()
    x = _t(a)
    np.testing.assert_array_equal(F.invert(x).numpy(), 255 - a)
    f = a.astype(np.float32) / 255
    np.testing.assert_allclose(F.invert(_t(f)).numpy(), 1 - f, atol=1e-7)
    i16 = a.astype(np.int16) * 100
    np.testing.assert_array_equal(F.invert(_t(i16)).numpy(), 32767 - i16)
    for bits in (0, 1, 3, 8):
        mask = (0xFF << (8 - bits)) & 0xFF
        np.testing.assert_array_equal(F.posterize(x, bits).numpy(), a & mask)
        lv = 2 ** bits
        ref = np.clip(np.floor(f * lv), 0, lv - 1) / lv
        np.testing.assert_allclose(F.posterize(_t(f), bits).numpy(), ref, atol=1e-7)
    np.testing.assert_array_equal(F.solarize(x, 100).numpy(), np.where(a >= 100, 255 - a, a))
    np.testing.assert_allclose(F.solarize(_t(f), 0.5).numpy(), np.where(f >= 0.5, 1 - f, f),
                               atol=1e-7)
    with pytest.raises(TypeError, match="posterize"):
        F.posterize(x, 9)
    with pytest.raises(TypeError, match="solarize"):
        F.solarize(_t(f), 2.0)


def test_autocontrast_numpy():
    a = _img(2)
    a[1] = 77                                             # a constant channel stays
    out = F.autocontrast(_t(a)).numpy()
    x = a.astype(np.float32)
    lo, hi = x.min((1, 2), keepdims=True), x.max((1, 2), keepdims=True)
    same = lo == hi
    inv = np.where(same, 1, (hi - lo) * np.float32(1 / 255))
    ref = np.clip((x - np.where(same, 0, lo)) / inv, 0, 255).astype(np.uint8)
    assert np.abs(out.astype(int) - ref).max() <= 1
    np.testing.assert_array_equal(out[1], a[1])
    # (max - min) / ((max - min) / 255) rounds to just under 255 in float32: torchvision's v2
    # kernel gives 254 there too
    assert out[0].min() == 0 and out[0].max() >= 254
    f = F.autocontrast(_t(a.astype(np.float32) / 510)).numpy()
    np.testing.assert_allclose(f[0].min(), 0) and np.testing.assert_allclose(f[0].max(), 1)


def _equalize_ref(ch):
    hist = np.bincount(ch.ravel(), minlength=256)
    nz = hist[hist > 0]
    step = nz[:-1].sum() // 255
    if step == 0:
        return ch
    lut = (np.cumsum(hist) + step // 2) // step
    lut = np.clip(np.concatenate([[0], lut[:-1]]), 0, 255).astype(np.uint8)
    return lut[ch]


def test_equalize_matches_pil_and_numpy():
    a = np.random.default_rng(3).normal(100, 20, (3, 40, 50)).clip(0, 255).astype(np.uint8)
    out = F.equalize(_t(a)).numpy()
    np.testing.assert_array_equal(out, np.stack([_equalize_ref(c) for c in a]))
    pil = ImageOps.equalize(PILImage.fromarray(a.transpose(1, 2, 0)))
    np.testing.assert_array_equal(out, np.asarray(pil).transpose(2, 0, 1))
    # floats go through uint8 and come back scaled
    f = F.equalize(_t(a.astype(np.float32) / 255)).numpy()
    np.testing.assert_allclose(f, out / 255.0, atol=1e-6)
    # PIL in, PIL out
    assert isinstance(F.equalize(PILImage.fromarray(a[0])), PILImage.Image)


def _sharp_ref(a, factor):
    x = a.astype(np.float32)
    k = np.ones((3, 3), np.float32)
    k[1, 1] = 5
    h, w = x.shape[-2:]
    blur = sum(k[dy, dx] * x[..., dy:dy + h - 2, dx:dx + w - 2]
               for dy in range(3) for dx in range(3)) / 13
    blur = np.round(blur)
    out = x.copy()
    inner = x[..., 1:-1, 1:-1]
    out[..., 1:-1, 1:-1] = inner + (blur - inner) * (1 - factor)
    return np.clip(out, 0, 255).astype(np.uint8)


@pytest.mark.parametrize("factor", [0.0, 0.5, 2.0])
def test_adjust_sharpness_numpy(factor):
    a = _img(4, (2, 3, 8, 9))                     # a batch: leading dims are kept
    out = F.adjust_sharpness(_t(a), factor).numpy()
    assert np.abs(out.astype(int) - _sharp_ref(a, factor).astype(int)).max() <= 1
    np.testing.assert_array_equal(out[..., 0, :], a[..., 0, :])     # border untouched
    tiny = _t(_img(5, (3, 2, 2)))
    assert F.adjust_sharpness(tiny, 3.0) is tiny
    with pytest.raises(ValueError, match="sharpness"):
        F.adjust_sharpness(_t(a), -1.0)


def test_adjust_gamma_and_channels():
    a = _img(6)
    f = a.astype(np.float32) / 255
    np.testing.assert_allclose(F.adjust_gamma(_t(f), 2.0, 0.5).numpy(),
                               np.clip(0.5 * f ** 2, 0, 1), atol=1e-6)
    ref = (np.clip(f ** 0.5, 0, 1) * np.float32(255.999)).astype(np.uint8)
    assert np.abs(F.adjust_gamma(_t(a), 0.5).numpy().astype(int) - ref).max() <= 1
    g = _t(a[:1])
    rgb = F.grayscale_to_rgb(tv.Image(g))
    assert isinstance(rgb, tv.Image) and tuple(rgb.shape) == (3, 9, 11)
    np.testing.assert_array_equal(rgb.numpy(), np.repeat(a[:1], 3, 0))
    assert F.grayscale_to_rgb(_t(a)).shape == (3, 9, 11)
    np.testing.assert_array_equal(F.permute_channels(_t(a), [2, 0, 1]).numpy(), a[[2, 0, 1]])
    vid = tv.Video(_t(np.stack([a, a])))
    out = F.permute_channels(vid, [1, 2, 0])
    assert isinstance(out, tv.Video)
    np.testing.assert_array_equal(out.numpy()[1], a[[1, 2, 0]])
    with pytest.raises(ValueError, match="permutation"):
        F.permute_channels(_t(a), [0, 1])
    pil = F.permute_channels(PILImage.fromarray(a.transpose(1, 2, 0)), [2, 1, 0])
    np.testing.assert_array_equal(np.asarray(pil), a.transpose(1, 2, 0)[..., ::-1])


def test_color_functionals_refuse_boxes_and_keep_types():
    s = _sample()
    for fn, args in [(F.invert, ()), (F.posterize, (2,)), (F.solarize, (10,)),
                     (F.equalize, ()), (F.autocontrast, ()), (F.adjust_sharpness, (2.0,))]:
        with pytest.raises(TypeError, match=fn.__name__):
            fn(s["boxes"], *args)
        with pytest.raises(TypeError, match=fn.__name__):
            fn(s["masks"], *args)
        out = fn(s["image"], *args)
        assert isinstance(out, tv.Image)
        pil = fn(PILImage.fromarray(_img().transpose(1, 2, 0)), *args)
        assert isinstance(pil, PILImage.Image)


def test_gaussian_noise_statistics_and_clipping():
    fiamma.manual_seed(0)
    x = fiamma.full((3, 100, 100), 0.5)
    out = F.gaussian_noise(x, mean=0.1, sigma=0.05).numpy() - 0.5
    assert abs(out.mean() - 0.1) < 2e-3 and abs(out.std() - 0.05) < 2e-3
    assert F.gaussian_noise(fiamma.ones(3, 4, 4), sigma=1.0).max().item() <= 1.0
    u = F.gaussian_noise(fiamma.full((1, 50, 50), 250, dtype=fiamma.uint8), sigma=0.2)
    assert u.dtype == fiamma.uint8 and u.max().item() == 255
    unclipped = F.gaussian_noise(fiamma.ones(1, 50, 50), sigma=1.0, clip=False)
    assert unclipped.max().item() > 1.0
    with pytest.raises(ValueError, match="sigma"):
        F.gaussian_noise(x, sigma=-1.0)
    with pytest.raises(ValueError, match="PIL"):
        F.gaussian_noise(PILImage.new("RGB", (4, 4)))
    with pytest.raises(ValueError, match="uint8 or float"):
        F.gaussian_noise(fiamma.zeros(1, 2, 2, dtype=fiamma.int32))


def test_jpeg_round_trip():
    yy, xx = np.mgrid[0:32, 0:32]
    a = np.stack([xx * 8, yy * 8, (xx + yy) * 4]).astype(np.uint8)
    out = F.jpeg(_t(a), 95).numpy()
    assert out.dtype == np.uint8 and out.shape == a.shape
    assert np.abs(out.astype(int) - a).mean() < 3
    low = F.jpeg(_t(a), 5).numpy()
    assert np.abs(low.astype(int) - a).mean() > np.abs(out.astype(int) - a).mean()
    vid = F.jpeg(tv.Video(_t(np.stack([a, a]))), 50)
    assert isinstance(vid, tv.Video) and tuple(vid.shape) == (2, 3, 32, 32)
    np.testing.assert_array_equal(vid.numpy()[0], vid.numpy()[1])
    with pytest.raises(ValueError, match="quality"):
        F.jpeg(_t(a), 0)
    with pytest.raises(TypeError, match="uint8"):
        F.jpeg(_t(a.astype(np.float32)), 50)


# ---------------------------------------------------------------------------- crops, video

def test_five_and_ten_crop():
    a = np.arange(3 * 6 * 7, dtype=np.float32).reshape(3, 6, 7)
    crops = F.five_crop(tv.Image(_t(a)), [2, 3])
    refs = [a[:, :2, :3], a[:, :2, 4:], a[:, 4:, :3], a[:, 4:, 4:], a[:, 2:4, 2:5]]
    assert len(crops) == 5 and all(isinstance(c, tv.Image) for c in crops)
    for c, r in zip(crops, refs):
        np.testing.assert_array_equal(c.numpy(), r)
    ten = F.ten_crop(_t(a), 2, vertical_flip=True)
    assert len(ten) == 10
    np.testing.assert_array_equal(ten[5].numpy(), a[:, ::-1][:, :2, :2])
    ten_h = F.ten_crop(_t(a), 2)
    np.testing.assert_array_equal(ten_h[6].numpy(), a[:, :, ::-1][:, :2, 5:])
    pil = F.five_crop(PILImage.fromarray(a[0].astype(np.uint8)), 2)
    assert all(isinstance(p, PILImage.Image) and p.size == (2, 2) for p in pil)
    with pytest.raises(ValueError, match="bigger"):
        F.five_crop(_t(a), 7)


def test_uniform_temporal_subsample():
    v = np.arange(7 * 2, dtype=np.float32).reshape(1, 7, 2, 1, 1)
    out = F.uniform_temporal_subsample(tv.Video(_t(v)), 4)
    idx = np.linspace(0, 6, 4).astype(int)                     # [0, 2, 4, 6]
    assert isinstance(out, tv.Video)
    np.testing.assert_array_equal(out.numpy(), v[:, idx])
    more = F.uniform_temporal_subsample(_t(v[0]), 10)         # nearest frames repeated
    np.testing.assert_array_equal(more.numpy()[:, 0, 0, 0] // 2,
                                  np.linspace(0, 6, 10).astype(int))
    assert F.get_num_frames(tv.Video(_t(v))) == 7
    with pytest.raises(TypeError):
        F.uniform_temporal_subsample(tv.Image(_t(v[0, 0])), 2)


def test_sizes_and_deprecated():
    img = tv.Image(fiamma.zeros(3, 4, 5))
    assert F.get_num_channels(img) == 3 and F.get_num_channels(PILImage.new("L", (2, 2))) == 1
    assert F.get_size_image(img) == [4, 5] and F.get_dimensions_image(img) == [3, 4, 5]
    b = tv.BoundingBoxes([[0, 0, 1, 1]], format="XYXY", canvas_size=(7, 8))
    assert F.get_size_bounding_boxes(b) == [7, 8]
    with pytest.warns(UserWarning, match="deprecated"):
        assert F.get_image_size(img) == [5, 4]
    with pytest.warns(UserWarning, match="deprecated"):
        t = F.to_tensor(PILImage.new("L", (3, 2), 255))
    assert t.tolist() == [[[1.0] * 3] * 2]
    assert F.is_pure_tensor(fiamma.zeros(1)) and not F.is_pure_tensor(img)


# ---------------------------------------------------------------------------- keypoints/boxes

def test_clamp_and_sanitize_keypoints():
    kp = tv.KeyPoints([[-1.0, 2.0], [12.0, 20.0], [3.0, 4.0]], canvas_size=(10, 11))
    out = F.clamp_keypoints(kp)
    assert isinstance(out, tv.KeyPoints) and out.tolist() == [[0, 2], [10, 9], [3, 4]]
    ints = F.clamp_keypoints(fiamma.tensor([[-5, 50]]), canvas_size=(10, 11))
    assert ints.dtype == fiamma.int64 and ints.tolist() == [[0, 9]]
    kept, valid = F.sanitize_keypoints(kp)
    assert valid.tolist() == [False, False, True] and kept.tolist() == [[3, 4]]
    groups = tv.KeyPoints([[[1.0, 1.0], [2.0, 2.0]], [[1.0, 1.0], [11.0, 2.0]]],
                          canvas_size=(10, 11))
    kept, valid = F.sanitize_keypoints(groups)          # a group goes if any point is out
    assert valid.tolist() == [True, False] and tuple(kept.shape) == (1, 2, 2)
    with pytest.raises(ValueError, match="canvas_size"):
        F.clamp_keypoints(fiamma.zeros(1, 2))
    with pytest.raises(ValueError, match="canvas_size"):
        F.sanitize_keypoints(kp, canvas_size=(1, 1))


def test_sanitize_bounding_boxes_functional():
    b = tv.BoundingBoxes([[0, 0, 5, 5], [2, 2, 2.5, 8], [1, 1, 12, 3]], format="XYXY",
                         canvas_size=(10, 10), clamping_mode=None)
    kept, valid = F.sanitize_bounding_boxes(b)
    assert valid.tolist() == [True, False, False]
    assert isinstance(kept, tv.BoundingBoxes) and kept.tolist() == [[0, 0, 5, 5]]
    kept, valid = F.sanitize_bounding_boxes(fiamma.tensor([[0.0, 0.0, 3.0, 3.0]]),
                                            format="XYWH", canvas_size=(10, 10), min_size=4)
    assert valid.tolist() == [False] and tuple(kept.shape) == (0, 4)


# ---------------------------------------------------------------------------- transforms

def _unchanged(out, s, keys):
    for k in keys:
        assert type(out[k]) is type(s[k])
        np.testing.assert_array_equal(out[k].numpy(), s[k].numpy())


@pytest.mark.parametrize("t,ref", [
    (v2.RandomInvert(p=1.0), lambda a: 255 - a),
    (v2.RandomPosterize(bits=3, p=1.0), lambda a: a & 0xE0),
    (v2.RandomSolarize(threshold=128, p=1.0), lambda a: np.where(a >= 128, 255 - a, a)),
    (v2.RandomEqualize(p=1.0), lambda a: np.stack([_equalize_ref(c) for c in a])),
    (v2.RandomAdjustSharpness(2.0, p=1.0), lambda a: _sharp_ref(a, 2.0)),
    (v2.RandomGrayscale(p=1.0), lambda a: np.repeat(
        (a[0] * np.float32(0.2989) + a[1] * np.float32(0.587) + a[2] * np.float32(0.114))
        .astype(np.uint8)[None], 3, 0)),
])
def test_color_transforms_change_only_the_image(t, ref):
    s = _sample()
    out = t(s)
    _unchanged(out, s, ["boxes", "masks", "kp", "labels"])
    assert isinstance(out["image"], tv.Image)
    diff = np.abs(out["image"].numpy().astype(int) - ref(s["image"].numpy()).astype(int))
    assert diff.max() <= 1


def test_random_apply_probability_zero_and_reprs():
    s = _sample()
    for cls in (v2.RandomInvert, v2.RandomEqualize, v2.RandomAutocontrast):
        out = cls(p=0.0)(s)
        _unchanged(out, s, ["image", "boxes"])
    assert "p=0.3" in repr(v2.RandomInvert(p=0.3))
    with pytest.raises(ValueError, match="p should be"):
        v2.RandomSolarize(10, p=2.0)


def test_rgb_channel_permutation_autocontrast_transforms():
    s = _sample()
    gray = tv.Image(s["image"][:1])
    out = v2.RGB()({"image": gray, "boxes": s["boxes"]})
    assert tuple(out["image"].shape) == (3, 9, 11) and out["boxes"] is s["boxes"]
    fiamma.manual_seed(1)
    perm = v2.RandomChannelPermutation()(s)
    a, p = s["image"].numpy(), perm["image"].numpy()
    matched = sorted(next(j for j in range(3) if np.array_equal(p[i], a[j])) for i in range(3))
    assert matched == [0, 1, 2]
    _unchanged(perm, s, ["boxes", "masks", "kp"])
    ac = v2.RandomAutocontrast(p=1.0)(s)
    assert ac["image"].numpy().max() >= 254 and ac["masks"] is s["masks"]


def test_multi_crop_transforms():
    img = tv.Image(fiamma.arange(3 * 6 * 6.).reshape(3, 6, 6))
    crops, label = v2.FiveCrop(4)(img, 3)
    assert label == 3 and len(crops) == 5 and all(isinstance(c, tv.Image) for c in crops)
    ten = v2.TenCrop([4, 2], vertical_flip=True)(img)
    assert len(ten) == 10 and tuple(ten[0].shape) == (3, 4, 2)
    b = tv.BoundingBoxes([[0, 0, 1, 1]], format="XYXY", canvas_size=(6, 6))
    with pytest.raises(TypeError, match="not supported by FiveCrop"):
        v2.FiveCrop(4)(img, b)
    kp = tv.KeyPoints([[1.0, 1.0]], canvas_size=(6, 6))
    with pytest.warns(UserWarning, match="passing through"):
        out = v2.TenCrop(4)(img, kp)
    assert out[1] is kp


def test_random_resizes_move_boxes_masks_keypoints():
    s = _sample()                                              # canvas (9, 11)
    # ScaleJitter with a fixed scale: r = min(20 / 9, 22 / 11) * 1.5 = 3 -> (27, 33)
    out = v2.ScaleJitter(target_size=(22, 20), scale_range=(1.5, 1.5))(s)
    assert tuple(out["image"].shape) == (3, 27, 33) and out["boxes"].canvas_size == (27, 33)
    np.testing.assert_allclose(out["boxes"].numpy(), s["boxes"].numpy() * 3, atol=1e-5)
    np.testing.assert_allclose(out["kp"].numpy(), s["kp"].numpy() * 3, atol=1e-5)
    m = out["masks"].numpy()
    assert m.shape == (2, 27, 33)
    np.testing.assert_array_equal(m[:, ::3, ::3], s["masks"].numpy())   # nearest
    assert out["labels"] is s["labels"]
    # shortest side 18 (r = 2), longer side capped at 20 -> r = 20 / 11
    out = v2.RandomShortestSize(min_size=[18], max_size=20)(s)
    assert tuple(out["image"].shape) == (3, int(9 * 20 / 11), 20)
    np.testing.assert_allclose(out["boxes"].numpy()[0],
                               [1 * 20 / 11, 2 * 16 / 9, 5 * 20 / 11, 7 * 16 / 9], atol=1e-4)
    out = v2.RandomResize(18, 19)(s)                            # shorter side -> 18
    assert tuple(out["masks"].shape) == (2, 18, 22) and out["kp"].canvas_size == (18, 22)
    pil = v2.RandomResize(4, 5)(PILImage.new("RGB", (10, 5)))
    assert pil.size == (8, 4)


def test_linear_transformation_numpy():
    rng = np.random.default_rng(7)
    m = rng.normal(size=(12, 12)).astype(np.float32)
    mu = rng.normal(size=12).astype(np.float32)
    x = rng.normal(size=(2, 3, 2, 2)).astype(np.float32)
    t = v2.LinearTransformation(_t(m), _t(mu))
    out = t(tv.Video(_t(x[None])))
    assert isinstance(out, tv.Video)
    np.testing.assert_allclose(out.numpy()[0], ((x.reshape(2, 12) - mu) @ m).reshape(x.shape),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="PIL"):
        t(PILImage.new("RGB", (2, 2)))
    with pytest.raises(ValueError, match="square"):
        v2.LinearTransformation(fiamma.zeros(2, 3), fiamma.zeros(2))
    with pytest.raises(ValueError, match="incompatible"):
        t(fiamma.zeros(1, 3, 3))


def test_conversions():
    s = _sample()
    out = v2.ConvertImageDtype(fiamma.float32)(s)
    np.testing.assert_allclose(out["image"].numpy(), s["image"].numpy() / 255.0, atol=1e-6)
    assert out["masks"].dtype == fiamma.float32 and isinstance(out["masks"], tv.Mask)
    pil = PILImage.fromarray(_img().transpose(1, 2, 0))
    assert v2.ConvertImageDtype()(pil) is pil
    back = v2.ToPILImage()(s["image"])
    assert isinstance(back, PILImage.Image) and back.size == (11, 9)
    np.testing.assert_array_equal(np.asarray(back), s["image"].numpy().transpose(1, 2, 0))
    with pytest.warns(UserWarning, match="deprecated"):
        tt = v2.ToTensor()
    res = tt({"img": pil, "arr": np.full((2, 2, 1), 255, np.uint8), "t": fiamma.ones(1)})
    assert res["img"].dtype == fiamma.float32 and res["arr"].tolist() == [[[1.0, 1.0],
                                                                          [1.0, 1.0]]]
    assert res["t"].tolist() == [1.0]
    assert v2.Identity()(s) is not None and v2.Identity()(s)["boxes"] is s["boxes"]


def test_keypoint_and_clamping_transforms():
    s = _sample()
    s["kp"] = tv.KeyPoints([[1.0, 1.0], [15.0, -2.0]], canvas_size=(9, 11))
    out = v2.ClampKeyPoints()(s)
    assert out["kp"].tolist() == [[1.0, 1.0], [10.0, 0.0]] and out["image"] is s["image"]
    out = v2.SanitizeKeyPoints(labels_getter="default")(s)
    assert out["kp"].tolist() == [[1.0, 1.0]] and out["labels"].tolist() == [1]
    assert out["boxes"] is s["boxes"]
    assert v2.SanitizeKeyPoints()(s)["labels"].tolist() == [1, 2]
    with pytest.raises(ValueError, match="labels"):
        v2.SanitizeKeyPoints(labels_getter=lambda x: fiamma.zeros(5))(s)
    with pytest.raises(ValueError, match="No keypoints"):
        v2.SanitizeKeyPoints()({"image": s["image"]})
    out = v2.SetClampingMode(None)(s)
    assert out["boxes"].clamping_mode is None and s["boxes"].clamping_mode == "soft"
    assert out["boxes"].tolist() == s["boxes"].tolist()
    with pytest.raises(ValueError, match="clamping_mode"):
        v2.SetClampingMode("medium")


def test_gaussian_noise_jpeg_temporal_transforms():
    s = _sample()
    fiamma.manual_seed(0)
    out = v2.GaussianNoise(sigma=0.0, mean=0.0)({"image": tv.Image(fiamma.full((3, 4, 4), 0.5)),
                                                 "boxes": s["boxes"]})
    assert bool((out["image"] == 0.5).all()) and out["boxes"] is s["boxes"]
    j = v2.JPEG((90, 95))(s)
    assert j["image"].dtype == fiamma.uint8 and j["masks"] is s["masks"]
    with pytest.raises(ValueError, match="quality"):
        v2.JPEG(101)
    with pytest.raises(TypeError, match="bool"):
        v2.JPEG(True)
    vid = tv.Video(fiamma.arange(8.).reshape(8, 1, 1, 1))
    out = v2.UniformTemporalSubsample(3)({"video": vid, "boxes": s["boxes"]})
    assert out["video"].flatten().tolist() == [0.0, 3.0, 7.0] and out["boxes"] is s["boxes"]


def test_utils():
    s = _sample()
    flat = [v for k, v in s.items() if k != "labels"]
    assert v2.has_any(flat, tv.KeyPoints) and not v2.has_any(flat, tv.Video)
    assert v2.has_all(flat, tv.Image, tv.Mask) and not v2.has_all(flat, tv.Image, tv.Video)
    assert v2.check_type(3, (lambda x: x == 3,))
    assert v2.get_bounding_boxes(flat) is s["boxes"] and v2.get_keypoints(flat) is s["kp"]
    assert v2.query_chw(flat) == (3, 9, 11) and v2.query_size(flat) == (9, 11)
    with pytest.raises(ValueError, match="No bounding boxes"):
        v2.get_bounding_boxes([s["image"]])
    with pytest.raises(ValueError, match="multiple"):
        v2.query_chw([s["image"], tv.Image(fiamma.zeros(1, 2, 2))])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        v2.RandomInvert(p=1.0)(s)


def test_per_type_kernels_hand_computed():
    b = fiamma.tensor([[[1.0, 2.0, 4.0, 6.0]], [[0.0, 0.0, 2.0, 2.0]]])        # (2, 1, 4)
    out = F.horizontal_flip_bounding_boxes(b, "XYXY", (10, 10))
    assert type(out) is fiamma.Tensor and out.tolist() == [[[6, 2, 9, 6]], [[8, 0, 10, 2]]]
    out, canvas = F.crop_bounding_boxes(b, "XYWH", 1, 1, 5, 5)
    assert canvas == (5, 5) and out.tolist()[0] == [[0, 1, 4, 4]]     # clamped to the crop
    out, canvas = F.pad_keypoints(fiamma.tensor([[1.0, 2.0]]), (4, 4), [1, 2])
    assert out.tolist() == [[2, 4]] and canvas == (8, 6)
    assert F.vertical_flip_keypoints(fiamma.tensor([[1.0, 0.0]]), (4, 4)).tolist() == [[1, 3]]
    m = fiamma.tensor([[0, 1], [2, 3]], dtype=fiamma.uint8)
    assert F.resize_mask(m, [4, 4]).tolist() == [[0, 0, 1, 1]] * 2 + [[2, 2, 3, 3]] * 2
    img = fiamma.arange(2 * 3 * 4 * 4.).reshape(2, 3, 4, 4)
    np.testing.assert_array_equal(F.horizontal_flip_video(img).numpy(), img.numpy()[..., ::-1])
    assert F.adjust_brightness_image(fiamma.full((3, 2, 2), 0.25), 2.0).max().item() == 0.5
    assert F.to_dtype_video(fiamma.full((1, 1, 2, 2), 255, dtype=fiamma.uint8), fiamma.float32,
                            scale=True).max().item() == 1.0
    with pytest.raises(ValueError, match="8 float values"):
        F.perspective_image(img, None, None, coefficients=[1.0] * 7)


def test_user_tv_tensors_pass_through_the_transforms():
    class Flat(tv.TVTensor):
        pass
    s = _sample()
    s["flat"] = fiamma.arange(4.).reshape(2, 2).as_subclass(Flat)
    for t in (v2.RandomInvert(p=1.0), v2.GaussianNoise(), v2.UniformTemporalSubsample(1),
              v2.RandomChannelPermutation()):
        out = t(s)
        assert out["flat"] is s["flat"]
    with pytest.raises(TypeError, match="invert"):
        F.invert(s["flat"])


def test_v1_linear_and_elastic_transforms():
    from fiamma.vision import transforms as T
    rng = np.random.default_rng(18)
    m = rng.normal(size=(12, 12)).astype(np.float32)
    mu = rng.normal(size=12).astype(np.float32)
    x = rng.normal(size=(3, 2, 2)).astype(np.float32)
    out = T.LinearTransformation(_t(m), _t(mu))(_t(x))
    np.testing.assert_allclose(out.numpy(), ((x.reshape(1, 12) - mu) @ m).reshape(x.shape),
                               rtol=1e-5, atol=1e-5)
    assert repr(T.LinearTransformation(fiamma.eye(1), fiamma.zeros(1))) == \
        "LinearTransformation(transformation_matrix=[[1.0]], mean_vector=[0.0])"
    with pytest.raises(ValueError, match="same dtype"):
        T.LinearTransformation(fiamma.eye(2), fiamma.zeros(2, dtype=fiamma.float64))
    fiamma.manual_seed(0)
    d = T.ElasticTransform.get_params([4.0, 2.0], [0.0, 0.0], [5, 8])
    assert tuple(d.shape) == (1, 5, 8, 2)
    assert d[..., 0].abs().max().item() <= 4.0 / 8 and d[..., 1].abs().max().item() <= 2.0 / 5
    img = _t(_img(19))
    np.testing.assert_array_equal(T.ElasticTransform(alpha=0.0)(img).numpy(), img.numpy())
    pil = T.ElasticTransform(alpha=3.0, sigma=1.0)(PILImage.fromarray(_img(20)[0]))
    assert isinstance(pil, PILImage.Image) and pil.size == (11, 9)
    with pytest.raises(TypeError, match="alpha"):
        T.ElasticTransform(alpha=5)
