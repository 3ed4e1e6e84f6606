"""AutoAugment, RandAugment and TrivialAugmentWide for v2 samples: the ops and magnitudes of
the v1 classes, drawn once per call and applied to the sample's one image or video; the
geometric ops (shear, translate, rotate) move boxes, masks and keypoints with it, the colour
ops leave them alone."""
import math

import fiamma
from fiamma.vision import tv_tensors as tv
from fiamma.vision.transforms import _autoaugment as A1, functional as F1
from fiamma.vision.transforms.v2 import functional as F
from fiamma.vision.transforms.v2._transform import (
    Transform,
    flatten,
    needs_transform_list,
    unflatten,
)

__all__ = ["AutoAugment", "RandAugment", "TrivialAugmentWide", "AutoAugmentPolicy", "AugMix"]

AutoAugmentPolicy = A1.AutoAugmentPolicy
_GEOMETRIC = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate"}


def _apply(inpt, op, mag, interpolation, fill):
    if op in _GEOMETRIC:
        f = 0 if isinstance(inpt, (tv.Mask,)) else fill
        if op in ("ShearX", "ShearY"):
            s = math.degrees(math.atan(mag))
            shear = [s, 0.0] if op == "ShearX" else [0.0, s]
            # about the top-left corner, as the AutoAugment reference code does
            return F.affine(inpt, 0.0, [0, 0], 1.0, shear, interpolation, f, center=[0, 0])
        if op in ("TranslateX", "TranslateY"):
            tr = [int(mag), 0] if op == "TranslateX" else [0, int(mag)]
            return F.affine(inpt, 0.0, tr, 1.0, [0.0, 0.0], interpolation, f)
        return F.rotate(inpt, mag, interpolation, fill=f)
    if isinstance(inpt, (tv.BoundingBoxes, tv.Mask, tv.KeyPoints)) or op == "Identity":
        return inpt
    pure = F.to_pure_tensor(inpt)
    out = A1._apply_op(pure, op, mag, interpolation, fill)
    return tv.wrap(out, like=inpt) if isinstance(inpt, tv.TVTensor) else out


class _AutoAugmentBase(Transform):
    def _ops(self, image_size):
        raise NotImplementedError

    def forward(self, *inputs):
        inputs = inputs if len(inputs) > 1 else inputs[0]
        flat, spec = flatten(inputs)
        needs = needs_transform_list(flat)
        images = [x for x, n in zip(flat, needs) if n and not isinstance(
            x, (tv.BoundingBoxes, tv.Mask, tv.KeyPoints))]
        if len(images) != 1:
            raise TypeError(f"{type(self).__name__}: expected exactly one image or video in "
                            f"the sample, found {len(images)}")
        img = images[0]
        h, w = F.get_size(img)
        fill = A1._fill(F.to_pure_tensor(img), self.fill)
        ops = self._ops((h, w))
        out = []
        for x, n in zip(flat, needs):
            if n:
                for op, mag in ops:
                    x = _apply(x, op, mag, self.interpolation, fill)
            out.append(x)
        return unflatten(out, spec)


def _pick(n):
    return int(fiamma.randint(n, (1,)).item())


class AutoAugment(_AutoAugmentBase):
    """One random sub-policy (two ops) of ``policy`` per call."""

    def __init__(self, policy=AutoAugmentPolicy.IMAGENET,
                 interpolation=F1.InterpolationMode.NEAREST, fill=None):
        super().__init__()
        v1 = A1.AutoAugment(policy, interpolation, fill)
        self.policy, self.interpolation, self.fill = v1.policy, v1.interpolation, fill
        self.policies = v1.policies

    def _ops(self, image_size):
        tid, probs, signs = A1.AutoAugment.get_params(len(self.policies))
        space = A1.AutoAugment._augmentation_space(10, image_size)
        ops = []
        for i, (op, p, mag_id) in enumerate(self.policies[tid]):
            if probs[i] <= p:
                mags, signed = space[op]
                mag = float(mags[mag_id]) if mag_id is not None else 0.0
                ops.append((op, -mag if signed and signs[i] == 0 else mag))
        return ops


class RandAugment(_AutoAugmentBase):
    """``num_ops`` random ops at magnitude bin ``magnitude`` of ``num_magnitude_bins``."""

    def __init__(self, num_ops=2, magnitude=9, num_magnitude_bins=31,
                 interpolation=F1.InterpolationMode.NEAREST, fill=None):
        super().__init__()
        A1.RandAugment(num_ops, magnitude, num_magnitude_bins, interpolation, fill)  # checks
        self.num_ops, self.magnitude = num_ops, magnitude
        self.num_magnitude_bins, self.interpolation, self.fill = (num_magnitude_bins,
                                                                  interpolation, fill)

    def _ops(self, image_size):
        space = A1._space_rand(self.num_magnitude_bins, image_size)
        names = list(space)
        ops = []
        for _ in range(self.num_ops):
            op = names[_pick(len(names))]
            mags, signed = space[op]
            mag = float(mags[self.magnitude]) if mags.ndim > 0 else 0.0
            if signed and _pick(2):
                mag = -mag
            ops.append((op, mag))
        return ops


class TrivialAugmentWide(_AutoAugmentBase):
    """One random op at a random magnitude (TrivialAugment's wide space)."""

    def __init__(self, num_magnitude_bins=31, interpolation=F1.InterpolationMode.NEAREST,
                 fill=None):
        super().__init__()
        self._v1 = A1.TrivialAugmentWide(num_magnitude_bins, interpolation, fill)
        self.num_magnitude_bins, self.interpolation, self.fill = (num_magnitude_bins,
                                                                  interpolation, fill)

    def _ops(self, image_size):
        space = self._v1._augmentation_space(self.num_magnitude_bins)
        names = list(space)
        op = names[_pick(len(names))]
        mags, signed = space[op]
        mag = float(mags[_pick(len(mags))]) if mags.ndim > 0 else 0.0
        if signed and _pick(2):
            mag = -mag
        return [(op, mag)]


class AugMix(Transform):
    """AugMix for v2 samples: the v1 :class:`~fiamma.vision.transforms.AugMix` applied to the
    sample's one image or video; a sample with boxes, masks or keypoints is refused (the mix
    of differently warped images has no single geometry to apply to them)."""

    def __init__(self, severity=3, mixture_width=3, chain_depth=-1, alpha=1.0, all_ops=True,
                 interpolation=F1.InterpolationMode.BILINEAR, fill=None):
        super().__init__()
        self._impl = A1.AugMix(severity, mixture_width, chain_depth, alpha, all_ops,
                               interpolation, fill)

    def forward(self, *inputs):
        inputs = inputs if len(inputs) > 1 else inputs[0]
        flat, spec = flatten(inputs)
        needs = needs_transform_list(flat)
        if any(isinstance(x, (tv.BoundingBoxes, tv.Mask, tv.KeyPoints)) for x in flat):
            raise TypeError("AugMix: inputs with BoundingBoxes, Mask or KeyPoints are not "
                            "supported (only images and videos)")
        idx = [i for i, n in enumerate(needs) if n]
        if len(idx) != 1:
            raise TypeError(f"AugMix: expected exactly one image or video in the sample, found "
                            f"{len(idx)}")
        x = flat[idx[0]]
        out = self._impl(F.to_pure_tensor(x) if isinstance(x, tv.TVTensor) else x)
        flat = list(flat)
        flat[idx[0]] = tv.wrap(out, like=x) if isinstance(x, tv.TVTensor) else out
        return unflatten(flat, spec)

    def __repr__(self):
        return repr(self._impl)
