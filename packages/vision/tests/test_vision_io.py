"""fiamma.vision.io: PNG/JPEG round trips, read modes, files, errors."""

import io
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from PIL import Image

import fiamma
from fiamma.vision.io import (
    ImageReadMode,
    decode_image,
    decode_jpeg,
    decode_png,
    encode_jpeg,
    encode_png,
    read_file,
    read_image,
    write_file,
    write_jpeg,
    write_png,
)


def _t(arr):
    return fiamma.from_numpy(np.ascontiguousarray(arr))


def _pil_bytes(img, fmt, **kw):
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def _smooth(c, h, w, seed=0):
    """A smooth image (JPEG-friendly) as uint8 (C, H, W)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    chans = [127 + 100 * np.sin(x / (5 + 3 * k) + rng.uniform(0, 6)) * np.cos(y / 7)
             for k in range(c)]
    return np.stack(chans).round().astype(np.uint8)


@settings(max_examples=25, deadline=None)
@given(c=st.sampled_from([1, 2, 3, 4]), h=st.integers(1, 17), w=st.integers(1, 17),
       level=st.integers(0, 9), seed=st.integers(0, 2 ** 31))
def test_png_round_trip_is_exact(c, h, w, level, seed):
    arr = np.random.default_rng(seed).integers(0, 256, (c, h, w), dtype=np.uint8)
    data = encode_png(_t(arr), compression_level=level)
    assert data.dtype == fiamma.uint8 and data.dim() == 1
    assert bytes(data.numpy()[:8]) == b"\x89PNG\r\n\x1a\n"
    out = decode_png(data)
    assert out.dtype == fiamma.uint8 and tuple(out.shape) == (c, h, w)
    np.testing.assert_array_equal(out.numpy(), arr)
    np.testing.assert_array_equal(decode_image(data).numpy(), arr)


def test_png_non_contiguous_input():
    arr = np.random.default_rng(1).integers(0, 256, (3, 10, 12), dtype=np.uint8)
    t = _t(arr.transpose(0, 2, 1).copy()).transpose(1, 2)  # a transposed view
    np.testing.assert_array_equal(decode_image(encode_png(t)).numpy(), arr)
    t2 = _t(arr)[:, ::2, 1::3]
    np.testing.assert_array_equal(decode_image(encode_png(t2)).numpy(), arr[:, ::2, 1::3])


def test_png_compression_level_changes_size_not_pixels():
    arr = _smooth(3, 64, 64)
    small, big = encode_png(_t(arr), 9), encode_png(_t(arr), 0)
    assert small.shape[0] < big.shape[0]
    np.testing.assert_array_equal(decode_image(small).numpy(), decode_image(big).numpy())


@pytest.mark.parametrize("c", [1, 3])
def test_jpeg_round_trip_within_tolerance(c):
    arr = _smooth(c, 48, 40, seed=c)
    data = encode_jpeg(_t(arr), quality=95)
    assert bytes(data.numpy()[:2]) == b"\xff\xd8"
    out = decode_jpeg(data)
    assert tuple(out.shape) == (c, 48, 40) and out.dtype == fiamma.uint8
    err = np.abs(out.numpy().astype(int) - arr.astype(int))
    assert err.mean() < 2.0 and err.max() < 40
    # lower quality: smaller file, larger error
    low = encode_jpeg(_t(arr), quality=10)
    assert low.shape[0] < data.shape[0]
    err_low = np.abs(decode_jpeg(low).numpy().astype(int) - arr.astype(int)).mean()
    assert err_low > err.mean()


def test_jpeg_matches_pillow_decoder():
    arr = _smooth(3, 16, 16)
    data = encode_jpeg(_t(arr), quality=80)
    ref = np.asarray(Image.open(io.BytesIO(bytes(data.numpy())))).transpose(2, 0, 1)
    np.testing.assert_array_equal(decode_image(data).numpy(), ref)


def test_jpeg_lists():
    imgs = [_t(_smooth(3, 8, 8, s)) for s in range(3)]
    datas = encode_jpeg(imgs, quality=90)
    assert isinstance(datas, list) and len(datas) == 3
    outs = decode_jpeg(datas)
    assert [tuple(o.shape) for o in outs] == [(3, 8, 8)] * 3


def _luma(rgb):
    r, g, b = (rgb[i].astype(np.float64) for i in range(3))
    return r * 0.299 + g * 0.587 + b * 0.114


def test_read_modes_from_rgba():
    rng = np.random.default_rng(2)
    rgba = rng.integers(0, 256, (4, 6, 7), dtype=np.uint8)
    data = encode_png(_t(rgba))
    np.testing.assert_array_equal(decode_image(data, ImageReadMode.UNCHANGED).numpy(), rgba)
    np.testing.assert_array_equal(decode_image(data, ImageReadMode.RGB_ALPHA).numpy(), rgba)
    np.testing.assert_array_equal(decode_image(data, "RGBA").numpy(), rgba)
    np.testing.assert_array_equal(decode_image(data, ImageReadMode.RGB).numpy(), rgba[:3])
    gray = decode_image(data, ImageReadMode.GRAY).numpy()
    assert gray.shape == (1, 6, 7)
    assert np.abs(gray[0] - _luma(rgba)).max() <= 1.0
    ga = decode_image(data, "gray_alpha").numpy()
    assert ga.shape == (2, 6, 7)
    np.testing.assert_array_equal(ga[0], gray[0])
    np.testing.assert_array_equal(ga[1], rgba[3])


def test_read_modes_from_gray():
    g = np.random.default_rng(3).integers(0, 256, (1, 5, 4), dtype=np.uint8)
    data = encode_png(_t(g))
    rgb = decode_image(data, ImageReadMode.RGB).numpy()
    assert rgb.shape == (3, 5, 4)
    for k in range(3):
        np.testing.assert_array_equal(rgb[k], g[0])
    rgba = decode_image(data, ImageReadMode.RGB_ALPHA).numpy()
    assert (rgba[3] == 255).all()
    ga = decode_image(data, ImageReadMode.GRAY_ALPHA).numpy()
    np.testing.assert_array_equal(ga[0], g[0])
    assert (ga[1] == 255).all()


def test_palette_png_expands_to_rgb():
    pal = Image.new("P", (3, 2))
    pal.putpalette([255, 0, 0, 0, 255, 0] + [0] * 762)
    pal.putpixel((1, 0), 1)
    out = decode_image(fiamma.from_numpy(np.frombuffer(_pil_bytes(pal, "PNG"), np.uint8).copy()))
    assert tuple(out.shape) == (3, 2, 3)
    assert out[:, 0, 0].tolist() == [255, 0, 0] and out[:, 0, 1].tolist() == [0, 255, 0]


def test_decode_accepts_other_formats_and_16_bit_png():
    arr = np.random.default_rng(4).integers(0, 256, (5, 6, 3), dtype=np.uint8)
    bmp = np.frombuffer(_pil_bytes(Image.fromarray(arr), "BMP"), np.uint8).copy()
    np.testing.assert_array_equal(decode_image(fiamma.from_numpy(bmp)).numpy(),
                                  arr.transpose(2, 0, 1))
    a16 = np.random.default_rng(5).integers(0, 65536, (4, 3)).astype(np.uint16)
    png16 = np.frombuffer(_pil_bytes(Image.fromarray(a16), "PNG"), np.uint8).copy()
    out = decode_png(fiamma.from_numpy(png16))
    assert out.dtype == fiamma.int32 and tuple(out.shape) == (1, 4, 3)
    np.testing.assert_array_equal(out.numpy()[0], a16.astype(np.int32))


def test_files_round_trip(tmp_path):
    arr = np.random.default_rng(6).integers(0, 256, (3, 9, 11), dtype=np.uint8)
    p = tmp_path / "a.png"
    write_png(_t(arr), str(p), compression_level=1)
    np.testing.assert_array_equal(read_image(p).numpy(), arr)
    np.testing.assert_array_equal(decode_image(str(p)).numpy(), arr)
    assert read_image(p, ImageReadMode.GRAY).shape == (1, 9, 11)
    raw = read_file(p)
    assert raw.dtype == fiamma.uint8 and bytes(raw.numpy()) == p.read_bytes()
    q = tmp_path / "copy.bin"
    write_file(q, raw)
    assert q.read_bytes() == p.read_bytes()
    j = tmp_path / "a.jpg"
    write_jpeg(_t(_smooth(3, 16, 16)), j, quality=90)
    assert Image.open(j).format == "JPEG"
    assert read_image(j).shape == (3, 16, 16)
    assert sorted(os.listdir(tmp_path)) == ["a.jpg", "a.png", "copy.bin"]  # no temp files left


def test_errors_name_the_file(tmp_path):
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"this is not an image")
    with pytest.raises(RuntimeError, match="broken.png"):
        read_image(bad)
    trunc = tmp_path / "trunc.png"
    trunc.write_bytes(bytes(encode_png(_t(_smooth(3, 32, 32))).numpy())[:60])
    with pytest.raises(RuntimeError, match="trunc.png"):
        read_image(trunc)
    empty = tmp_path / "empty.jpg"
    empty.write_bytes(b"")
    with pytest.raises(RuntimeError, match="empty.jpg.*empty"):
        read_image(empty)
    with pytest.raises(FileNotFoundError):
        read_image(tmp_path / "missing.png")


def test_bad_arguments():
    img = _t(_smooth(3, 4, 4))
    with pytest.raises(RuntimeError, match="cannot decode"):
        decode_image(fiamma.from_numpy(np.arange(20, dtype=np.uint8)))
    with pytest.raises(RuntimeError, match="PNG"):
        decode_png(encode_jpeg(img))
    with pytest.raises(RuntimeError, match="JPEG"):
        decode_jpeg(encode_png(img))
    with pytest.raises(ValueError, match="1-D uint8"):
        decode_image(fiamma.zeros(3, 4))
    with pytest.raises(TypeError):
        decode_image([1, 2, 3])
    with pytest.raises(ValueError, match="mode"):
        decode_image(encode_png(img), mode="CMYK")
    with pytest.raises(ValueError, match="compression_level"):
        encode_png(img, compression_level=10)
    with pytest.raises(ValueError, match="quality"):
        encode_jpeg(img, quality=0)
    with pytest.raises(ValueError, match="uint8"):
        encode_png(fiamma.zeros(3, 4, 4))
    with pytest.raises(ValueError, match=r"C in \(1, 3\)"):
        encode_jpeg(_t(_smooth(4, 4, 4)))
    with pytest.raises(ValueError, match="empty"):
        encode_png(fiamma.zeros(3, 0, 4, dtype=fiamma.uint8))
    with pytest.raises(ValueError, match="cpu"):
        decode_jpeg(encode_jpeg(img), device="cuda")


def test_image_read_mode_values():
    assert ImageReadMode.RGBA is ImageReadMode.RGB_ALPHA
    assert [m.value for m in (ImageReadMode.UNCHANGED, ImageReadMode.GRAY,
                              ImageReadMode.GRAY_ALPHA, ImageReadMode.RGB,
                              ImageReadMode.RGB_ALPHA)] == [0, 1, 2, 3, 4]


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_write_file_mode_follows_umask(tmp_path):
    old = os.umask(0o027)
    try:
        write_file(tmp_path / "x.bin", fiamma.tensor([1, 2, 3], dtype=fiamma.uint8))
    finally:
        os.umask(old)
    assert (tmp_path / "x.bin").read_bytes() == bytes([1, 2, 3])
    assert os.stat(tmp_path / "x.bin").st_mode & 0o777 == 0o640
    assert os.listdir(tmp_path) == ["x.bin"]
