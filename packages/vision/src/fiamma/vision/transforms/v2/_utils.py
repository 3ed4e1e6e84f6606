"""Helpers for writing v2 transforms (torchvision.transforms.v2's public utilities):
type checks over flattened samples and lookups of the sample's boxes, keypoints and sizes.

    >>> import fiamma
    >>> from fiamma.vision import tv_tensors
    >>> from fiamma.vision.transforms import v2
    >>> flat = [tv_tensors.Image(fiamma.zeros(3, 4, 5)), "label"]
    >>> v2.has_any(flat, tv_tensors.Image), v2.has_all(flat, tv_tensors.Image, str)
    (True, True)
    >>> v2.query_chw(flat), v2.query_size(flat)
    ((3, 4, 5), (4, 5))
"""
from PIL import Image as PILImage

from fiamma.vision import tv_tensors as tv
from fiamma.vision.transforms.v2 import functional as F
from fiamma.vision.transforms.v2._transform import is_pure_tensor, query_size  # noqa: F401

__all__ = ["check_type", "has_any", "has_all", "get_bounding_boxes", "get_keypoints",
           "query_chw", "query_size"]


def check_type(obj, types_or_checks):
    """True if ``obj`` is an instance of one of the types or passes one of the callables."""
    for t in types_or_checks:
        if isinstance(obj, t) if isinstance(t, type) else t(obj):
            return True
    return False


def has_any(flat_inputs, *types_or_checks):
    """True if some input matches some type or check."""
    return any(check_type(x, types_or_checks) for x in flat_inputs)


def has_all(flat_inputs, *types_or_checks):
    """True if every type or check is matched by some input."""
    return all(any(check_type(x, (t,)) for x in flat_inputs) for t in types_or_checks)


def get_bounding_boxes(flat_inputs):
    """The (first) BoundingBoxes of the sample."""
    for x in flat_inputs:
        if isinstance(x, tv.BoundingBoxes):
            return x
    raise ValueError("No bounding boxes were found in the sample")


def get_keypoints(flat_inputs):
    """The (first) KeyPoints of the sample."""
    for x in flat_inputs:
        if isinstance(x, tv.KeyPoints):
            return x
    raise ValueError("No keypoints were found in the sample")


def query_chw(flat_inputs):
    """(C, H, W) shared by the sample's images and videos (ValueError if they differ)."""
    chws = {tuple(F.get_dimensions(x)) for x in flat_inputs
            if check_type(x, (is_pure_tensor, tv.Image, tv.Video, PILImage.Image))}
    if not chws:
        raise TypeError("No image or video was found in the sample")
    if len(chws) > 1:
        raise ValueError(f"Found multiple CxHxW dimensions in the sample: {sorted(chws)}")
    return chws.pop()


def find_labels_default(inputs):
    """torchvision's default ``labels_getter``: the second item of a tuple/list if it is a
    tensor, else the ``labels`` (or first ``*label*``) key of the dict there or of ``inputs``."""
    if isinstance(inputs, (tuple, list)):
        inputs = inputs[1]
    if is_pure_tensor(inputs):
        return inputs
    if not isinstance(inputs, dict):
        raise ValueError(f"When using the default labels_getter, the input passed to forward "
                         f"must be a dictionary or a two-tuple whose second item is a "
                         f"dictionary or a tensor, but got {type(inputs).__name__} instead.")
    keys = [k for k in inputs if isinstance(k, str)]
    key = next((k for k in keys if k.lower() == "labels"), None)
    if key is None:
        key = next((k for k in keys if "label" in k.lower()), None)
    if key is None:
        raise ValueError("Could not infer where the labels are in the sample. Try passing a "
                         "callable as the labels_getter parameter? If there are no labels in "
                         "the sample by design, pass labels_getter=None.")
    return inputs[key]


def parse_labels_getter(labels_getter):
    if labels_getter == "default":
        return find_labels_default
    if callable(labels_getter):
        return labels_getter
    if labels_getter is None:
        return lambda _: None
    raise ValueError(f"labels_getter should either be 'default', a callable, or None, but got "
                     f"{labels_getter!r}.")



