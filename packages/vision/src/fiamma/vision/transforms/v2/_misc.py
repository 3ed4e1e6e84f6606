"""v2 transforms for types, noise, keypoints and videos (torchvision.transforms.v2's names):
Identity, LinearTransformation, GaussianNoise, ConvertImageDtype, JPEG, ToPILImage,
ToTensor, ClampKeyPoints, SanitizeKeyPoints, SetClampingMode, UniformTemporalSubsample.

    >>> import fiamma
    >>> from fiamma.vision import tv_tensors
    >>> from fiamma.vision.transforms import v2
    >>> kp = tv_tensors.KeyPoints([[1.0, 1.0], [9.0, 3.0]], canvas_size=(4, 4))
    >>> out = v2.SanitizeKeyPoints(labels_getter="default")({"kp": kp,
    ...                                                      "labels": fiamma.tensor([7, 8])})
    >>> out["kp"].tolist(), out["labels"].tolist()
    ([[1.0, 1.0]], [7])
"""
import warnings

import numpy as np
from PIL import Image as PILImage

import fiamma
from fiamma.vision import tv_tensors as tv
from fiamma.vision.transforms import functional as F1
from fiamma.vision.transforms._transforms_more import (
    linear_transformation_apply,
    linear_transformation_check,
)
from fiamma.vision.transforms.v2 import functional as F
from fiamma.vision.transforms.v2._color import call_kernel
from fiamma.vision.transforms.v2._transform import (
    Transform,
    flatten,
    is_pure_tensor,
    needs_transform_list,
    unflatten,
)
from fiamma.vision.transforms.v2._utils import get_keypoints, parse_labels_getter

__all__ = ["Identity", "LinearTransformation", "GaussianNoise", "ConvertImageDtype", "JPEG",
           "ToPILImage", "ToTensor", "ClampKeyPoints", "SanitizeKeyPoints", "SetClampingMode",
           "UniformTemporalSubsample"]


def _only(flat, types):
    """The base heuristic's choice restricted to ``types`` (plain tensors count as images)."""
    base = needs_transform_list(flat)
    return [n and (isinstance(x, types) or is_pure_tensor(x)) for n, x in zip(base, flat)]


class Identity(Transform):
    """Return the input unchanged."""

    def transform(self, inpt, params):
        return inpt


class LinearTransformation(Transform):
    """Flatten each image/video to D = C*H*W values, subtract ``mean_vector`` (D,) and multiply
    by ``transformation_matrix`` (D, D) (e.g. ZCA whitening). PIL images are refused.

        >>> import fiamma
        >>> t = LinearTransformation(2 * fiamma.eye(4), fiamma.ones(4))
        >>> t(fiamma.ones(1, 2, 2)).flatten().tolist()
        [0.0, 0.0, 0.0, 0.0]
    """

    def __init__(self, transformation_matrix, mean_vector):
        super().__init__()
        self.transformation_matrix, self.mean_vector = linear_transformation_check(
            transformation_matrix, mean_vector)

    def _needs(self, flat):
        if any(isinstance(x, PILImage.Image) for x in flat):
            raise TypeError("LinearTransformation() does not support PIL images.")
        return _only(flat, (tv.Image, tv.Video))

    def transform(self, inpt, params):
        out = linear_transformation_apply(F.to_pure_tensor(inpt), self.transformation_matrix,
                                          self.mean_vector)
        return tv.wrap(out, like=inpt) if isinstance(inpt, tv.TVTensor) else out


class GaussianNoise(Transform):
    """Add N(``mean``, ``sigma``) noise to float [0, 1] or uint8 images/videos (each image
    its own draw); ``clip`` clamps to the valid range. PIL images raise."""

    def __init__(self, mean=0.0, sigma=0.1, clip=True):
        super().__init__()
        self.mean, self.sigma, self.clip = mean, sigma, clip

    def transform(self, inpt, params):
        return call_kernel(F.gaussian_noise, inpt, mean=self.mean, sigma=self.sigma,
                           clip=self.clip)

    def _repr_items(self):
        return [("mean", self.mean), ("sigma", self.sigma), ("clip", self.clip)]


class ConvertImageDtype(Transform):
    """Deprecated alias of ``ToDtype(dtype, scale=True)``: images/videos are converted with
    scaling; boxes, masks and keypoints are cast; PIL images pass through."""

    def __init__(self, dtype=fiamma.float32):
        super().__init__()
        self.dtype = dtype

    def transform(self, inpt, params):
        if isinstance(inpt, PILImage.Image):
            return inpt
        return F.to_dtype(inpt, self.dtype, scale=True)


class JPEG(Transform):
    """JPEG-compress images/videos at a quality drawn uniformly from ``quality`` (an int, or
    a (min, max) pair, both ends included; 1-100)."""

    def __init__(self, quality):
        super().__init__()
        if isinstance(quality, bool):
            raise TypeError("JPEG: quality can't be bool")
        if isinstance(quality, int):
            quality = [quality, quality]
        else:
            if not isinstance(quality, (list, tuple)) or len(quality) != 2:
                raise ValueError(f"JPEG: quality should be an int or a sequence of 2 ints, got "
                                 f"{quality}")
        if not (all(isinstance(q, int) for q in quality)
                and 1 <= quality[0] <= quality[1] <= 100):
            raise ValueError(f"JPEG: quality must be an integer from 1 to 100, got "
                             f"quality={quality}")
        self.quality = quality

    def make_params(self, flat_inputs):
        return dict(quality=int(fiamma.randint(self.quality[0], self.quality[1] + 1,
                                               (1,)).item()))

    def transform(self, inpt, params):
        return call_kernel(F.jpeg, inpt, quality=params["quality"])

    def _repr_items(self):
        return [("quality", self.quality)]


class ToPILImage(Transform):
    """Images (``tv_tensors.Image``, the plain tensor taken for the image, NumPy arrays) to PIL
    images; ``mode`` as :func:`~fiamma.vision.transforms.functional.to_pil_image`."""

    def __init__(self, mode=None):
        super().__init__()
        self.mode = mode

    def _needs(self, flat):
        base = needs_transform_list(flat)
        return [(n and (isinstance(x, tv.Image) or is_pure_tensor(x)))
                or isinstance(x, np.ndarray) for n, x in zip(base, flat)]

    def transform(self, inpt, params):
        if isinstance(inpt, tv.TVTensor):
            inpt = F.to_pure_tensor(inpt)
        return F1.to_pil_image(inpt, mode=self.mode)

    def _repr_items(self):
        return [] if self.mode is None else [("mode", self.mode)]


class ToTensor(Transform):
    """Deprecated (torchvision warns): PIL images and NumPy arrays to float tensors in [0, 1]
    as :func:`~fiamma.vision.transforms.functional.to_tensor`. Use ``Compose([ToImage(),
    ToDtype(fiamma.float32, scale=True)])``."""

    def __init__(self):
        warnings.warn("The transform `ToTensor()` is deprecated and will be removed in a future "
                      "release. Instead, please use `v2.Compose([v2.ToImage(), "
                      "v2.ToDtype(torch.float32, scale=True)])`.Output is equivalent up to "
                      "float precision.")
        super().__init__()

    def _needs(self, flat):
        return [isinstance(x, (PILImage.Image, np.ndarray)) for x in flat]

    def transform(self, inpt, params):
        return F1.to_tensor(inpt)


class ClampKeyPoints(Transform):
    """Clamp every KeyPoints into its canvas (x in [0, W - 1], y in [0, H - 1])."""

    def _needs(self, flat):
        return [isinstance(x, tv.KeyPoints) for x in flat]

    def transform(self, inpt, params):
        return F.clamp_keypoints(inpt)


class SetClampingMode(Transform):
    """Set ``clamping_mode`` ("soft", "hard" or None) on the sample's BoundingBoxes for the
    transforms that follow."""

    def __init__(self, clamping_mode):
        super().__init__()
        if clamping_mode not in (None, "soft", "hard"):
            raise ValueError(f"SetClampingMode: clamping_mode must be soft, hard or None, got "
                             f"{clamping_mode!r}")
        self.clamping_mode = clamping_mode

    def _needs(self, flat):
        return [isinstance(x, tv.BoundingBoxes) for x in flat]

    def transform(self, inpt, params):
        return tv.wrap(F.to_pure_tensor(inpt).clone(), like=inpt,
                       clamping_mode=self.clamping_mode)

    def _repr_items(self):
        return [] if self.clamping_mode is None else [("clamping_mode", self.clamping_mode)]


class SanitizeKeyPoints(Transform):
    """Remove keypoints (or whole groups ``(N, ..., 2)``) outside their canvas, and the
    matching entries of the labels (``labels_getter``: None by default, ``"default"``, or a
    callable returning a tensor or a tuple of tensors)."""

    def __init__(self, labels_getter=None):
        super().__init__()
        self.labels_getter = labels_getter
        self._labels_getter = parse_labels_getter(labels_getter)

    def forward(self, *inputs):
        inputs = inputs if len(inputs) > 1 else inputs[0]
        labels = self._labels_getter(inputs)
        if labels is not None:
            if isinstance(labels, fiamma.Tensor):
                labels = (labels,)
            elif isinstance(labels, (tuple, list)):
                for entry in labels:
                    if not isinstance(entry, fiamma.Tensor):
                        raise ValueError(f"SanitizeKeyPoints: the labels in the input to "
                                         f"forward() must be a tensor or None, got "
                                         f"{type(entry).__name__} instead.")
            else:
                raise ValueError(f"SanitizeKeyPoints: the labels in the input to forward() "
                                 f"must be a tensor or None, got {type(labels).__name__} "
                                 f"instead.")
        flat, spec = flatten(inputs)
        points = get_keypoints(flat)
        for lab in labels or ():
            if points.shape[0] != lab.shape[0]:
                raise ValueError(f"SanitizeKeyPoints: number of keypoints "
                                 f"(shape={tuple(points.shape)}) must match the number of "
                                 f"labels. Found labels with shape={tuple(lab.shape)}).")
        _, valid = F.sanitize_keypoints(points)
        idx = valid.nonzero().reshape(-1)
        out = []
        for x in flat:
            is_label = labels is not None and any(x is lab for lab in labels)
            if is_label or isinstance(x, tv.KeyPoints):
                y = F.to_pure_tensor(x).index_select(0, idx)
                x = tv.wrap(y, like=x) if isinstance(x, tv.TVTensor) else y
            out.append(x)
        return unflatten(out, spec)


class UniformTemporalSubsample(Transform):
    """Keep ``num_samples`` evenly spaced frames of videos (``(..., T, C, H, W)``; the plain
    tensor taken for the image counts as a video); other inputs pass through."""

    def __init__(self, num_samples):
        super().__init__()
        self.num_samples = num_samples

    def transform(self, inpt, params):
        return call_kernel(F.uniform_temporal_subsample, inpt, self.num_samples)

    def _repr_items(self):
        return [("num_samples", self.num_samples)]
