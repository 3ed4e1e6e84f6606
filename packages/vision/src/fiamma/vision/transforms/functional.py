"""Functional image transforms (torchvision.transforms.functional's names and semantics).

Every function takes a PIL image or a fiamma tensor (..., C, H, W). PIL images are processed by
Pillow, tensors by fiamma ops.

Example:
    >>> from PIL import Image
    >>> from fiamma.vision.transforms import functional as F
    >>> img = Image.new("RGB", (64, 48))
    >>> F.to_tensor(F.resize(img, 32)).shape
    fiamma.Size([3, 32, 42])
"""

import math
import numbers
from enum import Enum

import numpy as np
from PIL import Image

import fiamma
from fiamma.vision.transforms import _functional_pil as FP, _functional_tensor as FT

__all__ = [
    "InterpolationMode",
    "get_dimensions",
    "get_image_size",
    "get_image_num_channels",
    "to_tensor",
    "pil_to_tensor",
    "to_pil_image",
    "convert_image_dtype",
    "normalize",
    "resize",
    "pad",
    "crop",
    "center_crop",
    "resized_crop",
    "hflip",
    "vflip",
    "five_crop",
    "ten_crop",
    "adjust_brightness",
    "adjust_contrast",
    "adjust_saturation",
    "adjust_hue",
    "adjust_gamma",
    "rotate",
    "affine",
    "perspective",
    "to_grayscale",
    "rgb_to_grayscale",
    "erase",
    "gaussian_blur",
    "elastic_transform",
    "invert",
    "posterize",
    "solarize",
    "adjust_sharpness",
    "autocontrast",
    "equalize",
]


class InterpolationMode(Enum):
    """Interpolation modes; BOX, HAMMING and LANCZOS apply to PIL images only."""

    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


_PIL_FILTER = {
    InterpolationMode.NEAREST: Image.Resampling.NEAREST,
    InterpolationMode.NEAREST_EXACT: Image.Resampling.NEAREST,
    InterpolationMode.BILINEAR: Image.Resampling.BILINEAR,
    InterpolationMode.BICUBIC: Image.Resampling.BICUBIC,
    InterpolationMode.BOX: Image.Resampling.BOX,
    InterpolationMode.HAMMING: Image.Resampling.HAMMING,
    InterpolationMode.LANCZOS: Image.Resampling.LANCZOS,
}
_FROM_INT = {
    0: InterpolationMode.NEAREST,
    2: InterpolationMode.BILINEAR,
    3: InterpolationMode.BICUBIC,
    4: InterpolationMode.BOX,
    5: InterpolationMode.HAMMING,
    1: InterpolationMode.LANCZOS,
}


def _interp(mode, op):
    if isinstance(mode, InterpolationMode):
        return mode
    if isinstance(mode, int) and mode in _FROM_INT:
        return _FROM_INT[mode]
    if isinstance(mode, str):
        try:
            return InterpolationMode(mode)
        except ValueError:
            pass
    raise TypeError(f"{op}: interpolation should be an InterpolationMode, got {mode!r}")


def _is_pil(img):
    return isinstance(img, Image.Image)


def _check(img, op):
    if not (_is_pil(img) or fiamma.is_tensor(img)):
        raise TypeError(
            f"{op}: img should be a PIL Image or a fiamma Tensor, got {type(img).__name__}"
        )


def get_dimensions(img):
    """[channels, height, width] of a PIL image or tensor."""
    _check(img, "get_dimensions")
    return FP.get_dimensions(img) if _is_pil(img) else FT.get_dimensions(img)


def get_image_size(img):
    """[width, height]."""
    _, h, w = get_dimensions(img)
    return [w, h]


def get_image_num_channels(img):
    return get_dimensions(img)[0]


# ---------------------------------------------------------------- conversion


def pil_to_tensor(pic):
    """PIL image -> tensor (C, H, W) of the image's own dtype (no scaling)."""
    if not _is_pil(pic):
        raise TypeError(f"pil_to_tensor: pic should be a PIL Image, got {type(pic).__name__}")
    if pic.mode == "I;16":
        arr = np.array(pic, np.int32)
    else:
        arr = np.array(pic, copy=True) if pic.mode != "1" else np.array(pic, np.uint8)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    return fiamma.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))


def to_tensor(pic):
    """PIL image or HWC ndarray -> float tensor (C, H, W); uint8 data is scaled to [0, 1].

    Example:
        >>> to_tensor(Image.new("L", (4, 2), 255)).tolist()
        [[[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]]
    """
    dt = fiamma.get_default_dtype()
    if isinstance(pic, np.ndarray):
        if pic.ndim not in (2, 3):
            raise ValueError(f"to_tensor: pic should be 2 or 3 dimensional, got {pic.ndim} dims")
        if pic.ndim == 2:
            pic = pic[:, :, None]
        if pic.dtype == np.uint8:
            return _hwc_uint8_to_float(pic, dt)
        return fiamma.from_numpy(np.ascontiguousarray(pic.transpose(2, 0, 1)))
    if not _is_pil(pic):
        raise TypeError(
            f"to_tensor: pic should be a PIL Image or ndarray, got {type(pic).__name__}"
        )
    if pic.mode in ("I", "I;16", "F"):
        arr = np.array(pic, {"I": np.int32, "I;16": np.int16, "F": np.float32}[pic.mode])
        return fiamma.from_numpy(arr[None].copy())
    if pic.mode == "1":
        return _hwc_uint8_to_float(np.array(pic, np.uint8)[:, :, None] * 255, dt)
    if dt in (fiamma.float32, fiamma.float64) and pic.mode != "P":
        return _planes_to_float(pic, dt)
    arr = np.asarray(pic)
    return _hwc_uint8_to_float(arr[:, :, None] if arr.ndim == 2 else arr, dt)


def _planes_to_float(pic, dt, mean=None, std=None):
    """8-bit PIL image -> (C, H, W) float tensor / 255, optionally normalised.

    Pillow splits the interleaved pixels into planes; each plane is a contiguous cast-and-divide
    straight into the tensor's memory, and is normalised (fiamma ops, in place) while it is still
    in cache. The values equal to_tensor followed by normalize."""
    w, h = pic.size
    bands = pic.split()
    out = fiamma.empty((len(bands), h, w), dtype=dt)
    o = out.numpy()
    scale = o.dtype.type(255)
    for k, band in enumerate(bands):
        np.divide(np.asarray(band), scale, out=o[k])
        if mean is not None:
            out[k].sub_(mean[k if len(mean) > 1 else 0]).div_(std[k if len(std) > 1 else 0])
    return out


def _to_tensor_normalize(pic, mean, std):
    """normalize(to_tensor(pic), mean, std) in one pass over the image where possible."""
    dt = fiamma.get_default_dtype()
    if (
        _is_pil(pic)
        and pic.mode not in ("P", "1", "I", "I;16", "F")
        and dt in (fiamma.float32, fiamma.float64)
    ):
        c = len(pic.getbands())
        mean_t, std_t = FT._mean_std(FT._key(mean), FT._key(std), dt)
        if mean_t.shape[0] in (1, c) and std_t.shape[0] in (1, c):
            return _planes_to_float(
                pic, dt, mean_t.reshape(-1).tolist(), std_t.reshape(-1).tolist()
            )
    return normalize(to_tensor(pic), mean, std, inplace=True)


def _hwc_uint8_to_float(arr, dtype):
    """(H, W, C) uint8 array -> new contiguous (C, H, W) tensor / 255 in one pass.

    NumPy reads the (possibly read-only) Pillow buffer and writes the transposed, scaled values
    straight into fiamma memory; the float division matches a cast followed by div(255)."""
    out = fiamma.empty((arr.shape[2], arr.shape[0], arr.shape[1]), dtype=dtype)
    if dtype in (fiamma.float32, fiamma.float64):
        np_t = np.float32 if dtype == fiamma.float32 else np.float64
        np.divide(arr.transpose(2, 0, 1), np_t(255), out=out.numpy())
        return out
    return fiamma.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1))).to(dtype).div_(255)


def to_pil_image(pic, mode=None):
    """Tensor (C, H, W) / ndarray (H, W, C) -> PIL image; float data is scaled by 255."""
    if fiamma.is_tensor(pic):
        if pic.ndim not in (2, 3):
            raise ValueError(f"to_pil_image: pic should be 2 or 3 dimensional, got {pic.ndim} dims")
        if pic.ndim == 2:
            pic = pic.unsqueeze(0)
        if pic.shape[0] > 4:
            raise ValueError(f"to_pil_image: pic should not have > 4 channels, got {pic.shape[0]}")
        if pic.is_floating_point() and mode != "F":
            pic = pic.mul(255).to(fiamma.uint8)
        arr = np.ascontiguousarray(pic.numpy().transpose(1, 2, 0))
    elif isinstance(pic, np.ndarray):
        if pic.ndim not in (2, 3):
            raise ValueError(f"to_pil_image: pic should be 2 or 3 dimensional, got {pic.ndim} dims")
        arr = pic[:, :, None] if pic.ndim == 2 else pic
        if arr.shape[-1] > 4:
            raise ValueError(f"to_pil_image: pic should not have > 4 channels, got {arr.shape[-1]}")
    else:
        raise TypeError(
            f"to_pil_image: pic should be a Tensor or ndarray, got {type(pic).__name__}"
        )
    if arr.shape[2] == 1:
        arr = arr[:, :, 0]
        default = {
            np.dtype(np.uint8): "L",
            np.dtype(np.int16): "I;16",
            np.dtype(np.int32): "I",
            np.dtype(np.float32): "F",
        }.get(arr.dtype)
        if mode is not None and mode != default and not (mode == "L" and default is None):
            if not (mode == "L" and arr.dtype == np.uint8):
                raise ValueError(f"to_pil_image: mode {mode} does not fit {arr.dtype} data")
        mode = mode or default
        if mode is None:
            raise TypeError(f"to_pil_image: input type {arr.dtype} is not supported")
        if mode == "I;16":
            return Image.fromarray(arr.astype(np.uint16), "I;16")
        return Image.fromarray(arr if mode != "F" else arr.astype(np.float32), mode)
    if arr.dtype != np.uint8:
        raise TypeError(f"to_pil_image: multi-channel images must be uint8, got {arr.dtype}")
    defaults = {2: "LA", 3: "RGB", 4: "RGBA"}
    allowed = {2: ["LA"], 3: ["RGB", "YCbCr", "HSV"], 4: ["RGBA", "CMYK", "RGBX"]}[arr.shape[2]]
    if mode is not None and mode not in allowed:
        raise ValueError(
            f"to_pil_image: only modes {allowed} are supported for "
            f"{arr.shape[2]}-channel images, got {mode}"
        )
    return Image.fromarray(arr, mode or defaults[arr.shape[2]])


def convert_image_dtype(image, dtype=fiamma.float32):
    """Convert a tensor image to dtype, rescaling values (uint8 255 <-> float 1.0)."""
    return FT.convert_image_dtype(image, dtype)


def normalize(tensor, mean, std, inplace=False):
    """(tensor - mean) / std per channel; float tensors only."""
    if not fiamma.is_tensor(tensor):
        raise TypeError(f"Normalize: img should be a fiamma Tensor, got {type(tensor).__name__}")
    return FT.normalize(tensor, mean, std, inplace)


# ---------------------------------------------------------------- geometry


def _resized_size(h, w, size, max_size, op="resize"):
    if (
        isinstance(size, int)
        or (isinstance(size, (list, tuple)) and len(size) == 1)
        or size is None
    ):
        if size is None:
            if max_size is None:
                raise ValueError(f"{op}: size and max_size cannot both be None")
            short, long = (w, h) if w <= h else (h, w)
            new_short, new_long = int(max_size * short / long), max_size
        else:
            req = size if isinstance(size, int) else size[0]
            short, long = (w, h) if w <= h else (h, w)
            new_short, new_long = req, int(req * long / short)
            if max_size is not None:
                if max_size <= req:
                    raise ValueError(
                        f"{op}: max_size = {max_size} must be strictly greater than "
                        f"the requested size for the smaller edge size = {size}"
                    )
                if new_long > max_size:
                    new_short, new_long = int(max_size * new_short / new_long), max_size
        return [new_long, new_short] if w <= h else [new_short, new_long]
    if max_size is not None:
        raise ValueError(
            f"{op}: max_size should only be passed if size is an int or a sequence "
            f"of length 1, got size={size}"
        )
    return [int(size[0]), int(size[1])]


def resize(img, size, interpolation=InterpolationMode.BILINEAR, max_size=None, antialias=True):
    """Resize to size (h, w), or scale the smaller edge to size when it is an int."""
    _check(img, "resize")
    interpolation = _interp(interpolation, "resize")
    _, h, w = get_dimensions(img)
    out = _resized_size(h, w, size, max_size)
    if out == [h, w]:
        return img
    if _is_pil(img):
        if antialias is False:
            pass  # Pillow always antialiases
        return FP.resize(img, out, _PIL_FILTER[interpolation])
    return FT.resize(img, out, interpolation.value, antialias)


def _ltrb(padding, op):
    if isinstance(padding, numbers.Number):
        p = int(padding)
        return [p, p, p, p]
    padding = list(padding)
    if len(padding) == 1:
        return padding * 4
    if len(padding) == 2:
        return [padding[0], padding[1], padding[0], padding[1]]
    if len(padding) == 4:
        return padding
    raise ValueError(
        f"{op}: padding must be an int or a 1, 2 or 4 element sequence, got {len(padding)} elements"
    )


def pad(img, padding, fill=0, padding_mode="constant"):
    """Pad all sides (int), left/right + top/bottom (2) or left, top, right, bottom (4)."""
    _check(img, "pad")
    if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
        raise ValueError(
            f"pad: padding_mode should be constant, edge, reflect or symmetric, "
            f"got {padding_mode!r}"
        )
    ltrb = _ltrb(padding, "pad")
    if _is_pil(img):
        return FP.pad(img, ltrb, fill, padding_mode)
    if isinstance(fill, (list, tuple)):
        fill = fill[0] if len(fill) == 1 else fill
        if isinstance(fill, (list, tuple)):
            raise TypeError("pad: tensor images take a single number as fill")
    return FT.pad(img, ltrb, 0 if fill is None else fill, padding_mode)


def crop(img, top, left, height, width):
    """Crop the box (top, left, height, width); areas outside the image are zero."""
    _check(img, "crop")
    if _is_pil(img):
        return FP.crop(img, top, left, height, width)
    return FT.crop(img, top, left, height, width)


def _size2(size, op):
    if isinstance(size, numbers.Number):
        return (int(size), int(size))
    if isinstance(size, (list, tuple)) and len(size) == 1:
        return (int(size[0]), int(size[0]))
    if isinstance(size, (list, tuple)) and len(size) == 2:
        return (int(size[0]), int(size[1]))
    raise ValueError(f"{op}: size should be an int or a sequence of 1 or 2 ints, got {size!r}")


def center_crop(img, output_size):
    """Crop the centre; pads with zeros where output_size exceeds the image."""
    ch, cw = _size2(output_size, "center_crop")
    _, h, w = get_dimensions(img)
    if cw > w or ch > h:
        ltrb = [
            (cw - w) // 2 if cw > w else 0,
            (ch - h) // 2 if ch > h else 0,
            (cw - w + 1) // 2 if cw > w else 0,
            (ch - h + 1) // 2 if ch > h else 0,
        ]
        img = pad(img, ltrb, fill=0)
        _, h, w = get_dimensions(img)
        if cw == w and ch == h:
            return img
    top = int(round((h - ch) / 2.0))
    left = int(round((w - cw) / 2.0))
    return crop(img, top, left, ch, cw)


def resized_crop(
    img, top, left, height, width, size, interpolation=InterpolationMode.BILINEAR, antialias=True
):
    return resize(crop(img, top, left, height, width), size, interpolation, antialias=antialias)


def hflip(img):
    _check(img, "hflip")
    return FP.hflip(img) if _is_pil(img) else FT.hflip(img)


def vflip(img):
    _check(img, "vflip")
    return FP.vflip(img) if _is_pil(img) else FT.vflip(img)


def five_crop(img, size):
    """(top-left, top-right, bottom-left, bottom-right, center) crops."""
    ch, cw = _size2(size, "five_crop")
    _, h, w = get_dimensions(img)
    if cw > w or ch > h:
        raise ValueError(
            f"five_crop: requested crop size {(ch, cw)} is bigger than the input size {(h, w)}"
        )
    return (
        crop(img, 0, 0, ch, cw),
        crop(img, 0, w - cw, ch, cw),
        crop(img, h - ch, 0, ch, cw),
        crop(img, h - ch, w - cw, ch, cw),
        center_crop(img, (ch, cw)),
    )


def ten_crop(img, size, vertical_flip=False):
    first = five_crop(img, size)
    flipped = vflip(img) if vertical_flip else hflip(img)
    return first + five_crop(flipped, size)


def _inverse_affine(center, angle, translate, scale, shear):
    """Inverse of T * C * R(angle) * Shear * Scale * C^-1 as [a, b, c, d, e, f] (output to
    input)."""
    rot = math.radians(angle)
    sx, sy = math.radians(shear[0]), math.radians(shear[1])
    cx, cy = center
    tx, ty = translate
    # rotation-scale-shear part, written as R(rot) * ShearY(sy)^-1-style composition
    a = math.cos(rot - sy) / math.cos(sy)
    b = -math.cos(rot - sy) * math.tan(sx) / math.cos(sy) - math.sin(rot)
    c = math.sin(rot - sy) / math.cos(sy)
    d = -math.sin(rot - sy) * math.tan(sx) / math.cos(sy) + math.cos(rot)
    fwd = np.array([[a * scale, b * scale, 0.0], [c * scale, d * scale, 0.0], [0, 0, 1.0]])
    tc = np.array([[1, 0, cx + tx], [0, 1, cy + ty], [0, 0, 1.0]])
    cinv = np.array([[1, 0, -cx], [0, 1, -cy], [0, 0, 1.0]])
    inv = np.linalg.inv(tc @ fwd @ cinv)
    return [float(v) for v in inv[:2].reshape(-1)]


def _tensor_fill(img, fill):
    if fill is None:
        return None
    c = get_dimensions(img)[0]
    if isinstance(fill, (int, float)):
        return [float(fill)] * c
    fill = [float(f) for f in fill]
    if len(fill) not in (1, c):
        raise ValueError(
            f"the number of elements in fill ({len(fill)}) does not match the "
            f"number of channels ({c})"
        )
    return fill * c if len(fill) == 1 else fill


def rotate(
    img, angle, interpolation=InterpolationMode.NEAREST, expand=False, center=None, fill=None
):
    """Rotate counter-clockwise by angle degrees about center (default: the image centre)."""
    _check(img, "rotate")
    interpolation = _interp(interpolation, "rotate")
    if _is_pil(img):
        return FP.rotate(img, angle, _PIL_FILTER[interpolation], expand, center, fill)
    _, h, w = get_dimensions(img)
    cf = [0.0, 0.0] if center is None else [c - s * 0.5 for c, s in zip(center, [w, h])]
    m = _inverse_affine(cf, -angle, [0.0, 0.0], 1.0, [0.0, 0.0])
    size = FT.affine_size(m, w, h) if expand else None
    return FT.affine(img, m, interpolation.value, _tensor_fill(img, fill), size)


def affine(
    img,
    angle,
    translate,
    scale,
    shear,
    interpolation=InterpolationMode.NEAREST,
    fill=None,
    center=None,
):
    """Rotation by angle, translation, scaling and shear (degrees) about center."""
    _check(img, "affine")
    interpolation = _interp(interpolation, "affine")
    if not isinstance(translate, (list, tuple)) or len(translate) != 2:
        raise TypeError(f"affine: translate should be a sequence of length 2, got {translate!r}")
    if scale <= 0.0:
        raise ValueError(f"affine: scale should be positive, got {scale}")
    if isinstance(shear, numbers.Number):
        shear = [shear, 0.0]
    shear = list(shear)
    if len(shear) == 1:
        shear = [shear[0], shear[0]]
    _, h, w = get_dimensions(img)
    if _is_pil(img):
        c = [w * 0.5, h * 0.5] if center is None else center
        m = _inverse_affine(c, angle, [float(t) for t in translate], scale, shear)
        return FP.affine(img, m, _PIL_FILTER[interpolation], fill)
    cf = [0.0, 0.0] if center is None else [c - s * 0.5 for c, s in zip(center, [w, h])]
    m = _inverse_affine(cf, angle, [float(t) for t in translate], scale, shear)
    return FT.affine(img, m, interpolation.value, _tensor_fill(img, fill))


def _perspective_coeffs(startpoints, endpoints):
    """Coefficients (a, b, c, d, e, f, g, h) of the projective map taking endpoints to
    startpoints (least squares in float64, rounded to float32 as torchvision's)."""
    if len(startpoints) != 4 or len(endpoints) != 4:
        raise ValueError(f"perspective: Please provide exactly four corners, got "
                         f"{len(startpoints)} startpoints and {len(endpoints)} endpoints")
    a = np.zeros((8, 8))
    for i, ((xs, ys), (xe, ye)) in enumerate(zip(startpoints, endpoints)):
        a[2 * i] = [xe, ye, 1, 0, 0, 0, -xs * xe, -xs * ye]
        a[2 * i + 1] = [0, 0, 0, xe, ye, 1, -ys * xe, -ys * ye]
    b = np.array(startpoints, dtype=np.float64).reshape(8)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):  # LAPACK's gelsd would not return
        raise ValueError(f"perspective: the corners must be finite numbers, got startpoints "
                         f"{list(startpoints)} and endpoints {list(endpoints)}")
    sol = np.linalg.lstsq(a.astype(np.float32).astype(np.float64), b, rcond=None)[0]
    return [float(v) for v in sol.astype(np.float32)]


def _perspective_by_coeffs(img, coeffs, interpolation, fill):
    """Warp ``img``: output pixel (x, y) samples the input at
    ((a x + b y + c) / (g x + h y + 1), (d x + e y + f) / (g x + h y + 1))."""
    _check(img, "perspective")
    interpolation = _interp(interpolation, "perspective")
    if _is_pil(img):
        return FP.perspective(img, coeffs, _PIL_FILTER[interpolation], fill)
    return FT.perspective(img, coeffs, interpolation.value, _tensor_fill(img, fill))


def perspective(img, startpoints, endpoints, interpolation=InterpolationMode.BILINEAR, fill=None):
    """Projective warp moving the four startpoints (corners) to endpoints."""
    _check(img, "perspective")
    return _perspective_by_coeffs(img, _perspective_coeffs(startpoints, endpoints),
                                  interpolation, fill)


# ---------------------------------------------------------------- colour and filters


def _dispatch(name, img, *args):
    _check(img, name)
    return getattr(FP if _is_pil(img) else FT, name)(img, *args)


def adjust_brightness(img, brightness_factor):
    if brightness_factor < 0:
        raise ValueError(f"adjust_brightness: factor ({brightness_factor}) must be >= 0")
    return _dispatch("adjust_brightness", img, brightness_factor)


def adjust_contrast(img, contrast_factor):
    if contrast_factor < 0:
        raise ValueError(f"adjust_contrast: factor ({contrast_factor}) must be >= 0")
    return _dispatch("adjust_contrast", img, contrast_factor)


def adjust_saturation(img, saturation_factor):
    if saturation_factor < 0:
        raise ValueError(f"adjust_saturation: factor ({saturation_factor}) must be >= 0")
    return _dispatch("adjust_saturation", img, saturation_factor)


def adjust_hue(img, hue_factor):
    if not -0.5 <= hue_factor <= 0.5:
        raise ValueError(f"adjust_hue: hue_factor ({hue_factor}) is not in [-0.5, 0.5]")
    return _dispatch("adjust_hue", img, hue_factor)


def adjust_gamma(img, gamma, gain=1):
    if gamma < 0:
        raise ValueError(f"adjust_gamma: gamma ({gamma}) must be non-negative")
    return _dispatch("adjust_gamma", img, gamma, gain)


def adjust_sharpness(img, sharpness_factor):
    if sharpness_factor < 0:
        raise ValueError(f"adjust_sharpness: factor ({sharpness_factor}) must be >= 0")
    return _dispatch("adjust_sharpness", img, sharpness_factor)


def to_grayscale(img, num_output_channels=1):
    """PIL image -> grayscale PIL image with 1 or 3 channels."""
    if num_output_channels not in (1, 3):
        raise ValueError(
            f"to_grayscale: num_output_channels should be 1 or 3, got {num_output_channels}"
        )
    if _is_pil(img):
        return FP.to_grayscale(img, num_output_channels)
    return FT.rgb_to_grayscale(img, num_output_channels)


def rgb_to_grayscale(img, num_output_channels=1):
    return to_grayscale(img, num_output_channels)


def invert(img):
    return _dispatch("invert", img)


def posterize(img, bits):
    if not 0 <= bits <= 8:
        raise ValueError(f"posterize: bits should be in [0, 8], got {bits}")
    return _dispatch("posterize", img, bits)


def solarize(img, threshold):
    return _dispatch("solarize", img, threshold)


def autocontrast(img):
    return _dispatch("autocontrast", img)


def equalize(img):
    return _dispatch("equalize", img)


def erase(img, i, j, h, w, v, inplace=False):
    """Set img[..., i:i+h, j:j+w] = v (tensor images only)."""
    if not fiamma.is_tensor(img):
        raise TypeError(f"erase: img should be a fiamma Tensor, got {type(img).__name__}")
    return FT.erase(img, i, j, h, w, v, inplace)


def gaussian_blur(img, kernel_size, sigma=None):
    """Blur with a separable Gaussian kernel (reflect padding); PIL images go through tensors."""
    if isinstance(kernel_size, int):
        kernel_size = [kernel_size, kernel_size]
    kernel_size = list(kernel_size)
    if len(kernel_size) == 1:
        kernel_size = kernel_size * 2
    if len(kernel_size) != 2:
        raise ValueError(
            f"gaussian_blur: kernel_size should have 1 or 2 elements, got {len(kernel_size)}"
        )
    for k in kernel_size:
        if k % 2 == 0 or k < 0:
            raise ValueError(
                f"gaussian_blur: kernel size should be odd and positive, got {kernel_size}"
            )
    if sigma is None:
        sigma = [k * 0.15 + 0.35 for k in kernel_size]
    if isinstance(sigma, (int, float)):
        sigma = [float(sigma)] * 2
    sigma = list(sigma)
    if len(sigma) == 1:
        sigma = sigma * 2
    if len(sigma) != 2 or any(s <= 0 for s in sigma):
        raise ValueError(f"gaussian_blur: sigma should be positive, got {sigma}")
    if _is_pil(img):
        out = FT.gaussian_blur(pil_to_tensor(img), kernel_size, sigma)
        return to_pil_image(out, mode=img.mode)
    _check(img, "gaussian_blur")
    return FT.gaussian_blur(img, kernel_size, sigma)


def elastic_transform(img, displacement, interpolation=InterpolationMode.BILINEAR, fill=None):
    """Warp by a (1, H, W, 2) ``displacement`` field in normalised units (torchvision's
    convention); tensors and PIL images. The kernel is ``transforms.v2.functional.elastic``."""
    from fiamma.vision.transforms.v2 import functional as F2
    _check(img, "elastic_transform")
    return F2.elastic(img, displacement, _interp(interpolation, "elastic_transform"), fill)
