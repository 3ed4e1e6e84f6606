"""v2 multi-crop and random-resize transforms (torchvision.transforms.v2's names):
FiveCrop, TenCrop, ScaleJitter, RandomShortestSize, RandomResize.

The resizes apply one drawn size to the whole sample: images and videos (with
``interpolation``), masks (nearest), bounding boxes and keypoints (scaled coordinates and
canvas). FiveCrop/TenCrop return tuples of crops for images and videos; they refuse
bounding boxes and masks and pass keypoints through with a warning, as torchvision does.

    >>> import fiamma
    >>> from fiamma.vision import tv_tensors
    >>> from fiamma.vision.transforms import v2
    >>> img = tv_tensors.Image(fiamma.zeros(3, 10, 20))
    >>> boxes = tv_tensors.BoundingBoxes([[2, 2, 6, 8]], format="XYXY", canvas_size=(10, 20))
    >>> out = v2.RandomShortestSize(min_size=20)(img, boxes)
    >>> tuple(out[0].shape), out[1].tolist(), out[1].canvas_size
    ((3, 20, 40), [[4, 4, 12, 16]], (20, 40))
"""
import warnings

import numpy as np

import fiamma
from fiamma.vision import tv_tensors as tv
from fiamma.vision.transforms import _transforms as T1
from fiamma.vision.transforms.v2 import functional as F
from fiamma.vision.transforms.v2._color import call_kernel
from fiamma.vision.transforms.v2._transform import Transform, query_size

__all__ = ["FiveCrop", "TenCrop", "ScaleJitter", "RandomShortestSize", "RandomResize"]


class _MultiCrop(Transform):
    def _needs(self, flat):
        if any(isinstance(x, (tv.BoundingBoxes, tv.Mask)) for x in flat):
            raise TypeError(f"BoundingBoxes'es and Mask's are not supported by "
                            f"{type(self).__name__}()")
        return super()._needs(flat)

    def _crops(self, functional, inpt, *args, **kwargs):
        if isinstance(inpt, tv.KeyPoints):
            warnings.warn(f"{type(self).__name__}() is currently passing through inputs of type "
                          f"tv_tensors.{type(inpt).__name__}. This will likely change in the "
                          f"future.")
            return inpt
        return call_kernel(functional, inpt, *args, **kwargs)


class FiveCrop(_MultiCrop):
    """The four corner crops and the centre crop of ``size`` (int or (h, w)), as a tuple.

        >>> import fiamma
        >>> crops = FiveCrop(2)(fiamma.zeros(3, 4, 4))
        >>> len(crops), tuple(crops[4].shape)
        (5, (3, 2, 2))
    """

    def __init__(self, size):
        super().__init__()
        self.size = T1._setup_size(size, "FiveCrop")

    def transform(self, inpt, params):
        return self._crops(F.five_crop, inpt, list(self.size))

    def _repr_items(self):
        return [("size", self.size)]


class TenCrop(_MultiCrop):
    """FiveCrop of the input and of its flipped copy (horizontal, or vertical with
    ``vertical_flip``), as a 10-tuple."""

    def __init__(self, size, vertical_flip=False):
        super().__init__()
        self.size = T1._setup_size(size, "TenCrop")
        self.vertical_flip = vertical_flip

    def transform(self, inpt, params):
        return self._crops(F.ten_crop, inpt, list(self.size), vertical_flip=self.vertical_flip)

    def _repr_items(self):
        return [("size", self.size), ("vertical_flip", self.vertical_flip)]


class _RandomSize(Transform):
    def __init__(self, interpolation, antialias):
        super().__init__()
        self.interpolation, self.antialias = interpolation, antialias

    def transform(self, inpt, params):
        return F.resize(inpt, list(params["size"]), self.interpolation, antialias=self.antialias)

    def _resize_items(self):
        return [("interpolation", self.interpolation), ("antialias", self.antialias)]


class ScaleJitter(_RandomSize):
    """Large scale jitter (Ghiasi et al.): resize the sample by ``r = min(target_h / h,
    target_w / w) * s``, ``s`` uniform in ``scale_range``; sizes are truncated as torchvision
    does (float32 arithmetic)."""

    def __init__(self, target_size, scale_range=(0.1, 2.0), interpolation="bilinear",
                 antialias=True):
        super().__init__(interpolation, antialias)
        self.target_size, self.scale_range = target_size, scale_range

    def make_params(self, flat_inputs):
        h, w = query_size(flat_inputs)
        lo, hi = self.scale_range
        # a float32 draw combined in float32, like torchvision's tensor arithmetic
        scale = np.float32(lo) + fiamma.rand(1).numpy()[0] * np.float32(hi - lo)
        r = np.float32(min(self.target_size[1] / h, self.target_size[0] / w)) * scale
        return dict(size=(int(np.float32(h) * r), int(np.float32(w) * r)))

    def _repr_items(self):
        return [("target_size", self.target_size),
                ("scale_range", self.scale_range)] + self._resize_items()


class RandomShortestSize(_RandomSize):
    """Resize so the shorter side is one of ``min_size`` (picked at random), the longer side
    at most ``max_size``."""

    def __init__(self, min_size, max_size=None, interpolation="bilinear", antialias=True):
        super().__init__(interpolation, antialias)
        self.min_size = [min_size] if isinstance(min_size, int) else list(min_size)
        self.max_size = max_size

    def make_params(self, flat_inputs):
        h, w = query_size(flat_inputs)
        min_size = self.min_size[int(fiamma.randint(0, len(self.min_size), (1,)).item())]
        r = min_size / min(h, w)
        if self.max_size is not None:
            r = min(r, self.max_size / max(h, w))
        return dict(size=(int(h * r), int(w * r)))

    def _repr_items(self):
        items = [("min_size", self.min_size)]
        if self.max_size is not None:
            items.append(("max_size", self.max_size))
        return items + self._resize_items()


class RandomResize(_RandomSize):
    """Resize the shorter side to a size drawn from ``[min_size, max_size)``."""

    def __init__(self, min_size, max_size, interpolation="bilinear", antialias=True):
        super().__init__(interpolation, antialias)
        self.min_size, self.max_size = min_size, max_size

    def make_params(self, flat_inputs):
        return dict(size=[int(fiamma.randint(self.min_size, self.max_size, (1,)).item())])

    def _repr_items(self):
        items = [("min_size", self.min_size)]
        if self.max_size is not None:
            items.append(("max_size", self.max_size))
        return items + self._resize_items()
