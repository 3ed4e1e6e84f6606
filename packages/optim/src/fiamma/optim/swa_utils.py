"""Stochastic weight averaging and exponential moving averages of models
(``torch.optim.swa_utils``): AveragedModel, SWALR, update_bn and the averaging functions.

fiamma-optim depends only on core, so these work with any module-like object: something
with ``parameters()`` (and ``buffers()``, ``modules()``, ``train()``, ``state_dict()`` where
used) and a ``__call__`` — every ``fiamma.nn.Module`` qualifies.

>>> import fiamma
>>> class Tiny:                      # the smallest module-like object
...     def __init__(self): self.w = fiamma.zeros(2)
...     def parameters(self): return iter([self.w])
...     def buffers(self): return iter([])
>>> model = Tiny()
>>> swa = AveragedModel(model)
>>> for v in (1.0, 2.0, 6.0):
...     _ = model.w.fill_(v); swa.update_parameters(model)
>>> swa.module.w.tolist()
[3.0, 3.0]
"""

import copy
import itertools
import math

import fiamma
from fiamma.optim.lr_scheduler import LRScheduler, _format_param

__all__ = ["AveragedModel", "SWALR", "update_bn", "get_ema_avg_fn", "get_swa_avg_fn",
           "get_ema_multi_avg_fn", "get_swa_multi_avg_fn"]


def get_ema_avg_fn(decay=0.999):
    """``avg_fn`` for an exponential moving average: ``decay * avg + (1 - decay) * new``."""

    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """``avg_fn`` for the running mean of all models seen: ``avg + (new - avg) / (n + 1)``."""

    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


def get_ema_multi_avg_fn(decay=0.999):
    """``multi_avg_fn`` for an EMA: updates lists of averaged tensors in place."""

    def ema_update(ema_params, current_params, num_averaged):
        if not ema_params:
            return
        if ema_params[0].is_floating_point() or ema_params[0].is_complex():
            for e, c in zip(ema_params, current_params):
                e.lerp_(c, 1 - decay)
        else:  # integer buffers (num_batches_tracked): the weighted sum, cast back (PyTorch's)
            for e, c in zip(ema_params, current_params):
                e.copy_(e * decay + c * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """``multi_avg_fn`` for the running mean, in place over lists of tensors."""

    def swa_update(averaged_params, current_params, num_averaged):
        if not averaged_params:
            return
        if averaged_params[0].is_floating_point() or averaged_params[0].is_complex():
            # PyTorch's lerp by 1 / (n + 1); with n a tensor that weight is computed in the
            # default float dtype (float32), and so here
            w = float(1 / (num_averaged + 1))
            for a, c in zip(averaged_params, current_params):
                a.lerp_(c, w)
            return
        n = float(num_averaged)
        for a, c in zip(averaged_params, current_params):
            a.add_((c - a) / (n + 1))

    return swa_update


def _tensors(model, use_buffers):
    params = model.parameters()
    if use_buffers and hasattr(model, "buffers"):
        return list(itertools.chain(params, model.buffers()))
    return list(params)


class AveragedModel:
    """A copy of ``model`` whose parameters are the average of the models passed to
    ``update_parameters`` (SWA by default, or any ``avg_fn`` / ``multi_avg_fn``, e.g. an
    EMA); ``use_buffers`` averages buffers too, otherwise they are copied from the model.
    Calling it runs the averaged copy. Its ``state_dict`` has PyTorch's keys
    (``n_averaged`` and ``module.<name>``)."""

    def __new__(cls, *args, **kwargs):
        if cls is AveragedModel:
            model = args[0] if args else kwargs.get("model")
            module_class = _averaged_module_class()
            if module_class is not None and isinstance(model, module_class.__mro__[1]):
                return object.__new__(module_class)  # an nn.Module itself, as in PyTorch
        return object.__new__(cls)

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.n_averaged = fiamma.tensor(0, dtype=fiamma.int64)
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def __call__(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    forward = __call__

    def parameters(self, recurse=True):
        return self.module.parameters()

    def buffers(self, recurse=True):
        return itertools.chain([self.n_averaged], self.module.buffers())

    def train(self, mode=True):
        if hasattr(self.module, "train"):
            self.module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def update_parameters(self, model):
        """Fold the current ``model`` into the average."""
        ours = _tensors(self.module, self.use_buffers)
        theirs = [t.detach() for t in _tensors(model, self.use_buffers)]
        if len(ours) != len(theirs):
            raise ValueError(f"AveragedModel.update_parameters: the model has {len(theirs)} "
                             f"tensors to average, the averaged copy {len(ours)}")
        n = int(self.n_averaged.item())
        with fiamma.no_grad():
            if n == 0:
                for a, c in zip(ours, theirs):
                    a.detach().copy_(c)
            elif self.multi_avg_fn is not None:
                # one call per (device, dtype) group, in first-seen order (as PyTorch), so
                # a function sees float parameters and integer buffers apart
                groups = {}
                for a, c in zip(ours, theirs):
                    g = groups.setdefault((str(a.device), a.dtype), ([], []))
                    g[0].append(a.detach())
                    g[1].append(c)
                for mine, model_ts in groups.values():
                    self.multi_avg_fn(mine, model_ts, self.n_averaged)
            else:
                fn = self.avg_fn or get_swa_avg_fn()
                for a, c in zip(ours, theirs):
                    a.detach().copy_(fn(a.detach(), c, self.n_averaged))
            if not self.use_buffers and hasattr(model, "buffers"):
                # buffers (BatchNorm statistics) follow the source model unless averaged
                for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                    b_avg.detach().copy_(b_model.detach())
        self.n_averaged += 1

    def state_dict(self):
        sd = {"n_averaged": self.n_averaged}
        if hasattr(self.module, "state_dict"):
            for k, v in self.module.state_dict().items():
                sd["module." + k] = v
        return sd

    def load_state_dict(self, state_dict, strict=True):
        self.n_averaged.copy_(state_dict["n_averaged"])
        inner = {k[len("module."):]: v for k, v in state_dict.items() if k.startswith("module.")}
        if hasattr(self.module, "load_state_dict"):
            return self.module.load_state_dict(inner, strict=strict)
        return None


_AveragedModule = None


def _averaged_module_class():
    """AveragedModel as a subclass of fiamma.nn.Module too (so it has modules(), to(),
    named_parameters(), hooks, ... as PyTorch's), when fiamma-nn is installed; fiamma-optim does
    not depend on it."""
    global _AveragedModule
    if _AveragedModule is not None:
        return _AveragedModule
    try:
        from fiamma.nn import Module
    except ImportError:
        return None

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None,
                 use_buffers=False):
        Module.__init__(self)
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", fiamma.tensor(0, dtype=fiamma.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def __reduce_ex__(self, protocol):
        return Module.__reduce_ex__(self, protocol)

    _AveragedModule = type("_AveragedModule", (Module, AveragedModel), {
        "__init__": __init__, "forward": forward, "__module__": __name__,
        "__doc__": AveragedModel.__doc__, "__qualname__": "_AveragedModule"})
    _AveragedModule.__name__ = "AveragedModel"  # its repr and type name; pickled by qualname
    return _AveragedModule


def _is_batchnorm(m):
    return (hasattr(m, "reset_running_stats") and hasattr(m, "running_mean")
            and hasattr(m, "momentum"))


def update_bn(loader, model, device=None):
    """Recompute the BatchNorm running statistics of ``model`` with one pass over ``loader``
    (cumulative averages: momentum None), as needed after averaging weights."""
    momenta = {}
    for m in model.modules():
        if _is_batchnorm(m):
            m.reset_running_stats()
            momenta[m] = m.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for m in momenta:
        m.momentum = None
    with fiamma.no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    for m, mom in momenta.items():
        m.momentum = mom
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's learning rate to ``swa_lr`` over ``anneal_epochs`` epochs
    (``'cos'`` or ``'linear'``), then hold it (the SWA phase of training)."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):
        for lr, group in zip(_format_param("swa_lr", optimizer, swa_lr),
                             optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must by one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self._anneal_strategy = anneal_strategy  # PyTorch's attribute (state dict key)
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _anneal(self, t):
        if self._anneal_strategy == "linear":
            return t
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        prev_alpha = self._anneal(max(0, min(1, (step - 1) / span)))
        alpha = self._anneal(max(0, min(1, step / span)))
        groups = self.optimizer.param_groups
        starts = [self._initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, starts)]
