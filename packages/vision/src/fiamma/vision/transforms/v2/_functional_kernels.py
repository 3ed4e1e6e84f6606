"""torchvision's per-type kernels of the v2 geometry, colour and misc functionals, with its
signatures: ``*_image`` / ``*_video`` / ``*_mask`` take plain tensors; ``*_bounding_boxes``
take a plain ``(..., K)`` tensor plus ``format`` / ``canvas_size`` / ``clamping_mode`` and
``*_keypoints`` a plain ``(..., 2)`` tensor plus ``canvas_size``; the kernels that change
the canvas return ``(tensor, canvas_size)`` exactly where torchvision's do.

Each runs the dispatching functional of :mod:`..functional` on the input wrapped as the
matching tv_tensor, so kernels and functionals give the same numbers.

    >>> import fiamma
    >>> from fiamma.vision.transforms.v2 import functional as F
    >>> out, canvas = F.resize_bounding_boxes(fiamma.tensor([[1.0, 2.0, 3.0, 4.0]]),
    ...                                       canvas_size=(10, 10), size=[20, 30])
    >>> out.tolist(), canvas
    ([[3.0, 4.0, 9.0, 8.0]], (20, 30))
"""
import fiamma
from fiamma.vision import tv_tensors as tv
from fiamma.vision.transforms import functional as F1
from fiamma.vision.transforms.v2 import functional as F
from fiamma.vision.transforms.v2.functional import InterpolationMode

__all__ = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _boxes(fn, boxes, format, canvas_size, clamping_mode, returns_canvas, *args, **kwargs):
    """Run the functional ``fn`` on plain ``boxes`` as BoundingBoxes; unwrap the result."""
    shape = tuple(boxes.shape)
    b = tv.BoundingBoxes(F.to_pure_tensor(boxes).reshape(-1, shape[-1]), format=format,
                         canvas_size=canvas_size, clamping_mode=clamping_mode)
    out = fn(b, *args, **kwargs)
    t = out.as_subclass(fiamma.Tensor).reshape(shape)
    return (t, tuple(out.canvas_size)) if returns_canvas else t


def _points(fn, points, canvas_size, returns_canvas, *args, **kwargs):
    out = fn(tv.KeyPoints(F.to_pure_tensor(points), canvas_size=canvas_size), *args, **kwargs)
    t = out.as_subclass(fiamma.Tensor).reshape(tuple(points.shape))
    return (t, tuple(out.canvas_size)) if returns_canvas else t


def _mask(fn, mask, *args, **kwargs):
    return fn(tv.Mask(F.to_pure_tensor(mask)), *args, **kwargs).as_subclass(fiamma.Tensor)


def _image(fn, image, *args, **kwargs):
    return F.to_pure_tensor(fn(F.to_pure_tensor(image), *args, **kwargs))


def _any_canvas(top, left, height, width):
    # crop kernels get no canvas: any canvas holding the window does (the crop sets its own)
    return (max(int(top) + int(height), 1), max(int(left) + int(width), 1))


# ---------------------------------------------------------------------------- flips

@_export
def horizontal_flip_image(image):
    return _image(F.horizontal_flip, image)


@_export
def horizontal_flip_mask(mask):
    return _mask(F.horizontal_flip, mask)


@_export
def horizontal_flip_bounding_boxes(bounding_boxes, format, canvas_size):
    return _boxes(F.horizontal_flip, bounding_boxes, format, canvas_size, "soft", False)


@_export
def horizontal_flip_keypoints(keypoints, canvas_size):
    return _points(F.horizontal_flip, keypoints, canvas_size, False)


@_export
def vertical_flip_image(image):
    return _image(F.vertical_flip, image)


@_export
def vertical_flip_mask(mask):
    return _mask(F.vertical_flip, mask)


@_export
def vertical_flip_bounding_boxes(bounding_boxes, format, canvas_size):
    return _boxes(F.vertical_flip, bounding_boxes, format, canvas_size, "soft", False)


@_export
def vertical_flip_keypoints(keypoints, canvas_size):
    return _points(F.vertical_flip, keypoints, canvas_size, False)


# ---------------------------------------------------------------------------- resize, crop, pad

@_export
def resize_image(image, size, interpolation=InterpolationMode.BILINEAR, max_size=None,
                 antialias=True):
    return _image(F.resize, image, size, interpolation, max_size, antialias)


@_export
def resize_mask(mask, size, interpolation=InterpolationMode.BILINEAR, max_size=None):
    """Nearest resize (NEAREST_EXACT is kept; other modes become NEAREST, as torchvision)."""
    t = F.to_pure_tensor(mask)
    flat = t.ndim < 3
    mode = F1._interp(interpolation, "resize_mask")
    if mode not in (InterpolationMode.NEAREST, InterpolationMode.NEAREST_EXACT):
        mode = InterpolationMode.NEAREST
    out = F1.resize(t.unsqueeze(0) if flat else t, size, mode, max_size)
    return out[0] if flat else out


@_export
def resize_bounding_boxes(bounding_boxes, canvas_size, size, max_size=None,
                          format=tv.BoundingBoxFormat.XYXY, clamping_mode="soft"):
    return _boxes(F.resize, bounding_boxes, format, canvas_size, clamping_mode, True, size,
                  max_size=max_size)


@_export
def resize_keypoints(keypoints, size, canvas_size, max_size=None):
    return _points(F.resize, keypoints, canvas_size, True, size, max_size=max_size)


@_export
def crop_image(image, top, left, height, width):
    return _image(F.crop, image, top, left, height, width)


@_export
def crop_mask(mask, top, left, height, width):
    return _mask(F.crop, mask, top, left, height, width)


@_export
def crop_bounding_boxes(bounding_boxes, format, top, left, height, width, clamping_mode="soft"):
    return _boxes(F.crop, bounding_boxes, format, _any_canvas(top, left, height, width),
                  clamping_mode, True, top, left, height, width)


@_export
def crop_keypoints(keypoints, top, left, height, width):
    return _points(F.crop, keypoints, _any_canvas(top, left, height, width), True, top, left,
                   height, width)


@_export
def center_crop_image(image, output_size):
    return _image(F.center_crop, image, output_size)


@_export
def center_crop_mask(mask, output_size):
    return _mask(F.center_crop, mask, output_size)


@_export
def center_crop_bounding_boxes(bounding_boxes, format, canvas_size, output_size,
                               clamping_mode="soft"):
    return _boxes(F.center_crop, bounding_boxes, format, canvas_size, clamping_mode, True,
                  output_size)


@_export
def center_crop_keypoints(inpt, canvas_size, output_size):
    return _points(F.center_crop, inpt, canvas_size, True, output_size)


@_export
def resized_crop_image(image, top, left, height, width, size,
                       interpolation=InterpolationMode.BILINEAR, antialias=True):
    return _image(F.resized_crop, image, top, left, height, width, size, interpolation,
                  antialias=antialias)


@_export
def resized_crop_mask(mask, top, left, height, width, size):
    return _mask(F.resized_crop, mask, top, left, height, width, size)


@_export
def resized_crop_bounding_boxes(bounding_boxes, format, top, left, height, width, size,
                                clamping_mode="soft"):
    return _boxes(F.resized_crop, bounding_boxes, format, _any_canvas(top, left, height, width),
                  clamping_mode, True, top, left, height, width, size)


@_export
def resized_crop_keypoints(keypoints, top, left, height, width, size):
    return _points(F.resized_crop, keypoints, _any_canvas(top, left, height, width), True,
                   top, left, height, width, size)


@_export
def pad_image(image, padding, fill=None, padding_mode="constant"):
    return _image(F.pad, image, padding, 0 if fill is None else fill, padding_mode)


@_export
def pad_mask(mask, padding, fill=None, padding_mode="constant"):
    return _mask(F.pad, mask, padding, 0 if fill is None else fill, padding_mode)


@_export
def pad_bounding_boxes(bounding_boxes, format, canvas_size, padding, padding_mode="constant",
                       clamping_mode="soft"):
    return _boxes(F.pad, bounding_boxes, format, canvas_size, clamping_mode, True, padding,
                  padding_mode=padding_mode)


@_export
def pad_keypoints(keypoints, canvas_size, padding, padding_mode="constant"):
    return _points(F.pad, keypoints, canvas_size, True, padding, padding_mode=padding_mode)


# ---------------------------------------------------------------------------- affine family

@_export
def affine_image(image, angle, translate, scale, shear, interpolation=InterpolationMode.NEAREST,
                 fill=None, center=None):
    return _image(F.affine, image, angle, translate, scale, shear, interpolation, fill, center)


@_export
def affine_mask(mask, angle, translate, scale, shear, fill=None, center=None):
    return _mask(F.affine, mask, angle, translate, scale, shear, fill=fill, center=center)


@_export
def affine_bounding_boxes(bounding_boxes, format, canvas_size, angle, translate, scale, shear,
                          center=None, clamping_mode="soft"):
    return _boxes(F.affine, bounding_boxes, format, canvas_size, clamping_mode, False, angle,
                  translate, scale, shear, center=center)


@_export
def affine_keypoints(keypoints, canvas_size, angle, translate, scale, shear, center=None):
    return _points(F.affine, keypoints, canvas_size, True, angle, translate, scale, shear,
                   center=center)


@_export
def rotate_image(image, angle, interpolation=InterpolationMode.NEAREST, expand=False,
                 center=None, fill=None):
    return _image(F.rotate, image, angle, interpolation, expand, center, fill)


@_export
def rotate_mask(mask, angle, expand=False, center=None, fill=None):
    return _mask(F.rotate, mask, angle, expand=expand, center=center, fill=fill)


@_export
def rotate_bounding_boxes(bounding_boxes, format, canvas_size, angle, expand=False, center=None,
                          clamping_mode="soft"):
    return _boxes(F.rotate, bounding_boxes, format, canvas_size, clamping_mode, True, angle,
                  expand=expand, center=center)


@_export
def rotate_keypoints(keypoints, canvas_size, angle, expand=False, center=None):
    return _points(F.rotate, keypoints, canvas_size, True, angle, expand=expand, center=center)


@_export
def perspective_image(image, startpoints, endpoints, interpolation=InterpolationMode.BILINEAR,
                      fill=None, coefficients=None):
    return _image(F.perspective, image, startpoints, endpoints, interpolation, fill,
                  coefficients=coefficients)


@_export
def perspective_mask(mask, startpoints, endpoints, fill=None, coefficients=None):
    return _mask(F.perspective, mask, startpoints, endpoints, fill=fill,
                 coefficients=coefficients)


@_export
def perspective_bounding_boxes(bounding_boxes, format, canvas_size, startpoints, endpoints,
                               coefficients=None, clamping_mode="soft"):
    return _boxes(F.perspective, bounding_boxes, format, canvas_size, clamping_mode, False,
                  startpoints, endpoints, coefficients=coefficients)


@_export
def perspective_keypoints(keypoints, canvas_size, startpoints, endpoints, coefficients=None):
    return _points(F.perspective, keypoints, canvas_size, False, startpoints, endpoints,
                   coefficients=coefficients)


@_export
def elastic_image(image, displacement, interpolation=InterpolationMode.BILINEAR, fill=None):
    return _image(F.elastic, image, displacement, interpolation, fill)


@_export
def elastic_mask(mask, displacement, fill=None):
    return _mask(F.elastic, mask, displacement, fill=fill)


@_export
def elastic_bounding_boxes(bounding_boxes, format, canvas_size, displacement,
                           clamping_mode="soft"):
    return _boxes(F.elastic, bounding_boxes, format, canvas_size, clamping_mode, False,
                  displacement)


@_export
def elastic_keypoints(keypoints, canvas_size, displacement):
    return _points(F.elastic, keypoints, canvas_size, False, displacement)


# ---------------------------------------------------------------------------- colour, misc

@_export
def adjust_brightness_image(image, brightness_factor):
    return _image(F.adjust_brightness, image, brightness_factor)


@_export
def adjust_contrast_image(image, contrast_factor):
    return _image(F.adjust_contrast, image, contrast_factor)


@_export
def adjust_saturation_image(image, saturation_factor):
    return _image(F.adjust_saturation, image, saturation_factor)


@_export
def adjust_hue_image(image, hue_factor):
    return _image(F.adjust_hue, image, hue_factor)


@_export
def gaussian_blur_image(image, kernel_size, sigma=None):
    return _image(F.gaussian_blur, image, kernel_size, sigma)


@_export
def normalize_image(image, mean, std, inplace=False):
    return _image(F.normalize, image, mean, std, inplace)


@_export
def erase_image(image, i, j, h, w, v, inplace=False):
    return _image(F.erase, image, i, j, h, w, v, inplace)


@_export
def to_dtype_image(image, dtype=fiamma.float32, scale=False):
    return _image(F.to_dtype, image, dtype, scale)


def _video_kernel(name):
    image_kernel = globals()[f"{name}_image"]

    def kernel(video, *args, **kwargs):
        return image_kernel(video, *args, **kwargs)
    kernel.__name__ = kernel.__qualname__ = f"{name}_video"
    kernel.__doc__ = f"``{name}_image`` over a video's leading (..., T) dims."
    return kernel


# videos use the image kernels over their leading (..., T) dims
for _name in ("horizontal_flip", "vertical_flip", "resize", "crop", "center_crop",
              "resized_crop", "pad", "affine", "rotate", "perspective", "elastic",
              "adjust_brightness", "adjust_contrast", "adjust_saturation", "adjust_hue",
              "gaussian_blur", "normalize", "erase", "to_dtype"):
    globals()[f"{_name}_video"] = _export(_video_kernel(_name))
del _name
