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

__all__ = ["__version__", *_SUBMODULES, "set_image_backend", "get_image_backend",
           "set_video_backend", "get_video_backend", "disable_beta_transforms_warning"]

_image_backend = "PIL"
_video_backend = "pyav"


def set_image_backend(backend):
    """torchvision's choice of image loader: fiamma.vision loads images with PIL, the default;
    ``"accimage"`` (Intel IPP) is not supported and raises."""
    global _image_backend
    if backend == "accimage":
        raise ValueError("set_image_backend: fiamma.vision loads images with PIL only; the "
                         "'accimage' backend is not supported")
    if backend != "PIL":
        raise ValueError(f"Invalid backend '{backend}'. Options are 'PIL' and 'accimage'")
    _image_backend = backend


def get_image_backend():
    """The image loader's name: ``"PIL"``."""
    return _image_backend


def set_video_backend(backend):
    """torchvision's video decoder choice (torchvision 0.28 accepts the call and keeps PyAV).
    The name is checked and kept for programs that set it; fiamma.vision decodes no video
    itself (see docs/porting.md for ``io.read_video``)."""
    if backend not in ("pyav", "video_reader", "cuda"):
        raise ValueError(f"Invalid video backend '{backend}'. Options are 'pyav', "
                         "'video_reader' and 'cuda'")


def get_video_backend():
    """The video decoder's name: ``"pyav"``."""
    return _video_backend


def disable_beta_transforms_warning():
    """Kept for programs written for torchvision 0.15-0.16 (the v2 transforms are stable):
    does nothing."""


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
