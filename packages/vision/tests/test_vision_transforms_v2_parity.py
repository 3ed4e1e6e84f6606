"""transforms.v2 beside torchvision 0.28 (parity session; skipped without torchvision): every
geometric kernel on boxes (three formats), keypoints, masks and images with the same fixed
parameters, the colour kernels, and the deterministic transforms on a whole sample."""

import numpy as np
import pytest
from _tv_import import v2_modules

import fiamma
from fiamma.vision import tv_tensors as FTv
from fiamma.vision.transforms import v2 as FV
from fiamma.vision.transforms.v2 import functional as FF

_V2 = v2_modules()
_MODS = None if _V2 is None else _V2[:4]
pytestmark = [pytest.mark.parity,
              pytest.mark.skipif(_MODS is None, reason="torchvision is not installed")]
CANVAS = (37, 45)


def _data():
    torch, TT, TV, TF = _MODS
    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 30, (6, 2))
    wh = rng.uniform(1, 20, (6, 2))
    b = np.concatenate([xy, xy + wh], 1).astype(np.float32)
    kp = rng.uniform(0, 40, (5, 2)).astype(np.float32)
    img = rng.integers(0, 256, (3, 37, 45), dtype=np.uint8)
    m = (rng.random((2, 37, 45)) > 0.5).astype(np.uint8)
    return b, kp, img, m


def _boxes(b, fmt):
    torch, TT, TV, TF = _MODS
    tb = TT.BoundingBoxes(torch.from_numpy(b), format="XYXY", canvas_size=CANVAS)
    fb = FTv.BoundingBoxes(fiamma.from_numpy(b.copy()), format="XYXY", canvas_size=CANVAS)
    return (TF.convert_bounding_box_format(tb, new_format=fmt),
            FF.convert_bounding_box_format(fb, new_format=fmt))


CASES = {
    "hflip": ("horizontal_flip", (), {}), "vflip": ("vertical_flip", (), {}),
    "resize": ("resize", ([20, 30],), {}), "resize_short": ("resize", ([25],), {}),
    "resize_max": ("resize", ([25],), {"max_size": 30}),
    "crop": ("crop", (5, 7, 20, 25), {}), "crop_outside": ("crop", (-3, -4, 50, 60), {}),
    "center_crop": ("center_crop", ([21, 30],), {}),
    "pad": ("pad", ([3, 4, 5, 6],), {}),
    "resized_crop": ("resized_crop", (5, 7, 20, 25, [40, 30]), {}),
    "affine": ("affine", (), dict(angle=30.0, translate=[3, -2], scale=1.2, shear=[10.0, 5.0])),
    "affine_center": ("affine", (), dict(angle=-20.0, translate=[0, 0], scale=0.8,
                                         shear=[0.0, 0.0], center=[10, 12])),
    "rotate": ("rotate", (25.0,), {}), "rotate_expand": ("rotate", (25.0,), dict(expand=True)),
    "rotate_center": ("rotate", (40.0,), dict(center=[5, 9])),
    "perspective": ("perspective", ([[0, 0], [44, 0], [44, 36], [0, 36]],
                                    [[3, 2], [40, 5], [42, 30], [1, 33]]), {}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_geometric_kernels_equal_torchvision(case):
    torch, TT, TV, TF = _MODS
    fn, args, kw = CASES[case]
    b, kp, img, m = _data()
    for fmt in ["XYXY", "XYWH", "CXCYWH"]:
        tb, fb = _boxes(b, fmt)
        to, fo = getattr(TF, fn)(tb, *args, **kw), getattr(FF, fn)(fb, *args, **kw)
        np.testing.assert_allclose(fo.numpy(), to.numpy(), atol=1e-3)
        assert tuple(fo.canvas_size) == tuple(to.canvas_size) and fo.format.name == fmt
    tk = TT.KeyPoints(torch.from_numpy(kp), canvas_size=CANVAS)
    fk = FTv.KeyPoints(fiamma.from_numpy(kp.copy()), canvas_size=CANVAS)
    to, fo = getattr(TF, fn)(tk, *args, **kw), getattr(FF, fn)(fk, *args, **kw)
    np.testing.assert_allclose(fo.numpy(), to.numpy(), atol=1e-3)
    assert tuple(fo.canvas_size) == tuple(to.canvas_size)
    for t_in, f_in, tol in [(TT.Mask(torch.from_numpy(m)), FTv.Mask(fiamma.from_numpy(m)), 0),
                            (TT.Image(torch.from_numpy(img)), FTv.Image(fiamma.from_numpy(img)),
                             1)]:
        to, fo = getattr(TF, fn)(t_in, *args, **kw), getattr(FF, fn)(f_in, *args, **kw)
        assert tuple(fo.shape) == tuple(to.shape)
        diff = np.abs(fo.numpy().astype(int) - to.numpy().astype(int))
        assert (diff > tol).mean() <= 0.01, case


def test_center_crop_larger_than_input_follows_the_image():
    # torchvision shifts boxes by round((crop - size) / 2) while it pads the image by
    # (crop - size) // 2; fiamma moves boxes with the image (documented deviation)
    torch, TT, TV, TF = _MODS
    fb = FTv.BoundingBoxes([[0.0, 0.0, 1.0, 1.0]], format="XYXY", canvas_size=(37, 45))
    out = FF.center_crop(fb, [50, 60])
    assert out.tolist() == [[7, 6, 8, 7]]


@pytest.mark.parametrize("name,args", [("adjust_brightness", (1.3,)),
                                       ("adjust_contrast", (0.7,)),
                                       ("adjust_saturation", (1.5,)), ("adjust_hue", (0.1,)),
                                       ("rgb_to_grayscale", ()),
                                       ("gaussian_blur", ([5, 3], [1.5, 0.8]))])
def test_colour_kernels_equal_torchvision(name, args):
    torch, TT, TV, TF = _MODS
    _, _, img, _ = _data()
    to = getattr(TF, name)(TT.Image(torch.from_numpy(img)), *args)
    fo = getattr(FF, name)(FTv.Image(fiamma.from_numpy(img)), *args)
    assert type(fo) is FTv.Image
    diff = np.abs(fo.numpy().astype(int) - to.numpy().astype(int))
    assert diff.max() <= 1


def test_deterministic_transforms_on_a_sample_equal_torchvision():
    torch, TT, TV, TF = _MODS
    b, kp, img, m = _data()
    b[1] = [3, 3, 3.5, 9]
    b[2] = [-5, 2, 20, 9]
    labels = np.arange(6)

    def sample(T, lib, wrap):
        return (T.Image(wrap(img)),
                {"boxes": T.BoundingBoxes(wrap(b), format="XYXY", canvas_size=CANVAS),
                 "labels": wrap(labels), "masks": T.Mask(wrap(np.repeat(m[:1], 6, 0)))})

    tf_t = TV.Compose([TV.Pad([2, 3]), TV.Resize((50, 40)), TV.CenterCrop((40, 36)),
                       TV.ConvertBoundingBoxFormat("CXCYWH"), TV.ClampBoundingBoxes(),
                       TV.SanitizeBoundingBoxes(), TV.ToDtype(torch.float32, scale=True),
                       TV.Normalize([0.5] * 3, [0.25] * 3)])
    tf_f = FV.Compose([FV.Pad([2, 3]), FV.Resize((50, 40)), FV.CenterCrop((40, 36)),
                       FV.ConvertBoundingBoxFormat("CXCYWH"), FV.ClampBoundingBoxes(),
                       FV.SanitizeBoundingBoxes(), FV.ToDtype(fiamma.float32, scale=True),
                       FV.Normalize([0.5] * 3, [0.25] * 3)])
    ti, tt = tf_t(sample(TT, torch, lambda a: torch.from_numpy(a.copy())))
    fi, ft = tf_f(sample(FTv, fiamma, lambda a: fiamma.from_numpy(a.copy())))
    np.testing.assert_allclose(fi.numpy(), ti.numpy(), atol=0.02)
    np.testing.assert_allclose(ft["boxes"].numpy(), tt["boxes"].numpy(), atol=1e-3)
    assert ft["labels"].tolist() == tt["labels"].tolist()
    assert tuple(ft["masks"].shape) == tuple(tt["masks"].shape)
    np.testing.assert_array_equal(ft["masks"].numpy(), tt["masks"].numpy())


def test_mixup_cutmix_fixed_params_equal_torchvision():
    torch, TT, TV, TF = _MODS
    x = np.random.default_rng(2).random((3, 3, 8, 10)).astype(np.float32)
    y = np.array([0, 2, 1])
    for tcls, fcls, params in [(TV.MixUp, FV.MixUp, {"lam": 0.3}),
                               (TV.CutMix, FV.CutMix, {"box": (2, 1, 7, 6),
                                                       "lam_adjusted": 1 - 25 / 80})]:
        t = tcls(num_classes=4)
        ty = torch.from_numpy(y)
        tp = {"labels": ty, "batch_size": 3, **params}
        ti = t.transform(torch.from_numpy(x), tp)
        tl = t.transform(ty, tp)
        f = fcls(num_classes=4)
        fi, lam = f._mix(fiamma.from_numpy(x.copy()), params)
        np.testing.assert_allclose(fi.numpy(), ti.numpy(), atol=1e-6)
        one_hot = np.eye(4, dtype=np.float32)[y]
        np.testing.assert_allclose(np.roll(one_hot, 1, 0) * (1 - lam) + one_hot * lam,
                                   tl.numpy(), atol=1e-6)
