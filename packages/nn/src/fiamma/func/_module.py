"""``functional_call``, ``stack_module_state`` and ``replace_all_batch_norm_modules_``
(PyTorch's ``torch.func``): running an ``nn.Module`` with tensors passed in."""

import fiamma
from fiamma.nn import Module
from fiamma.nn.modules.batchnorm import _BatchNorm

from ._batched import is_tensor

_MISSING = object()


def _tied_names(module):
    """name -> every name (tie group) under which the same tensor object is registered."""
    groups = {}
    for name, t in module.named_parameters(remove_duplicate=False):
        groups.setdefault(id(t), []).append(name)
    for name, t in module.named_buffers(remove_duplicate=False):
        if t is not None:
            groups.setdefault(id(t), []).append(name)
    return {n: names for names in groups.values() for n in names}


def _resolve(module, name):
    path, _, attr = name.rpartition(".")
    mod = module
    if path:
        for part in path.split("."):
            sub = mod._modules.get(part) if isinstance(mod, Module) else None
            if sub is None:
                raise AttributeError(f"functional_call: {type(mod).__name__} has no submodule "
                                     f"{part!r} (for key {name!r})")
            mod = sub
    return mod, attr


class _Swap:
    """Puts tensors into a module's registries under dotted names; ``restore`` undoes it."""

    def __init__(self, module):
        self.module = module
        self.undo = []

    def put(self, name, value):
        mod, attr = _resolve(self.module, name)
        d = mod.__dict__
        for table in ("_parameters", "_buffers"):
            reg = d[table]
            if attr in reg:
                self.undo.append((reg, attr, reg[attr]))
                reg[attr] = value
                return
        # not a parameter or buffer (strict=False): a plain attribute for the call
        self.undo.append((d, attr, d.get(attr, _MISSING)))
        d[attr] = value

    def restore(self):
        for reg, attr, old in reversed(self.undo):
            if old is _MISSING:
                reg.pop(attr, None)
            else:
                reg[attr] = old
        self.undo.clear()


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """Call ``module`` with its parameters and buffers replaced by the given tensors
    (PyTorch's ``torch.func.functional_call``).

    ``parameter_and_buffer_dicts`` maps dotted names (``state_dict`` keys) to tensors; a
    tuple of such dicts is merged (a key in two of them raises). Names not given keep the
    module's own tensors. The module's tensors are restored afterwards, also when the call
    raises; gradients flow to the tensors passed in. ``args`` (a tuple, or a single argument)
    and ``kwargs`` are passed to the module. ``tie_weights=True``: a tensor given for one name
    of a tied parameter (the same Parameter registered twice) replaces it under every name.
    ``strict=True``: the names must be exactly the module's parameters and buffers.

    >>> import fiamma
    >>> from fiamma.func import functional_call
    >>> lin = fiamma.nn.Linear(2, 1)
    >>> w = {"weight": fiamma.ones(1, 2), "bias": fiamma.zeros(1)}
    >>> functional_call(lin, w, (fiamma.tensor([[1., 2.]]),)).tolist()
    [[3.0]]
    """
    if isinstance(parameter_and_buffer_dicts, dict):
        values = dict(parameter_and_buffer_dicts)
    elif isinstance(parameter_and_buffer_dicts, (tuple, list)):
        values, seen_twice = {}, []
        for d in parameter_and_buffer_dicts:
            if not isinstance(d, dict):
                raise ValueError("functional_call: expected a dict or a sequence of dicts of "
                                 f"tensors, got a sequence holding {type(d).__name__}")
            for k, v in d.items():
                if k in values:
                    seen_twice.append(k)
                values[k] = v
        if seen_twice:
            raise ValueError(f"{sorted(set(seen_twice))} appeared in multiple dictionaries; "
                             "behavior of functional call is ambiguous")
    else:
        raise ValueError("Expected all elements of parameter_and_buffer_dicts to be "
                         f"dictionaries, got {type(parameter_and_buffer_dicts).__name__}")
    for k, v in values.items():
        if not isinstance(k, str):
            raise ValueError(f"functional_call: keys must be strings, got {k!r}")
        if v is not None and not is_tensor(v):
            raise ValueError(f"functional_call: the value for {k!r} must be a Tensor, got "
                             f"{type(v).__name__}")
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    kwargs = {} if kwargs is None else kwargs

    tied = _tied_names(module) if tie_weights else {}
    if strict:
        expected = set(dict(module.named_parameters(remove_duplicate=False)))
        expected |= {n for n, b in module.named_buffers(remove_duplicate=False)}
        given = set(values)
        if tie_weights:  # one name of a tie group stands for all of them
            given |= {t for k in values for t in tied.get(k, ())}
        missing = sorted(expected - given)
        unexpected = sorted(set(values) - expected)
        if missing or unexpected:
            msg = [f"Error(s) in reparametrizing for {type(module).__name__}:"]
            if unexpected:
                msg.append("\tUnexpected key(s): " + ", ".join(repr(k) for k in unexpected) + ".")
            if missing:
                msg.append("\tMissing key(s): " + ", ".join(repr(k) for k in missing) + ".")
            raise RuntimeError("\n".join(msg))
    swaps = dict(values)
    if tie_weights:
        for k, v in values.items():
            group = tied.get(k, ())
            clash = sorted(n for n in group if n in values)
            if len(clash) > 1 and any(values[n] is not v for n in clash):
                raise ValueError(f"functional_call got multiple values for keys {clash}, which "
                                 "are tied. Consider using tie_weights=False")
            for n in group:
                swaps.setdefault(n, v)

    swap = _Swap(module)
    try:
        for k, v in swaps.items():
            swap.put(k, v)
        return module(*args, **kwargs)
    finally:
        swap.restore()


def stack_module_state(models):
    """``(params, buffers)``: each model's parameters and buffers stacked along a new leading
    dimension, keyed by name (PyTorch's ``torch.func.stack_module_state``), for running an
    ensemble with ``vmap`` over :func:`functional_call`. The stacked parameters are new
    leaves (``requires_grad`` as the models'); the models are not changed.

    >>> import fiamma
    >>> from fiamma.func import stack_module_state
    >>> params, buffers = stack_module_state([fiamma.nn.Linear(3, 2) for _ in range(4)])
    >>> params["weight"].shape, params["weight"].is_leaf
    (fiamma.Size([4, 2, 3]), True)
    """
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same "
                           "training/eval mode.")
    if any(type(m) is not type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    all_params = [dict(m.named_parameters()) for m in models]
    all_buffers = [dict(m.named_buffers()) for m in models]

    def gather(tables, name):
        try:
            return [t[name] for t in tables]
        except KeyError:
            raise RuntimeError(f"stack_module_state: {name!r} is not in every model") from None

    params = {}
    for name in all_params[0]:
        ts = gather(all_params, name)
        rg = ts[0].requires_grad
        if any(t.requires_grad != rg for t in ts):
            raise RuntimeError(f"Expected {name} from each model to have the same "
                               ".requires_grad")
        stacked = fiamma.stack([t.detach() for t in ts])
        params[name] = stacked.requires_grad_(True) if rg else stacked
    buffers = {name: fiamma.stack([t.detach() for t in gather(all_buffers, name)])
               for name in all_buffers[0]}
    return params, buffers


def replace_all_batch_norm_modules_(root):
    """Stop every BatchNorm module under ``root`` from tracking running statistics (in
    place; PyTorch's ``torch.func.replace_all_batch_norm_modules_``): ``running_mean``,
    ``running_var`` and ``num_batches_tracked`` become None, so batch statistics are always
    used. Returns ``root``.

    >>> import fiamma
    >>> from fiamma.func import replace_all_batch_norm_modules_
    >>> bn = replace_all_batch_norm_modules_(fiamma.nn.BatchNorm1d(3))
    >>> bn.running_mean is None, bn.track_running_stats
    (True, False)
    """
    for m in root.modules():
        if isinstance(m, _BatchNorm):
            m.running_mean = None
            m.running_var = None
            m.num_batches_tracked = None
            m.track_running_stats = False
    return root
