"""Fused kernels that other fiamma packages build on (public, stable API).

Each function updates a whole list of tensors in one backend call (on the CPU one C call, one
pass over each tensor's memory), on whatever device the tensors are (all on one). They are the
fast paths of ``fiamma.optim``; the arithmetic matches the op-by-op reference update to
rounding (fiamma-optim tests the equivalence).

>>> import fiamma
>>> from fiamma import fused
>>> p, g = fiamma.ones(4), fiamma.full((4,), 0.5)
>>> fused.sgd_([p], [g], lr=0.1)
>>> p.tolist()
[0.949999988079071, 0.949999988079071, 0.949999988079071, 0.949999988079071]
"""

from fiamma._backend import check, codes as K
from fiamma._dtype import float32, float64
from fiamma._tensor import Tensor

__all__ = ["adam_", "sgd_", "supports"]


def supports(tensors):
    """Whether the fused kernels can update these tensors: all float32 or all float64,
    contiguous, of one dtype, on one device."""
    dt = dev = None
    for t in tensors:
        if not isinstance(t, Tensor) or not t._contig:
            return False
        d = t._storage.device
        if dev is None:
            dev = d
        elif d is not dev and d != dev:
            return False
        if t._dtype is not float32 and t._dtype is not float64:
            return False
        if dt is None:
            dt = t._dtype
        elif t._dtype is not dt:
            return False
    return True


def _checked(op, name, tensors, ref, allow_none=False):
    """The tensors, each checked against its parameter's layout."""
    if len(tensors) != len(ref):
        raise ValueError(f"{op}: expected {len(ref)} {name} tensors, got {len(tensors)}")
    for i, (t, p) in enumerate(zip(tensors, ref)):
        if t is None and allow_none:
            continue
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name}[{i}] must be a Tensor, got {type(t).__name__}")
        if t._dtype is not p._dtype:
            raise TypeError(f"{op}: {name}[{i}] has dtype {t._dtype}, expected {p._dtype}")
        if t._shape != p._shape:
            raise ValueError(f"{op}: {name}[{i}] has shape {list(t._shape)}, expected "
                             f"{list(p._shape)}")
        if not t._contig:
            raise ValueError(f"{op}: {name}[{i}] must be a contiguous tensor")
        d = t._storage.device
        if d is not p._storage.device and d != p._storage.device:
            raise RuntimeError(f"{op}: {name}[{i}] is on {d}, its parameter on "
                               f"{p._storage.device}")
    return tensors


def _params(op, params):
    params = list(params)
    if not supports(params):
        raise TypeError(f"{op}: parameters must be contiguous tensors on one device, all float32 "
                        "or all float64")
    return params


def adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs=None, *, steps, lr, beta1,
          beta2, eps, weight_decay=0.0, amsgrad=False, maximize=False, decoupled=False):
    """In-place Adam/AdamW update of every parameter (``steps``: each one's step count, already
    incremented for this update). ``decoupled`` applies AdamW's weight decay."""
    op = "fused.adam_"
    params = _params(op, params)
    if not params:
        return
    gp = _checked(op, "grads", list(grads), params)
    mp = _checked(op, "exp_avgs", list(exp_avgs), params)
    vp = _checked(op, "exp_avg_sqs", list(exp_avg_sqs), params)
    vmp = _checked(op, "max_exp_avg_sqs", list(max_exp_avg_sqs), params) if amsgrad else None
    steps = list(steps)
    if len(steps) != len(params):
        raise ValueError(f"{op}: expected {len(params)} step counts, got {len(steps)}")
    st = [float(s) for s in steps]
    flags = ((K.OPT_MAXIMIZE if maximize else 0) | (K.OPT_AMSGRAD if amsgrad else 0)
             | (K.OPT_DECOUPLED if decoupled else 0))
    check(params[0]._storage.backend.adam_step(params, gp, mp, vp, vmp, st, float(lr),
                                               float(beta1), float(beta2), float(eps),
                                               float(weight_decay), flags), op)
    for t in params:
        t._bump()
    for t in exp_avgs:
        t._bump()
    for t in exp_avg_sqs:
        t._bump()


def sgd_(params, grads, momentum_buffers=None, *, lr, momentum=0.0, dampening=0.0,
         weight_decay=0.0, nesterov=False, maximize=False, first=False):
    """In-place SGD update; ``first``: the momentum buffers are set to the gradient (the first
    step of a fresh buffer) instead of being decayed."""
    op = "fused.sgd_"
    params = _params(op, params)
    if not params:
        return
    gp = _checked(op, "grads", list(grads), params)
    bp = None
    if momentum != 0:
        if momentum_buffers is None:
            raise ValueError(f"{op}: momentum {momentum} needs momentum_buffers")
        bp = _checked(op, "momentum_buffers", list(momentum_buffers), params)
    flags = ((K.OPT_MAXIMIZE if maximize else 0) | (K.OPT_NESTEROV if nesterov else 0)
             | (K.OPT_FIRST if first else 0))
    check(params[0]._storage.backend.sgd_step(params, gp, bp, float(lr), float(momentum),
                                              float(dampening), float(weight_decay), flags), op)
    for t in params:
        t._bump()
    if momentum != 0:
        for t in momentum_buffers:
            t._bump()
