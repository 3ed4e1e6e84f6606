"""Metadata shared by the weights enums: the 1000 ImageNet-1k category names, in class-index
order (the WordNet-derived names torchvision reports; data file ``imagenet_categories.txt``)."""

from importlib import resources

__all__ = ["imagenet_categories"]

_CACHE = []


def imagenet_categories():
    """The ImageNet-1k class names as a list, index = class id."""
    if not _CACHE:
        text = resources.files("fiamma.vision.models").joinpath("imagenet_categories.txt")
        _CACHE.append(text.read_text(encoding="utf-8").splitlines())
    return list(_CACHE[0])
