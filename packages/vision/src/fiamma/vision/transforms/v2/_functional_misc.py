"""v2 functionals for multi-crops, videos, keypoint clamping/sanitising, sizes and the
deprecated conversions (torchvision's names): five_crop, ten_crop,
uniform_temporal_subsample, clamp_keypoints, sanitize_keypoints, sanitize_bounding_boxes,
get_num_frames, get_num_channels, get_size_*/get_dimensions_* kernels, to_tensor,
get_image_size, get_image_num_channels, is_pure_tensor.

    >>> import fiamma
    >>> from fiamma.vision import tv_tensors
    >>> from fiamma.vision.transforms.v2 import functional as F
    >>> kp = tv_tensors.KeyPoints([[1.0, 2.0], [12.0, 3.0]], canvas_size=(10, 10))
    >>> F.sanitize_keypoints(kp)[1].tolist()
    [True, False]
"""
import warnings

import numpy as np

import fiamma
from fiamma.vision import tv_tensors as tv
from fiamma.vision.transforms import functional as F1
from fiamma.vision.transforms.v2 import functional as F
from fiamma.vision.transforms.v2._functional_color import _call, _check_image, register

__all__ = [
    "five_crop", "five_crop_image", "five_crop_video", "ten_crop", "ten_crop_image",
    "ten_crop_video", "uniform_temporal_subsample", "uniform_temporal_subsample_video",
    "get_num_frames", "get_num_frames_video", "get_num_channels", "get_num_channels_image",
    "get_num_channels_video", "get_dimensions_image", "get_dimensions_video", "get_size_image",
    "get_size_video", "get_size_mask", "get_size_bounding_boxes", "get_size_keypoints",
    "clamp_keypoints", "sanitize_keypoints", "sanitize_bounding_boxes", "to_tensor",
    "get_image_size", "get_image_num_channels", "is_pure_tensor",
]

# per-type kernels and helpers (plain functions, as torchvision's, not dispatching functionals)
PLAIN = [n for n in __all__ if n.endswith(("_image", "_video", "_mask", "_bounding_boxes",
                                           "_keypoints"))] + [
    "is_pure_tensor", "to_tensor", "get_image_size", "get_image_num_channels",
    "clamp_keypoints", "sanitize_keypoints", "sanitize_bounding_boxes"]


def is_pure_tensor(inpt):
    """True for a tensor that is not a tv_tensor."""
    return isinstance(inpt, fiamma.Tensor) and not isinstance(inpt, tv.TVTensor)


# ---------------------------------------------------------------------------- crops

def five_crop_image(image, size):
    """(top-left, top-right, bottom-left, bottom-right, centre) crops of ``size``."""
    return F1.five_crop(image, size)


five_crop_video = five_crop_image


def ten_crop_image(image, size, vertical_flip=False):
    """The five crops, then the five crops of the flipped image (horizontal unless
    ``vertical_flip``)."""
    return F1.ten_crop(image, size, vertical_flip)


ten_crop_video = ten_crop_image


def _tuple_wrapping(kernel):
    def run(inpt, *args, **kwargs):
        outs = kernel(inpt.as_subclass(fiamma.Tensor), *args, **kwargs)
        return tuple(tv.wrap(o, like=inpt) for o in outs)
    return run


def five_crop(inpt, size):
    """The four corner crops and the centre crop of ``size`` (int or (h, w)), as a tuple.

        >>> import fiamma
        >>> crops = five_crop(fiamma.arange(16.).reshape(1, 4, 4), 2)
        >>> [c.flatten().tolist() for c in crops[:2]]
        [[0.0, 1.0, 4.0, 5.0], [2.0, 3.0, 6.0, 7.0]]
    """
    return _call(five_crop, inpt, size)


register(five_crop, five_crop_image, pil=F1.five_crop)
five_crop._kernels[tv.Image] = _tuple_wrapping(five_crop_image)
five_crop._kernels[tv.Video] = _tuple_wrapping(five_crop_video)


def ten_crop(inpt, size, vertical_flip=False):
    """:func:`five_crop` of the input and of its flipped copy (10 crops).

        >>> import fiamma
        >>> len(ten_crop(fiamma.zeros(3, 8, 8), 4))
        10
    """
    return _call(ten_crop, inpt, size, vertical_flip=vertical_flip)


register(ten_crop, ten_crop_image, pil=F1.ten_crop)
ten_crop._kernels[tv.Image] = _tuple_wrapping(ten_crop_image)
ten_crop._kernels[tv.Video] = _tuple_wrapping(ten_crop_video)


# ---------------------------------------------------------------------------- video

def _linspace_f32(end, n):
    # float32 points from 0 to ``end`` computed from both ends (PyTorch's linspace), so the
    # truncated indices fall where torchvision's do
    if n == 1:
        return np.zeros(1, np.float32)
    step = np.float32(end) / np.float32(n - 1)
    i = np.arange(n)
    lo = i.astype(np.float32) * step
    hi = np.float32(end) - (n - 1 - i).astype(np.float32) * step
    return np.where(i < n // 2, lo, hi).astype(np.float32)


def uniform_temporal_subsample_video(video, num_samples):
    """``num_samples`` frames at ``linspace(0, T - 1, num_samples)`` (truncated) along dim
    -4 of ``(..., T, C, H, W)``."""
    if video.ndim < 4:
        raise TypeError(f"uniform_temporal_subsample: expected a video (..., T, C, H, W), got "
                        f"shape {tuple(video.shape)}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 0:
        raise ValueError(f"uniform_temporal_subsample: num_samples should be a non-negative "
                         f"int, got {num_samples!r}")
    t_max = int(video.shape[-4]) - 1
    if t_max < 0 and num_samples:
        raise ValueError("uniform_temporal_subsample: the video has no frames")
    idx = _linspace_f32(t_max, num_samples).astype(np.int64)
    return fiamma.index_select(video, video.ndim - 4, fiamma.from_numpy(idx))


def uniform_temporal_subsample(inpt, num_samples):
    """Evenly spaced frames of a video (nearest frames when ``num_samples`` exceeds T).

        >>> import fiamma
        >>> v = fiamma.arange(5.).reshape(5, 1, 1, 1)
        >>> uniform_temporal_subsample(v, 3).flatten().tolist()
        [0.0, 2.0, 4.0]
    """
    return _call(uniform_temporal_subsample, inpt, num_samples)


register(uniform_temporal_subsample, video=uniform_temporal_subsample_video)
uniform_temporal_subsample._kernels[fiamma.Tensor] = uniform_temporal_subsample_video


# ---------------------------------------------------------------------------- sizes

def get_num_frames_video(video):
    return int(video.shape[-4])


def get_num_frames(inpt):
    """T of a video ``(..., T, C, H, W)``."""
    return _call(get_num_frames, inpt)


register(get_num_frames)
get_num_frames._kernels.update({fiamma.Tensor: get_num_frames_video,
                                tv.Video: get_num_frames_video})


def get_num_channels_image(image):
    _check_image(image, "get_num_channels")
    return int(image.shape[-3])


get_num_channels_video = get_num_channels_image


def get_num_channels(inpt):
    """C of an image or video (PIL: the number of bands)."""
    return _call(get_num_channels, inpt)


register(get_num_channels, get_num_channels_image, pil=lambda img: len(img.getbands()))
get_num_channels._kernels[tv.Image] = get_num_channels_image
get_num_channels._kernels[tv.Video] = get_num_channels_video


def get_image_num_channels(inpt):
    """Same as :func:`get_num_channels` (torchvision's older name)."""
    return get_num_channels(inpt)


def get_dimensions_image(image):
    _check_image(image, "get_dimensions")
    return [int(s) for s in image.shape[-3:]]


get_dimensions_video = get_dimensions_image


def get_size_image(image):
    if image.ndim < 2:
        raise TypeError(f"get_size: expected a tensor with at least 2 dims, got "
                        f"{tuple(image.shape)}")
    return [int(image.shape[-2]), int(image.shape[-1])]


get_size_video = get_size_mask = get_size_image


def get_size_bounding_boxes(bounding_box):
    return list(bounding_box.canvas_size)


get_size_keypoints = get_size_bounding_boxes


def get_image_size(inpt):
    """[width, height] (deprecated in torchvision: use ``get_size``, which is [h, w])."""
    warnings.warn("The function `get_image_size(...)` is deprecated and will be removed in a "
                  "future release. Instead, please use `get_size(...)` which returns `[h, w]` "
                  "instead of `[w, h]`.")
    return F1.get_image_size(F.to_pure_tensor(inpt))


def to_tensor(inpt):
    """PIL image / NumPy array to a float tensor in [0, 1] (deprecated in torchvision: use
    ``to_image`` then ``to_dtype(..., scale=True)``)."""
    warnings.warn("The function `to_tensor(...)` is deprecated and will be removed in a future "
                  "release. Instead, please use `to_image(...)` followed by `to_dtype(..., "
                  "dtype=torch.float32, scale=True)`.")
    return F1.to_tensor(inpt)


# ---------------------------------------------------------------------------- keypoints

def _clamp_keypoints(points, canvas_size):
    h, w = canvas_size
    dtype = points.dtype
    x = points.clone() if points.is_floating_point() else points.to(fiamma.float32)
    x[..., 0] = x[..., 0].clamp(0, w - 1)
    x[..., 1] = x[..., 1].clamp(0, h - 1)
    return x.to(dtype)


def clamp_keypoints(inpt, canvas_size=None):
    """Clamp keypoints into the image: x to [0, W - 1], y to [0, H - 1] (pixel positions,
    unlike boxes' [0, W]).

        >>> from fiamma.vision import tv_tensors
        >>> kp = tv_tensors.KeyPoints([[-3.0, 4.0], [12.0, 20.0]], canvas_size=(10, 10))
        >>> clamp_keypoints(kp).tolist()
        [[0.0, 4.0], [9.0, 9.0]]
    """
    if is_pure_tensor(inpt):
        if canvas_size is None:
            raise ValueError("clamp_keypoints: for pure tensor inputs, `canvas_size` has to be "
                             "passed.")
        return _clamp_keypoints(inpt, tuple(canvas_size))
    if isinstance(inpt, tv.KeyPoints):
        if canvas_size is not None:
            raise ValueError("clamp_keypoints: for keypoints tv_tensor inputs, `canvas_size` "
                             "must not be passed.")
        out = _clamp_keypoints(inpt.as_subclass(fiamma.Tensor), inpt.canvas_size)
        return tv.wrap(out, like=inpt)
    raise TypeError(f"clamp_keypoints: input can either be a plain tensor or a keypoints "
                    f"tv_tensor, but got {type(inpt).__name__} instead.")


def _sanitize_keypoints_mask(points, canvas_size):
    h, w = canvas_size
    a = np.asarray(points.detach().to(fiamma.float64).numpy())
    valid = (a[..., 0] >= 0) & (a[..., 0] < w) & (a[..., 1] >= 0) & (a[..., 1] < h)
    if valid.ndim > 1:
        valid = valid.reshape(valid.shape[0], -1).all(axis=1)
    return valid


def sanitize_keypoints(key_points, canvas_size=None):
    """Drop keypoints outside the canvas (for groups ``(N, ..., 2)``, groups with any point
    outside). Returns ``(kept, valid)``, ``valid`` a bool tensor over the first dim.

        >>> import fiamma
        >>> kept, valid = sanitize_keypoints(fiamma.tensor([[1.0, 1.0], [5.0, 1.0]]), (4, 4))
        >>> kept.tolist(), valid.tolist()
        ([[1.0, 1.0]], [True, False])
    """
    if is_pure_tensor(key_points):
        if canvas_size is None:
            raise ValueError("sanitize_keypoints: canvas_size cannot be None if key_points is "
                             "a pure tensor.")
        canvas = tuple(canvas_size)
    elif isinstance(key_points, tv.KeyPoints):
        if canvas_size is not None:
            raise ValueError("sanitize_keypoints: canvas_size must be None when key_points is "
                             "a KeyPoints tv_tensor.")
        canvas = key_points.canvas_size
    else:
        raise ValueError(f"sanitize_keypoints: key_points must be a tensor or a KeyPoints "
                         f"tv_tensor, got {type(key_points).__name__}")
    valid = _sanitize_keypoints_mask(key_points, canvas)
    return _keep(key_points, valid), fiamma.from_numpy(valid)


def _keep(t, valid):
    idx = fiamma.from_numpy(np.nonzero(valid)[0].astype(np.int64))
    out = F.to_pure_tensor(t).index_select(0, idx)
    return tv.wrap(out, like=t) if isinstance(t, tv.TVTensor) else out


def sanitize_bounding_boxes(bounding_boxes, format=None, canvas_size=None, min_size=1.0,
                            min_area=1.0):
    """Drop degenerate boxes (a side below ``min_size``, area below ``min_area``, or outside
    the canvas). Returns ``(kept, valid)``.

        >>> from fiamma.vision import tv_tensors
        >>> b = tv_tensors.BoundingBoxes([[0, 0, 5, 5], [2, 2, 2, 8]], format="XYXY",
        ...                              canvas_size=(10, 10))
        >>> sanitize_bounding_boxes(b)[1].tolist()
        [True, False]
    """
    if is_pure_tensor(bounding_boxes):
        if format is None or canvas_size is None:
            raise ValueError("sanitize_bounding_boxes: format and canvas_size cannot be None "
                             "if bounding_boxes is a pure tensor.")
        boxes = tv.BoundingBoxes(bounding_boxes, format=format, canvas_size=canvas_size)
    elif isinstance(bounding_boxes, tv.BoundingBoxes):
        if format is not None or canvas_size is not None:
            raise ValueError("sanitize_bounding_boxes: format and canvas_size must be None "
                             "when bounding_boxes is a BoundingBoxes tv_tensor.")
        boxes = bounding_boxes
    else:
        raise ValueError(f"sanitize_bounding_boxes: bounding_boxes must be a tensor or a "
                         f"BoundingBoxes tv_tensor, got {type(bounding_boxes).__name__}")
    valid = F._sanitize_mask(boxes, min_size, min_area)
    return _keep(bounding_boxes, valid), fiamma.from_numpy(np.ascontiguousarray(valid))

