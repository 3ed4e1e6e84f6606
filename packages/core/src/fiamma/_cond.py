"""``fiamma.cond``: a branch on a tensor that a traced or exported graph can hold (PyTorch's
``torch.cond``; also ``functorch.experimental.control_flow.cond``)."""

import fiamma
from fiamma import autograd_hook

__all__ = ["cond"]


class UserError(RuntimeError):
    """A cond or fiamma.export call that can't run as asked (``fiamma.export.UserError``;
    PyTorch raises ``torch._dynamo.exc.UserError``)."""


def _leaves(x, out):
    if isinstance(x, fiamma.Tensor):
        out.append(x)
    elif isinstance(x, (tuple, list)):
        for v in x:
            _leaves(v, out)
    elif isinstance(x, dict):
        for v in x.values():
            _leaves(v, out)
    else:
        raise UserError(f"cond: the branches must return tensors (in tuples, lists, dicts), "
                        f"got a {type(x).__name__}")


def _rebuild(x, it):
    if isinstance(x, fiamma.Tensor):
        return next(it)
    if isinstance(x, tuple):
        return tuple(_rebuild(v, it) for v in x)
    if isinstance(x, list):
        return [_rebuild(v, it) for v in x]
    return {k: _rebuild(v, it) for k, v in x.items()}


def _traced(t):
    tr = autograd_hook.get_trace_hook()
    return tr is not None and id(t) in getattr(tr, "vals", {})


def cond(pred, true_fn, false_fn, operands=()):
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``.

    ``pred`` is a bool or a one-element tensor. Eagerly it runs one branch. While
    ``fiamma.export.export`` (or ``fiamma.jit.trace``) records a model and ``pred`` is computed
    from its inputs, both branches run and each output is ``fiamma.where(pred, t, f)``, so the
    graph keeps the choice (the branches must be free of side effects and return tensors of
    the same shapes and dtypes, as PyTorch's ``torch.cond`` requires).

    >>> import fiamma
    >>> x = fiamma.tensor([1.0, -2.0])
    >>> fiamma.cond(x.sum() > 0, lambda v: v + 1, lambda v: v - 1, (x,)).tolist()
    [0.0, -3.0]
    """
    if not callable(true_fn) or not callable(false_fn):
        raise UserError("cond: true_fn and false_fn must be callables")
    if not isinstance(operands, (tuple, list)):
        raise UserError(f"cond: operands must be a tuple or list, got "
                        f"{type(operands).__name__}")
    if isinstance(pred, fiamma.Tensor):
        if pred.numel() != 1:
            raise UserError(f"cond: pred must be a one-element tensor, got shape "
                            f"{list(pred.shape)}")
        if _traced(pred):
            t_out = true_fn(*operands)
            f_out = false_fn(*operands)
            tl, fl = [], []
            _leaves(t_out, tl)
            _leaves(f_out, fl)
            if len(tl) != len(fl):
                raise UserError(f"cond: the branches return {len(tl)} and {len(fl)} tensors")
            for i, (a, b) in enumerate(zip(tl, fl)):
                if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
                    raise UserError(f"cond: output {i} of the branches differs: "
                                    f"{list(a.shape)} {a.dtype} vs {list(b.shape)} {b.dtype}")
            p = pred.reshape(()).to(fiamma.bool)
            return _rebuild(t_out, iter(fiamma.where(p, a, b) for a, b in zip(tl, fl)))
        pred = bool(pred)
    return true_fn(*operands) if pred else false_fn(*operands)
