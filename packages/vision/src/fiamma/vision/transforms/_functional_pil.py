"""Image operations on PIL images, done with Pillow's own operations as torchvision does."""
import numpy as np
from PIL import Image, ImageEnhance, ImageOps


def is_pil(img):
    return isinstance(img, Image.Image)


def get_dimensions(img):
    bands = img.getbands()
    c = 1 if img.mode == "P" else len(bands)
    w, h = img.size
    return [c, h, w]


def _fill(img, fill, op):
    if fill is None:
        return {}
    c = get_dimensions(img)[0]
    if isinstance(fill, (int, float)) and c > 1:
        fill = tuple([int(fill)] * c) if img.mode != "F" else float(fill)
    if isinstance(fill, (list, tuple)):
        if len(fill) == 1:
            fill = fill * c
        if len(fill) != c:
            raise ValueError(f"{op}: the number of elements in fill ({len(fill)}) does not "
                             f"match the number of image channels ({c})")
        fill = tuple(int(f) for f in fill) if c > 1 else int(fill[0])
    return {"fillcolor": fill}


def hflip(img):
    return img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)


def vflip(img):
    return img.transpose(Image.Transpose.FLIP_TOP_BOTTOM)


def crop(img, top, left, height, width):
    return img.crop((left, top, left + width, top + height))


def resize(img, size, resample):
    h, w = size
    return img.resize((w, h), resample)


def pad(img, padding, fill=0, padding_mode="constant"):
    left, top, right, bottom = padding
    if padding_mode == "constant":
        if min(padding) < 0:
            img = img.crop((-min(left, 0), -min(top, 0), img.size[0] + min(right, 0),
                            img.size[1] + min(bottom, 0)))
            left, top, right, bottom = (max(p, 0) for p in padding)
        if img.mode == "P":
            palette = img.getpalette()
            out = ImageOps.expand(img, border=(left, top, right, bottom), fill=fill)
            out.putpalette(palette)
            return out
        opts = _fill(img, fill, "pad")
        return ImageOps.expand(img, border=(left, top, right, bottom), fill=opts["fillcolor"])
    arr = np.asarray(img)
    if min(padding) < 0:
        arr = arr[max(-top, 0):arr.shape[0] - max(-bottom, 0),
                  max(-left, 0):arr.shape[1] - max(-right, 0)]
        left, top, right, bottom = (max(p, 0) for p in padding)
    widths = [(top, bottom), (left, right)] + [(0, 0)] * (arr.ndim - 2)
    np_mode = {"edge": "edge", "reflect": "reflect", "symmetric": "symmetric"}[padding_mode]
    out = Image.fromarray(np.pad(arr, widths, mode=np_mode))
    if img.mode == "P":
        out.putpalette(img.getpalette())
    return out


def affine(img, matrix, resample, fill):
    return img.transform(img.size, Image.Transform.AFFINE, matrix, resample, **_fill(img, fill,
                                                                                       "affine"))


def rotate(img, angle, resample, expand, center, fill):
    return img.rotate(angle, resample, expand, center, **_fill(img, fill, "rotate"))


def perspective(img, coeffs, resample, fill):
    return img.transform(img.size, Image.Transform.PERSPECTIVE, coeffs, resample,
                         **_fill(img, fill, "perspective"))


def adjust_brightness(img, f):
    return ImageEnhance.Brightness(img).enhance(f)


def adjust_contrast(img, f):
    return ImageEnhance.Contrast(img).enhance(f)


def adjust_saturation(img, f):
    return ImageEnhance.Color(img).enhance(f)


def adjust_sharpness(img, f):
    return ImageEnhance.Sharpness(img).enhance(f)


def adjust_hue(img, hue_factor):
    mode = img.mode
    if mode in {"L", "1", "I", "F"}:
        return img
    h, s, v = img.convert("HSV").split()
    hh = np.array(h, dtype=np.uint8)
    hh += np.uint8(int(hue_factor * 255) % 256)  # wraps around, as intended for hue
    h = Image.fromarray(hh, "L")
    return Image.merge("HSV", (h, s, v)).convert(mode)


def adjust_gamma(img, gamma, gain=1.0):
    mode = img.mode
    img = img.convert("RGB")
    lut = [int((255 + 1 - 1e-3) * gain * pow(v / 255.0, gamma)) for v in range(256)] * 3
    return img.point(lut).convert(mode)


def to_grayscale(img, num_output_channels):
    gray = img.convert("L")
    if num_output_channels == 3:
        a = np.asarray(gray)
        return Image.fromarray(np.dstack([a, a, a]), "RGB")
    return gray


def invert(img):
    return ImageOps.invert(img)


def posterize(img, bits):
    return ImageOps.posterize(img, bits)


def solarize(img, threshold):
    return ImageOps.solarize(img, threshold)


def autocontrast(img):
    return ImageOps.autocontrast(img)


def equalize(img):
    return ImageOps.equalize(img)
