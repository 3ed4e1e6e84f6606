"""Pruning (``torch.nn.utils.prune``): a pruned parameter ``<name>`` becomes the parameter
``<name>_orig`` and the buffer ``<name>_mask``; a forward pre-hook (the pruning method
itself) sets the plain attribute ``module.<name> = <name>_mask * <name>_orig`` before every
forward. Pruning the same parameter again combines the masks through a ``PruningContainer``
(the new method only sees the entries, or channels, the earlier masks kept)."""

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

import fiamma
from fiamma.nn.utils.convert_parameters import parameters_to_vector

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured",
           "L1Unstructured", "RandomStructured", "LnStructured", "CustomFromMask",
           "identity", "random_unstructured", "l1_unstructured", "random_structured",
           "ln_structured", "global_unstructured", "custom_from_mask", "remove", "is_pruned"]


class BasePruningMethod(ABC):
    """Base of the pruning methods: subclasses set ``PRUNING_TYPE`` ("unstructured",
    "structured" or "global") and write ``compute_mask(t, default_mask)``."""

    _tensor_name: str

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The mask (same shape as ``t``) of the entries to keep, given the earlier
        ``default_mask``."""

    def apply_mask(self, module):
        name = self._tensor_name
        orig = getattr(module, name + "_orig")
        mask = getattr(module, name + "_mask")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune ``module.<name>`` with ``cls(*args, **kwargs)``; returns the method (or the
        container holding it when the parameter was pruned before)."""
        old_key, old_method = None, None
        for k, hook in module._forward_pre_hooks.items():
            if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
                if old_method is not None:
                    raise RuntimeError(f"prune: more than one pruning hook on parameter "
                                       f"'{name}' of {type(module).__name__}")
                old_key, old_method = k, hook
        method = cls(*args, **kwargs)
        method._tensor_name = name
        if old_method is not None:
            if isinstance(old_method, PruningContainer):
                old_method.add_pruning_method(method)
                method = old_method
            else:
                container = PruningContainer(old_method)
                container.add_pruning_method(method)
                method = container
        orig = getattr(module, name)
        if importance_scores is not None:
            if tuple(importance_scores.shape) != tuple(orig.shape):
                raise ValueError(f"prune: importance_scores of shape "
                                 f"{tuple(importance_scores.shape)} must match parameter "
                                 f"'{name}' of shape {tuple(orig.shape)}")
        else:
            importance_scores = orig
        if old_method is None:
            if name not in module._parameters:
                raise ValueError(f"prune: '{name}' is not a parameter of "
                                 f"{type(module).__name__} (got {type(orig).__name__})")
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = fiamma.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            if old_key is not None:
                del module._forward_pre_hooks[old_key]
            module.register_forward_pre_hook(method)
        except Exception:
            if old_method is None:
                orig = module._parameters.pop(name + "_orig")
                module._buffers.pop(name + "_mask", None)
                if name in module.__dict__:
                    delattr(module, name)
                module.register_parameter(name, orig)
            raise
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """``t`` with this method's mask applied (no module involved)."""
        if importance_scores is not None and tuple(importance_scores.shape) != tuple(t.shape):
            raise ValueError(f"prune: importance_scores of shape "
                             f"{tuple(importance_scores.shape)} must match the tensor's "
                             f"shape {tuple(t.shape)}")
        scores = t if importance_scores is None else importance_scores
        mask = fiamma.ones_like(t) if default_mask is None else default_mask
        return t * self.compute_mask(scores, default_mask=mask)

    def remove(self, module):
        """Make the pruning permanent: ``<name>`` becomes a parameter again holding the
        pruned values; ``<name>_orig`` and ``<name>_mask`` go."""
        name = self._tensor_name
        if name + "_orig" not in module._parameters:
            raise ValueError(f"prune.remove: parameter '{name}' of {type(module).__name__} "
                             f"has no '{name}_orig' (was it pruned?)")
        weight = self.apply_mask(module)
        if name in module.__dict__:
            delattr(module, name)
        orig = module._parameters.pop(name + "_orig")
        orig.data = weight.data
        module._buffers.pop(name + "_mask", None)
        setattr(module, name, orig)


class PruningContainer(BasePruningMethod):
    """The pruning methods applied in turn to one parameter; its mask is the last method's
    mask computed on what the earlier masks kept."""

    def __init__(self, *args):
        self._pruning_methods = ()
        if len(args) == 1 and not isinstance(args[0], Iterable):
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        elif len(args) == 1:
            for method in args[0]:
                self.add_pruning_method(method)
        else:
            for method in args:
                self.add_pruning_method(method)

    def add_pruning_method(self, method):
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"PruningContainer.add_pruning_method: expected a "
                            f"BasePruningMethod, got {type(method).__name__}")
        if method is not None:
            if not hasattr(self, "_tensor_name"):
                self._tensor_name = method._tensor_name
            elif method._tensor_name != self._tensor_name:
                raise ValueError(f"PruningContainer.add_pruning_method: can only add methods "
                                 f"acting on parameter '{self._tensor_name}', got one on "
                                 f"'{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        method = self._pruning_methods[-1]
        kind = method.PRUNING_TYPE
        new_mask = default_mask.clone()
        if kind == "unstructured":
            keep = default_mask == 1
            new_mask[keep] = method.compute_mask(
                t[keep], default_mask=default_mask[keep]).to(dtype=new_mask.dtype)
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError("PruningContainer: a structured pruning method needs "
                                     "the attribute 'dim'")
            ndim = t.dim()
            dim = method.dim + ndim if method.dim < 0 else method.dim
            other = [d for d in range(ndim) if d != dim]
            kept = default_mask.sum(dim=other) != 0 if other else default_mask != 0
            slc = [slice(None)] * ndim
            slc[dim] = kept
            slc = tuple(slc)
            new_mask[slc] = method.compute_mask(
                t[slc], default_mask=default_mask[slc]).to(dtype=new_mask.dtype)
        elif kind == "global":
            new_mask = method.compute_mask(t, default_mask=default_mask)
        else:
            raise ValueError(f"PruningContainer: unrecognized PRUNING_TYPE {kind!r} (expected "
                             f"'unstructured', 'structured' or 'global')")
        return new_mask


class Identity(BasePruningMethod):
    """Prunes nothing (the mask is all ones)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


def _unstructured_mask(amount, t, default_mask, scores, largest):
    """``default_mask`` with the ``amount`` entries of ``t`` that rank first by ``scores``
    (largest or smallest) set to 0."""
    size = t.nelement()
    k = _compute_nparams_toprune(amount, size)
    _validate_pruning_amount(k, size)
    mask = default_mask.clone()
    if k != 0:
        idx = fiamma.topk(scores.reshape(-1), k=k, largest=largest).indices
        mask.view(-1)[idx] = 0
    return mask


class RandomUnstructured(BasePruningMethod):
    """Prunes ``amount`` entries chosen at random."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        return _unstructured_mask(self.amount, t, default_mask, fiamma.rand_like(t), True)

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prunes the ``amount`` entries of smallest absolute value."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        return _unstructured_mask(self.amount, t, default_mask, fiamma.abs(t), False)

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


def _channel_mask(t, dim, channels):
    mask = fiamma.zeros_like(t)
    slc = [slice(None)] * t.dim()
    slc[dim] = channels
    mask[tuple(slc)] = 1
    return mask


class RandomStructured(BasePruningMethod):
    """Prunes ``amount`` whole channels along ``dim``, chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        size = t.shape[self.dim]
        k = _compute_nparams_toprune(self.amount, size)
        _validate_pruning_amount(k, size)
        if k == 0:
            return default_mask
        prob = fiamma.rand(size)
        threshold = fiamma.kthvalue(prob, k=k).values
        mask = _channel_mask(t, self.dim, prob > threshold)
        return mask * default_mask.to(dtype=mask.dtype)

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Prunes the ``amount`` channels along ``dim`` of smallest L``n`` norm."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        size = t.shape[self.dim]
        k = _compute_nparams_toprune(self.amount, size)
        _validate_pruning_amount(k, size)
        if k == 0:
            return default_mask
        dim = self.dim + t.dim() if self.dim < 0 else self.dim
        others = [d for d in range(t.dim()) if d != dim]
        norm = fiamma.linalg.vector_norm(t, ord=self.n, dim=others)
        keep = fiamma.topk(norm, k=size - k, largest=True).indices
        mask = _channel_mask(t, dim, keep)
        return mask * default_mask.to(dtype=mask.dtype)

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes with a given mask."""

    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise ValueError(f"custom_from_mask: mask of shape {tuple(self.mask.shape)} must "
                             f"match the parameter's shape {tuple(default_mask.shape)}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


def identity(module, name):
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module, name, mask):
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the ``(module, name)`` pairs of ``parameters`` together: ``pruning_method``
    (an unstructured method class) sees all their entries as one vector."""
    if not isinstance(parameters, Iterable):
        raise TypeError(f"global_unstructured: parameters must be an iterable of "
                        f"(module, name) pairs, got {type(parameters).__name__}")
    parameters = list(parameters)
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError(f"global_unstructured: importance_scores must be a dict, got "
                        f"{type(importance_scores).__name__}")
    scores = parameters_to_vector(
        [importance_scores.get((m, n), getattr(m, n)) for m, n in parameters])
    default_mask = parameters_to_vector(
        [getattr(m, n + "_mask", None) if hasattr(m, n + "_mask")
         else fiamma.ones_like(getattr(m, n)) for m, n in parameters])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f"global_unstructured: only unstructured methods can prune globally, "
                        f"got PRUNING_TYPE={method.PRUNING_TYPE!r}")
    container.add_pruning_method(method)
    final = container.compute_mask(scores, default_mask)
    offset = 0
    for module, name in parameters:
        param = getattr(module, name)
        num = param.numel()
        custom_from_mask(module, name, mask=final[offset:offset + num].view_as(param))
        offset += num


def remove(module, name):
    """Make the pruning of ``module.<name>`` permanent and drop its hook."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning "
                     f"can be removed")


def is_pruned(module):
    """Whether any submodule of ``module`` carries a pruning hook."""
    for _, sub in module.named_modules():
        for hook in sub._forward_pre_hooks.values():
            if isinstance(hook, BasePruningMethod):
                return True
    return False


def _validate_pruning_amount_init(amount):
    if not isinstance(amount, numbers.Real) or isinstance(amount, bool):
        raise TypeError(f"prune: invalid type for amount: {amount!r} (expected a float in "
                        f"[0, 1] or a non-negative int)")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral) and (amount > 1.0 or amount < 0.0)):
        raise ValueError(f"prune: amount={amount} should either be a float in the range "
                         f"[0, 1] or a non-negative integer")


def _validate_pruning_amount(amount, tensor_size):
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise ValueError(f"prune: amount={amount} should be smaller than the number of "
                         f"parameters to prune={tensor_size}")


def _validate_structured_pruning(t):
    if len(t.shape) <= 1:
        raise ValueError(f"prune: structured pruning can only be applied to "
                         f"multidimensional tensors; found tensor of shape {tuple(t.shape)} "
                         f"with {len(t.shape)} dims")


def _validate_pruning_dim(t, dim):
    if dim >= t.dim() or dim < -t.dim():
        raise IndexError(f"prune: invalid dim {dim} for a tensor of {t.dim()} dims")


def _compute_nparams_toprune(amount, tensor_size):
    if isinstance(amount, numbers.Integral):
        return int(amount)
    return round(amount * tensor_size)
