"""The v2 transform classes (torchvision.transforms.v2's names, arguments and defaults)."""
import math

import fiamma
from fiamma.vision import tv_tensors as tv
from fiamma.vision.transforms import _transforms as T1, functional as F1
from fiamma.vision.transforms.v2 import functional as F
from fiamma.vision.transforms.v2._transform import (
    RandomTransform,
    Transform,
    flatten,
    is_pure_tensor,
    query_chw,
    query_size,
    unflatten,
)
from fiamma.vision.transforms.v2.functional import InterpolationMode

__all__ = [
    "Transform", "Compose", "RandomApply", "RandomChoice", "RandomOrder", "Lambda",
    "RandomHorizontalFlip", "RandomVerticalFlip", "Resize", "CenterCrop", "RandomCrop",
    "RandomResizedCrop", "Pad", "RandomZoomOut", "RandomIoUCrop", "RandomAffine",
    "RandomRotation", "RandomPerspective", "ElasticTransform", "ColorJitter",
    "RandomPhotometricDistort",
    "Grayscale", "Normalize",
    "GaussianBlur", "RandomErasing", "ToImage", "PILToTensor", "ToDtype", "ToPureTensor",
    "ClampBoundingBoxes", "SanitizeBoundingBoxes", "ConvertBoundingBoxFormat",
]

_uniform, _randint = T1._uniform, T1._randint


def _fill_for(fill, inpt):
    """Per-type fill: a dict maps tv_tensor types (or "others") to fills."""
    if isinstance(fill, dict):
        for cls in type(inpt).__mro__:
            if cls in fill:
                return fill[cls]
        return fill.get("others", 0)
    return fill


# ---------------------------------------------------------------------------- containers

class Compose(Transform):
    """Apply ``transforms`` in order to the whole sample."""

    def __init__(self, transforms):
        super().__init__()
        if not isinstance(transforms, (list, tuple)):
            raise TypeError("Compose: argument transforms should be a sequence of callables")
        if not transforms:
            raise ValueError("Compose: pass at least one transform")
        self.transforms = list(transforms)

    def forward(self, *inputs):
        needs_unpack = len(inputs) > 1
        for t in self.transforms:
            out = t(*inputs)
            inputs = out if needs_unpack else (out,)
        return out

    def __repr__(self):
        body = "".join(f"\n      {t}" for t in self.transforms)
        return f"{type(self).__name__}({body}\n)"


class RandomApply(Transform):
    """Apply all ``transforms`` with probability ``p``, else none."""

    def __init__(self, transforms, p=0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"RandomApply: p should be a float in [0, 1], got {p}")
        self.transforms = list(transforms)
        self.p = p

    def forward(self, *inputs):
        out = inputs if len(inputs) > 1 else inputs[0]
        if fiamma.rand(1).item() >= self.p:
            return out
        for t in self.transforms:
            out = t(out)
        return out


class RandomChoice(Transform):
    """Apply one transform picked with probabilities ``p`` (default uniform)."""

    def __init__(self, transforms, p=None):
        super().__init__()
        if p is None:
            p = [1.0] * len(transforms)
        if len(p) != len(transforms):
            raise ValueError(f"RandomChoice: length of p doesn't match the number of "
                             f"transforms: {len(p)} != {len(transforms)}")
        self.transforms = list(transforms)
        s = float(sum(p))
        self.p = [v / s for v in p]

    def forward(self, *inputs):
        idx = int(fiamma.multinomial(fiamma.tensor(self.p), 1).item())
        return self.transforms[idx](*inputs)


class RandomOrder(Transform):
    """Apply ``transforms`` in a random order."""

    def __init__(self, transforms):
        super().__init__()
        self.transforms = list(transforms)

    def forward(self, *inputs):
        out = inputs if len(inputs) > 1 else inputs[0]
        for i in fiamma.randperm(len(self.transforms)).tolist():
            out = self.transforms[i](out)
        return out


class Lambda(Transform):
    """Apply ``lambd`` to the leaves of the types in ``types`` (default: every leaf)."""

    def __init__(self, lambd, *types):
        super().__init__()
        if not callable(lambd):
            raise TypeError(f"Lambda: argument should be callable, got {type(lambd).__name__}")
        self.lambd = lambd
        self.types = types or (object,)

    def _needs(self, flat):
        return [isinstance(x, self.types) for x in flat]

    def transform(self, inpt, params):
        return self.lambd(inpt)


# ---------------------------------------------------------------------------- geometry

class RandomHorizontalFlip(RandomTransform):
    def transform(self, inpt, params):
        return F.horizontal_flip(inpt)

    def _repr_items(self):
        return [("p", self.p)]


class RandomVerticalFlip(RandomTransform):
    def transform(self, inpt, params):
        return F.vertical_flip(inpt)

    def _repr_items(self):
        return [("p", self.p)]


class Resize(Transform):
    def __init__(self, size, interpolation=InterpolationMode.BILINEAR, max_size=None,
                 antialias=True):
        super().__init__()
        if isinstance(size, int):
            size = [size]
        elif size is not None:
            size = list(size)
            if len(size) not in (1, 2):
                raise ValueError(f"Resize: size can be an int, a 1- or 2-sequence or None, "
                                 f"got {size}")
        self.size, self.interpolation = size, interpolation
        self.max_size, self.antialias = max_size, antialias

    def transform(self, inpt, params):
        return F.resize(inpt, self.size, self.interpolation, self.max_size, self.antialias)

    def _repr_items(self):
        return [("size", self.size), ("interpolation", self.interpolation),
                ("antialias", self.antialias)]


class CenterCrop(Transform):
    def __init__(self, size):
        super().__init__()
        self.size = T1._setup_size(size, "CenterCrop")

    def transform(self, inpt, params):
        return F.center_crop(inpt, list(self.size))

    def _repr_items(self):
        return [("size", self.size)]


class RandomCrop(Transform):
    """Random ``size`` window; ``padding`` first, ``pad_if_needed`` pads a small input."""

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant"):
        super().__init__()
        self.size = T1._setup_size(size, "RandomCrop")
        self.padding = None if padding is None else F.F1._ltrb(padding, "RandomCrop")
        self.pad_if_needed, self.fill, self.padding_mode = pad_if_needed, fill, padding_mode

    def make_params(self, flat_inputs):
        h, w = query_size(flat_inputs)
        ch, cw = self.size
        pad = list(self.padding) if self.padding is not None else [0, 0, 0, 0]
        h += pad[1] + pad[3]
        w += pad[0] + pad[2]
        if self.pad_if_needed and w < cw:
            d = cw - w
            pad[0] += d
            pad[2] += d
            w += 2 * d
        if self.pad_if_needed and h < ch:
            d = ch - h
            pad[1] += d
            pad[3] += d
            h += 2 * d
        if h < ch or w < cw:
            raise ValueError(f"RandomCrop: required crop size {(ch, cw)} is larger than the "
                             f"input image size {(h, w)}")
        top = _randint(0, h - ch + 1)
        left = _randint(0, w - cw + 1)
        return dict(needs_pad=any(pad), padding=pad, top=top, left=left, height=ch, width=cw)

    def transform(self, inpt, params):
        if params["needs_pad"]:
            inpt = F.pad(inpt, params["padding"], _fill_for(self.fill, inpt), self.padding_mode)
        return F.crop(inpt, params["top"], params["left"], params["height"], params["width"])


class RandomResizedCrop(Transform):
    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation=InterpolationMode.BILINEAR, antialias=True):
        super().__init__()
        self.size = list(T1._setup_size(size, "RandomResizedCrop"))
        if scale[0] > scale[1] or ratio[0] > ratio[1]:
            raise ValueError("RandomResizedCrop: scale and ratio should be of kind (min, max)")
        self.scale, self.ratio = scale, ratio
        self.interpolation, self.antialias = interpolation, antialias

    def make_params(self, flat_inputs):
        h, w = query_size(flat_inputs)
        area = h * w
        log_ratio = (math.log(self.ratio[0]), math.log(self.ratio[1]))
        for _ in range(10):
            target = area * _uniform(self.scale[0], self.scale[1])
            ar = math.exp(_uniform(log_ratio[0], log_ratio[1]))
            cw = int(round(math.sqrt(target * ar)))
            ch = int(round(math.sqrt(target / ar)))
            if 0 < cw <= w and 0 < ch <= h:
                return dict(top=_randint(0, h - ch + 1), left=_randint(0, w - cw + 1),
                            height=ch, width=cw)
        in_ratio = w / h
        if in_ratio < min(self.ratio):
            cw, ch = w, int(round(w / min(self.ratio)))
        elif in_ratio > max(self.ratio):
            ch, cw = h, int(round(h * max(self.ratio)))
        else:
            cw, ch = w, h
        return dict(top=(h - ch) // 2, left=(w - cw) // 2, height=ch, width=cw)

    def transform(self, inpt, params):
        return F.resized_crop(inpt, params["top"], params["left"], params["height"],
                              params["width"], self.size, self.interpolation,
                              antialias=self.antialias)


class Pad(Transform):
    def __init__(self, padding, fill=0, padding_mode="constant"):
        super().__init__()
        self.padding = F.F1._ltrb(padding, "Pad")
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError(f"Pad: padding_mode must be constant, edge, reflect or symmetric, "
                             f"got {padding_mode!r}")
        self.fill, self.padding_mode = fill, padding_mode

    def transform(self, inpt, params):
        return F.pad(inpt, self.padding, _fill_for(self.fill, inpt), self.padding_mode)


class RandomZoomOut(RandomTransform):
    """With probability ``p``, place the input on a canvas ``r`` times larger (r uniform in
    ``side_range``) at a random offset, filled with ``fill``."""

    def __init__(self, fill=0, side_range=(1.0, 4.0), p=0.5):
        super().__init__(p)
        if side_range[0] < 1.0 or side_range[0] > side_range[1]:
            raise ValueError(f"RandomZoomOut: invalid side_range {side_range}")
        self.fill, self.side_range = fill, side_range

    def make_params(self, flat_inputs):
        h, w = query_size(flat_inputs)
        r = _uniform(*self.side_range)
        ch, cw = int(h * r), int(w * r)
        u, v = fiamma.rand(2).tolist()
        left, top = int((cw - w) * u), int((ch - h) * v)
        return dict(padding=[left, top, cw - (left + w), ch - (top + h)])

    def transform(self, inpt, params):
        return F.pad(inpt, params["padding"], _fill_for(self.fill, inpt))


def _box_iou(a, b):
    import numpy as np
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = np.clip(rb - lt, 0, None)
    inter = wh[..., 0] * wh[..., 1]
    area = lambda x: (x[:, 2] - x[:, 0]) * (x[:, 3] - x[:, 1])  # noqa: E731
    return inter / (area(a)[:, None] + area(b)[None] - inter)


class RandomIoUCrop(Transform):
    """SSD's crop: pick a minimum IoU from ``sampler_options`` (1.0 = keep the sample), try
    ``trials`` crops whose sides are in ``[min_scale, max_scale]`` of the input with aspect in
    ``[min_aspect_ratio, max_aspect_ratio]`` that contain box centres and reach that IoU with
    some box; boxes whose centre is outside the crop are dropped (degenerate, to be removed
    by SanitizeBoundingBoxes)."""

    def __init__(self, min_scale=0.3, max_scale=1.0, min_aspect_ratio=0.5, max_aspect_ratio=2.0,
                 sampler_options=None, trials=40):
        super().__init__()
        self.min_scale, self.max_scale = min_scale, max_scale
        self.min_aspect_ratio, self.max_aspect_ratio = min_aspect_ratio, max_aspect_ratio
        self.options = [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0] if sampler_options is None \
            else list(sampler_options)
        self.trials = trials

    def _needs(self, flat):
        from fiamma.vision.transforms.v2._transform import needs_transform_list
        if not any(isinstance(x, tv.BoundingBoxes) for x in flat):
            raise TypeError("RandomIoUCrop: the sample must contain BoundingBoxes")
        return needs_transform_list(flat)

    def make_params(self, flat_inputs):
        import numpy as np
        h, w = query_size(flat_inputs)
        boxes = next(x for x in flat_inputs if isinstance(x, tv.BoundingBoxes))
        xyxy = F.convert_bounding_box_format(boxes, new_format="XYXY")
        b = np.asarray(xyxy.as_subclass(fiamma.Tensor).detach().numpy(), dtype=np.float64)
        while True:
            idx = _randint(0, len(self.options))
            min_iou = self.options[idx]
            if min_iou >= 1.0:
                return {}
            for _ in range(self.trials):
                r = self.min_scale + (self.max_scale - self.min_scale) * fiamma.rand(2)
                nw, nh = int(w * r[0].item()), int(h * r[1].item())
                if nh == 0 or not (self.min_aspect_ratio <= nw / nh <= self.max_aspect_ratio):
                    continue
                r = fiamma.rand(2)
                left, top = int((w - nw) * r[0].item()), int((h - nh) * r[1].item())
                right, bottom = left + nw, top + nh
                if left == right or top == bottom:
                    continue
                cx, cy = 0.5 * (b[:, 0] + b[:, 2]), 0.5 * (b[:, 1] + b[:, 3])
                inside = (left < cx) & (cx < right) & (top < cy) & (cy < bottom)
                if not inside.any():
                    continue
                ious = _box_iou(b[inside], np.array([[left, top, right, bottom]], float))
                if ious.max() < min_iou:
                    continue
                return dict(top=top, left=left, height=nh, width=nw, is_within_crop_area=inside)

    def transform(self, inpt, params):
        if not params:
            return inpt
        out = F.crop(inpt, params["top"], params["left"], params["height"], params["width"])
        if isinstance(out, tv.BoundingBoxes):
            keep = fiamma.from_numpy(params["is_within_crop_area"].astype("uint8")).bool()
            out = tv.wrap(out.as_subclass(fiamma.Tensor).masked_fill(
                ~keep.unsqueeze(-1), 0), like=out)
        return out


class RandomAffine(Transform):
    def __init__(self, degrees, translate=None, scale=None, shear=None,
                 interpolation=InterpolationMode.NEAREST, fill=0, center=None):
        super().__init__()
        self._v1 = T1.RandomAffine(degrees, translate, scale, shear, interpolation, 0, center)
        self.degrees, self.translate = self._v1.degrees, self._v1.translate
        self.scale, self.shear = self._v1.scale, self._v1.shear
        self.interpolation, self.fill, self.center = interpolation, fill, center

    def make_params(self, flat_inputs):
        h, w = query_size(flat_inputs)
        angle, tr, scale, shear = T1.RandomAffine.get_params(
            self.degrees, self.translate, self.scale, self.shear, [w, h])
        return dict(angle=angle, translate=list(tr), scale=scale, shear=list(shear))

    def transform(self, inpt, params):
        return F.affine(inpt, params["angle"], params["translate"], params["scale"],
                        params["shear"], self.interpolation, _fill_for(self.fill, inpt),
                        self.center)


class RandomRotation(Transform):
    def __init__(self, degrees, interpolation=InterpolationMode.NEAREST, expand=False,
                 center=None, fill=0):
        super().__init__()
        self.degrees = T1._range(degrees, "degrees", "RandomRotation")
        self.interpolation, self.expand, self.center, self.fill = (interpolation, expand,
                                                                   center, fill)

    def make_params(self, flat_inputs):
        return dict(angle=_uniform(self.degrees[0], self.degrees[1]))

    def transform(self, inpt, params):
        return F.rotate(inpt, params["angle"], self.interpolation, self.expand, self.center,
                        _fill_for(self.fill, inpt))


class RandomPerspective(RandomTransform):
    """With probability ``p``, a random projective warp of the corners by up to
    ``distortion_scale`` of half the size (applied to boxes, masks and keypoints too)."""

    def __init__(self, distortion_scale=0.5, p=0.5, interpolation=InterpolationMode.BILINEAR,
                 fill=0):
        super().__init__(p)
        if not 0 <= distortion_scale <= 1:
            raise ValueError(f"RandomPerspective: distortion_scale should be in [0, 1], got "
                             f"{distortion_scale}")
        self.distortion_scale, self.interpolation, self.fill = (distortion_scale,
                                                                interpolation, fill)

    def make_params(self, flat_inputs):
        h, w = query_size(flat_inputs)
        start, end = T1.RandomPerspective.get_params(w, h, self.distortion_scale)
        return dict(coefficients=F1._perspective_coeffs(start, end))

    def transform(self, inpt, params):
        return F.perspective(inpt, None, None, self.interpolation, _fill_for(self.fill, inpt),
                             coefficients=params["coefficients"])


def _number_or_pair(v, name):
    if isinstance(v, (int, float)):
        return [float(v), float(v)]
    v = [float(e) for e in v]
    if len(v) == 1:
        return v * 2
    if len(v) != 2:
        raise ValueError(f"ElasticTransform: {name} should be a number or a sequence of 1 or 2 "
                         f"numbers, got {v}")
    return v


class ElasticTransform(Transform):
    """Random elastic deformation (Simard et al.): uniform [-1, 1] displacement fields per axis,
    smoothed by a Gaussian of ``sigma`` (kernel ``int(8 * sigma + 1)``, made odd) and scaled by
    ``alpha`` / size, applied with :func:`functional.elastic` to images, masks, boxes and
    keypoints alike.

        >>> import fiamma
        >>> t = ElasticTransform(alpha=10.0, sigma=2.0)
        >>> tuple(t(fiamma.rand(3, 16, 16)).shape)
        (3, 16, 16)
    """

    def __init__(self, alpha=50.0, sigma=5.0, interpolation=InterpolationMode.BILINEAR,
                 fill=0):
        super().__init__()
        self.alpha = _number_or_pair(alpha, "alpha")
        self.sigma = _number_or_pair(sigma, "sigma")
        self.interpolation = interpolation
        self.fill = fill

    def make_params(self, flat_inputs):
        h, w = query_size(flat_inputs)
        fields = []
        for axis, size in ((0, w), (1, h)):
            d = fiamma.rand(1, 1, h, w) * 2 - 1
            if self.sigma[axis] > 0.0:
                k = int(8 * self.sigma[axis] + 1)
                k += 1 - k % 2
                d = F.gaussian_blur(d, [k, k], list(self.sigma))
            fields.append(d * self.alpha[axis] / size)
        return dict(displacement=fiamma.cat(fields, 1).permute(0, 2, 3, 1).contiguous())

    def transform(self, inpt, params):
        return F.elastic(inpt, params["displacement"], self.interpolation,
                         _fill_for(self.fill, inpt))


# ---------------------------------------------------------------------------- colour

class ColorJitter(Transform):
    def __init__(self, brightness=None, contrast=None, saturation=None, hue=None):
        super().__init__()
        v1 = T1.ColorJitter(brightness or 0, contrast or 0, saturation or 0, hue or 0)
        self.brightness, self.contrast = v1.brightness, v1.contrast
        self.saturation, self.hue = v1.saturation, v1.hue

    def make_params(self, flat_inputs):
        order, b, c, s, h = T1.ColorJitter.get_params(self.brightness, self.contrast,
                                                      self.saturation, self.hue)
        return dict(fn_idx=list(order), b=b, c=c, s=s, h=h)

    def transform(self, inpt, params):
        for i in params["fn_idx"]:
            if i == 0 and params["b"] is not None:
                inpt = F.adjust_brightness(inpt, params["b"])
            elif i == 1 and params["c"] is not None:
                inpt = F.adjust_contrast(inpt, params["c"])
            elif i == 2 and params["s"] is not None:
                inpt = F.adjust_saturation(inpt, params["s"])
            elif i == 3 and params["h"] is not None:
                inpt = F.adjust_hue(inpt, params["h"])
        return inpt


class RandomPhotometricDistort(Transform):
    """SSD's photometric distortion: each of brightness, contrast (before or after the
    others), saturation, hue and a channel permutation happens with probability ``p``."""

    def __init__(self, brightness=(0.875, 1.125), contrast=(0.5, 1.5), saturation=(0.5, 1.5),
                 hue=(-0.05, 0.05), p=0.5):
        super().__init__()
        self.brightness, self.contrast = list(brightness), list(contrast)
        self.saturation, self.hue, self.p = list(saturation), list(hue), p

    def make_params(self, flat_inputs):
        c = query_chw(flat_inputs)[0]
        coins = (fiamma.rand(6) < self.p).tolist()
        return dict(
            brightness=_uniform(*self.brightness) if coins[0] else None,
            contrast=_uniform(*self.contrast) if coins[1] else None,
            contrast_before=bool(fiamma.rand(1).item() < 0.5),
            saturation=_uniform(*self.saturation) if coins[2] else None,
            hue=_uniform(*self.hue) if coins[3] else None,
            permutation=fiamma.randperm(c).tolist() if coins[4] else None)

    def transform(self, inpt, params):
        if isinstance(inpt, (tv.BoundingBoxes, tv.Mask, tv.KeyPoints)):
            return inpt
        if params["brightness"] is not None:
            inpt = F.adjust_brightness(inpt, params["brightness"])
        if params["contrast"] is not None and params["contrast_before"]:
            inpt = F.adjust_contrast(inpt, params["contrast"])
        if params["saturation"] is not None:
            inpt = F.adjust_saturation(inpt, params["saturation"])
        if params["hue"] is not None:
            inpt = F.adjust_hue(inpt, params["hue"])
        if params["contrast"] is not None and not params["contrast_before"]:
            inpt = F.adjust_contrast(inpt, params["contrast"])
        if params["permutation"] is not None:
            if not isinstance(inpt, fiamma.Tensor):
                inpt = F.to_image(inpt)
            pure = F.to_pure_tensor(inpt)
            out = pure[..., params["permutation"], :, :]
            inpt = tv.wrap(out, like=inpt) if isinstance(inpt, tv.TVTensor) else out
        return inpt


class Grayscale(Transform):
    def __init__(self, num_output_channels=1):
        super().__init__()
        self.num_output_channels = num_output_channels

    def transform(self, inpt, params):
        return F.rgb_to_grayscale(inpt, self.num_output_channels)


class Normalize(Transform):
    def __init__(self, mean, std, inplace=False):
        super().__init__()
        self.mean, self.std, self.inplace = list(mean), list(std), inplace

    def transform(self, inpt, params):
        return F.normalize(inpt, self.mean, self.std, self.inplace)

    def _repr_items(self):
        return [("mean", self.mean), ("std", self.std)]


class GaussianBlur(Transform):
    def __init__(self, kernel_size, sigma=(0.1, 2.0)):
        super().__init__()
        v1 = T1.GaussianBlur(kernel_size, sigma)
        self.kernel_size, self.sigma = v1.kernel_size, v1.sigma

    def make_params(self, flat_inputs):
        s = _uniform(self.sigma[0], self.sigma[1])
        return dict(sigma=[s, s])

    def transform(self, inpt, params):
        return F.gaussian_blur(inpt, list(self.kernel_size), params["sigma"])


class RandomErasing(RandomTransform):
    """With probability ``p`` erase a random rectangle of images/videos (boxes and masks pass
    through unchanged, as torchvision warns)."""

    def __init__(self, p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0, inplace=False):
        super().__init__(p)
        self._v1 = T1.RandomErasing(1.0, scale, ratio, value, inplace)
        self.scale, self.ratio, self.value, self.inplace = scale, ratio, value, inplace

    def make_params(self, flat_inputs):
        c, h, w = query_chw(flat_inputs)
        probe = fiamma.zeros(c, h, w)
        v = self.value
        if isinstance(v, (int, float)):
            v = [float(v)]
        elif isinstance(v, str):
            v = None
        elif isinstance(v, (list, tuple)):
            v = [float(x) for x in v]
        i, j, eh, ew, val = T1.RandomErasing.get_params(probe, self.scale, self.ratio, v)
        return dict(i=i, j=j, h=eh, w=ew, v=val)

    def transform(self, inpt, params):
        if isinstance(inpt, (tv.BoundingBoxes, tv.Mask, tv.KeyPoints)):
            return inpt
        if not isinstance(inpt, fiamma.Tensor):
            raise TypeError("RandomErasing: expected a tensor image, got a PIL image")
        v = params["v"]
        if isinstance(v, fiamma.Tensor):
            v = v.to(inpt.dtype)
        return F.erase(inpt, params["i"], params["j"], params["h"], params["w"], v,
                       self.inplace)


# ---------------------------------------------------------------------------- type/meta

class ToImage(Transform):
    """PIL images, NumPy arrays and plain tensors to ``tv_tensors.Image``."""

    def _needs(self, flat):
        import numpy as np

        from fiamma.vision.transforms.v2._transform import needs_transform_list
        base = needs_transform_list(flat)
        return [(n or isinstance(x, np.ndarray)) and not isinstance(x, tv.Image)
                and (not isinstance(x, tv.TVTensor)) for n, x in zip(base, flat)]

    def transform(self, inpt, params):
        return F.to_image(inpt)


class PILToTensor(Transform):
    """PIL images to plain ``(C, H, W)`` uint8 tensors (as ``pil_to_tensor``); everything else
    passes through.

    >>> from PIL import Image
    >>> out = PILToTensor()(Image.new("RGB", (4, 2)))
    >>> type(out).__name__, tuple(out.shape)
    ('Tensor', (3, 2, 4))
    """

    def _needs(self, flat):
        from fiamma.vision.transforms.v2._transform import _PIL
        return [isinstance(x, _PIL) for x in flat]

    def transform(self, inpt, params):
        from fiamma.vision.transforms import functional as F1
        return F1.pil_to_tensor(inpt)


class ToPureTensor(Transform):
    """Every tv_tensor to a plain ``fiamma.Tensor``."""

    def _needs(self, flat):
        return [isinstance(x, tv.TVTensor) for x in flat]

    def transform(self, inpt, params):
        return F.to_pure_tensor(inpt)


class ToDtype(Transform):
    """Cast to ``dtype``. A dtype converts images and videos only (and a plain tensor taken for
    an image); a dict maps tv_tensor types (and ``"others"``) to dtypes (None: unchanged).
    ``scale=True`` rescales image values between the dtypes' ranges."""

    def __init__(self, dtype, scale=False):
        super().__init__()
        if not isinstance(dtype, (dict, fiamma.dtype)):
            raise ValueError(f"ToDtype: dtype must be a fiamma.dtype or a dict, got "
                             f"{type(dtype).__name__}")
        self.dtype, self.scale = dtype, scale

    def _needs(self, flat):
        from fiamma.vision.transforms.v2._transform import needs_transform_list
        if isinstance(self.dtype, dict):
            return [isinstance(x, fiamma.Tensor) for x in flat]
        return needs_transform_list(flat)

    def transform(self, inpt, params):
        if isinstance(self.dtype, dict):
            dt = None
            for cls in type(inpt).__mro__:
                if cls in self.dtype:
                    dt = self.dtype[cls]
                    break
            else:
                if is_pure_tensor(inpt) and fiamma.Tensor in self.dtype:
                    dt = self.dtype[fiamma.Tensor]
                else:
                    dt = self.dtype.get("others")
            if dt is None:
                return inpt
        else:
            if not isinstance(inpt, (tv.Image, tv.Video)) and not is_pure_tensor(inpt):
                return inpt
            dt = self.dtype
        return F.to_dtype(inpt, dt, self.scale)


class ConvertBoundingBoxFormat(Transform):
    def __init__(self, format):
        super().__init__()
        self.format = tv._parse_format(format)

    def _needs(self, flat):
        return [isinstance(x, tv.BoundingBoxes) for x in flat]

    def transform(self, inpt, params):
        return F.convert_bounding_box_format(inpt, new_format=self.format)


class ClampBoundingBoxes(Transform):
    def __init__(self, clamping_mode="auto"):
        super().__init__()
        self.clamping_mode = clamping_mode

    def _needs(self, flat):
        return [isinstance(x, tv.BoundingBoxes) for x in flat]

    def transform(self, inpt, params):
        if self.clamping_mode != "auto":
            inpt = tv.wrap(inpt.as_subclass(fiamma.Tensor), like=inpt,
                           clamping_mode=self.clamping_mode)
        return F.clamp_bounding_boxes(inpt)


def _find_labels(inputs):
    if isinstance(inputs, tuple) and len(inputs) > 1:
        inputs = inputs[1]
    if not isinstance(inputs, dict):
        raise ValueError("SanitizeBoundingBoxes: with labels_getter='default' the sample must "
                         "be a dict or a tuple whose second item is a dict")
    for k, v in inputs.items():
        if isinstance(k, str) and k.lower() == "labels":
            return v
    raise ValueError(f"SanitizeBoundingBoxes: could not find a 'labels' key in the sample "
                     f"(keys: {list(inputs)}); pass labels_getter=None or a callable")


class SanitizeBoundingBoxes(Transform):
    """Drop boxes smaller than ``min_size`` (either side) or ``min_area``, or outside their
    canvas, with their labels (``labels_getter``) and per-instance masks."""

    def __init__(self, min_size=1.0, min_area=1.0, labels_getter="default"):
        super().__init__()
        if min_size < 1:
            raise ValueError(f"min_size must be >= 1, got {min_size}.")
        if min_area < 1:
            raise ValueError(f"min_area must be >= 1, got {min_area}.")
        if not (labels_getter is None or labels_getter == "default" or callable(labels_getter)):
            raise ValueError(f"SanitizeBoundingBoxes: labels_getter should be 'default', None "
                             f"or a callable, got {labels_getter!r}")
        self.min_size, self.min_area, self.labels_getter = min_size, min_area, labels_getter

    def forward(self, *inputs):
        inputs = inputs if len(inputs) > 1 else inputs[0]
        if self.labels_getter is None:
            labels = None
        elif self.labels_getter == "default":
            labels = _find_labels(inputs)
        else:
            labels = self.labels_getter(inputs)
        if isinstance(labels, fiamma.Tensor):
            labels = (labels,)
        elif labels is not None:
            labels = tuple(labels)
            if not all(isinstance(x, fiamma.Tensor) for x in labels):
                raise ValueError("SanitizeBoundingBoxes: the labels must be tensors")
        flat, spec = flatten(inputs)
        boxes = [x for x in flat if isinstance(x, tv.BoundingBoxes)]
        if len(boxes) != 1:
            raise ValueError(f"SanitizeBoundingBoxes: expected exactly one BoundingBoxes in "
                             f"the sample, found {len(boxes)}")
        boxes = boxes[0]
        for lab in labels or ():
            if lab.shape[0] != boxes.shape[0]:
                raise ValueError(f"Number of boxes (shape={tuple(boxes.shape)}) and must match "
                                 f"the number of labels. Found labels with "
                                 f"shape={tuple(lab.shape)}).")
        valid = F._sanitize_mask(boxes, self.min_size, self.min_area)
        idx = fiamma.from_numpy(valid.nonzero()[0].astype("int64"))
        n = boxes.shape[0]
        out = []
        for x in flat:
            is_label = labels is not None and any(x is lab for lab in labels)
            per_instance = isinstance(x, tv.BoundingBoxes) or (
                isinstance(x, tv.Mask) and x.ndim >= 3 and x.shape[0] == n)
            if is_label or per_instance:
                pure = x.as_subclass(fiamma.Tensor) if isinstance(x, tv.TVTensor) else x
                y = pure.index_select(0, idx)
                x = tv.wrap(y, like=x) if isinstance(x, tv.TVTensor) else y
            out.append(x)
        return unflatten(out, spec)


