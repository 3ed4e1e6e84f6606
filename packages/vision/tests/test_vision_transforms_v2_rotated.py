"""transforms.v2 on rotated boxes (XYWHR, CXCYWHR, XYXYXYXY): hand-computed cases and float64
references (rigid motions move the centre and add to the angle; uniform scaling scales)."""
import math

import numpy as np
import pytest

import fiamma
from fiamma.vision import tv_tensors
from fiamma.vision.transforms import v2
from fiamma.vision.transforms.v2 import functional as F

ROT = ["XYWHR", "CXCYWHR", "XYXYXYXY"]


def _boxes(rows, fmt="CXCYWHR", canvas=(10, 10), mode="soft", dtype=fiamma.float64):
    return tv_tensors.BoundingBoxes(fiamma.tensor(rows, dtype=dtype), format=fmt,
                                    canvas_size=canvas, clamping_mode=mode)


def _np(t):
    return np.asarray(t.as_subclass(fiamma.Tensor).numpy(), dtype=np.float64)


def _close(t, rows, atol=1e-9):
    return np.allclose(_np(t), np.asarray(rows, float), atol=atol)


def _random_cxcywhr(n, canvas, seed=0, inside=True):
    rng = np.random.default_rng(seed)
    h, w = canvas
    size = rng.uniform(2, 8, (n, 2))
    lo = 6 if inside else -10
    cx = rng.uniform(lo, w - lo, n) if inside else rng.uniform(-10, w + 10, n)
    cy = rng.uniform(lo, h - lo, n) if inside else rng.uniform(-10, h + 10, n)
    return np.column_stack([cx, cy, size, rng.uniform(-170, 170, n)])


def test_conversion_hand_cases():
    b = _boxes([[5.0, 5.0, 4.0, 2.0, 0.0], [5.0, 5.0, 4.0, 2.0, 90.0]])
    assert _close(F.convert_bounding_box_format(b, new_format="XYWHR"),
                  [[3, 4, 4, 2, 0], [4, 7, 4, 2, 90]])
    corners = F.convert_bounding_box_format(b, new_format="xyxyxyxy")
    assert corners.format == tv_tensors.BoundingBoxFormat.XYXYXYXY
    # unrotated: TL, TR, BR, BL; turned 90 degrees counter-clockwise (y down): the first
    # edge points up
    assert _close(corners, [[3, 4, 7, 4, 7, 6, 3, 6], [4, 7, 4, 3, 6, 3, 6, 7]])
    back = F.convert_bounding_box_format(corners, new_format="CXCYWHR")
    assert _close(back, _np(b))
    # plain tensors need old_format
    plain = F.convert_bounding_box_format(fiamma.tensor([[3.0, 4.0, 4.0, 2.0, 0.0]]),
                                          old_format="XYWHR", new_format="CXCYWHR")
    assert type(plain) is fiamma.Tensor and plain.tolist() == [[5.0, 5.0, 4.0, 2.0, 0.0]]


@pytest.mark.parametrize("old", ROT)
@pytest.mark.parametrize("new", ROT)
def test_conversion_round_trips(old, new):
    ref = _boxes(_random_cxcywhr(20, (60, 80)), canvas=(60, 80))
    a = F.convert_bounding_box_format(ref, new_format=old)
    b = F.convert_bounding_box_format(F.convert_bounding_box_format(a, new_format=new),
                                      new_format=old)
    assert np.allclose(_np(b), _np(a), atol=1e-9)
    assert b.shape[-1] == {"XYXYXYXY": 8}.get(old, 5)


def test_rotated_unrotated_conversion_refused():
    with pytest.raises(ValueError, match="rotated and unrotated"):
        F.convert_bounding_box_format(_boxes([[5.0, 5.0, 4.0, 2.0, 0.0]]), new_format="XYXY")


def _corner_set(t):
    c = _np(F.convert_bounding_box_format(t, new_format="XYXYXYXY")).reshape(-1, 4, 2)
    return [sorted(map(tuple, np.round(x, 9))) for x in c]


@pytest.mark.parametrize("fmt", ROT)
def test_flips_mirror_the_corners(fmt):
    b = F.convert_bounding_box_format(_boxes(_random_cxcywhr(8, (60, 80)), canvas=(60, 80)),
                                      new_format=fmt)
    c = _np(F.convert_bounding_box_format(b, new_format="XYXYXYXY")).reshape(-1, 4, 2)
    h = F.horizontal_flip(b)
    v = F.vertical_flip(b)
    assert h.format == b.format and h.canvas_size == (60, 80)
    mx = c.copy()
    mx[..., 0] = 80 - mx[..., 0]
    my = c.copy()
    my[..., 1] = 60 - my[..., 1]
    assert _corner_set(h) == [sorted(map(tuple, np.round(x, 9))) for x in mx]
    assert _corner_set(v) == [sorted(map(tuple, np.round(x, 9))) for x in my]


def test_flip_hand_cases():
    b = _boxes([[2.0, 5.0, 4.0, 2.0, 30.0]])
    assert _close(F.hflip(b), [[8, 5, 4, 2, -30]])
    assert _close(F.vflip(b), [[2, 5, 4, 2, 150]])


def test_rotate_moves_centre_and_adds_angle():
    a = _random_cxcywhr(10, (100, 100), seed=1)
    a[:, :2] = 50 + (a[:, :2] - 50) * 0.3           # stay inside after turning
    b = _boxes(a, canvas=(100, 100))
    out = _np(F.rotate(b, 30.0))
    t = math.radians(30.0)
    dx, dy = a[:, 0] - 50, a[:, 1] - 50
    # counter-clockwise on the screen (y down)
    cx = 50 + dx * math.cos(t) + dy * math.sin(t)
    cy = 50 - dx * math.sin(t) + dy * math.cos(t)
    assert np.allclose(out[:, :2], np.column_stack([cx, cy]), atol=1e-9)
    assert np.allclose(out[:, 2:4], a[:, 2:4], atol=1e-9)
    ang = (out[:, 4] - (a[:, 4] + 30) + 180) % 360 - 180
    assert np.allclose(ang, 0, atol=1e-9)


def test_rotate_expand_canvas_and_affine_translate():
    b = _boxes([[5.0, 5.0, 4.0, 2.0, 0.0]], canvas=(10, 20))
    out = F.rotate(b, 90.0, expand=True)
    assert out.canvas_size == (20, 10)
    assert _np(out)[0, :2] == pytest.approx([5.0, 15.0])
    moved = F.affine(b, angle=0.0, translate=[2, -1], scale=1.0, shear=[0.0, 0.0])
    assert _close(moved, [[7, 4, 4, 2, 0]])


def test_resize_scales():
    a = _random_cxcywhr(6, (40, 40), seed=2)
    out = F.resize(_boxes(a, canvas=(40, 40)), [80, 80])
    assert out.canvas_size == (80, 80)
    assert np.allclose(_np(out), a * [2, 2, 2, 2, 1], atol=1e-9)
    same = _boxes(a, canvas=(40, 40))
    assert _np(F.resize(same, [40, 40])) == pytest.approx(a)


def test_pad_crop_shift():
    b = _boxes([[5.0, 5.0, 4.0, 2.0, 20.0]], fmt="CXCYWHR")
    p = F.pad(b, [1, 2, 3, 4])
    assert p.canvas_size == (16, 14) and _close(p, [[6, 7, 4, 2, 20]])
    c = F.crop(p, 2, 1, 10, 10)
    assert c.canvas_size == (10, 10) and _close(c, [[5, 5, 4, 2, 20]])
    xy = F.convert_bounding_box_format(b, new_format="XYXYXYXY")
    assert np.allclose(_np(F.crop(F.pad(xy, 3), 3, 3, 10, 10)), _np(xy), atol=1e-9)


def test_clamp_hand_cases():
    # an unrotated box sticking out at top and bottom: both modes cut it at the canvas
    tall = [5.0, 5.0, 4.0, 20.0, 0.0]
    # a square turned 45 degrees whose right corner is at x = 13.24 on a 10-wide canvas
    diamond = [9.0, 5.0, 6.0, 6.0, 45.0]
    b = _boxes([tall, diamond], canvas=(10, 10))
    soft = _np(F.clamp_bounding_boxes(b, clamping_mode="soft"))
    hard = _np(F.clamp_bounding_boxes(b, clamping_mode="hard"))
    assert soft[0] == pytest.approx([5, 5, 4, 10, 0]) and hard[0] == pytest.approx(soft[0])
    # soft keeps a box whose corners stick out when its edges still cross the canvas
    assert soft[1] == pytest.approx(diamond)
    # hard: the left corner stays at (9 - 3 sqrt 2, 5), the right one moves to x = 10
    side = (10 - (9 - 3 * math.sqrt(2))) / math.sqrt(2)
    assert hard[1] == pytest.approx([10 - side / math.sqrt(2), 5, side, side, 45])
    # None: untouched; the box's own mode by default
    assert _np(F.clamp_bounding_boxes(b, clamping_mode=None)) == pytest.approx(_np(b))
    hb = _boxes([diamond], canvas=(10, 10), mode="hard")
    assert _np(F.clamp_bounding_boxes(hb))[0] == pytest.approx(hard[1])
    with pytest.raises(ValueError, match="clamping_mode must be"):
        F.clamp_bounding_boxes(b, clamping_mode="sometimes")


def test_hard_clamped_corners_lie_inside_canvas():
    a = _random_cxcywhr(40, (30, 40), seed=3, inside=False)
    a[:, 2:4] *= 2
    out = F.clamp_bounding_boxes(_boxes(a, canvas=(30, 40), mode="hard"))
    c = _np(F.convert_bounding_box_format(out, new_format="XYXYXYXY"))
    assert np.isfinite(c).all()
    assert (c[:, 0::2] > -1e-6).all() and (c[:, 0::2] < 40 + 1e-6).all()
    assert (c[:, 1::2] > -1e-6).all() and (c[:, 1::2] < 30 + 1e-6).all()


def test_elastic_zero_displacement_moves_centre_to_ceiled_pixel():
    b = _boxes([[3.2, 4.0, 2.0, 2.0, 10.0]], canvas=(10, 10))
    out = F.elastic(b, fiamma.zeros(1, 10, 10, 2))
    assert _close(out, [[4.0, 4.0, 2.0, 2.0, 10.0]])


def test_perspective_translation():
    b = _boxes([[5.0, 5.0, 4.0, 2.0, 30.0]], canvas=(20, 20))
    start = [[0, 0], [10, 0], [10, 10], [0, 10]]
    end = [[2, 1], [12, 1], [12, 11], [2, 11]]
    assert _close(F.perspective(b, start, end), [[7, 6, 4, 2, 30]])


def test_transforms_and_sanitize_on_rotated_boxes():
    img = tv_tensors.Image(fiamma.zeros(3, 20, 30, dtype=fiamma.uint8))
    b = _boxes([[10.0, 10.0, 6.0, 4.0, 15.0], [100.0, 100.0, 4.0, 4.0, 0.0]],
               canvas=(20, 30), mode=None)
    out_img, out_b = v2.Compose([v2.Pad(2), v2.Resize((48, 68)),
                                 v2.RandomHorizontalFlip(p=1)])(img, b)
    assert out_b.canvas_size == (48, 68) == tuple(out_img.shape[-2:])
    assert _np(out_b)[0] == pytest.approx([68 - 24, 24, 12, 8, -15])
    kept = v2.SanitizeBoundingBoxes(labels_getter=None)(b)
    assert _close(kept, [[10.0, 10.0, 6.0, 4.0, 15.0]])
    # integer rotated boxes are computed in float64 and truncated
    ib = _boxes([[5, 5, 4, 2, 0]], dtype=fiamma.int64)
    assert F.convert_bounding_box_format(ib, new_format="XYWHR").tolist() == [[3, 4, 4, 2, 0]]


def test_pad_tensor_image_with_one_fill_per_channel():
    img = tv_tensors.Image(fiamma.full((3, 2, 2), 7, dtype=fiamma.uint8))
    out = F.pad(img, [1, 0, 0, 1], fill=(10, 20.9, 30))
    assert type(out) is tv_tensors.Image and tuple(out.shape) == (3, 3, 3)
    assert out[:, :2, 1:].tolist() == [[[7, 7]] * 2, [[7, 7]] * 2, [[7, 7]] * 2]
    assert out[:, 2, :].tolist() == [[10] * 3, [20] * 3, [30] * 3]
    assert out[:, :, 0].tolist() == [[10] * 3, [20] * 3, [30] * 3]
    # RandomZoomOut's per-type fill (the detection recipe's mean colour)
    t = v2.RandomZoomOut(fill={tv_tensors.Image: (1, 2, 3), "others": 0}, p=1.0)
    assert tuple(t(img).shape[:1]) == (3,)
    with pytest.raises(ValueError, match="not supported if fill is not a scalar"):
        F.pad(img, 1, fill=(1, 2, 3), padding_mode="edge")
    with pytest.raises(ValueError, match="fill has 2 values"):
        F.pad(img, 1, fill=(1, 2))
