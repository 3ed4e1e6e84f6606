"""flow_to_image (the Middlebury colour wheel) and the backend switches of fiamma.vision."""

import math

import numpy as np
import pytest

import fiamma
import fiamma.vision as vision
from fiamma.vision.utils import _color_wheel, flow_to_image


def test_color_wheel():
    w = _color_wheel()
    assert w.shape == (55, 3)
    assert w[0].tolist() == [255, 0, 0]  # red
    assert w[15].tolist() == [255, 255, 0]  # yellow after the 15 red -> yellow steps
    assert w[21].tolist() == [0, 255, 0]  # green
    assert w[25].tolist() == [0, 255, 255]  # cyan
    assert w[36].tolist() == [0, 0, 255]  # blue
    assert w[49].tolist() == [255, 0, 255]  # magenta


def test_flow_to_image_colours():
    assert flow_to_image(fiamma.zeros(2, 3, 4)).unique().tolist() == [255]  # no motion: white
    # one pixel moving left at the largest magnitude: angle atan2(0, 1) = 0 -> wheel position
    # (0 + 1) / 2 * 54 = 27, between cyan and blue; full saturation: the wheel's colour itself
    flow = fiamma.zeros(2, 1, 2)
    flow[0, 0, 0] = -1.0
    img = flow_to_image(flow)
    assert img.dtype is fiamma.uint8 and tuple(img.shape) == (3, 1, 2)
    assert img[:, 0, 0].tolist() == [math.floor(255 * v / 255) for v in _color_wheel()[27]]
    assert img[:, 0, 1].tolist() == [255, 255, 255]
    # batched: the magnitude is relative to the largest in the whole batch
    b = fiamma.stack([flow, flow * 0.5])
    out = flow_to_image(b)
    assert tuple(out.shape) == (2, 3, 1, 2)
    assert out[0].tolist() == img.tolist() and out[1].tolist() != img.tolist()


def test_flow_to_image_errors():
    with pytest.raises(ValueError, match="dtype"):
        flow_to_image(fiamma.zeros(2, 3, 3, dtype=fiamma.int64))
    with pytest.raises(ValueError, match=r"\(2, H, W\) or \(N, 2, H, W\)"):
        flow_to_image(fiamma.zeros(3, 4, 4))


def test_backend_switches():
    assert vision.get_image_backend() == "PIL" and vision.get_video_backend() == "pyav"
    vision.set_image_backend("PIL")
    with pytest.raises(ValueError, match="accimage' backend is not supported"):
        vision.set_image_backend("accimage")
    with pytest.raises(ValueError, match="Invalid backend"):
        vision.set_image_backend("cv2")
    vision.set_video_backend("pyav")
    assert vision.disable_beta_transforms_warning() is None


def test_numpy_reference():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 6)).astype(np.float32)
    img = flow_to_image(fiamma.tensor(x)).numpy()
    u, v = x / (np.sqrt((x ** 2).sum(0)).max() + np.finfo(np.float32).eps)
    rad = np.sqrt(u * u + v * v)
    fk = (np.arctan2(-v, -u) / np.pi + 1) / 2 * 54
    k0 = np.floor(fk).astype(int)
    k1 = (k0 + 1) % 55
    f = fk - k0
    w = _color_wheel() / 255.0
    for c in range(3):
        col = 1 - rad * (1 - ((1 - f) * w[k0, c] + f * w[k1, c]))
        assert np.abs(img[c].astype(int) - np.floor(255 * col)).max() <= 1
