"""v2 colour transforms beyond v1's: RandomGrayscale, RGB, RandomChannelPermutation,
RandomInvert, RandomPosterize, RandomSolarize, RandomEqualize, RandomAutocontrast,
RandomAdjustSharpness (torchvision.transforms.v2's names, arguments and defaults).

They change images and videos (tv_tensors, PIL images, and a plain tensor taken for the
image) and pass bounding boxes, masks and keypoints through unchanged.

    >>> import fiamma
    >>> from fiamma.vision import tv_tensors
    >>> from fiamma.vision.transforms import v2
    >>> img = tv_tensors.Image(fiamma.tensor([[[0, 200]]], dtype=fiamma.uint8))
    >>> boxes = tv_tensors.BoundingBoxes([[0, 0, 1, 1]], format="XYXY", canvas_size=(1, 2))
    >>> out = v2.RandomInvert(p=1.0)({"image": img, "boxes": boxes})
    >>> out["image"].tolist(), out["boxes"].tolist()
    ([[[255, 55]]], [[0, 0, 1, 1]])
"""
import fiamma
from fiamma.vision import tv_tensors as tv
from fiamma.vision.transforms.v2 import functional as F
from fiamma.vision.transforms.v2._functional_color import get_kernel
from fiamma.vision.transforms.v2._transform import RandomTransform, Transform, query_chw

__all__ = ["RandomGrayscale", "RGB", "RandomChannelPermutation", "RandomInvert",
           "RandomPosterize", "RandomSolarize", "RandomEqualize", "RandomAutocontrast",
           "RandomAdjustSharpness"]


_BUILTIN = (tv.Image, tv.Video, tv.Mask, tv.BoundingBoxes, tv.KeyPoints)


def call_kernel(functional, inpt, *args, **kwargs):
    """Apply ``functional``'s kernel for ``inpt``; inputs it has no kernel for (boxes, masks,
    keypoints, user tv_tensor classes) pass through, as in torchvision's transforms. A user
    tv_tensor goes to the functional itself when that is a register_kernel dispatcher (which
    finds the registered kernel, or passes the input through inside a transform)."""
    if (isinstance(inpt, tv.TVTensor) and not isinstance(inpt, _BUILTIN)
            and getattr(functional, "_fiamma_dispatching", False)):
        return functional(inpt, *args, **kwargs)
    return get_kernel(functional, inpt, passthrough=True)(inpt, *args, **kwargs)


def _is_color_target(inpt):
    return not isinstance(inpt, (tv.BoundingBoxes, tv.Mask, tv.KeyPoints))


class RandomGrayscale(RandomTransform):
    """With probability ``p`` (default 0.1) convert images/videos to grayscale, keeping their
    number of channels (1 or 3)."""

    def __init__(self, p=0.1):
        super().__init__(p)

    def make_params(self, flat_inputs):
        return dict(num_input_channels=query_chw(flat_inputs)[0])

    def transform(self, inpt, params):
        if not _is_color_target(inpt):
            return inpt
        return F.rgb_to_grayscale(inpt, num_output_channels=params["num_input_channels"])

    def _repr_items(self):
        return [("p", self.p)]


class RGB(Transform):
    """Convert 1-channel images/videos to 3 channels (others unchanged; PIL: ``convert``)."""

    def transform(self, inpt, params):
        return call_kernel(F.grayscale_to_rgb, inpt)


class RandomChannelPermutation(Transform):
    """Permute the channels of images/videos randomly (one permutation per call)."""

    def make_params(self, flat_inputs):
        c = query_chw(flat_inputs)[0]
        return dict(permutation=fiamma.randperm(c).tolist())

    def transform(self, inpt, params):
        return call_kernel(F.permute_channels, inpt, params["permutation"])


class RandomInvert(RandomTransform):
    """Invert the colours with probability ``p``."""

    def transform(self, inpt, params):
        return call_kernel(F.invert, inpt)

    def _repr_items(self):
        return [("p", self.p)]


class RandomPosterize(RandomTransform):
    """Keep ``bits`` bits per channel with probability ``p``."""

    def __init__(self, bits, p=0.5):
        super().__init__(p)
        self.bits = bits

    def transform(self, inpt, params):
        return call_kernel(F.posterize, inpt, bits=self.bits)

    def _repr_items(self):
        return [("p", self.p), ("bits", self.bits)]


class RandomSolarize(RandomTransform):
    """Invert values ``>= threshold`` with probability ``p``."""

    def __init__(self, threshold, p=0.5):
        super().__init__(p)
        self.threshold = threshold

    def transform(self, inpt, params):
        return call_kernel(F.solarize, inpt, threshold=self.threshold)

    def _repr_items(self):
        return [("p", self.p), ("threshold", self.threshold)]


class RandomEqualize(RandomTransform):
    """Equalise the histogram with probability ``p``."""

    def transform(self, inpt, params):
        return call_kernel(F.equalize, inpt)

    def _repr_items(self):
        return [("p", self.p)]


class RandomAutocontrast(RandomTransform):
    """Autocontrast with probability ``p``."""

    def transform(self, inpt, params):
        return call_kernel(F.autocontrast, inpt)

    def _repr_items(self):
        return [("p", self.p)]


class RandomAdjustSharpness(RandomTransform):
    """Adjust the sharpness by ``sharpness_factor`` with probability ``p``."""

    def __init__(self, sharpness_factor, p=0.5):
        super().__init__(p)
        self.sharpness_factor = sharpness_factor

    def transform(self, inpt, params):
        return call_kernel(F.adjust_sharpness, inpt, sharpness_factor=self.sharpness_factor)

    def _repr_items(self):
        return [("p", self.p), ("sharpness_factor", self.sharpness_factor)]
