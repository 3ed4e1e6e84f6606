"""Fusing named submodules in place of the originals (``torch.ao.quantization.fuse_modules``).

The first named module is replaced by the fused module, the others by ``nn.Identity``, so the
model's forward runs unchanged. Forward pre-hooks of the first and forward hooks of the last
module move to the fused module.

    >>> import fiamma
    >>> from fiamma import nn
    >>> from fiamma.ao.quantization import fuse_modules
    >>> m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()).eval()
    >>> f = fuse_modules(m, [["0", "1", "2"]])
    >>> [type(c).__name__ for c in f]
    ['ConvReLU2d', 'Identity', 'Identity']
    >>> x = fiamma.randn(1, 3, 8, 8)
    >>> bool((f(x) - m(x)).abs().max() < 1e-5)
    True
"""
import copy

from fiamma import nn
from fiamma.ao.quantization.fuser_method_mappings import get_fuser_method
from fiamma.nn.utils.parametrize import type_before_parametrizations

__all__ = ["fuse_modules", "fuse_modules_qat", "fuse_known_modules"]


def _get(model, key):
    mod = model
    for part in key.split("."):
        try:
            mod = getattr(mod, part)
        except AttributeError:
            raise AttributeError(f"fuse_modules: {type(model).__name__} has no submodule "
                                 f"{key!r}") from None
    return mod


def _set(model, key, module):
    *parents, last = key.split(".")
    mod = model
    for part in parents:
        mod = getattr(mod, part)
    setattr(mod, last, module)


def fuse_known_modules(mod_list, is_qat, additional_fuser_method_mapping=None):
    """The fused replacements of ``mod_list``: the fused module, then ``nn.Identity`` for each
    other module (in the first module's train/eval mode)."""
    types = tuple(type_before_parametrizations(m) for m in mod_list)
    method = get_fuser_method(types, additional_fuser_method_mapping)
    # the hooks move before fusing: a fuser that copies the first module would otherwise
    # copy its pre-hooks too and run them twice
    pre_hooks = dict(mod_list[0]._forward_pre_hooks)
    mod_list[0]._forward_pre_hooks.clear()
    hooks = dict(mod_list[-1]._forward_hooks)
    mod_list[-1]._forward_hooks.clear()
    try:
        fused = method(is_qat, *mod_list)
    except Exception:
        mod_list[0]._forward_pre_hooks.update(pre_hooks)
        mod_list[-1]._forward_hooks.update(hooks)
        raise
    for hook in pre_hooks.values():
        fused.register_forward_pre_hook(hook)
    for hook in hooks.values():
        fused.register_forward_hook(hook)
    out = [fused]
    for _ in mod_list[1:]:
        ident = nn.Identity()
        ident.training = mod_list[0].training
        out.append(ident)
    return out


def _fuse(model, modules_to_fuse, is_qat, inplace, fuser_func, fuse_custom_config_dict):
    if not inplace:
        model = copy.deepcopy(model)
    if isinstance(modules_to_fuse, str) or not modules_to_fuse:
        raise TypeError("fuse_modules: modules_to_fuse must be a non-empty list of module names "
                        f"or of lists of them, got {modules_to_fuse!r}")
    groups = ([modules_to_fuse] if all(isinstance(k, str) for k in modules_to_fuse)
              else modules_to_fuse)
    extra = (fuse_custom_config_dict or {}).get("additional_fuser_method_mapping", {})
    for group in groups:
        if isinstance(group, str) or not all(isinstance(k, str) for k in group):
            raise TypeError(f"fuse_modules: expected a list of module names, got {group!r}")
        mods = [_get(model, k) for k in group]
        for key, new in zip(group, fuser_func(mods, is_qat, extra)):
            _set(model, key, new)
    return model


def fuse_modules(model, modules_to_fuse, inplace=False, fuser_func=fuse_known_modules,
                 fuse_custom_config_dict=None):
    """Fuse the modules named in ``modules_to_fuse`` (a list of names, or a list of such lists)
    for post-training use: the modules must be in eval mode; conv/linear + batch norm become
    one layer with the batch norm folded in, + ReLU an ``nn.intrinsic`` sequence. Sequences
    fused: conv+bn, conv+bn+relu, conv+relu, linear+bn, linear+relu, bn+relu, convtranspose+bn.
    Returns the fused model (a deep copy unless ``inplace``)."""
    return _fuse(model, modules_to_fuse, False, inplace, fuser_func, fuse_custom_config_dict)


def fuse_modules_qat(model, modules_to_fuse, inplace=False, fuser_func=fuse_known_modules,
                     fuse_custom_config_dict=None):
    """:func:`fuse_modules` for quantization-aware training: batch norms stay modules inside
    ``ConvBn*d`` / ``ConvBnReLU*d`` / ``LinearBn1d`` sequences (any mode)."""
    return _fuse(model, modules_to_fuse, True, inplace, fuser_func, fuse_custom_config_dict)
