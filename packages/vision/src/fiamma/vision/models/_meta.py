"""Metadata shared by the weights enums: the 1000 ImageNet-1k category names, in class-index
order (the WordNet-derived names torchvision reports; data file ``imagenet_categories.txt``),
and the 400 Kinetics-400 action names (``kinetics400_categories.txt``)."""

from importlib import resources

__all__ = ["imagenet_categories", "kinetics400_categories"]

_CACHE = {}


def _categories(file):
    if file not in _CACHE:
        text = resources.files("fiamma.vision.models").joinpath(file)
        _CACHE[file] = text.read_text(encoding="utf-8").splitlines()
    return list(_CACHE[file])


def imagenet_categories():
    """The ImageNet-1k class names as a list, index = class id."""
    return _categories("imagenet_categories.txt")


def kinetics400_categories():
    """The Kinetics-400 action names as a list, index = class id."""
    return _categories("kinetics400_categories.txt")
