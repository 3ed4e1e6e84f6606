"""v2 colour functionals beyond v1's: invert, posterize, solarize, autocontrast, equalize,
adjust_sharpness, adjust_gamma, grayscale_to_rgb, permute_channels, gaussian_noise and jpeg,
each with torchvision's per-type kernels (``*_image`` for images and plain tensors
``(..., C, H, W)``, ``*_video`` for videos ``(..., T, C, H, W)``).

The functionals dispatch on the input's type (torchvision's rule): plain tensors and
``tv_tensors.Image`` use the image kernel, ``Video`` the video kernel, PIL images PIL's
operation; the result keeps the tv_tensor type. Boxes, masks and keypoints have no kernel:
the functional raises ``TypeError`` and the v2 transforms pass them through unchanged.

    >>> import fiamma
    >>> from fiamma.vision.transforms.v2 import functional as F
    >>> F.invert(fiamma.tensor([[[0, 100, 255]]], dtype=fiamma.uint8)).tolist()
    [[[255, 155, 0]]]
"""
import io

import numpy as np
from PIL import Image as PILImage

import fiamma
from fiamma.vision import tv_tensors as tv
from fiamma.vision.transforms import _functional_tensor as FT, functional as F1

__all__ = [
    "invert", "invert_image", "invert_video", "posterize", "posterize_image", "posterize_video",
    "solarize", "solarize_image", "solarize_video", "autocontrast", "autocontrast_image",
    "autocontrast_video", "equalize", "equalize_image", "equalize_video", "adjust_sharpness",
    "adjust_sharpness_image", "adjust_sharpness_video", "adjust_gamma", "adjust_gamma_image",
    "adjust_gamma_video", "grayscale_to_rgb", "grayscale_to_rgb_image", "rgb_to_grayscale_image",
    "permute_channels", "permute_channels_image", "permute_channels_video", "gaussian_noise",
    "gaussian_noise_image", "gaussian_noise_video", "jpeg", "jpeg_image", "jpeg_video",
]

# the per-type kernels: plain functions of plain tensors, not dispatching functionals
PLAIN = [n for n in __all__ if n.endswith(("_image", "_video"))]

# bits that carry the value (the sign bit excluded), as torchvision's integer kernels use them
_VALUE_BITS = {fiamma.uint8: 8, fiamma.int8: 7, fiamma.int16: 15, fiamma.int32: 31,
               fiamma.int64: 63}
for _name, _bits in (("uint16", 16), ("uint32", 32), ("uint64", 64)):
    if hasattr(fiamma, _name):
        _VALUE_BITS[getattr(fiamma, _name)] = _bits


# ---------------------------------------------------------------------------- dispatch

def _wrapping(kernel):
    """``kernel`` for a tv_tensor input: run it on the plain tensor, re-wrap like the input."""
    def run(inpt, *args, **kwargs):
        out = kernel(inpt.as_subclass(fiamma.Tensor), *args, **kwargs)
        return tv.wrap(out, like=inpt)
    return run


def register(functional, image=None, video=None, pil=None, **others):
    """Record ``functional``'s kernels by input type (``others``: tv_tensor class name ->
    kernel receiving the tv_tensor itself)."""
    table = {}
    if image is not None:
        table[fiamma.Tensor] = image
        table[tv.Image] = _wrapping(image)
    if video is not None:
        table[tv.Video] = _wrapping(video)
    if pil is not None:
        table[PILImage.Image] = pil
    for name, kernel in others.items():
        table[getattr(tv, name)] = kernel
    functional._kernels = table
    return functional


def get_kernel(functional, inpt, passthrough=False):
    """The kernel ``functional`` uses for ``inpt``'s type (walking the MRO; tv_tensor
    subclasses never fall back to the plain-tensor kernel). Without one: the identity when
    ``passthrough`` (what the v2 transforms do), else ``TypeError``."""
    table = functional._kernels
    for cls in type(inpt).__mro__:
        if cls in table:
            return table[cls]
        if cls is tv.TVTensor:
            break
    if passthrough:
        return lambda x, *args, **kwargs: x
    names = ", ".join(sorted(c.__name__ for c in table))
    raise TypeError(f"{functional.__name__}: supports inputs of type {names}, but got "
                    f"{type(inpt).__name__}")


def _call(functional, inpt, *args, **kwargs):
    return get_kernel(functional, inpt)(inpt, *args, **kwargs)


def _check_image(image, op):
    if not isinstance(image, fiamma.Tensor):
        raise TypeError(f"{op}: expected a tensor, got {type(image).__name__}")
    if image.ndim < 3:
        raise TypeError(f"{op}: expected an image tensor (..., C, H, W), got shape "
                        f"{tuple(image.shape)}")


def _channels(image, allowed, op):
    c = int(image.shape[-3])
    if c not in allowed:
        raise TypeError(f"{op}: input image tensor permitted channel values are {allowed}, "
                        f"but found {c}")


def _max_value(dtype):
    return FT.max_value(dtype)


# ---------------------------------------------------------------------------- invert

def invert_image(image):
    """Invert intensities: ``1 - x`` for floats, all value bits flipped for integers."""
    _check_image(image, "invert")
    if image.is_floating_point():
        return 1.0 - image
    if image.dtype == fiamma.uint8:
        return fiamma.bitwise_not(image)
    if image.dtype not in _VALUE_BITS:
        raise TypeError(f"invert: unsupported image dtype {image.dtype}")
    return fiamma.bitwise_xor(image, (1 << _VALUE_BITS[image.dtype]) - 1)


invert_video = invert_image


def invert(inpt):
    """Invert the colours of an image or video (see :class:`~..v2.RandomInvert`).

        >>> import fiamma
        >>> invert(fiamma.tensor([[[0.25, 1.0]]])).tolist()
        [[[0.75, 0.0]]]
    """
    return _call(invert, inpt)


register(invert, invert_image, invert_video, F1.invert)


# ---------------------------------------------------------------------------- posterize

def posterize_image(image, bits):
    """Keep the ``bits`` most significant bits of each value (floats: ``2**bits`` levels)."""
    _check_image(image, "posterize")
    if isinstance(bits, bool) or not isinstance(bits, int) or not 0 <= bits <= 8:
        raise TypeError(f"posterize: bits must be a positive integer in the range [0, 8], "
                        f"got {bits} instead.")
    if image.is_floating_point():
        levels = 1 << bits
        return image.mul(levels).floor_().clamp_(0, levels - 1).mul_(1.0 / levels)
    nbits = _VALUE_BITS.get(image.dtype)
    if nbits is None:
        raise TypeError(f"posterize: unsupported image dtype {image.dtype}")
    if bits >= nbits:
        return image
    return fiamma.bitwise_and(image, ((1 << bits) - 1) << (nbits - bits))


posterize_video = posterize_image


def posterize(inpt, bits):
    """Reduce each channel to ``bits`` bits.

        >>> import fiamma
        >>> posterize(fiamma.tensor([[[255, 100]]], dtype=fiamma.uint8), 2).tolist()
        [[[192, 64]]]
    """
    return _call(posterize, inpt, bits)


register(posterize, posterize_image, posterize_video, F1.posterize)


# ---------------------------------------------------------------------------- solarize

def solarize_image(image, threshold):
    """Invert the values at or above ``threshold``."""
    _check_image(image, "solarize")
    if threshold > _max_value(image.dtype):
        raise TypeError(f"solarize: threshold should be less or equal the maximum value of "
                        f"the dtype, but got {threshold}")
    return fiamma.where(image >= threshold, invert_image(image), image)


solarize_video = solarize_image


def solarize(inpt, threshold):
    """Invert all values ``>= threshold``.

        >>> import fiamma
        >>> solarize(fiamma.tensor([[[10, 200]]], dtype=fiamma.uint8), 128).tolist()
        [[[10, 55]]]
    """
    return _call(solarize, inpt, threshold)


register(solarize, solarize_image, solarize_video, F1.solarize)


# ---------------------------------------------------------------------------- autocontrast

def autocontrast_image(image):
    """Stretch each channel to the full range: (x - min) / ((max - min) / bound)."""
    _check_image(image, "autocontrast")
    _channels(image, (1, 3), "autocontrast")
    if image.numel() == 0:
        return image
    bound = _max_value(image.dtype)
    fp = image.is_floating_point()
    x = image if fp else image.to(fiamma.float32)
    lo = x.amin(dim=(-2, -1), keepdim=True)
    hi = x.amax(dim=(-2, -1), keepdim=True)
    same = hi == lo
    inv_scale = (hi - lo).mul_(1.0 / bound)
    lo = fiamma.where(same, fiamma.zeros_like(lo), lo)
    inv_scale = fiamma.where(same, fiamma.ones_like(inv_scale), inv_scale)
    return (x - lo).div_(inv_scale).clamp_(0, bound).to(image.dtype)


autocontrast_video = autocontrast_image


def autocontrast(inpt):
    """Maximise each channel's contrast (its min maps to 0, its max to the dtype's bound).

        >>> import fiamma
        >>> autocontrast(fiamma.tensor([[[0.25, 0.5, 0.75]]])).tolist()
        [[[0.0, 0.5, 1.0]]]
    """
    return _call(autocontrast, inpt)


register(autocontrast, autocontrast_image, autocontrast_video, F1.autocontrast)


# ---------------------------------------------------------------------------- equalize

def equalize_image(image):
    """Histogram equalisation per channel (PIL's algorithm); non-uint8 images are converted
    to uint8 for the histogram and back (with scaling)."""
    _check_image(image, "equalize")
    if image.numel() == 0:
        return image
    dtype = image.dtype
    u8 = FT.convert_image_dtype(image, fiamma.uint8)
    h, w = u8.shape[-2:]
    out = FT.equalize(u8.reshape(-1, 1, h, w)).reshape(tuple(image.shape))
    return FT.convert_image_dtype(out, dtype)


equalize_video = equalize_image


def equalize(inpt):
    """Equalise the histogram of an image or video.

        >>> import fiamma
        >>> img = fiamma.tensor([0] * 300 + [10] * 300, dtype=fiamma.uint8).reshape(1, 20, 30)
        >>> equalize(img).flatten()[[0, -1]].tolist()
        [0, 255]
    """
    return _call(equalize, inpt)


register(equalize, equalize_image, equalize_video, F1.equalize)


# ---------------------------------------------------------------------------- sharpness

def adjust_sharpness_image(image, sharpness_factor):
    """Blend with a smoothed copy (3x3 kernel 1/13, centre 5/13; the border pixels kept):
    0 blurs, 1 keeps, 2 sharpens."""
    _check_image(image, "adjust_sharpness")
    _channels(image, (1, 3), "adjust_sharpness")
    if sharpness_factor < 0:
        raise ValueError(f"adjust_sharpness: sharpness_factor ({sharpness_factor}) is not "
                         f"non-negative.")
    h, w = int(image.shape[-2]), int(image.shape[-1])
    if image.numel() == 0 or h <= 2 or w <= 2:
        return image
    bound = _max_value(image.dtype)
    fp = image.is_floating_point()
    out = image.clone() if fp else image.to(fiamma.float32)
    blur = None
    for dy in range(3):
        for dx in range(3):
            part = out[..., dy:dy + h - 2, dx:dx + w - 2]
            blur = part.clone() if blur is None else blur.add_(part)
    inner = out[..., 1:-1, 1:-1]
    blur = blur.add_(inner * 4.0).div_(13.0)
    if not fp:
        blur = blur.round_()
    # inner + (blur - inner) * (1 - factor) with one rounding, as the fused multiply-add of
    # torchvision's add_(..., alpha=) does (float64 holds the float32 product exactly), so
    # integer results truncate the same way
    alpha = float(np.float32(1.0 - sharpness_factor))
    mixed = inner.to(fiamma.float64) + (blur - inner).to(fiamma.float64) * alpha
    out[..., 1:-1, 1:-1] = mixed.to(out.dtype)
    out = out.clamp_(0, bound)
    return out if fp else out.to(image.dtype)


adjust_sharpness_video = adjust_sharpness_image


def adjust_sharpness(inpt, sharpness_factor):
    """Adjust the sharpness (0: blurred, 1: unchanged, 2: twice as sharp).

        >>> import fiamma
        >>> img = fiamma.zeros(1, 3, 3); img[0, 1, 1] = 1.0
        >>> round(adjust_sharpness(img, 0.0)[0, 1, 1].item(), 4)
        0.3846
    """
    return _call(adjust_sharpness, inpt, sharpness_factor)


register(adjust_sharpness, adjust_sharpness_image, adjust_sharpness_video,
         F1.adjust_sharpness)


# ---------------------------------------------------------------------------- gamma

def adjust_gamma_image(image, gamma, gain=1.0):
    """``gain * x ** gamma`` on [0, 1] intensities (integers are scaled there and back)."""
    _check_image(image, "adjust_gamma")
    if gamma < 0:
        raise ValueError("adjust_gamma: gamma should be a non-negative real number")
    if image.is_floating_point():
        out = image.pow(gamma)
    else:
        out = FT.convert_image_dtype(image, fiamma.float32).pow_(gamma)
    if gain != 1.0:
        out = out.mul_(gain).clamp_(0.0, 1.0)
    return FT.convert_image_dtype(out, image.dtype)


adjust_gamma_video = adjust_gamma_image


def adjust_gamma(inpt, gamma, gain=1):
    """Gamma correction.

        >>> import fiamma
        >>> adjust_gamma(fiamma.tensor([[[0.25, 1.0]]]), 0.5).tolist()
        [[[0.5, 1.0]]]
    """
    return _call(adjust_gamma, inpt, gamma, gain)


register(adjust_gamma, adjust_gamma_image, adjust_gamma_video, F1.adjust_gamma)


# ---------------------------------------------------------------------------- channels

def rgb_to_grayscale_image(image, num_output_channels=1):
    """Luma ``0.2989 R + 0.587 G + 0.114 B`` in the image's dtype (1 or 3 channels out)."""
    if num_output_channels not in (1, 3):
        raise ValueError(f"rgb_to_grayscale: num_output_channels must be 1 or 3, got "
                         f"{num_output_channels}.")
    _check_image(image, "rgb_to_grayscale")
    return FT.rgb_to_grayscale(image, num_output_channels)


def grayscale_to_rgb_image(image):
    """A 1-channel image repeated to 3 channels; images with 3 or more channels unchanged."""
    _check_image(image, "grayscale_to_rgb")
    if image.shape[-3] >= 3:
        return image
    _channels(image, (1,), "grayscale_to_rgb")
    return FT.rgb_to_grayscale(image, 3)


def grayscale_to_rgb(inpt):
    """Convert to RGB (see :class:`~..v2.RGB`); PIL images through ``convert("RGB")``.

        >>> import fiamma
        >>> tuple(grayscale_to_rgb(fiamma.zeros(1, 2, 2)).shape)
        (3, 2, 2)
    """
    return _call(grayscale_to_rgb, inpt)


# no video kernel: torchvision 0.28 has none either (videos raise, and RGB() passes them)
register(grayscale_to_rgb, grayscale_to_rgb_image, pil=lambda img: img.convert(mode="RGB"))


def permute_channels_image(image, permutation):
    """Channel ``permutation[i]`` of the input becomes channel ``i`` of the output."""
    _check_image(image, "permute_channels")
    permutation = [int(p) for p in (permutation.tolist() if isinstance(permutation,
                                                                       fiamma.Tensor)
                                    else permutation)]
    c = int(image.shape[-3])
    if len(permutation) != c:
        raise ValueError(f"permute_channels: length of permutation does not match number of "
                         f"channels: {len(permutation)} != {c}")
    if any(not -c <= p < c for p in permutation):
        raise IndexError(f"permute_channels: permutation {permutation} indexes outside the "
                         f"{c} channels")
    if image.numel() == 0:
        return image
    return image[..., permutation, :, :]


permute_channels_video = permute_channels_image


def _permute_channels_pil(image, permutation):
    t = F1.pil_to_tensor(image)
    return F1.to_pil_image(permute_channels_image(t, permutation), mode=image.mode)


def permute_channels(inpt, permutation):
    """Reorder the channels: output channel ``i`` is input channel ``permutation[i]``.

        >>> import fiamma
        >>> x = fiamma.arange(3.).reshape(3, 1, 1)
        >>> permute_channels(x, [2, 0, 1]).flatten().tolist()
        [2.0, 0.0, 1.0]
    """
    return _call(permute_channels, inpt, permutation)


register(permute_channels, permute_channels_image, permute_channels_video,
         _permute_channels_pil)


# ---------------------------------------------------------------------------- noise, jpeg

def gaussian_noise_image(image, mean=0.0, sigma=0.1, clip=True):
    """Add N(mean, sigma) noise in [0, 1] units (uint8: scaled by 255, added in int16);
    ``clip`` clamps to the dtype's range."""
    _check_image(image, "gaussian_noise")
    if sigma < 0:
        raise ValueError(f"gaussian_noise: sigma shouldn't be negative. Got {sigma}")
    if image.is_floating_point():
        out = image + (fiamma.randn_like(image) * sigma + mean)
        return out.clamp_(0, 1) if clip else out
    if image.dtype == fiamma.uint8:
        noise = (fiamma.randn(tuple(image.shape), dtype=fiamma.float32) * (sigma * 255)
                 + mean * 255).to(fiamma.int16)
        out = image.to(fiamma.int16) + noise
        if clip:
            out = out.clamp_(0, 255)
        return out.to(fiamma.uint8)
    raise ValueError(f"gaussian_noise: input tensor is expected to be in uint8 or float "
                     f"dtype, got dtype={image.dtype}")


gaussian_noise_video = gaussian_noise_image


def _gaussian_noise_pil(image, mean=0.0, sigma=0.1, clip=True):
    raise ValueError("gaussian_noise: Gaussian Noise is not implemented for PIL images.")


def gaussian_noise(inpt, mean=0.0, sigma=0.1, clip=True):
    """Add Gaussian noise to a float [0, 1] or uint8 image or video (fresh noise per call).

        >>> import fiamma
        >>> out = gaussian_noise(fiamma.full((3, 4, 4), 0.5), sigma=0.0)
        >>> bool((out == 0.5).all())
        True
    """
    return _call(gaussian_noise, inpt, mean=mean, sigma=sigma, clip=clip)


register(gaussian_noise, gaussian_noise_image, gaussian_noise_video, _gaussian_noise_pil)


def _jpeg_pil(image, quality):
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=quality)
    buf.seek(0)
    out = PILImage.open(buf)
    out.load()
    return out


def jpeg_image(image, quality):
    """Encode each (C, H, W) uint8 image as JPEG at ``quality`` (1-100) and decode it."""
    _check_image(image, "jpeg")
    if isinstance(quality, bool) or not isinstance(quality, int) or not 1 <= quality <= 100:
        raise ValueError(f"jpeg: quality must be an integer from 1 to 100, got {quality!r}")
    if image.dtype != fiamma.uint8:
        raise TypeError(f"jpeg: input tensor must be uint8, got {image.dtype}")
    c = int(image.shape[-3])
    _channels(image, (1, 3), "jpeg")
    shape = tuple(image.shape)
    flat = image.reshape(-1, *shape[-3:])
    if flat.shape[0] == 0:
        return image.clone()
    arr = np.ascontiguousarray(flat.numpy().transpose(0, 2, 3, 1))
    outs = []
    for a in arr:
        pil = PILImage.fromarray(a[:, :, 0] if c == 1 else a, mode="L" if c == 1 else "RGB")
        dec = np.asarray(_jpeg_pil(pil, quality))
        outs.append(dec.reshape(shape[-2], shape[-1], c))
    out = np.stack(outs).transpose(0, 3, 1, 2)
    return fiamma.from_numpy(np.ascontiguousarray(out)).reshape(shape)


jpeg_video = jpeg_image


def jpeg(image, quality):
    """JPEG compression artefacts: encode at ``quality`` and decode (uint8 tensors, PIL
    images).

        >>> import fiamma
        >>> out = jpeg(fiamma.full((3, 8, 8), 128, dtype=fiamma.uint8), 90)
        >>> out.dtype, tuple(out.shape)
        (fiamma.uint8, (3, 8, 8))
    """
    return _call(jpeg, image, quality)


register(jpeg, jpeg_image, jpeg_video, _jpeg_pil)
