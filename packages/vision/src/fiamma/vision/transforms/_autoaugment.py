"""AutoAugment, RandAugment and TrivialAugmentWide (torchvision's semantics)."""

import math
from enum import Enum

import numpy as np

import fiamma
from fiamma import nn
from fiamma.vision.transforms import functional as F
from fiamma.vision.transforms._policies import _POLICIES
from fiamma.vision.transforms.functional import InterpolationMode, _interp

__all__ = ["AutoAugmentPolicy", "AutoAugment", "RandAugment", "TrivialAugmentWide", "AugMix"]


def _apply_op(img, op_name, magnitude, interpolation, fill):
    if op_name == "ShearX":
        # shear about the top-left corner, as the AutoAugment reference code does
        return F.affine(
            img,
            angle=0.0,
            translate=[0, 0],
            scale=1.0,
            shear=[math.degrees(math.atan(magnitude)), 0.0],
            interpolation=interpolation,
            fill=fill,
            center=[0, 0],
        )
    if op_name == "ShearY":
        return F.affine(
            img,
            angle=0.0,
            translate=[0, 0],
            scale=1.0,
            shear=[0.0, math.degrees(math.atan(magnitude))],
            interpolation=interpolation,
            fill=fill,
            center=[0, 0],
        )
    if op_name == "TranslateX":
        return F.affine(
            img,
            angle=0.0,
            translate=[int(magnitude), 0],
            scale=1.0,
            interpolation=interpolation,
            shear=[0.0, 0.0],
            fill=fill,
        )
    if op_name == "TranslateY":
        return F.affine(
            img,
            angle=0.0,
            translate=[0, int(magnitude)],
            scale=1.0,
            interpolation=interpolation,
            shear=[0.0, 0.0],
            fill=fill,
        )
    if op_name == "Rotate":
        return F.rotate(img, magnitude, interpolation=interpolation, fill=fill)
    if op_name == "Brightness":
        return F.adjust_brightness(img, 1.0 + magnitude)
    if op_name == "Color":
        return F.adjust_saturation(img, 1.0 + magnitude)
    if op_name == "Contrast":
        return F.adjust_contrast(img, 1.0 + magnitude)
    if op_name == "Sharpness":
        return F.adjust_sharpness(img, 1.0 + magnitude)
    if op_name == "Posterize":
        return F.posterize(img, int(magnitude))
    if op_name == "Solarize":
        return F.solarize(img, magnitude)
    if op_name == "AutoContrast":
        return F.autocontrast(img)
    if op_name == "Equalize":
        return F.equalize(img)
    if op_name == "Invert":
        return F.invert(img)
    if op_name == "Identity":
        return img
    raise ValueError(f"The provided operator {op_name} is not recognized.")


def _posterize_bins(num_bins, span):
    return 8 - np.round(np.arange(num_bins) / ((num_bins - 1) / span)).astype(np.int64)


def _fill(img, fill):
    if fiamma.is_tensor(img):
        c = F.get_dimensions(img)[0]
        if isinstance(fill, (int, float)):
            return [float(fill)] * c
        if fill is not None:
            return [float(f) for f in fill]
    return fill


def _space_rand(num_bins, image_size):
    h, w = image_size
    lin = lambda a, b: np.linspace(a, b, num_bins, dtype=np.float32)  # noqa: E731
    zero = np.array(0.0)
    return {
        "Identity": (zero, False),
        "ShearX": (lin(0.0, 0.3), True),
        "ShearY": (lin(0.0, 0.3), True),
        "TranslateX": (lin(0.0, 150.0 / 331.0 * w), True),
        "TranslateY": (lin(0.0, 150.0 / 331.0 * h), True),
        "Rotate": (lin(0.0, 30.0), True),
        "Brightness": (lin(0.0, 0.9), True),
        "Color": (lin(0.0, 0.9), True),
        "Contrast": (lin(0.0, 0.9), True),
        "Sharpness": (lin(0.0, 0.9), True),
        "Posterize": (_posterize_bins(num_bins, 4), False),
        "Solarize": (lin(255.0, 0.0), False),
        "AutoContrast": (zero, False),
        "Equalize": (zero, False),
    }


class AutoAugmentPolicy(Enum):
    """Policies learned on ImageNet, CIFAR10 and SVHN."""

    IMAGENET = "imagenet"
    CIFAR10 = "cifar10"
    SVHN = "svhn"


class AutoAugment(nn.Module):
    """AutoAugment (Cubuk et al., 2019): one random sub-policy of two ops per image.

    Tensor images should be uint8 (..., 1 or 3, H, W); PIL images mode L or RGB.
    """

    def __init__(
        self, policy=AutoAugmentPolicy.IMAGENET, interpolation=InterpolationMode.NEAREST, fill=None
    ):
        super().__init__()
        if not isinstance(policy, AutoAugmentPolicy):
            try:
                policy = AutoAugmentPolicy(policy)
            except ValueError:
                raise ValueError(
                    f"AutoAugment: the provided policy {policy} is not recognized"
                ) from None
        self.policy = policy
        self.interpolation = _interp(interpolation, "AutoAugment")
        self.fill = fill
        self.policies = _POLICIES[policy.value]

    @staticmethod
    def _augmentation_space(num_bins, image_size):
        space = _space_rand(num_bins, image_size)
        del space["Identity"]
        space["Invert"] = (np.array(0.0), False)
        return space

    @staticmethod
    def get_params(transform_num):
        policy_id = int(fiamma.randint(transform_num, (1,)).item())
        probs = fiamma.rand(2).tolist()
        signs = fiamma.randint(2, (2,)).tolist()
        return policy_id, probs, signs

    def forward(self, img):
        fill = _fill(img, self.fill)
        _, h, w = F.get_dimensions(img)
        tid, probs, signs = self.get_params(len(self.policies))
        space = self._augmentation_space(10, (h, w))
        for i, (op_name, p, mag_id) in enumerate(self.policies[tid]):
            if probs[i] <= p:
                mags, signed = space[op_name]
                magnitude = float(mags[mag_id]) if mag_id is not None else 0.0
                if signed and signs[i] == 0:
                    magnitude *= -1.0
                img = _apply_op(img, op_name, magnitude, self.interpolation, fill)
        return img

    def __repr__(self):
        return f"{self.__class__.__name__}(policy={self.policy}, fill={self.fill})"


class RandAugment(nn.Module):
    """RandAugment (Cubuk et al., 2020): num_ops random ops at a fixed magnitude."""

    def __init__(
        self,
        num_ops=2,
        magnitude=9,
        num_magnitude_bins=31,
        interpolation=InterpolationMode.NEAREST,
        fill=None,
    ):
        super().__init__()
        if not 0 <= magnitude < num_magnitude_bins:
            raise ValueError(
                f"RandAugment: magnitude ({magnitude}) should be in "
                f"[0, num_magnitude_bins={num_magnitude_bins})"
            )
        self.num_ops, self.magnitude, self.num_magnitude_bins = (
            num_ops,
            magnitude,
            num_magnitude_bins,
        )
        self.interpolation = _interp(interpolation, "RandAugment")
        self.fill = fill

    def _augmentation_space(self, num_bins, image_size):
        return _space_rand(num_bins, image_size)

    def forward(self, img):
        fill = _fill(img, self.fill)
        _, h, w = F.get_dimensions(img)
        space = self._augmentation_space(self.num_magnitude_bins, (h, w))
        names = list(space)
        for _ in range(self.num_ops):
            op_name = names[int(fiamma.randint(len(names), (1,)).item())]
            mags, signed = space[op_name]
            magnitude = float(mags[self.magnitude]) if mags.ndim > 0 else 0.0
            if signed and int(fiamma.randint(2, (1,)).item()):
                magnitude *= -1.0
            img = _apply_op(img, op_name, magnitude, self.interpolation, fill)
        return img

    def __repr__(self):
        return (
            f"{self.__class__.__name__}(num_ops={self.num_ops}, magnitude={self.magnitude}, "
            f"num_magnitude_bins={self.num_magnitude_bins}, "
            f"interpolation={self.interpolation}, fill={self.fill})"
        )


class TrivialAugmentWide(nn.Module):
    """TrivialAugment (Mueller & Hutter, 2021): one random op at a random magnitude."""

    def __init__(self, num_magnitude_bins=31, interpolation=InterpolationMode.NEAREST, fill=None):
        super().__init__()
        self.num_magnitude_bins = num_magnitude_bins
        self.interpolation = _interp(interpolation, "TrivialAugmentWide")
        self.fill = fill

    def _augmentation_space(self, num_bins):
        lin = lambda a, b: np.linspace(a, b, num_bins, dtype=np.float32)  # noqa: E731
        zero = np.array(0.0)
        return {
            "Identity": (zero, False),
            "ShearX": (lin(0.0, 0.99), True),
            "ShearY": (lin(0.0, 0.99), True),
            "TranslateX": (lin(0.0, 32.0), True),
            "TranslateY": (lin(0.0, 32.0), True),
            "Rotate": (lin(0.0, 135.0), True),
            "Brightness": (lin(0.0, 0.99), True),
            "Color": (lin(0.0, 0.99), True),
            "Contrast": (lin(0.0, 0.99), True),
            "Sharpness": (lin(0.0, 0.99), True),
            "Posterize": (_posterize_bins(num_bins, 6), False),
            "Solarize": (lin(255.0, 0.0), False),
            "AutoContrast": (zero, False),
            "Equalize": (zero, False),
        }

    def forward(self, img):
        fill = _fill(img, self.fill)
        space = self._augmentation_space(self.num_magnitude_bins)
        names = list(space)
        op_name = names[int(fiamma.randint(len(names), (1,)).item())]
        mags, signed = space[op_name]
        magnitude = (
            float(mags[int(fiamma.randint(len(mags), (1,)).item())]) if mags.ndim > 0 else 0.0
        )
        if signed and int(fiamma.randint(2, (1,)).item()):
            magnitude *= -1.0
        return _apply_op(img, op_name, magnitude, self.interpolation, fill)

    def __repr__(self):
        return (
            f"{self.__class__.__name__}(num_magnitude_bins={self.num_magnitude_bins}, "
            f"interpolation={self.interpolation}, fill={self.fill})"
        )


def _gamma(a):
    """One Gamma(a, 1) draw from fiamma's generator (Marsaglia and Tsang; a < 1 boosted)."""
    if a < 1.0:
        return _gamma(a + 1.0) * fiamma.rand(1).item() ** (1.0 / a)
    d = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        x = fiamma.randn(1).item()
        v = (1.0 + c * x) ** 3
        if v <= 0:
            continue
        u = fiamma.rand(1).item()
        if math.log(max(u, 1e-300)) < 0.5 * x * x + d - d * v + d * math.log(v):
            return d * v


def sample_dirichlet(alphas):
    """One Dirichlet(alphas) draw (normalised Gamma draws) as a list of floats."""
    g = [_gamma(float(a)) for a in alphas]
    total = sum(g)
    return [x / total for x in g]


class AugMix(nn.Module):
    """AugMix (Hendrycks et al., 2020): ``mixture_width`` chains of ``chain_depth`` random ops
    (1-3 when -1) at magnitudes up to ``severity`` (of 10), mixed with Dirichlet(``alpha``)
    weights and blended with the original by a Beta(``alpha``, ``alpha``) weight. Works on PIL
    images and on uint8 (..., C, H, W) tensors (each image of a batch gets its own weights; the
    chains are shared, as torchvision's); the result has the input's type and dtype.

        >>> import fiamma
        >>> out = AugMix()(fiamma.randint(0, 256, (3, 16, 16), dtype=fiamma.uint8))
        >>> out.dtype, tuple(out.shape)
        (fiamma.uint8, (3, 16, 16))
    """

    _PARAMETER_MAX = 10

    def __init__(self, severity=3, mixture_width=3, chain_depth=-1, alpha=1.0, all_ops=True,
                 interpolation=InterpolationMode.BILINEAR, fill=None):
        super().__init__()
        if not 1 <= severity <= self._PARAMETER_MAX:
            raise ValueError(f"The severity must be between [1, {self._PARAMETER_MAX}]. Got "
                             f"{severity} instead.")
        self.severity = severity
        self.mixture_width = mixture_width
        self.chain_depth = chain_depth
        self.alpha = alpha
        self.all_ops = all_ops
        self.interpolation = _interp(interpolation, "AugMix")
        self.fill = fill

    def _augmentation_space(self, num_bins, image_size):
        lin = lambda a, b: np.linspace(a, b, num_bins, dtype=np.float32)  # noqa: E731
        zero = np.array(0.0)
        s = {
            "ShearX": (lin(0.0, 0.3), True),
            "ShearY": (lin(0.0, 0.3), True),
            "TranslateX": (lin(0.0, image_size[1] / 3.0), True),
            "TranslateY": (lin(0.0, image_size[0] / 3.0), True),
            "Rotate": (lin(0.0, 30.0), True),
            "Posterize": (4 - np.round(np.arange(num_bins) / ((num_bins - 1) / 4)).astype(
                np.int64), False),
            "Solarize": (lin(255.0, 0.0), False),
            "AutoContrast": (zero, False),
            "Equalize": (zero, False),
        }
        if self.all_ops:
            s.update({"Brightness": (lin(0.0, 0.9), True), "Color": (lin(0.0, 0.9), True),
                      "Contrast": (lin(0.0, 0.9), True), "Sharpness": (lin(0.0, 0.9), True)})
        return s

    def _sample_dirichlet(self, alphas, rows):
        return fiamma.tensor([sample_dirichlet(alphas) for _ in range(rows)],
                             dtype=fiamma.float32)

    def forward(self, orig_img):
        is_tensor = fiamma.is_tensor(orig_img)
        img = orig_img if is_tensor else F.pil_to_tensor(orig_img)
        if img.dtype != fiamma.uint8:
            # as torchvision's: its Posterize and Equalize ops need uint8 images
            raise TypeError(f"AugMix: tensor images must be uint8, got {img.dtype}")
        fill = _fill(img, self.fill)
        h, w = img.shape[-2:]
        # torchvision passes _PARAMETER_MAX (10) as the number of bins
        space = self._augmentation_space(self._PARAMETER_MAX, (h, w))
        names = list(space)
        orig_dims = list(img.shape)
        batch = img.reshape([1] * max(4 - img.ndim, 0) + orig_dims)
        b = batch.shape[0]
        bdims = [b] + [1] * (batch.ndim - 1)
        m = self._sample_dirichlet([self.alpha, self.alpha], b)
        weights = self._sample_dirichlet([self.alpha] * self.mixture_width, b) * m[:, 1:2]
        mix = m[:, 0].reshape(bdims) * batch
        for i in range(self.mixture_width):
            aug = batch
            depth = (self.chain_depth if self.chain_depth > 0
                     else int(fiamma.randint(1, 4, (1,)).item()))
            for _ in range(depth):
                op = names[int(fiamma.randint(len(names), (1,)).item())]
                mags, signed = space[op]
                mag = (float(mags[int(fiamma.randint(self.severity, (1,)).item())])
                       if mags.ndim > 0 else 0.0)
                if signed and int(fiamma.randint(2, (1,)).item()):
                    mag *= -1.0
                aug = _apply_op(aug, op, mag, self.interpolation, fill)
            mix = mix + weights[:, i].reshape(bdims) * aug
        out = mix.reshape(orig_dims)
        out = out.to(img.dtype)        # truncation, as torchvision's .to(dtype)
        return out if is_tensor else F.to_pil_image(out)

    def __repr__(self):
        return (f"{self.__class__.__name__}(severity={self.severity}, mixture_width="
                f"{self.mixture_width}, chain_depth={self.chain_depth}, alpha={self.alpha}, "
                f"all_ops={self.all_ops}, interpolation={self.interpolation}, fill={self.fill})")
