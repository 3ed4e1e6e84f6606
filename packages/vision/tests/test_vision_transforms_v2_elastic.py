"""transforms.v2 ElasticTransform / functional.elastic: hand-computed constant displacements on
images, masks, boxes and keypoints, the transform's parameters, and (marked ``parity``)
torchvision with the same displacement field."""
import numpy as np
import pytest

import fiamma
from fiamma.vision import tv_tensors as tv
from fiamma.vision.transforms import v2
from fiamma.vision.transforms.v2 import functional as F


def _const(h, w, px, py):
    """A displacement moving every sample by (px, py) pixels (normalised units)."""
    d = np.zeros((1, h, w, 2), np.float32)
    d[..., 0] = 2 * px / w
    d[..., 1] = 2 * py / h
    return fiamma.from_numpy(d)


def test_zero_and_constant_displacement_by_hand():
    img = fiamma.arange(20.).reshape(1, 4, 5)
    assert bool((F.elastic(img, _const(4, 5, 0, 0)) == img).all())
    # sampling one pixel to the right: out[:, x] = in[:, x + 1], last column zero (no fill)
    out = F.elastic(img, _const(4, 5, 1, 0)).numpy()
    np.testing.assert_allclose(out[0, :, :4], img.numpy()[0, :, 1:], atol=1e-5)
    np.testing.assert_allclose(out[0, :, 4], 0.0, atol=1e-6)
    out = F.elastic(img, _const(4, 5, 0, 1), fill=[7.0]).numpy()
    np.testing.assert_allclose(out[0, :3], img.numpy()[0, 1:], atol=1e-5)
    np.testing.assert_allclose(out[0, 3], 7.0, atol=1e-5)
    m = tv.Mask(fiamma.tensor([[0, 1, 1], [0, 0, 1]], dtype=fiamma.uint8))
    out = F.elastic(m, _const(2, 3, 1, 0))
    assert isinstance(out, tv.Mask) and out.tolist() == [[1, 1, 0], [0, 1, 0]]
    # boxes and keypoints move the other way (the approximate inverse of the field)
    boxes = tv.BoundingBoxes([[2.0, 1.0, 4.0, 3.0]], format="XYXY", canvas_size=(6, 8))
    out = F.elastic(boxes, _const(6, 8, 1, 0.5))
    np.testing.assert_allclose(out.numpy(), [[1.0, 0.5, 3.0, 2.5]], atol=1e-5)
    assert out.canvas_size == (6, 8)
    kp = tv.KeyPoints([[3.0, 2.0]], canvas_size=(6, 8))
    np.testing.assert_allclose(F.elastic(kp, _const(6, 8, -1, 1)).numpy(), [[4.0, 1.0]],
                               atol=1e-5)


def test_errors_and_transform():
    with pytest.raises(ValueError, match="displacement shape"):
        F.elastic(fiamma.rand(3, 4, 5), fiamma.zeros(1, 5, 4, 2))
    with pytest.raises(TypeError, match="Tensor"):
        F.elastic(fiamma.rand(3, 4, 5), np.zeros((1, 4, 5, 2)))
    with pytest.raises(ValueError, match="NEAREST or BILINEAR"):
        F.elastic(fiamma.rand(3, 4, 5), fiamma.zeros(1, 4, 5, 2), interpolation="bicubic")
    t = v2.ElasticTransform(alpha=20.0, sigma=3.0)
    assert t.alpha == [20.0, 20.0] and t.sigma == [3.0, 3.0]
    fiamma.manual_seed(0)
    p = t.make_params([fiamma.rand(3, 10, 12)])
    assert tuple(p["displacement"].shape) == (1, 10, 12, 2)
    # |field| <= alpha / size (a blurred uniform [-1, 1] field, scaled)
    assert p["displacement"][..., 0].abs().max().item() <= 20.0 / 12 + 1e-6
    sample = {"image": tv.Image(fiamma.rand(3, 10, 12)),
              "boxes": tv.BoundingBoxes([[1, 1, 6, 6]], format="XYXY", canvas_size=(10, 12)),
              "mask": tv.Mask(fiamma.ones(10, 12, dtype=fiamma.uint8))}
    fiamma.manual_seed(1)
    a = t(sample)
    fiamma.manual_seed(1)
    b = t(sample)
    assert bool((a["image"] == b["image"]).all()) and a["boxes"].tolist() == b["boxes"].tolist()
    assert isinstance(a["boxes"], tv.BoundingBoxes) and isinstance(a["mask"], tv.Mask)


@pytest.mark.parity
def test_elastic_matches_torchvision():
    torch = pytest.importorskip("torch")
    TF = pytest.importorskip("torchvision.transforms.v2.functional")
    from torchvision import tv_tensors as TT
    rs = np.random.RandomState(0)
    H, W = 12, 15
    d = ((rs.rand(1, H, W, 2) - 0.5) * 0.3).astype(np.float32)
    td, fd = torch.from_numpy(d), fiamma.from_numpy(d)
    img = rs.rand(3, H, W).astype(np.float32)
    for interp in ("bilinear", "nearest"):
        a = TF.elastic(torch.from_numpy(img), td, interpolation=TF.InterpolationMode(interp))
        b = F.elastic(fiamma.from_numpy(img), fd, interpolation=interp)
        np.testing.assert_allclose(b.numpy(), a.numpy(), atol=1e-5)
    u8 = (img * 255).astype(np.uint8)
    a = TF.elastic(torch.from_numpy(u8), td, fill=[10.0, 20.0, 30.0]).numpy()
    b = F.elastic(fiamma.from_numpy(u8), fd, fill=[10.0, 20.0, 30.0]).numpy()
    assert np.abs(a.astype(int) - b.astype(int)).max() <= 1
    bx = np.array([[1.3, 2.2, 9.7, 8.1], [0, 0, 15, 12]], np.float32)
    a = TF.elastic(TT.BoundingBoxes(torch.from_numpy(bx), format="XYXY", canvas_size=(H, W)),
                   td)
    b = F.elastic(tv.BoundingBoxes(fiamma.from_numpy(bx), format="XYXY", canvas_size=(H, W)),
                  fd)
    np.testing.assert_allclose(b.numpy(), a.numpy(), atol=1e-5)
    kp = np.array([[1.3, 2.2], [9.7, 8.1], [14.9, 11.9]], np.float32)
    a = TF.elastic(TT.KeyPoints(torch.from_numpy(kp), canvas_size=(H, W)), td)
    b = F.elastic(tv.KeyPoints(fiamma.from_numpy(kp), canvas_size=(H, W)), fd)
    np.testing.assert_allclose(b.numpy(), a.numpy(), atol=1e-5)
    m = (rs.rand(H, W) > 0.5).astype(np.uint8)
    a = TF.elastic(TT.Mask(torch.from_numpy(m)), td).numpy()
    b = F.elastic(tv.Mask(fiamma.from_numpy(m)), fd).numpy()
    np.testing.assert_array_equal(b, a)
