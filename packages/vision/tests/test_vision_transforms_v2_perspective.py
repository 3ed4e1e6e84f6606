"""v2 ``perspective`` given by ``coefficients=`` (torchvision 0.28's argument): the dispatcher,
its per-type kernels and RandomPerspective, hand-computed and (parity) beside torchvision."""

import numpy as np
import pytest
from _tv_import import v2_modules

import fiamma
from fiamma.vision import tv_tensors as tv
from fiamma.vision.transforms import functional as F1, v2
from fiamma.vision.transforms.v2 import functional as F

SHIFT = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0]       # output (x, y) samples input (x + 1, y)
START = [[0, 0], [44, 0], [44, 36], [0, 36]]
END = [[3, 2], [40, 5], [42, 30], [1, 33]]
WARP = [1.05, 0.02, -2.0, 0.03, 0.95, 1.5, 0.0004, -0.0003]


def test_shift_coefficients_move_every_type_hand_computed():
    img = fiamma.arange(16.).reshape(1, 4, 4)
    out = F.perspective(img, None, None, coefficients=SHIFT)
    assert out[0].tolist() == [[1, 2, 3, 0], [5, 6, 7, 0], [9, 10, 11, 0], [13, 14, 15, 0]]
    m = tv.Mask(fiamma.tensor([[0, 1, 2, 3]] * 2, dtype=fiamma.uint8))
    out = F.perspective(m, None, None, coefficients=SHIFT)
    assert type(out) is tv.Mask and out.tolist() == [[1, 2, 3, 0]] * 2
    kp = tv.KeyPoints([[2.0, 1.0], [0.5, 3.0]], canvas_size=(4, 4))
    out = F.perspective(kp, None, None, coefficients=SHIFT)
    assert type(out) is tv.KeyPoints and out.tolist() == [[1.0, 1.0], [-0.5, 3.0]]
    b = tv.BoundingBoxes([[1.0, 1.0, 3.0, 2.0], [0.0, 0.0, 2.0, 2.0]], format="XYXY",
                         canvas_size=(4, 4))
    out = F.perspective(b, None, None, coefficients=SHIFT)
    assert type(out) is tv.BoundingBoxes and out.tolist() == [[0, 1, 2, 2], [0, 0, 1, 2]]


def test_points_and_coefficients_give_the_same_result():
    coeffs = F1._perspective_coeffs(START, END)
    rng = np.random.default_rng(1)
    img = tv.Image(fiamma.from_numpy(rng.integers(0, 256, (3, 37, 45), dtype=np.uint8)))
    m = tv.Mask(fiamma.from_numpy((rng.random((37, 45)) > 0.5).astype(np.uint8)))
    b = tv.BoundingBoxes([[2.0, 3.0, 20.0, 30.0]], format="CXCYWH", canvas_size=(37, 45))
    rb = tv.BoundingBoxes([[20.0, 15.0, 10.0, 6.0, 30.0]], format="CXCYWHR",
                          canvas_size=(37, 45))
    kp = tv.KeyPoints([[2.0, 3.0], [40.0, 30.0]], canvas_size=(37, 45))
    for x in (img, m, b, rb, kp):
        a = F.perspective(x, START, END)
        c = F.perspective(x, None, None, coefficients=coeffs)
        assert type(a) is type(x) and np.array_equal(a.numpy(), c.numpy())
    # the per-type kernels on plain tensors
    pure = img.as_subclass(fiamma.Tensor)
    assert np.array_equal(F.perspective_image(pure, START, END).numpy(),
                          F.perspective_image(pure, None, None, coefficients=coeffs).numpy())
    video = fiamma.stack([pure, pure]).unsqueeze(0)                     # (1, T, C, H, W)
    out = F.perspective_video(video, None, None, coefficients=coeffs)
    assert np.array_equal(out[0, 1].numpy(), F.perspective(img, START, END).numpy())
    out = F.perspective_mask(m.as_subclass(fiamma.Tensor), None, None, coefficients=coeffs)
    assert type(out) is fiamma.Tensor and np.array_equal(out.numpy(),
                                                         F.perspective(m, START, END).numpy())
    out = F.perspective_bounding_boxes(b.as_subclass(fiamma.Tensor), "CXCYWH", (37, 45),
                                       None, None, coefficients=coeffs)
    np.testing.assert_allclose(out.numpy(), F.perspective(b, START, END).numpy())
    out = F.perspective_keypoints(kp.as_subclass(fiamma.Tensor), (37, 45), None, None,
                                  coefficients=coeffs)
    np.testing.assert_allclose(out.numpy(), F.perspective(kp, START, END).numpy())


def test_perspective_argument_errors():
    img = fiamma.zeros(1, 4, 4)
    with pytest.raises(ValueError, match="shouldn't be defined concurrently"):
        F.perspective(img, START, END, coefficients=SHIFT)
    with pytest.raises(ValueError, match="Either the startpoints/endpoints or the coeff"):
        F.perspective(img, None, None)
    with pytest.raises(ValueError, match="Either the startpoints/endpoints or the coeff"):
        F.perspective_mask(img, START, None)
    with pytest.raises(ValueError, match="should have 8 float values, got 6"):
        F.perspective_keypoints(fiamma.ones(1, 2), (4, 4), None, None, coefficients=[1.0] * 6)
    with pytest.raises(ValueError, match="Please provide exactly four corners, got 3 startpoints"):
        F.perspective(img, START[:3], END)
    with pytest.raises(ValueError, match="four corners, got 4 startpoints and 5 endpoints"):
        F1.perspective(img, START, END + [[0, 0]])
    singular = [0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0]        # c0 c4 - c1 c3 == 0
    with pytest.raises(RuntimeError, match="can not be inverted to transform bounding boxes"):
        F.perspective_bounding_boxes(fiamma.ones(1, 4), "XYXY", (4, 4), None, None,
                                     coefficients=singular)
    with pytest.raises(RuntimeError, match="can not be inverted to transform keypoints"):
        F.perspective(tv.KeyPoints([[1.0, 1.0]], canvas_size=(4, 4)), None, None,
                      coefficients=singular)
    # the image itself warps with them (every pixel samples one input point)
    assert tuple(F.perspective(img, None, None, coefficients=singular).shape) == (1, 4, 4)
    # empty boxes and keypoints come back before any check, as torchvision's
    empty = tv.BoundingBoxes(fiamma.zeros(0, 4), format="XYXY", canvas_size=(4, 4))
    assert F.perspective(empty, None, None) is empty


def test_random_perspective_params_are_coefficients():
    fiamma.manual_seed(0)
    t = v2.RandomPerspective(distortion_scale=0.6, p=1.0)
    img = tv.Image(fiamma.rand(3, 20, 30))
    params = t.make_params([img])
    assert list(params) == ["coefficients"] and len(params["coefficients"]) == 8
    assert params["coefficients"] != [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    out = t.transform(img, params)
    want = F.perspective(img, None, None, fill=[0.0], coefficients=params["coefficients"])
    assert np.array_equal(out.numpy(), want.numpy())


# ---------------------------------------------------------------- beside torchvision

def _mods():
    mods = v2_modules()
    if mods is None:
        pytest.skip("torchvision is not importable")
    torch, TT, _, TF, TIM = mods
    return torch, TT, TF, TIM


@pytest.mark.parity
@pytest.mark.parametrize("coeffs", [SHIFT, WARP, "points"])
def test_coefficients_equal_torchvision(coeffs):
    torch, TT, TF, TIM = _mods()
    if coeffs == "points":
        coeffs = F1._perspective_coeffs(START, END)
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (3, 37, 45), dtype=np.uint8)
    m = (rng.random((37, 45)) > 0.5).astype(np.uint8)
    xy = rng.uniform(0, 30, (6, 2))
    b = np.concatenate([xy, xy + rng.uniform(1, 15, (6, 2))], 1).astype(np.float32)
    kp = rng.uniform(0, 40, (5, 2)).astype(np.float32)
    kw = dict(coefficients=coeffs)
    # kernels on plain tensors
    to = TF.perspective_image(torch.from_numpy(img), None, None, **kw)
    fo = F.perspective_image(fiamma.from_numpy(img), None, None, **kw)
    diff = np.abs(fo.numpy().astype(int) - to.numpy().astype(int))
    assert (diff > 1).mean() <= 0.01
    fimg = fiamma.from_numpy(img.astype(np.float32) / 255)
    to = TF.perspective_video(torch.from_numpy(img.astype(np.float32) / 255)[None], None,
                              None, interpolation=TIM.NEAREST, **kw)
    fo = F.perspective_video(fimg[None], None, None, interpolation=v2.InterpolationMode.NEAREST,
                            **kw)
    assert (np.abs(fo.numpy() - to.numpy()) > 1e-5).mean() <= 0.01
    to = TF.perspective_mask(torch.from_numpy(m), None, None, **kw)
    fo = F.perspective_mask(fiamma.from_numpy(m), None, None, **kw)
    assert tuple(fo.shape) == tuple(to.shape) and (fo.numpy() != to.numpy()).mean() <= 0.01
    for fmt in ("XYXY", "XYWH", "CXCYWH"):
        tb = TF.convert_bounding_box_format(torch.from_numpy(b), "XYXY", fmt)
        to = TF.perspective_bounding_boxes(tb, fmt, (37, 45), None, None, **kw)
        fo = F.perspective_bounding_boxes(fiamma.from_numpy(tb.numpy().copy()), fmt, (37, 45),
                                          None, None, **kw)
        np.testing.assert_allclose(fo.numpy(), to.numpy(), atol=1e-3)
    to = TF.perspective_keypoints(torch.from_numpy(kp), (37, 45), None, None, **kw)
    fo = F.perspective_keypoints(fiamma.from_numpy(kp.copy()), (37, 45), None, None, **kw)
    np.testing.assert_allclose(fo.numpy(), to.numpy(), atol=1e-3)
    # the dispatcher on tv_tensors, rotated boxes included
    rb = np.array([[20.0, 15.0, 10.0, 6.0, 30.0], [10.0, 20.0, 8.0, 4.0, -15.0]], np.float32)
    to = TF.perspective(TT.BoundingBoxes(torch.from_numpy(rb), format="CXCYWHR",
                                         canvas_size=(37, 45)), None, None, **kw)
    fo = F.perspective(tv.BoundingBoxes(fiamma.from_numpy(rb.copy()), format="CXCYWHR",
                                        canvas_size=(37, 45)), None, None, **kw)
    assert type(fo) is tv.BoundingBoxes
    np.testing.assert_allclose(fo.numpy(), to.numpy(), atol=2e-3)
    to = TF.perspective(TT.KeyPoints(torch.from_numpy(kp), canvas_size=(37, 45)), None, None,
                        **kw)
    fo = F.perspective(tv.KeyPoints(fiamma.from_numpy(kp.copy()), canvas_size=(37, 45)), None,
                       None, **kw)
    assert type(fo) is tv.KeyPoints
    np.testing.assert_allclose(fo.numpy(), to.numpy(), atol=1e-3)


@pytest.mark.parity
@pytest.mark.parametrize("args,kw", [((START, END), dict(coefficients=SHIFT)),
                                     ((None, None), {}), ((START, None), {}),
                                     ((None, None), dict(coefficients=[1.0] * 7)),
                                     ((START[:3], END), {})])
def test_argument_errors_equal_torchvision(args, kw):
    torch, TT, TF, TIM = _mods()
    with pytest.raises(ValueError) as t_err:
        TF.perspective_image(torch.zeros(1, 4, 4), *args, **kw)
    with pytest.raises(ValueError) as f_err:
        F.perspective_image(fiamma.zeros(1, 4, 4), *args, **kw)
    # fiamma's message is torchvision's, prefixed by the op and with the actual length
    t_msg = str(t_err.value).rstrip(".").lower()
    assert t_msg.split(",")[0] in str(f_err.value).lower()


@pytest.mark.parity
def test_singular_coefficients_error_as_torchvision():
    torch, TT, TF, TIM = _mods()
    singular = [0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    with pytest.raises(RuntimeError, match="can not be inverted"):
        TF.perspective_keypoints(torch.ones(1, 2), (4, 4), None, None, coefficients=singular)
    with pytest.raises(RuntimeError, match="can not be inverted"):
        F.perspective_keypoints(fiamma.ones(1, 2), (4, 4), None, None, coefficients=singular)
    empty_t = TF.perspective_bounding_boxes(torch.zeros(0, 4), "XYXY", (4, 4), None, None)
    empty_f = F.perspective_bounding_boxes(fiamma.zeros(0, 4), "XYXY", (4, 4), None, None)
    assert tuple(empty_t.shape) == tuple(empty_f.shape) == (0, 4)
