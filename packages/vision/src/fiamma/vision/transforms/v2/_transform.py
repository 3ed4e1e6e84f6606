"""The v2 Transform base: flatten nested inputs, decide which leaves to transform (plain
tensors count as images only when no Image/Video/PIL image is present, and only the first),
draw the parameters once (``make_params``), apply ``transform`` per leaf, rebuild the
structure."""
import fiamma
from fiamma import nn
from fiamma.vision import tv_tensors as tv
from fiamma.vision.transforms.v2 import functional as F
from fiamma.vision.transforms.v2._kernel_registry import passthrough_unregistered

try:
    from PIL import Image as _PILImage
    _PIL = (_PILImage.Image,)
except ImportError:       # pragma: no cover - pillow is a dependency
    _PIL = ()


_SPATIAL = (tv.Image, tv.Video, tv.Mask, tv.BoundingBoxes, tv.KeyPoints)


def flatten(obj):
    """(leaves, spec) of nested lists, tuples and dicts."""
    leaves = []

    def go(x):
        if isinstance(x, list):
            return ("list", [go(v) for v in x])
        if isinstance(x, tuple) and not isinstance(x, fiamma.Size):
            return ("tuple", type(x), [go(v) for v in x])
        if isinstance(x, dict):
            return ("dict", type(x), list(x), [go(v) for v in x.values()])
        leaves.append(x)
        return ("leaf",)
    return leaves, go(obj)


def unflatten(leaves, spec):
    it = iter(leaves)

    def go(s):
        if s[0] == "leaf":
            return next(it)
        if s[0] == "list":
            return [go(c) for c in s[1]]
        if s[0] == "tuple":
            vals = [go(c) for c in s[2]]
            return s[1](*vals) if hasattr(s[1], "_fields") else s[1](vals)
        d = s[1]() if s[1] is not dict else {}
        for k, c in zip(s[2], s[3]):
            d[k] = go(c)
        return d
    return go(spec)


def is_pure_tensor(x):
    return isinstance(x, fiamma.Tensor) and not isinstance(x, tv.TVTensor)


def needs_transform_list(flat):
    """torchvision's heuristic: a plain tensor is an image only if it is the first plain tensor
    and the sample holds no Image, Video or PIL image."""
    has_image = any(isinstance(x, (tv.Image, tv.Video) + _PIL) for x in flat)
    out, seen_pure = [], False
    for x in flat:
        if is_pure_tensor(x):
            out.append(not has_image and not seen_pure)
            seen_pure = True
        else:
            out.append(isinstance(x, (tv.TVTensor,) + _PIL))
    return out


def query_size(flat):
    """The (height, width) all spatial inputs share; ValueError if they disagree."""
    sizes = set()
    for x in flat:
        if isinstance(x, _SPATIAL + _PIL) or is_pure_tensor(x):
            if is_pure_tensor(x) and x.ndim < 2:
                continue
            sizes.add(tuple(F.get_size(x)))
    if not sizes:
        raise TypeError("No image, video, mask, bounding box or keypoint was found in the "
                        "sample")
    if len(sizes) > 1:
        raise ValueError(f"Found multiple HxW dimensions in the sample: {sorted(sizes)}")
    return sizes.pop()


def query_chw(flat):
    for x in flat:
        if isinstance(x, (tv.Image, tv.Video) + _PIL) or (is_pure_tensor(x) and x.ndim >= 3):
            return F.get_dimensions(x)
    raise TypeError("No image or video was found in the sample")


class Transform(nn.Module):
    """Base of the v2 transforms. Subclasses define ``transform(inpt, params)`` and, when
    random, ``make_params(flat_inputs)``; ``forward(*inputs)`` takes any nesting of tensors,
    tv_tensors, PIL images and other objects (passed through)."""

    def make_params(self, flat_inputs):
        return {}

    def transform(self, inpt, params):
        raise NotImplementedError(f"{type(self).__name__} must define transform()")

    def _needs(self, flat):
        return needs_transform_list(flat)

    def forward(self, *inputs):
        inputs = inputs if len(inputs) > 1 else inputs[0]
        flat, spec = flatten(inputs)
        needs = self._needs(flat)
        params = self.make_params([x for x, n in zip(flat, needs) if n])
        # a user tv_tensor without a kernel registered for a functional passes through
        with passthrough_unregistered():
            out = [self.transform(x, params) if n else x for x, n in zip(flat, needs)]
        return unflatten(out, spec)

    def extra_repr(self):
        return ", ".join(f"{k}={v}" for k, v in self._repr_items())

    def _repr_items(self):
        return []


class RandomTransform(Transform):
    """A transform applied with probability ``p`` (one coin per call for the whole sample)."""

    def __init__(self, p=0.5):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: p should be a float in [0, 1], got {p}")
        super().__init__()
        self.p = p

    def forward(self, *inputs):
        inputs_ = inputs if len(inputs) > 1 else inputs[0]
        if fiamma.rand(1).item() >= self.p:
            return inputs_
        return super().forward(*inputs)
