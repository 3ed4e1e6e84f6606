"""Image file I/O (``torchvision.io``): read, decode and encode PNG/JPEG (and what Pillow reads)
into uint8 ``(C, H, W)`` tensors.

>>> import fiamma
>>> from fiamma.vision.io import encode_png, decode_image
>>> img = fiamma.randint(0, 256, (3, 4, 5), dtype=fiamma.uint8)
>>> bool((decode_image(encode_png(img)) == img).all())
True
"""

import enum
import io as _pyio
import os

import numpy as np

import fiamma
from fiamma.utils.files import temp_file_beside

__all__ = ["ImageReadMode", "read_file", "write_file", "decode_image", "read_image",
           "decode_png", "decode_jpeg", "encode_png", "encode_jpeg", "write_png", "write_jpeg"]


class ImageReadMode(enum.Enum):
    """The channels to decode to: ``UNCHANGED`` (as stored), ``GRAY``, ``GRAY_ALPHA``,
    ``RGB``, ``RGB_ALPHA`` (alias ``RGBA``). Functions also accept the names as strings."""

    UNCHANGED = 0
    GRAY = 1
    GRAY_ALPHA = 2
    RGB = 3
    RGB_ALPHA = 4
    RGBA = RGB_ALPHA


_PIL_MODE = {ImageReadMode.GRAY: "L", ImageReadMode.GRAY_ALPHA: "LA",
             ImageReadMode.RGB: "RGB", ImageReadMode.RGB_ALPHA: "RGBA"}


def _pil():
    from PIL import Image
    return Image


def _mode(mode, op):
    if isinstance(mode, ImageReadMode):
        return mode
    if isinstance(mode, str):
        try:
            return ImageReadMode[mode.upper()]
        except KeyError:
            pass
    raise ValueError(f"{op}: mode must be an ImageReadMode or one of "
                     f"{[m.name for m in ImageReadMode]}, got {mode!r}")


def _as_bytes(data, op):
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if not fiamma.is_tensor(data):
        raise TypeError(f"{op}: expected a 1-D uint8 tensor of encoded bytes, got "
                        f"{type(data).__name__}")
    if data.dtype != fiamma.uint8 or data.dim() != 1:
        raise ValueError(f"{op}: expected a 1-D uint8 tensor of encoded bytes, got "
                         f"dtype {data.dtype} and shape {tuple(data.shape)}")
    return np.ascontiguousarray(data.numpy()).tobytes()


def _bytes_tensor(b):
    return fiamma.from_numpy(np.frombuffer(bytearray(b), dtype=np.uint8))


def read_file(path):
    """Read a file's bytes into a 1-D uint8 tensor.

    >>> # data = read_file("cat.png"); img = decode_image(data)
    """
    with open(os.fspath(path), "rb") as f:
        return _bytes_tensor(f.read())





def write_file(filename, data):
    """Write a 1-D uint8 tensor's bytes to ``filename`` (through a temporary file and a rename,
    so an interrupted write never leaves a truncated file)."""
    raw = _as_bytes(data, "write_file")
    filename = os.fspath(filename)
    fd, tmp = temp_file_beside(filename, os.path.basename(filename))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.replace(tmp, filename)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _pil_to_tensor(img, mode):
    """A loaded PIL image -> (C, H, W) tensor, converted to ``mode`` (an ImageReadMode)."""
    if mode is not ImageReadMode.UNCHANGED:
        img = img.convert(_PIL_MODE[mode])
    elif img.mode == "P":
        # palette images come out expanded, as libpng does
        img = img.convert("RGBA" if "transparency" in img.info else "RGB")
    elif img.mode == "PA":
        img = img.convert("RGBA")
    elif img.mode == "1":
        img = img.convert("L")
    elif img.mode in ("I;16", "I;16B", "I;16L", "I"):
        # 16-bit PNGs: torchvision gives uint16; fiamma has no uint16, so int32 holds them exactly
        arr = np.array(img, dtype=np.int32)
        return fiamma.from_numpy(np.ascontiguousarray(arr[None]))
    elif img.mode not in ("L", "LA", "RGB", "RGBA"):
        img = img.convert("RGB")  # CMYK, YCbCr, F, ...
    arr = np.array(img, dtype=np.uint8)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    return fiamma.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))


def _decode(raw, mode, apply_exif_orientation, op, name, fmt=None):
    Image = _pil()
    mode = _mode(mode, op)
    where = f" {name}" if name else ""
    if not raw:
        raise RuntimeError(f"{op}: cannot decode{where}: the data is empty")
    try:
        img = Image.open(_pyio.BytesIO(raw))
        if fmt is not None and img.format != fmt:
            raise ValueError(f"expected {fmt} data, got {img.format}")
        frames = []
        for i in range(getattr(img, "n_frames", 1)):
            img.seek(i)
            img.load()
            frame = img
            if apply_exif_orientation:
                from PIL import ImageOps
                frame = ImageOps.exif_transpose(img)
            frames.append(_pil_to_tensor(frame, mode))
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise RuntimeError(f"{op}: cannot decode{where} as an image: {e}") from None
    if len(frames) == 1:
        return frames[0]
    return fiamma.stack(frames)  # animated images: (N, C, H, W), as torchvision's GIF decoder


def decode_image(input, mode=ImageReadMode.UNCHANGED, apply_exif_orientation=False):
    """Decode an encoded image (1-D uint8 tensor, or a path) into a uint8 ``(C, H, W)`` tensor.

    ``mode`` converts the channels (``ImageReadMode`` or its name); animated images give
    ``(N, C, H, W)``.

    >>> import fiamma
    >>> png = encode_png(fiamma.full((3, 2, 2), 200, dtype=fiamma.uint8))
    >>> decode_image(png, mode=ImageReadMode.GRAY).shape
    fiamma.Size([1, 2, 2])
    """
    if isinstance(input, (str, os.PathLike)):
        return read_image(input, mode, apply_exif_orientation)
    return _decode(_as_bytes(input, "decode_image"), mode, apply_exif_orientation,
                   "decode_image", None)


def read_image(path, mode=ImageReadMode.UNCHANGED, apply_exif_orientation=False):
    """Read an image file into a uint8 ``(C, H, W)`` tensor (see :func:`decode_image`)."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        raw = f.read()
    return _decode(raw, mode, apply_exif_orientation, "read_image", repr(path))


def decode_png(input, mode=ImageReadMode.UNCHANGED, apply_exif_orientation=False):
    """Decode PNG bytes (1-D uint8 tensor) into a ``(C, H, W)`` tensor (uint8; int32 for
    16-bit PNGs, which torchvision returns as uint16)."""
    return _decode(_as_bytes(input, "decode_png"), mode, apply_exif_orientation,
                   "decode_png", None, fmt="PNG")


def decode_jpeg(input, mode=ImageReadMode.UNCHANGED, device="cpu", apply_exif_orientation=False):
    """Decode JPEG bytes (a 1-D uint8 tensor, or a list of them) into uint8 ``(C, H, W)``."""
    if str(device) != "cpu":
        raise ValueError(f"decode_jpeg: only device='cpu' is supported, got {device!r}")
    if isinstance(input, (list, tuple)):
        return [decode_jpeg(x, mode, device, apply_exif_orientation) for x in input]
    return _decode(_as_bytes(input, "decode_jpeg"), mode, apply_exif_orientation,
                   "decode_jpeg", None, fmt="JPEG")


def _to_pil(input, op, channels):
    Image = _pil()
    if not fiamma.is_tensor(input):
        raise TypeError(f"{op}: expected a uint8 (C, H, W) tensor, got {type(input).__name__}")
    if input.dtype != fiamma.uint8 or input.dim() != 3 or input.shape[0] not in channels:
        raise ValueError(f"{op}: expected a uint8 (C, H, W) tensor with C in {channels}, got "
                         f"dtype {input.dtype} and shape {tuple(input.shape)}")
    if input.shape[1] == 0 or input.shape[2] == 0:
        raise ValueError(f"{op}: cannot encode an empty image of shape {tuple(input.shape)}")
    arr = np.ascontiguousarray(input.numpy().transpose(1, 2, 0))
    if arr.shape[2] == 1:
        arr = arr[:, :, 0]
    return Image.fromarray(arr)  # (H, W) -> L, 2 -> LA, 3 -> RGB, 4 -> RGBA


def encode_png(input, compression_level=6):
    """Encode a uint8 ``(C, H, W)`` tensor (C = 1, 2, 3 or 4) as PNG; returns the bytes as a
    1-D uint8 tensor. ``compression_level`` is zlib's, 0 to 9."""
    if not isinstance(compression_level, int) or not 0 <= compression_level <= 9:
        raise ValueError(f"encode_png: compression_level must be an int in [0, 9], "
                         f"got {compression_level!r}")
    buf = _pyio.BytesIO()
    _to_pil(input, "encode_png", (1, 2, 3, 4)).save(buf, format="PNG",
                                                    compress_level=compression_level)
    return _bytes_tensor(buf.getvalue())


def write_png(input, filename, compression_level=6):
    """Encode ``input`` as PNG and write it to ``filename``."""
    write_file(filename, encode_png(input, compression_level))


def encode_jpeg(input, quality=75):
    """Encode a uint8 ``(C, H, W)`` tensor (C = 1 or 3), or a list of them, as JPEG with
    ``quality`` in [1, 100]; returns 1-D uint8 tensors of bytes."""
    if not isinstance(quality, int) or not 1 <= quality <= 100:
        raise ValueError(f"encode_jpeg: quality must be an int in [1, 100], got {quality!r}")
    if isinstance(input, (list, tuple)):
        return [encode_jpeg(x, quality) for x in input]
    buf = _pyio.BytesIO()
    _to_pil(input, "encode_jpeg", (1, 3)).save(buf, format="JPEG", quality=quality)
    return _bytes_tensor(buf.getvalue())


def write_jpeg(input, filename, quality=75):
    """Encode ``input`` as JPEG and write it to ``filename``."""
    write_file(filename, encode_jpeg(input, quality))
