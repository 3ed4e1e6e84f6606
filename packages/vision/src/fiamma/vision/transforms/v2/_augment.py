"""Batch mixing: MixUp and CutMix (torchvision.transforms.v2's classes), on a batch of images
``(B, C, H, W)`` with integer labels ``(B,)`` (one-hot encoded with ``num_classes``) or labels
that are already one-hot / soft ``(B, num_classes)``."""
import math

import fiamma
from fiamma.nn import functional as NF
from fiamma.vision import tv_tensors as tv
from fiamma.vision.transforms.v2._transform import Transform, flatten, is_pure_tensor, unflatten

__all__ = ["MixUp", "CutMix"]


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


def sample_beta(alpha, beta):
    """One Beta(alpha, beta) draw from fiamma's generator."""
    x, y = _gamma(alpha), _gamma(beta)
    return x / (x + y)


def _default_labels(inputs):
    if isinstance(inputs, tuple) and len(inputs) > 1:
        inputs = inputs[1]
    if isinstance(inputs, fiamma.Tensor):
        return inputs
    if isinstance(inputs, dict):
        for k, v in inputs.items():
            if isinstance(k, str) and k.lower() == "labels":
                return v
    raise ValueError("could not find the labels: pass (images, labels), a dict with a "
                     "'labels' key, or labels_getter")


class _BaseMix(Transform):
    def __init__(self, *, alpha=1.0, num_classes=None, labels_getter="default"):
        super().__init__()
        if alpha <= 0:
            raise ValueError(f"{type(self).__name__}: alpha must be positive, got {alpha}")
        if num_classes is not None and num_classes < 1:
            raise ValueError(f"{type(self).__name__}: num_classes should be >= 1, got "
                             f"{num_classes}")
        self.alpha, self.num_classes = float(alpha), num_classes
        self.labels_getter = _default_labels if labels_getter == "default" else labels_getter

    def forward(self, *inputs):
        inputs = inputs if len(inputs) > 1 else inputs[0]
        name = type(self).__name__
        flat, spec = flatten(inputs)
        if any(isinstance(x, (tv.BoundingBoxes, tv.Mask, tv.KeyPoints)) for x in flat):
            raise ValueError(f"{name} does not support bounding boxes, masks or keypoints")
        labels = self.labels_getter(inputs)
        if not isinstance(labels, fiamma.Tensor):
            raise ValueError(f"{name}: the labels must be a tensor, got {type(labels).__name__}")
        images = [x for x in flat if isinstance(x, (tv.Image, tv.Video)) or
                  (is_pure_tensor(x) and x is not labels and x.ndim >= 4)]
        if len(images) != 1:
            raise ValueError(f"{name}: expected exactly one batched image or video, found "
                             f"{len(images)}")
        img = images[0]
        if img.ndim < 4:
            raise ValueError(f"{name}: expected a batch (B, C, H, W), got {tuple(img.shape)}")
        b = img.shape[0] if not isinstance(img, tv.Video) else img.shape[0]
        if labels.ndim == 1:
            if self.num_classes is None:
                raise ValueError(f"{name}: num_classes is required for integer labels")
            if labels.dtype.is_floating_point:
                raise ValueError(f"{name}: 1-D labels must be integers, got {labels.dtype}")
            one_hot = NF.one_hot(labels.long(), self.num_classes).float()
        elif labels.ndim == 2:
            one_hot = labels.float()
        else:
            raise ValueError(f"{name}: labels should be (B,) or (B, num_classes), got "
                             f"{tuple(labels.shape)}")
        if labels.shape[0] != b:
            raise ValueError(f"{name}: the batch has {b} images but {labels.shape[0]} labels")
        params = self.make_params(img)
        out_img, lam = self._mix(img, params)
        mixed = one_hot.roll(1, 0) * (1.0 - lam) + one_hot * lam
        out = []
        for x in flat:
            if x is img:
                out.append(out_img)
            elif x is labels:
                out.append(mixed)
            else:
                out.append(x)
        return unflatten(out, spec)

    def _repr_items(self):
        return [("alpha", self.alpha), ("num_classes", self.num_classes)]


def _rewrap(out, like):
    return tv.wrap(out, like=like) if isinstance(like, tv.TVTensor) else out


class MixUp(_BaseMix):
    """Blend each image with the previous one in the batch (``x*lam + x.roll(1)*(1-lam)``,
    lam ~ Beta(alpha, alpha)) and its labels alike.

        >>> import fiamma
        >>> x, y = fiamma.rand(4, 3, 8, 8), fiamma.tensor([0, 1, 2, 1])
        >>> xm, ym = MixUp(num_classes=3)(x, y)
        >>> tuple(ym.shape)
        (4, 3)
    """

    def make_params(self, img):
        return dict(lam=sample_beta(self.alpha, self.alpha))

    def _mix(self, img, params):
        lam = params["lam"]
        x = img.as_subclass(fiamma.Tensor) if isinstance(img, tv.TVTensor) else img
        out = x.roll(1, 0) * (1.0 - lam) + x * lam
        if not x.dtype.is_floating_point:
            out = out.to(x.dtype)
        return _rewrap(out, img), lam


class CutMix(_BaseMix):
    """Paste a box from the previous image of the batch (box area ~ 1 - lam, lam ~
    Beta(alpha, alpha), centre uniform, clipped at the border); labels are mixed by the
    pasted area."""

    def make_params(self, img):
        h, w = img.shape[-2:]
        lam = sample_beta(self.alpha, self.alpha)
        rx = int(fiamma.randint(0, w, (1,)).item())
        ry = int(fiamma.randint(0, h, (1,)).item())
        r = 0.5 * math.sqrt(1.0 - lam)
        rw, rh = int(r * w), int(r * h)
        x1, y1 = max(rx - rw, 0), max(ry - rh, 0)
        x2, y2 = min(rx + rw, w), min(ry + rh, h)
        lam_adj = 1.0 - (x2 - x1) * (y2 - y1) / float(w * h)
        return dict(box=(x1, y1, x2, y2), lam_adjusted=lam_adj)

    def _mix(self, img, params):
        x1, y1, x2, y2 = params["box"]
        x = img.as_subclass(fiamma.Tensor) if isinstance(img, tv.TVTensor) else img
        out = x.clone()
        out[..., y1:y2, x1:x2] = x.roll(1, 0)[..., y1:y2, x1:x2]
        return _rewrap(out, img), params["lam_adjusted"]
