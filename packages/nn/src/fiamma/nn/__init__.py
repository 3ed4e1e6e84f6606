"""fiamma.nn: modules, layers, functional and initialisation with PyTorch's torch.nn API."""

from fiamma.nn import (  # noqa: F401
    attention,
    common_types,
    functional,
    grad,
    init,
    parallel,
    utils,
)
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


def factory_kwargs(kwargs):
    """The factory keyword arguments (``device``, ``dtype``, ``memory_format``) of a layer's
    ``**kwargs`` as one dict for ``fiamma.empty(..., **factory_kwargs(kwargs))``
    (``torch.nn.factory_kwargs``). A ``factory_kwargs`` entry gives them explicitly (for a
    signature where one of the names means something else); any other key, or a name given
    both ways, is a TypeError.

    >>> import fiamma
    >>> factory_kwargs({"dtype": fiamma.float64, "factory_kwargs": {"device": "cpu"}})
    {'device': 'cpu', 'dtype': fiamma.float64}
    """
    if kwargs is None:
        return {}
    simple = ("device", "dtype", "memory_format")
    unexpected = set(kwargs) - set(simple) - {"factory_kwargs"}
    if unexpected:
        raise TypeError(f"factory_kwargs: unexpected kwargs {unexpected}")
    out = dict(kwargs.get("factory_kwargs", {}))
    for key in simple:
        if key in kwargs:
            if key in out:
                raise TypeError(f"factory_kwargs: {key} specified twice, in **kwargs and in "
                                "factory_kwargs")
            out[key] = kwargs[key]
    return out


def __getattr__(name):
    # torch.nn.quantized / .intrinsic / .qat are attributes of torch.nn; they import
    # fiamma.ao, which imports fiamma.nn, so they load on first use
    if name in ("quantized", "intrinsic", "qat"):
        import importlib
        return importlib.import_module("fiamma.ao.nn." + name)
    raise AttributeError(f"module 'fiamma.nn' has no attribute {name!r}")
