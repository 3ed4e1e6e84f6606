"""Parametrizations (``torch.nn.utils.parametrize``): a module's tensor recomputed on every
access as ``parametrization(original)``.

Registering swaps the module's class for a generated subclass ``Parametrized<Class>`` whose
property of that name evaluates the parametrizations; the unconstrained tensor lives at
``module.parametrizations.<name>.original`` (``original0``, ``original1``, ... when
``right_inverse`` returns several), which is also its ``state_dict`` key, as in PyTorch.

>>> import fiamma
>>> from fiamma import nn
>>> from fiamma.nn.utils import parametrize
>>> class Symmetric(nn.Module):
...     def forward(self, X):
...         return X.triu() + X.triu(1).mT
>>> lin = nn.Linear(3, 3)
>>> _ = parametrize.register_parametrization(lin, "weight", Symmetric())
>>> bool((lin.weight == lin.weight.T).all())
True
>>> sorted(lin.state_dict())
['bias', 'parametrizations.weight.original']
"""

import copy
from contextlib import contextmanager

import fiamma
from fiamma.nn.modules.container import ModuleDict, ModuleList
from fiamma.nn.parameter import Parameter

__all__ = ["cached", "ParametrizationList", "register_parametrization", "is_parametrized",
           "remove_parametrizations", "type_before_parametrizations",
           "transfer_parametrizations_and_params"]

_cache_enabled = 0
_cache = {}


@contextmanager
def cached():
    """Within this context each parametrized tensor is computed once, at its first use."""
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


def _register_parameter_or_buffer(module, name, x):
    if isinstance(x, Parameter):
        module.register_parameter(name, x)
    else:
        module.register_buffer(name, x)


def _set_data(original, new):
    """Replace ``original``'s contents by ``new``'s, keeping its identity (optimizers hold
    it), like PyTorch's ``set_``."""
    with fiamma.no_grad():
        original.data = new.detach()


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the original tensor(s)."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = tuple(original.shape), original.dtype
        with fiamma.no_grad():
            new = original
            for m in reversed(self):
                if hasattr(m, "right_inverse"):
                    try:
                        new = m.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, (fiamma.Tensor, list, tuple)):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors "
                             f"(list, tuple...). Got {type(new).__name__}")
        self.is_tensor = isinstance(new, fiamma.Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if original.dtype != new.dtype:
                raise ValueError("When `right_inverse` outputs one tensor, it may not change "
                                 f"the dtype.\noriginal.dtype: {original.dtype}\n"
                                 f"right_inverse(original).dtype: {new.dtype}")
            if new is not original:
                _set_data(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, t in enumerate(new):
                if not isinstance(t, fiamma.Tensor):
                    raise ValueError("'right_inverse' must return a Tensor or a Sequence of "
                                     f"tensors (list, tuple...). Got element {i} of the "
                                     f"sequence with type {type(t).__name__}.")
                t = t.detach()
                if isinstance(original, Parameter):
                    t = Parameter(t, original.requires_grad)
                else:
                    t.requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", t)
        if not self.unsafe:
            z = self()
            if not isinstance(z, fiamma.Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got "
                                 f"{type(z).__name__}.")
            if z.dtype != dtype:
                raise ValueError("Registering a parametrization may not change the dtype of "
                                 f"the tensor, unless `unsafe` flag is enabled.\nunparametrized "
                                 f"dtype: {dtype}\nparametrized dtype: {z.dtype}")
            if tuple(z.shape) != shape:
                raise ValueError("Registering a parametrization may not change the shape of "
                                 f"the tensor, unless `unsafe` flag is enabled.\nunparametrized "
                                 f"shape: {list(shape)}\nparametrized shape: {list(z.shape)}")

    def right_inverse(self, value):
        """Set the original tensor(s) so that the parametrized tensor becomes ``value``."""
        with fiamma.no_grad():
            for m in reversed(self):
                if hasattr(m, "right_inverse"):
                    value = m.right_inverse(value)
                else:
                    raise RuntimeError(f"parametrization {type(m).__name__} does not implement "
                                       "right_inverse.")
            if self.is_tensor:
                if not isinstance(value, fiamma.Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got "
                                     f"{type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(f"The tensor returned by `right_inverse` has dtype "
                                     f"{value.dtype} while `original` has dtype "
                                     f"{self.original.dtype}")
                _set_data(self.original, value)
            else:
                if not isinstance(value, (list, tuple)) or len(value) != self.ntensors:
                    raise ValueError(f"'right_inverse' must return a sequence of "
                                     f"{self.ntensors} tensors")
                for i, t in enumerate(value):
                    _set_data(getattr(self, f"original{i}"), t)

    def forward(self):
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for m in list(self)[1:]:
            x = m(x)
        return x


def _inject_new_class(module):
    cls = module.__class__

    def getstate(self):
        raise RuntimeError("Serialization of parametrized modules is only supported through "
                           "state_dict().")

    def deepcopy(self, memo):
        new = object.__new__(type(self))
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            new.__dict__[k] = copy.deepcopy(v, memo)
        return new

    param_cls = type(f"Parametrized{cls.__name__}", (cls,),
                     {"__getstate__": getstate, "__deepcopy__": deepcopy})
    module.__class__ = param_cls


def _inject_property(module, tensor_name):
    def get_parametrized(self):
        plist = self.parametrizations[tensor_name]
        if _cache_enabled:
            key = (id(self), tensor_name)
            t = _cache.get(key)
            if t is None:
                t = _cache[key] = plist()
            return t
        return plist()

    def set_original(self, value):
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Make ``module.<tensor_name>`` be ``parametrization(original)`` on every access. A
    ``right_inverse`` method of the parametrization initialises the original from the
    current value (and serves assignments ``module.<tensor_name> = value``). Registering a
    second parametrization on the same tensor chains it after the first. ``unsafe=True``
    skips the checks that shape and dtype are kept."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            if not isinstance(x, fiamma.Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got "
                                 f"{type(x).__name__}.")
            if x.dtype != y.dtype or tuple(x.shape) != tuple(y.shape):
                raise ValueError("Registering a parametrization may not change the shape or "
                                 "dtype of the tensor, unless the `unsafe` flag is enabled.")
            if hasattr(parametrization, "right_inverse"):
                try:
                    z = parametrization.right_inverse(y)
                except NotImplementedError:
                    pass
                else:
                    if not isinstance(z, fiamma.Tensor) or z.dtype != y.dtype or \
                            tuple(z.shape) != tuple(y.shape):
                        raise ValueError("parametrization.right_inverse must return a tensor "
                                         "of the shape and dtype of the tensor")
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    return module


def is_parametrized(module, tensor_name=None):
    """Whether ``module`` has a parametrization (on ``tensor_name``, if given)."""
    plists = module.__dict__.get("_modules", {}).get("parametrizations")
    if plists is None or not isinstance(plists, ModuleDict):
        return False
    if tensor_name is None:
        return len(plists) > 0
    return tensor_name in plists


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Undo ``register_parametrization``: ``module.<tensor_name>`` becomes a plain parameter
    (or buffer) again holding the current parametrized value (``leave_parametrized``) or the
    original tensor."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with fiamma.no_grad():
                t = getattr(module, tensor_name)
            _set_data(original, t)
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor "
                             "that is parametrized in terms of a sequence of tensors.")
        t = getattr(module, tensor_name)
        original = Parameter(t.detach(), t.requires_grad) if t.requires_grad else t.detach()
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module):
    """The module's class before any parametrization was registered."""
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Copy the parametrizations (and their originals) of ``from_module`` to ``to_module``."""
    if not is_parametrized(from_module):
        return to_module
    names = [tensor_name] if tensor_name is not None else list(from_module.parametrizations)
    for name in names:
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name)))
        for p in from_module.parametrizations[name]:
            if not is_parametrized(to_module, name) or p not in list(
                    to_module.parametrizations[name]):
                register_parametrization(to_module, name, p)
        with fiamma.no_grad():
            src = from_module.parametrizations[name]
            dst = to_module.parametrizations[name]
            if src.is_tensor:
                _set_data(dst.original, src.original)
            else:
                for i in range(src.ntensors):
                    _set_data(getattr(dst, f"original{i}"), getattr(src, f"original{i}"))
    return to_module
