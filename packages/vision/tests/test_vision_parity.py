"""Parity with torchvision.transforms (optional reference, skipped when it is not installed):
the same deterministic operations on the same PIL images and tensors give the same results, and
transforms print the same reprs."""


import numpy as np
import pytest
from _tv_import import tv_import
from PIL import Image

import fiamma
from fiamma.vision import transforms as T
from fiamma.vision.transforms import functional as F


def _import_torchvision():
    try:
        import torch
    except ImportError:
        return None, None, None
    TT = tv_import("torchvision.transforms")
    TF = tv_import("torchvision.transforms.functional") if TT is not None else None
    return (torch, TT, TF) if TF is not None else (None, None, None)


torch, TT, TF = _import_torchvision()
pytestmark = [
    pytest.mark.parity,
    pytest.mark.skipif(TT is None, reason="torchvision is not installed"),
]


def _data(h=37, w=50, seed=0):
    a = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    img = Image.fromarray(a)
    tt = torch.from_numpy(a).permute(2, 0, 1).contiguous()
    ft = fiamma.from_numpy(a.copy()).permute(2, 0, 1).contiguous()
    return img, tt, ft


def _diff(ours, theirs):
    if isinstance(ours, Image.Image):
        return np.abs(np.asarray(ours).astype(float) - np.asarray(theirs).astype(float))
    a, b = ours.numpy().astype(float), theirs.numpy().astype(float)
    assert a.shape == b.shape
    return np.abs(a - b)


def _same(ours, theirs, tol=0.0, frac=0.0):
    d = _diff(ours, theirs)
    assert np.mean(d > tol + 1e-6) <= frac, (np.mean(d > tol + 1e-6), d.max())


def _modes():
    return [
        (getattr(F.InterpolationMode, m), getattr(TF.InterpolationMode, m))
        for m in ("NEAREST", "NEAREST_EXACT", "BILINEAR", "BICUBIC")
    ]


@pytest.mark.parametrize("size", [(20, 30), (80, 70), (37, 23), [15]])
@pytest.mark.parametrize("antialias", [True, False])
def test_resize(size, antialias):
    img, tt, ft = _data()
    for fm, tm in _modes():
        _same(
            F.resize(ft, list(size), fm, antialias=antialias),
            TF.resize(tt, list(size), tm, antialias=antialias),
            tol=1,
        )
        _same(
            F.resize(ft.float() / 255, list(size), fm, antialias=antialias),
            TF.resize(tt.float() / 255, list(size), tm, antialias=antialias),
            tol=1e-5,
        )
        _same(F.resize(img, list(size), fm), TF.resize(img, list(size), tm))
    bt = fiamma.stack([ft, ft.flip(-1)])
    btt = torch.stack([tt, tt.flip(-1)])
    _same(F.resize(bt, [21, 22]), TF.resize(btt, [21, 22]), tol=1)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric"])
def test_pad_crop(mode):
    img, tt, ft = _data()
    _same(F.pad(ft, [3, 2, 1, 4], 5, mode), TF.pad(tt, [3, 2, 1, 4], 5, mode))
    _same(F.pad(img, [3, 2, 1, 4], 5, mode), TF.pad(img, [3, 2, 1, 4], 5, mode))
    _same(F.crop(ft, -3, -2, 45, 60), TF.crop(tt, -3, -2, 45, 60))
    _same(F.center_crop(ft, [41, 57]), TF.center_crop(tt, [41, 57]))
    _same(F.center_crop(img, [41, 57]), TF.center_crop(img, [41, 57]))


@pytest.mark.parametrize("interp", ["NEAREST", "BILINEAR"])
def test_warps(interp):
    img, tt, ft = _data()
    fm, tm = getattr(F.InterpolationMode, interp), getattr(TF.InterpolationMode, interp)
    # nearest: rare exact-half sampling positions may round differently (float32 order)
    tol, frac = (0, 0.02) if interp == "NEAREST" else (1, 0.0)
    for ang in (30, -45, 90):
        for expand in (False, True):
            fill = [0.0, 0.0, 0.0] if expand else None
            _same(
                F.rotate(ft, ang, fm, expand, fill=fill),
                TF.rotate(tt, ang, tm, expand, fill=fill),
                tol,
                frac,
            )
            _same(F.rotate(img, ang, fm, expand, fill=5), TF.rotate(img, ang, tm, expand, fill=5))
        _same(
            F.rotate(ft, ang, fm, center=[10, 5], fill=[1.0, 2.0, 3.0]),
            TF.rotate(tt, ang, tm, center=[10, 5], fill=[1.0, 2.0, 3.0]),
            tol,
            frac,
        )
    for args in [
        (20, [3, -2], 1.2, [10, 5]),
        (0, [0, 0], 1.0, [-16.7, 0]),
        (-10, [5, 5], 0.8, [0, 12]),
    ]:
        _same(
            F.affine(ft, *args, interpolation=fm, fill=[9.0, 9.0, 9.0]),
            TF.affine(tt, *args, interpolation=tm, fill=[9.0, 9.0, 9.0]),
            tol,
            frac,
        )
        _same(
            F.affine(ft.float(), *args, interpolation=fm),
            TF.affine(tt.float(), *args, interpolation=tm),
            1e-2,
            frac,
        )
        _same(F.affine(img, *args, interpolation=fm), TF.affine(img, *args, interpolation=tm))
        _same(
            F.affine(ft, *args, interpolation=fm, center=[0, 0]),
            TF.affine(tt, *args, interpolation=tm, center=[0, 0]),
            tol,
            frac,
        )
    sp = [[0, 0], [49, 0], [49, 36], [0, 36]]
    ep = [[3, 2], [45, 1], [47, 33], [2, 35]]
    _same(
        F.perspective(ft, sp, ep, fm, fill=[0.0, 0.0, 0.0]),
        TF.perspective(tt, sp, ep, tm, fill=[0.0, 0.0, 0.0]),
        tol,
        frac,
    )
    _same(F.perspective(img, sp, ep, fm), TF.perspective(img, sp, ep, tm))


@pytest.mark.parametrize(
    "name,arg",
    [
        ("adjust_brightness", 1.3),
        ("adjust_contrast", 0.6),
        ("adjust_saturation", 1.7),
        ("adjust_hue", 0.2),
        ("adjust_hue", -0.3),
        ("adjust_gamma", 0.7),
        ("adjust_sharpness", 1.8),
        ("posterize", 3),
        ("solarize", 100),
        ("invert", None),
        ("autocontrast", None),
        ("equalize", None),
    ],
)
def test_color(name, arg):
    img, tt, ft = _data()
    args = () if arg is None else (arg,)
    _same(getattr(F, name)(ft, *args), getattr(TF, name)(tt, *args))
    _same(getattr(F, name)(img, *args), getattr(TF, name)(img, *args))
    if name not in ("posterize", "equalize"):
        fargs = (0.4,) if name == "solarize" else args
        _same(
            getattr(F, name)(ft.float() / 255, *fargs),
            getattr(TF, name)(tt.float() / 255, *fargs),
            tol=1e-5,
        )


def test_blur_grayscale_conversion_normalize():
    img, tt, ft = _data()
    for ks, s in [([5, 5], [1.5, 1.5]), ([3, 7], [0.8, 2.0]), ([9, 9], [3.0, 3.0])]:
        _same(F.gaussian_blur(ft, ks, s), TF.gaussian_blur(tt, ks, s))
        _same(F.gaussian_blur(ft.float(), ks, s), TF.gaussian_blur(tt.float(), ks, s), 1e-3)
        _same(F.gaussian_blur(img, ks, s), TF.gaussian_blur(img, ks, s))
    _same(F.rgb_to_grayscale(ft, 3), TF.rgb_to_grayscale(tt, 3))
    _same(F.to_grayscale(img, 3), TF.to_grayscale(img, 3))
    _same(F.to_tensor(img), TF.to_tensor(img), 1e-7)
    _same(F.pil_to_tensor(img), TF.pil_to_tensor(img))
    _same(F.to_pil_image(ft.float() / 255), TF.to_pil_image(tt.float() / 255))
    _same(
        F.convert_image_dtype(ft.float() / 255, fiamma.uint8),
        TF.convert_image_dtype(tt.float() / 255, torch.uint8),
    )
    _same(F.convert_image_dtype(ft, fiamma.int32), TF.convert_image_dtype(tt, torch.int32))
    _same(
        F.normalize(ft.float(), [1, 2, 3], [2, 3, 4]),
        TF.normalize(tt.float(), [1, 2, 3], [2, 3, 4]),
        1e-5,
    )
    for a, b in zip(F.ten_crop(ft, [10, 12]), TF.ten_crop(tt, [10, 12])):
        _same(a, b)


def test_reprs():
    pairs = [
        (T.Resize(256), TT.Resize(256)),
        (
            T.Resize((32, 40), T.InterpolationMode.BICUBIC, antialias=False),
            TT.Resize((32, 40), TT.InterpolationMode.BICUBIC, antialias=False),
        ),
        (T.CenterCrop(224), TT.CenterCrop(224)),
        (T.RandomCrop(32, padding=4), TT.RandomCrop(32, padding=4)),
        (T.RandomResizedCrop(224), TT.RandomResizedCrop(224)),
        (T.RandomHorizontalFlip(), TT.RandomHorizontalFlip()),
        (T.RandomVerticalFlip(0.3), TT.RandomVerticalFlip(0.3)),
        (T.Normalize([0.5, 0.4], [0.2, 0.1]), TT.Normalize([0.5, 0.4], [0.2, 0.1])),
        (T.ColorJitter(0.4, 0.3, 0.2, 0.1), TT.ColorJitter(0.4, 0.3, 0.2, 0.1)),
        (T.Grayscale(3), TT.Grayscale(3)),
        (T.RandomGrayscale(), TT.RandomGrayscale()),
        (T.Pad(3), TT.Pad(3)),
        (T.FiveCrop(10), TT.FiveCrop(10)),
        (T.TenCrop(10), TT.TenCrop(10)),
        (T.GaussianBlur(5), TT.GaussianBlur(5)),
        (T.RandomErasing(), TT.RandomErasing()),
        (T.RandomInvert(), TT.RandomInvert()),
        (T.RandomPosterize(3), TT.RandomPosterize(3)),
        (T.RandomSolarize(100), TT.RandomSolarize(100)),
        (T.RandomAdjustSharpness(2), TT.RandomAdjustSharpness(2)),
        (T.RandomAutocontrast(), TT.RandomAutocontrast()),
        (T.RandomEqualize(), TT.RandomEqualize()),
        (T.RandomPerspective(), TT.RandomPerspective()),
        (T.ToTensor(), TT.ToTensor()),
        (T.PILToTensor(), TT.PILToTensor()),
        (T.AutoAugment(), TT.AutoAugment()),
        (T.Compose([T.Resize(8), T.ToTensor()]), TT.Compose([TT.Resize(8), TT.ToTensor()])),
    ]
    for ours, theirs in pairs:
        assert repr(ours) == repr(theirs).replace("torchvision.transforms.", "")


def test_autoaugment_policies_and_spaces():
    from torchvision.transforms import autoaugment as tva

    from fiamma.vision.transforms._autoaugment import _space_rand

    for p in T.AutoAugmentPolicy:
        assert T.AutoAugment(p).policies == [
            tuple(tuple(o) for o in sp)
            for sp in TT.AutoAugment(tva.AutoAugmentPolicy(p.value)).policies
        ]
    ours = T.AutoAugment._augmentation_space(10, (30, 40))
    theirs = TT.AutoAugment()._augmentation_space(10, (30, 40))
    assert set(ours) == set(theirs)
    for k in theirs:
        np.testing.assert_allclose(np.asarray(ours[k][0], float), theirs[k][0].numpy(), rtol=1e-6)
        assert ours[k][1] == theirs[k][1]
    ours = _space_rand(31, (30, 40))
    theirs = TT.RandAugment()._augmentation_space(31, (30, 40))
    for k in theirs:
        np.testing.assert_allclose(np.asarray(ours[k][0], float), theirs[k][0].numpy(), rtol=1e-6)
    ours = T.TrivialAugmentWide()._augmentation_space(31)
    theirs = TT.TrivialAugmentWide()._augmentation_space(31)
    for k in theirs:
        np.testing.assert_allclose(np.asarray(ours[k][0], float), theirs[k][0].numpy(), rtol=1e-6)


def test_resize_large_downscale():
    img, tt, ft = _data(180, 240, seed=3)
    for fm, tm in _modes():
        for aa in (True, False):
            _same(
                F.resize(ft, [70, 97], fm, antialias=aa),
                TF.resize(tt, [70, 97], tm, antialias=aa),
                tol=1,
            )
            _same(
                F.resize(ft.float(), [70, 97], fm, antialias=aa),
                TF.resize(tt.float(), [70, 97], tm, antialias=aa),
                tol=1e-2,
            )
