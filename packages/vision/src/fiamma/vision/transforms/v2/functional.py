"""transforms.v2.functional: kernels that dispatch on what the input is (torchvision's names).

Images (``tv_tensors.Image``, plain tensors, PIL images) and videos go through the v1
image kernels; masks through the same kernels with nearest interpolation; bounding boxes and
keypoints have their own coordinate kernels (computed in float64, cast back to the input's
dtype; integer boxes are truncated toward zero). Rotated boxes (XYWHR, CXCYWHR, XYXYXYXY) move
by their corners, are refitted to a rectangle and clamped by their ``clamping_mode`` as in
torchvision 0.28 (see ``_rotated_boxes``). The output keeps the input's tv_tensor type and
metadata (``canvas_size`` updated).

    >>> from fiamma.vision import tv_tensors
    >>> from fiamma.vision.transforms.v2 import functional as F
    >>> b = tv_tensors.BoundingBoxes([[1, 2, 4, 6]], format="XYXY", canvas_size=(10, 10))
    >>> F.horizontal_flip(b).tolist()
    [[6, 2, 9, 6]]
"""
import numbers

import numpy as np
from PIL import Image as PILImage

import fiamma
from fiamma.vision import tv_tensors as tv
from fiamma.vision.transforms import _functional_tensor as FT, functional as F1
from fiamma.vision.transforms.functional import InterpolationMode
from fiamma.vision.transforms.v2 import _kernel_registry, _rotated_boxes as R
from fiamma.vision.transforms.v2._kernel_registry import register_kernel

__all__ = [
    "InterpolationMode", "get_size", "get_dimensions", "horizontal_flip", "vertical_flip",
    "hflip", "vflip", "resize", "crop", "center_crop", "resized_crop", "pad", "affine",
    "rotate", "perspective", "convert_bounding_box_format", "clamp_bounding_boxes", "to_image",
    "to_pure_tensor", "to_dtype", "normalize", "adjust_brightness", "adjust_contrast",
    "adjust_saturation", "adjust_hue", "rgb_to_grayscale", "to_grayscale", "gaussian_blur",
    "erase", "pil_to_tensor", "to_pil_image", "convert_image_dtype", "elastic",
    "elastic_transform", "register_kernel",
]

BBF = tv.BoundingBoxFormat
pil_to_tensor = F1.pil_to_tensor
to_pil_image = F1.to_pil_image

# torchvision's further functionals and their per-type kernels live in their own modules
# (they use this module's names only when called, so they can be imported here)
from fiamma.vision.transforms.v2 import (  # noqa: E402
    _functional_color,
    _functional_kernels,
    _functional_misc,
)
from fiamma.vision.transforms.v2._functional_color import *  # noqa: E402,F401,F403
from fiamma.vision.transforms.v2._functional_kernels import *  # noqa: E402,F401,F403
from fiamma.vision.transforms.v2._functional_misc import *  # noqa: E402,F401,F403

__all__ += _functional_color.__all__ + _functional_misc.__all__ + _functional_kernels.__all__
# of these, the per-type kernels and helpers are plain functions (torchvision's are), not
# functionals that dispatch on the input's type
_PLAIN_FUNCTIONS = frozenset(_functional_kernels.__all__ + _functional_color.PLAIN
                             + _functional_misc.PLAIN)


def _kind(x):
    if isinstance(x, tv.BoundingBoxes):
        return "boxes"
    if isinstance(x, tv.KeyPoints):
        return "keypoints"
    if isinstance(x, tv.Mask):
        return "mask"
    if isinstance(x, (fiamma.Tensor, PILImage.Image)):
        return "image"          # Image, Video, plain tensors and PIL images
    raise TypeError(f"expected a tensor, a tv_tensor or a PIL image, got {type(x).__name__}")


def _rewrap(out, like, **meta):
    if isinstance(like, tv.TVTensor):
        if isinstance(out, tv.TVTensor):
            out = out.as_subclass(fiamma.Tensor)
        return tv.wrap(out, like=like, **meta)
    return out


def _pure(x):
    return x.as_subclass(fiamma.Tensor) if isinstance(x, tv.TVTensor) else x


def _image_op(x, fn):
    """Apply the v1 kernel ``fn`` to an image-like input and re-wrap the result."""
    return _rewrap(fn(_pure(x)), x)


def _mask_op(x, fn):
    t = _pure(x)
    flat = t.ndim == 2
    out = fn(t.unsqueeze(0) if flat else t)
    return _rewrap(out[0] if flat else out, x)


# ---------------------------------------------------------------------------- sizes

def get_dimensions(inpt):
    """[channels, height, width] of an image or video."""
    return F1.get_dimensions(_pure(inpt))


def get_size(inpt):
    """[height, width] of any input (the canvas of boxes and keypoints)."""
    k = _kind(inpt)
    if k in ("boxes", "keypoints"):
        return list(inpt.canvas_size)
    if isinstance(inpt, PILImage.Image):
        return [inpt.height, inpt.width]
    if inpt.ndim < 2:
        raise TypeError(f"get_size: expected a tensor with at least 2 dims, got "
                        f"{tuple(inpt.shape)}")
    return [int(inpt.shape[-2]), int(inpt.shape[-1])]


# ---------------------------------------------------------------------------- box helpers

def _np(t):
    return np.asarray(_pure(t).detach().numpy(), dtype=np.float64)


_rotated = tv.is_rotated_bounding_format
def _to_xyxy(a, fmt):
    if fmt == BBF.XYXY:
        return a.copy()
    if fmt == BBF.XYWH:
        return np.concatenate([a[:, :2], a[:, :2] + a[:, 2:]], axis=1)
    cx, cy, w, h = a.T
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)


def _from_xyxy(a, fmt):
    if fmt == BBF.XYXY:
        return a
    if fmt == BBF.XYWH:
        return np.concatenate([a[:, :2], a[:, 2:] - a[:, :2]], axis=1)
    x1, y1, x2, y2 = a.T
    return np.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], axis=1)


def _back(a, like):
    dt = like.dtype
    if not dt.is_floating_point:
        a = np.trunc(a)
    return fiamma.from_numpy(np.ascontiguousarray(a)).to(dt)


def _clamp_xyxy(a, canvas):
    h, w = canvas
    a[:, 0::2] = np.clip(a[:, 0::2], 0, w)
    a[:, 1::2] = np.clip(a[:, 1::2], 0, h)
    return a


def _box_op(boxes, op, fn, clamp=True):
    """``fn(xyxy float64 array, canvas) -> (array, new_canvas)`` on axis-aligned
    BoundingBoxes."""
    a = _to_xyxy(_np(boxes).reshape(-1, 4), boxes.format)
    a, canvas = fn(a, tuple(boxes.canvas_size))
    if clamp and boxes.clamping_mode is not None:
        a = _clamp_xyxy(a, canvas)
    a = _from_xyxy(a, boxes.format)
    return tv.wrap(_back(a.reshape(tuple(boxes.shape)), boxes), like=boxes,
                   canvas_size=tuple(int(v) for v in canvas))


def _rot_box_op(boxes, fn, clamp=True):
    """``fn(float64 (N, K) array in the boxes' rotated format, format, canvas) -> (array,
    its rotated format, new canvas)`` on rotated BoundingBoxes; the result is clamped in its
    format by the boxes' clamping_mode and converted back."""
    fmt = boxes.format
    a, out_fmt, canvas = fn(_np(boxes).reshape(-1, R.WIDTH[fmt]), fmt,
                            tuple(boxes.canvas_size))
    if clamp:
        a = R.clamp(a, out_fmt, canvas, boxes.clamping_mode)
    a = R.convert(a, out_fmt, fmt)
    return tv.wrap(_back(a.reshape(tuple(boxes.shape)), boxes), like=boxes,
                   canvas_size=tuple(int(v) for v in canvas))


def _rot_corner_op(boxes, fn):
    """``fn(corner points (4N, 2), canvas) -> (points, new canvas)`` on rotated boxes: the
    moved corners are refitted to a rectangle, clamped and converted back."""
    def go(a, fmt, c):
        pts, c = fn(R.convert(a, fmt, BBF.XYXYXYXY).reshape(-1, 2), c)
        return R.parallelogram_to_rectangle(pts.reshape(-1, 8)), BBF.XYXYXYXY, c
    return _rot_box_op(boxes, go)


def _shift_rotated(a, fmt, dx, dy):
    a = a.copy()
    if fmt == BBF.XYXYXYXY:
        a[:, 0::2] += dx
        a[:, 1::2] += dy
    else:
        a[:, 0] += dx
        a[:, 1] += dy
    return a


def _kp_op(kp, fn):
    a = _np(kp).reshape(-1, 2)
    a, canvas = fn(a, tuple(kp.canvas_size))
    return tv.wrap(_back(a.reshape(tuple(kp.shape)), kp), like=kp,
                   canvas_size=tuple(int(v) for v in canvas))


def convert_bounding_box_format(inpt, old_format=None, new_format=None, inplace=False):
    """Boxes from ``old_format`` (default: the BoundingBoxes' own) to ``new_format``."""
    if new_format is None:
        raise TypeError("convert_bounding_box_format: missing required argument new_format")
    new_format = tv._parse_format(new_format)
    if isinstance(inpt, tv.BoundingBoxes):
        if old_format is not None:
            raise ValueError("convert_bounding_box_format: old_format must not be given for "
                             "BoundingBoxes (they carry their format)")
        old = inpt.format
    else:
        if old_format is None:
            raise ValueError("convert_bounding_box_format: old_format is required for plain "
                             "tensors")
        old = tv._parse_format(old_format)
    if _rotated(old) != _rotated(new_format):
        raise ValueError(f"convert_bounding_box_format: cannot convert between rotated and "
                         f"unrotated bounding boxes ({old.name} to {new_format.name})")
    if _rotated(old):
        a = R.convert(_np(inpt).reshape(-1, R.WIDTH[old]), old, new_format)
        shape = tuple(inpt.shape[:-1]) + (R.WIDTH[new_format],)
        out = _back(a.reshape(shape), inpt)
        return tv.wrap(out, like=inpt, format=new_format) \
            if isinstance(inpt, tv.BoundingBoxes) else out
    a = _from_xyxy(_to_xyxy(_np(inpt).reshape(-1, 4), old), new_format)
    out = _back(a.reshape(tuple(inpt.shape)), inpt)
    if isinstance(inpt, tv.BoundingBoxes):
        return tv.wrap(out, like=inpt, format=new_format)
    return out


def clamp_bounding_boxes(inpt, format=None, canvas_size=None, clamping_mode="auto"):
    """Clamp boxes into their canvas (x in [0, W], y in [0, H]). ``clamping_mode`` "auto"
    takes the BoundingBoxes' own (for a plain tensor: "soft"); "soft" and "hard" are the same
    for axis-aligned boxes; rotated boxes keep their angle ("soft": the smallest box enclosing
    the part inside the canvas, "hard": the largest box inside it); None leaves them as they
    are.

        >>> from fiamma.vision import tv_tensors
        >>> b = tv_tensors.BoundingBoxes([[5.0, 5.0, 4.0, 20.0, 0.0]], format="CXCYWHR",
        ...                              canvas_size=(10, 10))
        >>> clamp_bounding_boxes(b).tolist()
        [[5.0, 5.0, 4.0, 10.0, 0.0]]
    """
    if clamping_mode not in ("soft", "hard", "auto", None):
        raise ValueError(f"clamp_bounding_boxes: clamping_mode must be soft, hard, auto or "
                         f"None, got {clamping_mode!r}")
    if isinstance(inpt, tv.BoundingBoxes):
        if format is not None or canvas_size is not None:
            raise ValueError("clamp_bounding_boxes: format and canvas_size must not be given "
                             "for BoundingBoxes")
        if clamping_mode != "auto":
            inpt = tv.wrap(_pure(inpt), like=inpt, clamping_mode=clamping_mode)
        if inpt.clamping_mode is None:
            return inpt.clone()
        if _rotated(inpt.format):
            return _rot_box_op(inpt, lambda a, f, c: (a, f, c))
        return _box_op(inpt, "clamp_bounding_boxes", lambda a, c: (a, c))
    if format is None or canvas_size is None:
        raise ValueError("clamp_bounding_boxes: format and canvas_size are required for plain "
                         "tensors")
    b = tv.BoundingBoxes(inpt, format=format, canvas_size=canvas_size,
                         clamping_mode="soft" if clamping_mode == "auto" else clamping_mode)
    return _pure(clamp_bounding_boxes(b))


# ---------------------------------------------------------------------------- geometry

def horizontal_flip(inpt):
    """Mirror left-right."""
    k = _kind(inpt)
    if k == "boxes" and _rotated(inpt.format):
        return _rot_box_op(inpt, lambda a, f, c: (R.horizontal_flip(a, f, c), f, c), False)
    if k == "boxes":
        def fn(a, c):
            w = c[1]
            return np.stack([w - a[:, 2], a[:, 1], w - a[:, 0], a[:, 3]], axis=1), c
        return _box_op(inpt, "horizontal_flip", fn, clamp=False)
    if k == "keypoints":
        # keypoints are pixel positions: x -> W - 1 - x (torchvision's convention)
        return _kp_op(inpt, lambda a, c: (np.stack([c[1] - 1 - a[:, 0], a[:, 1]], axis=1), c))
    if k == "mask":
        return _mask_op(inpt, F1.hflip)
    return _image_op(inpt, F1.hflip)


def vertical_flip(inpt):
    """Mirror top-bottom."""
    k = _kind(inpt)
    if k == "boxes" and _rotated(inpt.format):
        return _rot_box_op(inpt, lambda a, f, c: (R.vertical_flip(a, f, c), f, c), False)
    if k == "boxes":
        def fn(a, c):
            h = c[0]
            return np.stack([a[:, 0], h - a[:, 3], a[:, 2], h - a[:, 1]], axis=1), c
        return _box_op(inpt, "vertical_flip", fn, clamp=False)
    if k == "keypoints":
        return _kp_op(inpt, lambda a, c: (np.stack([a[:, 0], c[0] - 1 - a[:, 1]], axis=1), c))
    if k == "mask":
        return _mask_op(inpt, F1.vflip)
    return _image_op(inpt, F1.vflip)


hflip = horizontal_flip
vflip = vertical_flip


def resize(inpt, size, interpolation=InterpolationMode.BILINEAR, max_size=None,
           antialias=True):
    """Resize to ``size`` (h, w), or the shorter side to ``size`` (int / 1-sequence)."""
    k = _kind(inpt)
    if k in ("boxes", "keypoints"):
        h, w = inpt.canvas_size
        nh, nw = F1._resized_size(h, w, size, max_size)
        sx, sy = nw / w, nh / h
        if k == "boxes" and _rotated(inpt.format):
            if (nh, nw) == (h, w):
                return inpt.clone()
            return _rot_corner_op(inpt, lambda p, c: (p * [sx, sy], (nh, nw)))
        if k == "boxes":
            return _box_op(inpt, "resize", lambda a, c: (a * [sx, sy, sx, sy], (nh, nw)),
                           clamp=False)
        return _kp_op(inpt, lambda a, c: (a * [sx, sy], (nh, nw)))
    if k == "mask":
        return _mask_op(inpt, lambda t: F1.resize(t, size, InterpolationMode.NEAREST, max_size))
    return _image_op(inpt, lambda t: F1.resize(t, size, interpolation, max_size, antialias))


def crop(inpt, top, left, height, width):
    """Crop the window (top, left, height, width); outside the image is zero."""
    k = _kind(inpt)
    if k == "boxes" and _rotated(inpt.format):
        def fn(a, f, c):
            a = _shift_rotated(a, f, -left, -top)
            if f == BBF.XYXYXYXY:
                a = R.parallelogram_to_rectangle(a)
            return a, f, (height, width)
        return _rot_box_op(inpt, fn)
    if k == "boxes":
        return _box_op(inpt, "crop",
                       lambda a, c: (a - [left, top, left, top], (height, width)))
    if k == "keypoints":
        return _kp_op(inpt, lambda a, c: (a - [left, top], (height, width)))
    fn = lambda t: F1.crop(t, top, left, height, width)  # noqa: E731
    return _mask_op(inpt, fn) if k == "mask" else _image_op(inpt, fn)


def center_crop(inpt, output_size):
    """Crop the centre ``output_size`` (padding with zeros where it exceeds the input).

    Boxes and keypoints move with the image's padding ((crop - size) // 2 on the left/top);
    torchvision 0.28 shifts them by round((crop - size) / 2) instead, one pixel off the image
    when that difference is odd."""
    ch, cw = F1._size2(output_size, "center_crop")
    h, w = get_size(inpt)
    if _kind(inpt) in ("boxes", "keypoints"):
        # one crop at the image's offsets (a negative offset is the padding), so that boxes
        # are clamped once, to the output canvas
        top = -((ch - h) // 2) if ch > h else int(round((h - ch) / 2.0))
        left = -((cw - w) // 2) if cw > w else int(round((w - cw) / 2.0))
        return crop(inpt, top, left, ch, cw)
    if cw > w or ch > h:
        ltrb = [(cw - w) // 2 if cw > w else 0, (ch - h) // 2 if ch > h else 0,
                (cw - w + 1) // 2 if cw > w else 0, (ch - h + 1) // 2 if ch > h else 0]
        inpt = pad(inpt, ltrb, fill=0)
        h, w = get_size(inpt)
        if cw == w and ch == h:
            return inpt
    return crop(inpt, int(round((h - ch) / 2.0)), int(round((w - cw) / 2.0)), ch, cw)


def resized_crop(inpt, top, left, height, width, size, interpolation=InterpolationMode.BILINEAR,
                 antialias=True):
    """crop then resize."""
    return resize(crop(inpt, top, left, height, width), size, interpolation,
                  antialias=antialias)


def pad(inpt, padding, fill=0, padding_mode="constant"):
    """Pad by an int, (left/right, top/bottom) or (left, top, right, bottom)."""
    k = _kind(inpt)
    if k in ("boxes", "keypoints"):
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError(f"pad: padding_mode should be constant, edge, reflect or "
                             f"symmetric, got {padding_mode!r}")
        left, top, right, bottom = F1._ltrb(padding, "pad")

        def canvas(c):
            return (c[0] + top + bottom, c[1] + left + right)
        if k == "boxes" and _rotated(inpt.format):
            return _rot_box_op(inpt, lambda a, f, c: (_shift_rotated(a, f, left, top), f,
                                                      canvas(c)))
        if k == "boxes":
            return _box_op(inpt, "pad",
                           lambda a, c: (a + [left, top, left, top], canvas(c)))
        return _kp_op(inpt, lambda a, c: (a + [left, top], canvas(c)))
    if k == "mask":
        f = 0 if fill is None else fill
        return _mask_op(inpt, lambda t: F1.pad(t, padding, f, padding_mode))
    if isinstance(fill, (list, tuple)) and len(fill) > 1 and isinstance(inpt, fiamma.Tensor):
        return _image_op(inpt, lambda t: _pad_per_channel(t, padding, fill, padding_mode))
    return _image_op(inpt, lambda t: F1.pad(t, padding, fill, padding_mode))


def _pad_per_channel(t, padding, fill, padding_mode):
    """Constant padding of a tensor image with one fill value per channel (v2 only)."""
    if padding_mode != "constant":
        raise ValueError(f"pad: padding_mode {padding_mode!r} is not supported if fill is not "
                         f"a scalar")
    c = t.shape[-3] if t.ndim >= 3 else 1
    if len(fill) != c:
        raise ValueError(f"pad: fill has {len(fill)} values, the image {c} channels")
    left, top, right, bottom = F1._ltrb(padding, "pad")
    out = F1.pad(t, padding, 0, "constant")
    value = fiamma.tensor([float(v) for v in fill]).to(t.dtype).reshape(-1, 1, 1)
    h, w = out.shape[-2:]
    inside = fiamma.zeros(h, w, dtype=fiamma.bool)
    inside[max(top, 0):h - max(bottom, 0), max(left, 0):w - max(right, 0)] = True
    return fiamma.where(inside, out, value)


def _norm_shear(shear):
    if isinstance(shear, numbers.Number):
        return [float(shear), 0.0]
    shear = [float(s) for s in shear]
    return [shear[0], shear[0]] if len(shear) == 1 else shear


def _forward_affine(center, angle, translate, scale, shear):
    inv = F1._inverse_affine(center, angle, translate, scale, shear)
    m = np.array([inv[:3], inv[3:], [0.0, 0.0, 1.0]])
    return np.linalg.inv(m)


def _affine_points(a, c, angle, translate, scale, shear, center, expand):
    """Map (n, 2) points by the forward affine about ``center`` (default: canvas centre);
    with ``expand`` shift them onto the enlarged canvas the image kernel produces."""
    h, w = c
    ctr = [w * 0.5, h * 0.5] if center is None else [float(v) for v in center]
    m = _forward_affine(ctr, angle, [float(t) for t in translate], scale, shear)
    pts = a @ m[:2, :2].T + m[:2, 2]
    if expand:
        corners = np.array([[0, 0], [0, h], [w, h], [w, 0]], dtype=np.float64)
        mapped = corners @ m[:2, :2].T + m[:2, 2]
        pts = pts - mapped.min(axis=0)
        cf = [0.0, 0.0] if center is None else [v - s * 0.5 for v, s in zip(ctr, [w, h])]
        inv = F1._inverse_affine(cf, angle, [float(t) for t in translate], scale, shear)
        nw, nh = FT.affine_size(inv, w, h)
        c = (nh, nw)
    return pts, c


def _affine_boxes(boxes, op, angle, translate, scale, shear, center, expand):
    if _rotated(boxes.format):
        return _rot_corner_op(boxes, lambda p, c: _affine_points(p, c, angle, translate, scale,
                                                                 shear, center, expand))

    def fn(a, c):
        x1, y1, x2, y2 = a.T
        corners = np.stack([np.stack([x1, y1], 1), np.stack([x2, y1], 1),
                            np.stack([x2, y2], 1), np.stack([x1, y2], 1)], 1).reshape(-1, 2)
        pts, c = _affine_points(corners, c, angle, translate, scale, shear, center, expand)
        pts = pts.reshape(-1, 4, 2)
        return np.concatenate([pts.min(1), pts.max(1)], axis=1), c
    return _box_op(boxes, op, fn)


def affine(inpt, angle, translate, scale, shear, interpolation=InterpolationMode.NEAREST,
           fill=None, center=None):
    """Rotate by ``angle`` degrees (counter-clockwise positive in image terms), translate,
    scale and shear about ``center`` (default: the centre)."""
    k = _kind(inpt)
    if not isinstance(translate, (list, tuple)) or len(translate) != 2:
        raise TypeError(f"affine: translate should be a sequence of length 2, got {translate!r}")
    if scale <= 0.0:
        raise ValueError(f"affine: scale should be positive, got {scale}")
    shear = _norm_shear(shear)
    if k == "boxes":
        return _affine_boxes(inpt, "affine", angle, translate, scale, shear, center, False)
    if k == "keypoints":
        return _kp_op(inpt, lambda a, c: _affine_points(a, c, angle, translate, scale, shear,
                                                        center, False))
    if k == "mask":
        return _mask_op(inpt, lambda t: F1.affine(t, angle, list(translate), scale, shear,
                                                  InterpolationMode.NEAREST, fill, center))
    return _image_op(inpt, lambda t: F1.affine(t, angle, list(translate), scale, shear,
                                               interpolation, fill, center))


def rotate(inpt, angle, interpolation=InterpolationMode.NEAREST, expand=False, center=None,
           fill=None):
    """Rotate counter-clockwise by ``angle`` degrees; ``expand`` grows the canvas to hold it."""
    k = _kind(inpt)
    if k == "boxes":
        return _affine_boxes(inpt, "rotate", -angle, [0.0, 0.0], 1.0, [0.0, 0.0], center,
                             expand)
    if k == "keypoints":
        return _kp_op(inpt, lambda a, c: _affine_points(a, c, -angle, [0.0, 0.0], 1.0,
                                                        [0.0, 0.0], center, expand))
    if k == "mask":
        return _mask_op(inpt, lambda t: F1.rotate(t, angle, InterpolationMode.NEAREST, expand,
                                                  center, fill))
    return _image_op(inpt, lambda t: F1.rotate(t, angle, interpolation, expand, center, fill))


def _perspective_coefficients(startpoints, endpoints, coefficients):
    """The 8 coefficients of the map from output to input pixels: given ones (with no
    startpoints/endpoints pair), or those of the four point pairs (torchvision's rules)."""
    if coefficients is not None:
        if startpoints is not None and endpoints is not None:
            raise ValueError("perspective: The startpoints/endpoints and the coefficients "
                             "shouldn't be defined concurrently")
        if len(coefficients) != 8:
            raise ValueError(f"perspective: Argument coefficients should have 8 float values, "
                             f"got {len(coefficients)}")
        return [float(c) for c in coefficients]
    if startpoints is not None and endpoints is not None:
        return F1._perspective_coeffs(startpoints, endpoints)
    raise ValueError("perspective: Either the startpoints/endpoints or the coefficients must "
                     "have non `None` values")


def _perspective_points(a, coeffs, what):
    """Points (M, 2) moved by the inverse of the output->input map ``coeffs`` (so from input
    to output), the inverse taken as torchvision's (adjugate over c0 c4 - c1 c3)."""
    c = coeffs
    den = c[0] * c[4] - c[1] * c[3]
    if den == 0:
        raise RuntimeError(f"perspective: provided perspective coefficients {list(c)} can not "
                           f"be inverted to transform {what}: denominator c0*c4 - c1*c3 is "
                           f"zero")
    inv = [(c[4] - c[5] * c[7]) / den, (-c[1] + c[2] * c[7]) / den,
           (c[1] * c[5] - c[2] * c[4]) / den, (-c[3] + c[5] * c[6]) / den,
           (c[0] - c[2] * c[6]) / den, (-c[0] * c[5] + c[2] * c[3]) / den,
           (-c[4] * c[6] + c[3] * c[7]) / den, (-c[0] * c[7] + c[1] * c[6]) / den]
    d = inv[6] * a[:, 0] + inv[7] * a[:, 1] + 1.0
    return np.stack([(inv[0] * a[:, 0] + inv[1] * a[:, 1] + inv[2]) / d,
                     (inv[3] * a[:, 0] + inv[4] * a[:, 1] + inv[5]) / d], axis=1)


def perspective(inpt, startpoints, endpoints, interpolation=InterpolationMode.BILINEAR,
                fill=None, coefficients=None):
    """Projective warp moving the four ``startpoints`` to ``endpoints``, or given directly by
    ``coefficients`` [a, b, c, d, e, f, g, h] (startpoints/endpoints None): output pixel
    (x, y) samples the input at ((a x + b y + c) / (g x + h y + 1), (d x + e y + f) /
    (g x + h y + 1)). Boxes map their four corners by the inverse map and take the bounds
    (clamped), keypoints map directly; empty boxes and keypoints come back unchecked (as
    torchvision's).

        >>> import fiamma
        >>> img = fiamma.arange(16.).reshape(1, 4, 4)
        >>> shift = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0]    # sample one pixel right
        >>> perspective(img, None, None, coefficients=shift)[0, 0].tolist()
        [1.0, 2.0, 3.0, 0.0]
    """
    k = _kind(inpt)
    if k in ("boxes", "keypoints") and inpt.numel() == 0:
        return inpt
    coeffs = _perspective_coefficients(startpoints, endpoints, coefficients)
    if k == "boxes" and _rotated(inpt.format):
        return _rot_corner_op(inpt, lambda p, c: (_perspective_points(p, coeffs,
                                                                      "bounding boxes"), c))
    if k == "boxes":
        def fn(a, c):
            x1, y1, x2, y2 = a.T
            corners = np.stack([np.stack([x1, y1], 1), np.stack([x2, y1], 1),
                                np.stack([x2, y2], 1), np.stack([x1, y2], 1)], 1)
            pts = _perspective_points(corners.reshape(-1, 2), coeffs, "bounding boxes")
            pts = pts.reshape(-1, 4, 2)
            return np.concatenate([pts.min(1), pts.max(1)], axis=1), c
        return _box_op(inpt, "perspective", fn)
    if k == "keypoints":
        return _kp_op(inpt, lambda a, c: (_perspective_points(a, coeffs, "keypoints"), c))
    if k == "mask":
        return _mask_op(inpt, lambda t: F1._perspective_by_coeffs(
            t, coeffs, InterpolationMode.NEAREST, fill))
    return _image_op(inpt, lambda t: F1._perspective_by_coeffs(t, coeffs, interpolation, fill))


def _check_displacement(displacement, canvas):
    want = (1, int(canvas[0]), int(canvas[1]), 2)
    if not isinstance(displacement, fiamma.Tensor):
        raise TypeError("elastic: argument displacement should be a Tensor")
    if tuple(displacement.shape) != want:
        raise ValueError(f"elastic: argument displacement shape should be {want}, but given "
                         f"{tuple(displacement.shape)}")


def _elastic_inverse_points(a, canvas, displacement, ceil):
    """Points (M, 2) moved by torchvision's approximate inverse of the displacement field:
    the field is read at the (ceiled, for boxes) integer pixel of each point."""
    h, w = canvas
    d = np.asarray(displacement.detach().to(fiamma.float64).numpy())[0]     # (H, W, 2)
    pts = np.ceil(a) if ceil else a
    ix = np.clip(np.trunc(pts[:, 0]).astype(np.int64), 0, w - 1)
    iy = np.clip(np.trunc(pts[:, 1]).astype(np.int64), 0, h - 1)
    gx = (2 * ix + 1) / w - 1 - d[iy, ix, 0]      # identity grid minus the displacement
    gy = (2 * iy + 1) / h - 1 - d[iy, ix, 1]
    return np.stack([(gx + 1) * 0.5 * w - 0.5, (gy + 1) * 0.5 * h - 0.5], axis=1)


def _elastic_image(t, displacement, mode, fill):
    h, w = t.shape[-2:]
    dt = t.dtype if t.is_floating_point() else fiamma.float32
    d = displacement.to(dt)
    xs = fiamma.arange(w, dtype=dt).reshape(1, w)
    ys = fiamma.arange(h, dtype=dt).reshape(h, 1)
    # grid = identity + displacement (normalised, align_corners=False), in source pixels
    ix = xs + d[0, :, :, 0] * (0.5 * w)
    iy = ys + d[0, :, :, 1] * (0.5 * h)
    return FT._sample(t, ix, iy, mode, fill)


def elastic(inpt, displacement, interpolation=InterpolationMode.BILINEAR, fill=None):
    """Elastic warp: output pixel (y, x) samples the input at the identity grid plus
    ``displacement`` (1, H, W, 2), (dx, dy) in normalised [-1, 1] units (torchvision's
    convention). Masks use nearest sampling; boxes and keypoints move by torchvision's
    approximate inverse (the field read at each corner/point's pixel), boxes taking the
    bounds of their corners (clamped).

        >>> import fiamma
        >>> img = fiamma.arange(16.).reshape(1, 4, 4)
        >>> bool((elastic(img, fiamma.zeros(1, 4, 4, 2)) == img).all())
        True
    """
    k = _kind(inpt)
    if k == "boxes":
        _check_displacement(displacement, inpt.canvas_size)
        if inpt.numel() == 0:
            return inpt
        if _rotated(inpt.format):
            # the centre moves; size and angle stay
            def go(a, f, c):
                a = R.convert(a, f, BBF.CXCYWHR)
                a[:, :2] = _elastic_inverse_points(a[:, :2], c, displacement, True)
                return a, BBF.CXCYWHR, c
            return _rot_box_op(inpt, go)

        def fn(a, c):
            x1, y1, x2, y2 = a.T
            corners = np.stack([np.stack([x1, y1], 1), np.stack([x2, y1], 1),
                                np.stack([x2, y2], 1), np.stack([x1, y2], 1)], 1)
            pts = _elastic_inverse_points(corners.reshape(-1, 2), c, displacement, True)
            pts = pts.reshape(-1, 4, 2)
            return np.concatenate([pts.min(1), pts.max(1)], axis=1), c
        return _box_op(inpt, "elastic", fn)
    if k == "keypoints":
        _check_displacement(displacement, inpt.canvas_size)
        if inpt.numel() == 0:
            return inpt
        return _kp_op(inpt, lambda a, c: (_elastic_inverse_points(a, c, displacement, False),
                                          c))
    if isinstance(inpt, PILImage.Image):
        t = F1.pil_to_tensor(inpt)
        out = elastic(t, displacement, interpolation, fill)
        return F1.to_pil_image(out, mode=inpt.mode)
    _check_displacement(displacement, get_size(inpt))
    interpolation = InterpolationMode(interpolation) if isinstance(interpolation, str) \
        else interpolation
    if interpolation not in (InterpolationMode.NEAREST, InterpolationMode.BILINEAR):
        raise ValueError(f"elastic: interpolation should be NEAREST or BILINEAR, got "
                         f"{interpolation}")
    if k == "mask":
        return _mask_op(inpt, lambda t: _elastic_any(t, displacement, "nearest", fill))
    return _image_op(inpt, lambda t: _elastic_any(t, displacement, interpolation.value, fill))


def _elastic_any(t, displacement, mode, fill):
    if t.is_floating_point():
        return _elastic_image(t, displacement, mode, fill)
    out = _elastic_image(t.to(fiamma.float32), displacement, mode, fill)
    if mode == "bilinear":
        out = out.round()
    return out.to(t.dtype)


elastic_transform = elastic


# ---------------------------------------------------------------------------- type/dtype

def to_image(inpt):
    """A PIL image, NumPy array (H, W, C) or tensor (..., C, H, W) as a ``tv_tensors.Image``."""
    if isinstance(inpt, np.ndarray):
        a = inpt[:, :, None] if inpt.ndim == 2 else inpt
        return tv.Image(fiamma.from_numpy(np.ascontiguousarray(a)).permute(2, 0, 1)
                        .contiguous())
    if isinstance(inpt, PILImage.Image):
        return tv.Image(F1.pil_to_tensor(inpt))
    if isinstance(inpt, fiamma.Tensor):
        return tv.Image(_pure(inpt))
    raise TypeError(f"to_image: expected a PIL image, NumPy array or tensor, got "
                    f"{type(inpt).__name__}")


def to_pure_tensor(inpt):
    """The plain ``fiamma.Tensor`` under a tv_tensor (shared memory)."""
    return _pure(inpt)


def to_dtype(inpt, dtype=fiamma.float32, scale=False):
    """Cast; with ``scale`` image values are rescaled between the dtypes' ranges (uint8 255 <->
    float 1.0) as ``convert_image_dtype`` does (images and videos only)."""
    k = _kind(inpt)
    if isinstance(inpt, PILImage.Image):
        raise TypeError("to_dtype: expected a tensor, got a PIL image (use ToImage first)")
    if scale and k == "image":
        return _image_op(inpt, lambda t: F1.convert_image_dtype(t, dtype))
    return _rewrap(_pure(inpt).to(dtype), inpt)


def convert_image_dtype(image, dtype=fiamma.float32):
    return to_dtype(image, dtype, scale=True)


# ---------------------------------------------------------------------------- colour

def _color(op, inpt, fn):
    k = _kind(inpt)
    if k != "image":
        return inpt           # colour ops leave boxes, masks and keypoints alone
    return _image_op(inpt, fn)


def normalize(inpt, mean, std, inplace=False):
    """(x - mean) / std per channel (float images and videos)."""
    if isinstance(inpt, PILImage.Image):
        raise TypeError("normalize: expected a tensor, got a PIL image")
    return _color("normalize", inpt, lambda t: F1.normalize(t, mean, std, inplace))


def adjust_brightness(inpt, brightness_factor):
    return _color("adjust_brightness", inpt,
                  lambda t: F1.adjust_brightness(t, brightness_factor))


def adjust_contrast(inpt, contrast_factor):
    return _color("adjust_contrast", inpt, lambda t: F1.adjust_contrast(t, contrast_factor))


def adjust_saturation(inpt, saturation_factor):
    return _color("adjust_saturation", inpt,
                  lambda t: F1.adjust_saturation(t, saturation_factor))


def adjust_hue(inpt, hue_factor):
    return _color("adjust_hue", inpt, lambda t: F1.adjust_hue(t, hue_factor))


def rgb_to_grayscale(inpt, num_output_channels=1):
    return _color("rgb_to_grayscale", inpt,
                  lambda t: F1.to_grayscale(t, num_output_channels)
                  if isinstance(t, PILImage.Image) else F1.rgb_to_grayscale(t,
                                                                             num_output_channels))


to_grayscale = rgb_to_grayscale


def gaussian_blur(inpt, kernel_size, sigma=None):
    return _color("gaussian_blur", inpt, lambda t: F1.gaussian_blur(t, kernel_size, sigma))


def erase(inpt, i, j, h, w, v, inplace=False):
    """Set the window (i, j, h, w) to ``v`` (images and videos; others unchanged)."""
    return _color("erase", inpt, lambda t: F1.erase(t, i, j, h, w, v, inplace))


def _sanitize_mask(boxes, min_size, min_area):
    """Which boxes are kept by SanitizeBoundingBoxes: size and area at least the minimums and
    all coordinates inside the canvas."""
    if _rotated(boxes.format):
        return R.sanitize_mask(_np(boxes).reshape(-1, R.WIDTH[boxes.format]), boxes.format,
                               boxes.canvas_size, min_size, min_area)
    a = _to_xyxy(_np(boxes).reshape(-1, 4), boxes.format)
    w, h = a[:, 2] - a[:, 0], a[:, 3] - a[:, 1]
    ch, cw = boxes.canvas_size
    valid = (w >= min_size) & (h >= min_size) & (w * h >= min_area)
    valid &= (a[:, 0] <= cw) & (a[:, 2] <= cw) & (a[:, 1] <= ch) & (a[:, 3] <= ch)
    valid &= (a >= 0).all(axis=1)
    return valid




# last: every public functional becomes a dispatcher that also serves the kernels registered
# for user tv_tensor classes (register_kernel)
_kernel_registry.install(globals(), [n for n in __all__ if n != "register_kernel"
                                     and n not in _PLAIN_FUNCTIONS])
