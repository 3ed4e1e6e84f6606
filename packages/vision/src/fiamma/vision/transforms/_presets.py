"""The inference transforms that pretrained weights carry (torchvision.transforms._presets).

``Weights.transforms`` is ``partial(ImageClassification, crop_size=224, ...)``; calling it gives
the transform that prepares an image exactly as the weights were evaluated::

    >>> import fiamma
    >>> from fiamma.vision.transforms._presets import ImageClassification
    >>> tf = ImageClassification(crop_size=224)
    >>> tuple(tf(fiamma.zeros(3, 300, 400, dtype=fiamma.uint8)).shape)
    (3, 224, 224)
"""
import fiamma
from fiamma.nn import Module
from fiamma.vision.transforms import functional as F
from fiamma.vision.transforms.functional import InterpolationMode

__all__ = ["ObjectDetection", "ImageClassification", "SemanticSegmentation"]


class ObjectDetection(Module):
    """The inference transform of the detection weights: a PIL image or uint8 tensor to a
    float tensor in [0, 1] (the model normalises and resizes itself)."""

    def forward(self, img):
        if not isinstance(img, fiamma.Tensor):
            img = F.pil_to_tensor(img)
        return F.convert_image_dtype(img, fiamma.float32)

    def __repr__(self):
        return self.__class__.__name__ + "()"

    def describe(self):
        return ("Accepts ``PIL.Image``, batched ``(B, C, H, W)`` and single ``(C, H, W)`` image "
                "``fiamma.Tensor`` objects. The images are rescaled to ``[0.0, 1.0]``.")


class ImageClassification(Module):
    """Resize the shorter side to ``resize_size``, center-crop ``crop_size``, scale to float in
    [0, 1] and normalise with ``mean``/``std``. Accepts a PIL image or a uint8/float tensor
    ``(..., C, H, W)``; returns a float32 tensor."""

    def __init__(self, *, crop_size, resize_size=256, mean=(0.485, 0.456, 0.406),
                 std=(0.229, 0.224, 0.225), interpolation=InterpolationMode.BILINEAR,
                 antialias=True):
        super().__init__()
        self.crop_size = [crop_size]
        self.resize_size = [resize_size]
        self.mean = list(mean)
        self.std = list(std)
        self.interpolation = interpolation
        self.antialias = antialias

    def forward(self, img):
        img = F.resize(img, self.resize_size, interpolation=self.interpolation,
                       antialias=self.antialias)
        img = F.center_crop(img, self.crop_size)
        if not isinstance(img, fiamma.Tensor):
            img = F.pil_to_tensor(img)
        img = F.convert_image_dtype(img, fiamma.float32)
        return F.normalize(img, mean=self.mean, std=self.std)

    def __repr__(self):
        return (f"{type(self).__name__}(\n    crop_size={self.crop_size}\n"
                f"    resize_size={self.resize_size}\n    mean={self.mean}\n"
                f"    std={self.std}\n    interpolation={self.interpolation}\n)")

    def describe(self):
        return ("Accepts ``PIL.Image``, batched ``(B, C, H, W)`` and single ``(C, H, W)`` image "
                "``fiamma.Tensor`` objects. The images are resized to "
                f"``resize_size={self.resize_size}`` using ``interpolation={self.interpolation}"
                f"``, followed by a central crop of ``crop_size={self.crop_size}``. Finally the "
                "values are first rescaled to ``[0.0, 1.0]`` and then normalized using "
                f"``mean={self.mean}`` and ``std={self.std}``.")


class SemanticSegmentation(Module):
    """The inference transform of the segmentation weights: resize the shorter side to
    ``resize_size`` (if given), scale to float in [0, 1], normalise with ``mean``/``std``."""

    def __init__(self, *, resize_size, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
                 interpolation=InterpolationMode.BILINEAR, antialias=True):
        super().__init__()
        self.resize_size = [resize_size] if resize_size is not None else None
        self.mean = list(mean)
        self.std = list(std)
        self.interpolation = interpolation
        self.antialias = antialias

    def forward(self, img):
        if isinstance(self.resize_size, list):
            img = F.resize(img, self.resize_size, interpolation=self.interpolation,
                           antialias=self.antialias)
        if not isinstance(img, fiamma.Tensor):
            img = F.pil_to_tensor(img)
        img = F.convert_image_dtype(img, fiamma.float32)
        return F.normalize(img, mean=self.mean, std=self.std)

    def __repr__(self):
        return (f"{type(self).__name__}(\n    resize_size={self.resize_size}\n"
                f"    mean={self.mean}\n    std={self.std}\n"
                f"    interpolation={self.interpolation}\n)")
