"""What torchvision's gallery programs found missing: draw_keypoints, rotated (N, 8) boxes in
draw_bounding_boxes, tv_tensors.set_return_type and the return of in-place methods, the
tv_tensor repr, v2.PILToTensor."""
import numpy as np
import pytest

import fiamma
from fiamma.vision import tv_tensors, utils
from fiamma.vision.transforms import v2


def test_draw_keypoints_discs_lines_and_visibility():
    img = fiamma.zeros(3, 20, 20, dtype=fiamma.uint8)
    kp = fiamma.tensor([[[5.9, 5.2], [15.0, 5.0], [10.0, 15.0]]])
    vis = fiamma.tensor([[True, True, False]])
    out = utils.draw_keypoints(img, kp, connectivity=[(0, 1), (1, 2)], colors=(0, 255, 0),
                               radius=1, width=1, visibility=vis).numpy()
    assert out[:, 4, 5].tolist() == [0, 255, 0]        # x 5.9 truncates to 5
    assert out[:, 4, 15].tolist() == [0, 255, 0] and out[:, 4, 6].tolist() == [0, 0, 0]
    assert out[:, 15, 10].tolist() == [0, 0, 0]        # invisible: no disc ...
    assert out[:, 10, 12].tolist() == [0, 0, 0]        # ... and no line to it
    assert out[:, 5, 10].tolist() == [255, 255, 255]   # the visible pair's white line
    f = utils.draw_keypoints(img.float() / 255, kp, colors="red", radius=1)
    assert f.dtype == fiamma.float32 and f[:, 5, 5].tolist() == [1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="draw_keypoints"):
        utils.draw_keypoints(img, fiamma.zeros(3, 2))


def test_draw_rotated_boxes_first_edge_dashed():
    img = fiamma.zeros(3, 12, 30, dtype=fiamma.uint8)
    box = fiamma.tensor([[2, 2, 25, 2, 25, 9, 2, 9]])
    out = utils.draw_bounding_boxes(img, box, colors="red").numpy()
    top = out[0, 2, 2:26] > 0
    assert top[:5].all() and not top[6:10].any() and top[11:15].all()  # 5 on, 5 off
    assert (out[0, 9, 2:26] > 0).all() and (out[0, 2:10, 25] > 0).all()  # solid edges
    with pytest.raises(ValueError, match=r"\(N, 4\) or \(N, 8\)"):
        utils.draw_bounding_boxes(img, fiamma.zeros(1, 5))


def test_set_return_type_and_inplace_returns():
    b = tv_tensors.BoundingBoxes([[0, 0, 4, 4]], format="XYXY", canvas_size=(8, 8))
    assert type(b + 3) is fiamma.Tensor
    with tv_tensors.set_return_type("TVTensor"):
        out = b + 3
        assert isinstance(out, tv_tensors.BoundingBoxes) and out.canvas_size == (8, 8)
        assert out.tolist() == [[3, 3, 7, 7]]
    assert type(b * 2) is fiamma.Tensor  # restored on exit
    img = tv_tensors.Image([[[0, 1], [1, 0]]])
    new = img.add_(1).mul_(2)
    assert type(img) is tv_tensors.Image and type(new) is fiamma.Tensor
    assert new.data_ptr() == img.data_ptr() and img.tolist() == [[[2, 4], [4, 2]]]
    assert type(img.clone()) is tv_tensors.Image
    with pytest.raises(ValueError, match="set_return_type"):
        tv_tensors.set_return_type("numpy")


def test_tv_tensor_repr_layout():
    b = tv_tensors.BoundingBoxes([[17, 16, 344, 495], [0, 10, 0, 10]], format="XYXY",
                                 canvas_size=(512, 512))
    assert repr(b) == ("BoundingBoxes([[ 17,  16, 344, 495],\n"
                       "               [  0,  10,   0,  10]], format=BoundingBoxFormat.XYXY, "
                       "canvas_size=(512, 512), clamping_mode=soft)")
    assert str(tv_tensors.Image([[[0, 1]]])) == "Image([[[0, 1]]], )"


def test_v2_pil_to_tensor():
    from PIL import Image
    arr = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
    out = v2.PILToTensor()((Image.fromarray(arr), 3))
    assert type(out[0]) is fiamma.Tensor and out[1] == 3
    assert out[0].numpy().tolist() == arr.transpose(2, 0, 1).tolist()


@pytest.mark.parity
def test_draw_keypoints_and_rotated_boxes_match_torchvision():
    torch = pytest.importorskip("torch")
    tu = pytest.importorskip("torchvision.utils")
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (3, 60, 70), dtype=np.uint8)
    kp = np.array([[[10.7, 20.2], [30, 40], [65, 5]], [[1, 1], [50, 50], [20, 30]]], np.float32)
    vis = np.array([[1, 1, 0], [1, 1, 1]], bool)
    kw = dict(connectivity=[(0, 1), (1, 2)], colors="red", radius=3, width=2)
    a = tu.draw_keypoints(torch.from_numpy(img), torch.from_numpy(kp),
                          visibility=torch.from_numpy(vis), **kw).numpy()
    b = utils.draw_keypoints(fiamma.from_numpy(img), fiamma.from_numpy(kp),
                             visibility=fiamma.from_numpy(vis), **kw).numpy()
    np.testing.assert_array_equal(a, b)
    boxes = np.array([[10, 5, 50, 12, 44, 40, 4, 33], [3, 40, 30, 2, 66, 30, 40, 58]], np.float32)
    for fill in (False, True):
        a = tu.draw_bounding_boxes(torch.from_numpy(img), torch.from_numpy(boxes),
                                   colors=["red", "blue"], width=2, fill=fill).numpy()
        b = utils.draw_bounding_boxes(fiamma.from_numpy(img), fiamma.from_numpy(boxes),
                                      colors=["red", "blue"], width=2, fill=fill).numpy()
        np.testing.assert_array_equal(a, b)


def test_corner_box_format_is_named_as_torchvision():
    # torchvision's name; fiamma had "XXXXYYYY", which ConvertBoundingBoxFormat("xyxyxyxy") refused
    assert tv_tensors.BoundingBoxFormat["XYXYXYXY"].value == "XYXYXYXY"
    b = tv_tensors.BoundingBoxes([[0, 0, 4, 0, 4, 2, 0, 2]], format="xyxyxyxy", canvas_size=(5, 5))
    assert tv_tensors.is_rotated_bounding_format(b.format) and tuple(b.shape) == (1, 8)


def test_draw_keypoints_takes_keypoint_rcnn_triples():
    # Keypoint R-CNN returns (N, K, 3): x, y and a visibility column, which the gallery draws
    img = fiamma.zeros(3, 12, 12, dtype=fiamma.uint8)
    xy = fiamma.tensor([[[2.0, 3.0], [8.0, 9.0]]])
    xyv = fiamma.cat([xy, fiamma.ones(1, 2, 1)], dim=-1)
    a = utils.draw_keypoints(img, xy, colors="red", radius=1)
    b = utils.draw_keypoints(img, xyv, colors="red", radius=1)
    assert bool((a == b).all()) and int(a.sum()) > 0
    assert utils.draw_keypoints(img, fiamma.zeros(0, 17, 3)).tolist() == img.tolist()
    with pytest.raises(ValueError, match="draw_keypoints"):
        utils.draw_keypoints(img, fiamma.zeros(1, 2, 1))
