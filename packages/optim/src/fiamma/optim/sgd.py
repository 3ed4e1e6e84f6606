"""Stochastic gradient descent with momentum (``torch.optim.SGD``)."""

import fiamma
from fiamma import fused
from fiamma.optim.optimizer import (
    Optimizer,
    _add_sparse_,
    _check_flags,
    _check_hyper,
    _closure_loss,
    _grads,
    _lr,
    _use_grad,
)

__all__ = ["SGD"]


class SGD(Optimizer):
    """SGD with optional momentum, dampening, Nesterov momentum and weight decay.

    Update (PyTorch's): ``g = grad + weight_decay * p``; with momentum ``b = momentum * b +
    (1 - dampening) * g`` (``b = g`` on the first step) and ``g = g + momentum * b`` (Nesterov)
    or ``g = b``; then ``p -= lr * g``. ``maximize`` ascends instead. A sparse gradient
    (``Embedding(sparse=True)``) updates only its rows (without momentum); weight decay is
    refused for it, as in PyTorch.

    >>> import fiamma
    >>> w = fiamma.tensor([1.0, 2.0])
    >>> opt = SGD([w], lr=0.5, momentum=0.9)
    >>> w.grad = fiamma.tensor([1.0, 1.0]); opt.step(); w.tolist()
    [0.5, 1.5]
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 *, maximize=False, foreach=None, differentiable=False, fused=None):
        _check_hyper("SGD", lr=lr, weight_decay=weight_decay, momentum=momentum)
        _check_flags("SGD", foreach, fused, False, differentiable)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    def _check_group(self, group):
        _check_hyper("SGD", lr=group["lr"], weight_decay=group["weight_decay"],
                     momentum=group["momentum"])

    @_use_grad
    def step(self, closure=None):
        """One update of every parameter that has a gradient; ``closure`` re-evaluates the loss
        (run with gradients enabled) and its value is returned."""
        loss = _closure_loss(closure)
        for group in self.param_groups:
            lr, mom, damp = _lr(group), group["momentum"], group["dampening"]
            wd, nesterov = group["weight_decay"], group["nesterov"]
            if group["fused"] is not False and self._fused_step(group, lr, mom, damp, wd,
                                                                nesterov):
                continue
            for p, g in _grads(group, group["maximize"], sparse=True):
                if g.is_sparse:
                    self._sparse_update(p, g, lr, mom, damp, wd, nesterov)
                    continue
                if wd:
                    g = g.add(p, alpha=wd)
                if mom:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = state["momentum_buffer"] = g.clone().detach()
                    else:
                        buf.mul_(mom).add_(g, alpha=1 - damp)
                    g = g.add(buf, alpha=mom) if nesterov else buf
                p.add_(g, alpha=-lr)
        return loss

    def _sparse_update(self, p, g, lr, mom, damp, wd, nesterov):
        """A sparse gradient (Embedding(sparse=True)), as PyTorch: weight decay is refused;
        without momentum only the gradient's rows change. The momentum buffer is kept dense
        (PyTorch keeps a sparse one that grows by the gradient's entries every step: the same
        values)."""
        if wd:
            raise RuntimeError("SGD: weight_decay with a sparse gradient: add(sparse, dense) is "
                               "not supported. Use add(dense, sparse) instead.")
        if mom:
            state = self.state[p]
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = g.to_dense()
            else:
                _add_sparse_(buf.mul_(mom), g, 1 - damp)
            if nesterov:
                _add_sparse_(p, g, -lr)
                p.add_(buf, alpha=-lr * mom)
            else:
                p.add_(buf, alpha=-lr)
        else:
            _add_sparse_(p, g, -lr)

    def _fused_step(self, group, lr, mom, damp, wd, nesterov):
        """The group in one or two C calls (fiamma.fused.sgd_: parameters whose momentum buffer
        is new, then the others); False to fall back to the reference loop."""
        pairs = [(p, g) for p in group["params"] if (g := p.grad) is not None]
        if not pairs or not fused.supports([t for pg in pairs for t in pg]):
            return not pairs
        if not mom:
            fused.sgd_([p for p, _ in pairs], [g for _, g in pairs], lr=lr,
                       weight_decay=wd, maximize=group["maximize"])
            return True
        fresh, old = ([], [], []), ([], [], [])
        for p, g in pairs:
            state = self.state[p]
            buf = state.get("momentum_buffer")
            dest = old
            if buf is None:
                buf = state["momentum_buffer"] = fiamma.empty_like(p)
                dest = fresh
            dest[0].append(p)
            dest[1].append(g)
            dest[2].append(buf)
        for (ps, gs, bs), first in ((fresh, True), (old, False)):
            if ps:
                fused.sgd_(ps, gs, bs, lr=lr, momentum=mom, dampening=damp, weight_decay=wd,
                           nesterov=nesterov, maximize=group["maximize"], first=first)
        return True
