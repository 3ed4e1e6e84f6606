"""The older hook-based spectral normalisation (``torch.nn.utils.spectral_norm``):
parameter ``<name>_orig``, buffers ``<name>_u`` and ``<name>_v``, and ``module.<name>``
recomputed before every forward (with a power iteration in training mode)."""

import fiamma
from fiamma.nn import functional as F
from fiamma.nn.parameter import Parameter
from fiamma.nn.utils.parametrizations import _is_transposed_conv, _to_matrix

__all__ = ["SpectralNorm", "spectral_norm", "remove_spectral_norm"]


class SpectralNorm:
    """The forward pre-hook that sets ``module.<name> = <name>_orig / sigma``."""

    _version = 1

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim = name, dim
        self.n_power_iterations, self.eps = n_power_iterations, eps

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        mat = _to_matrix(weight, self.dim)
        if do_power_iteration:
            with fiamma.no_grad():
                m = mat.detach()
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(fiamma.mv(m.T, u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(fiamma.mv(m, v), dim=0, eps=self.eps))
            u, v = u.clone(), v.clone()
        sigma = fiamma.dot(u, fiamma.mv(mat, v))
        return weight / sigma

    def remove(self, module):
        with fiamma.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name,
                self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same "
                                   f"parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters.get(name)
        if not isinstance(weight, Parameter):
            raise ValueError(f"spectral_norm: '{name}' must be a Parameter of the module")
        with fiamma.no_grad():
            mat = _to_matrix(weight.detach(), dim)
            h, w = mat.shape
            u = F.normalize(fiamma.randn(h, dtype=weight.dtype), dim=0, eps=eps)
            v = F.normalize(fiamma.randn(w, dtype=weight.dtype), dim=0, eps=eps)
        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        setattr(module, name, weight.detach())
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)

        def add_version(mod, state_dict, prefix, local_metadata):
            key = name + ".version"
            local_metadata.setdefault("spectral_norm", {})[key] = fn._version

        module._register_state_dict_hook(add_version)
        return fn


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Divide ``module.<name>`` by its largest singular value, estimated by power iteration
    (one step per forward in training mode) from the buffers ``<name>_u``, ``<name>_v``.

    >>> import fiamma
    >>> from fiamma import nn
    >>> m = nn.utils.spectral_norm(nn.Linear(4, 2))
    >>> list(m.state_dict())
    ['bias', 'weight_orig', 'weight_u', 'weight_v']
    """
    if dim is None:
        dim = 1 if _is_transposed_conv(module) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name="weight"):
    """Undo ``spectral_norm``: ``module.<name>`` becomes a plain parameter again."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
