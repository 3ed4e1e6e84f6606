"""fiamma.functorch: PyTorch's legacy ``functorch`` API (what ``import functorch`` gives under
``fiamma.run``).

The transforms are :mod:`fiamma.func`'s (``vmap``, ``grad``, ``grad_and_value``, ``vjp``,
``jvp``, ``jacrev``, ``jacfwd``, ``hessian``, ``functionalize``), as functorch's are
``torch.func``'s, each warning per call that it is deprecated, as PyTorch 2.x's do. The module
API that ``torch.func.functional_call`` replaced is here: ``make_functional(model)`` returns
``(func, params)`` and ``make_functional_with_buffers(model)`` ``(func, params, buffers)``,
where ``func(params, [buffers,] *args)`` runs a copy of the model with those tensors;
``combine_state_for_ensemble(models)`` stacks the states of like models. These warn that they
are deprecated too.

>>> import fiamma
>>> from fiamma import functorch
>>> func, params = functorch.make_functional(fiamma.nn.Linear(2, 1))  # doctest: +SKIP
>>> func(params, fiamma.ones(1, 2)).shape  # doctest: +SKIP
fiamma.Size([1, 1])
"""

import copy
import functools
import warnings

import fiamma
import fiamma.func as _func
from fiamma import nn
from fiamma.func import functional_call

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian",
           "functionalize", "make_functional", "make_functional_with_buffers",
           "combine_state_for_ensemble", "FunctionalModule", "FunctionalModuleWithBuffers"]

__version__ = "2.13.0"  # functorch ships with PyTorch and answers its version


def _deprecated(name):
    warnings.warn(f"functorch.{name} is deprecated (as in PyTorch 2.x, where functorch was "
                  "merged into torch.func): use torch.func.functional_call (in fiamma: "
                  "fiamma.func.functional_call) instead", FutureWarning, stacklevel=3)


def _transform(name):
    target = getattr(_func, name)

    @functools.wraps(target)
    def wrapper(*args, **kwargs):
        warnings.warn(f"functorch.{name} is deprecated (as in PyTorch 2.x, where functorch was "
                      f"merged into torch.func): use torch.func.{name} (in fiamma: "
                      f"fiamma.func.{name}) instead", FutureWarning, stacklevel=2)
        return target(*args, **kwargs)

    return wrapper


vmap = _transform("vmap")
grad = _transform("grad")
grad_and_value = _transform("grad_and_value")
vjp = _transform("vjp")
jvp = _transform("jvp")
jacrev = _transform("jacrev")
jacfwd = _transform("jacfwd")
hessian = _transform("hessian")
functionalize = _transform("functionalize")


def _check_module(model, api):
    if not isinstance(model, nn.Module):
        raise TypeError(f"{api}: expected an nn.Module, got {type(model).__name__}")


class FunctionalModule(nn.Module):
    """``func(params, *args, **kwargs)``: a copy of a module called with ``params`` (a sequence
    of tensors in the order of its ``named_parameters()``) in place of its parameters."""

    def __init__(self, stateless_model, param_names):
        super().__init__()
        self.stateless_model = stateless_model
        self.param_names = tuple(param_names)

    @staticmethod
    def _create_from(model, disable_autograd_tracking=False):
        model_copy = copy.deepcopy(model)
        names, params = _extract(model_copy.named_parameters(), disable_autograd_tracking)
        return FunctionalModule(model_copy, names), params

    def forward(self, params, *args, **kwargs):
        values = _named(self.param_names, params, "parameters")
        return functional_call(self.stateless_model, values, args, kwargs)


class FunctionalModuleWithBuffers(nn.Module):
    """``func(params, buffers, *args, **kwargs)``: a copy of a module called with ``params`` and
    ``buffers`` (in the order of its ``named_parameters()`` / ``named_buffers()``)."""

    def __init__(self, stateless_model, param_names, buffer_names):
        super().__init__()
        self.stateless_model = stateless_model
        self.param_names = tuple(param_names)
        self.buffer_names = tuple(buffer_names)

    @staticmethod
    def _create_from(model, disable_autograd_tracking=False):
        model_copy = copy.deepcopy(model)
        names, params = _extract(model_copy.named_parameters(), disable_autograd_tracking)
        bnames = [n for n, _ in model_copy.named_buffers()]
        buffers = tuple(b for _, b in model_copy.named_buffers())
        return FunctionalModuleWithBuffers(model_copy, names, bnames), params, buffers

    def forward(self, params, buffers, *args, **kwargs):
        values = _named(self.param_names, params, "parameters")
        values.update(_named(self.buffer_names, buffers, "buffers"))
        return functional_call(self.stateless_model, values, args, kwargs)


def _extract(named, disable_autograd_tracking):
    names, params = [], []
    for n, p in named:
        names.append(n)
        params.append(p)
    if disable_autograd_tracking:
        for p in params:
            p.requires_grad_(False)
    return names, tuple(params)


def _named(names, values, what):
    values = tuple(values)
    if len(values) != len(names):
        raise RuntimeError(f"functorch functional module: expected {len(names)} {what}, got "
                           f"{len(values)}")
    return dict(zip(names, values))


def make_functional(model, disable_autograd_tracking=False):
    """``(func, params)`` for a module without buffers: ``func(params, *args)`` calls a copy of
    ``model`` with ``params`` (a tuple, initially the copy's parameters)."""
    _deprecated("make_functional")
    _check_module(model, "make_functional(model)")
    if len(tuple(model.buffers())) > 0:
        raise RuntimeError("make_functional(model): `model` has buffers. Please use "
                           "make_functional_with_buffers(model) instead.")
    return FunctionalModule._create_from(model, disable_autograd_tracking)


def make_functional_with_buffers(model, disable_autograd_tracking=False):
    """``(func, params, buffers)``: ``func(params, buffers, *args)`` calls a copy of ``model``
    with ``params`` and ``buffers`` (tuples, initially the copy's own)."""
    _deprecated("make_functional_with_buffers")
    _check_module(model, "make_functional_with_buffers(model)")
    return FunctionalModuleWithBuffers._create_from(model, disable_autograd_tracking)


def combine_state_for_ensemble(models):
    """``(func, params, buffers)`` for like models (same class, all in train or all in eval
    mode): each parameter and buffer stacked along a new leading dimension, for
    ``vmap(func)(params, buffers, x)``."""
    _deprecated("combine_state_for_ensemble")
    models = list(models)
    if not models:
        raise RuntimeError("combine_state_for_ensemble: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("combine_state_for_ensemble: Expected all models to have the same "
                           "training/eval mode.")
    if len({type(m) for m in models}) != 1:
        raise RuntimeError("combine_state_for_ensemble: Expected all models to be of the same "
                           "class.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        funcs = [make_functional_with_buffers(m) for m in models]
    func = funcs[0][0]
    params = tuple(fiamma.stack([f[1][i] for f in funcs]).detach()
                   for i in range(len(funcs[0][1])))
    buffers = tuple(fiamma.stack([f[2][i] for f in funcs]).detach()
                    for i in range(len(funcs[0][2])))
    return func, params, buffers
