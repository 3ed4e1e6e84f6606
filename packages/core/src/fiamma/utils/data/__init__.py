"""fiamma.utils.data: PyTorch's ``torch.utils.data`` path for :mod:`fiamma.data` (the
``fiamma-data`` distribution). Every name here is the same object as in ``fiamma.data``, and
``fiamma.utils.data.dataloader`` / ``.dataset`` / ``.sampler`` are fiamma.data's modules;
``fiamma.utils.data.distributed`` holds ``DistributedSampler`` as in PyTorch.

>>> import fiamma, fiamma.data
>>> from fiamma.utils.data import DataLoader
>>> DataLoader is fiamma.data.DataLoader
True
"""

from fiamma.utils._sibling import require

_data = require("fiamma.data", "fiamma-data", "fiamma.utils.data")

from fiamma.data import *  # noqa: E402,F401,F403

__all__ = list(_data.__all__)


def __getattr__(name):
    if name in ("dataloader", "dataset", "distributed", "sampler", "_utils"):
        # torch.utils.data.distributed is there without importing it: so are these
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    try:
        return getattr(_data, name)
    except AttributeError:
        raise AttributeError(f"module 'fiamma.utils.data' has no attribute {name!r} "
                             "(nor has fiamma.data)") from None


def __dir__():
    return sorted(set(globals()) | set(dir(_data)))
