"""The older hook-based weight normalisation (``torch.nn.utils.weight_norm``): parameters
``<name>_g`` and ``<name>_v``, and ``module.<name>`` recomputed before every forward."""

import warnings

import fiamma
from fiamma.nn.parameter import Parameter
from fiamma.nn.utils.parametrizations import _norm_except_dim, _weight_norm

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]


class WeightNorm:
    """The forward pre-hook that sets ``module.<name> = g * v / ||v||``."""

    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return _weight_norm(v, g, self.dim)

    @staticmethod
    def apply(module, name, dim):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same "
                                   f"parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        if not isinstance(weight, Parameter):
            raise ValueError(f"weight_norm: '{name}' must be a Parameter of the module")
        del module._parameters[name]
        module.register_parameter(name + "_g",
                                  Parameter(_norm_except_dim(weight, fn.dim).detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        with fiamma.no_grad():
            weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Replace ``module.<name>`` by ``<name>_g * <name>_v / ||<name>_v||`` (norm over every
    dimension but ``dim``; the whole tensor when ``dim`` is None), recomputed before every
    forward. Deprecated in PyTorch in favour of ``parametrizations.weight_norm``.

    >>> import fiamma
    >>> from fiamma import nn
    >>> m = nn.utils.weight_norm(nn.Linear(4, 2))
    >>> list(m.state_dict())
    ['bias', 'weight_g', 'weight_v']
    """
    warnings.warn("torch.nn.utils.weight_norm is deprecated in favor of "
                  "torch.nn.utils.parametrizations.weight_norm.", FutureWarning, stacklevel=2)
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """Undo ``weight_norm``: ``module.<name>`` becomes a plain parameter again."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
