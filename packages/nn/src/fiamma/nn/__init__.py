"""fiamma.nn: modules, layers, functional and initialisation with PyTorch's torch.nn API."""

from fiamma.nn import attention, functional, init, parallel, utils  # noqa: F401
from fiamma.nn._version import __version__  # noqa: F401
from fiamma.nn.modules import *  # noqa: F401,F403
from fiamma.nn.modules.module import (  # noqa: F401
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)
from fiamma.nn.parallel import DataParallel  # noqa: F401
from fiamma.nn.parameter import (  # noqa: F401
    Buffer,
    Parameter,
    UninitializedBuffer,
    UninitializedParameter,
)


def __getattr__(name):
    # torch.nn.quantized / .intrinsic / .qat are attributes of torch.nn; they import
    # fiamma.ao, which imports fiamma.nn, so they load on first use
    if name in ("quantized", "intrinsic", "qat"):
        import importlib
        return importlib.import_module("fiamma.ao.nn." + name)
    raise AttributeError(f"module 'fiamma.nn' has no attribute {name!r}")
