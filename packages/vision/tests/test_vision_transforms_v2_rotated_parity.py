"""Rotated boxes and register_kernel beside torchvision 0.28 (parity session; skipped without
torchvision): every v2 kernel on XYWHR, CXCYWHR and XYXYXYXY boxes, soft and hard clamping,
with the same fixed parameters (torchvision computes in float32, fiamma in float64)."""

import numpy as np
import pytest
from _tv_import import v2_modules

import fiamma
from fiamma.vision import tv_tensors as FTv
from fiamma.vision.transforms import v2 as FV
from fiamma.vision.transforms.v2 import functional as FF

pytestmark = pytest.mark.parity


_TV = v2_modules()
if _TV is None:
    pytest.skip("torchvision is not installed", allow_module_level=True)
torch, TT, TV, TF, _ = _TV

ROT = ["XYWHR", "CXCYWHR", "XYXYXYXY"]
CANVAS = (60, 80)


def _cxcywhr(n=24, seed=0):
    # boxes inside, across the edges and outside the canvas, every angle
    rng = np.random.default_rng(seed)
    h, w = CANVAS
    return np.column_stack([rng.uniform(-10, w + 10, n), rng.uniform(-10, h + 10, n),
                            rng.uniform(3, 30, (n, 2)),
                            rng.uniform(-170, 170, n)]).astype(np.float32)


def _pair(fmt, mode="soft", seed=0):
    a = _cxcywhr(seed=seed)
    t = TT.BoundingBoxes(torch.from_numpy(a), format="CXCYWHR", canvas_size=CANVAS,
                         clamping_mode=mode)
    t = TF.convert_bounding_box_format(t, new_format=fmt)
    f = FTv.BoundingBoxes(fiamma.from_numpy(t.as_subclass(torch.Tensor).numpy().copy()),
                          format=fmt, canvas_size=CANVAS, clamping_mode=mode)
    return f, t


def _check(fo, to, atol=2e-3, canvas=None):
    assert isinstance(fo, FTv.BoundingBoxes)
    assert fo.format.name == to.format.name
    assert tuple(fo.canvas_size) == tuple(canvas or to.canvas_size)
    assert fo.clamping_mode == to.clamping_mode
    a = fo.as_subclass(fiamma.Tensor).numpy().astype(np.float64)
    b = to.as_subclass(torch.Tensor).numpy().astype(np.float64)
    assert a.shape == b.shape
    if fo.format.name != "XYXYXYXY":
        # angles can differ by 360 (atan2 at +-180 in float32 and float64)
        d = a[:, 4] - b[:, 4]
        a[:, 4] -= 360 * np.round(d / 360)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=atol)


@pytest.mark.parametrize("old", ROT)
@pytest.mark.parametrize("new", ROT)
def test_convert(old, new):
    f, t = _pair(old)
    _check(FF.convert_bounding_box_format(f, new_format=new),
           TF.convert_bounding_box_format(t, new_format=new))


CASES = [
    ("horizontal_flip", (), {}),
    ("vertical_flip", (), {}),
    ("resize", ([30, 100],), {}),
    ("resize", ([45],), {}),
    ("crop", (5, -3, 40, 50), {}),
    ("center_crop", ([40, 50],), {}),
    ("center_crop", ([70, 90],), {}),
    ("pad", ([3, 4, 5, 6],), {}),
    ("rotate", (30.0,), {}),
    ("rotate", (-75.0,), {"expand": True}),
    ("rotate", (110.0,), {"center": [20.0, 30.0]}),
    ("affine", (), {"angle": 25.0, "translate": [4, -3], "scale": 1.2, "shear": [10.0, -5.0]}),
    ("perspective", ([[0, 0], [79, 0], [79, 59], [0, 59]],
                     [[5, 3], [70, 0], [79, 50], [2, 59]]), {}),
    ("clamp_bounding_boxes", (), {}),
]


@pytest.mark.parametrize("mode", ["soft", "hard", None])
@pytest.mark.parametrize("fmt", ROT)
@pytest.mark.parametrize("name,args,kwargs", CASES, ids=[f"{c[0]}{i}" for i, c in
                                                          enumerate(CASES)])
def test_kernels(name, args, kwargs, fmt, mode):
    f, t = _pair(fmt, mode)
    canvas = None
    if kwargs.get("expand"):
        # torchvision sizes the boxes' expanded canvas with the centre in the matrix, its
        # image kernel without, and they can differ by one pixel (here 79 against 80):
        # fiamma gives the boxes the image's size
        canvas = tuple(getattr(TF, name)(torch.zeros(1, *CANVAS), *args, **kwargs).shape[-2:])
    _check(getattr(FF, name)(f, *args, **kwargs), getattr(TF, name)(t, *args, **kwargs),
           canvas=canvas)


@pytest.mark.parametrize("mode", ["soft", "hard"])
@pytest.mark.parametrize("fmt", ROT)
def test_elastic(fmt, mode):
    f, t = _pair(fmt, mode, seed=1)
    rng = np.random.default_rng(5)
    d = (rng.uniform(-0.05, 0.05, (1,) + CANVAS + (2,))).astype(np.float32)
    _check(FF.elastic(f, fiamma.from_numpy(d.copy())), TF.elastic(t, torch.from_numpy(d)))


@pytest.mark.parametrize("fmt", ROT)
def test_sanitize(fmt):
    f, t = _pair(fmt, "soft", seed=2)
    fo = FV.SanitizeBoundingBoxes(min_size=4, labels_getter=None)(f)
    to = TV.SanitizeBoundingBoxes(min_size=4, labels_getter=None)(t)
    assert 0 < to.shape[0] < f.shape[0]
    _check(fo, to)


def test_gallery_center_crops():
    # the gallery's box on a 640 x 427 photo, center-cropped with hard clamping
    for mode in ("soft", "hard"):
        tb = TT.BoundingBoxes([[860.0, 1100, 570, 1840, -7]], format="CXCYWHR",
                              canvas_size=(427, 640), clamping_mode=mode)
        fb = FTv.BoundingBoxes([[860.0, 1100, 570, 1840, -7]], format="CXCYWHR",
                               canvas_size=(427, 640), clamping_mode=mode)
        for size in (800, 1200, 2000, (640, 427)):
            _check(FV.CenterCrop(size)(fb), TV.CenterCrop(size)(tb))


def test_register_kernel_same_calls():
    seen = {}

    class TMine(TT.TVTensor):
        pass

    class FMine(FTv.TVTensor):
        pass

    @TF.register_kernel("resize", TMine)
    def tk(x, *args, **kwargs):
        seen["torch"] = (args, sorted(kwargs))
        return x

    @FF.register_kernel("resize", FMine)
    def fk(x, *args, **kwargs):
        seen["fiamma"] = (args, sorted(kwargs))
        return x

    TF.resize(TMine(torch.zeros(1, 2, 2)), [4, 4])
    FF.resize(FMine(fiamma.zeros(1, 2, 2)), [4, 4])
    assert seen["torch"] == seen["fiamma"]
    for lib, cls in ((TF, TMine), (FF, FMine)):
        with pytest.raises(TypeError):
            lib.hflip(cls([1.0]))
