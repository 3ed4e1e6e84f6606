"""fiamma.vision: image transforms, datasets, image I/O and models for fiamma (torchvision's API).

Submodules are imported on first use, so `import fiamma.vision` stays fast:

    >>> from fiamma.vision import transforms as T
    >>> T.Resize(256)
    Resize(size=256, interpolation=bilinear, max_size=None, antialias=True)
"""
import importlib

from fiamma.vision._version import __version__

# submodules imported lazily on first attribute access
_SUBMODULES = ("transforms", "io", "utils", "datasets", "models", "ops", "tv_tensors")

__all__ = ["__version__", *_SUBMODULES]


def __getattr__(name):
    if name in _SUBMODULES:
        try:
            mod = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"{__name__}.{name}":
                raise AttributeError(f"module 'fiamma.vision' has no attribute {name!r} "
                                     "(this version does not ship it)") from None
            raise
        globals()[name] = mod
        return mod
    raise AttributeError(f"module 'fiamma.vision' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_SUBMODULES))
