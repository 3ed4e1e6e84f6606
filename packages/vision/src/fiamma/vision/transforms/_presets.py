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

__all__ = ["ObjectDetection", "ImageClassification", "SemanticSegmentation",
           "VideoClassification", "OpticalFlow"]


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


class VideoClassification(Module):
    """The inference transform of the video weights: frames ``(..., T, C, H, W)`` (uint8 or
    float) resized to ``resize_size`` (no antialiasing), center-cropped to ``crop_size``, scaled
    to float in [0, 1], normalised with ``mean``/``std`` and returned as ``(..., C, T, H, W)``,
    the layout the video models take.

        >>> import fiamma
        >>> tf = VideoClassification(crop_size=(112, 112), resize_size=(128, 171))
        >>> tuple(tf(fiamma.zeros(4, 3, 140, 180, dtype=fiamma.uint8)).shape)
        (3, 4, 112, 112)
    """

    def __init__(self, *, crop_size, resize_size, mean=(0.43216, 0.394666, 0.37645),
                 std=(0.22803, 0.22145, 0.216989), interpolation=InterpolationMode.BILINEAR):
        super().__init__()
        self.crop_size = list(crop_size)
        self.resize_size = list(resize_size)
        self.mean = list(mean)
        self.std = list(std)
        self.interpolation = interpolation

    def forward(self, vid):
        if not isinstance(vid, fiamma.Tensor) or vid.ndim not in (4, 5):
            raise ValueError("VideoClassification: expected a tensor (T, C, H, W) or (N, T, C, H, "
                             f"W), got {getattr(vid, 'shape', type(vid).__name__)}")
        single = vid.ndim == 4
        if single:
            vid = vid.unsqueeze(0)
        n, t, c, h, w = vid.shape
        vid = vid.reshape(-1, c, h, w)
        vid = F.resize(vid, self.resize_size, interpolation=self.interpolation, antialias=False)
        vid = F.center_crop(vid, self.crop_size)
        vid = F.convert_image_dtype(vid, fiamma.float32)
        vid = F.normalize(vid, mean=self.mean, std=self.std)
        vid = vid.reshape(n, t, c, *vid.shape[-2:]).permute(0, 2, 1, 3, 4)
        return vid.squeeze(0) if single else vid

    def __repr__(self):
        return (f"{type(self).__name__}(\n    crop_size={self.crop_size}\n"
                f"    resize_size={self.resize_size}\n    mean={self.mean}\n"
                f"    std={self.std}\n    interpolation={self.interpolation}\n)")

    def describe(self):
        return ("Accepts batched ``(B, T, C, H, W)`` and single ``(T, C, H, W)`` video frame "
                "``fiamma.Tensor`` objects. The frames are resized to "
                f"``resize_size={self.resize_size}`` using ``interpolation={self.interpolation}"
                f"``, followed by a central crop of ``crop_size={self.crop_size}``. Finally the "
                "values are first rescaled to ``[0.0, 1.0]`` and then normalized using "
                f"``mean={self.mean}`` and ``std={self.std}``. Finally the output dimensions are "
                "permuted to ``(..., C, T, H, W)`` tensors.")


class OpticalFlow(Module):
    """The inference transform of the optical-flow weights: both images (PIL or tensors) to
    float in [0, 1], then normalised to [-1, 1] (mean 0.5, std 0.5 per channel).

        >>> import fiamma
        >>> a, b = OpticalFlow()(fiamma.zeros(3, 8, 8, dtype=fiamma.uint8),
        ...                      fiamma.zeros(3, 8, 8, dtype=fiamma.uint8))
        >>> float(a.min())
        -1.0
    """

    def forward(self, img1, img2):
        out = []
        for img in (img1, img2):
            if not isinstance(img, fiamma.Tensor):
                img = F.pil_to_tensor(img)
            img = F.convert_image_dtype(img, fiamma.float32)
            out.append(F.normalize(img, mean=[0.5, 0.5, 0.5], std=[0.5, 0.5, 0.5]).contiguous())
        return tuple(out)

    def __repr__(self):
        return self.__class__.__name__ + "()"

    def describe(self):
        return ("Accepts ``PIL.Image``, batched ``(B, C, H, W)`` and single ``(C, H, W)`` image "
                "``fiamma.Tensor`` objects. The images are rescaled to ``[-1.0, 1.0]``.")
