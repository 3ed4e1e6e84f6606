"""Transform classes (torchvision.transforms' names, arguments, defaults and reprs).

Random parameters are drawn from fiamma's default generator, so `fiamma.manual_seed` makes a
pipeline reproducible.

Example:
    >>> import fiamma
    >>> from fiamma.vision import transforms as T
    >>> tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
    ...                 T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
"""

import math
import numbers
from collections.abc import Sequence

import fiamma
from fiamma import nn
from fiamma.vision.transforms import functional as F
from fiamma.vision.transforms.functional import InterpolationMode, _interp

__all__ = [
    "Compose",
    "ToTensor",
    "PILToTensor",
    "ToPILImage",
    "ConvertImageDtype",
    "Normalize",
    "Resize",
    "CenterCrop",
    "RandomCrop",
    "RandomResizedCrop",
    "FiveCrop",
    "TenCrop",
    "Pad",
    "RandomHorizontalFlip",
    "RandomVerticalFlip",
    "ColorJitter",
    "Grayscale",
    "RandomGrayscale",
    "RandomRotation",
    "RandomAffine",
    "RandomPerspective",
    "GaussianBlur",
    "RandomErasing",
    "RandomInvert",
    "RandomPosterize",
    "RandomSolarize",
    "RandomAdjustSharpness",
    "RandomAutocontrast",
    "RandomEqualize",
    "Lambda",
    "RandomApply",
    "RandomChoice",
    "RandomOrder",
    "InterpolationMode",
]


# ---------------------------------------------------------------- random draws (fiamma's generator)


def _uniform(lo, hi):
    return float(lo) + (float(hi) - float(lo)) * fiamma.rand(1).item()


def _randint(lo, hi):
    """Integer in [lo, hi)."""
    return int(fiamma.randint(int(lo), int(hi), (1,)).item())


def _coin(p):
    return fiamma.rand(1).item() < p


def _setup_size(size, op, error_msg="Please provide only two dimensions (h, w) for size."):
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    if isinstance(size, Sequence) and len(size) == 1:
        return size[0], size[0]
    if not isinstance(size, Sequence) or len(size) != 2:
        raise ValueError(f"{op}: {error_msg} Got {size!r}")
    return tuple(size)


def _check_p(p, op):
    if not (isinstance(p, numbers.Number) and 0.0 <= p <= 1.0):
        raise ValueError(f"{op}: probability p should be between 0 and 1, got {p!r}")
    return p


def _range(value, name, op, center=None, bound=None):
    """A number x means (-x, x) (or center +- x); a pair is kept; checks sign and order."""
    if isinstance(value, numbers.Number):
        if value < 0:
            raise ValueError(
                f"{op}: if {name} is a single number, it must be non-negative, got {value}"
            )
        return [-value, value] if center is None else [center - value, center + value]
    if not isinstance(value, Sequence) or len(value) != 2:
        raise ValueError(
            f"{op}: {name} should be a number or a sequence of length 2, got {value!r}"
        )
    return [float(v) for v in value]


class Compose:
    """Chain transforms: Compose([T.CenterCrop(10), T.PILToTensor()])."""

    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        ts = self.transforms
        n = len(ts)
        k = 0
        while k < n:
            t = ts[k]
            if type(t) is ToTensor and k + 1 < n and type(ts[k + 1]) is Normalize:
                # ToTensor's output is a new tensor no one else holds: it is normalised in place,
                # plane by plane while in cache (same values as the two steps one after another)
                img = F._to_tensor_normalize(img, ts[k + 1].mean, ts[k + 1].std)
                k += 2
                continue
            img = t(img)
            k += 1
        return img

    def __repr__(self):
        body = "".join(f"\n    {t}" for t in self.transforms)
        return f"{self.__class__.__name__}({body}\n)"


class ToTensor:
    """PIL image / HWC ndarray -> float tensor (C, H, W) in [0, 1]."""

    def __call__(self, pic):
        return F.to_tensor(pic)

    def __repr__(self):
        return f"{self.__class__.__name__}()"


class PILToTensor:
    """PIL image -> tensor (C, H, W) keeping the image's dtype."""

    def __call__(self, pic):
        return F.pil_to_tensor(pic)

    def __repr__(self):
        return f"{self.__class__.__name__}()"


class ToPILImage:
    """Tensor (C, H, W) or ndarray (H, W, C) -> PIL image."""

    def __init__(self, mode=None):
        self.mode = mode

    def __call__(self, pic):
        return F.to_pil_image(pic, self.mode)

    def __repr__(self):
        return f"{self.__class__.__name__}(" + (f"mode={self.mode}" if self.mode else "") + ")"


class ConvertImageDtype(nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype

    def forward(self, image):
        return F.convert_image_dtype(image, self.dtype)

    def extra_repr(self):
        return ""

    def __repr__(self):
        return f"{self.__class__.__name__}()"


class _Repr(nn.Module):
    """Reprs as torchvision writes them: Name(arg=value, ...)."""

    def _repr_args(self):
        return ""

    def __repr__(self):
        return f"{self.__class__.__name__}({self._repr_args()})"


class Normalize(_Repr):
    """Per-channel (x - mean) / std on float tensors (..., C, H, W)."""

    def __init__(self, mean, std, inplace=False):
        super().__init__()
        self.mean, self.std, self.inplace = mean, std, inplace

    def forward(self, tensor):
        return F.normalize(tensor, self.mean, self.std, self.inplace)

    def _repr_args(self):
        return f"mean={self.mean}, std={self.std}"


class Resize(_Repr):
    """Resize to (h, w), or the smaller edge to size (int), optionally capping the longer edge."""

    def __init__(
        self, size, interpolation=InterpolationMode.BILINEAR, max_size=None, antialias=True
    ):
        super().__init__()
        if size is not None and not isinstance(size, (int, Sequence)):
            raise TypeError(f"Resize: size should be an int or a sequence, got {type(size)}")
        if isinstance(size, Sequence) and len(size) not in (1, 2):
            raise ValueError(
                f"Resize: if size is a sequence, it should have 1 or 2 values, got {len(size)}"
            )
        if size is not None and any(s <= 0 for s in ([size] if isinstance(size, int) else size)):
            raise ValueError(f"Resize: size should be positive, got {size}")
        if size is None and max_size is None:
            raise ValueError("Resize: size and max_size cannot both be None")
        self.size, self.max_size, self.antialias = size, max_size, antialias
        self.interpolation = _interp(interpolation, "Resize")

    def forward(self, img):
        return F.resize(img, self.size, self.interpolation, self.max_size, self.antialias)

    def _repr_args(self):
        return (
            f"size={self.size}, interpolation={self.interpolation.value}, "
            f"max_size={self.max_size}, antialias={self.antialias}"
        )


class CenterCrop(_Repr):
    def __init__(self, size):
        super().__init__()
        self.size = _setup_size(size, "CenterCrop")

    def forward(self, img):
        return F.center_crop(img, self.size)

    def _repr_args(self):
        return f"size={self.size}"


class RandomCrop(_Repr):
    """Crop at a random location, after optional padding."""

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant"):
        super().__init__()
        self.size = _setup_size(size, "RandomCrop")
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError(
                f"RandomCrop: padding_mode should be constant, edge, reflect or "
                f"symmetric, got {padding_mode!r}"
            )
        self.padding, self.pad_if_needed, self.fill, self.padding_mode = (
            padding,
            pad_if_needed,
            fill,
            padding_mode,
        )

    @staticmethod
    def get_params(img, output_size):
        _, h, w = F.get_dimensions(img)
        th, tw = output_size
        if h < th or w < tw:
            raise ValueError(
                f"RandomCrop: required crop size {(th, tw)} is larger than the "
                f"input image size {(h, w)}"
            )
        if w == tw and h == th:
            return 0, 0, h, w
        return _randint(0, h - th + 1), _randint(0, w - tw + 1), th, tw

    def forward(self, img):
        if self.padding is not None:
            img = F.pad(img, self.padding, self.fill, self.padding_mode)
        _, h, w = F.get_dimensions(img)
        if self.pad_if_needed and w < self.size[1]:
            img = F.pad(img, [self.size[1] - w, 0], self.fill, self.padding_mode)
        if self.pad_if_needed and h < self.size[0]:
            img = F.pad(img, [0, self.size[0] - h], self.fill, self.padding_mode)
        i, j, th, tw = self.get_params(img, self.size)
        return F.crop(img, i, j, th, tw)

    def _repr_args(self):
        return f"size={self.size}, padding={self.padding}"


class RandomResizedCrop(_Repr):
    """Crop a random area (scale) with a random aspect ratio, then resize to size."""

    def __init__(
        self,
        size,
        scale=(0.08, 1.0),
        ratio=(3.0 / 4.0, 4.0 / 3.0),
        interpolation=InterpolationMode.BILINEAR,
        antialias=True,
    ):
        super().__init__()
        self.size = _setup_size(size, "RandomResizedCrop")
        if not isinstance(scale, Sequence) or len(scale) != 2:
            raise TypeError(
                f"RandomResizedCrop: scale should be a sequence of 2 floats, got {scale!r}"
            )
        if not isinstance(ratio, Sequence) or len(ratio) != 2:
            raise TypeError(
                f"RandomResizedCrop: ratio should be a sequence of 2 floats, got {ratio!r}"
            )
        if scale[0] > scale[1] or ratio[0] > ratio[1]:
            raise ValueError(
                f"RandomResizedCrop: scale and ratio should be of kind (min, max), "
                f"got scale={scale}, ratio={ratio}"
            )
        self.scale, self.ratio, self.antialias = scale, ratio, antialias
        self.interpolation = _interp(interpolation, "RandomResizedCrop")

    @staticmethod
    def get_params(img, scale, ratio):
        _, height, width = F.get_dimensions(img)
        area = height * width
        log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
        # one draw for all ten attempts (2 numbers each) and the window position (2 more)
        u = fiamma.rand(22).tolist()
        for a in range(10):
            target = area * (scale[0] + (scale[1] - scale[0]) * u[2 * a])
            aspect = math.exp(log_lo + (log_hi - log_lo) * u[2 * a + 1])
            w = int(round(math.sqrt(target * aspect)))
            h = int(round(math.sqrt(target / aspect)))
            if 0 < w <= width and 0 < h <= height:
                return int(u[20] * (height - h + 1)), int(u[21] * (width - w + 1)), h, w
        in_ratio = width / height
        if in_ratio < min(ratio):
            w, h = width, int(round(width / min(ratio)))
        elif in_ratio > max(ratio):
            h, w = height, int(round(height * max(ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def forward(self, img):
        i, j, h, w = self.get_params(img, self.scale, self.ratio)
        return F.resized_crop(
            img, i, j, h, w, self.size, self.interpolation, antialias=self.antialias
        )

    def _repr_args(self):
        return (
            f"size={self.size}, scale={tuple(round(s, 4) for s in self.scale)}, "
            f"ratio={tuple(round(r, 4) for r in self.ratio)}, "
            f"interpolation={self.interpolation.value}, antialias={self.antialias}"
        )


class FiveCrop(_Repr):
    def __init__(self, size):
        super().__init__()
        self.size = _setup_size(size, "FiveCrop")

    def forward(self, img):
        return F.five_crop(img, self.size)

    def _repr_args(self):
        return f"size={self.size}"


class TenCrop(_Repr):
    def __init__(self, size, vertical_flip=False):
        super().__init__()
        self.size = _setup_size(size, "TenCrop")
        self.vertical_flip = vertical_flip

    def forward(self, img):
        return F.ten_crop(img, self.size, self.vertical_flip)

    def _repr_args(self):
        return f"size={self.size}, vertical_flip={self.vertical_flip}"


class Pad(_Repr):
    def __init__(self, padding, fill=0, padding_mode="constant"):
        super().__init__()
        if not isinstance(padding, (numbers.Number, tuple, list)):
            raise TypeError(f"Pad: got inappropriate padding arg {padding!r}")
        if isinstance(padding, Sequence) and len(padding) not in (1, 2, 4):
            raise ValueError(
                f"Pad: padding must be an int or a 1, 2, or 4 element sequence, "
                f"got {len(padding)} elements"
            )
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError(
                f"Pad: padding_mode should be constant, edge, reflect or symmetric, "
                f"got {padding_mode!r}"
            )
        self.padding, self.fill, self.padding_mode = padding, fill, padding_mode

    def forward(self, img):
        return F.pad(img, self.padding, self.fill, self.padding_mode)

    def _repr_args(self):
        return f"padding={self.padding}, fill={self.fill}, padding_mode={self.padding_mode}"


class _RandomP(_Repr):
    _fn = None

    def __init__(self, p=0.5):
        super().__init__()
        self.p = _check_p(p, self.__class__.__name__)

    def forward(self, img):
        return type(self)._fn(img) if _coin(self.p) else img

    def _repr_args(self):
        return f"p={self.p}"


class RandomHorizontalFlip(_RandomP):
    _fn = staticmethod(F.hflip)


class RandomVerticalFlip(_RandomP):
    _fn = staticmethod(F.vflip)


class RandomInvert(_RandomP):
    _fn = staticmethod(F.invert)


class RandomAutocontrast(_RandomP):
    _fn = staticmethod(F.autocontrast)


class RandomEqualize(_RandomP):
    _fn = staticmethod(F.equalize)


class RandomPosterize(_Repr):
    def __init__(self, bits, p=0.5):
        super().__init__()
        if not 0 <= bits <= 8:
            raise ValueError(f"RandomPosterize: bits should be in [0, 8], got {bits}")
        self.bits, self.p = bits, _check_p(p, "RandomPosterize")

    def forward(self, img):
        return F.posterize(img, self.bits) if _coin(self.p) else img

    def _repr_args(self):
        return f"bits={self.bits},p={self.p}"


class RandomSolarize(_Repr):
    def __init__(self, threshold, p=0.5):
        super().__init__()
        self.threshold, self.p = threshold, _check_p(p, "RandomSolarize")

    def forward(self, img):
        return F.solarize(img, self.threshold) if _coin(self.p) else img

    def _repr_args(self):
        return f"threshold={self.threshold},p={self.p}"


class RandomAdjustSharpness(_Repr):
    def __init__(self, sharpness_factor, p=0.5):
        super().__init__()
        if sharpness_factor < 0:
            raise ValueError(
                f"RandomAdjustSharpness: sharpness_factor must be >= 0, got {sharpness_factor}"
            )
        self.sharpness_factor, self.p = sharpness_factor, _check_p(p, "RandomAdjustSharpness")

    def forward(self, img):
        return F.adjust_sharpness(img, self.sharpness_factor) if _coin(self.p) else img

    def _repr_args(self):
        return f"sharpness_factor={self.sharpness_factor},p={self.p}"


class ColorJitter(_Repr):
    """Random brightness, contrast, saturation and hue, applied in a random order."""

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        super().__init__()
        self.brightness = self._check(brightness, "brightness")
        self.contrast = self._check(contrast, "contrast")
        self.saturation = self._check(saturation, "saturation")
        self.hue = self._check(hue, "hue", center=0, bound=(-0.5, 0.5), clip_first_on_zero=False)

    @staticmethod
    def _check(value, name, center=1, bound=(0, float("inf")), clip_first_on_zero=True):
        if isinstance(value, numbers.Number):
            if value < 0:
                raise ValueError(
                    f"ColorJitter: if {name} is a single number, it must be "
                    f"non negative, got {value}"
                )
            value = [center - float(value), center + float(value)]
            if clip_first_on_zero:
                value[0] = max(value[0], 0.0)
        elif isinstance(value, (tuple, list)) and len(value) == 2:
            value = [float(value[0]), float(value[1])]
        else:
            raise TypeError(
                f"ColorJitter: {name} should be a single number or a list/tuple "
                f"with length 2, got {value!r}"
            )
        if not bound[0] <= value[0] <= value[1] <= bound[1]:
            raise ValueError(f"ColorJitter: {name} values should be between {bound}, got {value}")
        if value[0] == value[1] == center:
            return None
        return tuple(value)

    @staticmethod
    def get_params(brightness, contrast, saturation, hue):
        order = fiamma.randperm(4).tolist()
        b = None if brightness is None else _uniform(*brightness)
        c = None if contrast is None else _uniform(*contrast)
        s = None if saturation is None else _uniform(*saturation)
        h = None if hue is None else _uniform(*hue)
        return order, b, c, s, h

    def forward(self, img):
        order, b, c, s, h = self.get_params(
            self.brightness, self.contrast, self.saturation, self.hue
        )
        for fn_id in order:
            if fn_id == 0 and b is not None:
                img = F.adjust_brightness(img, b)
            elif fn_id == 1 and c is not None:
                img = F.adjust_contrast(img, c)
            elif fn_id == 2 and s is not None:
                img = F.adjust_saturation(img, s)
            elif fn_id == 3 and h is not None:
                img = F.adjust_hue(img, h)
        return img

    def _repr_args(self):
        return (
            f"brightness={self.brightness}, contrast={self.contrast}, "
            f"saturation={self.saturation}, hue={self.hue}"
        )


class Grayscale(_Repr):
    def __init__(self, num_output_channels=1):
        super().__init__()
        if num_output_channels not in (1, 3):
            raise ValueError(
                f"Grayscale: num_output_channels should be 1 or 3, got {num_output_channels}"
            )
        self.num_output_channels = num_output_channels

    def forward(self, img):
        return F.rgb_to_grayscale(img, self.num_output_channels)

    def _repr_args(self):
        return f"num_output_channels={self.num_output_channels}"


class RandomGrayscale(_RandomP):
    def __init__(self, p=0.1):
        super().__init__(p)

    def forward(self, img):
        c = F.get_dimensions(img)[0]
        return F.rgb_to_grayscale(img, c) if _coin(self.p) else img


def _fill_for(img, fill):
    if fiamma.is_tensor(img) and isinstance(fill, (int, float)):
        return [float(fill)] * F.get_dimensions(img)[0]
    if fiamma.is_tensor(img) and fill is not None:
        return [float(f) for f in fill]
    return fill


def _check_fill(fill, op):
    if fill is None:
        return 0
    if not isinstance(fill, (numbers.Number, Sequence)):
        raise TypeError(f"{op}: fill should be a number or a sequence, got {fill!r}")
    return fill


class RandomRotation(_Repr):
    def __init__(
        self, degrees, interpolation=InterpolationMode.NEAREST, expand=False, center=None, fill=0
    ):
        super().__init__()
        self.degrees = _range(degrees, "degrees", "RandomRotation")
        if center is not None and (not isinstance(center, Sequence) or len(center) != 2):
            raise ValueError(
                f"RandomRotation: center should be a sequence of length 2, got {center!r}"
            )
        self.interpolation = _interp(interpolation, "RandomRotation")
        self.expand, self.center, self.fill = expand, center, _check_fill(fill, "RandomRotation")

    @staticmethod
    def get_params(degrees):
        return _uniform(degrees[0], degrees[1])

    def forward(self, img):
        angle = self.get_params(self.degrees)
        return F.rotate(
            img, angle, self.interpolation, self.expand, self.center, _fill_for(img, self.fill)
        )

    def _repr_args(self):
        s = (f"degrees={self.degrees}, interpolation={self.interpolation.value}, "
             f"expand={self.expand}")
        if self.center is not None:
            s += f", center={self.center}"
        if self.fill is not None:
            s += f", fill={self.fill}"
        return s


class RandomAffine(_Repr):
    def __init__(
        self,
        degrees,
        translate=None,
        scale=None,
        shear=None,
        interpolation=InterpolationMode.NEAREST,
        fill=0,
        center=None,
    ):
        super().__init__()
        op = "RandomAffine"
        self.degrees = _range(degrees, "degrees", op)
        if translate is not None:
            if len(translate) != 2 or any(not 0.0 <= t <= 1.0 for t in translate):
                raise ValueError(
                    f"{op}: translate should be 2 values between 0 and 1, got {translate}"
                )
        if scale is not None:
            if len(scale) != 2 or any(s <= 0 for s in scale):
                raise ValueError(f"{op}: scale should be 2 positive values, got {scale}")
        if shear is not None:
            if isinstance(shear, numbers.Number):
                shear = _range(shear, "shear", op)
            elif len(shear) not in (2, 4):
                raise ValueError(f"{op}: shear should be a number or 2 or 4 values, got {shear}")
            shear = [float(s) for s in shear]
        self.translate, self.scale, self.shear, self.center = translate, scale, shear, center
        self.interpolation = _interp(interpolation, op)
        self.fill = _check_fill(fill, op)

    @staticmethod
    def get_params(degrees, translate, scale_ranges, shears, img_size):
        angle = _uniform(degrees[0], degrees[1])
        if translate is not None:
            max_dx = float(translate[0] * img_size[0])
            max_dy = float(translate[1] * img_size[1])
            tx = int(round(_uniform(-max_dx, max_dx)))
            ty = int(round(_uniform(-max_dy, max_dy)))
            translations = (tx, ty)
        else:
            translations = (0, 0)
        scale = 1.0 if scale_ranges is None else _uniform(scale_ranges[0], scale_ranges[1])
        sx = sy = 0.0
        if shears is not None:
            sx = _uniform(shears[0], shears[1])
            if len(shears) == 4:
                sy = _uniform(shears[2], shears[3])
        return angle, translations, scale, (sx, sy)

    def forward(self, img):
        _, h, w = F.get_dimensions(img)
        ret = self.get_params(self.degrees, self.translate, self.scale, self.shear, [w, h])
        return F.affine(
            img,
            *ret,
            interpolation=self.interpolation,
            fill=_fill_for(img, self.fill),
            center=self.center,
        )

    def _repr_args(self):
        s = f"degrees={self.degrees}"
        for k in ("translate", "scale", "shear"):
            if getattr(self, k) is not None:
                s += f", {k}={getattr(self, k)}"
        if self.interpolation != InterpolationMode.NEAREST:
            s += f", interpolation={self.interpolation.value}"
        if self.fill != 0:
            s += f", fill={self.fill}"
        if self.center is not None:
            s += f", center={self.center}"
        return s


class RandomPerspective(_Repr):
    def __init__(
        self, distortion_scale=0.5, p=0.5, interpolation=InterpolationMode.BILINEAR, fill=0
    ):
        super().__init__()
        if not 0 <= distortion_scale <= 1:
            raise ValueError(
                f"RandomPerspective: distortion_scale should be in [0, 1], got {distortion_scale}"
            )
        self.p = _check_p(p, "RandomPerspective")
        self.distortion_scale = distortion_scale
        self.interpolation = _interp(interpolation, "RandomPerspective")
        self.fill = _check_fill(fill, "RandomPerspective")

    @staticmethod
    def get_params(width, height, distortion_scale):
        hh, hw = height // 2, width // 2
        dx, dy = int(distortion_scale * hw), int(distortion_scale * hh)
        tl = [_randint(0, dx + 1), _randint(0, dy + 1)]
        tr = [_randint(width - dx - 1, width), _randint(0, dy + 1)]
        br = [_randint(width - dx - 1, width), _randint(height - dy - 1, height)]
        bl = [_randint(0, dx + 1), _randint(height - dy - 1, height)]
        start = [[0, 0], [width - 1, 0], [width - 1, height - 1], [0, height - 1]]
        return start, [tl, tr, br, bl]

    def forward(self, img):
        if _coin(self.p):
            _, h, w = F.get_dimensions(img)
            start, end = self.get_params(w, h, self.distortion_scale)
            return F.perspective(img, start, end, self.interpolation, _fill_for(img, self.fill))
        return img

    def _repr_args(self):
        return f"p={self.p}"


class GaussianBlur(_Repr):
    def __init__(self, kernel_size, sigma=(0.1, 2.0)):
        super().__init__()
        self.kernel_size = _setup_size(
            kernel_size, "GaussianBlur", "Kernel size should be a tuple/list of two integers."
        )
        for ks in self.kernel_size:
            if ks <= 0 or ks % 2 == 0:
                raise ValueError(
                    f"GaussianBlur: kernel size value should be an odd and positive "
                    f"number, got {kernel_size}"
                )
        if isinstance(sigma, numbers.Number):
            if sigma <= 0:
                raise ValueError(
                    f"GaussianBlur: if sigma is a single number, it must be positive, got {sigma}"
                )
            sigma = (sigma, sigma)
        elif isinstance(sigma, Sequence) and len(sigma) == 2:
            if not 0.0 < sigma[0] <= sigma[1]:
                raise ValueError(
                    f"GaussianBlur: sigma values should be positive and of the form "
                    f"(min, max), got {sigma}"
                )
        else:
            raise ValueError(
                f"GaussianBlur: sigma should be a single number or a list/tuple "
                f"with length 2, got {sigma!r}"
            )
        self.sigma = sigma

    @staticmethod
    def get_params(sigma_min, sigma_max):
        return _uniform(sigma_min, sigma_max)

    def forward(self, img):
        s = self.get_params(self.sigma[0], self.sigma[1])
        return F.gaussian_blur(img, self.kernel_size, [s, s])

    def _repr_args(self):
        return f"kernel_size={self.kernel_size}, sigma={self.sigma}"


class RandomErasing(_Repr):
    """Erase a random rectangle of a tensor image with value (number, per-channel list or
    'random' for normal noise)."""

    def __init__(self, p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0, inplace=False):
        super().__init__()
        op = "RandomErasing"
        if not isinstance(value, (numbers.Number, str, tuple, list)):
            raise TypeError(f"{op}: argument value should be either a number or str or a sequence")
        if isinstance(value, str) and value != "random":
            raise ValueError(f"{op}: if value is str, it should be 'random', got {value!r}")
        if scale[0] > scale[1] or ratio[0] > ratio[1]:
            raise ValueError(f"{op}: scale and ratio should be of kind (min, max)")
        if scale[0] < 0 or scale[1] > 1:
            raise ValueError(f"{op}: scale should be between 0 and 1, got {scale}")
        self.p = _check_p(p, op)
        self.scale, self.ratio, self.value, self.inplace = scale, ratio, value, inplace

    @staticmethod
    def get_params(img, scale, ratio, value=None):
        c, h, w = img.shape[-3], img.shape[-2], img.shape[-1]
        area = h * w
        log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
        for _ in range(10):
            erase_area = area * _uniform(scale[0], scale[1])
            aspect = math.exp(_uniform(log_lo, log_hi))
            eh = int(round(math.sqrt(erase_area * aspect)))
            ew = int(round(math.sqrt(erase_area / aspect)))
            if not (eh < h and ew < w):
                continue
            if value is None:
                v = fiamma.randn(
                    c, eh, ew, dtype=img.dtype if img.is_floating_point() else fiamma.float32
                )
            else:
                v = fiamma.tensor(value, dtype=img.dtype).reshape(-1, 1, 1)
            return _randint(0, h - eh + 1), _randint(0, w - ew + 1), eh, ew, v
        return 0, 0, h, w, img

    def forward(self, img):
        if not fiamma.is_tensor(img):
            raise TypeError(
                f"RandomErasing: img should be a fiamma Tensor, got {type(img).__name__}"
            )
        if _coin(self.p):
            if isinstance(self.value, (int, float)):
                value = [float(self.value)]
            elif isinstance(self.value, str):
                value = None
            else:
                value = [float(v) for v in self.value]
            if value is not None and len(value) not in (1, img.shape[-3]):
                raise ValueError(
                    f"RandomErasing: value should be a single number or have "
                    f"{img.shape[-3]} elements (one per channel), got {len(value)}"
                )
            x, y, h, w, v = self.get_params(img, self.scale, self.ratio, value)
            return F.erase(img, x, y, h, w, v, self.inplace)
        return img

    def _repr_args(self):
        return (
            f"p={self.p}, scale={self.scale}, ratio={self.ratio}, value={self.value}, "
            f"inplace={self.inplace}"
        )


class Lambda:
    """Apply a user function as a transform."""

    def __init__(self, lambd):
        if not callable(lambd):
            raise TypeError(f"Lambda: argument should be callable, got {type(lambd).__name__!r}")
        self.lambd = lambd

    def __call__(self, img):
        return self.lambd(img)

    def __repr__(self):
        return f"{self.__class__.__name__}()"


class RandomApply(nn.Module):
    """Apply a list of transforms together with probability p."""

    def __init__(self, transforms, p=0.5):
        super().__init__()
        self.transforms = transforms
        self.p = _check_p(p, "RandomApply")

    def forward(self, img):
        if not _coin(self.p):
            return img
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self):
        body = "".join(f"\n    {t}" for t in self.transforms)
        return f"{self.__class__.__name__}(\n    p={self.p}{body}\n)"


class RandomChoice:
    """Apply one transform picked at random (weights p)."""

    def __init__(self, transforms, p=None):
        if not isinstance(transforms, Sequence):
            raise TypeError("RandomChoice: argument transforms should be a sequence")
        if p is not None and len(p) != len(transforms):
            raise ValueError(
                f"RandomChoice: length of p doesn't match the number of transforms: "
                f"{len(p)} != {len(transforms)}"
            )
        self.transforms = transforms
        total = sum(p) if p is not None else None
        self.p = [w / total for w in p] if p is not None else [1.0] * len(transforms)

    def __call__(self, *args):
        idx = int(fiamma.multinomial(fiamma.tensor(self.p), 1).item())
        return self.transforms[idx](*args)

    def __repr__(self):
        return f"{Compose.__repr__(self)}(p={self.p})"


class RandomOrder:
    """Apply the transforms in a random order."""

    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for i in fiamma.randperm(len(self.transforms)).tolist():
            img = self.transforms[i](img)
        return img

    __repr__ = Compose.__repr__
