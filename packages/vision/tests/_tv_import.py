"""torchvision for the parity tests. A torchvision whose C ops do not load beside the installed
torch (built against another torch, or the CUDA build beside a CPU torch) fails at import while
registering its meta kernels; its Python transforms and models do not need them, so the import
is retried without that module."""

import importlib
import sys
import types
import warnings


def _drop_meta_registrations():
    for k in [k for k in sys.modules if k.startswith("torchvision")]:
        del sys.modules[k]
    sys.modules["torchvision._meta_registrations"] = types.ModuleType("_meta_registrations")


def tv_import(name):
    """torchvision's module ``name`` (e.g. "torchvision.models"), retried without the meta
    registrations when its import fails for another reason than a missing package; None when
    it cannot be imported."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
    except Exception:
        _drop_meta_registrations()
    try:
        return importlib.import_module(name)
    except Exception:
        return None


def v2_modules():
    """``(torch, tv_tensors, transforms.v2, transforms.v2.functional, InterpolationMode)`` of
    the installed torch/torchvision, or None when they cannot be imported."""
    try:
        import torch
        import torchvision  # noqa: F401
    except ImportError:
        return None
    except Exception:
        _drop_meta_registrations()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from torchvision import tv_tensors as TT
            from torchvision.transforms import InterpolationMode, v2 as TV
            from torchvision.transforms.v2 import functional as TF
        return torch, TT, TV, TF, InterpolationMode
    except Exception:
        return None
