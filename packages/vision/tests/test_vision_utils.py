"""fiamma.vision.utils: make_grid against a NumPy construction, save_image, drawing."""

import math
import os
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from PIL import Image

import fiamma
from fiamma.vision.utils import draw_bounding_boxes, draw_segmentation_masks, make_grid, save_image


def _grid_ref(x, nrow, padding, pad_value):
    """make_grid's layout written directly in NumPy."""
    b, c, h, w = x.shape
    if c == 1:
        x = np.repeat(x, 3, axis=1)
        c = 3
    if b == 1:
        return x[0]
    cols = min(nrow, b)
    rows = math.ceil(b / cols)
    out = np.full((c, rows * (h + padding) + padding, cols * (w + padding) + padding), pad_value,
                  dtype=x.dtype)
    for k in range(b):
        r, q = divmod(k, cols)
        y0, x0 = r * (h + padding) + padding, q * (w + padding) + padding
        out[:, y0:y0 + h, x0:x0 + w] = x[k]
    return out


@settings(max_examples=30, deadline=None)
@given(b=st.integers(1, 11), c=st.sampled_from([1, 3]), h=st.integers(1, 6),
       w=st.integers(1, 6), nrow=st.integers(1, 9), padding=st.integers(0, 3),
       pad_value=st.sampled_from([0.0, 0.5, 1.0]), seed=st.integers(0, 2 ** 31))
def test_make_grid_layout_matches_numpy(b, c, h, w, nrow, padding, pad_value, seed):
    x = np.random.default_rng(seed).random((b, c, h, w), dtype=np.float32)
    got = make_grid(fiamma.from_numpy(x), nrow=nrow, padding=padding, pad_value=pad_value)
    np.testing.assert_array_equal(got.numpy(), _grid_ref(x, nrow, padding, pad_value))


def test_make_grid_inputs():
    x = np.random.default_rng(0).random((4, 3, 5, 5), dtype=np.float32)
    from_list = make_grid([fiamma.from_numpy(x[i]) for i in range(4)], nrow=2)
    np.testing.assert_array_equal(from_list.numpy(), _grid_ref(x, 2, 2, 0.0))
    single = make_grid(fiamma.from_numpy(x[0]))
    np.testing.assert_array_equal(single.numpy(), x[0])  # a batch of one: no padding
    hw = make_grid(fiamma.from_numpy(x[0, 0]))
    assert tuple(hw.shape) == (3, 5, 5)
    u8 = (x * 255).astype(np.uint8)
    g = make_grid(fiamma.from_numpy(u8), nrow=3, pad_value=7)
    assert g.dtype == fiamma.uint8
    np.testing.assert_array_equal(g.numpy(), _grid_ref(u8, 3, 2, 7))
    with pytest.raises(TypeError, match="list of tensors"):
        make_grid([x[0]])
    with pytest.raises(TypeError):
        make_grid(x)
    with pytest.raises(TypeError, match="value_range"):
        make_grid(fiamma.from_numpy(x), normalize=True, value_range=[0, 1])


def test_make_grid_normalize():
    x = np.random.default_rng(1).normal(size=(3, 3, 4, 4)).astype(np.float32) * 5
    t = fiamma.from_numpy(x.copy())
    got = make_grid(t, nrow=3, padding=0, normalize=True).numpy()
    ref = (x - x.min()) / (x.max() - x.min())
    np.testing.assert_allclose(got, _grid_ref(ref, 3, 0, 0.0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(t.numpy(), x)  # the input is not modified
    each = make_grid(t, nrow=3, padding=0, normalize=True, scale_each=True).numpy()
    ref_each = np.stack([(i - i.min()) / (i.max() - i.min()) for i in x])
    np.testing.assert_allclose(each, _grid_ref(ref_each, 3, 0, 0.0), rtol=1e-5, atol=1e-6)
    vr = make_grid(t, nrow=3, padding=0, normalize=True, value_range=(-1.0, 1.0)).numpy()
    ref_vr = (np.clip(x, -1, 1) + 1) / 2
    np.testing.assert_allclose(vr, _grid_ref(ref_vr, 3, 0, 0.0), rtol=1e-5, atol=1e-6)


def test_save_image(tmp_path):
    x = np.random.default_rng(2).random((2, 3, 4, 5), dtype=np.float32)
    p = tmp_path / "grid.png"
    save_image(fiamma.from_numpy(x), p, nrow=2, padding=1, pad_value=1.0)
    got = np.asarray(Image.open(p)).transpose(2, 0, 1)
    ref = np.clip(np.floor(_grid_ref(x, 2, 1, 1.0) * 255 + 0.5), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(got, ref)
    assert sorted(os.listdir(tmp_path)) == ["grid.png"]  # no temporary file left
    save_image(fiamma.from_numpy(x), str(tmp_path / "g.jpg"))
    assert Image.open(tmp_path / "g.jpg").format == "JPEG"
    with pytest.raises((ValueError, KeyError, OSError)):
        save_image(fiamma.from_numpy(x), tmp_path / "bad.unknownext")
    assert sorted(os.listdir(tmp_path)) == ["g.jpg", "grid.png"]
    import io
    buf = io.BytesIO()
    save_image(fiamma.from_numpy(x[0]), buf, format="PNG")
    assert np.asarray(Image.open(buf)).shape == (4, 5, 3)


def _img(c=3, h=20, w=24, dtype=fiamma.uint8):
    return fiamma.zeros(c, h, w, dtype=dtype)


def test_draw_bounding_boxes_outline():
    boxes = fiamma.tensor([[2, 3, 10, 12], [14, 1, 20, 8]])
    out = draw_bounding_boxes(_img(), boxes, colors=["red", (0, 0, 255)])
    assert out.dtype == fiamma.uint8 and tuple(out.shape) == (3, 20, 24)
    o = out.numpy()
    red, blue = [255, 0, 0], [0, 0, 255]
    for x in range(2, 11):
        assert o[:, 3, x].tolist() == red and o[:, 12, x].tolist() == red
    for y in range(3, 13):
        assert o[:, y, 2].tolist() == red and o[:, y, 10].tolist() == red
    assert (o[:, 4:12, 3:10] == 0).all()  # inside untouched
    assert o[:, 1, 14].tolist() == blue and o[:, 8, 20].tolist() == blue
    assert (o[:, 13:, :] == 0).all() and (o[:, :, 21:] == 0).all()  # nothing outside the boxes
    wide = draw_bounding_boxes(_img(), boxes[:1], colors="red", width=2).numpy()
    assert wide[:, 4, 5].tolist() == red and wide[:, 5, 5].tolist() == [0, 0, 0]


def test_draw_bounding_boxes_fill_gray_float_and_labels():
    boxes = fiamma.tensor([[2.0, 2.0, 12.0, 12.0]])
    filled = draw_bounding_boxes(_img(), boxes, colors=(0, 255, 0), fill=True).numpy()
    # the inside is blended with alpha 100/255 over black
    assert filled[:, 6, 6].tolist() == [0, 100, 0]
    assert filled[:, 2, 6].tolist() == [0, 255, 0]
    gray = draw_bounding_boxes(_img(c=1), boxes, colors="white")
    assert tuple(gray.shape) == (3, 20, 24) and gray[:, 2, 2].tolist() == [255, 255, 255]
    fl = draw_bounding_boxes(_img(dtype=fiamma.float32), boxes, colors="white")
    assert fl.dtype == fiamma.float32 and fl[:, 2, 2].tolist() == [1.0, 1.0, 1.0]
    big = fiamma.zeros(3, 40, 60, dtype=fiamma.uint8)
    b2 = fiamma.tensor([[1, 1, 58, 38]])
    plain = draw_bounding_boxes(big, b2, colors="yellow").numpy()
    lab = draw_bounding_boxes(big, b2, labels=["cat"], colors="yellow").numpy()
    diff = np.argwhere((lab != plain).any(axis=0))
    assert len(diff) > 5  # text was drawn...
    assert diff[:, 0].min() >= 3 and diff[:, 1].min() >= 3  # ...inside the top-left corner
    assert diff[:, 0].max() < 20
    assert (lab[:, diff[:, 0], diff[:, 1]].max(axis=0) > 0).all()


def test_draw_bounding_boxes_default_colors_and_errors():
    boxes = fiamma.tensor([[1, 1, 5, 5], [6, 6, 9, 9]])
    out = draw_bounding_boxes(_img(), boxes).numpy()
    assert out[:, 1, 1].tolist() == [0, 0, 0]  # palette colour 0 is black
    assert out[:, 6, 6].tolist() == [(2 ** 25 - 1) % 255, (2 ** 15 - 1) % 255,
                                     (2 ** 21 - 1) % 255]
    with pytest.raises(ValueError, match="xmin, ymin, xmax, ymax"):
        draw_bounding_boxes(_img(), fiamma.tensor([[5, 1, 2, 4]]))
    with pytest.raises(ValueError, match="labels"):
        draw_bounding_boxes(_img(), boxes, labels=["a"])
    with pytest.raises(ValueError, match="colors"):
        draw_bounding_boxes(_img(), boxes, colors=["red"])
    with pytest.raises(ValueError, match="batches"):
        draw_bounding_boxes(fiamma.zeros(1, 3, 4, 4, dtype=fiamma.uint8), boxes)
    with pytest.raises(ValueError, match="dtype"):
        draw_bounding_boxes(_img(dtype=fiamma.int32), boxes)
    with pytest.warns(UserWarning, match="No box was drawn"):
        empty = fiamma.zeros(0, 4)
        assert draw_bounding_boxes(_img(), empty) is not None


def _masks_ref(img, masks, alpha, colors):
    drawn = img.astype(np.float32).copy()
    for m, c in zip(masks, colors):
        drawn[:, m] = np.asarray(c, np.float32)[:, None]
    drawn[:, masks.sum(0) > 1] = 0
    return img.astype(np.float32) * (1 - alpha) + drawn * alpha


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.8, 1.0])
def test_draw_segmentation_masks_matches_numpy(alpha):
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (3, 9, 8), dtype=np.uint8)
    masks = rng.random((3, 9, 8)) < 0.3
    colors = [(255, 0, 0), (0, 128, 0), (10, 20, 30)]
    out = draw_segmentation_masks(fiamma.from_numpy(img), fiamma.from_numpy(masks), alpha,
                                  colors)
    assert out.dtype == fiamma.uint8
    np.testing.assert_array_equal(out.numpy(),
                                  _masks_ref(img, masks, alpha, colors).astype(np.uint8))
    imgf = img.astype(np.float32) / 255
    outf = draw_segmentation_masks(fiamma.from_numpy(imgf), fiamma.from_numpy(masks), alpha,
                                   ["red", "green", "#0a141e"])
    assert outf.dtype == fiamma.float32
    ref = _masks_ref(imgf, masks, alpha, [(1, 0, 0), (0, 128 / 255, 0), (10 / 255, 20 / 255,
                                                                          30 / 255)])
    np.testing.assert_allclose(outf.numpy(), ref, rtol=1e-6, atol=1e-6)


def test_draw_segmentation_masks_single_mask_and_errors():
    img = fiamma.zeros(3, 4, 4, dtype=fiamma.uint8)
    m = fiamma.zeros(4, 4, dtype=fiamma.bool)
    m[1, 2] = True
    out = draw_segmentation_masks(img, m, alpha=0.5, colors="white").numpy()
    assert out[:, 1, 2].tolist() == [127, 127, 127] and out.sum() == 3 * 127
    with pytest.raises(ValueError, match="bool"):
        draw_segmentation_masks(img, fiamma.zeros(4, 4))
    with pytest.raises(ValueError, match="height and width"):
        draw_segmentation_masks(img, fiamma.zeros(5, 4, dtype=fiamma.bool))
    with pytest.raises(ValueError, match="3 channels"):
        draw_segmentation_masks(fiamma.zeros(1, 4, 4, dtype=fiamma.uint8), m)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        draw_segmentation_masks(img, fiamma.zeros(0, 4, 4, dtype=fiamma.bool))
        assert any("no mask" in str(x.message) or "doesn't contain" in str(x.message)
                   for x in w)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_save_image_file_mode_follows_umask(tmp_path):
    # torchvision's save_image writes through Pillow, which creates the file as open() does:
    # mode 0666 less the umask (a temporary from mkstemp would leave it 0600)
    old = os.umask(0o022)
    try:
        save_image(fiamma.zeros(3, 4, 4), tmp_path / "a.png")
        (tmp_path / "ref").write_bytes(b"")
        os.umask(0o002)
        save_image(fiamma.zeros(3, 4, 4), tmp_path / "b.png")
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "a.png").st_mode & 0o777 == 0o644
    assert os.stat(tmp_path / "ref").st_mode & 0o777 == 0o644
    assert os.stat(tmp_path / "b.png").st_mode & 0o777 == 0o664
