"""The optimizer base class: parameter groups, per-parameter state, hooks and state dicts.

Follows ``torch.optim.Optimizer``: ``param_groups`` is a list of dicts (``'params'`` plus the
hyper-parameters), ``state`` maps each parameter to its own dict, and ``state_dict()`` uses
PyTorch's layout (parameters replaced by their index in group order), so a state dict saved by
PyTorch (and loaded with ``fiamma.load``) restores a fiamma optimizer and the other way round.
"""

import contextlib
import functools
import math
from collections import OrderedDict, defaultdict
from itertools import chain

import fiamma
from fiamma.profiler import hook as _profiler

__all__ = ["Optimizer", "required", "register_optimizer_step_pre_hook",
           "register_optimizer_step_post_hook", "swap_in_optimizer_params_and_state"]


class _RequiredParameter:
    """Marks a hyper-parameter that has no default (``lr`` of SGD in old PyTorch)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()

# 0-d state kept in its own dtype on load (see Optimizer.load_state_dict)
_SCALAR_STATE = frozenset({"step", "mu_product", "eta", "mu"})

_global_pre_hooks = OrderedDict()
_global_post_hooks = OrderedDict()
_hook_ids = iter(range(1 << 62))


class RemovableHandle:
    """Returned by the ``register_*_hook`` methods; ``remove()`` unregisters the hook."""

    def __init__(self, table):
        self._table = table
        self.id = next(_hook_ids)

    def remove(self):
        self._table.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_optimizer_step_pre_hook(hook):
    """A hook ``hook(optimizer, args, kwargs)`` run before every optimizer's ``step``."""
    h = RemovableHandle(_global_pre_hooks)
    _global_pre_hooks[h.id] = hook
    return h


def register_optimizer_step_post_hook(hook):
    """A hook ``hook(optimizer, args, kwargs)`` run after every optimizer's ``step``."""
    h = RemovableHandle(_global_post_hooks)
    _global_post_hooks[h.id] = hook
    return h


def _use_grad(step):
    """Run ``step`` without recording gradients (the update itself is not differentiated)."""

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        with fiamma.no_grad():
            return step(self, *args, **kwargs)

    return wrapper


def _with_hooks(step):
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        pre = getattr(self, "_step_pre_hooks", None)
        if pre is None:
            # a subclass that never ran Optimizer.__init__: a wrapper around another optimizer
            # (accelerate's AcceleratedOptimizer) whose step calls the inner one's, which runs
            # the hooks; as in PyTorch (which hooks steps in __init__), none run here
            return step(self, *args, **kwargs)
        for hook in chain(_global_pre_hooks.values(), pre.values()):
            res = hook(self, args, kwargs)
            if res is not None:
                if not (isinstance(res, tuple) and len(res) == 2):
                    raise RuntimeError(f"{type(self).__name__}.step: a step pre-hook must "
                                       f"return None or (args, kwargs), got {res!r}")
                args, kwargs = res
        if _profiler.enabled:  # PyTorch's event name: "Optimizer.step#SGD.step"
            name = type(self).__name__
            out = _profiler.call(f"Optimizer.step#{name}.step", step, self, *args, **kwargs)
        else:
            out = step(self, *args, **kwargs)
        for hook in chain(self._step_post_hooks.values(), _global_post_hooks.values()):
            hook(self, args, kwargs)
        return out

    wrapper._fiamma_hooked = True
    return wrapper


class Optimizer:
    """Base class of every optimizer.

    ``params`` is an iterable of tensors or of dicts (parameter groups, each with ``'params'``
    and any hyper-parameters that override ``defaults``).

    >>> import fiamma
    >>> from fiamma.optim import SGD
    >>> w = fiamma.ones(3)
    >>> opt = SGD([w], lr=0.1)
    >>> w.grad = fiamma.full((3,), 2.0)
    >>> opt.step()
    >>> w.tolist()
    [0.800000011920929, 0.800000011920929, 0.800000011920929]
    """

    def __init__(self, params, defaults):
        self.defaults = defaults
        self._step_pre_hooks = OrderedDict()
        self._step_post_hooks = OrderedDict()
        self._state_dict_pre_hooks = OrderedDict()
        self._state_dict_post_hooks = OrderedDict()
        self._load_state_dict_pre_hooks = OrderedDict()
        self._load_state_dict_post_hooks = OrderedDict()
        if isinstance(params, fiamma.Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {params.type()}")
        if isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        self.state = defaultdict(dict)
        self.param_groups = []
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_fiamma_hooked", False):
            cls.step = _with_hooks(step)

    # ---- groups --------------------------------------------------------------------------

    def add_param_group(self, param_group):
        """Add a group of parameters (a dict with ``'params'``) with its own hyper-parameters."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, fiamma.Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            params = list(params)
        for p in params:
            if not isinstance(p, fiamma.Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                f"{type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group)
        group["params"] = params
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError("parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            group.setdefault(name, default)
        if len({id(p) for p in params}) != len(params):
            import warnings

            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error", UserWarning, stacklevel=3)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self._check_group(group)
        self.param_groups.append(group)

    def _check_group(self, group):
        """Subclasses validate hyper-parameters of a new group here."""

    # ---- gradients -------------------------------------------------------------------------

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all parameters (to None by default, as PyTorch does)."""
        if _profiler.enabled:
            name = type(self).__name__
            return _profiler.call(f"Optimizer.zero_grad#{name}.zero_grad", self._zero_grad,
                                  set_to_none)
        self._zero_grad(set_to_none)

    def _zero_grad(self, set_to_none):
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if g.grad_fn is not None:
                        g = g.detach()
                        p.grad = g
                    g.zero_()

    def step(self, closure=None):
        raise NotImplementedError(f"{type(self).__name__} does not define step()")

    # ---- hooks ------------------------------------------------------------------------------

    def register_step_pre_hook(self, hook):
        """``hook(optimizer, args, kwargs) -> None | (args, kwargs)`` before each ``step``."""
        h = RemovableHandle(self._step_pre_hooks)
        self._step_pre_hooks[h.id] = hook
        return h

    def register_step_post_hook(self, hook):
        """``hook(optimizer, args, kwargs)`` after each ``step``."""
        h = RemovableHandle(self._step_post_hooks)
        self._step_post_hooks[h.id] = hook
        return h

    def register_state_dict_pre_hook(self, hook, prepend=False):
        return self._add_hook(self._state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        return self._add_hook(self._state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        return self._add_hook(self._load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        return self._add_hook(self._load_state_dict_post_hooks, hook, prepend)

    @staticmethod
    def _group_tensors_by_device_and_dtype(tensorlistlist, with_indices=False):
        """PyTorch's helper for multi-tensor (``foreach``) optimizer steps, which libraries call
        (timm's ADOPT): the parallel lists in ``tensorlistlist`` split by the device and dtype
        of the first list's tensors, ``{(device, dtype): ([list, ...], indices)}`` (entries of
        the other lists may be None; the indices are positions in the first list)."""
        groups = {}
        lists = [list(tl) for tl in tensorlistlist]
        if not lists:
            return groups
        for i, t in enumerate(lists[0]):
            key = (t.device, t.dtype) if t is not None else (None, None)
            g = groups.get(key)
            if g is None:
                g = groups[key] = ([[] for _ in lists], [])
            for dst, src in zip(g[0], lists):
                dst.append(src[i])
            g[1].append(i)
        return groups

    @staticmethod
    def _add_hook(table, hook, prepend):
        h = RemovableHandle(table)
        table[h.id] = hook
        if prepend:
            table.move_to_end(h.id, last=False)
        return h

    # ---- state dicts ------------------------------------------------------------------------

    def state_dict(self):
        """``{'state': {index: {...}}, 'param_groups': [{..., 'params': [index, ...]}]}``.

        Parameters are numbered in the order they appear across the groups; the dict refers
        to the live state tensors (copy them to snapshot)."""
        for hook in self._state_dict_pre_hooks.values():
            hook(self)
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            ids = []
            for p in group["params"]:
                if id(p) not in index:
                    index[id(p)] = len(index)
                ids.append(index[id(p)])
            packed["params"] = ids
            groups.append(packed)
        state = {index[id(p)]: s for p, s in self.state.items() if id(p) in index}
        sd = {"state": state, "param_groups": groups}
        for hook in self._state_dict_post_hooks.values():
            res = hook(self, sd)
            if res is not None:
                sd = res
        return sd

    def load_state_dict(self, state_dict):
        """Restore state and hyper-parameters saved by ``state_dict`` (fiamma's or PyTorch's).

        Floating-point state tensors are cast to their parameter's dtype. Scalar bookkeeping
        (``step``, NAdam's ``mu_product``, ASGD's ``eta`` and ``mu``) keeps its dtype, so a
        resumed run continues exactly as the uninterrupted one (PyTorch casts the last three
        to the parameter's dtype, which changes the trajectory slightly)."""
        state_dict = dict(state_dict)
        for hook in self._load_state_dict_pre_hooks.values():
            res = hook(self, state_dict)
            if res is not None:
                state_dict = res
        if "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError("load_state_dict: expected a dict with 'state' and 'param_groups', "
                             f"got keys {sorted(state_dict)}")
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups "
                             f"({len(saved_groups)} != {len(self.param_groups)})")
        for ours, theirs in zip(self.param_groups, saved_groups):
            if len(ours["params"]) != len(theirs["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 f"match the size of optimizer's group ({len(theirs['params'])} "
                                 f"!= {len(ours['params'])})")
        id_map = {}
        for ours, theirs in zip(self.param_groups, saved_groups):
            for p, i in zip(ours["params"], theirs["params"]):
                id_map[i] = p
        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            key = int(k) if isinstance(k, str) and k.isdigit() else k
            if key in id_map:
                p = id_map[key]
                state[p] = {name: self._cast_state(p, name, val) for name, val in v.items()}
            else:
                state[k] = v
        new_groups = []
        for ours, theirs in zip(self.param_groups, saved_groups):
            g = dict(theirs)
            g["params"] = ours["params"]
            for name, default in self.defaults.items():
                g.setdefault(name, default)  # keys added by a newer version of the optimizer
            new_groups.append(g)
        self.state = state
        self.param_groups = new_groups
        for hook in self._load_state_dict_post_hooks.values():
            hook(self)

    @staticmethod
    def _cast_state(param, name, value):
        if isinstance(value, fiamma.Tensor):
            if name in _SCALAR_STATE:
                return value.clone()
            if value.is_floating_point():
                return value.to(param.dtype).clone()
            return value.clone()
        if isinstance(value, dict):
            return {k: Optimizer._cast_state(param, k, v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(Optimizer._cast_state(param, name, v) for v in value)
        return value

    # ---- misc -------------------------------------------------------------------------------

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        for name in ("_step_pre_hooks", "_step_post_hooks", "_state_dict_pre_hooks",
                     "_state_dict_post_hooks", "_load_state_dict_pre_hooks",
                     "_load_state_dict_post_hooks"):
            self.__dict__.setdefault(name, OrderedDict())

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            if i:
                lines.append("")  # PyTorch's blank line between groups
            lines.append(f"Parameter Group {i}")
            for key in sorted(group):
                if key != "params":
                    lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)


# ---- helpers shared by the optimizers ------------------------------------------------------

def _grads(group, maximize=False, sparse=None):
    """(param, grad) pairs of a group's parameters that have a gradient. A sparse gradient
    (``Embedding(sparse=True)``) is refused with PyTorch's message unless ``sparse`` is True;
    a string is the optimizer's name for that message ("Adam does not support sparse
    gradients, ...")."""
    out = []
    for p in group["params"]:
        g = p.grad
        if g is None:
            continue
        if g.is_sparse and sparse is not True:
            name = sparse if isinstance(sparse, str) else "This optimizer"
            hint = ", please consider SparseAdam instead" if name == "Adam" else ""
            raise RuntimeError(f"{name} does not support sparse gradients{hint}")
        out.append((p, -g if maximize else g))
    return out


def _sparse_rows(p, g):
    """A sparse gradient of dense parameter ``p`` as rows: (the parameter viewed as
    (rows, -1) over its sparse dims, the coalesced gradient's row numbers, its values as
    (nnz, -1)). The optimizers update only those rows, as PyTorch's sparse paths do."""
    if not p.is_contiguous():
        raise RuntimeError("sparse gradient update: the parameter must be contiguous")
    g = g.coalesce()
    idx = g._indices()
    k = idx.shape[0]
    shape = tuple(p.shape)
    row = idx[0]
    for d in range(1, k):  # row-major number over the sparse dims
        row = row * shape[d] + idx[d]
    n = 1
    for s in shape[:k]:
        n *= s
    rows = p.view(n, p.numel() // n if n else 0)
    return rows, row, g._values().reshape(row.shape[0], rows.shape[1])


def _add_sparse_(dense, g, alpha=1.0):
    """``dense += alpha * g`` for a sparse COO ``g`` of ``dense``'s shape, in place."""
    rows, idx, vals = _sparse_rows(dense, g)
    rows.index_add_(0, idx, vals, alpha=alpha)
    return dense


def _step_count(state, p):
    """Increment and return the parameter's step (kept as a 0-d float32 tensor, as PyTorch's
    state dicts hold it)."""
    st = state.get("step")
    if st is None:
        st = state["step"] = fiamma.zeros((), dtype=fiamma.float32)
    st += 1
    return st.item()


def _check(cond, op, what, value):
    if not cond:
        raise ValueError(f"{op}: invalid {what}: {value}")


def _check_hyper(op, lr=None, eps=None, weight_decay=None, betas=None, momentum=None):
    if lr is not None:
        if isinstance(lr, fiamma.Tensor):
            if lr.numel() != 1:
                raise ValueError(f"{op}: Tensor lr must be 1-element")
            lr = lr.item()
        _check(not math.isnan(lr) and lr >= 0.0, op, "learning rate", lr)
    if eps is not None:
        _check(eps >= 0.0, op, "epsilon value", eps)
    if weight_decay is not None:
        _check(weight_decay >= 0.0, op, "weight_decay value", weight_decay)
    if betas is not None:
        _check(len(betas) == 2, op, "betas (expected two values)", betas)
        _check(0.0 <= betas[0] < 1.0, op, "beta parameter at index 0", betas[0])
        _check(0.0 <= betas[1] < 1.0, op, "beta parameter at index 1", betas[1])
    if momentum is not None:
        _check(momentum >= 0.0, op, "momentum value", momentum)


def _check_flags(op, foreach=None, fused=None, capturable=False, differentiable=False):
    """fused/foreach select implementations that give the same result; capturable (CUDA graphs)
    and differentiable (gradients through the step) are not supported yet."""
    if capturable:
        raise ValueError(f"{op}: capturable=True needs CUDA graphs, which fiamma does not have")
    if differentiable:
        raise ValueError(f"{op}: differentiable=True is not supported yet (the step runs "
                         "under no_grad)")
    if fused and foreach:
        raise RuntimeError(f"{op}: `fused` and `foreach` cannot be `True` together.")


def _lr(group):
    lr = group["lr"]
    return lr.item() if isinstance(lr, fiamma.Tensor) else lr


def _closure_loss(closure):
    if closure is None:
        return None
    with fiamma.enable_grad():
        return closure()


def _real(*tensors):
    """Real views (..., 2) of complex tensors: PyTorch updates a complex parameter as pairs of
    reals (its gradient and state likewise), so each real and imaginary part is one
    coordinate of the element-wise rules. The state itself stays complex, as PyTorch's."""
    return [fiamma.view_as_real(t) for t in tensors]


def _moments(state, p, *names):
    """The parameter's moment buffers, created as zeros on its first step."""
    out = []
    for n in names:
        buf = state.get(n)
        if buf is None:
            buf = state[n] = fiamma.zeros_like(p)
        out.append(buf)
    return out


# ---- swapping in other parameters and state ------------------------------------------------

_SWAP = "swap_in_optimizer_params_and_state"


def _swap_in_plan(optimizer, parameters, optim_state):
    """Validate a state_dict-shaped ``optim_state`` against the live optimizer; return its
    per-parameter state (keyed by packed id) and, per group, (live group, saved group, the
    parameters that replace the group's)."""
    if not optimizer.state:
        raise RuntimeError(f"{_SWAP} requires initialized optimizer state.")
    if not isinstance(optim_state, dict):
        raise RuntimeError(f"{_SWAP} requires a DCP-style optimizer state_dict, got "
                           f"{type(optim_state).__name__}.")
    state = optim_state.get("state")
    if not isinstance(state, dict):
        raise RuntimeError(f"{_SWAP} requires swapin_optim_state['state'] to be a dict mapping "
                           "packed parameter ids to per-param state dicts, got "
                           f"{type(state).__name__}.")
    if any(isinstance(k, fiamma.Tensor) for k in state):
        raise RuntimeError(f"{_SWAP} requires optimizer.state_dict()-style state keyed by "
                           "packed parameter ids.")
    if any(isinstance(k, int) and not isinstance(v, dict) for k, v in state.items()):
        raise RuntimeError(f"{_SWAP} requires per-parameter optimizer state entries to be "
                           "dictionaries.")
    groups = optim_state.get("param_groups")
    if not isinstance(groups, list):
        raise RuntimeError(f"{_SWAP} requires swapin_optim_state['param_groups'] to be a list "
                           f"of param-group dicts, got {type(groups).__name__}.")
    if len(groups) != len(optimizer.param_groups):
        raise RuntimeError("swapin_optim_state has a different number of parameter groups "
                           f"({len(groups)}) than the live optimizer "
                           f"({len(optimizer.param_groups)}).")
    flat = list(parameters.values())
    offset, seen, plan = 0, set(), []
    for i, (live, saved) in enumerate(zip(optimizer.param_groups, groups)):
        if not isinstance(saved, dict):
            raise RuntimeError(f"{_SWAP} requires each optimizer param group to be a dictionary.")
        ids = saved.get("params")
        if not isinstance(ids, list) or not all(isinstance(j, int) for j in ids):
            raise RuntimeError(f"{_SWAP} requires optimizer.state_dict()-style "
                               "param_groups[*]['params'] entries keyed by packed parameter ids.")
        if len(ids) != len(live["params"]):
            raise RuntimeError(f"swapin_optim_state param group {i} has a different number of "
                               f"params ({len(ids)}) than the live optimizer param group "
                               f"({len(live['params'])}).")
        only_saved = [k for k in saved if k not in live]
        only_live = [k for k in live if k not in saved]
        if only_saved or only_live:
            raise RuntimeError(f"{_SWAP} requires optimizer.state_dict()-style param group keys "
                               f"to exactly match the live optimizer group keys for group {i}. "
                               f"Keys only in swap-in: {only_saved}. Keys only in live: "
                               f"{only_live}.")
        seen.update(ids)
        if offset + len(ids) > len(flat):
            raise RuntimeError(f"{_SWAP} requires the explicit parameter state to match "
                               f"optimizer.param_groups ordering ({len(flat)} parameters given).")
        plan.append((live, saved, flat[offset:offset + len(ids)]))
        offset += len(ids)
    extra = [k for k in state if k not in seen]
    if extra:
        raise RuntimeError(f"{_SWAP} requires swapin_optim_state['state'] to be keyed only by "
                           f"packed parameter ids from param_groups[*]['params']; got extra "
                           f"keys {extra!r}.")
    return state, plan


@contextlib.contextmanager
def swap_in_optimizer_params_and_state(optimizer, swapin_parameters, swapin_optim_state):
    """Run the optimizer on other parameters and state for the duration of a ``with`` block
    (``torch.optim.swap_in_optimizer_params_and_state``).

    ``swapin_parameters`` is a dict of tensors in the order of the optimizer's parameters
    (``model.named_parameters()`` order); ``swapin_optim_state`` is shaped like
    ``optimizer.state_dict()`` (state keyed by packed ids, the groups' hyper-parameters with
    exactly the live groups' keys). Inside the block ``param_groups`` hold the given tensors
    and hyper-parameters and ``state`` maps each given tensor to a shallow copy of its saved
    state, so in-place updates by ``step()`` reach the given state tensors, while new entries
    stay local. On exit the live groups and state are restored. The optimizer's state must
    already be initialised (after a step or ``load_state_dict``).
    """
    state, plan = _swap_in_plan(optimizer, swapin_parameters, swapin_optim_state)
    live_state = optimizer.state
    snapshots = [dict(g) for g in optimizer.param_groups]
    try:
        swapped = defaultdict(dict)
        for live, saved, params in plan:
            live["params"] = params
            for k, v in saved.items():
                if k != "params":
                    live[k] = v
            for p, j in zip(params, saved["params"]):
                swapped[p] = dict(state.get(j, {}))
        optimizer.state = swapped
        yield
    finally:
        for group, snap in zip(optimizer.param_groups, snapshots):
            group.clear()
            group.update(snap)
        optimizer.state = live_state
