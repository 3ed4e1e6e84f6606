"""``torch.distributed.fsdp.wrap``: the auto-wrap policies that decide which submodules FSDP
wraps, and ``wrap``/``enable_wrap``.

The policies are plain functions of ``(module, recurse, nonwrapped_numel)`` and work as in
PyTorch (with ``recurse=True`` they answer whether to descend into ``module``, with
``recurse=False`` whether to wrap it); they can be called and tested although fiamma has no
FSDP to hand them to (wrapping a module in ``FullyShardedDataParallel`` raises
NotImplementedError). ``wrap(module)`` returns ``module`` unchanged outside ``enable_wrap``,
and inside it calls the ``wrapper_cls`` given there.

>>> import fiamma.nn as nn
>>> from fiamma.distributed.fsdp.wrap import transformer_auto_wrap_policy
>>> layer = nn.TransformerEncoderLayer(8, 2)
>>> transformer_auto_wrap_policy(layer, False, 0, {nn.TransformerEncoderLayer})
True
"""

import contextlib

import fiamma.nn as nn

__all__ = ["always_wrap_policy", "lambda_auto_wrap_policy", "transformer_auto_wrap_policy",
           "size_based_auto_wrap_policy", "ModuleWrapPolicy", "CustomPolicy", "enable_wrap",
           "wrap"]


def always_wrap_policy(*args, **kwargs):
    """Wrap every submodule."""
    return True


def lambda_auto_wrap_policy(module, recurse, nonwrapped_numel, lambda_fn):
    """Descend everywhere; wrap the modules for which ``lambda_fn(module)`` is true."""
    return True if recurse else bool(lambda_fn(module))


def transformer_auto_wrap_policy(module, recurse, nonwrapped_numel, transformer_layer_cls):
    """Descend everywhere; wrap the instances of ``transformer_layer_cls`` (a class or a set
    of classes)."""
    if recurse:
        return True
    classes = (tuple(transformer_layer_cls) if not isinstance(transformer_layer_cls, type)
               else (transformer_layer_cls,))
    return isinstance(module, classes)


def _classes(given, default):
    return tuple(default if given is None else given)


def size_based_auto_wrap_policy(module, recurse, nonwrapped_numel, min_num_params=int(1e8),
                                force_leaf_modules=None, exclude_wrap_modules=None):
    """Descend into and wrap the modules with at least ``min_num_params`` parameters not yet
    wrapped; never descend into ``force_leaf_modules`` (default: MultiheadAttention) nor wrap
    ``exclude_wrap_modules`` (default: ModuleList and ModuleDict)."""
    large = nonwrapped_numel >= min_num_params
    if recurse:
        return large and not isinstance(
            module, _classes(force_leaf_modules, size_based_auto_wrap_policy.FORCE_LEAF_MODULES))
    return large and not isinstance(
        module, _classes(exclude_wrap_modules, size_based_auto_wrap_policy.EXCLUDE_WRAP_MODULES))


size_based_auto_wrap_policy.FORCE_LEAF_MODULES = {nn.MultiheadAttention}
size_based_auto_wrap_policy.EXCLUDE_WRAP_MODULES = {nn.ModuleList, nn.ModuleDict}


class ModuleWrapPolicy:
    """Wrap the instances of the given module classes (the object form of
    ``transformer_auto_wrap_policy``)."""

    def __init__(self, module_classes):
        self._module_classes = set(module_classes)

    def __call__(self, module, recurse, *args, **kwargs):
        return transformer_auto_wrap_policy(module, recurse, 0, self._module_classes)

    def __repr__(self):
        return f"{type(self).__name__}({self._module_classes})"


class CustomPolicy:
    """Wrap the modules for which ``lambda_fn(module)`` is true (PyTorch's FSDP reads a dict
    answer as that module's wrapping arguments; here any true answer reads as "wrap")."""

    def __init__(self, lambda_fn):
        self._lambda_fn = lambda_fn

    def __call__(self, module, recurse, *args, **kwargs):
        return lambda_auto_wrap_policy(module, recurse, 0, self._lambda_fn)


_wrap_state = {"wrapper_cls": None, "kwargs": {}}


@contextlib.contextmanager
def enable_wrap(*, wrapper_cls, **wrapper_kwargs):
    """Within it, ``wrap(module)`` returns ``wrapper_cls(module, **wrapper_kwargs)``."""
    if _wrap_state["wrapper_cls"] is not None:
        raise NotImplementedError("enable_wrap: the context cannot be nested (as in PyTorch)")
    _wrap_state.update(wrapper_cls=wrapper_cls, kwargs=wrapper_kwargs)
    try:
        yield
    finally:
        _wrap_state.update(wrapper_cls=None, kwargs={})


def wrap(module, **wrap_overrides):
    """``module`` wrapped by the ``enable_wrap`` context's class, or unchanged outside it."""
    cls = _wrap_state["wrapper_cls"]
    if cls is None:
        return module
    return cls(module, **{**_wrap_state["kwargs"], **wrap_overrides})
