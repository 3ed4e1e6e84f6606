"""transforms.v2 and tv_tensors: box, mask and keypoint kernels against hand-computed cases,
image kernels against the v1 transforms, the plain-tensor heuristic, nested samples, type and
metadata preservation, and (marked ``parity``) the kernels and fixed-parameter transforms
against torchvision 0.28."""
import copy

import numpy as np
import pytest
from PIL import Image as PILImage

import fiamma
from fiamma.vision import tv_tensors as tv
from fiamma.vision.transforms import functional as F1, v2
from fiamma.vision.transforms.v2 import functional as F


def _boxes(rows, fmt="XYXY", canvas=(10, 20), dtype=fiamma.float32):
    return tv.BoundingBoxes(fiamma.tensor(rows, dtype=dtype), format=fmt, canvas_size=canvas)


def _img(c=3, h=10, w=20, seed=0):
    a = np.random.default_rng(seed).integers(0, 256, (c, h, w), dtype=np.uint8)
    return tv.Image(fiamma.from_numpy(a))


# ---------------------------------------------------------------------------- tv_tensors

def test_tv_tensor_types_and_unwrapping():
    b = _boxes([[1, 2, 3, 4]])
    assert b.format is tv.BoundingBoxFormat.XYXY and b.canvas_size == (10, 20)
    assert type(b + 1) is fiamma.Tensor            # ordinary ops unwrap
    assert type(b.clone()) is tv.BoundingBoxes and b.clone().canvas_size == (10, 20)
    assert type(b.to(fiamma.float64)) is tv.BoundingBoxes
    assert copy.deepcopy(b).format is b.format
    assert tuple(tv.Image(fiamma.zeros(4, 5)).shape) == (1, 4, 5)
    m = tv.Mask(PILImage.new("L", (6, 4)))
    assert tuple(m.shape) == (4, 6)
    w = tv.wrap(fiamma.zeros(1, 4), like=b, canvas_size=(3, 3))
    assert type(w) is tv.BoundingBoxes and w.canvas_size == (3, 3) and w.format is b.format
    with pytest.raises(ValueError, match="format"):
        tv.BoundingBoxes([[1, 2, 3, 4]], format="XYZ", canvas_size=(1, 1))
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        tv.BoundingBoxes([[1, 2, 3]], format="XYXY", canvas_size=(1, 1))
    with pytest.raises(ValueError, match="canvas_size"):
        tv.KeyPoints([[1, 2]], canvas_size=5)
    with pytest.raises(ValueError, match=r"\(\.\.\., 2\)"):
        tv.KeyPoints([[1, 2, 3]], canvas_size=(5, 5))


# ---------------------------------------------------------------------------- hand cases

def test_box_flips_by_hand():
    b = _boxes([[1, 2, 4, 6]], canvas=(10, 20))
    assert F.horizontal_flip(b).tolist() == [[16, 2, 19, 6]]
    assert F.vertical_flip(b).tolist() == [[1, 4, 4, 8]]
    wh = F.convert_bounding_box_format(b, new_format="XYWH")
    assert wh.tolist() == [[1, 2, 3, 4]] and wh.format is tv.BoundingBoxFormat.XYWH
    assert F.horizontal_flip(wh).tolist() == [[16, 2, 3, 4]]
    kp = tv.KeyPoints([[0, 0], [19, 9]], canvas_size=(10, 20))
    assert F.horizontal_flip(kp).tolist() == [[19, 0], [0, 9]]


def test_box_resize_crop_pad_by_hand():
    b = _boxes([[2, 2, 6, 8]], canvas=(10, 20))
    r = F.resize(b, [20, 10])
    assert r.tolist() == [[1, 4, 3, 16]] and r.canvas_size == (20, 10)
    c = F.crop(b, 3, 1, 4, 4)          # top, left, height, width: clamped into the window
    assert c.tolist() == [[1, 0, 4, 4]] and c.canvas_size == (4, 4)
    p = F.pad(b, [1, 2, 3, 4])
    assert p.tolist() == [[3, 4, 7, 10]] and p.canvas_size == (16, 24)
    cc = F.center_crop(b, [6, 10])     # top 2, left 5
    assert cc.tolist() == [[0, 0, 1, 6]]
    i = _boxes([[2, 2, 7, 9]], dtype=fiamma.int64, canvas=(10, 20))
    assert F.resize(i, [5, 10]).tolist() == [[1, 1, 3, 4]]       # int boxes truncate
    assert F.resize(i, [5, 10]).dtype == fiamma.int64


def test_box_affine_by_hand():
    # rotating the square canvas by 90 degrees about its centre maps box corners exactly
    b = _boxes([[1, 2, 4, 3]], canvas=(10, 10))
    r = F.rotate(b, 90.0)                 # counter-clockwise: (x, y) -> (y, 10 - x)
    np.testing.assert_allclose(r.numpy(), [[2, 6, 3, 9]], atol=1e-5)
    a = F.affine(b, angle=0.0, translate=[2, 1], scale=1.0, shear=[0.0, 0.0])
    np.testing.assert_allclose(a.numpy(), [[3, 3, 6, 4]], atol=1e-5)
    s = F.affine(b, angle=0.0, translate=[0, 0], scale=2.0, shear=[0.0, 0.0])
    np.testing.assert_allclose(s.numpy(), [[0, 0, 3, 1]], atol=1e-5)   # (-3,-1,3,1) clamped
    e = F.rotate(_boxes([[0, 0, 20, 10]], canvas=(10, 20)), 90.0, expand=True)
    assert e.canvas_size == (20, 10)
    np.testing.assert_allclose(e.numpy(), [[0, 0, 10, 20]], atol=1e-4)
    corners = [[0, 0], [9, 0], [9, 9], [0, 9]]
    shifted = [[2, 1], [11, 1], [11, 10], [2, 10]]      # a translation by (2, 1)
    np.testing.assert_allclose(F.perspective(b, corners, shifted).numpy(), [[3, 3, 6, 4]],
                               atol=1e-4)
    kp = F.rotate(tv.KeyPoints([[1, 2]], canvas_size=(10, 10)), 90.0)
    np.testing.assert_allclose(kp.numpy(), [[2, 9]], atol=1e-5)


def test_clamp_and_sanitize():
    b = _boxes([[-2, 1, 25, 4], [3, 3, 3.5, 9], [5, 5, 9, 9], [1, 1, 30, 5]], canvas=(10, 20))
    assert F.clamp_bounding_boxes(b).tolist()[0] == [0, 1, 20, 4]
    assert F.clamp_bounding_boxes(fiamma.tensor([[-1.0, 0, 5, 50]]), format="XYXY",
                                  canvas_size=(10, 10)).tolist() == [[0, 0, 5, 10]]
    none = tv.BoundingBoxes(b, format="XYXY", canvas_size=(10, 20), clamping_mode=None)
    assert F.clamp_bounding_boxes(none).tolist() == b.tolist()
    labels = fiamma.tensor([1, 2, 3, 4])
    masks = tv.Mask(fiamma.zeros(4, 10, 20, dtype=fiamma.uint8))
    sample = {"boxes": b, "labels": labels, "masks": masks, "semantic": tv.Mask(
        fiamma.zeros(10, 20)), "name": "x"}
    out = v2.SanitizeBoundingBoxes()(sample)
    # box 0 and 3 leave the canvas, box 1 is thinner than min_size
    assert out["boxes"].tolist() == [[5, 5, 9, 9]] and out["labels"].tolist() == [3]
    assert tuple(out["masks"].shape) == (1, 10, 20) and type(out["masks"]) is tv.Mask
    assert tuple(out["semantic"].shape) == (10, 20) and out["name"] == "x"
    out = v2.Compose([v2.ClampBoundingBoxes(), v2.SanitizeBoundingBoxes()])(sample)
    assert out["labels"].tolist() == [1, 3, 4]
    with pytest.raises(ValueError, match="labels"):
        v2.SanitizeBoundingBoxes()({"boxes": b, "lbl": labels})
    with pytest.raises(ValueError, match="must match"):
        v2.SanitizeBoundingBoxes()({"boxes": b, "labels": labels[:2]})
    only = v2.SanitizeBoundingBoxes(labels_getter=None)(b)
    assert only.shape[0] == 1
    with pytest.raises(ValueError, match="min_size"):
        v2.SanitizeBoundingBoxes(min_size=0.5)


def test_mask_kernels_match_numpy():
    m = np.random.default_rng(0).integers(0, 5, (2, 7, 9)).astype(np.uint8)
    mk = tv.Mask(fiamma.from_numpy(m))
    np.testing.assert_array_equal(F.horizontal_flip(mk).numpy(), m[..., ::-1])
    np.testing.assert_array_equal(F.vertical_flip(mk[0]).numpy() if False else
                                  F.vertical_flip(tv.Mask(fiamma.from_numpy(m[0]))).numpy(),
                                  m[0, ::-1])
    np.testing.assert_array_equal(F.crop(mk, 1, 2, 3, 4).numpy(), m[:, 1:4, 2:6])
    up = F.resize(tv.Mask(fiamma.from_numpy(m[0])), [14, 18])   # nearest: values kept
    np.testing.assert_array_equal(up.numpy(), m[0].repeat(2, 0).repeat(2, 1))
    assert type(up) is tv.Mask


def test_image_kernels_equal_v1():
    img = _img(h=17, w=23)
    pure = img.as_subclass(fiamma.Tensor)
    pairs = [
        (F.resize(img, [11, 30]), F1.resize(pure, [11, 30])),
        (F.rotate(img, 33.0, expand=True), F1.rotate(pure, 33.0, expand=True)),
        (F.affine(img, 10.0, [2, 3], 1.1, [4.0, 2.0]), F1.affine(pure, 10.0, [2, 3], 1.1,
                                                                    [4.0, 2.0])),
        (F.pad(img, [1, 2], padding_mode="reflect"), F1.pad(pure, [1, 2],
                                                            padding_mode="reflect")),
        (F.adjust_hue(img, 0.2), F1.adjust_hue(pure, 0.2)),
        (F.gaussian_blur(img, [3, 5], [1.0, 2.0]), F1.gaussian_blur(pure, [3, 5], [1.0, 2.0])),
    ]
    for ours, ref in pairs:
        assert type(ours) is tv.Image
        np.testing.assert_array_equal(ours.numpy(), ref.numpy())
    pil = PILImage.fromarray(img.numpy().transpose(1, 2, 0))
    out = F.horizontal_flip(pil)
    assert isinstance(out, PILImage.Image)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(F1.hflip(pil)))


# ---------------------------------------------------------------------------- transforms

def test_heuristic_and_nested_structures():
    flip = v2.RandomHorizontalFlip(p=1.0)
    a, b = fiamma.arange(6.0).reshape(1, 2, 3), fiamma.arange(6.0).reshape(1, 2, 3)
    out_a, out_b = flip(a, b)              # the first plain tensor is the image
    assert out_a.tolist() == [[[2, 1, 0], [5, 4, 3]]] and out_b.tolist() == b.tolist()
    img = _img(h=2, w=3)
    out_img, out_plain = flip(img, a)      # with an Image present plain tensors pass through
    assert out_plain.tolist() == a.tolist()
    boxes = _boxes([[0, 0, 1, 2]], canvas=(2, 3))
    sample = (img, {"boxes": boxes, "labels": fiamma.tensor([7]), "id": 3,
                    "more": [tv.Mask(fiamma.zeros(2, 3))]})
    out = flip(sample)
    assert isinstance(out, tuple) and type(out[0]) is tv.Image
    assert out[1]["boxes"].tolist() == [[2, 0, 3, 2]] and out[1]["id"] == 3
    assert type(out[1]["more"][0]) is tv.Mask and out[1]["labels"].tolist() == [7]
    with pytest.raises(ValueError, match="multiple HxW"):
        v2.RandomCrop(1)(img, _boxes([[0, 0, 1, 1]], canvas=(5, 5)))


def test_pipeline_keeps_boxes_on_their_content():
    # a bright rectangle and its box; after random geometric transforms the box still
    # encloses the bright pixels
    fiamma.manual_seed(0)
    a = np.zeros((3, 40, 50), np.uint8)
    a[:, 10:20, 15:35] = 255
    img = tv.Image(fiamma.from_numpy(a))
    boxes = _boxes([[15, 10, 35, 20]], canvas=(40, 50))
    tf = v2.Compose([v2.RandomZoomOut(p=1.0, side_range=(1.0, 2.0)),
                     v2.RandomHorizontalFlip(p=1.0), v2.RandomCrop((40, 50),
                                                                   pad_if_needed=True),
                     v2.Resize((30, 40)), v2.RandomVerticalFlip(p=1.0)])
    for _ in range(5):
        oi, ob = tf(img, boxes)
        assert ob.canvas_size == tuple(oi.shape[-2:])
        ys, xs = np.nonzero(oi.numpy()[0] > 128)
        x1, y1, x2, y2 = ob.tolist()[0]
        if len(xs):
            assert x1 - 1.5 <= xs.min() and xs.max() + 1 <= x2 + 1.5
            assert y1 - 1.5 <= ys.min() and ys.max() + 1 <= y2 + 1.5


def test_to_image_to_dtype_to_pure():
    pil = PILImage.new("RGB", (4, 3), (255, 0, 0))
    im = v2.ToImage()(pil)
    assert type(im) is tv.Image and tuple(im.shape) == (3, 3, 4)
    nd = v2.ToImage()(np.zeros((3, 4), np.uint8))
    assert tuple(nd.shape) == (1, 3, 4)
    boxes = _boxes([[0, 0, 1, 1]], canvas=(3, 4), dtype=fiamma.int64)
    fim, fb = v2.ToDtype(fiamma.float32, scale=True)(im, boxes)
    assert fim.dtype == fiamma.float32 and float(fim.max()) == 1.0 and type(fim) is tv.Image
    assert fb.dtype == fiamma.int64                    # a dtype converts images only
    fim, fb = v2.ToDtype({tv.Image: fiamma.float64, "others": fiamma.float32})(im, boxes)
    assert fim.dtype == fiamma.float64 and fb.dtype == fiamma.float32
    assert float(fim.max()) == 255.0
    p = v2.ToPureTensor()({"a": im, "b": boxes})
    assert type(p["a"]) is fiamma.Tensor and type(p["b"]) is fiamma.Tensor
    n = v2.Normalize([0.5] * 3, [0.5] * 3)(v2.ToDtype(fiamma.float32, scale=True)(im))
    assert type(n) is tv.Image and float(n.max()) == 1.0
    c = v2.ConvertBoundingBoxFormat("CXCYWH")(boxes.to(fiamma.float32))  # .float() unwraps
    assert c.tolist() == [[0.5, 0.5, 1, 1]] and c.format.name == "CXCYWH"


def test_random_iou_crop_and_sanitize():
    fiamma.manual_seed(3)
    img = _img(h=60, w=80)
    boxes = _boxes([[5, 5, 30, 30], [40, 20, 75, 55], [60, 2, 70, 10]], canvas=(60, 80))
    labels = fiamma.tensor([1, 2, 3])
    tf = v2.Compose([v2.RandomIoUCrop(), v2.SanitizeBoundingBoxes()])
    seen_crop = False
    for _ in range(10):
        oi, tgt = tf(img, {"boxes": boxes, "labels": labels})
        assert tgt["boxes"].canvas_size == tuple(oi.shape[-2:])
        assert tgt["boxes"].shape[0] == tgt["labels"].shape[0] >= 1
        seen_crop |= tuple(oi.shape[-2:]) != (60, 80)
    assert seen_crop
    with pytest.raises(TypeError, match="BoundingBoxes"):
        v2.RandomIoUCrop()(img)


def test_random_transforms_seeded_and_reprs():
    img = _img(h=32, w=32)
    boxes = _boxes([[4, 4, 20, 12]], canvas=(32, 32))
    for t in [v2.RandomResizedCrop(16), v2.RandomAffine(20, (0.1, 0.1), (0.8, 1.2), 5),
              v2.RandomRotation(30, expand=True), v2.RandomPerspective(p=1.0),
              v2.ColorJitter(0.3, 0.3, 0.3, 0.1),
              v2.RandomPhotometricDistort(p=1.0), v2.GaussianBlur(3),
              v2.RandomErasing(p=1.0), v2.Grayscale(3), v2.CenterCrop(20), v2.Pad(2),
              v2.RandomApply([v2.RandomVerticalFlip(1.0)], p=0.5),
              v2.RandomChoice([v2.Pad(1), v2.Pad(2)]),
              v2.RandomOrder([v2.Pad(1), v2.RandomHorizontalFlip(1.0)]),
              v2.Lambda(lambda x: x.clone(), tv.Image)]:
        fiamma.manual_seed(1)
        o1 = t(img, boxes)
        fiamma.manual_seed(1)
        o2 = t(img, boxes)
        assert type(o1[0]) is tv.Image and type(o1[1]) is tv.BoundingBoxes
        assert o1[1].canvas_size == tuple(o1[0].shape[-2:]), t
        np.testing.assert_array_equal(o1[0].numpy(), o2[0].numpy())
        np.testing.assert_array_equal(o1[1].numpy(), o2[1].numpy())
    assert "p=0.5" in repr(v2.RandomHorizontalFlip())


def test_v1_transforms_still_work():
    from fiamma.vision import transforms as T
    out = T.Compose([T.Resize(8), T.CenterCrop(8)])(PILImage.new("RGB", (20, 10)))
    assert out.size == (8, 8)


# ---------------------------------------------------------------------------- MixUp / CutMix

def test_beta_sampler_statistics():
    from fiamma.vision.transforms.v2._augment import sample_beta
    fiamma.manual_seed(0)
    for a, var in [(2.0, 1 / 20), (0.5, 1 / 8)]:
        s = np.array([sample_beta(a, a) for _ in range(3000)])
        assert ((s > 0) & (s < 1)).all()
        assert abs(s.mean() - 0.5) < 0.03 and abs(s.var() - var) < 0.2 * var


def test_mixup_and_cutmix_by_hand():
    x = fiamma.arange(2 * 1 * 4 * 4, dtype=fiamma.float32).reshape(2, 1, 4, 4)
    y = fiamma.tensor([0, 2])
    mix = v2.MixUp(num_classes=3)
    out, lam = mix._mix(tv.Image(x), {"lam": 0.25})
    np.testing.assert_allclose(out.numpy(), 0.25 * x.numpy() + 0.75 * x.numpy()[::-1])
    assert type(out) is tv.Image
    cut = v2.CutMix(num_classes=3)
    out, lam = cut._mix(x, {"box": (1, 0, 3, 2), "lam_adjusted": 0.75})
    ref = x.numpy().copy()
    ref[0, :, 0:2, 1:3] = x.numpy()[1, :, 0:2, 1:3]
    ref[1, :, 0:2, 1:3] = x.numpy()[0, :, 0:2, 1:3]
    np.testing.assert_array_equal(out.numpy(), ref)
    fiamma.manual_seed(0)
    xm, ym = mix(x, y)
    assert tuple(ym.shape) == (2, 3)
    np.testing.assert_allclose(ym.sum(1).numpy(), [1, 1], rtol=1e-6)
    lam = float(ym[0, 0])                     # label 0 weighted by lam, label 2 by 1 - lam
    np.testing.assert_allclose(xm.numpy(), lam * x.numpy() + (1 - lam) * x.numpy()[::-1],
                               rtol=1e-5, atol=1e-5)
    fiamma.manual_seed(1)
    out = cut({"image": tv.Image(x), "labels": y})
    assert type(out["image"]) is tv.Image and tuple(out["labels"].shape) == (2, 3)
    with pytest.raises(ValueError, match="num_classes"):
        v2.MixUp()(x, y)
    with pytest.raises(ValueError, match="bounding boxes"):
        mix(x, y, _boxes([[0, 0, 1, 1]], canvas=(4, 4)))
    with pytest.raises(ValueError, match="batch"):
        mix(x[0], y)


# ---------------------------------------------------------------------------- auto-augment

@pytest.mark.parametrize("name,kw", [("AutoAugment", {}), ("RandAugment", {"num_ops": 3}),
                                     ("TrivialAugmentWide", {})])
def test_auto_augment_equals_v1_on_images_and_moves_boxes(name, kw):
    from fiamma.vision import transforms as T
    img = _img(h=24, w=28, seed=3)
    pure = img.as_subclass(fiamma.Tensor)
    t2, t1 = getattr(v2, name)(**kw), getattr(T, name)(**kw)
    for seed in range(6):
        fiamma.manual_seed(seed)
        ref = t1(pure)
        fiamma.manual_seed(seed)
        out = t2(img)
        assert type(out) is tv.Image
        np.testing.assert_array_equal(out.numpy(), ref.numpy())
        fiamma.manual_seed(seed)
        oi, ob, om = t2(img, _boxes([[4, 4, 12, 10]], canvas=(24, 28)),
                        tv.Mask(fiamma.ones(24, 28, dtype=fiamma.uint8)))
        assert type(ob) is tv.BoundingBoxes and ob.canvas_size == tuple(oi.shape[-2:])
        assert type(om) is tv.Mask and tuple(om.shape) == tuple(oi.shape[-2:])
    with pytest.raises(TypeError, match="exactly one image"):
        t2(_boxes([[0, 0, 1, 1]]))


def test_auto_augment_ops_on_boxes_by_hand():
    from fiamma.vision.transforms.v2._auto_augment import _apply
    b = _boxes([[2, 2, 6, 5]], canvas=(10, 20))
    assert _apply(b, "TranslateX", 3.0, F.InterpolationMode.NEAREST, None).tolist() == \
        [[5, 2, 9, 5]]
    assert _apply(b, "Brightness", 0.5, F.InterpolationMode.NEAREST, None) is b
    sheared = _apply(b, "ShearX", 0.5, F.InterpolationMode.NEAREST, None)
    # a positive ShearX maps x -> x - 0.5 y about the top-left corner (as torchvision):
    # corners' x: 1, 5, 3.5, -0.5 -> [-0.5, 5], clamped to [0, 5]
    np.testing.assert_allclose(sheared.numpy(), [[0, 2, 5, 5]], atol=1e-5)
